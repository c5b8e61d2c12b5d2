"""The folder VoxFX installs GPU support into, and how Python finds what is in it.

It is VoxFX's own (in Blender's extension user data, never Blender's site-packages or
the user's home Python), marked by a file VoxFX writes when it makes it; only a folder
with that mark is ever deleted. ``VOXFX_GPU_DIR`` moves it (pipelines, shared installs).
It goes at the end of ``sys.path``, so Blender's own packages (its numpy) always win.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import shutil
import sys
from pathlib import Path

from ...kernels.errors import VoxFXError

ENV_VAR = "VOXFX_GPU_DIR"
MARKER = ".voxfx-gpu-support"
LOG_NAME = "install.log"

# NVIDIA's wheels put their libraries in nvidia/<component>/lib (Linux) or .../bin
# (Windows). CuPy opens them by name (libnvrtc.so.12, ...), which the loader only
# resolves from its own search path, so they are loaded here first, in dependency order.
_PRELOAD = ("libcudart.so.*", "libnvrtc-builtins.so.*", "libnvrtc.so.*", "libcublasLt.so.*", "libcublas.so.*")
_preloaded: dict[str, object] = {}


class FolderError(VoxFXError):
    """The GPU support folder cannot be used or removed."""


def gpu_folder(default: str | os.PathLike) -> Path:
    """The folder to use: ``VOXFX_GPU_DIR`` if set, else *default* (from the add-on)."""
    env = os.environ.get(ENV_VAR, "").strip()
    return Path(env).expanduser() if env else Path(default)


def is_ours(folder: Path) -> bool:
    return (Path(folder) / MARKER).is_file()


def prepare(folder: Path) -> Path:
    """Make *folder* (or take it if it is ours or empty) and mark it as VoxFX's."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FolderError(f"the GPU support folder {folder} is a file, not a folder")
    if folder.is_dir() and not is_ours(folder) and any(folder.iterdir()):
        raise FolderError(f"{folder} is not empty and was not made by VoxFX; choose an empty folder "
                          f"for {ENV_VAR}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MARKER).write_text("GPU support installed by VoxFX; 'Remove GPU Support' deletes this folder.\n")
    except OSError as e:
        raise FolderError(f"cannot make the GPU support folder {folder} ({type(e).__name__}: "
                          f"{e.strerror or e}); set {ENV_VAR} to a writable folder") from e
    return folder


def activate(folder: Path) -> list[str]:
    """Make what is installed in *folder* importable now. Returns the library load
    problems (empty when all is well); does nothing for a folder that is not ours."""
    folder = Path(folder)
    if not is_ours(folder):
        return []
    entry = str(folder)
    if entry not in sys.path:
        sys.path.append(entry)
    importlib.invalidate_caches()
    return preload_cuda_libraries(folder)


def deactivate(folder: Path) -> None:
    entry = str(Path(folder))
    while entry in sys.path:
        sys.path.remove(entry)
    importlib.invalidate_caches()


def preload_cuda_libraries(folder: Path) -> list[str]:
    nvidia = Path(folder) / "nvidia"
    if not nvidia.is_dir():
        return []
    problems = []
    if sys.platform == "win32":  # pragma: no cover - Windows only
        for bin_dir in sorted(nvidia.glob("*/bin")):
            if str(bin_dir) not in _preloaded:
                _preloaded[str(bin_dir)] = os.add_dll_directory(str(bin_dir))
                os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        return problems
    for pattern in _PRELOAD:
        for lib in sorted(nvidia.glob(f"*/lib/{pattern}")):
            if str(lib) in _preloaded:
                continue
            try:
                _preloaded[str(lib)] = ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                problems.append(f"{lib.name}: {str(e).splitlines()[0]}")
    return problems


def installed(folder: Path) -> list[tuple[str, str]]:
    """(name, version) of every package pip installed into *folder*."""
    found = []
    for info in sorted(Path(folder).glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        found.append((name.replace("_", "-").lower(), version))
    return found


def cupy_loaded() -> bool:
    """True once CuPy (or part of it) is imported: it cannot be swapped without a restart."""
    return any(m == "cupy" or m.startswith(("cupy.", "cupy_backends")) for m in sys.modules)


def remove(folder: Path) -> None:
    """Delete the GPU support folder: only a folder VoxFX made, never anything else."""
    folder = Path(folder)
    if not folder.exists():
        deactivate(folder)
        return
    resolved = folder.resolve()
    protected = {Path(p).resolve() for p in (Path.home(), sys.prefix, sys.base_prefix, resolved.anchor)}
    protected |= {Path(p).resolve() for p in sys.path if p and "site-packages" in p and p != str(folder)}
    if folder.is_symlink() or resolved in protected or not is_ours(folder):
        raise FolderError(f"not removing {folder}: it is not a GPU support folder made by VoxFX")
    deactivate(folder)
    try:
        shutil.rmtree(folder)
    except OSError as e:
        raise FolderError(f"could not delete all of {folder} ({type(e).__name__}: {e.strerror or e}); "
                          "quit Blender and delete it by hand") from e
