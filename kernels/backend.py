"""Array backend: CuPy on a CUDA device that really answers, otherwise NumPy.

The choice is made once per process (``get_backend``) and can be forced by the
``VOXFX_BACKEND`` environment variable (``cpu`` | ``gpu`` | ``auto``) or by the add-on
preference (``set_preference``); the environment variable wins, so a pipeline can pin a
backend without touching the .blend. Results leave kernels as NumPy arrays
(``to_numpy``). CuPy's kernel cache folder is chosen (and checked) before the first
compile: ``set_kernel_cache`` / ``kernels.kernel_cache``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import kernel_cache, memory
from .errors import VoxFXError

ENV_VAR = "VOXFX_BACKEND"
CHOICES = ("auto", "cpu", "gpu")
CUDA_DIR = Path(__file__).resolve().parent / "cuda"
CUDA_INCLUDE = CUDA_DIR / "include"  # shared device helpers (*.cuh), on every module's include path

# Leave this much of the free memory unclaimed: allocators fragment, drivers and
# Blender itself need headroom.
SAFETY_FRACTION = 0.9


class BackendError(VoxFXError, RuntimeError):
    """The requested backend cannot be used."""


class DeviceMemoryError(BackendError, MemoryError):
    """A planned allocation would not fit in the free memory of the device."""


@dataclass(frozen=True)
class DeviceInfo:
    backend: str  # "gpu" or "cpu"
    name: str
    total_bytes: int
    free_bytes: int
    versions: dict = field(default_factory=dict)
    limited_by: str = ""  # which limit gives free_bytes (host: MemAvailable, cgroup, RLIMIT_AS)

    def summary(self) -> str:
        vers = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        return (
            f"{self.backend.upper()}: {self.name}, "
            f"{format_bytes(self.free_bytes)} free of {format_bytes(self.total_bytes)}"
            + (f" ({vers})" if vers else "")
        )


def limit_note(info: DeviceInfo) -> str:
    """", limited by …" when a limit other than the machine's free memory binds."""
    return f", limited by {info.limited_by}" if info.limited_by and info.limited_by != "MemAvailable" else ""


def usable_bytes(xp=None) -> int:
    """What a guard may plan to use where arrays of *xp* live: the free memory (the real
    limit, see ``kernels.memory``) less the safety margin."""
    info = _CPU.device_info() if xp is np else get_backend().device_info()
    return int(info.free_bytes * SAFETY_FRACTION)


def format_bytes(n: int) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


class Backend:
    """One backend: its array module and what it knows about its device."""

    def __init__(self, name: str, xp, reason: str):
        self.name = name  # "gpu" | "cpu"
        self.xp = xp
        self.reason = reason  # one line: why this backend was chosen

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    def to_numpy(self, a):
        return to_numpy(a)

    def device_info(self) -> DeviceInfo:
        versions = {"numpy": np.__version__}
        if self.is_gpu:
            cp = self.xp
            dev = cp.cuda.Device()
            props = _device_properties(dev.id)
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else str(name)
            free, total = cp.cuda.runtime.memGetInfo()
            # Blocks CuPy's pool holds but does not use are free for our purposes.
            free += cp.get_default_memory_pool().free_bytes()
            versions["cupy"] = cp.__version__
            versions["cuda runtime"] = _cuda_version(cp.cuda.runtime.runtimeGetVersion())
            versions["driver"] = _cuda_version(cp.cuda.runtime.driverGetVersion())
            versions["compute capability"] = f"{props['major']}.{props['minor']}"
            return DeviceInfo("gpu", name, int(total), int(free), versions)
        host = memory.host_memory()
        return DeviceInfo("cpu", _cpu_name(), host.total, host.available, versions, host.limited_by)

    def free_bytes(self) -> int:
        return self.device_info().free_bytes

    def ensure_fits(self, nbytes: int, what: str) -> None:
        """Raise ``DeviceMemoryError`` naming *what* if *nbytes* would not fit."""
        info = self.device_info()
        usable = int(info.free_bytes * SAFETY_FRACTION)
        if int(nbytes) > usable:
            raise DeviceMemoryError(
                f"{what} needs {format_bytes(nbytes)} but only {format_bytes(info.free_bytes)} "
                f"is free on {info.name} ({info.backend.upper()}{limit_note(info)}); reduce the resolution "
                f"or free memory"
            )


# --------------------------------------------------------------------------- choice

_CPU = Backend("cpu", np, "NumPy arrays")

