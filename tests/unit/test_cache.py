"""Bake cache: manifest, atomic frame sets, resume, free, and failing disks.

Full and read-only disks are real: small tmpfs mounts (root only; skipped elsewhere).
"""

import json
import os
import subprocess
import uuid

import numpy as np
import pytest

from voxfx.addon.cache import MANIFEST, BakeCache, CacheError, settings_hash


def npz_writer(value):
    def write(path):
        with open(path, "wb") as f:  # np.savez would append .npz to a temp name
            np.save(f, np.full(16, value, dtype=np.float32))
    return write


def bake(cache, frames, settings=None, resume=True, fail_at=None):
    first = cache.begin(settings or {"res": 32}, frames[0], frames[-1], resume=resume)
    for frame in range(first, frames[-1] + 1):
        if frame == fail_at:
            raise KeyboardInterrupt  # a crash/cancel between frames
        cache.write_frame(frame, {".npy": npz_writer(frame), ".txt": lambda p, f=frame: open(p, "w").write(str(f))})
    return first


def test_settings_hash_is_order_independent_and_sensitive():
    assert settings_hash({"a": 1, "b": 2}) == settings_hash({"b": 2, "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})


def test_frames_are_written_with_sequence_names_and_recorded(tmp_path):
    c = BakeCache(tmp_path / "bake", "liquid", kind="flip")
    assert bake(c, [1, 2, 3]) == 1
    names = sorted(p.name for p in (tmp_path / "bake").iterdir())
    assert names == sorted([MANIFEST] + [f"liquid_{f:04d}{s}" for f in (1, 2, 3) for s in (".npy", ".txt")])
    assert c.last_complete_frame() == 3
    m = json.loads((tmp_path / "bake" / MANIFEST).read_text())
    assert m["frame_start"] == 1 and m["frame_end"] == 3 and m["addon_version"] == "0.1.0"
    assert m["settings_hash"] == settings_hash({"res": 32})
    assert np.load(c.frame_path(2, ".npy"))[0] == 2


def test_resume_continues_after_last_complete_frame(tmp_path):
    c = BakeCache(tmp_path, "snow", kind="snow")
    with pytest.raises(KeyboardInterrupt):
        bake(c, list(range(1, 11)), fail_at=5)
    assert c.last_complete_frame() == 4
    assert bake(c, list(range(1, 11))) == 5
    assert c.last_complete_frame() == 10


def test_changed_settings_restart_and_drop_old_frames(tmp_path):
    c = BakeCache(tmp_path, "snow", kind="snow")
    bake(c, [1, 2, 3])
    assert bake(c, [1, 2], settings={"res": 64}) == 1
    assert not c.frame_path(3, ".npy").exists()  # frame 3 of the old bake is gone
    assert c.last_complete_frame() == 2


def test_missing_frame_file_breaks_the_complete_run(tmp_path):
    c = BakeCache(tmp_path, "v", kind="voxelize")
    bake(c, [1, 2, 3, 4])
    c.frame_path(3, ".txt").unlink()
    assert c.last_complete_frame() == 2
    assert bake(c, [1, 2, 3, 4]) == 3


def test_failed_writer_leaves_nothing_of_the_frame(tmp_path):
    c = BakeCache(tmp_path, "v", kind="voxelize")
    c.begin({}, 1, 2)

    def broken(path):
        with open(path, "wb") as f:
            f.write(b"half")
        raise RuntimeError("kernel blew up")

    with pytest.raises(RuntimeError):
        c.write_frame(1, {".npy": npz_writer(1), ".vdb": broken})
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST]
    assert c.last_complete_frame() is None


def test_free_removes_only_its_own_files(tmp_path):
    folder = tmp_path / "shared"
    c = BakeCache(folder, "liquid", kind="flip")
    bake(c, [1, 2])
    (folder / "notes.txt").write_text("mine")
    (folder / "liquid_0099.vdb").write_text("a user file that looks like ours but is not recorded")
    other = BakeCache(folder / "sub", "liquid", kind="flip")
    bake(other, [1])
    c.free()
    assert sorted(p.name for p in folder.iterdir()) == ["liquid_0099.vdb", "notes.txt", "sub"]
    assert other.last_complete_frame() == 1
    other.free()
    assert not (folder / "sub").exists()  # empty after freeing: folder removed too


def test_foreign_manifest_is_refused(tmp_path):
    bake(BakeCache(tmp_path, "snow", kind="snow"), [1])
    with pytest.raises(CacheError, match="another bake"):
        BakeCache(tmp_path, "liquid", kind="flip").begin({}, 1, 2)


def test_bad_name_and_empty_range_are_clear_errors(tmp_path):
    with pytest.raises(CacheError, match="letters"):
        BakeCache(tmp_path, "../evil", kind="x")
    with pytest.raises(CacheError, match="empty"):
        BakeCache(tmp_path, "ok", kind="x").begin({}, 5, 4)


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
    c = BakeCache(small_tmpfs / "bake", "liquid", kind="flip")
    c.begin({}, 1, 100)
    big = lambda path: open(path, "wb").write(os.urandom(200 * 1024))  # noqa: E731
    c.write_frame(1, {".bin": big})
    with pytest.raises(CacheError, match="full"):
        c.write_frame(2, {".bin": big})
    names = sorted(p.name for p in (small_tmpfs / "bake").iterdir())
    assert names == sorted([MANIFEST, "liquid_0001.bin"])  # frame 2 left no temporary file
    assert c.last_complete_frame() == 1


def test_read_only_folder_is_refused_before_baking(small_tmpfs):
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    c = BakeCache(small_tmpfs, "liquid", kind="flip")
    with pytest.raises(CacheError, match="not writable|Read-only"):
        c.begin({}, 1, 10)
