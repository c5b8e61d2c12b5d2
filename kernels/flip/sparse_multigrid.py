"""A multigrid V-cycle over coarsened bricks: the sparse pressure solve's preconditioner
(MGPCG, as ``pressure.py``'s ``"mg"`` on the dense grid; issue 12's "multigrid over a
sparse hierarchy").

Hierarchy. Level 0 is the solver's brick grid. Level l + 1 has a cell for every 2×2×2
block of level l: its bricks are the parents of level l's bricks (brick coordinates
halved), so every coarse cell of a fine cell exists. Coarse cell types, as the dense
multigrid: AIR if any child is AIR (a missing child is AIR, the grid's background), else
FLUID if any child is FLUID, else SOLID; the operator is rediscretised (the same 7-point
Laplacian on the coarse types). Levels are added while the unknowns span at least
``pressure.MG_MIN_SIDE`` cells along some axis. Every level works on its compacted
unknowns (``sparse_pressure.Unknowns``: vectors of the unknowns plus a 0 sentinel).

Transfers (the dense ones, as gathers). Prolongation P: cell-centred trilinear, per axis
¾ from the parent and ¼ from the parent's neighbour on the child's side; restriction
½·Pᵀ: a coarse unknown sums the 4 fine cells per axis that interpolate from it
(2I − 1, 2I, 2I + 1, 2I + 2 with ¼, ¾, ¾, ¼), 64 in all, in a fixed order — no
scatter, no atomics. Cells that are not unknowns point to the sentinel (their values
are 0). Smoother: red-black Gauss-Seidel, ``MG_SWEEPS`` red→black before and black→red
after the coarse correction, ``MG_COARSE_SWEEPS`` each way on the coarsest level: a
palindrome, so the V-cycle is symmetric positive definite and CG stays valid. The tables
are built once per solve (topology and cell types are fixed during it); reusing them
across substeps when nothing changed is issue 24's.
"""

from __future__ import annotations

import numpy as np

from ..grid.sparse import brick_keys
from ..grid.sparse_mac import SparseMacGrid
from .grid import AIR, FLUID, SOLID
from .pressure import MG_COARSE_SWEEPS, MG_MIN_SIDE, MG_SWEEPS
from .sparse_pressure import Unknowns

_F32 = np.float32
MAX_LEVELS = 16
_AXIS_WEIGHTS = ((-1, 0.25), (0, 0.75), (1, 0.75), (2, 0.25))  # fine offset from 2I, weight


class _Level:
    """One level: its brick grid, cell types and compacted unknowns with colours."""

    def __init__(self, grid, kind, unknowns=None):
        self.xp = xp = grid.xp
        self.grid, self.kind = grid, kind
        self.u = unknowns or Unknowns(grid, kind)
        i, j, k = grid.lattice()
        self.ijk = tuple(a[self.u.cells] for a in (i, j, k))  # lattice of the unknowns
        red = ((self.ijk[0] + self.ijk[1] + self.ijk[2]) & 1) == 0
        no = xp.zeros(1, bool)
        self.colours = (xp.concatenate([red, no]), xp.concatenate([~red, no]))

    def sweep(self, x, b, colour):
        """One colour of Gauss-Seidel: x_c ← (b_c + Σ x_n) / diag_c."""
        new = (b + self.u.neighbour_sum(x)) / self.u.diag
        return self.xp.where(self.colours[colour], new, x)

    def extent(self) -> int:
        """Largest span in cells of the unknowns along an axis (0 without unknowns)."""
        if self.u.m == 0:
            return 0
        return max(int(a.max() - a.min()) + 1 for a in self.ijk)

    def compact(self, flat):
        """Compact position of flat cells (the sentinel where missing or not an unknown)."""
        return self.xp.where(flat >= 0, self.u.position[self.xp.maximum(flat, 0)], self.u.m)

    def walk(self, flat, axis, steps):
        """Flat cells *steps* (an int or per-cell array of ±1, 0, 2) along *axis* from
        *flat*, through the neighbour index (−1 stays −1)."""
        xp = self.xp
        lo, hi = self.grid.nbr[2 * axis], self.grid.nbr[2 * axis + 1]

        def one(idx, table):
            return xp.where(idx >= 0, table[xp.maximum(idx, 0)].astype(xp.int64), -1)

        if isinstance(steps, int):
            for _ in range(abs(steps)):
                flat = one(flat, hi if steps > 0 else lo)
            return flat
        return xp.where(steps > 0, one(flat, hi), xp.where(steps < 0, one(flat, lo), flat))


