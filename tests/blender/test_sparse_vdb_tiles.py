"""Full runs of bricks (``SparseGrid.tiles``) written to OpenVDB as tiles: the Volume
Blender loads holds exactly the dense voxelizer's solid, interior included."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voxfx.addon import sparse_vdb, writeback
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse, with_density

from .gn_probe import sample_grid

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def test_full_runs_become_vdb_tiles_of_the_dense_solid(tmp_path):
    v, t = PRIMS["uv_sphere_vertices"], PRIMS["uv_sphere_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / 60)
    grid = with_density(voxelize_sparse(v, t, spec, "solid", tile=32, xp=np, tiles=True))
    assert grid.tiles[CHANNEL].bricks > 0 and "density" in grid.tiles
    path = sparse_vdb.write_sparse_vdb(tmp_path / "sphere.vdb", {"density": (grid, "density")})
    obj = writeback.load_volume("sphere", path)
    assert obj.data.grids.load(), obj.data.grids.error_message
    rounded = GridSpec(spec.origin, spec.voxel_size, tuple(-(-n // 32) * 32 for n in spec.shape))
    want = bitgrid.unpack(voxelize(v, t, rounded, "solid", xp=np).bits, rounded.shape[0])
    nx, ny, nz = rounded.shape
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    lattice = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1)
    got = sample_grid(obj, "density", indices=lattice)
    assert want.sum() > 1000
    np.testing.assert_array_equal(got, want.ravel().astype(np.float32))
