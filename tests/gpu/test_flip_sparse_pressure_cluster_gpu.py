"""The V-cycle's levels above the one-block tail in one cluster launch
(sparse_pressure_gpu.CLUSTER_UNKNOWNS, VOXFX_SPARSE_MG_CLUSTER: mg_tail_cluster, compute
capability 9.0 on) against the launch-by-launch levels (0, the default), in the same process:
the same kernels' per-unknown values between the cluster's barriers, so the same iterations
and the pressure bit for bit — on a tank whose levels 1 and 2 spread over the cluster's
blocks, and substep by substep on a dam break (cold and warm starts)."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.gpu.test_flip_sparse_pressure_persist_gpu import solves
from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


@pytest.fixture(autouse=True)
def _hopper():
    import cupy

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("thread-block clusters need compute capability 9.0")
    sparse_pressure_gpu.release_gpu_solvers()
    yield
    sparse_pressure_gpu.release_gpu_solvers()


def _solve(monkeypatch, scene, tail, cluster):
    import cupy

    monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", tail)
    monkeypatch.setattr(sparse_pressure_gpu, "CLUSTER_UNKNOWNS", cluster)
    sparse_pressure_gpu.release_gpu_solvers()
    spec, pos, vel, obstacle = scene
    g = tank(cupy, pos, vel, spec, obstacle)
    p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
    (solver,) = sparse_pressure_gpu._solvers.values()
    return backend.to_numpy(p), stats, solver


def test_gpu_cluster_tail_gives_the_launch_by_launch_pressure_bit_for_bit(monkeypatch):
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    rng = np.random.default_rng()
    scene = random_scene(rng, (64, 48, 56), 400000)
    p0, s0, solver = _solve(monkeypatch, scene, sparse_pressure_gpu.TAIL_UNKNOWNS, 0)
    strides = solver.strides
    assert solver.cluster_from is None and len(strides) >= 5 and strides[1] > 4 * 1024  # level 1: every block
    assert s0["converged"] and s0["iterations"] >= 3 and np.abs(p0).max() > 0
    cases = [(strides[3], 2 ** 30, 1, 3),  # levels 1, 2 by the cluster, 3.. by its block 0
             (strides[3], strides[2], 2, 3),  # level 2 by the cluster
             (strides[2], 2 ** 30, 1, 2)]
    for tail, cluster, want_from, want_first in cases:
        p, s, solver = _solve(monkeypatch, scene, tail, cluster)
        assert (solver.cluster_from, solver.tail[0]) == (want_from, want_first)
        assert s["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p0), (tail, cluster, float(np.abs(p - p0).max()))


@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_cluster_tail_gives_the_dam_breaks_iterations_and_pressure(monkeypatch, warm):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for cluster in (0, 2 ** 30):
        monkeypatch.setattr(sparse_pressure_gpu, "CLUSTER_UNKNOWNS", cluster)
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", 512)  # a tail from level 2 or 3
        sparse_pressure_gpu.release_gpu_solvers()
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[cluster] = solves(sim, 2)
        used = [s.cluster_from for s in sparse_pressure_gpu._solvers.values()]
        assert used and all((u is not None) == bool(cluster) for u in used), used
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)
