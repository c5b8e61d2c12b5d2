"""The V-cycle's launch switches against today's launches (0, the default), in the same
process: the levels above the one-block tail in one cluster launch
(sparse_pressure_gpu.CLUSTER_UNKNOWNS, VOXFX_SPARSE_MG_CLUSTER: mg_tail_cluster, compute
capability 9.0 on) and the first pre-smoothing sweep with the second's red pass in one launch
(FIRST2_UNKNOWNS, VOXFX_SPARSE_MG_FIRST2: mg_smooth_first2). Both compute the launch-by-launch
values unknown by unknown, so the same iterations and the pressure bit for bit — on a tank
whose levels 1 and 2 spread over the cluster's blocks, and substep by substep on a dam break
(cold and warm starts)."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.pressure_solves import solves
from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_vcycle
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


def _hopper():
    import cupy

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("thread-block clusters need compute capability 9.0")


def _solve(monkeypatch, scene, tail, cluster=0, first2=0):
    import cupy

    monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", tail)
    monkeypatch.setattr(sparse_pressure_gpu, "CLUSTER_UNKNOWNS", cluster)
    monkeypatch.setattr(sparse_pressure_gpu, "FIRST2_UNKNOWNS", first2)
    sparse_pressure_gpu.release_gpu_solvers()
    spec, pos, vel, obstacle = scene
    g = tank(cupy, pos, vel, spec, obstacle)
    p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
    (solver,) = sparse_pressure_gpu._solvers.values()
    return backend.to_numpy(p), stats, solver


@pytest.fixture(scope="module")
def scene():
    """Five levels, level 1 with more unknowns than four blocks of 1024 threads."""
    return random_scene(np.random.default_rng(), (64, 48, 56), 400000)


def _base(monkeypatch, scene):
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    p0, s0, solver = _solve(monkeypatch, scene, sparse_pressure_gpu.TAIL_UNKNOWNS)
    assert solver.cluster_from is None and not any(solver.first2)
    assert len(solver.strides) >= 5 and solver.strides[1] > 4 * 1024
    assert s0["converged"] and s0["iterations"] >= 3 and np.abs(p0).max() > 0
    return p0, s0, solver.strides


@pytest.mark.usefixtures("mg_dense_sweeps")
def test_gpu_cluster_tail_gives_the_launch_by_launch_pressure_bit_for_bit(monkeypatch, scene):
    _hopper()
    p0, s0, strides = _base(monkeypatch, scene)
    cases = [(strides[3], 2 ** 30, 1, 3),  # levels 1, 2 by the cluster, 3.. by its block 0
             (strides[3], strides[2], 2, 3),  # level 2 by the cluster
             (strides[2], 2 ** 30, 1, 2)]
    for tail, cluster, want_from, want_first in cases:
        p, s, solver = _solve(monkeypatch, scene, tail, cluster)
        assert (solver.cluster_from, solver.tail[0]) == (want_from, want_first)
        assert s["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p0), (tail, cluster, float(np.abs(p - p0).max()))


@pytest.mark.usefixtures("mg_dense_sweeps")
def test_gpu_cluster_of_16_blocks_gives_the_pressure_of_8_bit_for_bit(monkeypatch, scene):
    """VOXFX_SPARSE_MG_CLUSTER_BLOCKS 16 (a non-portable cluster, sparse_pressure_vcycle.CLUSTER_BLOCKS):
    levels 1 and 2 spread over 16 blocks, the same values as over 8."""
    _hopper()
    p0, s0, strides = _base(monkeypatch, scene)
    for blocks in (8, 16):
        monkeypatch.setattr(sparse_pressure_vcycle, "CLUSTER_BLOCKS", blocks)
        p, s, solver = _solve(monkeypatch, scene, strides[3], 2 ** 30)
        assert solver.cluster_blocks == blocks and (solver.cluster_from, solver.tail[0]) == (1, 3)
        assert s["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p0), (blocks, float(np.abs(p - p0).max()))


@pytest.mark.usefixtures("mg_dense_sweeps")
def test_gpu_tail_fold_gives_the_pressure_bit_for_bit(monkeypatch, scene):
    """VOXFX_SPARSE_MG_TAIL_FOLD 1 (sparse_pressure_vcycle.TAIL_FOLD: the shared tails' first sweep
    in two passes, the _shared_fold kernels): the same pressure, one block or a cluster."""
    import cupy

    p0, s0, strides = _base(monkeypatch, scene)
    hopper = int(cupy.cuda.Device().compute_capability) >= 90
    monkeypatch.setattr(sparse_pressure_vcycle, "TAIL_FOLD", True)
    for cluster in (0, 2 ** 30) if hopper else (0,):
        p, s, solver = _solve(monkeypatch, scene, strides[3], cluster)
        assert solver.tail_fold and solver._tail_kernel().endswith("_shared_fold")
        assert (solver.cluster_from is not None) == bool(cluster)
        assert s["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p0), (cluster, float(np.abs(p - p0).max()))


@pytest.mark.usefixtures("mg_dense_sweeps")
def test_gpu_first2_gives_the_launch_by_launch_pressure_bit_for_bit(monkeypatch, scene):
    p0, s0, strides = _base(monkeypatch, scene)
    tail = sparse_pressure_gpu.TAIL_UNKNOWNS
    for first2, want in ((2 ** 30, [True] * len(strides)), (strides[1], [False] + [True] * (len(strides) - 1))):
        p, s, solver = _solve(monkeypatch, scene, tail, first2=first2)
        assert list(solver.first2) == want
        assert s["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p0), (first2, float(np.abs(p - p0).max()))


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_vcycle_switches_give_the_dam_breaks_iterations_and_pressure(monkeypatch, warm):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    hopper = int(cupy.cuda.Device().compute_capability) >= 90
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for cluster, first2 in ((0, 0), (2 ** 30 if hopper else 0, 2 ** 30)):
        monkeypatch.setattr(sparse_pressure_gpu, "CLUSTER_UNKNOWNS", cluster)
        monkeypatch.setattr(sparse_pressure_gpu, "FIRST2_UNKNOWNS", first2)
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", 512)  # a tail from level 2
        sparse_pressure_gpu.release_gpu_solvers()
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[(cluster, first2)] = solves(sim, 2)
        solvers = list(sparse_pressure_gpu._solvers.values())
        assert solvers and all((s.cluster_from is not None) == bool(cluster) for s in solvers)
        assert all(s.first2[0] == bool(first2) for s in solvers)
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)
