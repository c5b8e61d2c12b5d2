"""A multigrid V-cycle over a sparse hierarchy: the sparse pressure solve's preconditioner
(MGPCG, as ``pressure.py``'s ``"mg"`` on the dense grid; issue 12's "multigrid over a
sparse hierarchy").

Hierarchy. Level 0 is the solver's unknowns (``sparse_pressure.Unknowns``). A level is the
set of its cells that are not AIR — sorted lattice keys (21 bits per axis, relative to a
base below the liquid) with a FLUID flag; every cell not in the set is AIR (the grid's
background). Level l + 1 has a cell for every 2×2×2 block of level l, typed as the dense
multigrid types it: AIR if any child is AIR, else FLUID if any child is FLUID, else SOLID
— so a coarse cell is in the set exactly when all 8 children are. The operator is
rediscretised (the same 7-point Laplacian on the coarse types). Levels are added while the
unknowns span at least ``pressure.MG_MIN_SIDE`` cells along some axis.

Tables, built once per solve by sort → unique → binary search (the same xp code on NumPy
and CuPy; the device solver ``sparse_pressure_gpu.py`` runs its kernels on them):
  * per level ``nbr`` (6, m + 1) int32 and ``diag`` (m + 1) float32: the compacted
    unknowns' 6-neighbour table and diagonal (``sparse_pressure.Unknowns``), the red
    unknowns (i + j + k even) first, ``m_red`` of them, then the black ones;
  * ``up[l]`` (8, m_l + 1): prolongation P, cell-centred trilinear — per axis ¾ from the
    parent and ¼ from the parent's neighbour on the child's side; row (oz·2 + oy)·2 + ox;
  * ``down[l]`` (64, m_{l+1} + 1): restriction ½·Pᵀ as a gather — a coarse unknown sums the
    4 fine cells per axis that interpolate from it (2I − 1, 2I, 2I + 1, 2I + 2 with ¼, ¾,
    ¾, ¼), 64 in all, row (iz·4 + iy)·4 + ix, in a fixed order: no scatter, no atomics.
Entries that are not unknowns point to the level's sentinel (last entry, always 0), so
every stencil is plain gathers. Smoother: red-black Gauss-Seidel, ``MG_SWEEPS`` red→black
before and black→red after the coarse correction, ``MG_COARSE_SWEEPS`` each way on the
coarsest level: a palindrome, so the V-cycle is symmetric positive definite and CG stays
valid. Level 0 is smoothed brick by brick by default (``sparse_multigrid_bricks``,
``VOXFX_SPARSE_MG_SMOOTHER`` "brick" since issue 24's h20d, "rb" the red-black sweeps; read when a
VCycle is built: block Gauss-Seidel over the grid's 8³ bricks, the post-smoothing its adjoint).
``MG_OMEGA`` (``VOXFX_SPARSE_MG_OMEGA``, default 1.3) over-relaxes every sweep above the coarsest
level (issue 24, i24m: fewer CG iterations at no extra launch; the variants measured against it are
``bench/_mg_variants.py``, their counts ``bench/flip_mg_iterations.py``). Levels ≥ 2 (or ≥ 3:
``VOXFX_SPARSE_MG_KEEP_FROM``) kept across
set-ups and rebuilt every k (``VOXFX_SPARSE_MG_KEEP``, off by default): ``sparse_multigrid_kept``.

The coarsest level solved exactly (``MG_DENSE``, ``VOXFX_SPARSE_MG_DENSE``; issue 24, i24p4): a
dense inverse G of its operator, built once per V-cycle's tables by Gauss-Jordan elimination in
float64 (``dense_inverse``) and applied as one float32 mat-vec (``dense_solve``) where the sweeps
took 4·MG_COARSE_SWEEPS passes; "2" also drops the last level where the one above it has at
most ``DENSE_DROP_UNKNOWNS`` unknowns (its inverse then replaces that level's V-cycle). The
device builds G with the same operations in the same order (mg_dense_inverse) and sums the
mat-vec as ``dense_solve`` does: the same bits. A V-cycle with an exact coarse solve stays
symmetric positive definite (G is symmetrised; a sealed component's pinned unknown leaves it
semi-definite there, the smoothing definite). Measured on an H100 (``sparse_pressure_vcycle``'s
notes): the 8M dam break's PCG iteration 250 → 237 µs with "2", the same or fewer CG iterations.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import InputError
from ..settings import env_choice
from .grid import AIR, FLUID
from . import sparse_multigrid_bricks
from .pressure import MG_COARSE_SWEEPS, MG_MIN_SIDE, MG_SWEEPS

_F32 = np.float32
# Over-relaxation of the smoothing sweeps above the coarsest level (issue 24, i24m):
# x_c ← x_c + ω·((b_c + Σ x_n)/diag_c − x_c), the same ω before and after the coarse
# correction (the V-cycle stays symmetric; positive definite for 0 < ω < 2); the device
# compiles the same ω into its kernels (MG_OMEGA). "1": plain Gauss-Seidel, the dense
# solver's V-cycle. Default 1.3, measured on an H100 80GB HBM3 (bench/flip_mg_omega_call.sh,
# processes alternating old, new, old, new in one call): the 8M dam break at 256³ 14 → 11 CG
# iterations a substep, pressure 5.15 / 4.99 → 4.50 / 4.64 ms, substep 8.3 / 8.1 → 7.6 / 7.7
# ms; the 65M one at 512³ 20–21 → 17 iterations, pressure 32.03 / 32.22 → 30.08 / 30.27 ms.
# ω 1.2 gave 12 iterations (4.76 ms), 1.45 11 (5.14 ms). An iteration costs ~10% more: the
# prolongation onto every unknown (the over-relaxed black sweep reads the black values) and
# the sweeps' read of x_c.
MG_OMEGA = float(os.environ.get("VOXFX_SPARSE_MG_OMEGA", "1.3"))
if not 0.0 < MG_OMEGA < 2.0:
    raise ValueError(f"VOXFX_SPARSE_MG_OMEGA must lie in (0, 2), not {MG_OMEGA}")
# The coarsest level's solve (i24p4; module notes), ``dense_mode()``: "0" MG_COARSE_SWEEPS
# symmetric Gauss-Seidel sweeps from 0 (the dense solver's), "1" the dense inverse, "2" the dense
# inverse of the last level but one where it has at most DENSE_DROP_UNKNOWNS unknowns (the last
# level dropped), else of the last: the default since the fourteenth session (the GPU pressure and
# accuracy files passed with it on an H100; the 8M row's pressure 5.75 → 5.62 ms). "0" stays for
# tests that follow the dense solver's V-cycle or pin level counts (tests/conftest.py's
# mg_dense_sweeps). VOXFX_SPARSE_MG_DENSE read when a VCycle is built (an A/B in one process:
# bench/flip_sparse.py --ab), unless MG_DENSE names a mode.
DENSE_MODES = ("0", "1", "2")
MG_DENSE = None
DENSE_DROP_UNKNOWNS = 128
# A pivot at most this times its unknown's diagonal is a singular (sealed, all-Neumann)
# component's last: that unknown is pinned (its row and column of G zero), G the inverse of the
# operator without it — symmetric positive semi-definite, as the V-cycle needs.
DENSE_PIVOT = 1e-9
MAX_LEVELS = 16
KEY_BITS = 21  # per axis
_KEY_MASK = (1 << KEY_BITS) - 1
_MARGIN = 4  # cells between a level's base and its lowest cell (queries reach 2 below)
_AXIS_WEIGHTS = ((-1, 0.25), (0, 0.75), (1, 0.75), (2, 0.25))  # fine offset from 2I, weight
_DIRECTIONS = ((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1))  # nbr rows

# The weights of the table rows (the kernels compute the same products).
PROLONG_WEIGHTS = tuple(_F32((0.25 if ox else 0.75) * (0.25 if oy else 0.75) * (0.25 if oz else 0.75))
                        for oz in (0, 1) for oy in (0, 1) for ox in (0, 1))
RESTRICT_WEIGHTS = tuple(_F32(wx * wy * wz) for _, wz in _AXIS_WEIGHTS for _, wy in _AXIS_WEIGHTS
                         for _, wx in _AXIS_WEIGHTS)


def _offset(ox, oy, oz) -> int:
    """What a step (ox, oy, oz) adds to a key (no carries: every axis stays in range)."""
    return (oz << (2 * KEY_BITS)) + (oy << KEY_BITS) + ox


def _pack(i, j, k, base):
    return ((k - int(base[2])) << (2 * KEY_BITS)) | ((j - int(base[1])) << KEY_BITS) | (i - int(base[0]))


def _unpack(keys, base):
    return ((keys & _KEY_MASK) + int(base[0]), ((keys >> KEY_BITS) & _KEY_MASK) + int(base[1]),
            (keys >> (2 * KEY_BITS)) + int(base[2]))


def _lookup(keys, queries, xp):
    """Index of each query key in the sorted *keys*, −1 where absent."""
    n = int(keys.shape[0])
    if n == 0:
        return xp.full(queries.shape, -1, xp.int64)
    at = xp.minimum(xp.searchsorted(keys, queries.ravel()), n - 1).reshape(queries.shape)
    return xp.where(keys[at] == queries, at, -1)


def _unknown_at(position, at, sentinel, xp):
    """The unknown of set indices *at* (−1: absent), *sentinel* where absent or none."""
    if position.shape[0] == 0:  # an empty level: nothing to gather from
        return xp.full(at.shape, sentinel, xp.int32)
    return xp.where(at >= 0, position[xp.maximum(at, 0)], sentinel).astype(xp.int32)


def _with_sentinel(xp, table, sentinel):
    rows = table.shape[0]
    return xp.concatenate([table.astype(xp.int32), xp.full((rows, 1), sentinel, xp.int32)], axis=1)


class _CellSet:
    """A level's non-AIR cells: sorted ``keys``, ``fluid`` flags, and ``position`` (the
    unknown of each cell, m where it is not one), relative to ``base``."""

    def __init__(self, keys, fluid, base):
        self.keys, self.fluid, self.base = keys, fluid, tuple(int(b) for b in base)
        self.position = None

    def coarser_base(self):
        """The next level's base: ≤ half of any cell's coordinate, minus the margin."""
        return tuple((b + _MARGIN) // 2 - _MARGIN for b in self.base)


class CompactLevel:
    """Unknowns of one level, compacted: ``m`` of them (the ``m_red`` red ones first), a
    sentinel entry m after them that every vector holds at 0, ``nbr`` (6, m + 1) int32
    (−x, +x, −y, +y, −z, +z; the sentinel where the neighbour is not an unknown) and
    ``diag`` (m + 1) float32, the non-SOLID neighbours (1 on the sentinel)."""

    def neighbour_sum(self, x):
        """Σ x over the six neighbours, −x, +x, −y, +y, −z, +z."""
        s = x[self.nbr[0]]
        for d in range(1, 6):
            s = s + x[self.nbr[d]]
        return s

    def apply(self, x):
        """A x (0 on the sentinel)."""
        return self.diag * x - self.neighbour_sum(x)


class _Level(CompactLevel):
    """A coarse level's unknowns (``CompactLevel``) and ``keys``, theirs in compact order."""

    def __init__(self, m, m_red, nbr, diag, keys):
        self.m, self.m_red, self.nbr, self.diag, self.keys = int(m), int(m_red), nbr, diag, keys


