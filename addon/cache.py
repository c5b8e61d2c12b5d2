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
the frame in flight. The checkpoint is written at the same time as the files, on a
thread of its own (``cache_state``: a temporary, flushed, no rename), and renamed and
recorded before the files are renamed: a checkpoint holds everything its frame's files
are computed from, so a frame whose checkpoint is recorded but whose files are not is
rewritten from the checkpoint on resume, not simulated again (``sim_bake``). With
``cache_writer.FrameWriter`` (Write While Simulating) the frame's checkpoint is made
durable and recorded on the bake's thread before the next frame steps (``write_state``),
and the files are written on the writer thread while it simulates, so a kill costs at
most the frame being simulated (issue 21 §1). ``VOXFX_CHECKPOINT=overlap`` (opt-in)
writes the checkpoint on the writer thread too, beside the files: a kill may then cost
the frame being written as well, until its checkpoint is recorded. Checkpoints of frames not yet
recorded are never pruned. The
manifest is read, changed and saved under one lock (the two threads both record). A
frame is done only when its files have the recorded size and
checksum (``verify_frame``); a damaged frame is re-baked from the nearest checkpoint
before it (one is kept every ``checkpoint_every`` frames, plus the latest; with 0, the
latest only, and a repair before it simulates again from the first frame), or rewritten
from its own if it has one.

The only ``bpy`` use is resolving ``//`` paths (``resolve_folder``).

Modules: this one writes (``BakeCache``: begin, write_frame, states, free);
``cache_status.py`` says how a bake stands (``status_line``); ``cache_manifest.py``
reads (``CacheReader``: the manifest and its trust rules, frame verification;
``shown_frame`` for the frame loader); ``cache_folder.py`` holds the folder, its paths and
the cache errors.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ..kernels.checkpoint import checkpoint_mode
from . import cache_state, fsio
from .cache_folder import (BLEND_NAME, CacheError, ForeignCacheError, _entries, _regular_file,  # noqa: F401
                           blend_name, explain, frame_ranges, resolve_folder)
from .cache_manifest import (CHECKPOINT_EVERY, FORMAT, MANIFEST, SUFFIXES, CacheReader, _is_record,  # noqa: F401
                             shown_frame)


