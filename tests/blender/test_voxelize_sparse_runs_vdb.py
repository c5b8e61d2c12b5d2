"""A sparse voxelization whose interior is kept as runs of full bricks (issue 11) written
to OpenVDB as tiles (``addon/sparse_vdb.SparseVolume``): the Volume Blender loads holds
exactly the dense voxelizer's voxels, runs cut at the grid's end included."""

from __future__ import annotations

import numpy as np
import pytest

from voxfx.addon import sparse_vdb, writeback
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize

from ..meshes import uv_sphere
from .gn_probe import sample_grid


def open_box():
    """A unit cube without its +x face: its rows stay inside to the grid's end."""
    v = np.array([[x, y, z] for z in (0, 1) for y in (0, 1) for x in (0, 1)], np.float64)
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2)]
    t = np.array([tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))], np.int64)
    return v, t, GridSpec((-0.05, -0.05, -0.05), 1.0 / 30, (43, 37, 37))


def sphere():
    v, t = uv_sphere(1.0, 48, 24)
    return v, t, GridSpec.around(v.min(0), v.max(0), 2.0 / 44)


@pytest.mark.parametrize("case", [open_box, sphere])
def test_a_volume_from_runs_in_blender_is_the_dense_voxelization(tmp_path, case):
    v, t, spec = case()
    result = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    assert result.full_bricks > 0
    path = sparse_vdb.SparseVolume(result).write(tmp_path / "runs.vdb")
    obj = writeback.load_volume("runs", path)
    assert obj.data.grids.load(), obj.data.grids.error_message
    want = bitgrid.unpack(voxelize(v, t, spec, "solid", xp=np).bits, spec.shape[0])
    nx, ny, nz = spec.shape
    # the lattice and one voxel past it on every side: nothing set beyond the grid
    k, j, i = np.meshgrid(np.arange(-1, nz + 1), np.arange(-1, ny + 1), np.arange(-1, nx + 1), indexing="ij")
    lattice = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1)
    got = sample_grid(obj, "density", indices=lattice).reshape(k.shape)
    assert want.sum() > 1000
    np.testing.assert_array_equal(got[1:-1, 1:-1, 1:-1], want.astype(np.float32))
    assert got.sum() == want.sum()
