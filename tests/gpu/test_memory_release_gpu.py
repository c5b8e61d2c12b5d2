"""After a bake VoxFX's pool gives its blocks back and the cached pressure solvers go:
a second bake gets the same limit as the first (issue 21 §6)."""

import numpy as np

from tests.gpu.pool_peak import pool_peak
from voxfx.kernels import backend, memory
from voxfx.kernels.flip import pressure
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def _bake(cp, res=48):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    v = np.array([[x, y, z] for x in (0.05, 0.5) for y in (0.05, 0.9) for z in (0.05, 0.45)], np.float32)
    t = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                  [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], np.int32)
    sim = FlipSimulation(spec, FlipSettings(max_substeps=2, pressure_max_iterations=40), v, t, xp=cp)
    sim.step(1 / 24)
    sim.level_set()
    return sim


def test_two_bakes_leave_the_pool_as_they_found_it():
    import cupy as cp

    pool = cp.get_default_memory_pool()
    _bake(cp)  # a first bake loads the kernels' modules (device memory outside the pool)
    memory.release_gpu_pool()
    start_total = pool.total_bytes()
    free_before = backend.device_info().free_bytes
    for _ in range(2):
        sim = _bake(cp)
        assert len(pressure._gpu_solvers) >= 1  # the bake cached its solver
        held = pool.total_bytes()
        del sim
        released = memory.release_gpu_pool()
        assert len(pressure._gpu_solvers) == 0
        assert released > 0 and released >= held - pool.total_bytes() - (1 << 20)
        assert pool.total_bytes() <= start_total + (8 << 20)
        # the second bake sees the limit the first one saw
        assert backend.device_info().free_bytes >= free_before - (64 << 20)


def test_job_runner_releases_the_pool_after_a_failed_bake():
    import cupy as cp

    from voxfx.addon.jobs import FAILED, JobRunner

    pool = cp.get_default_memory_pool()
    memory.release_gpu_pool()
    start = pool.total_bytes()  # what other tests' live arrays still hold

    def job():
        sim = _bake(cp)  # noqa: F841 - held by the failing frame
        yield 0.5, "baking"
        cp.empty(1 << 50, dtype=cp.uint8)  # a real cupy OutOfMemoryError

    r = JobRunner(job(), title="Liquid")
    assert r.run() == FAILED
    assert r.error.startswith("Out of GPU memory while baking (Liquid)") and "\n" not in r.error
    assert len(pressure._gpu_solvers) == 0 and pool.total_bytes() <= start + (1 << 20)
    x = cp.ones(1 << 20, dtype=cp.float32)  # the device still works
    assert float(x.sum()) == float(1 << 20)


def test_small_bake_peak_is_what_the_guard_says():
    """A 64³ bake's peak device memory (pool bytes in use, every malloc) stays within
    [0.67, 1.5]× ``flip_memory``: the surface's cell offsets once took a CUB histogram of
    every binning cell, 250 MiB where the formula said 55 MiB (issue 21 §6)."""
    import cupy as cp

    from voxfx.kernels.flip.sim import flip_memory

    pool = cp.get_default_memory_pool()

    memory.release_gpu_pool()
    base = pool.used_bytes()
    with pool_peak() as hook:
        sim = _bake(cp, res=64)
        sim.step(1 / 24)
        sim.level_set()
        sim.cell_velocity()
    estimate = flip_memory(sim.spec, int(sim.pos.shape[0]), xp=cp)
    ratio = (hook.peak - base) / estimate
    del sim
    memory.release_gpu_pool()
    assert 0.67 <= ratio <= 1.5, f"measured/estimate {ratio:.2f}"


def test_a_sparse_bake_leaves_the_pool_as_it_found_it():
    """The sparse solver's cached pressure buffers and graph go with the pool's blocks."""
    import cupy as cp

    from voxfx.kernels.flip import sparse_pressure_gpu

    pool = cp.get_default_memory_pool()
    memory.release_gpu_pool()
    res = 32
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    v = np.array([[x, y, z] for x in (0.05, 0.5) for y in (0.05, 0.9) for z in (0.05, 0.45)], np.float32)
    t = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                  [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], np.int32)
    sim = FlipSimulation(spec, FlipSettings(max_substeps=2, pressure_max_iterations=40), v, t, xp=cp, sparse=True)
    sim.step(1 / 24)
    assert len(sparse_pressure_gpu._solvers) >= 1  # the bake cached its solver
    del sim
    memory.release_gpu_pool()
    assert len(sparse_pressure_gpu._solvers) == 0 and pool.total_bytes() <= (8 << 20)


def test_the_pool_is_trimmed_between_frames_where_free_blocks_outgrow_the_bytes_in_use():
    """A spreading liquid allocates larger arrays each frame; the blocks it outgrew go back
    (``trim_gpu_pool``, called by the bake before each frame), the arrays in use stay."""
    import cupy as cp

    memory.release_gpu_pool()
    pool = cp.get_default_memory_pool()
    held = [cp.ones(1 << 20, cp.float32)]  # 4 MiB in use throughout
    for size in range(1, 9):  # each "frame" a larger array, freed after it
        a = cp.zeros(size * (16 << 20), cp.uint8)
        del a
    assert pool.free_bytes() > (256 << 20)  # the outgrown blocks are cached
    assert memory.trim_gpu_pool(floor=64 << 20) > (256 << 20)
    assert pool.free_bytes() == 0 and pool.used_bytes() >= (4 << 20)
    assert float(held[0].sum()) == float(1 << 20)  # the array in use is untouched
    b = cp.zeros(32 << 20, cp.uint8)  # little cached: nothing to give back
    del b
    assert memory.trim_gpu_pool(floor=64 << 20) == 0
    memory.release_gpu_pool()
