"""The coarse levels' paired scans (``VOXFX_SPARSE_SCAN_JOIN`` "1", the default since session 22:
mgs_level_cells_coarsen and scan_lookback_pair, sparse_pressure_scan.inclusive_scans; helper h21m)
against the launches they replace ("0"; both kernels against theirs on the host in
tests/unit/test_cuda_sparse_pressure_scan_join_host.py): the paired scan equals cupy.cumsum on
each set (and falls back to two scans where it cannot take them); on fresh random scenes every
level's sizes and unknown spans and every table the same, launch by launch and with the
one-block tail, ahead of the read or after it, joined launches or not, either restriction,
through the set-up graph; and a dam break's pressure and stats bit for bit, with the held
levels too."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_fuse_gpu import assert_setups_agree
from tests.pressure_solves import assert_dam_break_ways_agree
from voxfx.kernels.flip import sparse_pressure_scan


@pytest.mark.parametrize("rows_a, n_a, n_b", [(2, 5000, 5000), (2, 1, 1), (1, 70, 3000), (3, 2049, 17),
                                              (2, 210_000, 210_000), (2, 3_000_000, 3_000_000)])
@pytest.mark.parametrize("floor", ["8", "32"])
def test_gpu_paired_scan_is_each_sets_cumsum(monkeypatch, rows_a, n_a, n_b, floor):
    """inclusive_scans over random 0/1 rows, three launches in turn (the status words reused):
    each set equals cupy.cumsum; at floor "8" the last shape's tiles overflow the status words
    (the two scans instead)."""
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_SCAN_TILE", floor)
    monkeypatch.setenv("VOXFX_SPARSE_SCAN_WAY", "0")  # the floor is scan_lookback_pair's (the wide pair: s22a's file)
    rng = np.random.default_rng(n_a + n_b)
    for _ in range(3):
        a = cupy.asarray(rng.integers(0, 2, (rows_a, n_a)).astype(np.int32))
        b = cupy.asarray(rng.integers(0, 2, n_b).astype(np.int32))
        out_a, out_b = cupy.full(a.shape, -7, cupy.int32), cupy.full(b.shape, -7, cupy.int32)
        sparse_pressure_scan.inclusive_scans(a, out_a, b, out_b)
        assert cupy.array_equal(out_a, cupy.cumsum(a, axis=1, dtype=cupy.int32))
        assert cupy.array_equal(out_b, cupy.cumsum(b, dtype=cupy.int32))


@pytest.mark.parametrize("fuse", ["1", "0"])
@pytest.mark.parametrize("restrict", ["scatter", "search"])
@pytest.mark.parametrize("tail_bound", [0, 16384])
@pytest.mark.parametrize("ahead", [False, True])
def test_gpu_paired_scans_give_the_same_tables(monkeypatch, fuse, restrict, tail_bound, ahead):
    """Two set-ups of one grid (the second launched ahead where *ahead*) with each way: the
    workspace's cnt and span rows and every level's m, nbr, diag, up and down the same."""
    monkeypatch.setenv("VOXFX_SPARSE_SETUP_FUSE", fuse)
    assert_setups_agree(monkeypatch, "VOXFX_SPARSE_SCAN_JOIN", restrict, tail_bound, ahead)


@pytest.mark.parametrize("setting", [(), (("VOXFX_SPARSE_SETUP_GRAPH", "1"),), (("VOXFX_SPARSE_MG_KEEP", "3"),),
                                     (("VOXFX_SPARSE_SETUP_FUSE", "0"),)])
def test_gpu_paired_scans_give_the_dam_breaks_pressure_bit_for_bit(monkeypatch, setting):
    """A dam break (the defaults: warm start, table reuse, the ahead set-up), three frames,
    with every coarse level launch by launch and with the default tail, and with the set-up
    graph, the held levels or the separate launches on: every solve's pressure and stats the
    same with either way."""
    import cupy

    for name, value in setting:
        monkeypatch.setenv(name, value)
    assert_dam_break_ways_agree(monkeypatch, cupy, lambda way: monkeypatch.setenv("VOXFX_SPARSE_SCAN_JOIN", way),
                                ("0", "1"))
