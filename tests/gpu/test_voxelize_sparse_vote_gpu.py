"""The 3-axis vote of the sparse voxelizer on the device (gpu_sparse_vote.py, issue 11)
equals the CPU reference on fresh inputs: the same partial bricks, rows and maximal runs
as the NumPy tile walk, for closed, open and holed meshes, solid and solid+surface; the
same voxels as the dense vote."""

from pathlib import Path

import numpy as np
import pytest

from tests import exact_soups
from tests.meshes import torus, uv_sphere
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def holed(v, t, every, seed):
    keep = np.ones(len(t), bool)
    keep[int(np.random.default_rng(seed).integers(every))::every] = False
    return v, t[keep]


def around(v, res):
    lo, hi = v.min(0), v.max(0)
    return GridSpec.around(lo, hi, float((hi - lo).max()) / res)


def same_grid(gpu, cpu):
    import cupy

    assert np.array_equal(cupy.asnumpy(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(cupy.asnumpy(gpu.channels[CHANNEL][gpu.topology.slots]),
                          cpu.channels[CHANNEL][cpu.topology.slots])
    assert (CHANNEL in gpu.tiles) == (CHANNEL in cpu.tiles)
    if CHANNEL in cpu.tiles:
        assert np.array_equal(cupy.asnumpy(gpu.tiles[CHANNEL].runs), cpu.tiles[CHANNEL].runs)


@pytest.mark.parametrize("name,res", [("uv_sphere", 120), ("monkey", 150), ("torus", 97), ("cone", 64)])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_gpu_vote_bricks_equal_the_cpu_walk(name, res, mode):
    import cupy

    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    spec = around(v, res)
    cpu = voxelize_sparse(v, t, spec, mode, vote=True, xp=np, tiles=True)
    gpu = voxelize_sparse(v, t, spec, mode, vote=True, xp=cupy, tiles=True)
    assert cpu.tiles[CHANNEL].bricks > 0
    same_grid(gpu, cpu)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_gpu_vote_with_holes_equals_the_cpu_walk(seed, mode):
    """Holes: one axis's parity runs on along whole rows; the device outvotes it as the CPU does."""
    import cupy

    rng = np.random.default_rng(seed)
    v, t = holed(*uv_sphere(1.0, 40, 20, center=tuple(rng.normal(0, 0.3, 3))), 23 + seed, seed)
    v2, t2 = holed(*torus(0.9, 0.3, 36, 18, center=(1.5, 0.2, -0.4)), 19 + seed, seed + 7)
    v, t = np.concatenate([v, v2]), np.concatenate([t, t2 + len(v)])
    spec = around(v, 180 + 17 * seed)
    same_grid(voxelize_sparse(v, t, spec, mode, vote=True, xp=cupy, tiles=True),
              voxelize_sparse(v, t, spec, mode, vote=True, xp=np, tiles=True))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gpu_sparse_vote_of_soups_equals_the_dense_cpu_vote(seed):
    """Random soups (ties, slivers): ``voxelize(sparse=True, vote=True)`` on the device sets
    exactly the dense CPU vote's voxels."""
    import cupy

    v, t = exact_soups.soup(seed)
    for verts, spec in ((v, exact_soups.UNIT), (exact_soups.scaled(v), exact_soups.SCALED)):
        for mode in ("solid", "solid+surface"):
            want = voxelize(verts, t, spec, mode, vote=True, xp=np).bits
            got = voxelize(verts, t, spec, mode, vote=True, xp=cupy, sparse=True)
            assert np.array_equal(cupy.asnumpy(got.to_dense().bits), want)


def test_gpu_sparse_vote_at_512_equals_the_dense_gpu_vote():
    """Suzanne (open) at 512³: the sparse vote's voxels are the dense device vote's, and
    its interior is held as runs."""
    import cupy

    v, t = PRIMS["monkey_vertices"], PRIMS["monkey_triangles"]
    spec = around(v, 512)
    dense = voxelize(v, t, spec, "solid", vote=True, xp=cupy)
    sparse = voxelize(v, t, spec, "solid", vote=True, xp=cupy, sparse=True)  # on the host
    assert sparse.full_bricks > 0
    assert sparse.count() == int(dense.count()) > 0
    assert np.array_equal(sparse.to_dense().bits, cupy.asnumpy(dense.bits))


@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_vote_pool_stays_under_the_device_estimate(mode):
    """The pool's peak over the whole sparse vote (three solids, U, the bitmaps) is at most
    the guard's device estimate with the vote (sparse_guard.sparse_bytes(vote=True)), and
    the result equals the dense CPU vote's bricks at 1024³ on the bunny."""
    import cupy

    from tests.gpu.test_voxelize_sparse_kernels_gpu import bunny_spec
    from voxfx.kernels.voxelize import sparse_guard

    v, t, spec = bunny_spec(1024)
    surface, inside = sparse_guard.brick_counts(v, t, spec, mode, vote=True, xp=cupy)
    estimate = sparse_guard.sparse_bytes(surface, inside, len(v), len(t), xp=cupy, vote=True)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    before = pool.total_bytes()
    grid = voxelize_sparse(v, t, spec, mode, vote=True, tile=64, xp=cupy, tiles=True)
    cupy.cuda.Device().synchronize()
    peak = pool.total_bytes() - before
    assert grid.topology.count > 0 and grid.tiles[CHANNEL].bricks > 0
    assert 0 < peak <= estimate, (peak, estimate)