class TableBuilder:
    """The hierarchy's tables as xp code: the reference (NumPy), and what the device's
    ``sparse_pressure_gpu.TableKernels`` computes kernel by kernel."""

    def __init__(self, xp, coarsen_fluid=9):  # coarsen_fluid: bench/_mg_variants.py
        self.xp, self.coarsen_fluid = xp, coarsen_fluid

    def coarser(self, cells: _CellSet) -> _CellSet:
        """The next level's set: parents with all 8 children in *cells* (or, with
        ``coarsen_fluid`` ≤ 8, at least that many FLUID ones), FLUID if one is."""
        xp = self.xp
        base = cells.coarser_base()
        i, j, k = _unpack(cells.keys, cells.base)
        parents = _pack(i >> 1, j >> 1, k >> 1, base)
        keys, inverse, counts = xp.unique(parents, return_inverse=True, return_counts=True)
        fluid_count = xp.bincount(inverse.ravel()[cells.fluid], minlength=keys.shape[0])
        full = (counts == 8) | (fluid_count >= self.coarsen_fluid)
        return _CellSet(keys[full], fluid_count[full] > 0, base)

    def level(self, cells: _CellSet) -> _Level:
        """The unknowns of *cells* (FLUID with a non-SOLID neighbour), red then black, and
        their tables; sets ``cells.position``."""
        xp = self.xp
        keys, fluid = cells.keys, cells.fluid
        fl = xp.flatnonzero(fluid)
        fk = keys[fl]
        queries = fk[None, :] + xp.asarray([_offset(*o) for o in _DIRECTIONS], dtype=xp.int64)[:, None]
        at = _lookup(keys, queries, xp)  # (6, fluid cells): the neighbour's set index, −1 = AIR
        solid = (at >= 0) & ~fluid[xp.maximum(at, 0)]
        diag = 6 - solid.sum(axis=0)
        i, j, k = _unpack(fk, cells.base)
        red = ((i + j + k) & 1) == 0
        unknown = diag > 0
        reds, blacks = xp.flatnonzero(unknown & red), xp.flatnonzero(unknown & ~red)
        order = xp.concatenate([reds, blacks])
        m = int(order.shape[0])
        cells.position = xp.full(keys.shape[0], m, xp.int32)
        cells.position[fl[order]] = xp.arange(m, dtype=xp.int32)
        at = at[:, order]
        nbr = _with_sentinel(xp, _unknown_at(cells.position, at, m, xp), m)
        diag = xp.concatenate([diag[order].astype(xp.float32), xp.ones(1, xp.float32)])
        return _Level(m, reds.shape[0], nbr, diag, fk[order])

    def prolong(self, fine_keys, fine_base, coarse: _CellSet, m_coarse):
        """(8, m_f + 1) int32: per fine unknown the coarse parent and its neighbours on the
        child's side (row (oz·2 + oy)·2 + ox), the coarse sentinel where not an unknown."""
        xp = self.xp
        i, j, k = _unpack(fine_keys, fine_base)
        parent = _pack(i >> 1, j >> 1, k >> 1, coarse.base)
        step = [((a & 1) * 2 - 1) * (1 << (KEY_BITS * axis)) for axis, a in enumerate((i, j, k))]  # ±1 cell
        queries = xp.stack([parent + ox * step[0] + oy * step[1] + oz * step[2]
                            for oz in (0, 1) for oy in (0, 1) for ox in (0, 1)])
        at = _lookup(coarse.keys, queries, xp)
        return _with_sentinel(xp, _unknown_at(coarse.position, at, m_coarse, xp), m_coarse)

    def restrict(self, coarse_keys, coarse_base, fine: _CellSet, m_fine):
        """(64, m_c + 1) int32: per coarse unknown the fine cells 2I + (−1, 0, 1, 2) per
        axis (row (iz·4 + iy)·4 + ix), the fine sentinel where not an unknown."""
        xp = self.xp
        first = _pack(*(2 * a for a in _unpack(coarse_keys, coarse_base)), fine.base)
        rows = []
        for oz, _ in _AXIS_WEIGHTS:  # 16 rows at a time: bounded temporaries
            offsets = xp.asarray([_offset(ox, oy, oz) for oy, _ in _AXIS_WEIGHTS for ox, _ in _AXIS_WEIGHTS],
                                 xp.int64)
            at = _lookup(fine.keys, first[None, :] + offsets[:, None], xp)
            rows.append(_unknown_at(fine.position, at, m_fine, xp))
        return _with_sentinel(xp, xp.concatenate(rows), m_fine)

    def extent(self, keys, base) -> int:
        """Largest span in cells of the unknowns along an axis (0 without unknowns)."""
        if keys.shape[0] == 0:
            return 0
        spans = self.xp.stack([a.max() - a.min() for a in _unpack(keys, base)])
        return int(spans.max()) + 1


