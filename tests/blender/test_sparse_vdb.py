"""Sparse grids written straight to OpenVDB (issue 11): one leaf per brick, constant
bricks as tiles, read back by an independent reader (tinyvdb) and by Blender."""

from __future__ import annotations

import numpy as np
import pytest

from voxfx.addon import sparse_vdb, writeback
from voxfx.kernels.errors import InputError
from voxfx.kernels.grid.sparse import SparseGrid

from .gn_probe import sample_grid
from .test_writeback import tinyvdb_active_values, tinyvdb_grids

ORIGIN_IJK = (-13, 6, -20)  # negative lattice indices and bricks cut by the box


def field(seed=0, shape=(37, 22, 29)):
    """(nz, ny, nx) float32: a few random blobs, a constant 8³ brick, zeros elsewhere."""
    rs = np.random.default_rng(seed)
    nx, ny, nz = shape
    a = np.zeros((nz, ny, nx), np.float32)
    for _ in range(5):
        z, y, x = rs.integers(0, 14, 3)
        a[z:z + 4, y:y + 3, x:x + 5] = rs.random((4, 3, 5)).astype(np.float32) + 0.1
    # the lattice brick (0, 1, −1) entirely inside the box: voxels 0..7, 8..15, −8..−1
    o = np.asarray(ORIGIN_IJK)
    x0, y0, z0 = np.array([0, 8, -8]) - o
    a[z0:z0 + 8, y0:y0 + 8, x0:x0 + 8] = 2.5
    return a


def test_sparse_vdb_holds_every_active_voxel_at_its_lattice_index(tmp_path):
    dense = field()
    grid = SparseGrid.from_dense("density", dense, ORIGIN_IJK, origin=(0.5, -1.0, 2.0), voxel_size=0.25)
    path = sparse_vdb.write_sparse_vdb(tmp_path / "s.vdb", {"density": (grid, "density")})
    (kind, vgrid), = tinyvdb_grids(path).values()
    assert kind == "Tree_float_5_4_3"
    np.testing.assert_allclose(vgrid.transform["voxel_size"], [0.25] * 3)
    np.testing.assert_allclose(vgrid.transform["translation"], [0.625, -0.875, 2.125])  # voxel (0,0,0)'s centre
    got = tinyvdb_active_values(vgrid)
    o = np.asarray(ORIGIN_IJK)
    want = {(int(i + o[0]), int(j + o[1]), int(k + o[2])): float(dense[k, j, i])
            for k, j, i in zip(*np.nonzero(dense))}
    tile = {key for key, v in want.items() if 0 <= key[0] < 8 and 8 <= key[1] < 16 and -8 <= key[2] < 0}
    assert len(tile) == 512
    # tinyvdb lists leaf voxels; the constant brick is a tile (no leaf), checked in Blender below
    assert {k: v for k, v in got.items() if k not in tile} == {k: v for k, v in want.items() if k not in tile}


def test_sparse_vdb_in_blender_equals_the_dense_writer(tmp_path):
    dense = field(1)
    grid = SparseGrid.from_dense("density", dense, ORIGIN_IJK, origin=(0.0, 0.0, 0.0), voxel_size=0.1)
    sparse_obj = writeback.load_volume("sparse", sparse_vdb.write_sparse_vdb(
        tmp_path / "sparse.vdb", {"density": (grid, "density")}))
    assert sparse_obj.data.grids.load(), sparse_obj.data.grids.error_message
    nz, ny, nx = dense.shape
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    lattice = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1) + np.asarray(ORIGIN_IJK)
    np.testing.assert_array_equal(sample_grid(sparse_obj, "density", indices=lattice), dense.ravel())


def test_vector_channels_and_bad_input(tmp_path):
    rs = np.random.default_rng(2)
    vel = np.zeros((9, 10, 11, 3), np.float32)
    vel[2:5, 3:6, 4:9] = rs.standard_normal((3, 3, 5, 3))
    grid = SparseGrid.from_dense("velocity", vel, (-4, -4, -4))
    obj = writeback.load_volume("vel", sparse_vdb.write_sparse_vdb(tmp_path / "v.vdb",
                                                                    {"velocity": (grid, "velocity")}))
    assert obj.data.grids.load()
    k, j, i = np.nonzero(np.abs(vel).sum(axis=-1) > 0)
    idx = np.stack([i, j, k], axis=1) - 4
    np.testing.assert_array_equal(sample_grid(obj, "velocity", indices=idx, vector=True), vel[k, j, i])
    with pytest.raises(InputError, match="no channel"):
        sparse_vdb.write_sparse_vdb(tmp_path / "x.vdb", {"d": (grid, "density")})
    grid.channels["velocity"][0, 0, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        sparse_vdb.write_sparse_vdb(tmp_path / "x.vdb", {"velocity": (grid, "velocity")})
    assert not (tmp_path / "x.vdb").exists() and not list(tmp_path.glob(".voxfx-tmp*"))
