"""How much memory this process may really still allocate, on the host and the GPU.

``/proc/meminfo``'s MemAvailable is the machine's, not the process's: inside a
memory-limited container (cgroup v2 ``memory.max``, cgroup v1
``memory.limit_in_bytes``) or under ``ulimit -v`` (``RLIMIT_AS``, which counts
*virtual* size) an allocation fails long before MemAvailable runs out. ``host_memory``
takes the smallest of every limit that applies and says which one binds.

On the GPU the usable memory is what the driver reports free plus what CuPy's own pool
holds in free blocks (they are ours to reuse); ``release_gpu_pool`` gives those blocks
back to the driver so another process, or the next bake, sees them.

Everything reads real files; the cgroup root and the ``/proc`` files are parameters so
tests can point them at crafted trees.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

UNLIMITED_V1 = 1 << 62  # cgroup v1 reports "no limit" as a page-rounded 2⁶³ − 1


@dataclass(frozen=True)
class HostMemory:
    total: int  # physical memory (or the tightest limit, whichever is smaller)
    available: int  # what this process may still allocate
    limited_by: str  # which limit gives *available*: "MemAvailable", "cgroup v2 memory.max", ...


def _read_int(path: Path):
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _read_stat(path: Path, key: str) -> int:
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    return 0


def meminfo(path="/proc/meminfo") -> tuple[int, int] | None:
    """(MemTotal, MemAvailable) in bytes, or None where the file is missing."""
    try:
        fields = {}
        with open(path, encoding="ascii") as f:
            for line in f:
                k, v = line.split(":", 1)
                fields[k] = int(v.split()[0]) * 1024
        return fields["MemTotal"], fields.get("MemAvailable", fields["MemFree"])
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _own_cgroups(proc_cgroup: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 memory path) of this process from /proc/self/cgroup."""
    v2 = v1 = None
    try:
        with open(proc_cgroup, encoding="ascii") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                hid, controllers, path = parts
                if hid == "0" and controllers == "":
                    v2 = path
                elif "memory" in controllers.split(","):
                    v1 = path
    except OSError:
        pass
    return v2, v1


def _ancestors(root: Path, rel: str | None):
    """The folder of *rel* under *root* and each parent up to *root* (limits of a parent
    bind its children too). If *rel* is not visible here (a cgroup namespace), the root."""
    root = Path(root)
    rel = (rel or "/").strip("/")
    here = root / rel if rel else root
    if not here.is_dir():
        here = root
    out = [here]
    while here != root and root in here.parents:
        here = here.parent
        out.append(here)
    return out


