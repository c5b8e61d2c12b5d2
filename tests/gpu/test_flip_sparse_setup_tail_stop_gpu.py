"""The set-up's fast tail stopping after the V-cycle's last level (``VOXFX_SPARSE_SETUP_TAIL_STOP`` "1":
mgs_tail_levels_fast_stop*, sparse_pressure_workspace_levels._tail_groups) against the tail that builds
every level ("0"): on fresh random scenes the kept levels' cnt and span rows and every kept table the
same, the rows past them as the host wrote them, the host's level counts the same; a dam break's pressure
and stats bit for bit, through the set-up graph and with the held levels too. On the host:
tests/unit/test_cuda_sparse_setup_cluster_host.py (issue 24, helper s23i; proven there, first run here)."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_ahead_gpu import _tables
from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.pressure_solves import assert_dam_break_ways_agree
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup, sparse_pressure_workspace
from voxfx.kernels.flip.sparse_pressure_solve_ahead import ahead_depth_reference

VARIABLE = "VOXFX_SPARSE_SETUP_TAIL_STOP"


@pytest.mark.parametrize("group", ["fast", "hybrid"])
@pytest.mark.parametrize("restrict", ["scatter", "search"])
@pytest.mark.parametrize("tail_bound", [16384, 1 << 22])
@pytest.mark.parametrize("ahead", [False, True])
def test_gpu_stopping_tail_gives_the_kept_levels(monkeypatch, group, restrict, tail_bound, ahead):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    monkeypatch.setenv("VOXFX_SPARSE_SETUP_TAIL_GROUP", group)
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail_bound)
    monkeypatch.setattr(sparse_pressure_setup, "RESTRICT", restrict)
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setattr(sparse_pressure_workspace, "AHEAD", ahead)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(seed), shape=(48, 40, 44), n=150000)
    got, sizes = {}, {}
    for way in ("0", "1"):
        monkeypatch.setenv(VARIABLE, way)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        _, kind, _, _ = sparse_pressure.pressure_rhs(g, 0.01)
        _tables(g, kind, sparse_pressure_setup.unknowns(g, kind, (), ahead=True))
        level = sparse_pressure_setup.unknowns(g, kind, (), ahead=True)
        got[way] = _tables(g, kind, level)
        ws = sparse_pressure_workspace.workspace()
        count = len(ws.caps)
        sizes[way] = cupy.asnumpy(ws.sizes[:10 * count])
    sparse_pressure_gpu.release_gpu_solvers()
    full, stop = sizes["0"], sizes["1"]
    cnt_f, cnt_s = full[:4 * count].reshape(count, 4), stop[:4 * count].reshape(count, 4)
    span_f, span_s = full[4 * count:].reshape(count, 6), stop[4 * count:].reshape(count, 6)
    with np.errstate(over="ignore"):
        kept = sparse_pressure_setup.levels_kept(sparse_pressure_setup.level_extents(cnt_f, span_f, count), count)
        assert kept == sparse_pressure_setup.levels_kept(sparse_pressure_setup.level_extents(cnt_s, span_s, count),
                                                         count), f"seed {seed}"
    for drop in (-1, 128):
        assert ahead_depth_reference(full, count, drop) == ahead_depth_reference(stop, count, drop), f"seed {seed}"
    assert np.array_equal(cnt_f[:kept], cnt_s[:kept]) and np.array_equal(span_f[:kept], span_s[:kept]), f"seed {seed}"
    assert not cnt_s[kept:].any() and np.all(span_s[kept:] == sparse_pressure_setup._NO_SPAN), f"seed {seed}"
    (levels_a, up_a, down_a), (levels_b, up_b, down_b) = got["0"], got["1"]
    assert len(levels_a) == len(levels_b) >= 3 and len(down_a) == len(down_b) >= 2, f"seed {seed}"
    for a, b in zip(levels_a, levels_b):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3]), f"seed {seed}"
    for a, b in zip(up_a + down_a, up_b + down_b):
        assert a.shape == b.shape and np.array_equal(a, b), f"seed {seed}"


@pytest.mark.parametrize("setting", [(), (("VOXFX_SPARSE_SETUP_GRAPH", "1"),), (("VOXFX_SPARSE_MG_KEEP", "2"),)])
def test_gpu_stopping_tail_gives_the_dam_breaks_pressure_bit_for_bit(monkeypatch, setting):
    """A dam break (the defaults), three frames, every level launched and with the default tail, through
    the set-up graph and with levels held: every solve's pressure and stats the same."""
    import cupy

    for name, value in setting:
        monkeypatch.setenv(name, value)
    assert_dam_break_ways_agree(monkeypatch, cupy, lambda way: monkeypatch.setenv(VARIABLE, way), ("0", "1"))
