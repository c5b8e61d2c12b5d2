"""The device sparse voxelizer's stages (gpu_sparse.py) on the device: the surface kernels
(warp tiles, tiles3, and one thread per column) give the dense GPU voxelizer's bricks on
the bunny at 256³ and 1024³, and so do the solid's 32-bit and 64-bit crossing keys; setups,
candidate batches and crossing sorts cut into small chunks give the same bricks; bad input is
refused before anything is voxelized; the transient pool stays under the guard's device
estimate."""

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import gpu_sparse
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse


def bunny_spec(res):
    from tests.meshes import bunny

    mesh, why = bunny()
    if mesh is None:
        pytest.skip(why)
    v, t = mesh
    lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)
    return v, t, GridSpec(spec.origin, spec.voxel_size, tuple(-(-s // 64) * 64 for s in spec.shape))


def dense_bricks(words, shape, xp):
    """(keys, rows) of the non-empty bricks of a dense packed bit grid (shape multiple of 8)."""
    from voxfx.kernels.grid.sparse import brick_keys

    nx, ny, nz = shape
    b = xp.ascontiguousarray(words).view(xp.uint8).reshape(nz // 8, 8, ny // 8, 8, nx // 8)
    b = b.transpose(0, 2, 4, 1, 3).reshape(-1, 8, 8)
    keep = xp.flatnonzero(b.reshape(b.shape[0], -1).any(axis=1))
    nbx, nby = nx // 8, ny // 8
    return brick_keys(xp.stack([keep % nbx, (keep // nbx) % nby, keep // (nbx * nby)], axis=1), xp), b[keep]


@pytest.mark.parametrize("kernel", ["tiles", "tiles3", "columns"])
@pytest.mark.parametrize("res", [256, 1024])
@pytest.mark.parametrize("mode", ["surface", "thin", "solid+surface"])
def test_surface_kernels_equal_the_dense_gpu_on_the_bunny(monkeypatch, kernel, res, mode):
    import cupy

    from voxfx.kernels.voxelize import voxelize

    monkeypatch.setattr(gpu_sparse, "SURFACE_KERNEL", kernel)
    v, t, spec = bunny_spec(res)
    grid = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True).expanded(CHANNEL)
    keys, rows = dense_bricks(cupy.asarray(voxelize(v, t, spec, mode, xp=cupy).bits), spec.shape, cupy)
    assert keys.shape[0] > 0
    assert grid.topology.keys.shape == keys.shape
    assert bool((grid.topology.keys == keys).all()) and bool((grid.channels[CHANNEL] == rows).all())


@pytest.mark.parametrize("sort_chunk", [50000, 1 << 22])
@pytest.mark.parametrize("keys", [32, 64])
@pytest.mark.parametrize("res", [256, 1024])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_solid_crossing_keys_equal_the_dense_gpu_on_the_bunny(monkeypatch, mode, res, keys, sort_chunk):
    """32-bit keys (the slice counted from its sort group's first) and 64-bit keys, sorted in
    groups of about 50,000 keys (many groups) or 4M (few): the dense voxelizer's bricks."""
    import cupy

    from voxfx.kernels.voxelize import voxelize

    monkeypatch.setattr(gpu_sparse, "SOLID_KEYS", keys)
    monkeypatch.setattr(gpu_sparse, "SORT_CHUNK", sort_chunk)
    v, t, spec = bunny_spec(res)
    grid = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True).expanded(CHANNEL)
    keys_dense, rows = dense_bricks(cupy.asarray(voxelize(v, t, spec, mode, xp=cupy).bits), spec.shape, cupy)
    assert keys_dense.shape[0] > 0
    assert grid.topology.keys.shape == keys_dense.shape
    assert bool((grid.topology.keys == keys_dense).all()) and bool((grid.channels[CHANNEL] == rows).all())


@pytest.mark.parametrize("mode", ["surface", "solid", "solid+surface"])
def test_small_chunks_give_the_same_bricks(monkeypatch, mode):
    """Setups 5,000 triangles at a time, candidates 20,000 brick items at a time, crossings
    sorted 50,000 at a time (several slices per group, some groups one slice): the same
    bricks and runs as in one piece."""
    import cupy

    v, t, spec = bunny_spec(512)
    whole = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True)
    monkeypatch.setattr(gpu_sparse, "SETUP_CHUNK", 5000)
    monkeypatch.setattr(gpu_sparse, "PAIR_BATCH", 20000)
    monkeypatch.setattr(gpu_sparse, "SORT_CHUNK", 50000)
    cut = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True)
    assert whole.topology.count > 0
    assert bool((whole.topology.keys == cut.topology.keys).all())
    assert bool((whole.channels[CHANNEL] == cut.channels[CHANNEL]).all())
    if mode != "surface":
        assert bool((whole.tiles[CHANNEL].runs == cut.tiles[CHANNEL].runs).all())


@pytest.mark.parametrize("mode", ["surface", "thin", "solid+surface"])
def test_bad_input_is_refused_on_the_device(mode):
    import cupy

    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    t = np.array([[0, 1, 2], [0, 1, 3]], np.int32)
    spec = GridSpec((-0.1, -0.1, -0.1), 0.05, (32, 32, 32))
    bad = v.copy()
    bad[3, 2] = np.nan
    with pytest.raises(InputError, match="1 vertices have non-finite"):
        voxelize_sparse(bad, t, spec, mode, tile=32, xp=cupy)
    with pytest.raises(InputError, match="outside the vertex array"):
        voxelize_sparse(v, np.array([[0, 1, 2], [0, 1, 4]], np.int32), spec, mode, tile=32, xp=cupy)
    assert voxelize_sparse(v, t, spec, mode, tile=32, xp=cupy).topology.count > 0


@pytest.mark.parametrize("mode", ["surface", "solid+surface"])
def test_transient_pool_stays_under_the_device_estimate(mode):
    """The pool's peak over the whole sparse voxelization (CuPy's pool holds what it ever
    held) is at most the guard's device estimate of the job (sparse_guard.sparse_bytes)."""
    import cupy

    from voxfx.kernels.voxelize import sparse_guard

    v, t, spec = bunny_spec(1024)
    surface, inside = sparse_guard.brick_counts(v, t, spec, mode, xp=cupy)
    estimate = sparse_guard.sparse_bytes(surface, inside, len(v), len(t), xp=cupy)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    before = pool.total_bytes()
    grid = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True)
    cupy.cuda.Device().synchronize()
    peak = pool.total_bytes() - before
    assert grid.topology.count > 0
    assert 0 < peak <= estimate
