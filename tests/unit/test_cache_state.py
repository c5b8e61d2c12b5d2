"""A checkpoint's file written in one pass (``addon/cache_state.py``): ``np.load`` reads
back every array bit for bit (large ones written from their own memory, small ones, 0-d
scalars, views that are not contiguous), ZIP's own CRC-32s check out, the record counted
while writing is the one ``fsio.checksum`` reads from the file, and the old write
(``legacy_write``) holds the same arrays."""

import zipfile

import numpy as np
import pytest

from voxfx.addon import cache_state, fsio


def state():
    rng = np.random.default_rng(7)
    big = rng.standard_normal((300_000, 3)).astype(np.float32)  # 3.6 MB: one direct write
    return {"pos": big, "vel": -big, "keys": rng.integers(0, 1 << 40, 1000, dtype=np.int64),
            "mask": rng.integers(0, 2, (40_000, 512), dtype=np.uint8), "t": np.float64(0.125),
            "frames": np.int64(12), "strided": big[::2, 1], "empty": np.zeros((0, 3), np.int32)}


def test_a_checkpoint_written_in_one_pass_reads_back_bit_for_bit(tmp_path):
    s = state()
    path = tmp_path / "liquid_state_0012.npz"
    record = cache_state.write_npz(path, 12, s)
    assert record == fsio.checksum(path)
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None  # every member's CRC-32
    with np.load(path, allow_pickle=False) as z:
        back = {k: z[k] for k in z.files}
    assert int(back.pop("frame")) == 12 and sorted(back) == sorted(s)
    for key, value in s.items():
        assert back[key].dtype == np.asarray(value).dtype and np.array_equal(back[key], value), key


def test_the_staged_checkpoint_holds_what_the_legacy_write_held(tmp_path):
    s = state()
    final = tmp_path / "liquid_state_0003.npz"
    staged = cache_state.stage(final, 3, s)
    assert fsio.is_temporary(staged[0].name) and not final.exists()  # nothing but a temporary until committed
    assert cache_state.commit(final, staged, 3) == fsio.checksum(final) and not staged[0].exists()
    old = tmp_path / "old" / final.name
    old.parent.mkdir()
    cache_state.legacy_write(old, 3, s)
    with np.load(final) as a, np.load(old) as b:
        assert sorted(a.files) == sorted(b.files)
        assert all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a.files)


def test_crc32_combine_is_the_crc_of_the_concatenation():
    import zlib

    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, 3 * cache_state.CHUNK + 12345, dtype=np.uint8).tobytes()
    for cut in (0, 1, 7, 4096, cache_state.CHUNK, len(data) - 1, len(data)):
        a, b = data[:cut], data[cut:]
        assert cache_state.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(data), cut
    assert cache_state.parallel_crc32(memoryview(data)) == zlib.crc32(data)


def test_the_checkpoint_way_defaults_to_durable_before_the_next_step(monkeypatch):
    """Issue 21 §1's promise by default (a kill costs at most the frame being simulated):
    ``before_step`` with ``VOXFX_CHECKPOINT`` unset or empty; ``overlap`` only when asked for;
    a misspelt way is refused, not taken for another."""
    from voxfx.kernels.checkpoint import checkpoint_mode

    monkeypatch.delenv("VOXFX_CHECKPOINT", raising=False)
    assert checkpoint_mode() == "before_step"
    monkeypatch.setenv("VOXFX_CHECKPOINT", "")
    assert checkpoint_mode() == "before_step"
    monkeypatch.setenv("VOXFX_CHECKPOINT", " Overlap ")
    assert checkpoint_mode() == "overlap"
    monkeypatch.setenv("VOXFX_CHECKPOINT", "overlapped")
    with pytest.raises(ValueError, match="VOXFX_CHECKPOINT"):
        checkpoint_mode()
