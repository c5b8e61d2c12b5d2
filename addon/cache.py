"""Bake caches: one folder per bake, a manifest, verified per-frame file sets, resume.

Layout of a cache folder (default ``//voxfx_cache/<.blend name>/<bake name>`` next to the
.blend, kept relative so a farm can move the project; a cache remembers which .blend
wrote it, and another .blend never bakes over it without being told)::

    voxfx_manifest.json          settings hash, frame range, version, frames done with
                                 each file's size and CRC-32, checkpoints
    <name>_0001.vdb              one file set per frame; the frame number sits right
    <name>_0001.ply              before the extension, as Blender's sequences expect
    <name>_state_0001.npz        simulation state after a frame (resume and repair)

**Trust.** Everything read back from the folder is untrusted input: a cache travels with
its .blend file between people. A manifest only ever *selects* among names this cache
would write itself (``<name>_<frame><suffix>`` with this effect's suffixes,
``<name>_state_<frame>.npz``); any other entry (``..``, an absolute path, another bake's
name, a wrong type) is dropped with one note and never opened, stat'ed, overwritten or
deleted. Files are checked with ``lstat``: a symbolic link is never followed or removed.
``free`` removes only files of these name patterns, whatever the manifest says.

**Durability** (see ``write_frame``). A frame's files are written to unguessable
temporary names (``fsio``), flushed, renamed, and the folder flushed; then the state
checkpoint the same way; only then is the frame recorded in the manifest (itself
written atomically), and only after that are checkpoints no longer kept removed. A kill
or an I/O error at any instant therefore leaves a manifest whose every frame is whole
and a checkpoint for its last frame: the next bake resumes there and re-bakes at most
the frame in flight. A frame is done only when its files have the recorded size and
checksum (``verify_frame``); a damaged frame is re-baked from the nearest checkpoint
before it (one is kept every ``checkpoint_every`` frames, plus the latest).

The only ``bpy`` use is resolving ``//`` paths (``resolve_folder``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ..kernels.errors import VoxFXError
from . import fsio

MANIFEST = "voxfx_manifest.json"
FORMAT = 2
CHECKPOINT_EVERY = 10  # default: a state file kept every 10 frames (plus the latest)
SUFFIXES = {"snow": (".ply", ".vdb", ".exr"), "flip": (".ply", ".vdb"), "voxelize": (".vdb",)}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_HEX8 = re.compile(r"[0-9a-f]{8}")
_LEGACY_CHECKPOINT = "state.npz"  # format 1 kept one checkpoint under this name


class CacheError(VoxFXError):
    """A cache folder cannot be used (read-only, full, foreign, inconsistent)."""


class ForeignCacheError(CacheError):
    """The folder holds another bake's cache: VoxFX neither resumes nor frees it."""


