"""A sparse result held entirely in runs (no stored brick: a solid box whose every brick is
full) must answer ``rows_at`` — the coverage fine pass asks it — with the runs' full rows
and empty rows elsewhere. It indexed the empty brick pool (IndexError), found by the
multi-object owners GPU test's CPU half."""

import numpy as np

from tests.meshes import box
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import BRICK, brick_keys
from voxfx.kernels.voxelize.sparse import voxelize_sparse
from voxfx.kernels.voxelize.sparse_result import CHANNEL, SparseVoxels, clip_to_shape


def test_rows_at_on_a_result_held_in_runs_only():
    v, t = box((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    # voxel i's centre is -1/8 + (i + ½)/64: voxels 8…71 are inside, bricks 1…8 all full
    spec = GridSpec((-0.125, -0.125, -0.125), 1.0 / 64, (80, 80, 80))
    result = SparseVoxels(spec, clip_to_shape(voxelize_sparse(v, t, spec, "solid", xp=np, tiles=True), spec.shape))
    assert result.grid.channels[CHANNEL].shape[0] == 0 and result.runs.shape[0] == 64  # runs only
    keys = brick_keys(np.array([[3, 3, 3], [0, 0, 0], [9, 4, 4], [1, 8, 1]]), np)
    rows = result.rows_at(keys)
    assert rows.shape == (4, BRICK, BRICK) and rows.dtype == np.uint8
    assert (rows[0] == 0xFF).all() and (rows[3] == 0xFF).all()
    assert (rows[1] == 0).all() and (rows[2] == 0).all()
