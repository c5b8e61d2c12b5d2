"""The sparse voxelizer on the GPU (gpu_sparse.py's device pipeline; the vote: box
kernels per tile) against the CPU and the dense GPU voxelizer: the same bricks, bit for
bit, full runs expanded."""

from pathlib import Path

import numpy as np
import pytest

from tests import exact_soups
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def same(v, t, spec, mode, vote, tile):
    import cupy

    cpu = voxelize_sparse(v, t, spec, mode, vote=vote, tile=tile, xp=np)
    gpu = voxelize_sparse(v, t, spec, mode, vote=vote, tile=tile, xp=cupy)
    assert np.array_equal(cupy.asnumpy(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(cupy.asnumpy(gpu.channels[CHANNEL]), cpu.channels[CHANNEL])
    assert cpu.topology.count > 0


@pytest.mark.parametrize("name,res,tile", [("torus", 90, 64), ("monkey", 70, 32), ("uv_sphere", 120, 64)])
@pytest.mark.parametrize("mode,vote", [("surface", False), ("thin", False), ("solid", False), ("solid", True),
                                       ("solid+surface", False)])
def test_gpu_bricks_equal_the_cpu(name, res, tile, mode, vote):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    same(v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res), mode, vote, tile)


@pytest.mark.parametrize("seed", [4, 5])
def test_gpu_ties_and_slivers_equal_the_cpu(seed):
    v, t = exact_soups.soup(seed)
    for mode in ("surface", "thin", "solid+surface"):
        same(v, t, exact_soups.UNIT, mode, False, 32)


def test_gpu_density_bricks_equal_the_cpu():
    import cupy

    from voxfx.kernels.voxelize.sparse import with_density

    v, t = PRIMS["cone_vertices"], PRIMS["cone_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / 80)
    cpu = with_density(voxelize_sparse(v, t, spec, "solid+surface", tile=64, xp=np))
    gpu = with_density(voxelize_sparse(v, t, spec, "solid+surface", tile=64, xp=cupy))
    assert np.array_equal(cupy.asnumpy(gpu.channels["density"]), cpu.channels["density"])
    assert cpu.channels["density"].dtype == np.float32 and cpu.channels["density"].max() == 1.0


def dense_bricks(words, shape, xp):
    """(keys, rows) of the non-empty bricks of a dense packed bit grid (shape multiple of 8)."""
    from voxfx.kernels.grid.sparse import brick_keys

    nx, ny, nz = shape
    b = xp.ascontiguousarray(words).view(xp.uint8).reshape(nz // 8, 8, ny // 8, 8, nx // 8)
    b = b.transpose(0, 2, 4, 1, 3).reshape(-1, 8, 8)
    keep = xp.flatnonzero(b.reshape(b.shape[0], -1).any(axis=1))
    nbx, nby = nx // 8, ny // 8
    return brick_keys(xp.stack([keep % nbx, (keep // nbx) % nby, keep // (nbx * nby)], axis=1), xp), b[keep]


@pytest.mark.parametrize("name,res", [("uv_sphere", 200), ("monkey", 150), ("torus", 130)])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_gpu_full_runs_expand_to_the_cpu_bricks(name, res, mode):
    """With tiles=True the interior is runs of full bricks: fewer bytes, the same voxels."""
    import cupy

    from voxfx.kernels.grid import sparse_ops

    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)
    cpu = voxelize_sparse(v, t, spec, mode, tile=64, xp=np)
    gpu = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True)
    tiles = gpu.tiles[CHANNEL]
    assert tiles.bricks > 0 and gpu.nbytes < cpu.nbytes
    full = gpu.expanded(CHANNEL)
    assert np.array_equal(cupy.asnumpy(full.topology.keys), cpu.topology.keys)
    assert np.array_equal(cupy.asnumpy(full.channels[CHANNEL]), cpu.channels[CHANNEL])
    # the density channel and its dense exchange honour the runs
    from voxfx.kernels.voxelize.sparse import with_density

    dg, dc = with_density(gpu), with_density(cpu)
    assert sparse_ops.count(dg, "density") == sparse_ops.count(dc, "density") > 0
    nx, ny, nz = (-(-n // 64) * 64 for n in spec.shape)
    assert np.array_equal(cupy.asnumpy(dg.to_dense("density", (0, 0, 0), (nx, ny, nz))),
                          dc.to_dense("density", (0, 0, 0), (nx, ny, nz)))


@pytest.mark.parametrize("mode", ["surface", "thin", "solid", "solid+surface"])
def test_gpu_sparse_bunny_equals_the_dense_gpu(mode):
    """The bunny at 512³: the sparse bricks (runs expanded) are the dense grid's bricks."""
    import cupy

    from tests.meshes import bunny
    from voxfx.kernels.voxelize import voxelize

    mesh, why = bunny()
    if mesh is None:
        pytest.skip(why)
    v, t = mesh
    lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / 512)
    spec = GridSpec(spec.origin, spec.voxel_size, tuple(-(-s // 64) * 64 for s in spec.shape))
    grid = voxelize_sparse(v, t, spec, mode, tile=64, xp=cupy, tiles=True).expanded(CHANNEL)
    keys, rows = dense_bricks(cupy.asarray(voxelize(v, t, spec, mode, xp=cupy).bits), spec.shape, cupy)
    assert keys.shape[0] > 0
    assert bool((grid.topology.keys == keys).all()) and bool((grid.channels[CHANNEL] == rows).all())


@pytest.mark.parametrize("seed", [4, 5])
def test_gpu_solid_soups_equal_the_cpu(seed):
    v, t = exact_soups.soup(seed)
    for mode in ("solid", "solid+surface"):
        same(v, t, exact_soups.UNIT, mode, False, 32)


def test_gpu_vote_with_tiles_expands_to_the_cpu_bricks():
    """The vote stays on the tile path; tiles=True folds its full bricks into runs."""
    import cupy

    v, t = PRIMS["uv_sphere_vertices"], PRIMS["uv_sphere_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / 120)
    cpu = voxelize_sparse(v, t, spec, "solid", vote=True, tile=64, xp=np)
    gpu = voxelize_sparse(v, t, spec, "solid", vote=True, tile=64, xp=cupy, tiles=True)
    assert gpu.tiles[CHANNEL].bricks > 0
    full = gpu.expanded(CHANNEL)
    assert np.array_equal(cupy.asnumpy(full.topology.keys), cpu.topology.keys)
    assert np.array_equal(cupy.asnumpy(full.channels[CHANNEL]), cpu.channels[CHANNEL])
