"""The PCG's stopping test ahead of the V-cycle (sparse_pressure_gpu.EARLY_STOP,
VOXFX_SPARSE_PCG_EARLY_STOP: update_solution_stop latches the stop where finish_beta would, so the
converging iteration's V-cycle returns at its first line) against the test in finish_beta: a small
dam break's every solve — cold and warm starts, the solve queued ahead, ``PREDICT``'s singles and
blocks of ``check_every`` — gives the same pressure, iterations, residual and flag bit for bit, with
the fused and the split V-cycle, the red-black and the brick smoother, blocks as singles and as
one captured graph, and with solves capped by the iteration limit before they converge. The host
harness is tests/unit/test_cuda_sparse_pcg_stop_host.py."""

import numpy as np
import pytest

from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure_gpu
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.pressure_gpu import _D_RZ
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


def _run(monkeypatch, way, frames, **settings):
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_PCG_EARLY_STOP", way)
    sparse_pressure_gpu.release_gpu_solvers()
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 40, (40, 28, 32))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    sim = FlipSimulation(spec, FlipSettings(seed=5, **settings), v, t, xp=cupy, sparse=True)
    out = solves(sim, frames)
    solvers = list(sparse_pressure_gpu._solvers.values())
    assert solvers and all(s.early_stop == (way == "1") for s in solvers)
    return out, float(solvers[-1].scalars[_D_RZ].get())


def _same(old, new):
    assert len(old) == len(new) > 0
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new == s_old and np.array_equal(p_new.view(np.uint32), p_old.view(np.uint32)), (s_old, s_new)


@pytest.mark.parametrize("vcycle, smoother, block", [("fused", "rb", "singles"), ("fused", "brick", "singles"),
                                                     ("split", "rb", "graph"), ("split", "brick", "singles"),
                                                     ("fused", "brick", "graph")])
def test_gpu_early_stop_gives_finish_betas_pressure_iterations_and_residual(monkeypatch, vcycle, smoother, block):
    monkeypatch.setattr(sparse_pressure_gpu, "VCYCLE", vcycle)
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", smoother)
    monkeypatch.setenv(sparse_pressure_gpu.BLOCK, block)
    (old, rz_old), (new, rz_new) = (_run(monkeypatch, way, 3) for way in ("0", "1"))
    _same(old, new)
    assert max(s["iterations"] for _, s in new) >= 3 and all(s["converged"] for _, s in new)
    # the latch fired on the device: the last solve's converging iteration left r·z as it was
    assert rz_new != rz_old


@pytest.mark.parametrize("smoother", ["rb", "brick"])
def test_gpu_early_stop_at_the_iteration_limit_is_unchanged(monkeypatch, smoother):
    """Solves capped at 2 iterations (none converges): the same pressure, the count 2, the residual
    and converged False, bit for bit."""
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", smoother)
    (old, _), (new, _) = (_run(monkeypatch, way, 2, pressure_max_iterations=2) for way in ("0", "1"))
    _same(old, new)
    assert all(s["iterations"] == 2 and not s["converged"] for _, s in new)
