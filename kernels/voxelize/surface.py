"""Surface voxelization (seed 004 §3.2–3.4): conservative (26-separating) or thin
(6-separating), triangle-parallel with the dominant-axis specialisation.

Work is split into *columns*: for a triangle whose normal is dominant along axis D,
every voxel column along D inside its touched bounding box is one work item. The plane
can only touch a few voxels of such a column; their range comes from the plane's extent
over the column (widened by one voxel each way, so rounding can only add candidates),
and each candidate then gets the exact overlap test (Eq. 1 ∧ Eq. 3 in all three planes).
Because the exact test decides, both backends set the same voxels.
"""

from __future__ import annotations

import numpy as np

from ..grid import bitgrid
from ..progress import report
from .triangles import PLANE_NORMAL_TO, TriangleSetup, overlaps, projection_test, setup

CHUNK_ITEMS = 1 << 21  # work items per NumPy batch: bounds the CPU path's memory


def column_counts(s: TriangleSetup):
    """Columns per triangle: the touched box's extent across its dominant axis."""
    width = np.maximum(s.hi - s.lo + 1, 0)
    D = s.dominant
    U, V = (D + 1) % 3, (D + 2) % 3
    rows = np.arange(len(D))
    count = width[rows, U] * width[rows, V]
    return np.where(width[rows, D] > 0, count, 0)


def depth_candidates(s: TriangleSetup, t, cu, cv, D, U, V):
    """Candidate range [dlo, dhi] along D of voxels the plane may touch in column (cu, cv)."""
    n = s.n[t]
    rows = np.arange(len(t))
    nD, nU, nV = n[rows, D], n[rows, U], n[rows, V]
    v0 = s.v[t, 0]
    nv0 = (n[:, 0] * v0[:, 0] + n[:, 1] * v0[:, 1]) + n[:, 2] * v0[:, 2]
    safe = np.where(nD == 0, 1.0, nD)
    ext = []
    for du in (0.0, 1.0):
        for dv in (0.0, 1.0):
            ext.append((nv0 - nU * (cu + du) - nV * (cv + dv)) / safe)
    dmin = np.minimum(np.minimum(ext[0], ext[1]), np.minimum(ext[2], ext[3]))
    dmax = np.maximum(np.maximum(ext[0], ext[1]), np.maximum(ext[2], ext[3]))
    lo_d, hi_d = s.lo[t, D], s.hi[t, D]
    whole = s.wide[t]  # n_D too uncertain (slivers, n_D = 0): every voxel of the box's column
    dlo = np.where(whole, lo_d, np.maximum(np.floor(dmin).astype(np.int64) - 1, lo_d))
    dhi = np.where(whole, hi_d, np.minimum(np.floor(dmax).astype(np.int64) + 1, hi_d))
    return dlo, dhi


def batches(counts):
    """Consecutive triangle ranges [first, last) whose work items fit one CPU batch
    (at least one triangle each), with the fraction of all items done after each."""
    ends = np.cumsum(counts)
    total = max(int(ends[-1]) if len(ends) else 0, 1)
    first = 0
    while first < len(counts):
        base = ends[first] - counts[first]
        last = max(first + 1, int(np.searchsorted(ends, base + CHUNK_ITEMS, side="right")))
        yield first, last, float(ends[last - 1]) / total
        first = last


def _expand(counts):
    """(owner, local) for items laid out owner by owner, `counts[owner]` items each."""
    owner = np.repeat(np.arange(len(counts)), counts)
    starts = np.cumsum(counts) - counts
    local = np.arange(int(counts.sum()), dtype=np.int64) - starts[owner]
    return owner, local


