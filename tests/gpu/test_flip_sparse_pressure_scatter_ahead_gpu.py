"""The scatter and carry queued ahead of the PCG's check reads (sparse_pressure_scatter_ahead,
VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD, issue 24, h21e) against the scatter after the loop: a small dam
break's every solve gives the same pressure, stats and carried pressure bit for bit — warm and cold,
the solve queued ahead or not, ``PREDICT``'s singles or blocks of ``check_every`` only, solves capped
by the iteration limit — and the ahead way did queue its scatter before the reads (more than once
in a solve that ran past its prediction). ``run_blocks``' order on the host:
tests/unit/test_flip_sparse_pressure_scatter_ahead.py."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu
from voxfx.kernels.flip import sparse_pressure_scatter_ahead as after
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_pressure_warm import CARRIED
from voxfx.kernels.grid import GridSpec

pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


def _run(monkeypatch, way, frames, **settings):
    """Every solve's (p, stats, carried pressure or None) on the host, and the scatters queued
    ahead per solve."""
    import cupy

    monkeypatch.setenv(after.SWITCH, way)
    sparse_pressure_gpu.release_gpu_solvers()
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 40, (40, 28, 32))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    sim = FlipSimulation(spec, FlipSettings(seed=5, **settings), v, t, xp=cupy, sparse=True)
    out, queued, made = [], [], []
    solve, init = sparse_pressure.solve_pressure, after.Scatter.__init__

    def watch(self, *args):
        init(self, *args)
        made.append(self)

    def spy(grid, *args, **kwargs):
        made.clear()
        p, stats = solve(grid, *args, **kwargs)
        carried = backend.to_numpy(grid[CARRIED]) if CARRIED in grid.channels else None
        out.append((backend.to_numpy(p), stats, carried))
        queued.append(sum(s.queued for s in made))
        return p, stats

    monkeypatch.setattr(after.Scatter, "__init__", watch)
    sparse_pressure.solve_pressure = spy
    try:
        for _ in range(frames):
            sim.step(1 / 24)
    finally:
        sparse_pressure.solve_pressure = solve
    return out, queued


def _same(old, new):
    assert len(old) == len(new) > 0
    for (p_old, s_old, c_old), (p_new, s_new, c_new) in zip(old, new):
        assert s_new == s_old and np.array_equal(p_new.view(np.uint32), p_old.view(np.uint32)), (s_old, s_new)
        assert (c_old is None) == (c_new is None)
        if c_old is not None:
            assert np.array_equal(c_new.view(np.uint32), c_old.view(np.uint32))


@pytest.mark.parametrize("ahead, predict, warm", [("1", True, True), ("0", True, True), ("1", False, True),
                                                  ("1", True, False)])
def test_gpu_scatter_ahead_gives_the_same_pressure_stats_and_carry(monkeypatch, ahead, predict, warm):
    monkeypatch.setenv("VOXFX_SPARSE_SOLVE_AHEAD", ahead)
    monkeypatch.setattr(sparse_pressure_gpu, "PREDICT", predict)
    (old, q_old), (new, q_new) = (_run(monkeypatch, way, 3, warm_start_pressure=warm) for way in ("0", "1"))
    _same(old, new)
    assert max(s["iterations"] for _, s, _ in new) >= 3 and all(s["converged"] for _, s, _ in new)
    assert all(q == 1 for q in q_old)  # after the loop: one launch a solve
    # ahead: queued before the reads in every solve that launched an iteration
    assert all(q >= 1 for q in q_new) and sum(q_new) > len(q_new) // 2
    if warm:
        assert all(c is not None for _, _, c in new)


def test_gpu_scatter_ahead_at_the_iteration_limit_is_unchanged(monkeypatch):
    """Solves capped at 2 iterations (none converges): the same pressure, carry and stats."""
    (old, _), (new, q_new) = (_run(monkeypatch, way, 2, pressure_max_iterations=2) for way in ("0", "1"))
    _same(old, new)
    assert all(s["iterations"] == 2 and not s["converged"] for _, s, _ in new) and all(q >= 1 for q in q_new)


def test_gpu_scatter_ahead_queued_again_where_a_solve_ran_past_its_prediction(monkeypatch):
    """The prediction forced short (the last count halved before each solve): each solve runs on
    past it, its scatter queued again after the further iterations; the same bits as after the loop."""
    real = sparse_pressure_gpu.SparsePressureSolverGPU.solve

    def short(self, *args, **kwargs):
        self.last_iterations = self.last_iterations // 2
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sparse_pressure_gpu.SparsePressureSolverGPU, "solve", short)
    monkeypatch.setenv("VOXFX_SPARSE_SOLVE_AHEAD", "0")  # the solve ahead reads last_iterations before solve
    (old, _), (new, q_new) = (_run(monkeypatch, way, 3) for way in ("0", "1"))
    _same(old, new)
    assert max(q_new) >= 2