def _level0_cells(grid, kind, level0, xp):
    """Level 0's set (the grid's FLUID and SOLID cells, pins AIR) and its base."""
    i, j, k = lattice = grid.lattice()
    at = xp.flatnonzero(grid.active() & (kind != AIR))
    i, j, k = i[at], j[at], k[at]
    lo_hi = [int(v) for v in xp.stack([i.min(), j.min(), k.min(), i.max(), j.max(), k.max()]).tolist()]
    return level0_set(kind, level0, lattice, at, lo_hi[:3], lo_hi[3:], xp)


def level0_set(kind, level0, lattice, at, lo, hi, xp):
    """Level 0's set from its flat cells *at* (flat order), the grid's *lattice* and the
    set's lattice box [lo, hi]: keys relative to a base _MARGIN below, sorted."""
    i, j, k = (a[at] for a in lattice)
    if max(h - lo_ for lo_, h in zip(lo, hi)) + 2 * _MARGIN >= 1 << KEY_BITS:
        raise InputError(f"the sparse liquid spans more than {(1 << KEY_BITS) - 2 * _MARGIN:,} cells along an axis")
    base = tuple(v - _MARGIN for v in lo)
    keys = _pack(i, j, k, base)
    order = xp.argsort(keys)
    at = at[order]
    cells = _CellSet(keys[order], kind[at] == FLUID, base)
    cells.position = level0.position[at].astype(xp.int32)
    return cells


