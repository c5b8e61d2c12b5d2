"""Cache folders: where a bake's cache lives (``resolve_folder``: Blender-relative paths,
the .blend's name), the cache errors and their one-line wording, and the small file
helpers the cache modules share (plain files only, never a link; folder listings).

No ``bpy`` but in ``blend_name`` and ``resolve_folder``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..kernels.errors import VoxFXError


class CacheError(VoxFXError):
    """A cache folder cannot be used (read-only, full, foreign, inconsistent)."""


class ForeignCacheError(CacheError):
    """The folder holds another bake's cache: VoxFX neither resumes nor frees it."""


BLEND_NAME = "{blend_name}"  # in a cache path: the .blend file's name without .blend


def blend_name() -> str | None:
    """The open .blend file's name without its extension, or None when it is not saved."""
    import bpy

    return Path(bpy.data.filepath).stem if bpy.data.filepath else None


def resolve_folder(path: str) -> Path:
    """Absolute folder for a cache path that may be Blender-relative (``//...``) and may
    name the .blend file (``{blend_name}``, as Blender's own path templates do), so two
    .blend files in one folder get caches of their own by default."""
    if BLEND_NAME in path:
        name = blend_name()
        if name is None:
            raise CacheError(
                f"The cache folder '{path}' is named after the .blend file, which is not saved yet: "
                "save the file or choose another cache folder"
            )
        path = path.replace(BLEND_NAME, name.replace("/", "_").replace("\\", "_"))
    if path.startswith("//"):
        import bpy

        if not bpy.data.filepath:
            raise CacheError(
                f"The cache folder '{path}' is relative to the .blend file, which is not saved yet: "
                "save the file or choose an absolute cache folder"
            )
        path = bpy.path.abspath(path)
    return Path(path).expanduser().resolve()


def explain(err: OSError, path: Path) -> str:
    """One line for an I/O error in the cache folder *path*."""
    if err.errno == errno.ENOSPC:
        return f"The disk holding the cache folder '{path}' is full"
    if err.errno == errno.EDQUOT:
        return f"The disk quota for the cache folder '{path}' is exhausted"
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"The cache folder '{path}' is not writable ({os.strerror(err.errno)})"
    return f"Cannot write to the cache folder '{path}': {err.strerror or err}"


def _regular_file(path: Path) -> os.stat_result | None:
    """lstat of *path* if it is a plain file (not a link, folder, device), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def frame_ranges(frames: list[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1-3, 7"``."""
    runs, start = [], None
    for a, b in zip(frames, frames[1:] + [None]):
        start = a if start is None else start
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = None
    return ", ".join(runs)
