"""The set-up's coarse levels replayed as a CUDA graph (sparse_pressure_setup_graph, issue 24)
against the same launches one by one (``VOXFX_SPARSE_SETUP_GRAPH=0``) in the same process: the
same tables entry for entry over set-ups that launch plainly, capture and replay, the tail
alone in the graph or coarse levels launched on their own before it; the same pressure bit for
bit and iterations over a dam break's substeps with most set-ups replayed; and a capture that
fails (injected) leaving plain launches and the same bits."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves as _solves
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup, sparse_pressure_workspace
from voxfx.kernels.flip import sparse_pressure_setup_graph as setup_graph
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec


def _graph(monkeypatch, on):
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setenv(setup_graph.SWITCH, "1" if on else "0")
    sparse_pressure_gpu.release_gpu_solvers()


def _tables(g, kind, level):
    M = VCycle(g, kind, level)
    return ([(L.m, L.m_red, backend.to_numpy(L.nbr), backend.to_numpy(L.diag)) for L in M.levels],
            [backend.to_numpy(u) for u in M.up], [backend.to_numpy(d) for d in M.down])


def _same_tables(a, b):
    (levels_a, up_a, down_a), (levels_b, up_b, down_b) = a, b
    assert len(levels_a) == len(levels_b) >= 3 and len(up_a) == len(up_b) and len(down_a) == len(down_b)
    for x, y in zip(levels_a, levels_b):
        assert x[:2] == y[:2] and np.array_equal(x[2], y[2]) and np.array_equal(x[3], y[3])
    for x, y in zip(up_a + down_a, up_b + down_b):
        assert x.shape == y.shape and np.array_equal(x, y)


def _same(old, new):
    assert len(old) == len(new) and len(old) > 0
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new == s_old
        assert p_new.dtype == p_old.dtype and np.array_equal(p_new, p_old)


@pytest.mark.parametrize("tail", [None, 64])
def test_gpu_graph_tables_are_the_launched_ones(monkeypatch, tail):
    """Five set-ups of a grid: the first two-read (its exact key base, launched), the second
    ahead on the sticky guess (launched: a key not seen before), the third captured and
    replayed, the fourth and fifth replayed; each one's levels, prolongations and restrictions
    equal those of the same set-up launched one by one. *tail* 64: coarse levels launched on
    their own in the graph before the one-block tail (by default the tail is all of it)."""
    import cupy

    if tail is not None:
        monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail)
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(6))
    got, counts = {}, {}
    for on in (False, True):
        _graph(monkeypatch, on)
        g = tank(cupy, pos, vel, spec, obstacle)
        _, kind, _, _ = sparse_pressure.pressure_rhs(g, 0.01)
        got[on] = [_tables(g, kind, sparse_pressure_setup.unknowns(g, kind, (), ahead=True)) for _ in range(5)]
        ws = sparse_pressure_workspace.workspace()
        counts[on] = dict(ws.graphs.counts)
        assert ws.ahead == [4, 0]
    sparse_pressure_gpu.release_gpu_solvers()
    for a, b in zip(got[False], got[True]):
        _same_tables(a, b)
    assert counts[False] == {"replayed": 0, "captured": 0, "plain": 0, "failed": 0}
    assert counts[True] == {"replayed": 3, "captured": 1, "plain": 2, "failed": 0}


def test_gpu_graph_gives_the_dam_breaks_iterations_and_pressure_bit_for_bit(monkeypatch):
    """A dam break (warm start, table reuse, the set-up and the solve launched ahead: the
    defaults), three frames, with coarse levels before the tail (TAIL_BOUND 64): every solve
    the same, set-ups replayed (each new generation of tables launches two plainly first)."""
    import cupy

    monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", 64)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    runs, counts = {}, {}
    for on in (False, True):
        _graph(monkeypatch, on)
        runs[on] = _solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True), 3)
        counts[on] = dict(sparse_pressure_workspace.workspace().graphs.counts)
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs[False], runs[True])
    assert counts[False] == {"replayed": 0, "captured": 0, "plain": 0, "failed": 0}
    assert counts[True]["failed"] == 0 and counts[True]["replayed"] >= 1
    assert max(s["iterations"] for _, s in runs[True]) >= 3


def test_gpu_graph_capture_failing_leaves_the_launches(monkeypatch):
    """Every capture made to fail (the tail's launch raising while the stream captures,
    injected): the set-ups launch one by one from then on (one failure counted, nothing
    replayed), the same bits as without the graph."""
    import cupy

    from voxfx.kernels.flip import sparse_pressure_workspace_levels as levels

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(6))
    tail = levels._tail

    def refusing(*args):
        if cupy.cuda.get_current_stream().is_capturing():
            raise RuntimeError("capture refused (injected)")
        tail(*args)

    got = {}
    for on in (False, True):
        _graph(monkeypatch, on)
        if on:
            monkeypatch.setattr(levels, "_tail", refusing)
        g = tank(cupy, pos, vel, spec, obstacle)
        got[on] = [sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(4)]
        got[on] = [(backend.to_numpy(p), stats) for p, stats in got[on]]
        counts = sparse_pressure_workspace.workspace().graphs.counts
        if on:
            assert counts["failed"] == 1 and counts["replayed"] == 0 and counts["captured"] == 0
            assert counts["plain"] == 4
    sparse_pressure_gpu.release_gpu_solvers()
    _same(got[False], got[True])