_lock = threading.Lock()
_backend: Backend | None = None
_preference = "auto"
_announced: set[str] = set()


def set_preference(choice: str) -> None:
    """Set the add-on preference (auto/cpu/gpu); the next ``get_backend`` re-chooses."""
    global _preference, _backend
    choice = (choice or "auto").lower()
    if choice not in CHOICES:
        raise ValueError(f"backend preference must be one of {CHOICES}, not {choice!r}")
    with _lock:
        if choice != _preference:
            _preference = choice
            _backend = None


def requested() -> tuple[str, str]:
    """(choice, source): the environment variable wins over the preference."""
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env:
        if env not in CHOICES:
            raise BackendError(f"{ENV_VAR}={env!r} is not one of {', '.join(CHOICES)}")
        return env, f"{ENV_VAR}={env}"
    return _preference, f"preference '{_preference}'"


def get_backend(refresh: bool = False) -> Backend:
    global _backend
    with _lock:
        if _backend is None or refresh:
            _backend = _choose()
        return _backend


def reset() -> None:
    """Forget the cached choice (tests, preference changes, CuPy just installed)."""
    global _backend
    with _lock:
        _backend = None


def set_kernel_cache(preferred=None) -> kernel_cache.KernelCache:
    """Point CuPy's kernel cache at *preferred* (the add-on passes a folder in Blender's
    user folder; ``VOXFX_KERNEL_CACHE`` wins), or at a temporary folder with a warning
    when it is not writable. Takes effect at the next compile."""
    return kernel_cache.configure(preferred)


def _choose() -> Backend:
    choice, source = requested()
    if choice == "cpu":
        return _announce(Backend("cpu", np, f"CPU backend (NumPy) by {source}"))
    if importlib.util.find_spec("cupy") is not None:  # finds without importing
        kernel_cache.current()  # before CuPy compiles its first kernel (the probe does)
    cp, why_not = probe_cuda()
    if cp is not None:
        return _announce(Backend("gpu", cp, f"GPU backend (CuPy {cp.__version__}) by {source}"))
    if choice == "gpu":
        raise BackendError(f"GPU backend requested by {source} but CUDA is not usable: {why_not}")
    return _announce(Backend("cpu", np, f"CPU backend (NumPy): CUDA not usable ({why_not})"))


def _announce(b: Backend) -> Backend:
    if b.reason not in _announced:  # one clear message per distinct choice
        _announced.add(b.reason)
        print(f"VoxFX: {b.reason}", file=sys.stderr)
    return b


def probe_cuda():
    """Return (cupy, None) if a CUDA device really computes, else (None, reason).

    Catches everything: without a driver ``cupy.cuda.is_available()`` itself raises, and
    a broken install can fail at import, at the first allocation or at the first launch.
    The reason says which: CuPy missing, CuPy present but failing to import (a
    PermissionError is not "not installed"), or the device or the kernel cache failing.
    """
    try:
        import cupy as cp
    except ModuleNotFoundError as e:
        if e.name == "cupy":
            return None, "CuPy is not installed"
        return None, f"CuPy is installed but incomplete ({_one_line(e)})"
    except Exception as e:  # noqa: BLE001 - any import failure means "no GPU", with its reason
        return None, f"CuPy is installed but cannot be imported ({_one_line(e)})"
    for attempt in (1, 2):
        try:
            if cp.cuda.runtime.getDeviceCount() < 1:
                return None, "no CUDA device found"
            # A real launch: catches missing NVRTC, incompatible drivers and the like.
            x = cp.arange(1, 5, dtype=cp.float32)
            if float((x * x).sum()) != 30.0:
                return None, "a test computation on the GPU returned a wrong result"
            return cp, None
        except Exception as e:  # noqa: BLE001
            if attempt == 1 and kernel_cache.is_cache_error(e):
                kernel_cache.fall_back(f"CuPy could not write its kernel cache ({_one_line(e)})")
                continue
            if kernel_cache.is_cache_error(e):
                return None, f"CuPy cannot use its kernel cache folder ({_one_line(e)})"
            return None, _one_line(e)
    return None, "unreachable"  # pragma: no cover


def _one_line(e: BaseException) -> str:
    msg = str(e).splitlines()[0].strip() if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


# --------------------------------------------------------------------------- shortcuts

def xp():
    """The array module of the current backend (numpy or cupy)."""
    return get_backend().xp