def settings_hash(settings: Mapping) -> str:
    """Stable hash of the bake settings: same settings, same hash, across sessions."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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


@dataclass
class ResumePlan:
    """What a bake must do: the frames to write and the checkpoints it may start from."""

    start: int
    end: int
    todo: list[int]  # frames whose files are missing or damaged, ascending
    checkpoints: list[int]  # verified states it can restore, ascending
    notes: list[str] = field(default_factory=list)

    @property
    def last_todo(self) -> int | None:
        return self.todo[-1] if self.todo else None


class BakeCache:
    """The cache of one bake: a folder, a base name, a manifest."""

    def __init__(self, folder, name: str, kind: str, addon_version: str = "0.1.0", *,
                 suffixes=None, checkpoint_every: int = CHECKPOINT_EVERY, owner: str | None = None):
        if not _NAME.fullmatch(name or ""):
            raise CacheError(f"Cache name {name!r} must start with a letter or digit and use letters, "
                             "digits, '_', '.', '-' only")
        self.folder = Path(folder)
        self.name = name
        self.kind = kind
        self.addon_version = addon_version
        self.suffixes = tuple(suffixes or SUFFIXES.get(kind, ()))
        if not self.suffixes or not all(re.fullmatch(r"\.[a-z0-9]{1,8}", s) for s in self.suffixes):
            raise CacheError(f"No file types are known for a {kind!r} cache")
        self.checkpoint_every = max(1, int(checkpoint_every))
        self.owner = owner  # the .blend (name) baking into this cache, if known
        self.notes: list[str] = []  # one line each: what was ignored, repaired, dropped
        alternatives = "|".join(re.escape(s) for s in self.suffixes)
        self._frame_re = re.compile(rf"{re.escape(name)}_(-?\d+)({alternatives})")
        self._state_re = re.compile(rf"{re.escape(name)}_state_(-?\d+)\.npz")

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ------------------------------------------------------------------ paths
    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    def frame_path(self, frame: int, suffix: str) -> Path:
        """Final path of one file of a frame, e.g. ``liquid_0007.vdb``."""
        return self.folder / f"{self.name}_{int(frame):04d}{suffix}"

    def checkpoint_path(self, frame: int) -> Path:
        return self.folder / f"{self.name}_state_{int(frame):04d}.npz"

    def is_own_file(self, name: str) -> bool:
        """Whether VoxFX would write a file of this name into this cache folder."""
        return (name == MANIFEST or name == _LEGACY_CHECKPOINT or fsio.is_temporary(name)
                or self._is_legacy_temporary(name) or bool(self._frame_re.fullmatch(name))
                or bool(self._state_re.fullmatch(name)))

    def _is_legacy_temporary(self, name: str) -> bool:  # format 1: ".<final>.tmp", "..<final>.<x>.tmp"
        return bool(re.fullmatch(rf"\.\.?{re.escape(self.name)}_-?\d+\..+\.tmp|\.{re.escape(MANIFEST)}\.tmp"
                                 r"|\.state\.npz\.tmp\.npz", name))

    # ------------------------------------------------------------------ manifest
    def read_manifest(self) -> dict | None:
        """The manifest with only well-formed entries of this cache, or None if absent.

        Raises ``CacheError`` when it cannot be read or belongs to another bake.
        """
        if not os.path.lexists(self.manifest_path):
            return None
        if _regular_file(self.manifest_path) is None:
            raise CacheError(f"The cache manifest '{self.manifest_path}' is not a plain file")
        try:
            with open(self.manifest_path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise CacheError(f"The cache manifest '{self.manifest_path}' cannot be read ({e})") from e
        if not isinstance(data, dict):
            raise CacheError(f"The cache manifest '{self.manifest_path}' cannot be read (not a JSON object)")
        name, kind = data.get("name"), data.get("kind")
        if isinstance(name, str) and isinstance(kind, str) and (name, kind) != (self.name, self.kind):
            raise ForeignCacheError(
                f"The folder '{self.folder}' holds the cache of another bake "
                f"({str(data.get('kind'))[:40]} '{str(data.get('name'))[:80]}'); choose another cache folder"
            )
        return self._checked(data)

    def _checked(self, data: dict) -> dict:
        """*data* with its frame and checkpoint tables reduced to this cache's own names."""
        ok = (data.get("format") == FORMAT and isinstance(data.get("settings_hash"), str)
              and (data.get("name"), data.get("kind")) == (self.name, self.kind)
              and all(type(data.get(k)) is int for k in ("frame_start", "frame_end")))
        if not ok:
            raise CacheError(f"The cache manifest '{self.manifest_path}' is from another VoxFX version "
                             f"or damaged (format {str(data.get('format'))[:20]})")
        bad: list[str] = []
        frames = {}
        raw = data.get("frames")
        for key, files in (raw.items() if isinstance(raw, dict) else []):
            entry = self._frame_entry(key, files)
            if entry is None:
                bad.append(f"{str(key)[:20]!r}: {str(files)[:60]}")
            else:
                frames[entry[0]] = entry[1]
        states = {}
        raw = data.get("checkpoints")
        for key, value in (raw.items() if isinstance(raw, dict) else []):
            entry = self._state_entry(key, value)
            if entry is None:
                bad.append(f"state {str(key)[:40]!r}")
            else:
                states[entry[0]] = entry[1]
        if bad:
            self.note(f"Ignored {len(bad)} entries of the manifest in '{self.folder}' that are not this "
                      f"cache's own files (e.g. {'; '.join(bad[:2])}); nothing outside the cache is touched")
        data = dict(data)
        data["frames"], data["checkpoints"] = frames, states
        return data

    def _frame_entry(self, key, files):
        try:
            frame = int(key) if isinstance(key, str) and re.fullmatch(r"-?\d{1,9}", key) else None
        except ValueError:
            return None
        if frame is None or not isinstance(files, dict) or not files:
            return None
        for name, record in files.items():
            m = self._frame_re.fullmatch(name) if isinstance(name, str) else None
            if (m is None or int(m.group(1)) != frame or name != self.frame_path(frame, m.group(2)).name
                    or not _is_record(record)):
                return None
        return frame, {n: (int(r[0]), r[1]) for n, r in files.items()}

    def _state_entry(self, key, record):
        if not (isinstance(key, str) and re.fullmatch(r"-?\d{1,9}", key) and _is_record(record)):
            return None
        return int(key), (int(record[0]), record[1])

    # ------------------------------------------------------------------ verification
    def _verify(self, name: str, record) -> str | None:
        """Why the file *name* does not match (size, CRC) *record*; None when it does."""
        path = self.folder / name
        st = _regular_file(path)
        if st is None:
            return f"{name} is missing" if not os.path.lexists(path) else f"{name} is not a plain file"
        if st.st_size != record[0]:
            return f"{name} has {st.st_size} bytes, not the {record[0]} written"
        try:
            size, crc = fsio.checksum(path)
        except OSError as e:
            return f"{name} cannot be read ({e.strerror or e})"
        if (size, crc) != tuple(record):
            return f"{name} is damaged (checksum {crc}, written {record[1]})"
        return None

    def verify_frame(self, frame: int, data: dict | None = None) -> str | None:
        """Why *frame* is not whole on disk (one line), or None when every file checks out."""
        data = data if data is not None else self.read_manifest()
        files = (data or {}).get("frames", {}).get(int(frame))
        if files is None:
            return f"frame {frame} is not baked"
        for name, record in files.items():
            problem = self._verify(name, record)
            if problem:
                return f"frame {frame}: {problem}"
        return None

    def frames_done(self) -> list[int]:
        """Frames recorded complete whose files all check out, ascending."""
        data = self.read_manifest()
        return [] if not data else sorted(f for f in data["frames"] if self.verify_frame(f, data) is None)

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

    def quick_status(self) -> tuple[list[int], list[int]] | None:
        """(frames recorded whose files have their recorded size, recorded frames that do
        not) by ``lstat`` alone — cheap enough for a panel; resume also checks the CRCs.
        None when there is no readable manifest."""
        try:
            data = self.read_manifest()
        except CacheError:
            return None
        if not data:
            return None
        good, bad = [], []
        for frame, files in sorted(data["frames"].items()):
            ok = True
            for name, record in files.items():
                st = _regular_file(self.folder / name)
                ok = ok and st is not None and st.st_size == record[0]
            (good if ok else bad).append(frame)
        return good, bad

    # ------------------------------------------------------------------ bake life
    def check_writable(self) -> None:
        """Create the folder and prove a file can be written and removed there."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fsio.write_bytes_atomic(self.folder / f"{fsio.TEMP_PREFIX}probe", b"\0" * 4096)
            (self.folder / f"{fsio.TEMP_PREFIX}probe").unlink()
        except OSError as e:
            raise CacheError(explain(e, self.folder)) from e

    def begin(self, settings: Mapping, frame_start: int, frame_end: int, resume: bool = True) -> ResumePlan:
        """Prepare a bake of frames start..end and say what is left to do.

        With *resume* and a manifest of the same settings and start, every frame that
        checks out is kept and the plan lists the missing or damaged ones; otherwise this
        cache's old files are freed and every frame is to do.
        """
        if frame_end < frame_start:
            raise CacheError(f"Frame range {frame_start}-{frame_end} is empty")
        self.check_writable()
        digest = settings_hash(settings)
        try:
            data = self.read_manifest()
        except ForeignCacheError:
            raise
        except CacheError as e:
            self.note(f"{e}: the bake starts again from frame {frame_start}")
            data, resume = {}, False
        written_by = data.get("blend") if data else None
        if self.owner and isinstance(written_by, str) and written_by != self.owner:
            raise ForeignCacheError(
                f"The cache folder '{self.folder}' holds the {self.kind} bake of '{written_by[:80]}.blend', not of "
                f"'{self.owner}.blend': choose another Cache Folder, or Free that bake first"
            )
        self.remove_temporaries()
        if resume and data and data["settings_hash"] == digest and data["frame_start"] == frame_start:
            return self._resume_plan(data, frame_start, frame_end)
        if data and data.get("settings_hash") != digest:
            self.note(f"The settings changed since the last bake: its frames in '{self.folder}' were replaced")
        if data or any(self.is_own_file(p.name) for p in _entries(self.folder)):
            self.free()
            self.folder.mkdir(parents=True, exist_ok=True)
        self._save({
            "format": FORMAT, "kind": self.kind, "name": self.name, "addon_version": self.addon_version,
            "settings_hash": digest, "settings": dict(settings), "frame_start": frame_start,
            "frame_end": frame_end, "frames": {}, "checkpoints": {}, "checkpoint_every": self.checkpoint_every,
            "created": time.time(), "blend": self.owner,
        })
        return ResumePlan(frame_start, frame_end, list(range(frame_start, frame_end + 1)), [], list(self.notes))

    def _resume_plan(self, data: dict, start: int, end: int) -> ResumePlan:
        damaged = []
        done = set()
        for frame in data["frames"]:
            problem = self.verify_frame(frame, data)
            if problem is None:
                done.add(frame)
            elif start <= frame <= end:
                damaged.append(problem)
        if damaged:
            self.note(f"{len(damaged)} baked frames are damaged or missing and are re-baked "
                      f"({'; '.join(damaged[:3])}{'; …' if len(damaged) > 3 else ''})")
        states = sorted(f for f, rec in data["checkpoints"].items()
                        if self._verify(self.checkpoint_path(f).name, rec) is None)
        data["frame_end"] = end
        self._save(data)
        todo = [f for f in range(start, end + 1) if f not in done]
        return ResumePlan(start, end, todo, states, list(self.notes))

    def write_frame(self, frame: int, writers: Mapping[str, Callable[[str], None]], state: Mapping | None = None):
        """Write one frame's file set (and the simulation *state* after it), durably.

        *writers* maps a suffix (``".vdb"``) to a function that writes the file at the
        path it is given (a temporary name). The frame is recorded in the manifest only
        once all of its files and its checkpoint are on the disk.
        """
        data = self.read_manifest()
        if data is None:
            raise CacheError(f"The cache in '{self.folder}' was not started (call begin first)")
        unknown = [s for s in writers if s not in self.suffixes]
        if unknown:
            raise CacheError(f"A {self.kind} cache holds {', '.join(self.suffixes)} files, not {unknown}")
        finals = {suffix: self.frame_path(frame, suffix) for suffix in writers}
        temps = {suffix: fsio.temporary_for(p) for suffix, p in finals.items()}
        records = {}
        try:
            for suffix, write in writers.items():
                write(str(temps[suffix]))
                if _regular_file(temps[suffix]) is None:
                    raise CacheError(f"Writing {finals[suffix].name} produced no file")
                fsio.fsync_file(temps[suffix])
                os.chmod(temps[suffix], fsio.umask_mode())
                records[finals[suffix].name] = list(fsio.checksum(temps[suffix]))
                fsio.fault_point(f"{finals[suffix].name} written")
            for suffix, final in finals.items():
                os.replace(temps[suffix], final)
            fsio.fsync_folder(self.folder)
            fsio.fault_point(f"frame {frame} renamed")
            if state is not None:
                data["checkpoints"][frame] = list(self._write_state(frame, state))
            data["frames"][frame] = records
            data["updated"] = time.time()
            self._save(data)
        except BaseException as e:
            for t in temps.values():
                t.unlink(missing_ok=True)
            if isinstance(e, OSError):
                raise CacheError(f"{explain(e, self.folder)}; frames up to the last recorded one are kept") from e
            raise
        self._prune_checkpoints(data)
        return finals

    def _write_state(self, frame: int, state: Mapping) -> tuple[int, str]:
        import numpy as np

        def write(temporary):  # np.savez's layout; the with-blocks close the zip even on a full disk
            arrays = {"frame": np.int64(frame), **state}
            with open(temporary, "xb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
                for key, value in arrays.items():
                    with z.open(f"{key}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)

        path = fsio.write_atomic(self.checkpoint_path(frame), write)
        fsio.fault_point(f"state {frame} written")
        return fsio.checksum(path)

    def _prune_checkpoints(self, data: dict) -> None:
        """Remove states no longer kept: all but every K-th frame's and the newest."""
        if not data["checkpoints"]:
            return
        newest, start = max(data["checkpoints"]), data["frame_start"]
        keep = {f for f in data["checkpoints"] if f == newest or (f - start) % self.checkpoint_every == 0}
        gone = sorted(set(data["checkpoints"]) - keep)
        for entry in _entries(self.folder):  # states the manifest never recorded, too
            m = self._state_re.fullmatch(entry.name)
            if m and int(m.group(1)) not in keep and entry.is_file(follow_symlinks=False):
                gone.append(int(m.group(1)))
        if not gone:
            return
        for f in gone:
            data["checkpoints"].pop(f, None)
        self._save(data)  # forget them first: a missing recorded state would only cost a check
        try:
            for f in set(gone):
                if _regular_file(self.checkpoint_path(f)):
                    self.checkpoint_path(f).unlink(missing_ok=True)
            fsio.fault_point("states pruned")
        except OSError as e:
            raise CacheError(f"{explain(e, self.folder)}; the frames are kept") from e

    def states(self, plan: ResumePlan, before: int):
        """Yield (frame, arrays) for the readable states of frames < *before*, newest
        first. Each unreadable checkpoint is noted and skipped."""
        import numpy as np

        data = self.read_manifest() or {"checkpoints": {}}
        for frame in sorted((f for f in plan.checkpoints if f < before), reverse=True):
            record = data["checkpoints"].get(frame)
            path = self.checkpoint_path(frame)
            problem = self._verify(path.name, record) if record else f"{path.name} is not recorded"
            state = None
            if problem is None:
                try:
                    with np.load(path, allow_pickle=False) as z:
                        state = {k: z[k] for k in z.files}
                    if "frame" not in state or int(state.pop("frame")) != frame:
                        problem = f"{path.name} holds another frame's state"
                except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as e:
                    problem = f"{path.name} is unreadable ({type(e).__name__}: {str(e)[:80]})"
            if problem is None:
                yield frame, state
            else:
                self.note(f"The checkpoint of frame {frame} is unusable ({problem}); using an older one")

    def free(self) -> int:
        """Delete every file this cache's name patterns cover (never anything else), and
        the folder if it is then empty; return the count.

        The manifest goes first, in one rename: if even that fails (read-only folder)
        nothing is removed; after it the folder no longer holds a cache, and a Free cut
        short is finished by the next one.
        """
        try:
            self.read_manifest()
        except ForeignCacheError:
            raise
        except CacheError:
            pass  # unreadable: its files are still found by their names
        own = [e for e in _entries(self.folder) if self.is_own_file(e.name)]
        links = [e.name for e in own if not e.is_file(follow_symlinks=False)]
        if links:
            self.note(f"Left {len(links)} entries in '{self.folder}' that are not plain files "
                      f"(e.g. {links[0]}): VoxFX never writes links or folders there")
        own = [e for e in own if e.is_file(follow_symlinks=False)]
        removed, parked = 0, False
        try:
            if any(e.name == MANIFEST for e in own):
                park = fsio.temporary_for(self.manifest_path)
                os.replace(self.manifest_path, park)
                parked = True
                own = [e for e in own if e.name != MANIFEST] + [park]
                fsio.fault_point("manifest parked")
            for entry in own:
                os.unlink(entry if isinstance(entry, Path) else entry.path)
                removed += 1
                fsio.fault_point("file freed")
        except OSError as e:
            if removed == 0 and not parked:
                raise CacheError(f"{explain(e, self.folder)}: nothing was freed") from e
            raise CacheError(f"{explain(e, self.folder)}: freed {removed} of {len(own)} files; "
                             "press Free again to finish") from e
        if removed:
            fsio.fsync_folder(self.folder)
        try:
            self.folder.rmdir()  # only succeeds when nothing else is in there
        except OSError:
            pass
        return removed

    def remove_temporaries(self) -> int:
        removed = 0
        for entry in _entries(self.folder):
            name = entry.name
            if (fsio.is_temporary(name) or self._is_legacy_temporary(name)) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed += 1
        return removed

    def _save(self, data: dict) -> None:
        out = dict(data)
        out["frames"] = {str(k): v for k, v in sorted(data["frames"].items())}
        out["checkpoints"] = {str(k): v for k, v in sorted(data.get("checkpoints", {}).items())}
        text = json.dumps(out, indent=1, sort_keys=True)
        try:
            fsio.write_bytes_atomic(self.manifest_path, text.encode("utf-8"))
            fsio.fault_point("manifest saved")
        except OSError as e:
            raise CacheError(explain(e, self.folder)) from e


