"""The look-back scans' tiles read once into registers (``VOXFX_SPARSE_SCAN_WAY`` "1":
scan_lookback_wide and scan_lookback_pair_wide, sparse_pressure_scan; helper s22a; the host
harness: tests/unit/test_cuda_sparse_pressure_scan_wide_host.py) against cupy.cumsum and the
"0" kernels on the device's real blocks (thousands of tiles in flight: the 32-lane look-back
windows over published aggregates, 16-byte aligned rows and not), launched in turn on the
state each leaves; every level's sizes and tables the same either way; and a dam break's
pressure and stats bit for bit (launch by launch, the set-up graph, the held levels)."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_fuse_gpu import assert_setups_agree
from tests.pressure_solves import assert_dam_break_ways_agree
from voxfx.kernels.flip import sparse_pressure_scan, sparse_pressure_setup

_WAY = "VOXFX_SPARSE_SCAN_WAY"


def _used_words(way, rows, n):
    """The status words a scan of (rows, n) publishes with *way* (its tiles)."""
    tile = sparse_pressure_scan._WIDE_TILE if way == "1" else sparse_pressure_scan.scan_tile(n, 8)
    return rows * -(-n // tile)


# 3 × 1,884,160 and 3 × 1,743,360: the 8M row's level 0 (its flags: three rows of the pool's
# cells); 2 × 300,001: an unaligned second row; 3 × 6,000,000: past the status words at 4,096
# items a tile (the "0" kernel instead).
@pytest.mark.parametrize("rows, n", [(3, 1_884_160), (3, 1_743_360), (1, 5_000_000), (2, 300_001), (3, 1000),
                                     (1, 1), (2, 4097), (3, 6_000_000)])
def test_gpu_wide_scan_is_the_cumulative_sum(monkeypatch, rows, n):
    """inclusive_scan with "1", three launches in turn (the last with zeros and a larger range):
    cupy.cumsum's integers and the "0" kernel's, one launch each (ctrl's epoch one on), and the
    status words of "1"'s tiles published by it (the words past them, that "0"'s 2,048-item
    tiles would use, not)."""
    import cupy

    monkeypatch.setattr(sparse_pressure_setup, "SCAN", "lookback")
    seed = int(np.random.default_rng().integers(1 << 30))
    rng = np.random.default_rng(seed)
    status, ctrl = sparse_pressure_scan.lookback_state(cupy)
    fits = _used_words("1", rows, n) <= sparse_pressure_scan._LOOKBACK_WORDS
    for launch in range(3):
        a = rng.integers(0, 2 + 3 * (launch == 2), (rows, n)).astype(np.int32)
        if launch == 2:
            a[:, rng.integers(0, n, 5)] = 0
        a_d = cupy.asarray(a if rows > 1 else a[0])
        monkeypatch.setenv(_WAY, "1")
        epoch = int(ctrl.get()[0])
        got = sparse_pressure_setup.inclusive_scan(a_d).reshape(rows, n)
        assert list(ctrl.get()) == [epoch + 1, 0, 0], f"seed {seed}"
        epochs = status.get() >> np.uint64(33)
        if fits:
            used = _used_words("1", rows, n)
            assert (epochs[:used] == epoch).all(), f"seed {seed}"
            assert (epochs[used:_used_words("0", rows, n)] != epoch).all(), f"seed {seed}"
        monkeypatch.setenv(_WAY, "0")
        old = sparse_pressure_setup.inclusive_scan(a_d).reshape(rows, n)
        want = cupy.cumsum(cupy.asarray(a), axis=1, dtype=cupy.int32)
        assert cupy.array_equal(got, want) and cupy.array_equal(got, old), f"seed {seed}, launch {launch}"


@pytest.mark.parametrize("rows_a, n_a, n_b", [(2, 210_000, 210_000), (2, 26_000, 26_000), (2, 5000, 5000), (2, 1, 1),
                                              (1, 70, 3000), (3, 2049, 17), (2, 1_000_001, 999_999),
                                              (2, 3_000_000, 3_000_000)])
def test_gpu_wide_paired_scan_is_each_sets_cumsum(monkeypatch, rows_a, n_a, n_b):
    """inclusive_scans with "1" over random 0/1 rows (the coarse levels' shapes at 8M: a level's
    two flag rows and the next level's take; uneven and unaligned ones; the last past the status
    words: two scans), three launches in turn: each set equals cupy.cumsum and "0"'s."""
    import cupy

    monkeypatch.setattr(sparse_pressure_setup, "SCAN", "lookback")
    rng = np.random.default_rng(n_a + n_b)
    for _ in range(3):
        a = cupy.asarray(rng.integers(0, 2, (rows_a, n_a)).astype(np.int32))
        b = cupy.asarray(rng.integers(0, 2, n_b).astype(np.int32))
        outs = {}
        for way in ("1", "0"):
            monkeypatch.setenv(_WAY, way)
            out_a, out_b = cupy.full(a.shape, -7, cupy.int32), cupy.full(b.shape, -7, cupy.int32)
            outs[way] = sparse_pressure_scan.inclusive_scans(a, out_a, b, out_b)
        assert cupy.array_equal(outs["1"][0], cupy.cumsum(a, axis=1, dtype=cupy.int32))
        assert cupy.array_equal(outs["1"][1], cupy.cumsum(b, dtype=cupy.int32))
        assert cupy.array_equal(outs["1"][0], outs["0"][0]) and cupy.array_equal(outs["1"][1], outs["0"][1])


@pytest.mark.parametrize("restrict", ["scatter", "search"])
@pytest.mark.parametrize("tail_bound", [0, 16384])
@pytest.mark.parametrize("ahead", [False, True])
def test_gpu_wide_scans_give_the_same_tables(monkeypatch, restrict, tail_bound, ahead):
    """Two set-ups of one random grid (the second launched ahead where *ahead*) with each way:
    the workspace's cnt and span rows and every level's m, nbr, diag, up and down the same."""
    assert_setups_agree(monkeypatch, _WAY, restrict, tail_bound, ahead)


@pytest.mark.parametrize("setting", [(), (("VOXFX_SPARSE_SETUP_GRAPH", "1"),), (("VOXFX_SPARSE_MG_KEEP", "3"),),
                                     (("VOXFX_SPARSE_SCAN_JOIN", "0"),)])
def test_gpu_wide_scans_give_the_dam_breaks_pressure_bit_for_bit(monkeypatch, setting):
    """A dam break (warm start, table reuse, the ahead set-up), three frames, every coarse level
    launch by launch and with the default tail, with the set-up graph (its key carries the way),
    the held levels or the unpaired scans on: every solve's pressure and stats the same."""
    import cupy

    for name, value in setting:
        monkeypatch.setenv(name, value)
    assert_dam_break_ways_agree(monkeypatch, cupy, lambda way: monkeypatch.setenv(_WAY, way), ("0", "1"))