def gather_sum(values, table, weights):
    """Σ_row weights[row]·values[table[row]], added row by row (the kernels' order)."""
    out = weights[0] * values[table[0]]
    for row in range(1, table.shape[0]):
        out = out + weights[row] * values[table[row]]
    return out


def sweep(level, x, b, colour, omega=1.0):
    """One colour of Gauss-Seidel in place: x_c ← (b_c + Σ x_n) / diag_c on the colour's
    unknowns (red [0, m_red), black [m_red, m)); the other colour is all it reads. *omega*
    ≠ 1: over-relaxed, x_c ← x_c + ω·(that − x_c)."""
    lo, hi = (0, level.m_red) if colour == 0 else (level.m_red, level.m)
    if hi <= lo:
        return
    nbr = level.nbr[:, lo:hi]
    s = x[nbr[0]]
    for d in range(1, 6):
        s = s + x[nbr[d]]
    g = (b[lo:hi] + s) / level.diag[lo:hi]
    x[lo:hi] = g if omega == 1.0 else x[lo:hi] + _F32(omega) * (g - x[lo:hi])


def dense_mode() -> int:
    """The coarsest level's solve: ``MG_DENSE`` where set, else VOXFX_SPARSE_MG_DENSE ("2")."""
    given = None if MG_DENSE is None else str(int(MG_DENSE))
    return int(env_choice("VOXFX_SPARSE_MG_DENSE", DENSE_MODES, given, default="2"))


