"""A cache folder is untrusted input: what a stranger's manifest could make VoxFX do.

Each crafted manifest names files outside the cache (``..``, absolute paths, a symbolic
link leaving the folder, another bake's frames) or is malformed. A sentinel file outside
the cache must survive Free, Resume and verification, no file outside the cache may even
be opened, and each case gives one clear note or error. File access is watched with
Python's audit hooks (``open``, ``os.remove``, ``os.rename``, ``os.scandir``...): the real
calls, not a mock.
"""

import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from voxfx.addon.cache import MANIFEST, BakeCache, CacheError

_watch: list | None = None
_WATCHED = {"open", "os.remove", "os.rename", "os.replace", "os.unlink", "os.scandir", "os.listdir",
            "os.chmod", "os.truncate", "shutil.rmtree", "os.rmdir", "os.symlink", "os.link"}


def _hook(event, args):
    if _watch is not None and event in _WATCHED and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if not path.endswith((".py", ".pyc")):  # Python importing its own modules
            _watch.append((event, path))


sys.addaudithook(_hook)


class Watch:
    """Paths touched inside the with-block, resolved (symbolic links followed)."""

    def __enter__(self):
        global _watch
        _watch = []
        return self

    def __exit__(self, *exc):
        global _watch
        self.events, _watch = _watch, None

    def outside(self, folder: Path):
        folder = folder.resolve()
        bad = []
        for event, path in self.events:
            p = Path(path)
            real = p.resolve() if p.is_absolute() else (Path.cwd() / p).resolve()
            if folder not in real.parents and real != folder:
                bad.append((event, path))
        return bad


def crc(data: bytes) -> str:
    return f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"


