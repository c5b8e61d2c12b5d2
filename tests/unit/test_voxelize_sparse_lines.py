"""Loose edges and curves in a sparse voxelization (issue 11): ``sparse_lines.add_segments``
sets exactly the voxels ``lines.voxelize_segments`` ORs into the dense bit grid, stored
bricks, runs of full bricks and empty space alike."""

import numpy as np
import pytest

from tests.meshes import uv_sphere
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.lines import voxelize_segments
from voxfx.kernels.voxelize.sparse_lines import add_segments, segment_bricks


def segments(seed, n, lo, hi):
    """Random segments over (and a little past) the box lo … hi, some on the voxel lattice
    (ties: along faces and edges), some long ones through the middle."""
    rng = np.random.default_rng(seed)
    span = np.asarray(hi) - np.asarray(lo)
    a = lo + rng.uniform(-0.1, 1.1, (n, 3)) * span
    b = a + rng.normal(0, 0.2, (n, 3)) * span
    a[: n // 4] = np.round(a[: n // 4] * 64) / 64  # dyadic: on voxel faces and edges
    b[: n // 4] = a[: n // 4] + np.eye(3)[rng.integers(0, 3, n // 4)] * 0.5
    c = np.asarray(lo) + 0.5 * span
    through = np.stack([c - span * 0.6, c + span * 0.6])  # across the interior's runs
    return np.concatenate([a, through[:1]]), np.concatenate([b, through[1:]])


@pytest.mark.parametrize("mode", ["surface", "solid", "solid+surface"])
@pytest.mark.parametrize("seed", [1, 2])
def test_segments_in_bricks_equal_the_dense_segment_voxels(mode, seed):
    v, t = uv_sphere(1.0, 48, 24)
    spec = GridSpec((-1.25, -1.25, -1.25), 2.5 / 80, (80, 77, 83))
    a, b = segments(seed, 60, (-1.25,) * 3, (1.25,) * 3)
    dense = voxelize(v, t, spec, mode, xp=np)
    want = voxelize_segments(a, b, spec, xp=np, words=dense.bits.copy())
    got = voxelize(v, t, spec, mode, xp=np, sparse=True)
    runs_before = got.runs.copy()
    add_segments(got, a, b)
    assert np.array_equal(got.to_dense().bits, want)
    assert got.count() > dense.count()
    if mode != "surface":
        assert len(runs_before) and np.array_equal(got.runs, runs_before)  # runs kept whole


def test_segment_bricks_hold_the_segment_voxels_only():
    """Bricks of segments alone: the dense segment voxels, brick by brick, inside the grid."""
    from voxfx.kernels.grid.sparse import SparseGrid, Topology
    from voxfx.kernels.voxelize.sparse import CHANNEL
    from voxfx.kernels.voxelize.sparse_result import SparseVoxels

    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 32, (45, 40, 37))
    a, b = segments(3, 200, (0.0,) * 3, (45 / 32, 40 / 32, 37 / 32))
    keys, rows = segment_bricks(a, b, spec)
    assert np.all(np.diff(keys) > 0) and rows.reshape(len(rows), -1).any(axis=1).all()
    grid = SparseGrid(Topology.of_sorted(keys, np), spec.origin, spec.voxel_size)
    grid.channels[CHANNEL], grid.backgrounds[CHANNEL] = rows, 0
    assert np.array_equal(SparseVoxels(spec, grid).to_dense().bits, voxelize_segments(a, b, spec, xp=np))


def test_no_segments_change_nothing():
    v, t = uv_sphere(1.0, 24, 12)
    spec = GridSpec((-1.1, -1.1, -1.1), 0.1, (22, 22, 22))
    got = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    grid = got.grid
    add_segments(got, np.zeros((0, 3)), np.zeros((0, 3)))
    assert got.grid is grid
