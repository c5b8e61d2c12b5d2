"""Issue 21 §6: a pressure solver the cache drops (another number of multigrid levels, the
cache full, ``release_gpu_solvers`` after a bake, Free or Cancel) gives its device memory
back at once. Its CUDA-graph loops record its own methods; held strongly they made a
reference cycle, and the buffers stayed allocated until Python's next cyclic collection (at
65M particles the frame-0 and frame-4 solvers, ~1.2 GiB, were both still held at frame 14).
The cyclic collector is off in these tests: only reference counting may free them. The
sparse solver in both set-up modes (``sparse_pressure_workspace.MODE``): with the workspace,
a solver bound to its tables goes when its hierarchy changes, and when the workspace takes
new tables (its capacities grew) the older generation's solver goes before them."""

import gc
import weakref

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from voxfx.kernels.flip import pressure_gpu, sparse_pressure, sparse_pressure_gpu, sparse_pressure_workspace

pytestmark = pytest.mark.gpu
MODES = ("fresh", "workspace")


@pytest.fixture
def no_cyclic_gc():
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize("mode", MODES)
def test_gpu_a_dropped_sparse_solver_frees_its_buffers_at_once(no_cyclic_gc, monkeypatch, mode):
    import cupy

    monkeypatch.setattr(sparse_pressure_workspace, "MODE", mode)
    sparse_pressure_gpu.release_gpu_solvers()
    pool = cupy.get_default_memory_pool()
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(5))
    g = tank(cupy, pos, vel, spec, obstacle)
    p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5, preconditioner="mg", max_iterations=3000)
    assert stats["converged"] and stats["iterations"] > 0
    del p
    ((key, solver),) = sparse_pressure_gpu._solvers.items()
    assert (key[-1] is not None) == (mode == "workspace")  # bound to the workspace's tables or not
    assert solver.loop.graph is not None or solver.single.graph is not None  # a captured graph holds it too
    gone, levels, dense = weakref.ref(solver), key[0], solver.dense_mode
    del solver
    cupy.cuda.Device().synchronize()
    before = pool.used_bytes()
    # the same configuration for one level more: the stale solver goes when the new one is built
    newer = sparse_pressure_gpu._solver([5000 >> (2 * i) for i in range(levels + 1)], key[1], key[2],
                                        dense=dense)  # the coarse mode as the solve's (MG_DENSE)
    assert gone() is None
    held = weakref.ref(newer)
    del newer
    sparse_pressure_gpu.release_gpu_solvers()  # after a bake, Free, Cancel
    assert held() is None
    assert pool.used_bytes() < before  # both solvers' buffers are back in the pool's free blocks


def test_gpu_a_workspace_that_grows_drops_the_older_generations_solver_first(no_cyclic_gc, monkeypatch):
    """Two liquids, the second larger (the workspace's capacities grow: a new generation):
    the first's solver is gone once the second's set-up took new tables (the cache holds
    the new generation's alone), and a release gives back every byte the two solves kept."""
    import cupy

    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setenv("VOXFX_SPARSE_SETUP_FIRST_CAPS", "fresh")  # the second's set ~2× the first's: past 1.25×
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    pool = cupy.get_default_memory_pool()
    grids = [tank(cupy, pos, vel, spec, obstacle) for spec, pos, vel, obstacle in
             (random_scene(np.random.default_rng(2)), random_scene(np.random.default_rng(3), (48, 40, 40), 120000))]
    for g in grids:  # whatever a solve leaves on its grid or caches, before the count
        sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5, max_iterations=3000)
    sparse_pressure_gpu.release_gpu_solvers()
    cupy.cuda.Device().synchronize()
    with_grids = pool.used_bytes()
    p, stats = sparse_pressure.solve_pressure(grids[0], 0.01, tolerance=1e-5, max_iterations=3000)
    assert stats["converged"]
    del p
    ((_, first),) = sparse_pressure_gpu._solvers.items()
    gone, generation = weakref.ref(first), sparse_pressure_workspace.workspace().generation
    del first
    p, stats = sparse_pressure.solve_pressure(grids[1], 0.01, tolerance=1e-5, max_iterations=3000)
    assert stats["converged"]
    del p
    now = sparse_pressure_workspace.workspace().generation
    assert now != generation  # it grew
    assert gone() is None  # the older generation's solver went with its tables
    assert [k[-1] for k in sparse_pressure_gpu._solvers] == [now]
    sparse_pressure_gpu.release_gpu_solvers()
    cupy.cuda.Device().synchronize()
    assert pool.used_bytes() <= with_grids  # nothing of either solve stays


def test_gpu_a_dropped_dense_solver_frees_its_buffers_at_once(no_cyclic_gc):
    import cupy

    pressure_gpu.release_gpu_solvers()
    pool = cupy.get_default_memory_pool()
    solver = pressure_gpu._gpu_solver((24, 20, 16), "mg", 10)
    solver.loop.capture()  # the block's graph, as the first solve makes it
    gone = weakref.ref(solver)
    del solver
    before = pool.used_bytes()
    for shape in ((16, 16, 16), (8, 8, 8)):  # two more shapes: the cache (two places) drops the first
        pressure_gpu._gpu_solver(shape, "mg", 10)
    assert gone() is None
    pressure_gpu.release_gpu_solvers()
    assert pool.used_bytes() < before
