"""Level 0's passes with their neighbours found from the bricks (sparse_pressure_vcycle.NBR,
VOXFX_SPARSE_MG_NBR "bricks": flip_sparse_pressure_level0.cu's name_nb kernels) against the
table, in the same process: the same indices in the same order, so the same iterations and the
pressure bit for bit — on a tank of five levels (the fused and the split V-cycle, the brick
transfers on and off), on a sealed tank (pinned cells), on tables kept across solves, and
substep by substep on a dam break (cold and warm starts); level 0's nbr rows neither held nor
filled on that path (NBR_TABLE "skip", the default) against them filled (the same bits). The host
proof is tests/unit/test_cuda_sparse_level0_host.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_vcycle
from voxfx.kernels.flip.grid import FLUID, SOLID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


@pytest.fixture(scope="module")
def scene():
    """Five levels."""
    return random_scene(np.random.default_rng(7), (64, 48, 56), 400000)


def _switch(monkeypatch, nbr, vcycle="fused", transfers="1", table=None):
    monkeypatch.setattr(sparse_pressure_vcycle, "NBR", nbr)
    monkeypatch.setattr(sparse_pressure_vcycle, "NBR_TABLE", table)  # None: the environment's, "skip" by default
    monkeypatch.setattr(sparse_pressure_gpu, "VCYCLE", vcycle)
    monkeypatch.setattr(sparse_pressure_gpu, "BRICK_TRANSFERS", transfers)
    sparse_pressure_gpu.release_gpu_solvers()


def _solve(monkeypatch, scene, nbr, vcycle="fused", transfers="1", times=1, sealed=False, table=None):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    _switch(monkeypatch, nbr, vcycle, transfers, table)
    spec, pos, vel, obstacle = scene
    g = tank(cupy, pos, vel, spec, obstacle)
    if sealed:  # all of it water: sealed regions, their pinned cells AIR among the unknowns
        solid = g["cell"] == SOLID
        g["cell"] = cupy.where(g.active() & ~solid, cupy.uint8(FLUID), g["cell"]).astype(cupy.uint8)
    out = [sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(times)]
    (solver,) = sparse_pressure_gpu._solvers.values()
    return [(backend.to_numpy(p), stats) for p, stats in out], solver


@pytest.mark.parametrize("sealed", [False, True], ids=["tank", "sealed"])
@pytest.mark.parametrize("vcycle,transfers", [("fused", "1"), ("fused", "0"), ("split", "1")])
def test_gpu_brick_neighbours_give_the_tables_pressure_bit_for_bit(monkeypatch, scene, vcycle, transfers, sealed):
    ((p0, s0),), old = _solve(monkeypatch, scene, "table", vcycle, transfers, sealed=sealed)
    assert len(old.strides) >= 3 and old.generation is not None  # a workspace solver: the brick path applies
    assert not old.nbr_bricks and s0["converged"] and s0["iterations"] >= 3 and np.abs(p0).max() > 0
    ((p, s),), new = _solve(monkeypatch, scene, "bricks", vcycle, transfers, sealed=sealed)
    assert new.nbr_bricks and new.levels[0].nbr is None and old.levels[0].nbr is not None  # NBR_TABLE "skip"
    assert s["iterations"] == s0["iterations"] and s["residual"] == s0["residual"]
    assert np.array_equal(p.view(np.int32), p0.view(np.int32)), float(np.abs(p - p0).max())


def test_gpu_brick_neighbours_on_kept_tables(monkeypatch, scene):
    """Three solves of one grid: the second keeps the tables, the third reuses them without a
    set-up (the pointer table filled for the second still names live arrays)."""
    old, _ = _solve(monkeypatch, scene, "table", times=3)
    new, solver = _solve(monkeypatch, scene, "bricks", times=3)
    assert solver.nbr_bricks and solver.tables_skipped >= 1
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)


@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_brick_neighbours_give_the_dam_breaks_iterations_and_pressure(monkeypatch, warm):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for way in ("table", "bricks"):
        _switch(monkeypatch, way)
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[way] = solves(sim, 2)
        solvers = list(sparse_pressure_gpu._solvers.values())
        assert solvers and all(s.nbr_bricks == (way == "bricks") for s in solvers if s.generation is not None)
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)



@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_level0_without_its_nbr_rows_gives_the_filled_rows_pressure(monkeypatch, warm):
    """NBR_TABLE "skip" (no level-0 nbr rows held or filled; the set-up fills diag alone, by
    Level0.fill and the solve launched ahead) against "fill" (the rows filled every solve, read by
    no pass), substep by substep on a dam break: the same iterations and pressure bit for bit, the
    solver smaller by level 0's 24 B an entry of its stride."""
    import cupy

    from voxfx.kernels.flip import sparse_pressure_solve_ahead
    from voxfx.kernels.flip.sparse_pressure_buffers import solver_memory_bytes

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for table in ("fill", "skip"):
        _switch(monkeypatch, "bricks", table=table)
        taken = sparse_pressure_solve_ahead.counts["taken"]
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[table] = solves(sim, 2)
        solvers = [s for s in sparse_pressure_gpu._solvers.values() if s.generation is not None]
        assert solvers and all(s.nbr_bricks and (s.levels[0].nbr is None) == (table == "skip") for s in solvers)
        for s in solvers:
            rows = solver_memory_bytes(s.strides) - solver_memory_bytes(s.strides, level0_nbr=s.level0_nbr)
            assert rows == (24 * s.strides[0] if table == "skip" else 0)
        assert sparse_pressure_solve_ahead.counts["taken"] > taken  # the solve ahead filled level 0 too
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new.view(np.int32),
                                                                                 p_old.view(np.int32))


@pytest.mark.parametrize("sealed", [False, True], ids=["tank", "sealed"])
def test_gpu_level0_without_its_nbr_rows_on_the_tank(monkeypatch, scene, sealed):
    """The five-level tank, open and sealed (pinned cells), split V-cycle and table transfers
    (level 0's up filled beside diag): "skip" gives "fill"'s pressure bit for bit."""
    for vcycle, transfers in (("fused", "1"), ("split", "0")):
        ((p0, s0),), old = _solve(monkeypatch, scene, "bricks", vcycle, transfers, sealed=sealed, table="fill")
        ((p, s),), new = _solve(monkeypatch, scene, "bricks", vcycle, transfers, sealed=sealed, table="skip")
        assert old.levels[0].nbr is not None and new.levels[0].nbr is None and new.nbr_bricks
        assert s["iterations"] == s0["iterations"] and s["residual"] == s0["residual"]
        assert np.array_equal(p.view(np.int32), p0.view(np.int32)), float(np.abs(p - p0).max())