def surface_voxels_cpu(pv, triangles, shape, thin: bool = False, progress=None, tri_ids=None, box=None):
    """NumPy reference: packed bit grid of the surface voxelization.

    With *tri_ids* (a list), the (linear voxel index, triangle) pairs of every hit are
    appended to it, for attribute look-ups.

    *box* ``(lo, hi)`` (integer voxel corners, hi exclusive) evaluates only the voxels of
    that box of the grid *shape* and returns the box's own bit grid (indices in *tri_ids*
    are then the box's): the setup, its rounding bounds and every test stay those of
    the whole grid, only the ranges of columns and depths are cut to the box, so each
    voxel is decided exactly as without a box (``slabs.py``).
    """
    lo, hi = box_bounds(shape, box)
    out_shape = tuple(int(n) for n in hi - lo)
    words = bitgrid.empty(out_shape, xp=np)
    flat = words.reshape(-1)
    if len(triangles) == 0:
        return words
    s = setup(pv, triangles, shape, thin)
    if box is not None:  # after the setup: its bounds over the whole touched box stay as they are
        s.lo = np.maximum(s.lo, lo)
        s.hi = np.minimum(s.hi, hi - 1)
    counts = column_counts(s)
    for first, last, done in batches(counts):
        tri = np.arange(first, last)
        owner, local = _expand(counts[first:last])
        t = tri[owner]
        D = s.dominant[t]
        U, V = (D + 1) % 3, (D + 2) % 3
        rows = np.arange(len(t))
        wu = s.hi[t, U] - s.lo[t, U] + 1
        cu = s.lo[t, U] + local % wu
        cv = s.lo[t, V] + local // wu
        # The column's own projection test first: it does not depend on the depth.
        col = np.zeros((len(t), 3))
        col[rows, U] = cu
        col[rows, V] = cv
        keep = np.zeros(len(t), dtype=bool)
        for d_axis, plane in PLANE_NORMAL_TO.items():
            m = D == d_axis
            keep[m] = projection_test(s, t[m], col[m], plane)
        t, D, U, V, cu, cv = t[keep], D[keep], U[keep], V[keep], cu[keep], cv[keep]
        dlo, dhi = depth_candidates(s, t, cu, cv, D, U, V)
        per = np.maximum(dhi - dlo + 1, 0)
        o2, l2 = _expand(per)
        t2 = t[o2]
        p = np.zeros((len(t2), 3))
        r2 = np.arange(len(t2))
        p[r2, D[o2]] = dlo[o2] + l2
        p[r2, U[o2]] = cu[o2]
        p[r2, V[o2]] = cv[o2]
        hit = overlaps(s, t2, p)
        ijk = p[hit].astype(np.int64) - lo
        _set_bits(flat, ijk, out_shape)
        if tri_ids is not None:
            tri_ids.append((_linear(ijk, out_shape), t2[hit]))
        report(progress, done, "surface voxels")
    return words


def box_bounds(shape, box):
    """(lo, hi) int64 arrays of *box* ``(lo, hi)``, or of the whole grid *shape*."""
    if box is None:
        return np.zeros(3, dtype=np.int64), np.asarray(shape, dtype=np.int64)
    lo, hi = (np.asarray(c, dtype=np.int64).reshape(3) for c in box)
    if (lo < 0).any() or (hi > np.asarray(shape)).any() or (hi <= lo).any():
        raise ValueError(f"box {lo.tolist()}..{hi.tolist()} is empty or outside the grid {tuple(shape)}")
    return lo, hi


def _linear(ijk, shape):
    nx, ny, nz = shape
    return (ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0]


def _set_bits(flat_words, ijk, shape):
    nx, ny, nz = shape
    wx = bitgrid.words_along_x(nx)
    w = (ijk[:, 2] * ny + ijk[:, 1]) * wx + (ijk[:, 0] >> 5)
    bit = (np.uint32(1) << (ijk[:, 0] & 31).astype(np.uint32)).astype(np.uint32)
    order = np.argsort(w, kind="stable")
    w, bit = w[order], bit[order]
    starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]]) if len(w) else np.zeros(0, dtype=np.int64)
    if len(starts):
        flat_words[w[starts]] |= np.bitwise_or.reduceat(bit, starts)
