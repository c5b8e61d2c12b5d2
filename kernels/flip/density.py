"""Density correction of the FLIP liquid (issue 24, accuracy; ``FlipSettings.density_correction``,
the Liquid panel's **Density Correction**, 0.3 by default): a divergence source where
particles crowd, so the pressure projection pushes them apart again. NumPy and CuPy (dense
and sparse solvers).

Why: the projection makes the GRID velocity divergence-free, but nothing keeps the
PARTICLES at their rest spacing; where they drift together (pressed against the floor and
walls, or landing there in a long substep) the grid sees no compression and they stay
together. The H100 dam break at 8M particles lost 14% of its occupied cells by frame 15
with the Accurate timing, 54% with Fast, and wall cells held up to 10⁵ particles.

The correction (the density-based divergence correction of the FLIP/PIC literature: the
projection's target divergence set from the particle density's deviation from rest, as in
Bridson, *Fluid Simulation for Computer Graphics*, 2nd ed., and the density constraint of
Kugelstadt et al. 2019, "Implicit density projection for volume conserving liquids",
here reduced to one explicit term in the existing solve): per FLUID cell i holding n_i
particles, n₀ = particles per cell and α the stiffness,

    s_i = α · max(0, n_i / n₀ − 1) / Δt        (1/s: the divergence the projection targets)

Derivation, in ``pressure.py``'s convention (A p = b, D the face sum without 1/h): the
projection leaves D_new = D* + (Δt/h)(A p). Solving A p = b + e with b = −(h/Δt)·D* gives
D_new = (Δt/h)·e; asking D_new / h = s gives e = (h²/Δt)·s. So

    b_i ← b_i + (h²/Δt) · s_i,

i.e. an over-full cell becomes a source of volume: its faces get outward velocities that
would expand it by the fraction α·(n_i/n₀ − 1) over the substep (a compressed cell
relaxes a fraction α of its excess per substep; α ≤ 1 never asks for more than the excess).
Only excess is corrected (max(0, ·)): under-full cells are the free surface and splashes.

The dead band τ (``DEADBAND``, 1: a cell is corrected only past twice its rest count,
s_i = α·max(0, n_i/n₀ − 1 − τ)/Δt). A cell count is noisy — jittered particles that have
moved hold n₀ ± √n₀ (8 ± 2.8) — and a one-sided correction of that noise only ever
expands: with τ = 0 the liquid swells until hardly any cell holds more than n₀. Measured
(CPU, ``bench/flip_density.py``, the 64³ dam break of 260k particles, Fast, frame 40, α =
0.3): τ = 0 gave +38% occupied cells and +35% meshed volume (+19% already at frame 5, the
column barely moving); τ = 1 gave −0.9% and −6.8%, against −21.6% and −27.5% with the
correction off (the fullest cell 54 particles against 284). The wall and floor piles it
is for hold many times n₀.
The velocity is the grid's, so the particles receive it through G2P (FLIP's change, PIC's
value) and the next substep's projection removes it again once the crowding is gone.
Sealed regions: the source is added before their mean is removed (``pressure.pressure_rhs``),
so a sealed, uniformly compressed region cannot expand — as it cannot in a closed box.

The counts n_i are the particles whose cell (floor of the position) is i at the substep's
start — ``classify``'s rule: ``np.bincount`` on the CPU; on the GPU the sparse P2G's bins
(``grid.bins``: its count per pool cell, which ``classify`` reads too) or, dense, one atomic
count a particle (``dense_counts``). The sims hand the solve a ``Crowding`` (the counts and
α, n₀, τ, Δt); the fused right-hand-side kernels (dense ``divergence``, sparse
``cells_rhs``) add (h²/Δt)·s from the counts in the same float32 operations, in the same
order, as ``source`` and ``pressure_rhs`` do (no FMA contraction): the same b bit for bit
(tests/gpu/test_flip_density_gpu.py).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..backend import array_module
from ..errors import InputError

_F32 = np.float32
DEADBAND = float(os.environ.get("VOXFX_DENSITY_DEADBAND", "1"))  # τ: only n/n₀ > 1 + τ is corrected (notes)


def stiffness(settings) -> float:
    """α of *settings* (0 off), checked: a number in [0, 1]."""
    alpha = float(getattr(settings, "density_correction", 0.0))
    if not (math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise InputError(f"The density correction must be a stiffness in [0, 1] (0 = off), not {alpha}")
    return alpha


def source(counts, fluid, per_cell: int, alpha: float, dt: float, deadband: float = None):
    """s (1/s, float32, *counts*' shape; NumPy or CuPy as *counts*): α·max(0, n/n₀ − 1 − τ)/Δt
    on the *fluid* cells, 0 elsewhere (τ = *deadband*, ``DEADBAND`` unless given)."""
    xp = array_module(counts)
    tau = DEADBAND if deadband is None else float(deadband)
    excess = xp.maximum(counts.astype(xp.float32) * _F32(1.0 / per_cell) - _F32(1 + tau), _F32(0))
    return xp.where(fluid, excess * _F32(alpha / dt), _F32(0)).astype(xp.float32)


@dataclass(frozen=True)
class Crowding:
    """What the source of a substep is made from: *counts* (particles per cell: dense (nz, ny,
    nx), sparse per flat cell, or more entries — the sparse bins' extra last one — of which
    the grid's first cells are read; int32 or float32, NumPy or CuPy), n₀, α, Δt and τ."""

    counts: object
    per_cell: int
    alpha: float
    dt: float
    deadband: float = DEADBAND

    def source(self, fluid):
        """``source`` over the cells of *fluid* (bool, the grid's cell shape)."""
        counts = self.counts.reshape(-1)[:fluid.size].reshape(fluid.shape)
        return source(counts, fluid, self.per_cell, self.alpha, self.dt, self.deadband)

    def kernel_args(self, h: float):
        """The fused kernels' float32 constants (1/n₀, 1 + τ, α/Δt, h²/Δt), rounded as
        ``source`` and ``pressure_rhs`` round them."""
        return (_F32(1.0 / self.per_cell), _F32(1 + self.deadband), _F32(self.alpha / self.dt),
                _F32(h * h / self.dt))


def device_args(crowding, cells: int, h: float, *, flat: bool = False):
    """The fused kernels' density-correction arguments (counts, on, 1/n₀, 1 + τ, α/Δt, h²/Δt)
    for a grid of *cells* cells of size *h* (the dense ``divergence``, the sparse ``cells_rhs``):
    off without a *crowding* (a null counts pointer, never read with on = 0: no device array
    kept or made); None where its counts are not a C-contiguous int32 CuPy array of the grid's
    cells — exactly *cells* of them, or with *flat* (the sparse solver's, one-dimensional) at
    least *cells* — and the caller then adds the source as an array."""
    if crowding is None:
        return (np.uint64(0), np.int32(0), *(_F32(0),) * 4)
    import cupy as cp

    counts = crowding.counts
    if not (isinstance(counts, cp.ndarray) and counts.dtype == cp.int32 and counts.flags.c_contiguous):
        return None
    if not (counts.ndim == 1 and counts.size >= cells if flat else counts.size == cells):
        return None
    return (counts, np.int32(1), *crowding.kernel_args(h))


def source_array(source, fluid):
    """*source* as ``pressure_rhs`` adds it: an array as given, a ``Crowding`` made into one."""
    return source.source(fluid) if isinstance(source, Crowding) else source


def _cells(grid, pos, shape):
    """(i, j, k, weight): each particle's lattice cell (int64, the floor of its position) and
    whether it counts (float32 0/1; None: every one); *shape*: the box outside which a particle
    counts nowhere (classify's rule; None: no box)."""
    i, j, k = (np.floor(np.where(np.isfinite(a), a, np.float32(-1e9))).astype(np.int64)
               for a in grid.cell_coords(pos))
    if shape is None:
        return i, j, k, None
    ok = np.ones(i.shape, bool)
    for a, n in zip((i, j, k), shape):
        ok &= (a >= 0) & (a < n)
        np.clip(a, 0, n - 1, out=a)
    return i, j, k, ok.astype(np.float32)


def dense_counts(grid, pos):
    """Particles per cell (nz, ny, nx) of a dense grid: float32 on NumPy, int32 on CuPy (one
    atomic a particle: ``count_cells_inside``, ``classify``'s rule)."""
    nx, ny, nz = grid.shape
    if grid.xp is not np:
        from .transfer import KERNELS, _frame

        cp = grid.xp
        count = cp.zeros((nz, ny, nx), cp.int32)
        n = int(pos.shape[0])
        if n:
            KERNELS.launch("count_cells_inside", n, (pos, np.int64(n), np.int32(nx), np.int32(ny), np.int32(nz),
                                                     *_frame(grid), count))
        return count
    i, j, k, w = _cells(grid, pos, grid.shape)
    total = np.bincount((k * ny + j) * nx + i, weights=w, minlength=nx * ny * nz)
    return total.astype(np.float32).reshape(nz, ny, nx)


def sparse_counts(grid, pos):
    """Particles per flat cell of a sparse grid (``grid.size`` entries; cells of inactive
    bricks count nothing): float32 on NumPy; on CuPy the P2G's bins' count (int32, one more
    entry: the particles without an active cell) where the bins are *pos*'s, else int32 by
    ``sparse_transfer.particle_cells``."""
    if grid.xp is not np:
        bins = getattr(grid, "bins", None)
        if bins is not None and bins[0] is pos and bins[1].dtype == grid.xp.int32:
            return bins[1]
        from .sparse_transfer import particle_cells

        at = particle_cells(grid, pos)
        return grid.xp.bincount(at[at >= 0], minlength=grid.size).astype(grid.xp.int32)
    i, j, k, w = _cells(grid, pos, grid.shape if grid.closed else None)
    at = grid.locate(i, j, k)
    ok = at >= 0
    total = np.bincount(at[ok], weights=None if w is None else w[ok], minlength=grid.size)
    return total.astype(np.float32)
