"""Particles pushed out of solid cells and back inside the domain's walls after advection
(RK2 can carry a particle into a solid or past a wall): the dense grid's ``push_out`` and
the nearest-free-point search it shares with the sparse grid (``sparse_transfer.push_out``).
Callers import both from ``transfer`` too."""

from __future__ import annotations

import numpy as np

from .grid import DenseGrid
from .particles import PUSH_EPSILON

_F = np.float32
_NEIGHBOUR_ORDER = tuple((dx, dy, dz) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
                         if (dx, dy, dz) != (0, 0, 0))  # push-out candidates, ties to the first


def nearest_free_point(c, p, free, eps, xp):
    """Push-out's search (shared by the dense and the sparse grid): for particles at cell
    units *p* in cells *c* (lists of 3 arrays), the nearest point EPS inside each of the 26
    neighbour cells that ``free(nb)`` accepts, ties to the first in z-y-x order. Returns
    (target per axis, squared distance: inf where no neighbour is free)."""
    best = xp.full(c[0].shape, xp.inf, xp.float32)
    target = [q.copy() for q in p]
    for d in _NEIGHBOUR_ORDER:
        nb = [c[a] + d[a] for a in range(3)]
        ok = free(nb)
        q = [xp.fmin(xp.fmax(p[a], nb[a].astype(xp.float32) + eps), (nb[a] + 1).astype(xp.float32) - eps)
             for a in range(3)]
        dist = (q[0] - p[0]) * (q[0] - p[0]) + (q[1] - p[1]) * (q[1] - p[1]) + (q[2] - p[2]) * (q[2] - p[2])
        better = ok & (dist < best)
        best = xp.where(better, dist, best)
        for a in range(3):
            target[a] = xp.where(better, q[a], target[a])
    return target, best


def push_out(grid: DenseGrid, x, fallback):
    """Positions (3 arrays, world) moved out of SOLID cells and the walls: first clamped
    into the domain shrunk by PUSH_EPSILON cells, then a particle in a SOLID cell goes to the
    nearest point of its 26 neighbour cells that are free, PUSH_EPSILON inside them (ties to
    the first in z-y-x order). With no free neighbour, or a position that is not finite, the
    particle goes back to *fallback* (its position at the start of the step). NumPy."""
    from .transfer import _frame  # transfer imports this module

    nx, ny, nz = grid.shape
    solid = grid.solid.reshape(-1) != 0

    def solid_at(i, j, k):  # False outside the box
        inside = (i >= 0) & (i < nx) & (j >= 0) & (j < ny) & (k >= 0) & (k < nz)
        lin = (np.clip(k, 0, nz - 1) * ny + np.clip(j, 0, ny - 1)) * nx + np.clip(i, 0, nx - 1)
        return inside & solid[lin]

    return push_out_of(x, fallback, _frame(grid), grid.shape, True, solid_at, np)


def push_out_of(x, fallback, frame, shape, closed: bool, solid_at, xp):
    """``push_out`` for any grid (the dense one's, ``sparse_transfer.push_out`` on bricks):
    *frame* (ox, oy, oz, h, 1/h) float32, *shape* the grid's cells, *closed*: clamped into
    them (else an open domain: not clamped), *solid_at(i, j, k)* whether those cells are
    SOLID (False outside the grid's cells)."""
    ox, oy, oz, h, inv_h = frame
    origin = (ox, oy, oz)
    eps = _F(PUSH_EPSILON)
    x = [xp.array(a, dtype=xp.float32, copy=True) for a in x]
    with np.errstate(invalid="ignore"):
        finite = xp.isfinite(x[0]) & xp.isfinite(x[1]) & xp.isfinite(x[2])
        g = [(x[a] - origin[a]) * inv_h for a in range(3)]
        if closed:
            gc = [xp.fmin(xp.fmax(g[a], eps), _F(shape[a]) - eps) for a in range(3)]
        else:
            gc = [xp.where(finite, g[a], _F(0)) for a in range(3)]
    moved = finite & ((gc[0] != g[0]) | (gc[1] != g[1]) | (gc[2] != g[2]))
    cell = [xp.floor(xp.where(finite, gc[a], _F(0))).astype(xp.int64) for a in range(3)]
    if closed:
        cell = [xp.minimum(cell[a], shape[a] - 1) for a in range(3)]
    inside_solid = finite & solid_at(*cell)
    back = ~finite
    idx = xp.flatnonzero(inside_solid)
    if idx.size:
        c = [cell[a][idx] for a in range(3)]
        p = [gc[a][idx] for a in range(3)]

        def free(nb):
            ok = ~solid_at(*nb)
            if closed:
                for a in range(3):
                    ok &= (nb[a] >= 0) & (nb[a] < shape[a])
            return ok

        target, best = nearest_free_point(c, p, free, eps, xp)
        found = xp.isfinite(best)
        for a in range(3):
            gc[a][idx] = target[a]
        moved[idx] = found
        back[idx[~found]] = True
    for a in range(3):
        x[a] = xp.where(moved, origin[a] + gc[a] * h, x[a])
        x[a] = xp.where(back, fallback[a], x[a])
    return x