@pytest.fixture
def setup(tmp_path):
    """A liquid cache of 3 frames, and a precious file outside it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    precious = victim / "precious.txt"
    precious.write_bytes(b"a thesis")
    folder = tmp_path / "project" / "voxfx_cache" / "liquid"
    cache = BakeCache(folder, "liquid", kind="flip")
    plan = cache.begin({"res": 8}, 1, 3)
    for frame in plan.todo:
        cache.write_frame(frame, {".ply": lambda p, f=frame: Path(p).write_bytes(b"ply %d" % f)},
                          state={"v": np.int64(frame)})
    return folder, precious


def edit_manifest(folder, change):
    path = folder / MANIFEST
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def entry_for(path: Path):
    data = path.read_bytes()
    return [len(data), crc(data)]


def run_everything(folder):
    """What a user can do with a cache: look at it, resume a bake, free it."""
    notes, errors = {}, []
    for action in ("verify", "resume", "free"):
        cache = BakeCache(folder, "liquid", kind="flip")
        try:
            if action == "verify":
                cache.frames_done()
                cache.last_complete_frame()
            elif action == "resume":
                plan = cache.begin({"res": 8}, 1, 3)
                for frame in plan.todo:
                    cache.write_frame(frame, {".ply": lambda p, f=frame: Path(p).write_bytes(b"ply %d" % f)})
                list(cache.states(plan, before=4))
            else:
                cache.free()
        except CacheError as e:
            errors.append(str(e))
        notes[action] = cache.notes
    return notes, errors


CRAFTED = {
    "dotdot": lambda precious: {"2": {"../../../victim/precious.txt": entry_for(precious)}},
    "absolute": lambda precious: {"2": {str(precious): entry_for(precious)}},
    "dotdot_with_our_pattern": lambda precious: {"2": {"../../../victim/liquid_0002.ply": [1, "00000000"]}},
    "another_bakes_frame": lambda precious: {"2": {"snow_0002.ply": [1, "00000000"]}},
    "wrong_frame_number": lambda precious: {"2": {"liquid_0003.ply": [1, "00000000"]}},
    "foreign_suffix": lambda precious: {"2": {"liquid_0002.sh": [1, "00000000"]}},
    "list_not_dict": lambda precious: {"2": ["liquid_0002.ply"]},
    "record_wrong_types": lambda precious: {"2": {"liquid_0002.ply": ["7", 7]}},
    "frame_key_not_a_number": lambda precious: {"../x": {"liquid_0002.ply": [1, "00000000"]}},
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_frame_entries_touch_nothing_outside(setup, case):
    folder, precious = setup
    edit_manifest(folder, lambda d: d["frames"].update(CRAFTED[case](precious)))
    with Watch() as w:
        notes, errors = run_everything(folder)
    assert precious.read_bytes() == b"a thesis"
    assert w.outside(folder) == [], w.outside(folder)
    assert not errors, errors
    ignored = {action: [n for n in said if "not this cache's own files" in n] for action, said in notes.items()}
    assert len(ignored["verify"]) == 1 and len(ignored["resume"]) == 1  # said once, clearly
    assert ignored["free"] == []  # the resumed bake's manifest no longer holds the entry


def test_crafted_checkpoint_entry_is_ignored(setup):
    folder, precious = setup
    edit_manifest(folder, lambda d: d["checkpoints"].update({"../../victim/precious": entry_for(precious)}))
    with Watch() as w:
        notes, errors = run_everything(folder)
    assert precious.read_bytes() == b"a thesis" and w.outside(folder) == [] and not errors
    assert any("not this cache's own files" in n for n in notes["verify"])


def test_symlinked_frame_leaving_the_folder_is_never_followed_or_removed(setup):
    folder, precious = setup
    (folder / "liquid_0002.ply").unlink()
    os.symlink(precious, folder / "liquid_0002.ply")
    edit_manifest(folder, lambda d: d["frames"].update({"2": {"liquid_0002.ply": entry_for(precious)}}))
    cache = BakeCache(folder, "liquid", kind="flip")
    with Watch() as w:
        assert "not a plain file" in cache.verify_frame(2)
        assert cache.frames_done() == [1, 3]
    assert w.outside(folder) == []
    # Resume replaces the link by a real frame (a rename never writes through a link)
    plan = BakeCache(folder, "liquid", kind="flip").begin({"res": 8}, 1, 3)
    assert plan.todo == [2]
    BakeCache(folder, "liquid", kind="flip").write_frame(2, {".ply": lambda p: Path(p).write_bytes(b"ply 2")})
    assert not (folder / "liquid_0002.ply").is_symlink()
    assert precious.read_bytes() == b"a thesis"


def test_free_leaves_a_symlink_and_its_target(setup):
    folder, precious = setup
    os.symlink(precious, folder / "liquid_0009.ply")
    cache = BakeCache(folder, "liquid", kind="flip")
    with Watch() as w:
        cache.free()
    assert precious.read_bytes() == b"a thesis" and (folder / "liquid_0009.ply").is_symlink()
    assert w.outside(folder) == []
    assert any("not plain files" in n for n in cache.notes)


@pytest.mark.parametrize("text", ["{not json", "[]", '"a string"', "null", json.dumps({"name": "liquid"})])
def test_unreadable_manifest_is_one_clear_line_and_free_still_works(setup, text):
    folder, precious = setup
    (folder / MANIFEST).write_text(text)
    cache = BakeCache(folder, "liquid", kind="flip")
    if text.startswith("{") and "name" in text:
        with pytest.raises(CacheError, match="another VoxFX version or damaged"):
            cache.frames_done()
    else:
        with pytest.raises(CacheError, match="cannot be read"):
            cache.frames_done()
    plan = BakeCache(folder, "liquid", kind="flip").begin({"res": 8}, 1, 3)  # starts over, with a note
    assert plan.todo == [1, 2, 3] and len(plan.notes) == 1
    assert BakeCache(folder, "liquid", kind="flip").free() > 0
    assert precious.read_bytes() == b"a thesis"


def test_manifest_that_is_a_symlink_is_not_read(setup, tmp_path):
    folder, _ = setup
    elsewhere = tmp_path / "other.json"
    (folder / MANIFEST).rename(elsewhere)
    os.symlink(elsewhere, folder / MANIFEST)
    with Watch() as w, pytest.raises(CacheError, match="not a plain file"):
        BakeCache(folder, "liquid", kind="flip").frames_done()
    assert w.outside(folder) == []


def test_object_array_checkpoint_is_refused_not_unpickled(setup):
    folder, _ = setup
    cache = BakeCache(folder, "liquid", kind="flip")
    path = cache.checkpoint_path(3)
    with open(path, "wb") as f:
        np.savez(f, frame=np.int64(3), v=np.array([object()], dtype=object))
    edit_manifest(folder, lambda d: d["checkpoints"].update({"3": entry_for(path)}))
    cache.frame_path(3, ".ply").unlink()  # frame 3 to do: restore from the state of frame 2
    plan = cache.begin({"res": 8}, 1, 3)
    assert plan.todo == [3]
    states = list(cache.states(plan, before=4))
    assert [f for f, _ in states] == [1]  # 3 refused (pickle), 2 was pruned, 1 kept
    assert any("checkpoint of frame 3 is unusable" in n and "unreadable" in n for n in cache.notes)
