"""The 3-axis vote on bricks (kernels/voxelize/gpu_sparse_vote.py, issue 11), run on the CPU
with the kernels' NumPy twins: from three sparse solids (parity along x, y, z) to the
vote's partial bricks and maximal runs of full bricks, equal to folding the dense
``voxelize(vote=True)`` grid into bricks (the oracle), for closed meshes, open ones and
meshes with holes punched in them. The device launches of the same steps are
tests/gpu/test_voxelize_sparse_vote_gpu.py; the kernels themselves are checked against
these twins by nvcc on the host (test_cuda_sparse_vote_host.py)."""

from pathlib import Path

import numpy as np
import pytest

from tests.meshes import box, merge, torus, uv_sphere
from tests.unit.test_voxelize_sparse import bricks_of_dense, rounded
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import BRICK, SparseGrid, Topology, brick_coords
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.gpu_sparse_vote import axis_solids_numpy, vote_box, vote_bricks
from voxfx.kernels.voxelize.sparse import CHANNEL

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def holed(v, t, every, seed):
    """The mesh with every *every*-th triangle (from a random start) removed: holes."""
    start = np.random.default_rng(seed).integers(every)
    keep = np.ones(len(t), bool)
    keep[start::every] = False
    return v, t[keep]


def oracle(v, t, spec):
    """(brick numbers, rows, runs) of the dense vote folded into bricks: partial bricks
    stored, full ones as maximal runs (``SparseGrid.tiled``)."""
    keys, rows = bricks_of_dense(voxelize(v, t, spec, "solid", vote=True, xp=np).bits, spec.shape)
    every = SparseGrid(Topology.of_sorted(keys, np))
    every.channels[CHANNEL], every.backgrounds[CHANNEL] = rows, 0
    want = every.tiled(CHANNEL)
    nb = [n // BRICK for n in spec.shape]
    c = brick_coords(want.topology.keys, np)
    runs = want.tiles[CHANNEL].runs if CHANNEL in want.tiles else np.zeros((0, 4), np.int64)
    return (c[:, 2] * nb[1] + c[:, 1]) * nb[0] + c[:, 0], want.channels[CHANNEL][want.topology.slots], runs


def check(v, t, spec):
    spec = rounded(spec, BRICK)
    nb = tuple(n // BRICK for n in spec.shape)
    lin, rows, runs = vote_bricks(axis_solids_numpy(v, t, spec), nb, np)
    want = oracle(v, t, spec)
    assert np.array_equal(lin, want[0])
    assert np.array_equal(rows, want[1])
    assert np.array_equal(runs, want[2])
    return lin, runs


def around(v, res):
    lo, hi = v.min(0), v.max(0)
    return GridSpec.around(lo, hi, float((hi - lo).max()) / res)


@pytest.mark.parametrize("name,res", [("uv_sphere", 70), ("torus", 90), ("monkey", 60), ("cone", 45),
                                      ("cylinder", 40)])
def test_vote_bricks_equal_the_dense_vote(name, res):
    """Suzanne is open (its eyes): the vote there differs from any single parity."""
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lin, runs = check(v, t, around(v, res))
    assert len(lin) > 0 and len(runs) > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vote_bricks_equal_the_dense_vote_with_holes(seed):
    """Holes let one axis's parity run on along whole rows, outside the mesh too: the
    other two outvote it, brick by brick and in the bitmaps."""
    v, t = holed(*uv_sphere(1.0, 40, 20), 37 + seed, seed)
    check(v, t, around(v, 88))
    v, t = holed(*torus(1.0, 0.4, 40, 20, center=(0.3, -0.2, 0.1)), 29, seed)
    check(v, t, around(v, 97))


def test_vote_of_a_box_is_one_run_per_brick_row_and_its_walls():
    """A box whose faces lie mid-brick: inside rows of bricks become runs, the walls partial."""
    v, t = box((0.13, 0.21, 0.17), (0.87, 0.79, 0.91))
    lin, runs = check(v, t, GridSpec((0.0, 0.0, 0.0), 1.0 / 100, (104, 104, 104)))
    assert (runs[:, 1] - runs[:, 0]).max() >= 6


def test_two_far_apart_objects_and_an_open_sheet():
    """Two closed boxes apart along the diagonal (the box is their union's reach) and a
    lone square sheet (one crossing along z only: no voxel of the vote)."""
    sheet_v = np.array([[0.1, 0.1, 0.5], [0.4, 0.1, 0.5], [0.4, 0.4, 0.5], [0.1, 0.4, 0.5]])
    sheet = (sheet_v, np.array([[0, 1, 2], [0, 2, 3]]))
    v, t = merge(box((0.05, 0.05, 0.05), (0.3, 0.3, 0.3)), box((0.6, 0.65, 0.7), (0.95, 0.9, 0.97)), sheet)
    check(v, t, GridSpec((0.0, 0.0, 0.0), 1.0 / 96, (96, 96, 96)))
    nb = (4, 4, 4)
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 32, (32, 32, 32))
    lin, rows, runs = vote_bricks(axis_solids_numpy(*sheet, spec), nb, np)
    assert len(lin) == len(runs) == 0


def test_the_box_holds_every_brick_two_axes_reach():
    """A torus in a grid with room around it: the bitmaps cover its reach, not the grid."""
    v, t = PRIMS["torus_vertices"], PRIMS["torus_triangles"]
    near = around(v, 80)
    h = near.voxel_size
    spec = GridSpec(tuple(np.asarray(near.origin) - 24 * h), h, tuple(n + 48 for n in rounded(near, BRICK).shape))
    nb = tuple(n // BRICK for n in spec.shape)
    lo, hi = vote_box(axis_solids_numpy(v, t, spec), nb, np)
    keys, _ = bricks_of_dense(voxelize(v, t, spec, "solid", vote=True, xp=np).bits, spec.shape)
    c = brick_coords(keys, np)
    assert (c.min(0) >= lo).all() and (c.max(0) < hi).all()
    assert (hi - lo).prod() < np.prod(nb)  # narrower than the grid


@pytest.mark.parametrize("name,res", [("monkey", 60), ("uv_sphere", 70), ("cone", 80)])
def test_surface_ored_into_the_vote_then_folded_equals_the_dense_solid_plus_surface(name, res):
    """solid+surface: the surface's bricks ORed into the vote's (as ``gpu_sparse._surface``
    does: bricks inside a run dropped), then bricks the OR filled folded into the runs
    (``fold_full``): the dense solid+surface vote's bricks and maximal runs."""
    assert ored_and_folded(name, res) > 0  # some bricks were filled by the OR


def ored_and_folded(name, res):
    from voxfx.kernels.voxelize.gpu_sparse_vote import fold_full
    from voxfx.kernels.voxelize.sparse import voxelize_sparse

    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    spec = rounded(around(v, res), 64)
    nb = tuple(n // BRICK for n in spec.shape)
    lin, rows, runs = vote_bricks(axis_solids_numpy(v, t, spec), nb, np)
    s = voxelize_sparse(v, t, spec, "surface", xp=np, tiles=True)
    c = brick_coords(s.topology.keys, np)
    s_lin = (c[:, 2] * nb[1] + c[:, 1]) * nb[0] + c[:, 0]
    s_rows = s.channels[CHANNEL][s.topology.slots]
    in_run = np.zeros(len(s_lin), bool)
    for x0, x1, by, bz in runs:
        in_run |= (c[:, 1] == by) & (c[:, 2] == bz) & (c[:, 0] >= x0) & (c[:, 0] < x1)
    both = np.union1d(lin, s_lin[~in_run])
    merged = np.zeros((len(both), BRICK, BRICK), np.uint8)
    merged[np.searchsorted(both, lin)] |= rows
    merged[np.searchsorted(both, s_lin[~in_run])] |= s_rows[~in_run]
    folded = (merged.reshape(len(both), -1) == 0xFF).all(axis=1).sum()
    got = fold_full(both, merged, runs, nb, np)
    assert len(got[0]) == len(both) - folded
    keys, want_rows = bricks_of_dense(voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits, spec.shape)
    every = SparseGrid(Topology.of_sorted(keys, np))
    every.channels[CHANNEL], every.backgrounds[CHANNEL] = want_rows, 0
    want = every.tiled(CHANNEL)
    wc = brick_coords(want.topology.keys, np)
    assert np.array_equal(got[0], (wc[:, 2] * nb[1] + wc[:, 1]) * nb[0] + wc[:, 0])
    assert np.array_equal(got[1], want.channels[CHANNEL][want.topology.slots])
    assert np.array_equal(got[2], want.tiles[CHANNEL].runs)
    return folded


def test_the_vote_takes_the_device_solids_forms():
    """The device solid (``gpu_sparse._solid``) may store full bricks where crossings land
    and cut runs there: the same solids given so (every third run brick stored full, the
    runs cut into single bricks) vote the same bricks and maximal runs."""
    v, t = holed(*uv_sphere(1.0, 40, 20), 41, 5)
    spec = rounded(around(v, 96), BRICK)
    nb = tuple(n // BRICK for n in spec.shape)
    parts = axis_solids_numpy(v, t, spec)
    want = vote_bricks(parts, nb, np)
    loose = []
    for a, (lin, rows, runs) in enumerate(parts):
        n = runs[:, 1] - runs[:, 0]
        owner = np.repeat(np.arange(len(runs)), n)
        bx = runs[owner, 0] + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        single = np.stack([bx, bx + 1, runs[owner, 2], runs[owner, 3]], axis=1)
        stored = np.arange(len(single)) % 3 == 0
        n0, n1, _ = (nb[(f + a) % 3] for f in range(3))
        extra = (single[stored, 3] * n1 + single[stored, 2]) * n0 + single[stored, 0]
        all_lin = np.concatenate([lin, extra])
        order = np.argsort(all_lin)
        all_rows = np.concatenate([rows, np.full((len(extra), BRICK, BRICK), 0xFF, np.uint8)])[order]
        loose.append((all_lin[order], all_rows, single[~stored]))
        assert stored.any()
    got = vote_bricks(loose, nb, np)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
