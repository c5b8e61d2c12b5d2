"""Bake cache: manifest, verified frame sets, resume, free, and failing disks.

Full and read-only disks are real: small tmpfs mounts (root only; skipped elsewhere).
Crafted caches (what a stranger's cache folder could hold) are in test_cache_trust.py,
kills and I/O errors at every write step in test_cache_faults.py.
"""

import json
import os
import subprocess
import uuid

import numpy as np
import pytest

from voxfx.addon.cache import MANIFEST, BakeCache, CacheError, ForeignCacheError, settings_hash


def npy_writer(value):
    def write(path):
        with open(path, "wb") as f:  # np.savez would append .npz to a temp name
            np.save(f, np.full(16, value, dtype=np.float32))
    return write


def text_writer(frame):
    def write(path):
        with open(path, "w") as f:
            f.write(str(frame))
    return write


def cache_at(folder, name="liquid"):
    return BakeCache(folder, name, kind="test", suffixes=(".npy", ".txt"))


def bake(cache, frames, settings=None, resume=True, fail_at=None):
    plan = cache.begin(settings or {"res": 32}, frames[0], frames[-1], resume=resume)
    for frame in plan.todo:
        if frame == fail_at:
            raise KeyboardInterrupt  # a crash/cancel between frames
        cache.write_frame(frame, {".npy": npy_writer(frame), ".txt": text_writer(frame)})
    return plan


