"""Full runs of bricks (``SparseGrid.tiles``, kernels/grid/sparse.py): expanded, counted and
made dense as the bricks they stand for."""

from pathlib import Path

import numpy as np

from voxfx.kernels.grid import sparse_ops
from voxfx.kernels.grid.sparse import SparseGrid, Tiles
from voxfx.kernels.voxelize.sparse import CHANNEL, _grid, to_bits, with_density
from voxfx.kernels.grid import GridSpec


def test_runs_expand_count_and_densify_as_their_bricks():
    rng = np.random.default_rng(3)
    dense = rng.random((24, 16, 40)) < 0.2  # (z, y, x)
    dense[8:16, 0:8, 8:32] = True  # bricks x 1..3 of row (y 0, z 1): one run
    dense[16:24, 8:16, 0:8] = True  # brick (0, 1, 2): a run of one
    ref = SparseGrid.from_dense("v", dense.astype(np.float32))
    grid = SparseGrid.from_dense("v", np.where(dense, 1.0, 0.0).astype(np.float32))
    # take the full bricks out of the pool and into runs
    full = (grid.channels["v"].reshape(grid.topology.count, -1) == 1).all(axis=1)
    coords = grid.topology.coords()[full]
    assert len(coords) == 4
    keep = ~full
    grid = SparseGrid.from_dense("v", np.where(dense, 1.0, 0.0).astype(np.float32))
    grid.topology.keys, grid.topology.slots = grid.topology.keys[keep], np.arange(int(keep.sum()), dtype=np.int32)
    grid.topology.capacity = int(keep.sum())
    grid.channels["v"] = grid.channels["v"][keep]
    grid.tiles["v"] = Tiles(np.array([[1, 4, 0, 1], [0, 1, 1, 2]], np.int64), 1.0)
    assert grid.tiles["v"].bricks == 4
    assert np.array_equal(grid.tiles["v"].keys(np), np.sort(ref.topology.keys[full]))
    assert sparse_ops.count(grid, "v") == sparse_ops.count(ref, "v") == int(dense.sum())
    assert np.array_equal(grid.to_dense("v", (0, 0, 0), (40, 16, 24)), dense.astype(np.float32))
    ex = grid.expanded("v")
    assert np.array_equal(ex.topology.keys, ref.topology.keys)
    assert np.array_equal(ex.channels["v"], ref.channels["v"])
    assert grid.nbytes < ref.nbytes


def test_bit_channel_runs_are_set_rows():
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (32, 16, 16))
    from voxfx.kernels.grid.sparse import brick_keys

    keys = brick_keys(np.array([[0, 0, 0]]), np)
    rows = np.zeros((1, 8, 8), np.uint8)
    rows[0, 3, 4] = 0b101
    grid = _grid(keys, rows, spec, np)
    grid.tiles[CHANNEL] = Tiles(np.array([[1, 3, 1, 1]], np.int64), 1)
    bits = to_bits(grid, (32, 16, 16))
    want = np.zeros((16, 16, 32), bool)
    want[3, 4, 0] = want[3, 4, 2] = True
    want[8:16, 8:16, 8:24] = True
    from voxfx.kernels.grid import bitgrid

    assert np.array_equal(bits, bitgrid.pack(want))
    dens = with_density(grid)
    assert dens.tiles["density"].value == 1.0
    assert np.array_equal(dens.to_dense("density", (0, 0, 0), (32, 16, 16)), want.astype(np.float32))


def test_tiled_is_the_inverse_of_expanded():
    from voxfx.kernels.voxelize.sparse import voxelize_sparse

    PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")
    v, t = PRIMS["uv_sphere_vertices"], PRIMS["uv_sphere_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / 90)
    plain = voxelize_sparse(v, t, spec, "solid", tile=32, xp=np)
    tiled = voxelize_sparse(v, t, spec, "solid", tile=32, xp=np, tiles=True)
    runs = tiled.tiles[CHANNEL].runs
    assert tiled.tiles[CHANNEL].bricks > len(runs) > 0  # some runs hold several bricks
    assert tiled.topology.count + tiled.tiles[CHANNEL].bricks == plain.topology.count
    assert tiled.nbytes < plain.nbytes
    back = tiled.expanded(CHANNEL)
    assert np.array_equal(back.topology.keys, plain.topology.keys)
    assert np.array_equal(back.channels[CHANNEL], plain.channels[CHANNEL])
    assert np.array_equal(to_bits(tiled, (96, 96, 96)), to_bits(plain, (96, 96, 96)))
