"""Level 0 of the sparse pressure solve stored dense in the pool's bricks (issue 24, h20c's probe;
``bench/flip_sparse_dense_bricks.py`` measures it, ``tests/unit/test_flip_dense_bricks_probe.py`` and
``tests/gpu/test_flip_dense_bricks_probe_gpu.py`` hold it to today's operations). Not a product path.

The layout (SPGrid / VDB style). Every level-0 vector has a value per pool cell: slot·512 + the cell's
place in its 8³ brick, the brick's red cells (i + j + k even; bricks start at multiples of 8, so the
local parity is the lattice's) first, then its black ones: ``local = colour·256 + (lz·8 + ly)·4 + lx/2``.
A colour pass then reads and writes half of each vector, contiguous. Cells that are not unknowns hold 0
(x, b, r, p, q) and ``diag`` 0 (uint8, the non-SOLID neighbour count of ``sparse_pressure.diagonal``,
0 where not an unknown — the mask; a float of it is exact, so the division is today's). Neighbours
inside a brick by index arithmetic, across a face or an edge through ``nbr27`` (per slot the 27 slots
around it, −1 none: ``sparse_mac.brick_tables``' table, offset (dz + 1)·9 + (dy + 1)·3 + dx + 1): no
per-unknown table (position, cells, nbr, up, down) at all. A missing brick reads 0, as today's
sentinel. Level 1 likewise: slot·64 + (cz·4 + cy)·4 + cx, the 4³ parents of the slot's 8³ brick (all
children of a parent lie in its brick), ``diag1`` its unknowns' diagonal (0 elsewhere) by
``sparse_multigrid.TableBuilder``'s rules: a parent is in level 1's set when its 8 children are not
AIR, FLUID when one is, an unknown when FLUID with a non-SOLID neighbour.

The passes (``sparse_multigrid.VCycle._cycle`` level 0's, the PCG's q = A p with p·q): a block a brick
(of the ``bricks`` list, the slots holding a FLUID cell), 256 threads:
  * ``db_sweep``: one colour of over-relaxed Gauss-Seidel (``sweep``; ``first``: from x = 0), a thread a
    cell of the colour, its six neighbours summed −x, +x, −y, +y, −z, +z as today;
  * ``db_residual``: r = b − (diag·x − Σ), a thread a red and a black cell, 0 off the unknowns;
  * ``db_apply_dot``: q = diag·p − Σ and the block's Σ p·q in double (a fixed tree), ``db_sum`` adding
    the blocks' partials in a fixed order in one block;
  * ``db_restrict``: level 1's b = ½·Σ (¼, ¾, ¾, ¼)³-weighted fine r (``sparse_multigrid``'s 4³ rows),
    the brick's 10³ fine r (−1 … 8 per axis, from the 27 bricks) in shared memory, then separably (x,
    then y, then z: 400, 160, 64 sums of 4 terms; today adds the 64 products in one chain: the same
    value to float rounding);
  * ``db_prolong``: x += P x₁ on the unknowns, the brick's 6³ coarse x (−1 … 4) in shared memory, the
    8 trilinear terms in today's order (``PROLONG_WEIGHTS``' rows).
Compiled without FMA contraction (as today's kernels): the sweeps, residual, q and the prolongation are
today's values bit for bit on the unknowns; ``reference_*`` are the same passes as xp array code on the
dense arrays (NumPy or CuPy).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.grid import AIR, FLUID
from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA, PROLONG_WEIGHTS

CELLS, HALF, COARSE = 512, 256, 64
_F32 = np.float32
_AXIS = (_F32(0.25), _F32(0.75), _F32(0.75), _F32(0.25))  # restriction weights of fine 2I − 1 … 2I + 2
_STEPS = ((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1))  # −x, +x, −y, +y, −z, +z


def _local_std():
    r = np.arange(CELLS)
    return r & 7, (r >> 3) & 7, r >> 6


def colour_split():
    """int64 (512,): the dense place of each grid-local cell (lz·8 + ly)·8 + lx."""
    lx, ly, lz = _local_std()
    return ((lx + ly + lz) & 1) * HALF + (lz * 8 + ly) * 4 + (lx >> 1)


CS = colour_split()


def nbr27_of(grid):
    """(capacity, 27) int32: the slots around each slot (the device grid's ``brick_nbr``; built the
    same way on NumPy), −1 none."""
    xp = grid.xp
    if getattr(grid, "brick_nbr", None) is not None:
        return grid.brick_nbr
    topo = grid.topology
    out = xp.full((grid.capacity, 27), -1, xp.int32)
    coords = topo.coords()
    for o in range(27):
        off = xp.asarray([o % 3 - 1, (o // 3) % 3 - 1, o // 9 - 1], xp.int64)
        out[topo.slots, o] = grid.slots_of_bricks(coords + off)
    return out


class DenseSystem:
    """Level 0 (and level 1's mask) of *grid* with solver cell types *kind* in the dense brick layout
    (module notes), on the grid's xp: ``diag`` (N uint8), ``diag1`` (capacity·64 uint8), ``nbr27``,
    ``bricks`` (int32 slots holding a FLUID cell), ``n`` = capacity·512 cells."""

    def __init__(self, grid, kind):
        xp = self.xp = grid.xp
        self.capacity = int(grid.capacity)
        self.n = self.capacity * CELLS
        self.cs = xp.asarray(CS)
        flat_diag = sparse_pressure.diagonal(grid, kind)  # 0 off the unknowns
        self.diag = self.dense(flat_diag.astype(xp.uint8))
        self.nbr27 = xp.ascontiguousarray(nbr27_of(grid).astype(xp.int32))
        fluid = (kind == FLUID).reshape(self.capacity, CELLS)
        self.bricks = xp.flatnonzero(fluid.any(axis=1) & grid.brick_slot).astype(xp.int32)
        self.diag1 = self._level1(kind)

    def on_device(self):
        """A copy whose arrays are CuPy's (a NumPy-built system for the kernels)."""
        import copy

        import cupy as cp

        out = copy.copy(self)
        out.xp = cp
        for name in ("cs", "diag", "nbr27", "bricks", "diag1"):
            setattr(out, name, cp.asarray(getattr(self, name)))
        return out

    def dense(self, flat):
        """A grid-ordered pool array in the dense (colour-split) order."""
        out = self.xp.empty_like(flat)
        out.reshape(self.capacity, CELLS)[:, self.cs] = flat.reshape(self.capacity, CELLS)
        return out

    def flat(self, dense):
        """The grid order of a dense array."""
        return dense.reshape(self.capacity, CELLS)[:, self.cs].reshape(-1)

    def from_unknowns(self, level, x):
        """A dense vector of today's compact *x* (m + 1, sentinel last) on *level*'s unknowns."""
        xp = self.xp
        flat = xp.zeros(self.n, x.dtype)
        flat[level.cells] = x[:level.m]
        return self.dense(flat)

    def to_unknowns(self, level, dense):
        """Today's compact vector (sentinel 0) of a dense one."""
        xp = self.xp
        return xp.concatenate([self.flat(dense)[level.cells], xp.zeros(1, dense.dtype)])

    def _level1(self, kind):
        """Level 1's diagonal per parent (slot·64 + (cz·4 + cy)·4 + cx), 0 off its unknowns."""
        xp, cap = self.xp, self.capacity
        k = kind.reshape(cap, 4, 2, 4, 2, 4, 2)  # (slot, cz, dz, cy, dy, cx, dx)
        in_set = (k != AIR).all(axis=(2, 4, 6))  # (slot, cz, cy, cx): all 8 children in level 0's set
        fluid = in_set & (k == FLUID).any(axis=(2, 4, 6))
        padded = xp.zeros((cap + 1, 4, 4, 4), bool)  # row cap: a missing brick (AIR, not SOLID)
        padded[:cap] = in_set & ~fluid
        solid_nb = xp.zeros((cap, 4, 4, 4), xp.int32)
        for lattice_axis in range(3):  # x, y, z ↔ array axes 3, 2, 1
            axis = 3 - lattice_axis
            for step in (-1, 1):
                o = [0, 0, 0]
                o[lattice_axis] = step
                across = self.nbr27[:, 13 + o[0] + 3 * o[1] + 9 * o[2]]
                across = xp.where(across < 0, cap, across).astype(xp.int64)
                moved = xp.roll(padded[:cap], -step, axis=axis)  # moved[c] = solid[c + step]
                edge = [slice(None)] * 4
                edge[axis] = 3 if step > 0 else 0
                other = [slice(None)] * 4
                other[axis] = 0 if step > 0 else 3
                moved[tuple(edge)] = padded[across][tuple(other)]
                solid_nb += moved
        diag1 = 6 - solid_nb
        return xp.where(fluid & (diag1 > 0), diag1, 0).astype(xp.uint8).reshape(-1)

    # ---------------------------------------------------------------- tables for the references
    def neighbours(self):
        """(6, N) int64: each dense cell's face neighbours' dense places, N where none (a reference's
        gather; the kernels compute them)."""
        xp, cap = self.xp, self.capacity
        lx, ly, lz = (xp.asarray(a) for a in _local_std())
        out = xp.full((6, cap, CELLS), self.n, xp.int64)
        slots = xp.arange(cap, dtype=xp.int64)[:, None]
        for d, (ox, oy, oz) in enumerate(_STEPS):
            nx, ny, nz = lx + ox, ly + oy, lz + oz
            inside = (nx >= 0) & (nx < 8) & (ny >= 0) & (ny < 8) & (nz >= 0) & (nz < 8)
            across = self.nbr27[:, 13 + ox + 3 * oy + 9 * oz].astype(xp.int64)[:, None]
            slot = xp.where(inside[None, :], slots, across)
            place = xp.asarray(CS)[((nz & 7) * 8 + (ny & 7)) * 8 + (nx & 7)]
            out[d] = xp.where(slot >= 0, slot * CELLS + place[None, :], self.n)
        # into dense order: row cell of grid-local l is dense place cs[l]
        dense = xp.empty_like(out)
        dense.reshape(6, cap, CELLS)[:, :, self.cs] = out
        return dense.reshape(6, -1)

    def _coarse_place(self, slot, cx, cy, cz, bound):
        """Dense place of cells (cx, cy, cz) relative to *slot*'s block of *bound* per axis, through
        nbr27 (−1 … bound), or None-marker (−1) where the brick is missing."""
        xp = self.xp
        bx, by, bz = (xp.where(c < 0, -1, xp.where(c >= bound, 1, 0)) for c in (cx, cy, cz))
        s = self.nbr27[slot, 13 + bx + 3 * by + 9 * bz].astype(xp.int64)
        return s, cx - bx * bound, cy - by * bound, cz - bz * bound

    def restrict_rows(self):
        """(64, capacity·64) int64: per level-1 cell the dense places of fine cells 2I − 1 … 2I + 2
        per axis (row (iz·4 + iy)·4 + ix), N where none."""
        xp, cap = self.xp, self.capacity
        e = xp.arange(cap * COARSE, dtype=xp.int64)
        slot, c = e // COARSE, e % COARSE
        cx, cy, cz = c & 3, (c >> 2) & 3, c >> 4
        rows = []
        for iz in range(4):
            for iy in range(4):
                for ix in range(4):
                    s, fx, fy, fz = self._coarse_place(slot, 2 * cx - 1 + ix, 2 * cy - 1 + iy, 2 * cz - 1 + iz, 8)
                    place = xp.asarray(CS)[(fz * 8 + fy) * 8 + fx]
                    rows.append(xp.where(s >= 0, s * CELLS + place, self.n))
        return xp.stack(rows)

    def prolong_rows(self):
        """(8, N) int64: per dense fine cell its parent and the parent's neighbours on its side (row
        (oz·2 + oy)·2 + ox, ``sparse_multigrid.TableBuilder.prolong``'s), level 1's dense places,
        capacity·64 where none."""
        xp, cap = self.xp, self.capacity
        lx, ly, lz = (xp.asarray(a) for a in _local_std())
        slot = xp.arange(cap, dtype=xp.int64)[:, None]
        rows = []
        for oz in (0, 1):
            for oy in (0, 1):
                for ox in (0, 1):
                    px = (lx >> 1) + ox * ((lx & 1) * 2 - 1)
                    py = (ly >> 1) + oy * ((ly & 1) * 2 - 1)
                    pz = (lz >> 1) + oz * ((lz & 1) * 2 - 1)
                    s, qx, qy, qz = self._coarse_place(slot, px[None, :], py[None, :], pz[None, :], 4)
                    grid_order = xp.where(s >= 0, s * COARSE + (qz * 4 + qy) * 4 + qx, cap * COARSE)
                    dense = xp.empty_like(grid_order)
                    dense[:, self.cs] = grid_order
                    rows.append(dense.reshape(-1))
        return xp.stack(rows)


# -------------------------------------------------------------------- references (xp, dense arrays)
def _padded(xp, v):
    return xp.concatenate([v, xp.zeros(1, v.dtype)])


def neighbour_sum(xp, nb, v, at=slice(None)):
    """Σ v over the six neighbours (−x, +x, −y, +y, −z, +z, added in that order) of cells *at*."""
    vp = _padded(xp, v)
    s = vp[nb[0, at]]
    for d in range(1, 6):
        s = s + vp[nb[d, at]]
    return s


def reference_sweep(system, nb, x, b, colour, first=False):
    """One colour of the over-relaxed sweep in place on the dense x (``sparse_multigrid.sweep``; the
    unknowns alone; *first*: x taken as 0 before it, the black values it reads too for red)."""
    xp = system.xp
    cap = system.capacity
    at = (xp.arange(cap, dtype=xp.int64)[:, None] * CELLS + colour * HALF + xp.arange(HALF)[None, :]).ravel()
    dg = system.diag[at]
    on = dg > 0
    if first and colour == 0:
        s = xp.zeros(at.shape, xp.float32)
    else:
        s = neighbour_sum(xp, nb, x, at)
    old = xp.zeros(at.shape, xp.float32) if first else x[at]
    g = (b[at] + s) / xp.where(on, dg, 1).astype(xp.float32)
    new = old + _F32(MG_OMEGA) * (g - old) if MG_OMEGA != 1.0 else g
    x[at] = xp.where(on, new, x[at])
    return x


def reference_residual(system, nb, x, b):
    xp = system.xp
    dg = system.diag.astype(xp.float32)
    r = b - (dg * x - neighbour_sum(xp, nb, x))
    return xp.where(system.diag > 0, r, _F32(0)).astype(xp.float32)


def reference_apply(system, nb, p):
    """(q, p·q): q = diag·p − Σ on the unknowns (0 elsewhere), the dot in float64."""
    xp = system.xp
    dg = system.diag.astype(xp.float32)
    q = xp.where(system.diag > 0, dg * p - neighbour_sum(xp, nb, p), _F32(0)).astype(xp.float32)
    return q, float((p.astype(xp.float64) * q.astype(xp.float64)).sum())


def reference_restrict(system, rows, r):
    """Level 1's dense b: ½·the separable (¼, ¾, ¾, ¼)³ sum of *r* (x, then y, then z, each 4 terms in
    order: db_restrict's), 0 off level 1's unknowns."""
    xp = system.xp
    v = _padded(xp, r)[rows].reshape(4, 4, 4, -1)  # (iz, iy, ix, cell)
    w = [xp.float32(a) for a in _AXIS]
    t1 = w[0] * v[:, :, 0]
    for a in range(1, 4):
        t1 = t1 + w[a] * v[:, :, a]
    t2 = w[0] * t1[:, 0]
    for a in range(1, 4):
        t2 = t2 + w[a] * t1[:, a]
    t3 = w[0] * t2[0]
    for a in range(1, 4):
        t3 = t3 + w[a] * t2[a]
    return xp.where(system.diag1 > 0, _F32(0.5) * t3, _F32(0)).astype(xp.float32)


def reference_prolong(system, rows, x, x1):
    """x + P x₁ on the unknowns (the 8 rows in order, ``sparse_multigrid.gather_sum``'s sum)."""
    xp = system.xp
    add = sparse_multigrid.gather_sum(_padded(xp, x1), rows, [xp.float32(w) for w in PROLONG_WEIGHTS])
    return xp.where(system.diag > 0, x + add, x).astype(xp.float32)


# -------------------------------------------------------------------- today's operations (compact)
def today_level1(grid, kind, level0):
    """(level 1, its keys' lattice (i, j, k), down[0], up[0]) as ``sparse_multigrid.VCycle`` builds them
    (``TableBuilder`` on the grid's xp)."""
    xp = grid.xp
    build = sparse_multigrid.TableBuilder(xp)
    cells = sparse_multigrid._level0_cells(grid, kind, level0, xp)
    keys = sparse_multigrid._pack(*level0.lattice, cells.base)
    coarse_cells = build.coarser(cells)
    coarse = build.level(coarse_cells)
    up = build.prolong(keys, cells.base, coarse_cells, coarse.m)
    down = build.restrict(coarse.keys, coarse_cells.base, cells, level0.m)
    return coarse, sparse_multigrid._unpack(coarse.keys, coarse_cells.base), down, up


def level1_places(grid, lattice):
    """Dense level-1 places (slot·64 + local) of level-1 cells at *lattice* (i, j, k) (−1: no brick)."""
    xp = grid.xp
    i, j, k = lattice
    slot = grid.slots_of_bricks(xp.stack([i >> 2, j >> 2, k >> 2], axis=1)).astype(xp.int64)
    return xp.where(slot >= 0, slot * COARSE + ((k & 3) * 4 + (j & 3)) * 4 + (i & 3), -1)


# -------------------------------------------------------------------- the kernels (CuPy)
class Kernels:
    """``_dense_bricks.cu`` compiled for *system* (CuPy arrays): a launcher per pass, a block a brick."""

    def __init__(self, system):
        import cupy as cp

        self.cp, self.s = cp, system
        omega = float(_F32(MG_OMEGA))
        self.module = cp.RawModule(code=Path(__file__).with_suffix(".cu").read_text(),
                                   options=("--fmad=false", f"-DMG_OMEGA={omega!r}f"))
        self.k = {name: self.module.get_function(name) for name in
                  ("db_sweep", "db_residual", "db_apply_dot", "db_sum_partials", "db_restrict", "db_prolong")}
        self.blocks = int(system.bricks.shape[0])
        self.partials = cp.zeros(max(self.blocks, 1), cp.float64)
        self.dot = cp.zeros(1, cp.float64)

    def _go(self, name, *args):
        if self.blocks:
            self.k[name]((self.blocks,), (HALF,), args)

    def sweep(self, x, b, colour, first=False):
        s = self.s
        self._go("db_sweep", x, b, s.diag, s.nbr27, s.bricks, np.int32(colour), np.int32(first))

    def residual(self, x, b, r):
        s = self.s
        self._go("db_residual", x, b, s.diag, s.nbr27, s.bricks, r)

    def apply_dot(self, p, q, finish=True):
        s = self.s
        self._go("db_apply_dot", p, q, s.diag, s.nbr27, s.bricks, self.partials)
        if finish:
            self.sum_partials()

    def sum_partials(self):
        self.k["db_sum_partials"]((1,), (HALF,), (self.partials, np.int32(self.blocks), self.dot))

    def restrict(self, r, b1):
        s = self.s
        self._go("db_restrict", r, s.diag1, s.nbr27, s.bricks, b1)

    def prolong(self, x1, x):
        s = self.s
        self._go("db_prolong", x1, s.diag, s.nbr27, s.bricks, x)

    def level0_vcycle(self, x, b, r, b1, x1):
        """Level 0's share of a V-cycle (MG_SWEEPS 2): pre-smoothing from x = 0 (red, black twice), the
        residual, the restriction; the prolongation of level 1's x1, post-smoothing (black, red twice)."""
        self.sweep(x, b, 0, True)
        self.sweep(x, b, 1, True)
        self.sweep(x, b, 0)
        self.sweep(x, b, 1)
        self.residual(x, b, r)
        self.restrict(r, b1)
        self.prolong(x1, x)
        for _ in range(2):
            self.sweep(x, b, 1)
            self.sweep(x, b, 0)