def array_module(a):
    """numpy or cupy, whichever owns *a* (works without CuPy installed)."""
    mod = type(a).__module__
    if mod.startswith("cupy"):
        import cupy

        return cupy
    return np


def to_numpy(a):
    """A NumPy array from a NumPy or CuPy array (or anything array-like)."""
    if type(a).__module__.startswith("cupy"):
        return a.get()
    return np.asarray(a)


def to_host(a):
    """Like ``to_numpy``, copying device arrays through pinned (page-locked) memory from
    CuPy's pinned pool: about twice the bandwidth of a pageable copy for large grids."""
    if not type(a).__module__.startswith("cupy"):
        return np.asarray(a)
    import cupy as cp

    if a.nbytes < (1 << 20):
        return a.get()
    mem = cp.cuda.alloc_pinned_memory(a.nbytes)
    out = np.frombuffer(mem, a.dtype, a.size).reshape(a.shape)  # keeps the pinned block alive
    a.get(out=out)
    return out


def device_info() -> DeviceInfo:
    return get_backend().device_info()


def ensure_fits(nbytes: int, what: str, xp=None) -> None:
    """Raise ``DeviceMemoryError`` if *nbytes* for *what* would not fit where it goes:
    on the device of array module *xp* (default: the current backend's)."""
    if xp is np:
        _CPU.ensure_fits(nbytes, what)
    else:
        get_backend().ensure_fits(nbytes, what)


# --------------------------------------------------------------------------- CUDA sources

_modules: dict = {}


def headers_digest(include_dir: Path = CUDA_INCLUDE) -> str:
    """SHA-256 over the names and bytes of every shared header (``*.cuh``) in *include_dir*.

    CuPy keys its on-disk kernel cache on the source text and the options, not on the
    files that source ``#include``s: after an update that changes only a header, a cached
    binary built from the old header would be loaded. ``cuda_source`` therefore ends every
    module with this digest, so a changed header is a changed key."""
    h = hashlib.sha256()
    for path in sorted(Path(include_dir).glob("*.cuh")):
        h.update(path.name.encode("utf-8") + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def cuda_source(filename: str) -> str:
    """The text compiled for ``kernels/cuda/<filename>``: the file, then a comment with the
    digest of the shared headers (``headers_digest``)."""
    path = CUDA_DIR / filename
    if not path.is_file():
        raise BackendError(f"CUDA source {filename} not found in {CUDA_DIR}")
    return path.read_text(encoding="utf-8") + f"\n// voxfx headers {headers_digest()}\n"


def load_module(filename: str, options: tuple = ()):
    """Compile ``kernels/cuda/<filename>`` once per device and options (cupy.RawModule)."""
    import cupy as cp

    key = (filename, tuple(options), cp.cuda.Device().id)
    mod = _modules.get(key)
    if mod is None:
        kernel_cache.current()
        code = cuda_source(filename)
        all_options = ("--std=c++17", f"-I{CUDA_INCLUDE}") + tuple(options)
        mod = cp.RawModule(code=code, options=all_options)
        try:
            mod.compile()
        except OSError as e:
            # The kernel cache went read-only or full since it was checked: compile into
            # the temporary folder instead of failing the bake with a bare OSError.
            if not kernel_cache.is_cache_error(e):
                raise
            kernel_cache.fall_back(f"CuPy could not write its kernel cache ({_one_line(e)})")
            mod = cp.RawModule(code=code, options=all_options)
            try:
                mod.compile()
            except OSError as e2:
                raise BackendError(f"cannot compile {filename}: the kernel cache is not writable "
                                   f"({_one_line(e2)}); set {kernel_cache.ENV_VAR} to a writable "
                                   f"folder") from e2
        _modules[key] = mod
    return mod


def get_kernel(filename: str, name: str, options: tuple = ()):
    return load_module(filename, options).get_function(name)


_properties: dict = {}


def _device_properties(device_id: int) -> dict:
    """cudaGetDeviceProperties is slow-ish and never changes: ask once per device."""
    if device_id not in _properties:
        import cupy as cp

        _properties[device_id] = cp.cuda.runtime.getDeviceProperties(device_id)
    return _properties[device_id]


# --------------------------------------------------------------------------- host facts

def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _host_memory() -> tuple[int, int]:
    """(total, available) bytes of host memory for this process (``memory.host_memory``:
    MemAvailable, cgroup and rlimit headroom, whichever is smallest)."""
    host = memory.host_memory()
    return host.total, host.available


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} threads)"
    except OSError:
        pass
    import platform

    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} threads)"
