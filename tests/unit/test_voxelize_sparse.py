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
