"""Bake caches: one folder per bake, a manifest, atomic per-frame file sets, resume.

Layout of a cache folder (default ``//voxfx_cache/<bake name>`` next to the .blend, kept
relative so a farm can move the project)::

    voxfx_manifest.json          settings hash, frame range, add-on version, frames done
    <name>_0001.vdb              one file set per frame; the frame number sits right
    <name>_0001.npz              before the extension, as Blender's sequences expect

A frame's files are written under temporary names (``.<final name>.tmp``) and renamed
only when all of them are complete; the frame is then recorded in the manifest (itself
written atomically). A crash leaves at most temporary files, which the next bake or
``free()`` removes. ``free()`` deletes only files this cache recorded or its temporary
files, never anything else in the folder.

The only ``bpy`` use is resolving ``//`` paths (``resolve_folder``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Callable, Mapping

from ..kernels.errors import VoxFXError

MANIFEST = "voxfx_manifest.json"
FORMAT = 1


class CacheError(VoxFXError):
    """A cache folder cannot be used (read-only, full, foreign, inconsistent)."""


def settings_hash(settings: Mapping) -> str:
    """Stable hash of the bake settings: same settings, same hash, across sessions."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def resolve_folder(path: str) -> Path:
    """Absolute folder for a cache path that may be Blender-relative (``//...``)."""
    if path.startswith("//"):
        import bpy

        if not bpy.data.filepath:
            raise CacheError(
                f"The cache folder '{path}' is relative to the .blend file, which is not saved yet: "
                "save the file or choose an absolute cache folder"
            )
        path = bpy.path.abspath(path)
    return Path(path).expanduser().resolve()


def _explain(err: OSError, path: Path) -> str:
    if err.errno == errno.ENOSPC:
        return f"The disk holding the cache folder '{path}' is full"
    if err.errno == errno.EDQUOT:
        return f"The disk quota for the cache folder '{path}' is exhausted"
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"The cache folder '{path}' is not writable ({os.strerror(err.errno)})"
    return f"Cannot write to the cache folder '{path}': {err.strerror or err}"


