"""The multigrid preconditioner of the FLIP pressure solve on NumPy (the MGPCG V-cycle
``pressure.py`` describes): levels, cell-type coarsening, the 7-point operator and its
red-black Gauss-Seidel smoother, prolongation and restriction, one V-cycle. The device
solver (``pressure_gpu.py``) follows it operation by operation.
"""

from __future__ import annotations

import numpy as np

from ..grid import mac
from .grid import AIR, FLUID, SOLID

PRECONDITIONERS = ("mg", "jacobi", "none")
MG_SWEEPS = 2  # red-black GS sweeps before and after each coarse correction
MG_COARSE_SWEEPS = 8  # forward (and as many backward) sweeps on the coarsest level
MG_MIN_SIDE = 4  # coarsen while every side has at least this many cells

_F32 = np.float32


# =========================================================================== levels

def _diag_of(kind):
    """uint8 per cell: non-SOLID neighbours (inside the grid) of a FLUID cell, else 0."""
    d = mac.neighbour_count(kind != SOLID)
    d[kind != FLUID] = 0
    return d


def _coarse_shape(shape):
    return tuple((n + 1) // 2 for n in shape)


def mg_level_shapes(shape):
    """(nz, ny, nx) of every multigrid level, finest first."""
    shapes = [tuple(int(n) for n in shape)]
    while min(shapes[-1]) >= MG_MIN_SIDE:
        shapes.append(_coarse_shape(shapes[-1]))
    return shapes


def _coarsen_kind(kind, xp):
    """Coarse cell types from 2×2×2 children: AIR if any child is AIR, else FLUID if any
    is FLUID, else SOLID (children outside the grid do not count)."""
    nz, ny, nx = kind.shape
    cz, cy, cx = _coarse_shape(kind.shape)
    pad = xp.full((2 * cz, 2 * cy, 2 * cx), SOLID, dtype=xp.uint8)
    pad[:nz, :ny, :nx] = kind
    blocks = pad.reshape(cz, 2, cy, 2, cx, 2)
    any_air = (blocks == AIR).any(axis=(1, 3, 5))
    any_fluid = (blocks == FLUID).any(axis=(1, 3, 5))
    return xp.where(any_air, AIR, xp.where(any_fluid, FLUID, SOLID)).astype(xp.uint8)


# =========================================================================== NumPy reference

class _Level:
    """One multigrid level (NumPy): diag, its float copy, colour masks of the unknowns."""

    def __init__(self, kind):
        self.kind = kind
        self.diag = _diag_of(kind)
        self.unknown = self.diag > 0
        self.d = self.diag.astype(np.float32)
        self.safe = np.where(self.unknown, self.d, _F32(1.0))
        red = mac.red_cells(kind.shape, np)
        self.colours = (red & self.unknown, ~red & self.unknown)

    def apply(self, x):
        """A x (0 off the unknowns)."""
        return np.where(self.unknown, self.d * x - mac.neighbour_sum(x), _F32(0.0))

    def sweep(self, x, b, colour):
        """One colour of Gauss-Seidel: x_c ← (b_c + Σ x_n) / diag_c."""
        cells = self.colours[colour]
        new = (b + mac.neighbour_sum(x)) / self.safe
        x[cells] = new[cells]


def _prolong_axis(c, axis, nf):
    """Cell-centred linear interpolation along *axis*: fine 2I ← ¾c_I + ¼c_{I−1},
    fine 2I+1 ← ¾c_I + ¼c_{I+1} (missing coarse cells count 0), cropped to nf."""
    c = np.moveaxis(c, axis, 0)
    nc = c.shape[0]
    padded = np.zeros((nc + 2,) + c.shape[1:], dtype=c.dtype)
    padded[1:-1] = c
    even = _F32(0.75) * padded[1:-1] + _F32(0.25) * padded[:-2]
    odd = _F32(0.75) * padded[1:-1] + _F32(0.25) * padded[2:]
    f = np.empty((2 * nc,) + c.shape[1:], dtype=c.dtype)
    f[0::2], f[1::2] = even, odd
    return np.moveaxis(f[:nf], 0, axis)


def _restrict_axis(f, axis, nc):
    """The transpose of ``_prolong_axis``: coarse I ← ¾(f_2I + f_2I+1) + ¼(f_2I−1 + f_2I+2)."""
    f = np.moveaxis(f, axis, 0)
    nf = f.shape[0]
    padded = np.zeros((2 * nc,) + f.shape[1:], dtype=f.dtype)
    padded[:nf] = f
    fe, fo = padded[0::2], padded[1::2]
    c = _F32(0.75) * (fe + fo)
    c[1:] += _F32(0.25) * fo[:-1]
    c[:-1] += _F32(0.25) * fe[1:]
    return np.moveaxis(c, 0, axis)


def _prolong(xc, fine_shape):
    for axis in range(3):
        xc = _prolong_axis(xc, axis, fine_shape[axis])
    return xc


def _restrict(rf, coarse_shape):
    for axis in range(3):
        rf = _restrict_axis(rf, axis, coarse_shape[axis])
    return rf


def _vcycle(levels, b, level=0):
    """z ≈ A⁻¹ b by one V-cycle (a fixed, symmetric positive definite linear operator)."""
    L = levels[level]
    x = np.zeros_like(b)
    if level == len(levels) - 1:
        for _ in range(MG_COARSE_SWEEPS):
            L.sweep(x, b, 0)
            L.sweep(x, b, 1)
        for _ in range(MG_COARSE_SWEEPS):
            L.sweep(x, b, 1)
            L.sweep(x, b, 0)
        return x
    for _ in range(MG_SWEEPS):  # pre-smoothing: red, black
        L.sweep(x, b, 0)
        L.sweep(x, b, 1)
    r = np.where(L.unknown, b - L.apply(x), _F32(0.0))
    C = levels[level + 1]
    bc = np.where(C.unknown, _F32(0.5) * _restrict(r, C.kind.shape), _F32(0.0))
    xc = _vcycle(levels, bc, level + 1)
    x += np.where(L.unknown, _prolong(xc, L.kind.shape), _F32(0.0))
    for _ in range(MG_SWEEPS):  # post-smoothing: black, red (the adjoint order)
        L.sweep(x, b, 1)
        L.sweep(x, b, 0)
    return x


def _mg_levels(kind):
    shapes = mg_level_shapes(kind.shape)
    kinds = [kind]
    for _ in shapes[1:]:
        kinds.append(_coarsen_kind(kinds[-1], np))
    return [_Level(k) for k in kinds]
