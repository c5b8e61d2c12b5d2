"""The coarsest level solved by its dense inverse (sparse_multigrid.MG_DENSE,
VOXFX_SPARSE_MG_DENSE; issue 24, i24p4) on the device: mg_dense_inverse's G (one block of real
threads, shared or global scratch) equal to sparse_multigrid.dense_inverse's bit for bit on the
solver's own coarsest tables; the pressure the NumPy solve's with the same mode; the V-cycle's
launch variants (cluster and shared tails, the tail off, the split launches) the same
iterations and pressure bit for bit with the dense solve as they are with the sweeps; and a dam
break's substeps converging with each mode in no more iterations (its first to the sweeps' pressure)."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure, sparse_pressure_gpu
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
    return random_scene(np.random.default_rng(11), (64, 48, 56), 400000)


def _solve(xp, scene):
    spec, pos, vel, obstacle = scene
    g = tank(xp, pos, vel, spec, obstacle)
    p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
    return backend.to_numpy(p), stats


def _device_inverse(solver):
    """(the NumPy G of the solver's coarsest tables, the device's G), both m × m."""
    import cupy

    last = len(solver.strides) - 1
    m = int(solver.sizes[2 * last + 1].get())
    B = solver.levels[last]
    level = SimpleNamespace(m=m, nbr=cupy.asnumpy(B.nbr[:, :m + 1]), diag=cupy.asnumpy(B.diag[:m + 1]))
    S = solver.strides[last]
    got = cupy.asnumpy(solver.dense).reshape(-1, S)[:m, :m].T  # row j at j·S: G_ij at [j, i] (DENSE_ROWS rows)
    return sparse_multigrid.dense_inverse(level), got, m


@pytest.mark.parametrize("mode", [1, 2])
def test_gpu_dense_inverse_is_the_numpys_and_the_pressure_the_cpus(monkeypatch, scene, mode):
    import cupy

    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
    pc, sc = _solve(np, scene)
    pg, sg = _solve(cupy, scene)
    (solver,) = sparse_pressure_gpu._solvers.values()
    assert solver.dense_mode == mode and solver.dense is not None
    want, got, m = _device_inverse(solver)
    assert m > 0 and np.abs(want).max() > 0
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", 0)
    sparse_pressure_gpu.release_gpu_solvers()
    _, s0 = _solve(cupy, scene)
    (plain,) = sparse_pressure_gpu._solvers.values()
    assert len(solver.strides) == len(plain.strides) - (mode == 2)  # "2": the last level dropped
    assert sc["converged"] and sg["converged"] and sg["residual"] <= 1e-5
    assert abs(sg["iterations"] - sc["iterations"]) <= 1
    assert sg["iterations"] <= s0["iterations"] + 1
    assert np.abs(pg - pc).max() <= 1e-3 * np.abs(pc).max()


def test_gpu_dense_inverse_in_global_scratch(monkeypatch, scene):
    """mg_dense_inverse with its scratch in global memory (a device limit too small for shared)."""
    import cupy

    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", 2)
    setup = sparse_pressure_gpu.SparsePressureSolverGPU._dense_setup
    monkeypatch.setattr(sparse_pressure_gpu.SparsePressureSolverGPU, "_dense_setup",
                        lambda self, mode, limit: setup(self, mode, 0))
    _, s = _solve(cupy, scene)
    (solver,) = sparse_pressure_gpu._solvers.values()
    assert solver.dense_shared == 0 and solver.dense_work.size > 0 and s["converged"]
    want, got, _ = _device_inverse(solver)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


@pytest.mark.parametrize("coarsest,rows", [(71, None), (1599, None), (1599, 128)])
def test_gpu_solver_bytes_count_its_dense_inverse(coarsest, rows):
    """``solver_memory_bytes``' dense term (``dense_bytes``) is what ``_dense_setup`` allocates: G
    and, past a block's shared memory, mg_dense_inverse's scratch (the spreading 1M liquid's
    coarsest stride in frame 11 under CAPS "together", 1599: 29.3 MiB on an H100; i24b3)."""
    from voxfx.kernels.flip.sparse_pressure_buffers import dense_bytes, solver_memory_bytes

    solver = sparse_pressure_gpu.SparsePressureSolverGPU([5000, coarsest], "mg", 10, dense=2, dense_rows=rows)
    held = solver.dense.nbytes + (0 if solver.dense_shared else solver.dense_work.nbytes)
    assert solver.dense_mode == 2 and held == dense_bytes(coarsest, solver.shared_limit, rows)
    assert (solver.dense_shared > 0) == (coarsest == 71 or rows == 128)  # 128² + 256 doubles: shared memory
    counted = solver_memory_bytes(solver.strides, "mg", solver.level0_nbr, 2, solver.shared_limit, rows)
    assert counted - solver_memory_bytes(solver.strides, "mg", solver.level0_nbr) == held
    if coarsest == 1599:  # the coarsest level's m within the rows
        assert solver.fits([4000, 129]) and solver.fits([4000, 130]) == (rows is None)


@pytest.mark.parametrize("mode", [1, 2])
def test_gpu_vcycle_variants_give_the_same_pressure_with_the_dense_solve(monkeypatch, scene, mode):
    """The tails (cluster, shared, global), no tail (mg_restrict_coarse_dense) and the split
    launches (mg_coarse_dense) compute the same V-cycle: the same iterations and bits."""
    import cupy

    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
    runs = []
    for vcycle, tail, shared in (("fused", sparse_pressure_gpu.TAIL_UNKNOWNS, True),
                                 ("fused", sparse_pressure_gpu.TAIL_UNKNOWNS, False), ("fused", 0, False),
                                 ("split", 0, False)):
        monkeypatch.setattr(sparse_pressure_gpu, "VCYCLE", vcycle)
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", tail)
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_SHARED", shared)
        sparse_pressure_gpu.release_gpu_solvers()
        p, s = _solve(cupy, scene)
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert (solver.tail is not None) == bool(tail) and solver.dense is not None
        runs.append((p, s["iterations"]))
    p0, it0 = runs[0]
    assert it0 >= 3 and np.abs(p0).max() > 0
    for p, it in runs[1:]:
        assert it == it0 and np.array_equal(p, p0), float(np.abs(p - p0).max())


def _tight_rows(monkeypatch):
    """``DENSE_ROWS`` at its tightest: G's rows the coarsest level's m + 1 when a solver is built."""
    from voxfx.kernels.flip import sparse_pressure_buffers

    monkeypatch.setattr(sparse_pressure_buffers, "dense_rows", lambda need, stride, mode=None: min(int(stride),
                                                                                                     int(need)))


@pytest.mark.parametrize("mode", [1, 2])
def test_gpu_dense_inverse_of_bounded_rows_is_the_same(monkeypatch, scene, mode):
    """``sparse_pressure_buffers.DENSE_ROWS`` "bound" (here rows for the coarsest level's m alone):
    the same G bit for bit, the same iterations and pressure as with rows of the stride (i24b3)."""
    import cupy

    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
    monkeypatch.setenv("VOXFX_SPARSE_MG_DENSE_ROWS", "stride")  # the reference: rows of the stride
    pg, sg = _solve(cupy, scene)
    (full,) = sparse_pressure_gpu._solvers.values()
    want, got_full, m = _device_inverse(full)
    assert full.dense_rows == full.strides[-1] and full.dense.size == full.strides[-1] ** 2  # "stride"
    sparse_pressure_gpu.release_gpu_solvers()
    _tight_rows(monkeypatch)
    pb, sb = _solve(cupy, scene)
    (bound,) = sparse_pressure_gpu._solvers.values()
    assert bound.strides == full.strides and bound.dense_rows == m + 1 < bound.strides[-1]
    assert bound.dense.size == bound.dense_rows * bound.strides[-1]
    _, got, _ = _device_inverse(bound)
    assert np.array_equal(got.view(np.int32), got_full.view(np.int32))
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    assert sb["iterations"] == sg["iterations"] and np.array_equal(pb, pg)


def test_gpu_dense_rows_bound_dam_break_gives_the_same_bits(monkeypatch):
    """Rows for the coarsest level's m at each solver's build: a coarsest level that grows past them
    takes a new solver, and a solve launched ahead on the old one (ahead_sizes' limit: its rows + 1)
    is missed, not wrong — the same iterations and pressure bit for bit as rows of the stride."""
    import cupy

    from voxfx.kernels.flip import sparse_pressure_solve_ahead

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    monkeypatch.setenv("VOXFX_SPARSE_MG_DENSE_ROWS", "stride")  # the reference (the default is "bound")
    for way in ("stride", "tight"):
        if way == "tight":
            _tight_rows(monkeypatch)
        sparse_pressure_gpu.release_gpu_solvers()
        launched = sparse_pressure_solve_ahead.counts["launched"]
        sim = FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True)
        runs[way] = solves(sim, 3)
        assert sparse_pressure_solve_ahead.counts["launched"] > launched
        dense = [s for s in sparse_pressure_gpu._solvers.values() if s.dense is not None]
        assert dense and all((s.dense_rows < s.strides[-1]) == (way == "tight") for s in dense)
    assert len(runs["stride"]) == len(runs["tight"]) >= 3
    for (p0, s0), (p, s) in zip(runs["stride"], runs["tight"]):
        assert s["iterations"] == s0["iterations"] and np.array_equal(p, p0)


@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_dense_coarse_dam_break_converges_to_the_sweeps_pressure(monkeypatch, warm):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for mode in (0, 1, 2):
        monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
        sparse_pressure_gpu.release_gpu_solvers()
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1"), v, t, xp=cupy, sparse=True)
        runs[mode] = solves(sim, 2)
        assert all(s.dense_mode == mode for s in sparse_pressure_gpu._solvers.values())
    assert len(runs[0]) == len(runs[1]) == len(runs[2]) > 0
    for mode in (1, 2):
        for (_, s0), (_, s) in zip(runs[0], runs[mode]):
            assert s["converged"] and s["iterations"] <= s0["iterations"] + 1
        (p0, _), (p, _) = runs[0][0], runs[mode][0]  # the first substep's state is the same: so the pressure
        assert np.abs(p0).max() > 0 and np.abs(p - p0).max() <= 1e-3 * np.abs(p0).max()
