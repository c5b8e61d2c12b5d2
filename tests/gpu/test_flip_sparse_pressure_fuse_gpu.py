"""The coarse levels' joined launches (``VOXFX_SPARSE_SETUP_FUSE`` "1":
mgb_coarsen_span, mgb_restrict_span, mgs_level_end; sparse_pressure_workspace_levels.FUSE)
against the separate launches ("0", the default; both against each other on the host in
tests/unit/test_cuda_sparse_pressure_fuse_host.py): on fresh random scenes every level's
sizes and unknown spans and every table the same, with the coarse levels launch by launch
and with the one-block tail, launched ahead of the read or after it, either restriction;
and a dam break's pressure and stats bit for bit."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_ahead_gpu import _tables
from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.pressure_solves import assert_dam_break_ways_agree
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup, sparse_pressure_workspace


@pytest.mark.parametrize("restrict", ["scatter", "search"])
@pytest.mark.parametrize("tail_bound", [0, 16384])
@pytest.mark.parametrize("ahead", [False, True])
def test_gpu_joined_launches_give_the_separate_launches_tables(monkeypatch, restrict, tail_bound, ahead):
    """Two set-ups of one grid (the second launched ahead where *ahead*) with each way: the
    workspace's cnt and span rows and every level's m, nbr, diag, up and down the same."""
    assert_setups_agree(monkeypatch, "VOXFX_SPARSE_SETUP_FUSE", restrict, tail_bound, ahead)


def assert_setups_agree(monkeypatch, variable, restrict, tail_bound, ahead, ways=("0", "1")):
    """Two set-ups of one fresh random grid (the second launched ahead where *ahead*) with *variable*
    at each of *ways* ("0" and "1"): the workspace's cnt and span rows and every level's m, nbr, diag,
    up and down the same, four levels or more (level 2's launch coarsens level 3; SCAN_JOIN's levels 1
    and 2 pair)."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail_bound)  # 0: every level launch by launch
    monkeypatch.setattr(sparse_pressure_setup, "RESTRICT", restrict)
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setattr(sparse_pressure_workspace, "AHEAD", ahead)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(seed), shape=(48, 40, 44), n=150000)
    got, sizes = {}, {}
    for way in ways:
        monkeypatch.setenv(variable, way)
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
    a_way, b_way = ways
    assert np.array_equal(sizes[a_way], sizes[b_way]), f"seed {seed}"
    assert sizes[a_way].size >= 40, f"seed {seed}"  # four levels or more
    (levels_a, up_a, down_a), (levels_b, up_b, down_b) = got[a_way], got[b_way]
    assert len(levels_a) == len(levels_b) >= 3 and len(down_a) == len(down_b) >= 2, f"seed {seed}"
    for a, b in zip(levels_a, levels_b):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3]), f"seed {seed}"
    for a, b in zip(up_a + down_a, up_b + down_b):
        assert a.shape == b.shape and np.array_equal(a, b), f"seed {seed}"


def test_gpu_joined_launches_give_the_dam_breaks_pressure_bit_for_bit(monkeypatch):
    """A dam break (the defaults: warm start, table reuse, the ahead set-up), three frames,
    with every coarse level launch by launch and with the default tail: every solve's
    pressure and stats the same with either way."""
    import cupy

    assert_dam_break_ways_agree(monkeypatch, cupy, lambda way: monkeypatch.setenv("VOXFX_SPARSE_SETUP_FUSE", way),
                                ("0", "1"))
