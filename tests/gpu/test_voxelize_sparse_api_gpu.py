"""``voxelize(..., sparse=True)`` on the GPU (issue 11): the result object and its owner /
material / colour channels equal the CPU's, and the dense GPU path's voxels."""

from pathlib import Path

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse_attributes import add_channels

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


@pytest.mark.parametrize("name,res", [("torus", 90), ("monkey", 70)])
@pytest.mark.parametrize("mode,vote", [("surface", False), ("thin", False), ("solid", False),
                                       ("solid+surface", True)])
def test_gpu_sparse_result_and_channels_equal_the_cpu(name, res, mode, vote):
    import cupy

    v, t, spec = mesh(name, res)
    rng = np.random.default_rng(res)
    material = rng.integers(-1, 4, len(t)).astype(np.int32)
    colors = rng.random((len(t), 3, 4)).astype(np.float32)
    obj = (np.arange(len(t)) % 2).astype(np.int32)
    table = rng.random((5, 4)).astype(np.float32)
    kw = dict(table=table, corner_colors=colors, colored=[True, False], object_index=obj)
    cpu = add_channels(voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True), v, t, material, **kw)
    gpu = voxelize(v, t, spec, mode, vote=vote, xp=cupy, sparse=True, keep_on_device=True)
    assert isinstance(gpu.grid.topology.keys, cupy.ndarray)
    add_channels(gpu, v, t, material, **kw)
    dense = voxelize(v, t, spec, mode, vote=vote, xp=cupy)
    assert gpu.count() == cpu.count() == dense.count() > 0
    assert np.array_equal(cupy.asnumpy(gpu.to_dense().bits), dense.bits)
    assert np.array_equal(cupy.asnumpy(gpu.grid.topology.keys), cpu.grid.topology.keys)
    for name_ in ("voxels", "owner", "material", "color"):
        g = cupy.asnumpy(gpu.grid.channels[name_][gpu.grid.topology.slots])
        c = cpu.grid.channels[name_][cpu.grid.topology.slots]
        assert np.array_equal(g, c), name_
        if name_ in cpu.grid.tiles:  # runs of full bricks: the same runs, the same value per voxel row
            gt, ct = gpu.grid.tiles[name_], cpu.grid.tiles[name_]
            assert np.array_equal(cupy.asnumpy(gt.runs), ct.runs), name_
            assert np.array_equal(cupy.asnumpy(cupy.asarray(gt.value)), np.asarray(ct.value)), name_


@pytest.mark.parametrize("mode", ["surface", "solid+surface"])
def test_gpu_block_mesh_and_points_from_bricks_equal_the_cpu(mode):
    """Exposed faces across brick borders found on the device (topology lookups in CuPy)
    give the CPU's mesh; coordinates in the same brick order."""
    import cupy

    from voxfx.kernels.voxelize.sparse_attributes import row_chunks
    from voxfx.kernels.voxelize.sparse_outputs import block_mesh

    v, t, spec = mesh("monkey", 80)
    cpu = voxelize(v, t, spec, mode, xp=np, sparse=True)
    gpu = voxelize(v, t, spec, mode, xp=cupy, sparse=True, keep_on_device=True)
    assert np.array_equal(cupy.asnumpy(gpu.coordinates()), cpu.coordinates())
    a = block_mesh(cpu, spec, chunks=row_chunks(cpu, bricks=9))
    b = block_mesh(gpu, spec, chunks=row_chunks(gpu, bricks=9))
    assert a.face_count > 1000
    for x, y in zip((a.vertices, a.quads, a.voxel_of_face, a.direction_of_face),
                    (b.vertices, b.quads, b.voxel_of_face, b.direction_of_face)):
        assert np.array_equal(x, y)
