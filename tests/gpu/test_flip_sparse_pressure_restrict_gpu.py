"""The workspace's restriction tables as the prolongation's transpose
(sparse_pressure_setup.RESTRICT "scatter": mgs_level_tables_down, mgs_prolong_restrict,
mgs_tail_levels_scatter) against the 64 key searches a coarse unknown ("search"; both
against the NumPy VCycle in tests/unit/test_cuda_sparse_pressure_setup_host.py): the same
tables entry for entry on fresh random scenes, with the coarse levels launch by launch and
in the one-block tail, launched ahead of the read or after it; and the same pressure bit for
bit and iterations through a dam break's solves."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_ahead_gpu import _tables
from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.pressure_solves import assert_dam_break_ways_agree
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup, sparse_pressure_workspace
from voxfx.kernels.flip.sparse_multigrid import VCycle


@pytest.mark.parametrize("tail_bound", [0, 16384])
@pytest.mark.parametrize("ahead", [False, True])
def test_gpu_scattered_restriction_gives_the_searched_tables(monkeypatch, tail_bound, ahead):
    """Two set-ups of one grid (the second launched ahead where *ahead*) with each way:
    every level's m, nbr, diag, up and down the same."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail_bound)  # 0: every level launch by launch
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setattr(sparse_pressure_workspace, "AHEAD", ahead)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(seed), shape=(48, 40, 44), n=150000)
    got = {}
    for way in ("search", "scatter"):
        monkeypatch.setattr(sparse_pressure_setup, "RESTRICT", way)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        _, kind, _, _ = sparse_pressure.pressure_rhs(g, 0.01)
        VCycle(g, kind, sparse_pressure_setup.unknowns(g, kind, (), ahead=True))
        level = sparse_pressure_setup.unknowns(g, kind, (), ahead=True)
        assert (level.prebuilt is not None) == ahead
        got[way] = _tables(g, kind, level)
    sparse_pressure_gpu.release_gpu_solvers()
    (levels_a, up_a, down_a), (levels_b, up_b, down_b) = got["search"], got["scatter"]
    assert len(levels_a) == len(levels_b) >= 3 and len(down_a) == len(down_b) >= 2, f"seed {seed}"
    for a, b in zip(levels_a, levels_b):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3]), f"seed {seed}"
    for a, b in zip(up_a + down_a, up_b + down_b):
        assert a.shape == b.shape and np.array_equal(a, b), f"seed {seed}"
    for down, fine in zip(down_b, levels_b):  # each restriction names fine unknowns (below the sentinel m)
        assert (down < fine[0]).any() and down.max() == fine[0]


def test_gpu_scattered_restriction_gives_the_dam_breaks_pressure_bit_for_bit(monkeypatch):
    """A dam break (warm start, table reuse and the ahead set-up on: the defaults), three
    frames, with every coarse level launch by launch and with the default tail: every
    solve's pressure and stats the same with either way."""
    import cupy

    assert_dam_break_ways_agree(monkeypatch, cupy,
                                lambda way: monkeypatch.setattr(sparse_pressure_setup, "RESTRICT", way),
                                ("search", "scatter"))
