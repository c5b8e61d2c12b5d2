"""Loose edges and curves in a sparse voxelization (issue 11; seed 001 §3.1): the voxels
of segments, as ``lines.voxelize_segments`` sets them, OR-ed into the bricks of a
``SparseVoxels`` instead of a dense bit grid.

    result = voxelize(vertices, triangles, spec, "surface", sparse=True)
    add_segments(result, starts, ends)      # the dense path's voxelize_segments(words=bits)

The voxels are the conservative 3D DDA's of ``lines.py`` (its NumPy reference, batch by
batch: ``segment_voxel_batches``), grouped into 8³ bricks: a brick's bit rows are the
OR of its voxels' bits. Bricks inside a run of full bricks are set already; the others
are OR-ed into the stored bricks or added. Memory follows the lines' voxels, not the
grid. Both backends: the voxels are found on the host (``cuda/lines.cu`` sets the same
ones bit for bit, ``lines.py``), and the bricks go where the grid is.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..grid.sparse import BRICK, SparseGrid, Topology, brick_keys
from .lines import MAX_VOXEL_COORDINATE, check_segments, segment_voxel_batches
from .sparse import CHANNEL
from .sparse_result import SparseVoxels
from .triangles import to_voxel_units


def segment_bricks(starts, ends, spec: GridSpec, progress=None):
    """(keys (n,) int64 sorted unique, rows (n, 8, 8) uint8) on the host: the bricks of
    the voxels of segments start→end (world metres) inside *spec*'s grid."""
    p0, p1 = check_segments(starts, ends)
    pv0 = to_voxel_units(p0, spec.origin, spec.voxel_size)
    pv1 = to_voxel_units(p1, spec.origin, spec.voxel_size)
    far = int((np.abs(pv0) > MAX_VOXEL_COORDINATE).any(axis=1).sum()
              + (np.abs(pv1) > MAX_VOXEL_COORDINATE).any(axis=1).sum())
    if far:
        raise InputError(f"{far} segment end points lie more than {MAX_VOXEL_COORDINATE:.0e} voxels from "
                         "the grid; remove them or use a larger voxel size")
    parts = [np.unique(_voxel_codes(ijk)) for ijk in segment_voxel_batches(pv0, pv1, spec.shape, progress)]
    codes = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    ijk = np.stack([codes >> 42, (codes >> 21) & 0x1FFFFF, codes & 0x1FFFFF], axis=1)[:, ::-1]  # x y z
    keys, brick = np.unique(brick_keys(ijk // BRICK, np), return_inverse=True)
    rows = np.zeros((len(keys), BRICK, BRICK), np.uint8)
    local = ijk % BRICK
    np.bitwise_or.at(rows, (brick.reshape(-1), local[:, 2], local[:, 1]),
                     np.left_shift(np.uint8(1), local[:, 0].astype(np.uint8)))
    return keys, rows


def _voxel_codes(ijk):
    """One int64 per voxel (z, y, x major to minor; voxels inside the grid: < 2²¹ each)."""
    return (ijk[:, 2] << 42) | (ijk[:, 1] << 21) | ijk[:, 0]


def add_segments(result: SparseVoxels, starts, ends, progress=None) -> SparseVoxels:
    """OR the voxels of segments start→end into *result* (in place: its grid is
    replaced; the runs are kept); returns *result*. Only the bit channel may exist."""
    if any(name != CHANNEL for name in result.grid.channels):
        raise ValueError("add segments before adding attribute channels")
    keys, rows = segment_bricks(starts, ends, result.spec, progress)
    if len(keys) == 0:
        return result
    g, xp = result.grid, result.xp
    topo = g.topology
    slot = np.asarray(backend.to_numpy(topo.lookup(xp.asarray(keys))))
    stored = slot >= 0
    in_run = ~stored & (np.asarray(backend.to_numpy(result.rows_at(xp.asarray(keys)))) == 0xFF).reshape(
        len(keys), -1).all(axis=1)  # full and not stored: a run's brick, set already
    pool = xp.array(g.channels[CHANNEL], copy=True)
    if stored.any():
        at = xp.asarray(slot[stored])
        pool[at] = pool[at] | xp.asarray(rows[stored])
    new = ~stored & ~in_run
    all_keys = xp.concatenate([topo.keys, xp.asarray(keys[new])])
    all_rows = xp.concatenate([pool[topo.slots], xp.asarray(rows[new])])
    order = xp.argsort(all_keys)
    out = SparseGrid(Topology.of_sorted(all_keys[order], xp), g.origin, g.voxel_size)
    out.channels[CHANNEL] = xp.ascontiguousarray(all_rows[order])
    out.backgrounds[CHANNEL] = 0
    out.tiles = dict(g.tiles)
    result.grid = out
    return result