def dense_operator(level):
    """(m, m) float64: the level's operator A (diag on the diagonal, −1 per neighbour unknown)."""
    m = level.m
    a = np.zeros((m, m))
    rows = np.arange(m)
    a[rows, rows] = level.diag[:m]
    for d in range(6):
        n = np.asarray(level.nbr[d, :m])
        ok = n < m
        a[rows[ok], n[ok]] = -1.0
    return a


def dense_inverse(level):
    """(m, m) float32 G ≈ A⁻¹ of *level* (NumPy tables): Gauss-Jordan in place in float64 without
    pivoting (A is symmetric positive semi-definite), pivot k in order — row k divided by the pivot,
    every other entry a_ij − a_ik·(a_kj/p), column k −a_ik/p, a_kk 1/p; a pivot ≤ DENSE_PIVOT·diag_k
    skipped and its unknown pinned (a_kk 0); then G = ½(a + aᵀ), rows and columns of pinned unknowns
    0, rounded to float32. mg_dense_inverse computes each entry by the same operations."""
    a = dense_operator(level)
    m = level.m
    diag = np.asarray(level.diag[:m], np.float64)
    for k in range(m):
        p = a[k, k]
        if not p > DENSE_PIVOT * diag[k]:
            a[k, k] = 0.0
            continue
        row, col = a[k].copy(), a[:, k].copy()
        r = row / p
        a = a - np.outer(col, r)
        a[k, :] = r
        a[:, k] = -(col / p)
        a[k, k] = 1.0 / p
    kept = np.diagonal(a) != 0.0
    g = (0.5 * (a + a.T)).astype(_F32)
    g[~kept, :] = 0.0
    g[:, ~kept] = 0.0
    return g


