"""The narrow band's frame box and keys (``sparse_band``; moved out of it, issue 24: under
500 lines): the update's cells are int64 keys of one box (``_Frame``: a flat index over the
frame box, so a dense map over the box and a sorted key list give the same order, which the
band's kernels use, ``sparse_band_gpu``), the particles' keys and bounds in that box, and
membership of keys in a sorted list (``_member``) or of lattice cells in a set (``_isin``)."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from . import sparse_bodies


def _isin(a, b, xp):
    ka, kb = sparse_bodies.lattice_keys(a, b, xp)
    return xp.isin(ka, kb)


def _member(keys, sorted_keys, xp):
    """bool per int64 key: is it in *sorted_keys* (sorted, one frame)?"""
    if len(sorted_keys) == 0:
        return xp.zeros(len(keys), bool)
    at = xp.minimum(xp.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


def _particle_cell_bounds(sim):
    """Low and high lattice cells (NumPy (3,) int64) of the particles, None for none: the
    cell of each axis's extreme position (the cell map is monotonic)."""
    xp = sim.xp
    if len(sim.pos) == 0:
        return None
    origin = xp.asarray(sim.spec.origin, dtype=xp.float32)
    h = np.float32(sim.spec.voxel_size)
    return tuple(backend.to_numpy(xp.floor((p - origin) / h).astype(xp.int64))
                 for p in (sim.pos.min(axis=0), sim.pos.max(axis=0)))


def _particle_keys(sim, frame):
    """Each particle's lattice cell (as ``sim._lattice_cells_of_particles``) as one key of
    *frame*, built an axis at a time in place: ~24 B a particle at the peak, not (n, 3) rows."""
    xp = sim.xp
    origin = xp.asarray(sim.spec.origin, dtype=xp.float32)
    h = np.float32(sim.spec.voxel_size)
    key = None
    for a in (2, 1, 0):
        c = xp.floor((sim.pos[:, a] - origin[a]) / h).astype(xp.int64)
        c -= int(frame.lo[a])
        if key is None:
            key = c
        else:
            key *= int(frame.span[a])
            key += c
        del c
    return key


class _Frame:
    """Lattice cells as int64 keys over a box: (k·ny + j)·nx + i from its low corner, so
    sorted keys are rows in ``unique_rows``'s order (z, y, x) and a neighbour's key is the
    key plus its offset's (``offset``) while both lie in the box."""

    def __init__(self, lo, hi, xp):
        self.xp = xp
        self.lo = np.asarray(lo, np.int64)
        self.span = np.asarray(hi, np.int64) - self.lo + 1
        self.stride = (1, int(self.span[0]), int(self.span[0] * self.span[1]))
        if float(self.span[0]) * float(self.span[1]) * float(self.span[2]) >= 2.0 ** 62:
            raise InputError("the narrow band's liquid spans more cells than it can index")

    @classmethod
    def around(cls, rows, bounds, pad: int, xp):
        """The box of the (n, 3) *rows* and the cells *bounds* (low, high) or None, grown
        by *pad* cells; None when there are no cells."""
        lo, hi = [], []
        for r in rows:
            if len(r):
                lo.append(backend.to_numpy(r.min(axis=0)))
                hi.append(backend.to_numpy(r.max(axis=0)))
        if bounds is not None:
            lo.append(bounds[0])
            hi.append(bounds[1])
        return cls.of_bounds(lo, hi, pad, xp)

    @classmethod
    def of_bounds(cls, lo, hi, pad: int, xp):
        """The box of the low and high corners *lo*, *hi* (lists of (3,) int64), grown by
        *pad*; None for none."""
        if not lo:
            return None
        return cls(np.min(lo, axis=0) - pad, np.max(hi, axis=0) + pad, xp)

    def key_axes(self, i, j, k):
        return ((k - int(self.lo[2])) * int(self.span[1]) + (j - int(self.lo[1]))) * self.stride[1] \
            + (i - int(self.lo[0]))

    def key(self, ijk):
        return self.key_axes(ijk[:, 0], ijk[:, 1], ijk[:, 2])

    def offset(self, o) -> int:
        return int(o[0]) + int(o[1]) * self.stride[1] + int(o[2]) * self.stride[2]

    def inside(self, ijk):
        xp = self.xp
        return ((ijk >= xp.asarray(self.lo)) & (ijk < xp.asarray(self.lo + self.span))).all(axis=1)

    def cells(self, keys):
        xp = self.xp
        nx, ny = self.stride[1], int(self.span[1])
        return xp.stack([keys % nx, (keys // nx) % ny, keys // self.stride[2]], axis=1) + xp.asarray(self.lo)
