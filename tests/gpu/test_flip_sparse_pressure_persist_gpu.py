"""The sparse pressure solve's persistent buffers (sparse_pressure_gpu.PERSIST: one arena of
vectors zeroed by one fill, state, sizes and scalars in one control array read once a check,
tables copied only when they are new, b and p gathered into and scattered from the solver's
vectors, strides grown geometrically) against the earlier path ("0"), in the same process:
a dam break and a resting tank (warm start, tables reused) substep by substep give the same
iterations and the pressure within float32 rounding — |Δp| ≤ 2⁻²⁰·max|p| (the same kernels in
the same order: in practice equal bit for bit) —, and a liquid that grows and shrinks keeps
one solver per growth step, never a smaller one."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure, sparse_pressure_gpu, sparse_pressure_workspace
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

TOLERANCE = 2.0 ** -20  # of max |p|: float32 rounding


def _runs(monkeypatch, make, frames):
    import cupy

    # level 0 smoothed by red-black sweeps both ways: without PERSIST a solver has no workspace (no
    # brick table), so no brick smoother (sparse_multigrid_bricks.SMOOTHER "brick", the default)
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")
    runs = {}
    for persist in (False, True):
        monkeypatch.setattr(sparse_pressure_gpu, "PERSIST", persist)
        sparse_pressure_gpu.release_gpu_solvers()
        runs[persist] = solves(make(cupy), frames)
        solvers = list(sparse_pressure_gpu._solvers.values())
        assert solvers and all(s.persist == persist for s in solvers)
    sparse_pressure_gpu.release_gpu_solvers()
    return runs[False], runs[True]


def _same(old, new):
    assert len(old) == len(new) and len(old) > 0
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and s_new["converged"] == s_old["converged"]
        assert abs(s_new["residual"] - s_old["residual"]) <= 1e-6 * max(s_old["residual"], 1e-30) + 1e-12
        scale = max(float(np.abs(p_old).max()), 1e-30)
        assert float(np.abs(p_new - p_old).max()) <= TOLERANCE * scale


def test_gpu_persistent_buffers_give_the_dam_breaks_iterations_and_pressure(monkeypatch):
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    make = lambda xp: FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=xp, sparse=True)  # noqa: E731
    old, new = _runs(monkeypatch, make, 3)
    _same(old, new)
    assert max(s["iterations"] for _, s in new) >= 3  # a real solve each substep


def test_gpu_persistent_buffers_give_the_resting_tanks_iterations_and_pressure(monkeypatch):
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "1")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", True)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 16, 32))
    v, t = box((0.0, 0.0, 0.0), (1.0, 0.5, 0.5))
    make = lambda xp: FlipSimulation(spec, FlipSettings(warm_start_pressure=True, seed=3), v, t, xp=xp,  # noqa: E731
                                     sparse=True)
    old, new = _runs(monkeypatch, make, 3)
    _same(old, new)


def test_gpu_reused_tables_are_not_copied_again_and_give_the_same_pressure(monkeypatch):
    """Three cold solves of one unchanged grid with the table reuse on: the second keeps its
    tables, the third gets them back and skips their copies; every pressure equal bit for
    bit to the earlier path's."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", True)
    # the copies PERSIST skips are the fresh set-up's (the workspace's solver takes its tables
    # without copies: test_flip_sparse_pressure_workspace_gpu.py)
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "fresh")
    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    runs = {}
    for persist in (False, True):
        monkeypatch.setattr(sparse_pressure_gpu, "PERSIST", persist)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        runs[persist] = [sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(3)]
        assert g._pressure_memo[3] is not None
        (solver,) = sparse_pressure_gpu._solvers.values()
        if persist:
            assert solver.tables_skipped == 1 and solver._loaded[0][0] is g._pressure_memo[3][0].nbr
    sparse_pressure_gpu.release_gpu_solvers()
    for (p_old, s_old), (p_new, s_new) in zip(runs[False], runs[True]):
        assert s_new == s_old
        assert float(abs(p_new - p_old).max()) <= TOLERANCE * float(abs(p_old).max())


@pytest.mark.parametrize("persist", [False, True])
def test_gpu_solver_strides_grow_geometrically_and_never_shrink(monkeypatch, persist):
    import cupy

    # the NumPy reference and the solver without PERSIST (no workspace, so no brick smoother:
    # sparse_multigrid_bricks.SMOOTHER "brick", the default) both by red-black sweeps
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")
    monkeypatch.setattr(sparse_pressure_gpu, "PERSIST", persist)
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    sparse_pressure_gpu.release_gpu_solvers()
    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    strides = []
    for share in (0.3, 0.35, 1.0, 0.3):  # grows twice, then shrinks back
        keep = rng.random(len(pos)) < share
        ref = tank(np, pos[keep], vel[keep], spec, obstacle)
        pc, sc = sparse_pressure.solve_pressure(ref, 0.01, tolerance=1e-5)
        g = tank(cupy, pos[keep], vel[keep], spec, obstacle)
        pg, sg = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        assert sg["converged"] and abs(sg["iterations"] - sc["iterations"]) <= 1
        assert np.abs(backend.to_numpy(pg) - pc).max() <= 1e-3 * np.abs(pc).max()
        solver = next(reversed(sparse_pressure_gpu._solvers.values()))
        strides.append(solver.strides)
    if persist and len(strides[0]) == len(strides[2]) == len(strides[3]):
        assert strides[3] == strides[2]  # never smaller
        assert all(b >= a for a, b in zip(strides[0], strides[2]))
    sparse_pressure_gpu.release_gpu_solvers()


def test_gpu_a_hierarchy_that_gains_a_level_drops_the_stale_solver():
    """Issue 21 §6: at 65M particles the multigrid hierarchy gained a level at frame 4 and the
    frame-0 solver (~0.9 GiB) stayed cached beside the new one. A solver of the same
    configuration for another number of levels goes when the new one is built; another
    configuration (here the preconditioner) keeps its place."""
    sparse_pressure_gpu.release_gpu_solvers()
    try:
        other = sparse_pressure_gpu._solver([4000], "none", 10)
        three = sparse_pressure_gpu._solver([4000, 600, 80], "mg", 10)
        assert len(sparse_pressure_gpu._solvers) == 2
        four = sparse_pressure_gpu._solver([4000, 600, 80, 12], "mg", 10)
        held = list(sparse_pressure_gpu._solvers.values())
        assert len(held) == 2 and four in held and other in held and three not in held
        assert sparse_pressure_gpu._solver([4000], "none", 10) is other  # still cached
    finally:
        sparse_pressure_gpu.release_gpu_solvers()