def dense_solve(g, b, xp=np):
    """x = G b over the m unknowns (sentinel 0): x_i = Σ_j G_ij·b_j added j = 0, 1, … in float32
    (the device's order)."""
    m = g.shape[0]
    x = xp.zeros_like(b)
    if m == 0:
        return x
    s = g[:, 0] * b[0]
    for j in range(1, m):
        s = s + g[:, j] * b[j]
    x[:m] = s
    return x


class VCycle:
    """z = M r for the sparse pressure solve: *level0* the solver's ``Unknowns`` of
    *grid* with cell types *kind*; vectors are compacted (sentinel last). ``levels``,
    ``up`` and ``down`` are the tables (module notes). *coarsen_fluid* and *min_side*
    (``bench/_mg_variants.py``, NumPy only): ``TableBuilder``'s rule and the smallest
    span coarsened."""

    # level 0's post-smoothing colours inside a brick (SMOOTHER "brick"): the adjoint order; a
    # test's mutant sets the forward one
    _brick_post = (1, 0)

    def __init__(self, grid, kind, level0, coarsen_fluid=9, min_side=MG_MIN_SIDE):
        xp = self.xp = grid.xp
        self.smoother = sparse_multigrid_bricks.smoother()  # level 0's (sparse_multigrid_bricks)
        self._inside = None
        self.levels = [level0]
        self.down, self.up = [], []  # restriction to level l + 1, prolongation to level l
        self.dense, self.dense_mode = None, 0  # MG_DENSE: G of the coarsest level (xp; the GPU solver builds its own)
        if level0.m == 0:
            return
        if xp is not np:
            from . import sparse_pressure_setup

            if sparse_pressure_setup.SETUP == "device":  # the sizes stay on the device
                self.levels, self.up, self.down = sparse_pressure_setup.build(grid, kind, level0)
                self._dense_levels()
                return
        from .sparse_multigrid_kept import Held, frame_of, keep_every, keep_from

        if xp is np:
            build = TableBuilder(xp, coarsen_fluid)
        else:
            from .sparse_pressure_tables import TableKernels

            build = TableKernels()
        cells = _level0_cells(grid, kind, level0, xp)
        keys, base = _pack(*level0.lattice, cells.base), cells.base  # of the finest unknowns
        every = keep_every() if xp is np and coarsen_fluid == 9 and min_side == MG_MIN_SIDE else 0
        first = keep_from() if every else 0  # the first level held
        held = getattr(grid, "_mg_held", None) if every else None
        frame = frame_of(grid)  # a frame begun since they were built: rebuilt (sparse_multigrid_kept)
        if every:
            grid._mg_held = None  # set again below where levels ≥ 2 are built or kept
        while len(self.levels) < MAX_LEVELS and build.extent(keys, base) >= min_side:
            fine = self.levels[-1]
            if len(self.levels) == first and held is not None and held.keeps(every, frame, first):  # levels ≥ K held
                up, down = held.transfers(build, cells, keys, fine.m)
                self.levels += held.levels
                self.up += [up] + held.up
                self.down += [down] + held.down
                held.age += 1
                grid._mg_held = held
                break
            if len(self.levels) == first + 1 and every:  # level K just built: held for the next set-ups
                kept_cells, kept_keys = cells, keys
            coarse_cells = build.coarser(cells)
            coarse = build.level(coarse_cells)
            self.up.append(build.prolong(keys, base, coarse_cells, coarse.m))
            self.down.append(build.restrict(coarse.keys, coarse_cells.base, cells, fine.m))
            self.levels.append(coarse)
            cells, keys, base = coarse_cells, coarse.keys, coarse_cells.base
        if every and getattr(grid, "_mg_held", None) is None and len(self.levels) > first:
            if len(self.levels) == first + 1:
                kept_cells, kept_keys = cells, keys
            grid._mg_held = Held(self.levels[first:], self.up[first:], self.down[first:], kept_cells,
                                 kept_keys, frame, first)
        for level in self.levels[1:]:  # only needed while building
            level.keys = None
        self._dense_levels()

    def _dense_levels(self):
        """MG_DENSE: drop the last level ("2", where the one above it has at most
        DENSE_DROP_UNKNOWNS unknowns and is not level 0) and, on NumPy, G of the coarsest (on CuPy
        ``_device_dense`` builds it when this V-cycle is first applied: the GPU solver, which takes
        only the tables, builds its own by mg_dense_inverse)."""
        self.dense_mode = dense_mode() if len(self.levels) > 1 else 0
        if self.dense_mode == 2 and len(self.levels) > 2 and self.levels[-2].m <= DENSE_DROP_UNKNOWNS:
            del self.levels[-1], self.up[-1], self.down[-1]
        if self.dense_mode and self.xp is np:
            self.dense = dense_inverse(self.levels[-1])

    def _device_dense(self):
        """G of the coarsest level for this xp code on CuPy: built on the host from a copy of its
        tables (the same G as NumPy's), then put on the device; the coarse solve then sums as
        NumPy's does (before, the CuPy V-cycle swept the level NumPy solved exactly)."""
        c = self.levels[-1]
        host = _Level(c.m, c.m_red, self.xp.asnumpy(c.nbr), self.xp.asnumpy(c.diag), None)
        self.dense = self.xp.asarray(dense_inverse(host))
        return self.dense

    def __call__(self, r):
        return self._cycle(r, 0)

    def _cycle(self, b, level):
        L = self.levels[level]
        x = self.xp.zeros_like(b)
        if level == len(self.levels) - 1 and self.dense_mode:
            g = self.dense if self.dense is not None else self._device_dense()
            return dense_solve(g, b, self.xp)
        if level == len(self.levels) - 1:
            for _ in range(MG_COARSE_SWEEPS):
                sweep(L, x, b, 0)
                sweep(L, x, b, 1)
            for _ in range(MG_COARSE_SWEEPS):
                sweep(L, x, b, 1)
                sweep(L, x, b, 0)
            return x
        bricks = level == 0 and self.smoother == "brick"  # level 0 brick by brick (sparse_multigrid_bricks)
        if bricks:
            if self._inside is None:
                self._inside = sparse_multigrid_bricks.brick_inside(L, self.xp)
            x = sparse_multigrid_bricks.pre_smooth(L, self._inside, b, MG_OMEGA, sparse_multigrid_bricks.SWEEPS,
                                                   self.xp)
        for _ in range(0 if bricks else MG_SWEEPS):  # pre-smoothing: red, black
            sweep(L, x, b, 0, MG_OMEGA)
            sweep(L, x, b, 1, MG_OMEGA)
        r = b - L.apply(x)  # 0 on the sentinel
        bc = _F32(0.5) * gather_sum(r, self.down[level], RESTRICT_WEIGHTS)
        xc = self._cycle(bc, level + 1)
        x = x + gather_sum(xc, self.up[level], PROLONG_WEIGHTS)
        if bricks:
            sparse_multigrid_bricks.post_smooth(L, self._inside, x, b, MG_OMEGA, sparse_multigrid_bricks.SWEEPS,
                                                self._brick_post, self.xp)
        for _ in range(0 if bricks else MG_SWEEPS):  # post-smoothing: black, red (the adjoint order)
            sweep(L, x, b, 1, MG_OMEGA)
            sweep(L, x, b, 0, MG_OMEGA)
        return x
