"""The V-cycle's transfers between levels 0 and 1 found from the grid's bricks instead of read
from down[0] and up[0] (sparse_pressure_gpu.BRICK_TRANSFERS, VOXFX_SPARSE_MG_BRICK_TRANSFERS:
mg_restrict_bricks, mg_prolong_add_bricks) against the tables, in the same process: the same
indices in the same order, so the same iterations and the pressure bit for bit — on a tank of
five levels (each transfer alone, both, both a block a brick; the fused and the split
V-cycle), on tables kept
across solves (the solver's pointer table outliving a solve), and substep by substep on a dam
break (cold and warm starts). The host proof is tests/unit/test_cuda_sparse_vcycle_bricks_host.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

_MODES = {"0": (False, False), "1": (True, True), "restrict": (True, False), "prolong": (False, True),
          "shared": (True, True)}


pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


@pytest.fixture(scope="module")
def scene():
    """Five levels."""
    return random_scene(np.random.default_rng(7), (64, 48, 56), 400000)


def _switch(monkeypatch, mode, vcycle="fused"):
    monkeypatch.setattr(sparse_pressure_gpu, "BRICK_TRANSFERS", mode)
    monkeypatch.setattr(sparse_pressure_gpu, "VCYCLE", vcycle)
    sparse_pressure_gpu.release_gpu_solvers()


def _solve(monkeypatch, scene, mode, vcycle="fused", times=1):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    _switch(monkeypatch, mode, vcycle)
    spec, pos, vel, obstacle = scene
    g = tank(cupy, pos, vel, spec, obstacle)
    out = [sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(times)]
    (solver,) = sparse_pressure_gpu._solvers.values()
    return [(backend.to_numpy(p), stats) for p, stats in out], solver


@pytest.mark.parametrize("vcycle", ["fused", "split"])
def test_gpu_brick_transfers_give_the_tables_pressure_bit_for_bit(monkeypatch, scene, vcycle):
    ((p0, s0),), old = _solve(monkeypatch, scene, "0", vcycle)
    assert len(old.strides) >= 5 and old.generation is not None  # a workspace solver: the brick path applies
    assert s0["converged"] and s0["iterations"] >= 3 and np.abs(p0).max() > 0
    assert old.brick_transfers == (False, False) and int(old.levels[0].up[0, 0]) >= 0
    for mode in ("1", "restrict", "prolong", "shared"):
        ((p, s),), new = _solve(monkeypatch, scene, mode, vcycle)
        assert new.brick_transfers == _MODES[mode]
        if new.brick_transfers[1]:  # up[0] is never filled: the prolongation reads the bricks
            assert not new.levels[0].up.any()
        assert s["iterations"] == s0["iterations"] and s["residual"] == s0["residual"], mode
        assert np.array_equal(p.view(np.int32), p0.view(np.int32)), (mode, float(np.abs(p - p0).max()))


@pytest.mark.parametrize("mode", ["1", "shared"])
def test_gpu_brick_transfers_on_kept_tables(monkeypatch, scene, mode):
    """Three solves of one grid: the second keeps the tables, the third reuses them without a
    set-up (the pointer table filled for the second still names live arrays)."""
    old, _ = _solve(monkeypatch, scene, "0", times=3)
    new, solver = _solve(monkeypatch, scene, mode, times=3)
    assert solver.tables_skipped >= 1 and solver._brick_level is not None
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)


@pytest.mark.parametrize("mode", ["1", "shared"])
@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_brick_transfers_give_the_dam_breaks_iterations_and_pressure(monkeypatch, warm, mode):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for way in ("0", mode):
        _switch(monkeypatch, way)
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[way] = solves(sim, 2)
        solvers = list(sparse_pressure_gpu._solvers.values())
        assert solvers and all(s.brick_transfers == _MODES[way] for s in solvers if len(s.strides) > 2)
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)
