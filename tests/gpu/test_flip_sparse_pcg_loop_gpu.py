"""The PCG loop's per-iteration switches against today's kernels, in the same process: the
one-block tail's vectors in shared memory (sparse_pressure_gpu.TAIL_SHARED,
VOXFX_SPARSE_MG_TAIL_SHARED: mg_tail_vcycle_shared, mg_tail_cluster_shared), the reduction
grid's kernels four items a thread at a time (UNROLL, VOXFX_SPARSE_PCG_UNROLL: *_unrolled) and
finish_alpha / finish_beta in the last block of the kernels before them (FUSE,
VOXFX_SPARSE_PCG_FUSE: apply_laplacian_alpha, mg_smooth_red_dot_beta). All compute the same
values in the same order, so the same iterations and the pressure bit for bit — on a tank of
five levels (the tail with and without the cluster, from two levels), for every
preconditioner, and substep by substep on a dam break (cold and warm starts)."""

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


@pytest.fixture(autouse=True)
def _fresh_solvers():
    sparse_pressure_gpu.release_gpu_solvers()
    yield
    sparse_pressure_gpu.release_gpu_solvers()


@pytest.fixture(scope="module")
def scene():
    """Five levels, level 1 with more unknowns than four blocks of 1024 threads."""
    return random_scene(np.random.default_rng(), (64, 48, 56), 400000)


def _solve(monkeypatch, scene, shared, unroll, tail=None, cluster=0, preconditioner="mg", fuse=False):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure_gpu, "TAIL_SHARED", shared)
    monkeypatch.setattr(sparse_pressure_gpu, "UNROLL", unroll)
    monkeypatch.setattr(sparse_pressure_gpu, "FUSE", fuse)
    monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", sparse_pressure_gpu.TAIL_UNKNOWNS if tail is None
                        else tail)
    monkeypatch.setattr(sparse_pressure_gpu, "CLUSTER_UNKNOWNS", cluster)
    sparse_pressure_gpu.release_gpu_solvers()
    spec, pos, vel, obstacle = scene
    g = tank(cupy, pos, vel, spec, obstacle)
    p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5, preconditioner=preconditioner,
                                              max_iterations=3000)
    (solver,) = sparse_pressure_gpu._solvers.values()
    return backend.to_numpy(p), stats, solver


def test_gpu_shared_tail_gives_the_global_tails_pressure_bit_for_bit(monkeypatch, scene):
    import cupy

    p0, s0, solver = _solve(monkeypatch, scene, False, False)
    strides = solver.strides
    assert len(strides) >= 5 and s0["converged"] and s0["iterations"] >= 3 and np.abs(p0).max() > 0
    hopper = int(cupy.cuda.Device().compute_capability) >= 90
    cases = [(strides[2], 0, None), (strides[3], 0, None)]  # one block from level 2, from 3
    if hopper:
        cases += [(strides[3], 2 ** 30, 1), (strides[3], strides[2], 2)]  # the cluster from level 1, from 2
    for tail, cluster, want_from in cases:
        p_old, s_old, old = _solve(monkeypatch, scene, False, False, tail, cluster)
        p, s, new = _solve(monkeypatch, scene, True, False, tail, cluster)
        first, last = new.tail[0], len(new.strides) - 1
        want = 4 * sum((3 if lv < last else 2) * new.strides[lv] for lv in range(first, last + 1))
        assert new.tail_shared == want > 0 and old.tail_shared == 0 and new.cluster_from == want_from
        assert s["iterations"] == s_old["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p_old) and np.array_equal(p, p0), (tail, cluster, float(np.abs(p - p0).max()))
    assert new._tail_shared_bytes(True, want - 4) == 0  # past the device's limit: the global tail


@pytest.mark.parametrize("fuse", [False, True], ids=["unrolled", "fused"])
@pytest.mark.parametrize("preconditioner", ["mg", "jacobi", "none"])
def test_gpu_unrolled_and_fused_kernels_give_the_plain_pressure_bit_for_bit(monkeypatch, scene, preconditioner,
                                                                              fuse):
    p0, s0, old = _solve(monkeypatch, scene, False, False, preconditioner=preconditioner)
    p, s, new = _solve(monkeypatch, scene, False, True, preconditioner=preconditioner, fuse=fuse)
    assert new.unroll and not old.unroll and s0["converged"] and s0["iterations"] >= 3
    assert new.fuse == fuse and new.fuse_beta == (fuse and preconditioner == "mg")
    assert s["iterations"] == s0["iterations"] and s["residual"] == s0["residual"]
    assert np.array_equal(p, p0), float(np.abs(p - p0).max())
    assert not new.tickets.any()  # every ticket back at 0


@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_loop_switches_give_the_dam_breaks_iterations_and_pressure(monkeypatch, warm):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for switches in ((False, False, False), (True, True, True)):
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_SHARED", switches[0])
        monkeypatch.setattr(sparse_pressure_gpu, "UNROLL", switches[1])
        monkeypatch.setattr(sparse_pressure_gpu, "FUSE", switches[2])
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", 512)  # a tail from level 2
        sparse_pressure_gpu.release_gpu_solvers()
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[switches] = solves(sim, 2)
        solvers = list(sparse_pressure_gpu._solvers.values())
        assert solvers and all((s.tail_shared > 0) == switches[0] and s.unroll == switches[1]
                               and s.fuse_beta == switches[2] for s in solvers)
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)