def _write_json_atomic(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CacheError(_explain(e, path.parent)) from e


class BakeCache:
    """The cache of one bake: a folder, a base name, a manifest."""

    def __init__(self, folder, name: str, kind: str, addon_version: str = "0.1.0"):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name or ""):
            raise CacheError(f"Cache name {name!r} may use letters, digits, '_', '.', '-' only")
        self.folder = Path(folder)
        self.name = name
        self.kind = kind
        self.addon_version = addon_version

    # ------------------------------------------------------------------ paths
    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    def frame_path(self, frame: int, suffix: str) -> Path:
        """Final path of one file of a frame, e.g. ``liquid_0007.vdb``."""
        return self.folder / f"{self.name}_{frame:04d}{suffix}"

    @staticmethod
    def _temp_of(path: Path) -> Path:
        return path.with_name(f".{path.name}.tmp")

    # ------------------------------------------------------------------ manifest
    def read_manifest(self) -> dict | None:
        try:
            with open(self.manifest_path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise CacheError(f"The cache manifest '{self.manifest_path}' cannot be read: {e}") from e
        if data.get("name") != self.name or data.get("kind") != self.kind:
            raise CacheError(
                f"The folder '{self.folder}' holds the cache of another bake "
                f"({data.get('kind')} '{data.get('name')}'); choose another cache folder"
            )
        return data

    def frames_done(self) -> list[int]:
        """Frames recorded complete whose files are all still on disk, ascending."""
        data = self.read_manifest() or {}
        done = []
        for key, names in data.get("frames", {}).items():
            if all((self.folder / n).is_file() for n in names):
                done.append(int(key))
        return sorted(done)

    def last_complete_frame(self) -> int | None:
        """Last frame of the unbroken run of complete frames from the start, or None."""
        data = self.read_manifest()
        if not data:
            return None
        done = set(self.frames_done())
        frame, last = data["frame_start"], None
        while frame in done:
            last, frame = frame, frame + 1
        return last

    # ------------------------------------------------------------------ bake life
    def check_writable(self) -> None:
        """Create the folder and prove a file can be written and removed there."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            probe = self.folder / f".voxfx-write-test-{os.getpid()}"
            with open(probe, "wb") as f:
                f.write(b"\0" * 4096)
                f.flush()
                os.fsync(f.fileno())
            probe.unlink()
        except OSError as e:
            raise CacheError(_explain(e, self.folder)) from e

    def begin(self, settings: Mapping, frame_start: int, frame_end: int, resume: bool = True) -> int:
        """Prepare for a bake of frames start..end; return the first frame to compute.

        With *resume* and a manifest of the same settings and start, baking continues
        after the last complete frame; otherwise this cache's old files are freed.
        """
        if frame_end < frame_start:
            raise CacheError(f"Frame range {frame_start}-{frame_end} is empty")
        self.check_writable()
        digest = settings_hash(settings)
        data = self.read_manifest()
        self._remove_temporaries()
        if resume and data and data["settings_hash"] == digest and data["frame_start"] == frame_start:
            last = self.last_complete_frame()
            data["frame_end"] = frame_end
            data["frames"] = {k: v for k, v in data["frames"].items() if int(k) <= frame_end}
            self._save(data)
            return frame_start if last is None else last + 1
        if data:
            self.free()
            self.folder.mkdir(parents=True, exist_ok=True)
        self._save({
            "format": FORMAT, "kind": self.kind, "name": self.name, "addon_version": self.addon_version,
            "settings_hash": digest, "settings": dict(settings), "frame_start": frame_start,
            "frame_end": frame_end, "frames": {}, "created": time.time(),
        })
        return frame_start

    def write_frame(self, frame: int, writers: Mapping[str, Callable[[str], None]]) -> dict[str, Path]:
        """Write one frame's file set atomically.

        *writers* maps a suffix (``".vdb"``) to a function that writes the file at the
        path it is given (a temporary name). Either every file of the frame appears under
        its final name and the frame is recorded, or nothing of the frame is left.
        """
        data = self.read_manifest()
        if data is None:
            raise CacheError(f"The cache in '{self.folder}' was not started (call begin first)")
        finals = {suffix: self.frame_path(frame, suffix) for suffix in writers}
        temps = {suffix: self._temp_of(p) for suffix, p in finals.items()}
        try:
            for suffix, write in writers.items():
                write(str(temps[suffix]))
                if not temps[suffix].is_file():
                    raise CacheError(f"Writing {finals[suffix].name} produced no file")
                with open(temps[suffix], "rb+") as f:
                    os.fsync(f.fileno())
        except BaseException as e:
            for t in temps.values():
                t.unlink(missing_ok=True)
            if isinstance(e, OSError):
                raise CacheError(_explain(e, self.folder)) from e
            raise
        for suffix, final in finals.items():
            os.replace(temps[suffix], final)
        data["frames"][str(frame)] = sorted(p.name for p in finals.values())
        data["updated"] = time.time()
        self._save(data)
        return finals

    def free(self) -> int:
        """Delete this cache's files (and the folder if it is then empty); return count."""
        data = self.read_manifest()
        removed = self._remove_temporaries()
        if data:
            for names in data.get("frames", {}).values():
                for n in names:
                    p = self.folder / n
                    if p.is_file():
                        p.unlink()
                        removed += 1
            self.manifest_path.unlink(missing_ok=True)
            removed += 1
        try:
            self.folder.rmdir()  # only succeeds when nothing else is in there
        except OSError:
            pass
        return removed

    def _remove_temporaries(self) -> int:
        if not self.folder.is_dir():
            return 0
        pattern = re.compile(rf"^\.{re.escape(self.name)}_-?\d+\..+\.tmp$|^\.{re.escape(MANIFEST)}\.tmp$")
        removed = 0
        for p in self.folder.iterdir():
            if pattern.match(p.name):
                p.unlink(missing_ok=True)
                removed += 1
        return removed

    def _save(self, data: dict) -> None:
        _write_json_atomic(self.manifest_path, data)


CHECKPOINT = "state.npz"


def save_checkpoint(folder, state: dict, frame: int) -> None:
    """A simulation's state after *frame*, atomically (for resuming a bake)."""
    import numpy as np

    folder = Path(folder)
    tmp = folder / f".{CHECKPOINT}.tmp.npz"
    np.savez(tmp, frame=np.int64(frame), **state)
    os.replace(tmp, folder / CHECKPOINT)


def load_checkpoint(folder, frame: int) -> dict | None:
    """The saved state if it is the state after *frame*, else None."""
    import numpy as np

    path = Path(folder) / CHECKPOINT
    if not path.is_file():
        return None
    state = dict(np.load(path))
    return state if int(state.pop("frame", -1)) == frame else None


def free_with_checkpoint(folder, name: str, kind: str) -> int:
    """Free a simulation bake: its checkpoint and its cached frames."""
    (Path(folder) / CHECKPOINT).unlink(missing_ok=True)
    return BakeCache(folder, name, kind=kind).free()