def test_settings_hash_is_order_independent_and_sensitive():
    assert settings_hash({"a": 1, "b": 2}) == settings_hash({"b": 2, "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})


def test_frames_are_written_with_sequence_names_sizes_and_checksums(tmp_path):
    c = cache_at(tmp_path / "bake")
    assert bake(c, [1, 2, 3]).todo == [1, 2, 3]
    names = sorted(p.name for p in (tmp_path / "bake").iterdir())
    assert names == sorted([MANIFEST] + [f"liquid_{f:04d}{s}" for f in (1, 2, 3) for s in (".npy", ".txt")])
    assert c.last_complete_frame() == 3
    m = json.loads((tmp_path / "bake" / MANIFEST).read_text())
    assert m["frame_start"] == 1 and m["frame_end"] == 3 and m["addon_version"] == "0.1.0"
    assert m["settings_hash"] == settings_hash({"res": 32})
    size, crc = m["frames"]["2"]["liquid_0002.txt"]
    assert size == 1 and crc == f"{__import__('zlib').crc32(b'2'):08x}"
    assert np.load(c.frame_path(2, ".npy"))[0] == 2


def test_resume_continues_after_last_complete_frame(tmp_path):
    c = cache_at(tmp_path, "snow")
    with pytest.raises(KeyboardInterrupt):
        bake(c, list(range(1, 11)), fail_at=5)
    assert c.last_complete_frame() == 4
    assert bake(c, list(range(1, 11))).todo == [5, 6, 7, 8, 9, 10]
    assert c.last_complete_frame() == 10
    assert bake(c, list(range(1, 11))).todo == []


def test_changed_settings_restart_drop_old_frames_and_say_so(tmp_path):
    c = cache_at(tmp_path, "snow")
    bake(c, [1, 2, 3])
    c = cache_at(tmp_path, "snow")
    assert bake(c, [1, 2], settings={"res": 64}).todo == [1, 2]
    assert not c.frame_path(3, ".npy").exists()  # frame 3 of the old bake is gone
    assert c.last_complete_frame() == 2
    assert any("settings changed" in n for n in c.notes)


def test_missing_truncated_or_altered_frame_is_rebaked(tmp_path):
    c = cache_at(tmp_path, "v")
    bake(c, [1, 2, 3, 4, 5, 6])
    c.frame_path(2, ".txt").unlink()
    with open(c.frame_path(4, ".npy"), "r+b") as f:
        f.truncate(40)
    with open(c.frame_path(5, ".npy"), "r+b") as f:  # same size, one byte flipped
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert c.last_complete_frame() == 1
    assert c.frames_done() == [1, 3, 6]
    assert "liquid" not in (c.verify_frame(4) or "") and "40 bytes" in c.verify_frame(4)
    assert "damaged" in c.verify_frame(5)
    c2 = cache_at(tmp_path, "v")
    assert bake(c2, [1, 2, 3, 4, 5, 6]).todo == [2, 4, 5]
    assert any("3 baked frames are damaged or missing" in n for n in c2.notes)
    assert c2.frames_done() == [1, 2, 3, 4, 5, 6]


def test_failed_writer_leaves_nothing_of_the_frame(tmp_path):
    c = cache_at(tmp_path, "v")
    c.begin({}, 1, 2)

    def broken(path):
        with open(path, "wb") as f:
            f.write(b"half")
        raise RuntimeError("kernel blew up")

    with pytest.raises(RuntimeError):
        c.write_frame(1, {".npy": npy_writer(1), ".txt": broken})
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST]
    assert c.last_complete_frame() is None


def test_a_writer_for_a_foreign_file_type_is_refused(tmp_path):
    c = BakeCache(tmp_path, "liquid", kind="flip")
    c.begin({}, 1, 2)
    with pytest.raises(CacheError, match="holds .ply, .vxp, .vdb files"):
        c.write_frame(1, {".sh": text_writer(1)})


def test_free_removes_exactly_its_own_name_patterns(tmp_path):
    folder = tmp_path / "shared"
    c = cache_at(folder)
    bake(c, [1, 2])
    (folder / "notes.txt").write_text("mine")
    (folder / "liquid_final.txt").write_text("not a frame name")
    (folder / "liquid_0099.npy").write_text("an unrecorded frame (a crash between rename and record)")
    (folder / "snow_0001.npy").write_text("another bake's frame")
    (folder / ".voxfx-tmp.0123456789ab.liquid_0003.npy").write_text("a temporary left by a kill")
    other = cache_at(folder / "sub")
    bake(other, [1])
    assert c.free() == 7  # 4 frame files, the unrecorded frame, the temporary, the manifest
    assert sorted(p.name for p in folder.iterdir()) == ["liquid_final.txt", "notes.txt", "snow_0001.npy", "sub"]
    assert other.last_complete_frame() == 1
    other.free()
    assert not (folder / "sub").exists()  # empty after freeing: folder removed too


def test_foreign_manifest_is_refused_by_bake_and_free(tmp_path):
    bake(cache_at(tmp_path, "snow"), [1])
    with pytest.raises(ForeignCacheError, match="another bake"):
        cache_at(tmp_path, "liquid").begin({}, 1, 2)
    with pytest.raises(ForeignCacheError, match="another bake"):
        cache_at(tmp_path, "snow").__class__(tmp_path, "snow", kind="flip").free()
    assert (tmp_path / "snow_0001.npy").is_file()


@pytest.mark.parametrize("name", ["../evil", "..", ".", ".hidden", "a/b", "", "x" * 200, "café"])
def test_bad_cache_names_are_clear_errors(tmp_path, name):
    with pytest.raises(CacheError, match="letter or digit"):
        cache_at(tmp_path, name)


def test_empty_range_is_a_clear_error(tmp_path):
    with pytest.raises(CacheError, match="empty"):
        cache_at(tmp_path, "ok").begin({}, 5, 4)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 256 KiB tmpfs: a real disk that fills up."""
    mnt = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_is_a_clear_error_with_nothing_half_written(small_tmpfs):
    c = BakeCache(small_tmpfs / "bake", "liquid", kind="test", suffixes=(".bin",))
    c.begin({}, 1, 100)
    big = lambda path: open(path, "wb").write(os.urandom(150 * 1024))  # noqa: E731
    c.write_frame(1, {".bin": big})
    with pytest.raises(CacheError, match="full"):
        c.write_frame(2, {".bin": big})
    names = sorted(p.name for p in (small_tmpfs / "bake").iterdir())
    assert names == sorted([MANIFEST, "liquid_0001.bin"])  # frame 2 left no temporary file
    assert c.last_complete_frame() == 1


@pytest.mark.parametrize("mode", ["", "legacy"], ids=["staged", "legacy"])
def test_full_disk_at_the_checkpoint_keeps_the_frames_and_leaves_no_temporary(small_tmpfs, monkeypatch, mode):
    monkeypatch.setenv("VOXFX_CHECKPOINT", mode)
    c = BakeCache(small_tmpfs / "bake", "liquid", kind="test", suffixes=(".bin",))
    c.begin({}, 1, 100)
    small = lambda path: open(path, "wb").write(os.urandom(1024))  # noqa: E731
    c.write_frame(1, {".bin": small}, state={"x": np.zeros(1000, np.float32)})
    with pytest.raises(CacheError, match="full"):
        c.write_frame(2, {".bin": small}, state={"x": np.zeros(200_000, np.float32)})
    names = sorted(p.name for p in (small_tmpfs / "bake").iterdir())
    # staged beside the file (the default), the state failed before frame 2's file was
    # renamed; written after it (legacy), the file was renamed but is not recorded
    kept = [MANIFEST, "liquid_0001.bin", "liquid_state_0001.npz"] + (["liquid_0002.bin"] if mode else [])
    assert names == sorted(kept)
    assert c.frames_done() == [1]
    plan = BakeCache(small_tmpfs / "bake", "liquid", kind="test", suffixes=(".bin",)).begin({}, 1, 100)
    assert plan.todo[0] == 2 and plan.checkpoints == [1]


def test_read_only_folder_is_refused_before_baking(small_tmpfs):
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    c = cache_at(small_tmpfs)
    with pytest.raises(CacheError, match="not writable|Read-only"):
        c.begin({}, 1, 10)


def test_free_on_a_read_only_folder_removes_nothing_and_says_so(small_tmpfs):
    c = cache_at(small_tmpfs / "bake")
    bake(c, [1, 2])
    before = sorted(p.name for p in (small_tmpfs / "bake").iterdir())
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    with pytest.raises(CacheError, match="nothing was freed"):
        c.free()
    assert sorted(p.name for p in (small_tmpfs / "bake").iterdir()) == before


def test_checkpoints_every_k_frames_and_the_newest_are_kept(tmp_path):
    c = BakeCache(tmp_path, "liquid", kind="test", suffixes=(".txt",), checkpoint_every=4)
    plan = c.begin({}, 1, 11)
    for frame in plan.todo:
        c.write_frame(frame, {".txt": text_writer(frame)}, state={"frame_value": np.int64(frame)})
    states = sorted(p.name for p in tmp_path.glob("liquid_state_*.npz"))
    assert states == [f"liquid_state_{f:04d}.npz" for f in (1, 5, 9, 11)]
    c.frame_path(7, ".txt").unlink()  # a damaged frame: resume from the nearest state before it
    plan = c.begin({}, 1, 11)
    assert plan.todo == [7] and plan.checkpoints == [1, 5, 9, 11]
    frame, state = next(c.states(plan, before=7))
    assert frame == 5 and int(state["frame_value"]) == 5


def test_checkpoint_every_0_keeps_only_the_last_complete_frames_state(tmp_path):
    c = BakeCache(tmp_path, "liquid", kind="test", suffixes=(".txt",), checkpoint_every=0)
    plan = c.begin({}, 1, 7)
    for frame in plan.todo:
        c.write_frame(frame, {".txt": text_writer(frame)}, state={"frame_value": np.int64(frame)})
        assert sorted(p.name for p in tmp_path.glob("liquid_state_*.npz")) == [f"liquid_state_{frame:04d}.npz"]
    c.frame_path(3, ".txt").unlink()  # a damaged frame: no state before it, the simulation starts again
    plan = c.begin({}, 1, 7)
    assert plan.todo == [3] and plan.checkpoints == [7]
    assert list(c.states(plan, before=3)) == []


def test_unreadable_checkpoints_are_noted_and_skipped(tmp_path):
    c = BakeCache(tmp_path, "liquid", kind="test", suffixes=(".txt",), checkpoint_every=2)
    plan = c.begin({}, 1, 6)
    for frame in plan.todo:
        c.write_frame(frame, {".txt": text_writer(frame)}, state={"v": np.int64(frame)})
    c.frame_path(6, ".txt").unlink()
    with open(c.checkpoint_path(5), "r+b") as f:
        f.truncate(30)
    plan = c.begin({}, 1, 6)
    assert plan.todo == [6] and plan.checkpoints == [1, 3, 6]  # 5 fails its size check
    frame, _ = next(c.states(plan, before=6))
    assert frame == 3


def test_panel_status_names_damaged_frames_by_number(tmp_path):
    from voxfx.addon.cache import frame_ranges
    from voxfx.addon.cache_status import status_line

    assert frame_ranges([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"
    assert status_line(tmp_path / "none", "liquid", "test", now=0.0, suffixes=(".npy",)) is None
    c = cache_at(tmp_path / "bake")
    bake(c, [1, 2, 3, 4, 5])
    assert status_line(tmp_path / "bake", "liquid", "test", now=10.0, suffixes=(".npy", ".txt")) == "Baked frames 1-5"
    c.frame_path(2, ".txt").unlink()
    with open(c.frame_path(4, ".npy"), "r+b") as f:
        f.truncate(10)
    # redrawn within 2 s
    assert status_line(tmp_path / "bake", "liquid", "test", now=11.0, suffixes=(".npy", ".txt")) == "Baked frames 1-5"
    assert status_line(tmp_path / "bake", "liquid", "test", now=12.5, suffixes=(".npy", ".txt")) == \
        "Frames 2, 4 damaged or missing: Bake repairs them"