def cgroup_headroom(root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup") -> tuple[int, str] | None:
    """(bytes the process's cgroup may still charge, which file says so), or None when no
    cgroup limits memory. Page cache that can be dropped (``inactive_file``) does not
    count as used. Reads cgroup v2 (``memory.max`` − ``memory.current``) and v1
    (``memory/memory.limit_in_bytes`` − ``memory.usage_in_bytes``), this group and its
    parents."""
    root = Path(root)
    v2, v1 = _own_cgroups(proc_cgroup)
    best = None
    if (root / "cgroup.controllers").exists() or (v2 is not None and v1 is None):
        for folder in _ancestors(root, v2):
            limit = _read_int(folder / "memory.max")
            if limit is None:
                continue
            used = _read_int(folder / "memory.current") or 0
            used -= _read_stat(folder / "memory.stat", "inactive_file")
            room = max(0, limit - max(used, 0))
            if best is None or room < best[0]:
                best = (room, f"cgroup v2 memory.max ({folder})")
    v1_root = root / "memory"
    if v1_root.is_dir():
        for folder in _ancestors(v1_root, v1):
            limit = _read_int(folder / "memory.limit_in_bytes")
            if limit is None or limit >= UNLIMITED_V1:
                continue
            used = _read_int(folder / "memory.usage_in_bytes") or 0
            used -= _read_stat(folder / "memory.stat", "total_inactive_file")
            room = max(0, limit - max(used, 0))
            if best is None or room < best[0]:
                best = (room, f"cgroup v1 memory.limit_in_bytes ({folder})")
    return best


def _status_bytes(key: str, status="/proc/self/status") -> int | None:
    try:
        with open(status, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def rlimit_headroom(status="/proc/self/status") -> tuple[int, str] | None:
    """Room left under ``RLIMIT_AS`` (against VmSize: it counts address space, not pages
    in use) and ``RLIMIT_DATA`` (against VmData), or None when neither is set."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    best = None
    for name, key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        soft, _ = resource.getrlimit(getattr(resource, name))
        if soft == resource.RLIM_INFINITY:
            continue
        used = _status_bytes(key, status)
        if used is None:
            continue
        room = max(0, soft - used)
        if best is None or room < best[0]:
            best = (room, f"{name} (ulimit)")
    return best


def host_memory(cgroup_root="/sys/fs/cgroup", proc="/proc") -> HostMemory:
    """The memory this process may still allocate: the smallest of MemAvailable, the
    cgroup's headroom and the rlimits' headroom."""
    proc = Path(proc)
    info = meminfo(proc / "meminfo")
    if info is None:
        total, avail = _fallback_host_memory()
    else:
        total, avail = info
    candidates = [(avail, "MemAvailable")]
    cg = cgroup_headroom(cgroup_root, proc / "self" / "cgroup")
    if cg is not None:
        candidates.append(cg)
    rl = rlimit_headroom(proc / "self" / "status")
    if rl is not None:
        candidates.append(rl)
    available, why = min(candidates, key=lambda c: c[0])
    return HostMemory(int(total), int(available), why)


def _fallback_host_memory() -> tuple[int, int]:
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_PHYS_PAGES") * page, os.sysconf("SC_AVPHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):
        pass
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import ctypes

        class MEMORYSTATUSEX(ctypes.Structure):
            _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong),
                        ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                        ("ullTotalPageFile", ctypes.c_ulonglong), ("ullAvailPageFile", ctypes.c_ulonglong),
                        ("ullTotalVirtual", ctypes.c_ulonglong), ("ullAvailVirtual", ctypes.c_ulonglong),
                        ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]

        st = MEMORYSTATUSEX()
        st.dwLength = ctypes.sizeof(MEMORYSTATUSEX)
        ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(st))
        return int(st.ullTotalPhys), int(st.ullAvailPhys)
    raise OSError("cannot read the host's memory size on this platform")


# --------------------------------------------------------------------------- GPU

def gpu_pool_held(cp) -> int:
    """Bytes CuPy's default pool holds in free blocks (ours to reuse)."""
    return int(cp.get_default_memory_pool().free_bytes())


def release_gpu_pool() -> int:
    """Give CuPy's free pool blocks (device and pinned host, the level set's pinned blocks no array
    holds) back to the driver and drop
    the cached pressure solvers (dense and sparse), whose buffers would otherwise stay reserved. A no-op
    (returning 0) when CuPy was never imported. Returns the device bytes released."""
    for name in ("flip.pressure_gpu", "flip.sparse_pressure_gpu"):  # dense and sparse solvers
        solvers = sys.modules.get(f"{__package__}.{name}")  # never imported: nothing cached
        if solvers is not None:
            solvers.release_gpu_solvers()
    cp = sys.modules.get("cupy")
    if cp is None:
        return 0
    try:
        pool = cp.get_default_memory_pool()
        before = int(pool.total_bytes())
        import gc

        gc.collect()  # arrays in reference cycles (a failed job's frames) free their blocks
        pool.free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
        copies = sys.modules.get(f"{__package__}.flip.surface_host_copy")  # the level set's pinned blocks
        if copies is not None:
            copies.release_free()
        return max(0, before - int(pool.total_bytes()))
    except Exception:  # noqa: BLE001 - no device, a broken driver: nothing to release
        return 0


def trim_gpu_pool(keep: float = 1.0, floor: int = 256 << 20) -> int:
    """Between the frames of a bake: give CuPy's free pool blocks back to the driver where
    they outgrow the bytes in use (more than *keep* × in use and *floor*). A liquid that
    spreads allocates larger arrays frame after frame, and the pool kept every smaller
    block it freed: the 100M river held 74.8 GiB for 16.2 GiB in use by its 31st frame
    (H200, ``bench/memory_liquid.py``), which a second bake or Blender on the GPU could not
    use. A no-op (0) without CuPy. Returns the device bytes released."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return 0
    try:
        pool = cp.get_default_memory_pool()
        free, used = int(pool.free_bytes()), int(pool.used_bytes())
        if free <= max(keep * used, floor):
            return 0
        before = int(pool.total_bytes())
        pool.free_all_blocks()
        return max(0, before - int(pool.total_bytes()))
    except Exception:  # noqa: BLE001 - no device, a broken driver: nothing to trim
        return 0


# --------------------------------------------------------------------------- search

def trim_heap() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``): a stage's
    many mid-sized temporaries (below glibc's mmap threshold, which grows to 32 MiB) stay
    in the process's RSS after they are freed, and the next stage's large arrays, which
    are mapped afresh, would stack on them (measured: the CPU voxelization at 384³ left
    268 MiB of RSS holding a 7 MiB bit grid; 8 MiB after the trim). False where there is
    no glibc (then nothing is done)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0) or True)
    except (OSError, AttributeError):
        return False


def largest_that_fits(need, usable: int, lo: int, hi: int):
    """The largest integer x in [lo, hi] with ``need(x) <= usable`` (``need`` grows with
    x), or None when not even *lo* fits. Bisection on the same estimator the guard uses,
    so the size it names passes the guard and the next size up does not. Every guard
    (voxelize, snow, liquid) names its "largest that fits" through this."""
    lo, hi = int(lo), int(hi)
    if hi < lo or need(lo) > usable:
        return None
    if need(hi) <= usable:
        return hi
    good, bad = lo, hi
    while bad - good > 1:
        mid = (good + bad) // 2
        if need(mid) <= usable:
            good = mid
        else:
            bad = mid
    return good
