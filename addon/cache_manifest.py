"""Reading a bake cache: its manifest, trusted only as far as it selects names this
cache would write, and the frames it vouches for (size and CRC-32 of each file). The
cache's layout and trust rules are ``cache.py``'s; ``CacheReader`` is what a panel or the
frame loader needs (``shown_frame``), ``cache.BakeCache`` adds the writing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from . import fsio
from .cache_folder import CacheError, ForeignCacheError, _regular_file

MANIFEST = "voxfx_manifest.json"
FORMAT = 2
CHECKPOINT_EVERY = 10  # default: a state file kept every 10 frames (plus the latest)
SUFFIXES = {"snow": (".ply", ".vxp", ".vdb", ".exr"), "flip": (".ply", ".vxp", ".vdb"), "voxelize": (".vdb",)}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_HEX8 = re.compile(r"[0-9a-f]{8}")
_LEGACY_CHECKPOINT = "state.npz"  # format 1 kept one checkpoint under this name


class CacheReader:
    """The cache of one bake, read: a folder, a base name, a manifest."""

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
        self.checkpoint_every = max(0, int(checkpoint_every))  # 0: the newest state only
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
        return self.folder / self.frame_name(frame, suffix)

    def frame_name(self, frame: int, suffix: str) -> str:
        """``frame_path``'s name, without a Path: every manifest read checks every frame's
        names (a Path each made long bakes quadratic in Path objects)."""
        return f"{self.name}_{int(frame):04d}{suffix}"

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
            if (m is None or int(m.group(1)) != frame or name != self.frame_name(frame, m.group(2))
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


def _is_record(record) -> bool:
    return (isinstance(record, (list, tuple)) and len(record) == 2 and type(record[0]) is int
            and record[0] >= 0 and isinstance(record[1], str) and bool(_HEX8.fullmatch(record[1])))


# --------------------------------------------------------------------------- loading frames

_shown_memo: dict = {}  # manifest path → ((mtime_ns, size), CacheReader, manifest)
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
        cache = CacheReader(folder, str(head.get("name")), str(head.get("kind")))
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
    baked = [f for f, files in data["frames"].items() if cache.frame_name(f, suffix) in files]
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