def settings_hash(settings: Mapping) -> str:
    """Stable hash of the bake settings: same settings, same hash, across sessions."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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


@dataclass
class PendingFrame:
    """A frame between ``start_frame`` and ``finish_frame``: its writers, final and
    temporary paths, and the files written so far (suffixes, their size and CRC-32)."""

    frame: int
    writers: dict
    finals: dict
    temps: dict
    done: set = field(default_factory=set)
    records: dict = field(default_factory=dict)


def on_main_thread(write: Callable[[str], None]) -> Callable[[str], None]:
    """Mark a frame writer that must run on Blender's main thread (it uses ``bpy``):
    ``start_frame`` runs it, never a background writer."""
    write.main_thread = True
    return write


class BakeCache(CacheReader):
    """The cache of one bake: a folder, a base name, a manifest; read (``CacheReader``)
    and written."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._manifest_lock = threading.RLock()  # the bake's thread and the writer thread both record

    # ------------------------------------------------------------------ bake life
    def check_writable(self) -> None:
        """Create the folder and prove a file can be written and removed there."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fsio.write_bytes_atomic(self.folder / f"{fsio.TEMP_PREFIX}probe", b"\0" * 4096)
            (self.folder / f"{fsio.TEMP_PREFIX}probe").unlink()
        except OSError as e:
            raise CacheError(explain(e, self.folder)) from e

    def baked_with(self, settings: Mapping) -> bool:
        """Whether this cache holds a bake of exactly these *settings* (any manifest
        problem: no)."""
        try:
            data = self.read_manifest()
        except CacheError:
            return False
        return bool(data) and data.get("settings_hash") == settings_hash(settings)

    def choose_format(self, settings: dict, cache_format: str, resume: bool, what: str) -> bool:
        """Whether this bake writes Compact frames (*cache_format* "COMPACT"): a PLY bake
        (v0.1's too) of the same *settings* goes on as PLY, with a note; a Compact bake adds
        the format to *settings* (PLY caches keep the hash they had before the setting)."""
        compact = cache_format == "COMPACT"
        if compact and resume and self.baked_with(settings):
            compact = False
            self.note(f"The {what} bake in '{self.folder}' is PLY + VDB and goes on as such: "
                      "Free it to bake it Compact")
        if compact:
            settings["cache_format"] = "compact"
        return compact

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
        if data:
            self._remove_unrecorded_states(data)
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
        once all of its files and its checkpoint are on the disk. (``start_frame`` and
        ``finish_frame`` in turn: ``cache_writer.FrameWriter`` runs the second on a thread.)
        A *state* with ``release`` (``kernels.checkpoint.HostState``) is released once
        written, or once the frame failed.
        """
        try:
            return self.finish_frame(self.start_frame(frame, writers), state)
        finally:
            release(state)

    def start_frame(self, frame: int, writers: Mapping[str, Callable[[str], None]]) -> "PendingFrame":
        """The first part of ``write_frame``, on the calling thread: check *writers*, name
        the frame's temporaries and run the writers marked ``on_main_thread`` (they use
        ``bpy``); the rest is left to ``finish_frame``, which may run on another thread."""
        if self.read_manifest() is None:
            raise CacheError(f"The cache in '{self.folder}' was not started (call begin first)")
        unknown = [s for s in writers if s not in self.suffixes]
        if unknown:
            raise CacheError(f"A {self.kind} cache holds {', '.join(self.suffixes)} files, not {unknown}")
        finals = {suffix: self.frame_path(frame, suffix) for suffix in writers}
        pending = PendingFrame(frame, dict(writers), finals, {s: fsio.temporary_for(p) for s, p in finals.items()})
        self._run_writers(pending, [s for s, w in writers.items() if getattr(w, "main_thread", False)])
        return pending

    def finish_frame(self, pending: "PendingFrame", state: Mapping | None = None) -> dict:
        """The rest of ``write_frame`` (any thread): the other files and the *state*
        (None: none, or written before by ``write_state``) written at the same time, the
        state's file on a thread of its own (``cache_state.Staging``), then in order: the
        files flushed, the state renamed and recorded as a checkpoint, the files renamed,
        the frame recorded, old checkpoints pruned. On any failure the frame's
        temporaries (and the state's) are removed and it is not recorded."""
        frame, finals, temps = pending.frame, pending.finals, pending.temps
        staging, legacy = None, state is not None and checkpoint_mode() == "legacy"
        try:
            if self.read_manifest() is None:
                raise CacheError(f"The cache in '{self.folder}' was freed while frame {frame} was written")
            if state is not None and not legacy:
                staging = cache_state.Staging(self.checkpoint_path(frame), frame, state)
            rest = [s for s in pending.writers if s not in pending.done]
            self._run_writers(pending, rest, before_flush=staging.result if staging is not None else None)
            if staging is not None:
                self._record_state(frame, cache_state.commit(self.checkpoint_path(frame), staging.result(), frame))
            for suffix, final in finals.items():
                os.replace(temps[suffix], final)
            fsio.fsync_folder(self.folder)
            fsio.fault_point(f"frame {frame} renamed")
            record = list(cache_state.legacy_write(self.checkpoint_path(frame), frame, state)) if legacy else None
            with self._manifest_lock:
                data = self._current_manifest(frame)
                if record is not None:
                    data["checkpoints"][frame] = record
                data["frames"][frame] = {finals[s].name: pending.records[finals[s].name] for s in pending.writers}
                data["updated"] = time.time()
                self._save(data)
        except BaseException as e:
            if staging is not None:
                staging.discard()
            self._abandon(pending, e)  # raises
        self._prune_checkpoints()
        return finals

    def write_state(self, frame: int, state: Mapping) -> None:
        """Write the simulation *state* after *frame* durably and record it as a checkpoint
        before the frame's files (``cache_writer.FrameWriter`` when the state must be
        durable before the next frame steps): the frame can then be rewritten from it on
        resume. The previous checkpoints stay until the frame is recorded. A full disk is
        the cache's one-line ``CacheError``, no temporary left."""
        final = self.checkpoint_path(frame)
        try:
            if checkpoint_mode() == "legacy":
                self._record_state(frame, cache_state.legacy_write(final, frame, state))
            else:
                self._record_state(frame, cache_state.commit(final, cache_state.stage(final, frame, state), frame))
        except OSError as e:
            raise CacheError(f"{explain(e, self.folder)}; frames up to the last recorded one are kept") from e

    def _record_state(self, frame: int, record) -> None:
        """Record the checkpoint of *frame* (its file renamed already) in the manifest."""
        with self._manifest_lock:
            data = self._current_manifest(frame)
            data["checkpoints"][frame] = list(record)
            data["updated"] = time.time()
            self._save(data)

    def _current_manifest(self, frame: int) -> dict:
        data = self.read_manifest()
        if data is None:
            raise CacheError(f"The cache in '{self.folder}' was freed while frame {frame} was written")
        return data

    def _run_writers(self, pending: "PendingFrame", suffixes, before_flush=None) -> None:
        """Write, flush and checksum the files of *suffixes* under their temporary names;
        *before_flush()*: waited for once all are written, before the first is flushed
        (the state's staging: its fault point comes before theirs, one sequence)."""
        try:
            for suffix in suffixes:
                final, temporary = pending.finals[suffix], pending.temps[suffix]
                pending.writers[suffix](str(temporary))
                if _regular_file(temporary) is None:
                    raise CacheError(f"Writing {final.name} produced no file")
            if before_flush is not None:
                before_flush()
            for suffix in suffixes:
                final, temporary = pending.finals[suffix], pending.temps[suffix]
                fsio.fsync_file(temporary)
                os.chmod(temporary, fsio.umask_mode())
                pending.records[final.name] = list(fsio.checksum(temporary))
                pending.done.add(suffix)
                fsio.fault_point(f"{final.name} written")
        except BaseException as e:
            self._abandon(pending, e)  # raises

    def _abandon(self, pending: "PendingFrame", e: BaseException):
        """Remove a failed frame's temporaries and raise *e* again (I/O errors in one line).
        Called in an ``except`` block."""
        for t in pending.temps.values():
            t.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise CacheError(f"{explain(e, self.folder)}; frames up to the last recorded one are kept") from e
        raise e

    def _prune_checkpoints(self) -> None:
        """Remove states no longer kept: all but every K-th frame's, the newest (K = 0: the
        newest only) and those of frames not recorded yet (a frame still being written,
        or whose files a kill cut short: it is rewritten from its state)."""
        with self._manifest_lock:
            data = self.read_manifest()
            if not data or not data["checkpoints"]:
                return
            newest, start = max(data["checkpoints"]), data["frame_start"]
            every = self.checkpoint_every  # 0: only the last complete frame's state
            keep = {f for f in data["checkpoints"]
                    if f == newest or (every and (f - start) % every == 0) or f not in data["frames"]}
            gone = sorted(set(data["checkpoints"]) - keep)
            if not gone:
                return
            for f in gone:
                data["checkpoints"].pop(f, None)
            self._save(data)  # forget them first: a missing recorded state would only cost a check
        self._remove_states(gone)

    def _remove_unrecorded_states(self, data: dict) -> None:
        """Remove state files the manifest never recorded (a kill between a state's rename
        and its record); before a bake writes, so no state is being recorded meanwhile."""
        self._remove_states([int(m.group(1)) for e in _entries(self.folder)
                             if (m := self._state_re.fullmatch(e.name)) and int(m.group(1)) not in data["checkpoints"]
                             and e.is_file(follow_symlinks=False)])

    def _remove_states(self, frames) -> None:
        if not frames:
            return
        try:
            for f in set(frames):
                if _regular_file(self.checkpoint_path(f)):
                    self.checkpoint_path(f).unlink(missing_ok=True)
            fsio.fault_point("states pruned")
        except OSError as e:
            raise CacheError(f"{explain(e, self.folder)}; the frames are kept") from e

    def states(self, plan: ResumePlan, before: int, after: int | None = None):
        """Yield (frame, arrays) for the readable states of frames < *before* (and >
        *after*), newest first. Each unreadable checkpoint is noted and skipped."""
        import numpy as np

        data = self.read_manifest() or {"checkpoints": {}}
        low = float("-inf") if after is None else after
        for frame in sorted((f for f in plan.checkpoints if low < f < before), reverse=True):
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


def release(state) -> None:
    """Hand a written checkpoint's host memory back (``kernels.checkpoint.HostState``;
    a plain dict has none)."""
    give_back = getattr(state, "release", None)
    if give_back is not None:
        give_back()