def _is_record(record) -> bool:
    return (isinstance(record, (list, tuple)) and len(record) == 2 and type(record[0]) is int
            and record[0] >= 0 and isinstance(record[1], str) and bool(_HEX8.fullmatch(record[1])))


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


_status_memo: dict = {}


def status_line(folder: Path, name: str, kind: str, now: float | None = None, suffixes=None) -> str | None:
    """One line for a panel: what the bake in *folder* holds and which frames are
    damaged (recomputed at most every 2 s; a panel redraws far more often)."""
    now = time.monotonic() if now is None else now
    key = (str(folder), name, kind)
    memo = _status_memo.get(key)
    if memo and now - memo[0] < 2.0:
        return memo[1]
    try:
        status = BakeCache(folder, name, kind, suffixes=suffixes).quick_status()
    except CacheError:
        status = None
    if status is None:
        line = None
    elif status[1]:
        line = f"Frames {frame_ranges(status[1])} damaged or missing: Bake repairs them"
    elif status[0]:
        line = f"Baked frames {frame_ranges(status[0])}"
    else:
        line = "Nothing baked yet"
    _status_memo[key] = (now, line)
    return line


# --------------------------------------------------------------------------- loading frames

_shown_memo: dict = {}  # manifest path → ((mtime_ns, size), BakeCache, manifest)
_checked_memo: dict = {}  # frame file → (size, mtime_ns) it passed its check with


