"""The sparse voxelizer (issue 11): bricks of exactly the voxels the dense voxelizer sets,
with memory that follows the surface (a 20 000³ grid in a few MB)."""

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tests import exact_soups
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import BRICK
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse import CHANNEL, to_bits, voxelize_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")
CASES = [("surface", False), ("thin", False), ("solid", False), ("solid", True), ("solid+surface", False),
         ("solid+surface", True)]


def rounded(spec, tile):
    return GridSpec(spec.origin, spec.voxel_size, tuple(-(-n // tile) * tile for n in spec.shape))


def same_as_dense(v, t, spec, mode, vote, tile):
    grid = voxelize_sparse(v, t, spec, mode, vote=vote, tile=tile, xp=np)
    big = rounded(spec, tile)
    dense = voxelize(v, t, big, mode, vote=vote, xp=np).bits
    got = to_bits(grid, big.shape)
    assert np.array_equal(got, dense), int(np.count_nonzero(got != dense))
    rows = grid.channels[CHANNEL]
    assert rows.shape == (grid.topology.count, BRICK, BRICK) and rows.reshape(len(rows), -1).any(axis=1).all()
    return grid


@pytest.mark.parametrize("name,res,tile", [("torus", 45, 32), ("monkey", 70, 64), ("ico_sphere", 61, 32),
                                           ("cone", 38, 32)])
@pytest.mark.parametrize("mode,vote", CASES)
def test_bricks_hold_exactly_the_dense_voxels(name, res, tile, mode, vote):
    """Suzanne is open: its non-vote solid rows run to the grid's end, exactly as dense."""
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    same_as_dense(v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res), mode, vote, tile)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["surface", "thin", "solid+surface"])
def test_ties_and_slivers_decide_as_dense(seed, mode):
    v, t = exact_soups.soup(seed)
    same_as_dense(v, t, exact_soups.UNIT, mode, False, 32)
    same_as_dense(exact_soups.scaled(v), t, exact_soups.SCALED, mode, False, 32)


def test_a_grid_no_dense_array_could_hold_costs_only_its_surface():
    """Two 0.25 m cubes 150 m apart at 1/128 m voxels: a 19 264³ grid (a dense bit grid
    would be 894 GB). Dyadic coordinates: each cube's voxels are those of the same cube
    voxelized alone on a small grid, shifted by whole voxels."""
    from tests.meshes import box, merge

    h = 1.0 / 128
    a, b = box((1.0, 1.0, 1.0), (1.25, 1.25, 1.25)), box((150.0, 148.0, 149.5), (150.25, 148.25, 149.75))
    v, t = merge(a, b)
    spec = GridSpec((0.0, 0.0, 0.0), h, (19264, 19264, 19264))
    tracemalloc.start()
    grid = voxelize_sparse(v, t, spec, "solid+surface", xp=np)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20, peak
    want = 0
    for lo, (cv, ct) in (((1.0, 1.0, 1.0), a), ((150.0, 148.0, 149.5), b)):
        o = np.asarray(lo) - 8 * h  # 8 voxels of margin, on the big grid's lattice
        small = GridSpec(tuple(o), h, (48, 48, 48))
        want += int(voxelize(cv, ct, small, "solid+surface", xp=np).count())
    rows = grid.channels[CHANNEL]
    assert int(np.unpackbits(rows).sum()) == want == 2 * 34 ** 3
    assert grid.topology.count == 2 * 6 ** 3  # 32 + 2 voxels across: 5 or 6 bricks, here 6 (both lie mid-brick)


def bricks_of_dense(bits, shape):
    """(keys, rows) of every non-empty brick of a dense packed bit grid: the oracle's bricks."""
    from voxfx.kernels.grid import bitgrid
    from voxfx.kernels.grid.sparse import brick_keys

    nx, ny, nz = shape
    dense = bitgrid.unpack(bits, nx)
    nb = [-(-n // BRICK) for n in (nx, ny, nz)]
    pad = np.zeros((nb[2] * BRICK, nb[1] * BRICK, nb[0] * BRICK), bool)
    pad[:nz, :ny, :nx] = dense
    bricks = pad.reshape(nb[2], BRICK, nb[1], BRICK, nb[0], BRICK).transpose(0, 2, 4, 1, 3, 5)
    rows = np.packbits(bricks, axis=-1, bitorder="little")[..., 0].reshape(-1, BRICK, BRICK)
    z, y, x = np.unravel_index(np.arange(len(rows)), (nb[2], nb[1], nb[0]))
    keep = rows.reshape(len(rows), -1).any(axis=1)
    return brick_keys(np.stack([x, y, z], axis=1)[keep]), rows[keep]


@pytest.mark.parametrize("name,res,tile", [("torus", 110, 32), ("monkey", 70, 64), ("uv_sphere", 90, 32)])
@pytest.mark.parametrize("mode,vote", [("solid", False), ("solid", True), ("solid+surface", False)])
def test_runs_found_while_walking_are_those_of_the_dense_bricks(name, res, tile, mode, vote):
    """Partial bricks stored, full ones as maximal runs along x, exactly as folding every
    brick of the dense grid (``SparseGrid.tiled``) gives them."""
    from voxfx.kernels.grid.sparse import SparseGrid, Topology

    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)
    big = rounded(spec, tile)
    keys, rows = bricks_of_dense(voxelize(v, t, big, mode, vote=vote, xp=np).bits, big.shape)
    every = SparseGrid(Topology.of_sorted(keys, np))
    every.channels[CHANNEL], every.backgrounds[CHANNEL] = rows, 0
    want = every.tiled(CHANNEL)
    got = voxelize_sparse(v, t, spec, mode, vote=vote, tile=tile, xp=np, tiles=True)
    assert CHANNEL in want.tiles and want.tiles[CHANNEL].bricks > 0
    assert np.array_equal(got.topology.keys, want.topology.keys)
    assert np.array_equal(got.channels[CHANNEL][got.topology.slots], want.channels[CHANNEL])
    assert np.array_equal(got.tiles[CHANNEL].runs, want.tiles[CHANNEL].runs)


def test_the_solid_walk_peak_follows_the_surface_not_the_volume():
    """Doubling the resolution of a solid box multiplies its interior bricks by 8 and its
    surface by 4; the walk never stores an interior brick, so its peak grows like the
    surface (storing them, as before: 18.2 vs 3.0 MiB, 6×)."""
    from tests.meshes import box

    v, t = box((0.013, 0.021, 0.017), (0.987, 0.979, 0.991))
    peaks, inside = [], []
    for res in (160, 320):
        spec = GridSpec.around(v.min(0), v.max(0), 0.974 / res)
        tracemalloc.start()
        grid = voxelize_sparse(v, t, spec, "solid", xp=np, tiles=True)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        inside.append(grid.tiles[CHANNEL].bricks)
    assert inside[1] > 7 * inside[0]
    assert peaks[1] < 2.5 * peaks[0], peaks
