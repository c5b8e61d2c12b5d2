"""Where CuPy keeps the kernels it compiles (CUPY_CACHE_DIR), chosen by VoxFX.

CuPy compiles every kernel once and keeps the binary in its kernel cache (first bake
15 s of compiling, later ones 1 s). Its default, ``~/.cupy/kernel_cache``, may be
read-only or full (a locked-down home, a farm node); CuPy then fails with a bare
``OSError`` at the first compile, which can be in the middle of a bake. So before CuPy
compiles anything VoxFX picks the folder itself, checks that a file can really be
written there (``os.access`` says yes to root on a read-only mount) and otherwise uses a
temporary folder for the session, with one warning that names the real reason.

Which folder (first one set wins; it is used if writable, else the temporary one):

1. ``VOXFX_KERNEL_CACHE`` (pipelines, farms);
2. ``CUPY_CACHE_DIR`` when someone other than VoxFX set it;
3. the folder the caller passes (the add-on passes one in Blender's user folder);
4. CuPy's own default, ``~/.cupy/kernel_cache``.

CuPy reads ``CUPY_CACHE_DIR`` from the environment each time it compiles
(``cupy.cuda.compiler.get_cache_dir``, CuPy 13 and 14), so setting it here takes effect
for the next compile even when CuPy is already imported.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "VOXFX_KERNEL_CACHE"
CUPY_ENV = "CUPY_CACHE_DIR"
CUPY_IN_MEMORY_ENV = "CUPY_CACHE_IN_MEMORY"
CUPY_DEFAULT = Path("~/.cupy/kernel_cache").expanduser()

# A kernel binary is 0.1-5 MB; a folder with less room than this counts as full.
MIN_FREE_BYTES = 64 << 20


@dataclass(frozen=True)
class KernelCache:
    path: Path | None  # None: kernels are kept in memory only (nowhere was writable)
    source: str  # where the choice came from, for messages
    warning: str | None = None  # one line when VoxFX had to fall back

    def summary(self) -> str:
        where = str(self.path) if self.path is not None else "memory only"
        return f"kernel cache: {where} ({self.source})"


_lock = threading.Lock()
_current: KernelCache | None = None
_ours: str | None = None  # the CUPY_CACHE_DIR value VoxFX itself put in the environment
_in_memory_ours = False  # VoxFX set CUPY_CACHE_IN_MEMORY
_temporary: Path | None = None
_warned: set[str] = set()


def unwritable_reason(path: Path, min_free_bytes: int = MIN_FREE_BYTES) -> str | None:
    """None if a kernel can be written into *path* (made if missing), else why not."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".voxfx-write-test-")
        try:
            os.write(fd, b"\0" * 4096)  # a full disk fails here, not at creating the name
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    free = shutil.disk_usage(path).free
    if free < min_free_bytes:
        return f"the disk is full ({free >> 20} MiB free)"
    return None


def _requested(preferred: str | os.PathLike | None) -> tuple[Path, str]:
    """(folder, what chose it) for the kernel cache: ``VOXFX_KERNEL_CACHE`` first (pipelines, farms),
    then CuPy's own variable, then *preferred* (module notes)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser(), ENV_VAR
    cupy_env = os.environ.get(CUPY_ENV, "").strip()
    if cupy_env and cupy_env != _ours:
        return Path(cupy_env).expanduser(), CUPY_ENV
    if preferred:
        return Path(preferred).expanduser(), "VoxFX folder"
    return CUPY_DEFAULT, "CuPy default"


def configure(preferred: str | os.PathLike | None = None,
              min_free_bytes: int = MIN_FREE_BYTES) -> KernelCache:
    """Choose the kernel cache folder, check it and point CuPy at it (CUPY_CACHE_DIR)."""
    global _current
    path, source = _requested(preferred)
    why_not = unwritable_reason(path, min_free_bytes)
    with _lock:
        if why_not is None:
            _current = _use(KernelCache(path, source))
        else:
            _current = _fall_back(f"the kernel cache folder {path} ({source}) is not writable ({why_not})")
        return _current


def current() -> KernelCache:
    """The folder in use, choosing it (without a caller's preference) on first use."""
    if _current is None:
        return configure()
    return _current


def fall_back(reason: str) -> KernelCache:
    """Switch to the temporary folder after a compile failed writing the cache."""
    global _current
    with _lock:
        _current = _fall_back(reason)
        return _current


def is_cache_error(exc: BaseException) -> bool:
    """True if *exc* is CuPy failing to read or write the current kernel cache folder."""
    if not isinstance(exc, OSError) or _current is None or _current.path is None:
        return False
    names = [n for n in (exc.filename, exc.filename2) if n]
    root = os.path.abspath(_current.path)
    return any(p == root or p.startswith(root + os.sep)
               for p in (os.path.abspath(os.fsdecode(n)) for n in names))


def _use(cache: KernelCache) -> KernelCache:
    global _ours, _in_memory_ours
    if cache.path is None:
        _in_memory_ours = os.environ.get(CUPY_IN_MEMORY_ENV) is None or _in_memory_ours
        os.environ[CUPY_IN_MEMORY_ENV] = "1"
    else:
        _ours = str(cache.path)
        os.environ[CUPY_ENV] = _ours
        if _in_memory_ours:
            os.environ.pop(CUPY_IN_MEMORY_ENV, None)
            _in_memory_ours = False
        _point_imported_cupy_at(cache.path)
    if cache.warning and cache.warning not in _warned:  # one message per distinct problem
        _warned.add(cache.warning)
        print(f"VoxFX: {cache.warning}", file=sys.stderr)
    return cache


def _point_imported_cupy_at(path: Path) -> None:
    """CuPy 14.2 reads CUPY_CACHE_DIR once, when ``cupy.cuda.compiler`` is imported (its
    disk cache backend is made then; 13.x and 14.0 read it at every compile). If that
    module is already loaded, hand it a backend for *path* through its own setter
    (measured on an H100 with CuPy 14.2.0: without this, kernels kept going to the
    folder chosen at import)."""
    compiler = sys.modules.get("cupy.cuda.compiler")
    setter = getattr(compiler, "_set_kernel_cache_backend", None)
    disk = getattr(compiler, "_DiskKernelCacheBackend", None)
    if setter is None or disk is None:
        return
    try:
        setter(disk(str(path)))
    except OSError:  # the folder was checked a moment ago; if it fails now the compile falls back
        pass


def _fall_back(reason: str) -> KernelCache:
    global _temporary
    if _temporary is None or unwritable_reason(_temporary, 0) is not None:
        try:
            _temporary = Path(tempfile.mkdtemp(prefix="voxfx-kernel-cache-"))
        except OSError as e:
            return _use(KernelCache(None, "fallback", f"{reason}; the temporary folder is not writable "
                                    f"either ({type(e).__name__}), so kernels are kept in memory only "
                                    f"and compiled again in every session; set {ENV_VAR} to a writable folder"))
    return _use(KernelCache(_temporary, "temporary fallback",
                            f"{reason}; using {_temporary} for this session (kernels are compiled "
                            f"again next session); set {ENV_VAR} to a writable folder"))


def _reset_for_tests() -> None:
    global _current, _ours, _temporary, _in_memory_ours
    with _lock:
        _current, _ours, _temporary, _in_memory_ours = None, None, None, False
        _warned.clear()
