"""The PCG loop's per-iteration switches against the plain kernels, in the same process: the
one-block tail's vectors in shared memory (sparse_pressure_gpu.TAIL_SHARED,
VOXFX_SPARSE_MG_TAIL_SHARED: mg_tail_vcycle_shared, mg_tail_cluster_shared) and the one-colour
launches over part of the grid (COLOUR_GRID, VOXFX_SPARSE_MG_COLOUR_GRID). Both compute the same
values in the same order, so the same iterations and the pressure bit for bit — on a tank of
five levels (the tail with and without the cluster, from two levels), and substep by substep on
a dam break (cold and warm starts)."""

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


pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


@pytest.fixture(scope="module")
def scene():
    """Five levels, level 1 with more unknowns than four blocks of 1024 threads."""
    return random_scene(np.random.default_rng(), (64, 48, 56), 400000)


def _switch(monkeypatch, shared=False, colour=1, tail=None, cluster=None):
    monkeypatch.setattr(sparse_pressure_gpu, "TAIL_SHARED", shared)
    monkeypatch.setattr(sparse_pressure_gpu, "COLOUR_GRID", colour)
    if tail is not None:
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", tail)
    if cluster is not None:
        monkeypatch.setattr(sparse_pressure_gpu, "CLUSTER_UNKNOWNS", cluster)
    sparse_pressure_gpu.release_gpu_solvers()


def _solve(monkeypatch, scene, **switches):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    _switch(monkeypatch, **switches)
    spec, pos, vel, obstacle = scene
    g = tank(cupy, pos, vel, spec, obstacle)
    p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
    (solver,) = sparse_pressure_gpu._solvers.values()
    return backend.to_numpy(p), stats, solver


@pytest.mark.usefixtures("mg_dense_sweeps")
def test_gpu_tail_switches_give_the_plain_tails_pressure_bit_for_bit(monkeypatch, scene):
    import cupy

    p0, s0, solver = _solve(monkeypatch, scene, cluster=0)
    strides = solver.strides
    assert len(strides) >= 5 and s0["converged"] and s0["iterations"] >= 3 and np.abs(p0).max() > 0
    assert solver._tail_kernel() == "mg_tail_vcycle"
    hopper = int(cupy.cuda.Device().compute_capability) >= 90
    cases = [(strides[2], 0, None), (strides[3], 0, None)]  # one block from level 2, from 3
    if hopper:
        cases += [(strides[3], 2 ** 30, 1), (strides[3], strides[2], 2)]  # the cluster from level 1, from 2
    for tail, cluster, want_from in cases:
        p_old, s_old, old = _solve(monkeypatch, scene, tail=tail, cluster=cluster)
        assert old.tail_shared == 0 and old.cluster_from == want_from
        p, s, new = _solve(monkeypatch, scene, shared=True, tail=tail, cluster=cluster)
        first, last = new.tail[0], len(new.strides) - 1
        want = 4 * sum((3 if lv < last else 2) * new.strides[lv] for lv in range(first, last + 1))
        assert new.tail_shared == want > 0 and new.cluster_from == want_from
        assert "_shared" in new._tail_kernel()  # _shared or _shared_fold (TAIL_FOLD)
        assert s["iterations"] == s_old["iterations"] == s0["iterations"] and s["converged"]
        assert np.array_equal(p, p_old) and np.array_equal(p, p0), (tail, cluster)
    assert new._tail_shared_bytes(True, want - 4) == 0  # past the device's limit: the global tail


@pytest.mark.parametrize("colour", [2, 4])
def test_gpu_narrow_colour_grids_give_the_plain_pressure_bit_for_bit(monkeypatch, scene, colour):
    p0, s0, _ = _solve(monkeypatch, scene)
    p, s, new = _solve(monkeypatch, scene, colour=colour)
    assert new.colour_grid == colour and s0["converged"] and s0["iterations"] >= 3
    assert s["iterations"] == s0["iterations"] and s["residual"] == s0["residual"]
    assert np.array_equal(p, p0), float(np.abs(p - p0).max())


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_loop_switches_give_the_dam_breaks_iterations_and_pressure(monkeypatch, warm):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for on in (False, True):
        _switch(monkeypatch, shared=on, colour=2 if on else 1, tail=512)  # a tail from level 2
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[on] = solves(sim, 2)
        solvers = list(sparse_pressure_gpu._solvers.values())
        assert solvers and all((s.tail_shared > 0) == on and s.colour_grid == (2 if on else 1) for s in solvers)
    old, new = runs.values()
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["iterations"] == s_old["iterations"] and np.array_equal(p_new, p_old)
