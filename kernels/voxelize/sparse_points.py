"""Point lists of a sparse voxelization straight from its bricks and runs (issue 11): the
set voxels (x y z) of a chunk of whole rows of bricks and each voxel's owner triangle, in
brick order, without expanding the runs of full bricks into bit rows.

The voxels and owners are those ``SparseVoxels.coordinates_of`` and ``OwnerMesh.owners``
give (the operator's Points, ``sparse_outputs``), in the same order; only the work
differs:

* a stored brick's voxels come from its bit rows (``nonzero``), as before;
* a run's voxels are known without looking: every voxel of every brick, z, y, x inside
  each brick, so they are written from the brick's corner and a 512-entry offset table;
* owners: a voxel row of a run that no triangle touches takes one owner, the fill's
  (``sparse_attributes`` module notes, **Runs**), so the owner pass lists the stored
  voxels and one voxel per run row, not every voxel of the inside; run bricks a triangle
  may touch (``owner_mesh.touched``) are listed voxel by voxel as stored bricks are.

The stored voxels and the run voxels are interleaved by brick key: a stored brick's
voxels start after every voxel of the bricks and runs before it (counts and a search, as
``SparseVoxels._order`` places bricks), and the run voxels fill the rest in order.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid.sparse import BRICK, brick_keys
from .sparse_attributes import fill_entries

_Z, _Y, _X = np.meshgrid(np.arange(BRICK), np.arange(BRICK), np.arange(BRICK), indexing="ij")
LOCAL = np.stack([_X.ravel(), _Y.ravel(), _Z.ravel()], axis=1).astype(np.int32)  # (512, 3) x y z, brick order


def chunk_points(result, owner_mesh, start: int, stop: int):
    """(ijk (m, 3) int32, owner (m,) int32), on the host, of the set voxels of bricks
    start … stop of *result* (whole rows of bricks, ``SparseVoxels.row_chunks``), in
    brick order (module notes)."""
    keys, rows, runs = (np.asarray(backend.to_numpy(a)) for a in result.parts_of(start, stop))
    if len(keys) == 0 and len(runs) == 0:
        return np.zeros((0, 3), np.int32), np.zeros(0, np.int32)
    keys, rows, runs, b, ijk, row_start, context = fill_entries(keys, rows, runs, owner_mesh)
    stored = ijk.astype(np.int32)  # stored voxels, brick order; row_start: each run row's first voxel
    owner = owner_mesh.owners(np.concatenate([ijk, row_start]), box=context)
    owner_stored, owner_rows = owner[:len(stored)], owner[len(stored):].reshape(len(runs), BRICK, BRICK)
    # the runs' voxels: each brick's corner plus the offset table; owners one per row, along x
    length = runs[:, 1] - runs[:, 0]
    run_of = np.repeat(np.arange(len(runs)), length)
    bx = runs[run_of, 0] + np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
    corner = (np.stack([bx, runs[run_of, 2], runs[run_of, 3]], axis=1) * BRICK).astype(np.int32)
    inside = (corner[:, None, :] + LOCAL[None]).reshape(-1, 3)
    inside_owner = np.broadcast_to(owner_rows[run_of][..., None], (len(run_of), BRICK, BRICK, BRICK)).reshape(-1)
    # interleave by key: a stored brick's voxels start after the voxels of every brick before it
    per_brick = np.bincount(b, minlength=len(keys)) if len(keys) else np.zeros(0, np.int64)
    run_cum = np.concatenate([[0], np.cumsum(length)]) * BRICK ** 3
    first = np.cumsum(per_brick) - per_brick + run_cum[np.searchsorted(run_keys_of(runs), keys)]
    n = len(stored) + len(inside)
    at = first[b] + np.arange(len(b)) - (np.cumsum(per_brick) - per_brick)[b]
    ijk = np.empty((n, 3), np.int32)
    own = np.empty(n, np.int32)
    is_stored = np.zeros(n, bool)
    is_stored[at] = True
    ijk[at], own[at] = stored, owner_stored
    ijk[~is_stored], own[~is_stored] = inside, inside_owner
    return ijk, own


def run_keys_of(runs):
    """Keys of each run's first brick (sorted as the runs are)."""
    return brick_keys(runs[:, [0, 2, 3]], np) if len(runs) else np.zeros(0, np.int64)
