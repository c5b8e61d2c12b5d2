"""The sparse voxelizer on the GPU (box kernels per tile) against the CPU: the same
bricks, bit for bit."""

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