def _manifest_in(folder: Path):
    """(BakeCache, manifest) of the bake in *folder*, re-read only when the manifest changes."""
    path = folder / MANIFEST
    st = _regular_file(path)
    if st is None:
        return None
    key = (st.st_mtime_ns, st.st_size)
    memo = _shown_memo.get(str(path))
    if memo and memo[0] == key:
        return memo[1], memo[2]
    try:
        with open(path, encoding="utf-8") as f:
            head = json.load(f)
        cache = BakeCache(folder, str(head.get("name")), str(head.get("kind")))
        data = cache.read_manifest()
    except (OSError, ValueError, AttributeError, CacheError):
        data = None
    if data is None:
        return None
    _shown_memo[str(path)] = (key, cache, data)
    return cache, data


def shown_frame(prefix: str, frame: int, suffix: str) -> tuple[Path | None, str | None]:
    """The file to show at *frame* for the sequence ``<prefix><frame><suffix>``, checked
    against its cache's manifest, as ``(path, None)``; ``(None, None)`` when nothing is to
    show (not baked, before the first frame, no cache); ``(None, why)`` when the file does
    not match what was written (it is never handed to a reader). After the last baked
    frame the last one stays (snow lies on); before the first, nothing shows."""
    prefix_path = Path(prefix)
    found = _manifest_in(prefix_path.parent)
    if found is None:
        return None, None
    cache, data = found
    if prefix_path.name != f"{cache.name}_" or suffix not in cache.suffixes:
        return None, None
    baked = [f for f, files in data["frames"].items() if cache.frame_path(f, suffix).name in files]
    if not baked or frame < data["frame_start"]:
        return None, None
    frame = min(int(frame), max(baked))
    if frame not in data["frames"]:
        return None, None
    path = cache.frame_path(frame, suffix)
    record = data["frames"][frame].get(path.name)
    if record is None:
        return None, None
    st = _regular_file(path)
    if st is not None and _checked_memo.get(str(path)) == (st.st_size, st.st_mtime_ns):
        return path, None
    problem = cache._verify(path.name, record)
    if problem:
        return None, f"frame {frame} of '{cache.folder}': {problem}; press Bake to repair it"
    _checked_memo[str(path)] = (st.st_size, st.st_mtime_ns)
    return path, None