def _coarser(fine: _Level) -> _Level:
    xp = fine.grid.xp
    grid = SparseMacGrid((0.0, 0.0, 0.0), 1.0, xp)
    coords = fine.grid.topology.coords()
    grid.retopologize(brick_keys(coords >> 1, xp) if coords.shape[0] else xp.zeros(0, xp.int64))
    i, j, k = grid.lattice()
    any_air = xp.zeros(grid.size, bool)
    any_fluid = xp.zeros(grid.size, bool)
    first = fine.grid.locate(2 * i, 2 * j, 2 * k)
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                at = fine.walk(fine.walk(fine.walk(first, 0, dx), 1, dy), 2, dz)
                child = xp.where(at >= 0, fine.kind[xp.maximum(at, 0)], xp.uint8(AIR))
                any_air |= child == AIR
                any_fluid |= child == FLUID
    kind = xp.where(any_air, AIR, xp.where(any_fluid, FLUID, SOLID)).astype(xp.uint8)
    return _Level(grid, xp.where(grid.active(), kind, xp.uint8(AIR)).astype(xp.uint8))


def _with_sentinel(xp, idx, sentinel):
    return xp.concatenate([idx, xp.full(1, sentinel, idx.dtype)])


def _prolong_table(fine: _Level, coarse: _Level):
    """Per fine unknown 8 coarse positions and weights: the parent and its neighbour on
    the child's side per axis, ¾ and ¼."""
    xp = fine.xp
    parent = coarse.grid.locate(*(a >> 1 for a in fine.ijk))
    side = tuple(xp.where((a & 1) == 1, 1, -1) for a in fine.ijk)
    idx, wts = [], []
    for oz in (0, 1):
        for oy in (0, 1):
            for ox in (0, 1):
                at = parent
                for axis, o in enumerate((ox, oy, oz)):
                    at = coarse.walk(at, axis, side[axis]) if o else at
                idx.append(_with_sentinel(xp, coarse.compact(at), coarse.u.m))
                wts.append(_F32((0.25 if ox else 0.75) * (0.25 if oy else 0.75) * (0.25 if oz else 0.75)))
    return idx, wts


def _restrict_table(fine: _Level, coarse: _Level):
    """Per coarse unknown 64 fine positions and weights: the transpose of ``_prolong_table``."""
    xp = fine.xp
    i, j, k = coarse.ijk
    first = fine.grid.locate(2 * i, 2 * j, 2 * k)
    rows = {ox: fine.walk(first, 0, ox) for ox, _ in _AXIS_WEIGHTS}
    planes = {(ox, oy): fine.walk(rows[ox], 1, oy) for ox, _ in _AXIS_WEIGHTS for oy, _ in _AXIS_WEIGHTS}
    idx, wts = [], []
    for oz, wz in _AXIS_WEIGHTS:
        for oy, wy in _AXIS_WEIGHTS:
            for ox, wx in _AXIS_WEIGHTS:
                at = fine.walk(planes[(ox, oy)], 2, oz)
                idx.append(_with_sentinel(xp, fine.compact(at), fine.u.m))
                wts.append(_F32(wx * wy * wz))
    return idx, wts


def _gather_sum(xp, values, idx, wts):
    out = wts[0] * values[idx[0]]
    for at, w in zip(idx[1:], wts[1:]):
        out = out + w * values[at]
    return out


class VCycle:
    """z = M r for the sparse pressure solve: *level0* the solver's ``Unknowns`` of
    *grid* with cell types *kind*; vectors are compacted (sentinel last)."""

    def __init__(self, grid, kind, level0):
        self.xp = grid.xp
        self.levels = [_Level(grid, kind, level0)]
        self.down, self.up = [], []  # restriction to level l + 1, prolongation to level l
        while len(self.levels) < MAX_LEVELS and self.levels[-1].extent() >= MG_MIN_SIDE:
            fine = self.levels[-1]
            coarse = _coarser(fine)
            self.up.append(_prolong_table(fine, coarse))
            self.down.append(_restrict_table(fine, coarse))
            self.levels.append(coarse)
        for level in self.levels:  # only needed while building
            level.ijk = level.kind = level.grid = None

    def __call__(self, r):
        return self._cycle(r, 0)

    def _cycle(self, b, level):
        L = self.levels[level]
        x = self.xp.zeros_like(b)
        if level == len(self.levels) - 1:
            for _ in range(MG_COARSE_SWEEPS):
                x = L.sweep(L.sweep(x, b, 0), b, 1)
            for _ in range(MG_COARSE_SWEEPS):
                x = L.sweep(L.sweep(x, b, 1), b, 0)
            return x
        for _ in range(MG_SWEEPS):  # pre-smoothing: red, black
            x = L.sweep(L.sweep(x, b, 0), b, 1)
        r = b - L.u.apply(x)  # 0 on the sentinel
        bc = _F32(0.5) * _gather_sum(self.xp, r, *self.down[level])
        xc = self._cycle(bc, level + 1)
        x = x + _gather_sum(self.xp, xc, *self.up[level])
        for _ in range(MG_SWEEPS):  # post-smoothing: black, red (the adjoint order)
            x = L.sweep(L.sweep(x, b, 1), b, 0)
        return x

