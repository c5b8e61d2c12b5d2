"""The coarse levels' paired scans (``VOXFX_SPARSE_SCAN_JOIN`` "1": mgs_level_cells_coarsen and
scan_lookback_pair, sparse_pressure_scan.inclusive_scans; helper h21m) against the launches
they replace ("0", the default; both kernels against theirs on the host in
tests/unit/test_cuda_sparse_pressure_scan_join_host.py): the paired scan equals cupy.cumsum on
each set (and falls back to two scans where it cannot take them); on fresh random scenes every
level's sizes and unknown spans and every table the same, launch by launch and with the
one-block tail, ahead of the read or after it, joined launches or not, either restriction,
through the set-up graph; and a dam break's pressure and stats bit for bit, with the held
levels too."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_ahead_gpu import _tables
from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.pressure_solves import assert_dam_break_ways_agree
from voxfx.kernels.flip import (sparse_pressure, sparse_pressure_gpu, sparse_pressure_scan, sparse_pressure_setup,
                                sparse_pressure_workspace)


@pytest.mark.parametrize("rows_a, n_a, n_b", [(2, 5000, 5000), (2, 1, 1), (1, 70, 3000), (3, 2049, 17),
                                              (2, 210_000, 210_000), (2, 3_000_000, 3_000_000)])
@pytest.mark.parametrize("floor", ["8", "32"])
def test_gpu_paired_scan_is_each_sets_cumsum(monkeypatch, rows_a, n_a, n_b, floor):
    """inclusive_scans over random 0/1 rows, three launches in turn (the status words reused):
    each set equals cupy.cumsum; at floor "8" the last shape's tiles overflow the status words
    (the two scans instead)."""
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_SCAN_TILE", floor)
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
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail_bound)  # 0: every level launch by launch
    monkeypatch.setattr(sparse_pressure_setup, "RESTRICT", restrict)
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setattr(sparse_pressure_workspace, "AHEAD", ahead)
    monkeypatch.setenv("VOXFX_SPARSE_SETUP_FUSE", fuse)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(seed), shape=(48, 40, 44), n=150000)
    got, sizes = {}, {}
    for way in ("0", "1"):
        monkeypatch.setenv("VOXFX_SPARSE_SCAN_JOIN", way)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        _, kind, _, _ = sparse_pressure.pressure_rhs(g, 0.01)
        _tables(g, kind, sparse_pressure_setup.unknowns(g, kind, (), ahead=True))
        level = sparse_pressure_setup.unknowns(g, kind, (), ahead=True)
        assert (level.prebuilt is not None) == ahead
        ws = sparse_pressure_workspace.workspace()
        count = len(ws.caps)
        sizes[way] = cupy.asnumpy(ws.sizes[:10 * count])
        got[way] = _tables(g, kind, level)
    sparse_pressure_gpu.release_gpu_solvers()
    assert np.array_equal(sizes["0"], sizes["1"]), f"seed {seed}"
    assert sizes["0"].size >= 40, f"seed {seed}"  # four levels or more: levels 1 and 2 pair their scans
    (levels_a, up_a, down_a), (levels_b, up_b, down_b) = got["0"], got["1"]
    assert len(levels_a) == len(levels_b) >= 3 and len(down_a) == len(down_b) >= 2, f"seed {seed}"
    for a, b in zip(levels_a, levels_b):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3]), f"seed {seed}"
    for a, b in zip(up_a + down_a, up_b + down_b):
        assert a.shape == b.shape and np.array_equal(a, b), f"seed {seed}"


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
