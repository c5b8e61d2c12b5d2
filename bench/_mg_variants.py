"""Variants of the sparse multigrid V-cycle (issue 24, helper i24m), NumPy only, bench code (not
the product: moved out of kernels/flip; it needs the checkout importable as ``voxfx``): what
``bench/flip_mg_iterations.py`` counts CG iterations of on the dam break's own pressure
systems, to find a stronger preconditioner at the same cost. ``VariantVCycle(grid, kind,
level0, MGOptions(...))`` is ``sparse_multigrid.VCycle`` with the options' changes; with
the defaults it gives the same z bit for bit (its passes are the reference's).

Measured (bench/RESULTS.md paragraph of i24m; this 2-core CPU, dam break at 64³ and 128³,
the 8M scene's particles per cell): only the over-relaxation is free on the device, and it
alone went into the reference and the kernels (``sparse_multigrid.MG_OMEGA``); boundary
smoothing (McAdams, Sifakis & Teran 2010: extra Gauss-Seidel sweeps on the unknowns next to
the boundary before and after the interior ones) cuts iterations too but costs launches on
levels 0 and 1 that the saved iterations do not pay for; a better coarsest solve, more
sweeps on the coarse levels, other coarsening rules and other free-surface coefficients on
the coarse levels gave no fewer iterations, or more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from voxfx.kernels.flip.pressure import MG_COARSE_SWEEPS, MG_MIN_SIDE, MG_SWEEPS
from voxfx.kernels.flip import sparse_multigrid_bricks
from voxfx.kernels.flip.sparse_multigrid_bricks import brick_inside, post_smooth, pre_smooth
from voxfx.kernels.flip.sparse_multigrid import (MG_OMEGA, PROLONG_WEIGHTS, RESTRICT_WEIGHTS, TableBuilder, VCycle,
                                                 _level0_cells, _unpack, dense_solve, gather_sum, sweep)

_F32 = np.float32


@dataclass(frozen=True)
class MGOptions:
    """Variants of the V-cycle (issue 24, i24m: ``bench/flip_mg_iterations.py`` counts the
    CG iterations each takes; the defaults are today's V-cycle). All keep it a symmetric
    positive definite operator, as CG needs.

    ``omega``: over-relaxation of every smoothing sweep above the coarsest level,
    x_c ← x_c + ω·((b_c + Σ x_n)/diag_c − x_c) (``MG_OMEGA``; 1: plain Gauss-Seidel).
    ``boundary_sweeps``, ``boundary_width``, ``boundary_levels``, ``boundary_air``: boundary
    smoothing (McAdams, Sifakis & Teran 2010): that many extra red-black sweeps over the
    unknowns within ``boundary_width`` cells of a non-unknown neighbour (``boundary_air``:
    of an AIR neighbour only) before pre-smoothing and after post-smoothing (in the adjoint
    order), on levels ``boundary_from`` ≤ l < ``boundary_levels`` (−1: all but the coarsest).
    ``coarse_sweeps``: the coarsest level's sweeps each way; ``coarse_exact``: solve it
    exactly instead (pseudo-inverse; the measure of what a better coarsest solve can give).
    ``coarsen_fluid``: a coarse cell is FLUID when at least this many of its 8 children are
    FLUID even where others are AIR (9: never, today's rule — AIR if any child is AIR).
    ``correction``: the coarse-grid correction scaled by this factor (the restriction's ½
    becomes ½·correction). ``sweeps``, ``min_side``: ``MG_SWEEPS``, ``MG_MIN_SIDE``;
    ``coarse_level_sweeps`` (0: ``sweeps``): the sweeps on levels ≥ ``coarse_from`` but the
    coarsest (at 8M levels ≥ 2 run in the one tail launch: extra passes there add no launch).
    ``poly`` (issue 24, h20b): "" (today's red-black Gauss-Seidel) or, on levels below
    ``poly_levels``, a smoother of one pass over all unknowns a step (one launch, no colours):
    "jacobi", ``poly_degree`` damped Jacobi steps x ← x + ω D⁻¹(b − A x) (ω ``jacobi_omega``), or
    "cheb", the Chebyshev polynomial of degree ``poly_degree`` in D⁻¹A on [λ/``poly_ratio``, λ],
    λ 1.1 × the largest eigenvalue of D⁻¹A by 15 power iterations at the build (Adams, Brezina, Hu
    & Tuminaro 2003); the same polynomial before and after (M stays symmetric).
    ``keep_lag``, ``keep_every``, ``keep_from`` (issue 24, h19c; ``bench/_mg_kept.py``, read by
    ``bench/flip_mg_iterations.py`` alone): levels ≥ ``keep_from`` (1, 2 or 3) from the hierarchy of
    ``keep_lag`` substeps earlier, or of the last substep s with s % ``keep_every`` = 0 (rebuilt
    every ``keep_every`` substeps, held in between); 0: built fresh.

    ``smoother``: "rb" or "brick" — level 0 smoothed brick by brick (the grid's 8³
    bricks, h19a): inside a brick the same red-black sweeps, the neighbours in other bricks
    held at their values at the smoothing's start (0 before the coarse correction); after it
    in the adjoint order; by default the product's (``sparse_multigrid_bricks.smoother()`` when
    the options are made: "brick" since h20d). ``brick_sweeps`` (0: the product's,
    ``sparse_multigrid_bricks.SWEEPS``, 3; before h20d 0 meant ``sweeps``): the sweeps inside a brick.

    ``level1`` (issue 24, h20i: ``Level1Blocks``): level 1's smoother — "rb" (today's red-black
    sweeps, ``sweeps`` of them), "block4" (block Gauss-Seidel over each pool slot's 4³ block of level 1,
    the device's slot · 64 + place: the halo frozen, as level 0's bricks), "block8" (over 8³ blocks, the
    2×2×2 slots of an aligned group of bricks), "block4rb" (the 4³ blocks in two block colours by the
    parity of the brick's coordinates: the red blocks, then the black ones reading the red ones' new
    values; after the correction black, then red) or "none" (no smoothing on level 1: the floor);
    ``level1_sweeps`` red-black sweeps inside a block. Measured (h20i, this 2-core CPU, bench/RESULTS.md):
    up to 128³ block8 with 2 sweeps keeps the red-black CG counts, block4 needs 3-4 and loses 1-2%; on the 8M
    scene (256³) every block variant takes +0.33-0.71 iterations a substep (block8 3 sweeps +0.33 / +0.43 at Δt
    1/60 / 1/120) for 4 launches fewer an iteration (block4rb 2); "none" +26%.

    ``brick_boundary`` (issue 24, helper s23a; ``BrickBoundary``): with the brick
    smoother, that many red-black sweeps over level 0's unknowns within ``brick_boundary_width`` of a
    non-unknown neighbour, inside each brick (the halo frozen as the brick's sweeps have it), after the
    brick's pre-smoothing sweeps and before its post-smoothing ones (``brick_boundary_first``: before the
    pre-smoothing's, from 0, and after the post-smoothing's), over-relaxed by ``brick_boundary_omega`` (0:
    ``omega``). On the device they would cost no launch (the brick kernels' shared memory); not built: on
    the dam break they save too few iterations (128³ −2.4%, 256³ −3.2%; bench/RESULTS.md, s23a)."""

    omega: float = MG_OMEGA
    boundary_sweeps: int = 0
    boundary_width: int = 1
    boundary_levels: int = -1
    boundary_air: bool = False
    boundary_from: int = 0
    coarse_sweeps: int = MG_COARSE_SWEEPS
    coarse_exact: bool = False
    coarsen_fluid: int = 9
    correction: float = 1.0
    sweeps: int = MG_SWEEPS
    min_side: int = MG_MIN_SIDE
    coarse_level_sweeps: int = 0
    coarse_from: int = 2
    surface: str = "centre"
    keep_lag: int = 0
    keep_every: int = 0
    keep_from: int = 1
    smoother: str = field(default_factory=lambda: sparse_multigrid_bricks.smoother())
    brick_sweeps: int = 0
    poly: str = ""
    poly_degree: int = 2
    poly_ratio: float = 4.0
    jacobi_omega: float = 0.8
    poly_levels: int = 1
    level1: str = "rb"
    level1_sweeps: int = 2
    brick_boundary: int = 0
    brick_boundary_width: int = 1
    brick_boundary_first: bool = False
    brick_boundary_omega: float = 0.0


def sweep_some(level, x, b, cells):
    """Gauss-Seidel on the unknowns *cells* (all of one colour) alone."""
    if cells.shape[0] == 0:
        return
    nbr = level.nbr[:, cells]
    s = x[nbr[0]]
    for d in range(1, 6):
        s = s + x[nbr[d]]
    x[cells] = (b[cells] + s) / level.diag[cells]


def _layer_rows(d):
    """The restriction table's rows (``down``) of the fine cells in the first layer of
    the coarse neighbour in direction *d* (−x, +x, −y, +y, −z, +z): offset −1 or 2 along
    its axis, 0 or 1 (rows 1, 2) along the other two."""
    axis, side = d // 2, (0 if d % 2 == 0 else 3)
    rows = []
    for a in (1, 2):
        for b_ in (1, 2):
            idx = [0, 0, 0]
            idx[axis] = side
            others = [k for k in range(3) if k != axis]
            idx[others[0]], idx[others[1]] = a, b_
            rows.append((idx[2] * 4 + idx[1]) * 4 + idx[0])
    return rows


def surface_diag(level, down, m_fine, mode):
    """A coarse level's diagonal with its free surface placed where the finer level has
    it (issue 24, i24m): per AIR neighbour N of a coarse unknown, the coefficient 1/θ of
    the Dirichlet condition at distance θ (coarse cells) instead of 1 (at N's centre):
    θ = 0.75 where the fine cell of N's first layer next to it is not a fine unknown (the
    fine surface at that cell's centre), 1.25 where it is one, averaged over N's four
    first-layer cells as 1/θ (the flux's mean). Which sentinel neighbours are AIR and which
    SOLID: a neighbour with a fine unknown in that layer is AIR (a SOLID coarse cell has no
    FLUID child); the others share the remaining AIR count (diag − unknown neighbours) at
    the coefficient of an empty layer, 1/0.75."""
    m = level.m
    nbr = level.nbr[:, :m]
    diag = level.diag[:m].astype(np.float64)
    unknown_nbrs = (nbr < m).sum(axis=0)
    air = diag - unknown_nbrs  # AIR neighbours (pinned cells count as AIR)
    far, near = 1.0 / 1.25, 1.0 / 0.75
    total = unknown_nbrs.astype(np.float64)
    seen_air = np.zeros(m)
    for d in range(6):
        sentinel = nbr[d] == m
        k = sum((down[row, :m] < m_fine).astype(np.float64) for row in _layer_rows(d))
        partial = sentinel & (k > 0)
        total += np.where(partial, (k * far + (4 - k) * near) / 4, 0.0)
        seen_air += partial
    total += np.maximum(air - seen_air, 0) * near
    if mode != "layer":  # "scale:c": every AIR neighbour's coefficient c (the bench's checks)
        total = unknown_nbrs + air * float(mode.split(":")[1])
    return np.concatenate([total.astype(np.float32), np.ones(1, np.float32)])


def boundary_unknowns(level, width, air_only=False):
    """Sorted unknowns within *width* cells (through unknowns) of a neighbour that is not
    an unknown (*air_only*: of an AIR one: diag counts more non-SOLID neighbours than the
    unknowns it has)."""
    m = level.m
    nbr = level.nbr[:, :m]
    outside = (nbr == m).sum(axis=0)
    if air_only:
        seed = level.diag[:m] > (6 - outside)
    else:
        seed = outside > 0
    near = np.concatenate([seed, [False]])
    for _ in range(width - 1):
        grown = near[:m].copy()
        for d in range(6):
            grown |= near[nbr[d]]
        near = np.concatenate([grown, [False]])
    return np.flatnonzero(near[:m])


class BrickBoundary:
    """Boundary smoothing inside level 0's bricks (issue 24, helper s23a; ``MGOptions.brick_boundary``;
    McAdams, Sifakis & Teran 2010's extra Gauss-Seidel sweeps on the unknowns next to the boundary):
    *sweeps* × (red, black) over the unknowns within *width* of a non-unknown neighbour
    (``boundary_unknowns``: through unknowns, across bricks), run by ``sparse_multigrid_bricks.pre_smooth``
    / ``post_smooth`` inside each brick with the halo frozen as the brick's own sweeps have it,
    over-relaxed by *omega*. By default after the brick's pre-smoothing sweeps and (the adjoint: black,
    red) before its post-smoothing ones; *first*: before the pre-smoothing's sweeps (from x = 0) and after
    the post-smoothing's. A colour's sweep restricted to some of its unknowns is still one symmetric step,
    so the post-smoothing stays the pre-smoothing's adjoint and the V-cycle symmetric (tests: the forward
    post order breaks it)."""

    post = (1, 0)  # the post-smoothing's boundary colours; a test's mutant sets the forward order

    def __init__(self, level, sweeps, width, omega, first=False):
        self.sweeps, self.omega, self.first = int(sweeps), omega, bool(first)
        cells = boundary_unknowns(level, width)
        self.cells = (cells[cells < level.m_red], cells[cells >= level.m_red])

    def sweep(self, level, index, v, b, colours):
        """``sweeps`` × *colours* over the boundary unknowns (``brick_sweep``'s rule on a subset; *index*
        each neighbour's place in *v*, x then the halo)."""
        for _ in range(self.sweeps):
            for colour in colours:
                c = self.cells[colour]
                if c.shape[0] == 0:
                    continue
                at = index[:, c]
                s = v[at[0]]
                for d in range(1, 6):
                    s = s + v[at[d]]
                g = (b[c] + s) / level.diag[c]
                v[c] = g if self.omega == 1.0 else v[c] + _F32(self.omega) * (g - v[c])


class Level1Blocks:
    """Level 1 smoothed block by block (issue 24, h20i; ``MGOptions.level1``): block Gauss-Seidel over
    blocks of level 1's unknowns, the same over-relaxed red-black sweeps inside a block as
    ``sparse_multigrid_bricks`` runs in level 0's bricks, the halo (the neighbours in other blocks) held
    at its value at the pass's start (0 for the pre-smoothing's first pass), the post-smoothing the
    pre-smoothing's adjoint (blocks' passes in reverse order, black then red inside): the V-cycle stays
    symmetric. Level 1's unknown at coarse cell (I, J, K) (absolute: I = i >> 1 of level 0's lattice,
    whose bricks start at multiples of 8) lies in the pool slot of brick (I >> 2, J >> 2, K >> 2) — the
    device's level-1 numbering slot · 64 + place in the slot's 4³ block — so "block4"'s blocks are the
    slots' 4³ blocks and "block8"'s the aligned 2×2×2 groups of bricks (I >> 3, …): a partition, every
    unknown in exactly one block. "block4rb": the 4³ blocks coloured by the parity of (I >> 2) + (J >> 2)
    + (K >> 2) (face neighbours' blocks differ in it), two passes a smoothing."""

    # the post-smoothing's colours inside a block and its passes' order (the adjoint's; a test's mutants:
    # (0, 1), 1)
    _post, _post_step = (1, 0), -1

    def __init__(self, grid, kind, level0, level1, way, coarsen_fluid=9):
        build = TableBuilder(np, coarsen_fluid)
        coarse_cells = build.coarser(_level0_cells(grid, kind, level0, np))
        again = build.level(coarse_cells)  # level 1 once more, its keys kept (VCycle drops them)
        if again.m != level1.m or not np.array_equal(again.nbr, level1.nbr):
            raise ValueError("level 1 rebuilt differs from the V-cycle's")
        self.level = level1
        m = level1.m
        i, j, k = _unpack(again.keys, coarse_cells.base)
        shift = 3 if way == "block8" else 2
        bi, bj, bk = i >> shift, j >> shift, k >> shift
        _, block = np.unique(np.stack([bi, bj, bk], axis=1), axis=0, return_inverse=True)
        self.block = np.concatenate([block.ravel(), [-1]])  # the sentinel in none
        nbr = level1.nbr[:, :m]
        self.inside = (self.block[nbr] == self.block[None, :m]) & (nbr < m)
        if way == "block4rb":
            red_block = ((bi + bj + bk) & 1) == 0
            self.passes = [np.flatnonzero(red_block), np.flatnonzero(~red_block)]
        elif way in ("block4", "block8"):
            self.passes = [np.arange(m)]
        else:
            raise ValueError(f"level1 must be rb, none, block4, block8 or block4rb, not {way!r}")
        colour = np.arange(m) >= level1.m_red
        self.cells = [(p[~colour[p]], p[colour[p]]) for p in self.passes]  # per pass: its red, its black
        self.index = np.where(self.inside, nbr, nbr + m + 1)  # a neighbour's place in [x, halo]

    def _pass(self, v, b, cells, omega, sweeps, colours):
        L = self.level
        for _ in range(sweeps):
            for colour in colours:
                c = cells[colour]
                if c.size == 0:
                    continue
                at = self.index[:, c]
                s = v[at[0]]
                for d in range(1, 6):
                    s = s + v[at[d]]
                g = (b[c] + s) / L.diag[c]
                v[c] = g if omega == 1.0 else v[c] + _F32(omega) * (g - v[c])

    def pre(self, b, omega, sweeps):
        """x from 0: each pass (block colour) in turn, its halo x at the pass's start, red, black inside."""
        n = b.shape[0]
        v = np.zeros(2 * n, b.dtype)
        for cells in self.cells:
            v[n:] = v[:n]
            self._pass(v, b, cells, omega, sweeps, (0, 1))
        return v[:n].copy()

    def post(self, x, b, omega, sweeps):
        """*x* in place: the passes in reverse order, black, red inside (the adjoint of ``pre``)."""
        n = x.shape[0]
        v = np.concatenate([x, x])
        for cells in self.cells[::self._post_step]:
            v[n:] = v[:n]
            self._pass(v, b, cells, omega, sweeps, self._post)
        x[...] = v[:n]
        return x


class VariantVCycle(VCycle):
    """``VCycle`` with *options* (``MGOptions``) on NumPy."""

    def __init__(self, grid, kind, level0, options=None):
        if grid.xp is not np:
            raise ValueError("the multigrid variants run on NumPy only")
        self.options = options = options or MGOptions()
        if options.smoother == "brick" and options.boundary_sweeps and options.boundary_from == 0:
            # the brick pre-smoothing starts from 0: level 0's boundary sweeps before it would be lost
            raise ValueError("boundary smoothing on level 0 is a red-black variant: add smoother=rb")
        super().__init__(grid, kind, level0, options.coarsen_fluid, options.min_side)
        if level0.m == 0:
            return
        if options.surface != "centre":
            for lv in range(1, len(self.levels)):
                self.levels[lv].diag = surface_diag(self.levels[lv], self.down[lv - 1], self.levels[lv - 1].m,
                                                    options.surface)
        self._variant_tables(options)
        self._level1 = None
        if options.level1 not in ("rb", "none") and options.boundary_sweeps and options.boundary_from <= 1 \
                and (options.boundary_levels < 0 or options.boundary_levels > 1):
            raise ValueError("boundary smoothing on level 1 is a red-black variant: add level1=rb")
        if options.level1 not in ("rb", "none") and len(self.levels) > 2:
            self._level1 = Level1Blocks(grid, kind, level0, self.levels[1], options.level1,
                                                   options.coarsen_fluid)
        self.lam = [self._largest(L) if options.poly == "cheb" and lv < options.poly_levels else 0.0
                    for lv, L in enumerate(self.levels)]

    @staticmethod
    def _largest(L, steps=15):
        """1.1 × the largest eigenvalue of D⁻¹A on level *L* (power iterations from a fixed start)."""
        v = np.random.default_rng(1).standard_normal(L.m + 1).astype(np.float32)
        v[L.m] = 0
        lam = 0.0
        for _ in range(steps):
            w = L.apply(v) / L.diag
            w[L.m] = 0
            lam = float(np.dot(v.astype(np.float64), w) / np.dot(v.astype(np.float64), v))
            v = (w / np.sqrt(np.dot(w.astype(np.float64), w))).astype(np.float32)
        return 1.1 * lam

    def _poly(self, level, x, b):
        """``poly_degree`` steps of the level's polynomial smoother (class notes) on x (in place)."""
        o, L = self.options, self.levels[level]
        m = L.m
        inv = _F32(1) / L.diag
        if o.poly == "jacobi":
            for _ in range(o.poly_degree):
                r = b - L.apply(x)
                x[:m] = (x + _F32(o.jacobi_omega) * inv * r)[:m]
            return
        lam = self.lam[level]
        lo = lam / o.poly_ratio
        theta, delta = (lam + lo) / 2, (lam - lo) / 2
        sigma = theta / delta
        rho = 1 / sigma
        r = b - L.apply(x)
        d = (inv * r / _F32(theta)).astype(np.float32)
        x[:m] = (x + d)[:m]
        for _ in range(o.poly_degree - 1):
            r = b - L.apply(x)
            rho_new = 1 / (2 * sigma - rho)
            d = (_F32(rho_new * rho) * d + _F32(2 * rho_new / delta) * inv * r).astype(np.float32)
            x[:m] = (x + d)[:m]
            rho = rho_new

    def _variant_tables(self, options):
        """The boundary unknowns per colour (boundary smoothing) and the coarsest level's
        pseudo-inverse (``coarse_exact``)."""
        last = len(self.levels) - 1
        self.boundary = []
        for lv, L in enumerate(self.levels):
            on = (options.boundary_sweeps > 0 and options.boundary_from <= lv < last
                  and (options.boundary_levels < 0 or lv < options.boundary_levels))
            cells = boundary_unknowns(L, options.boundary_width, options.boundary_air) if on else np.zeros(0, int)
            self.boundary.append((cells[cells < L.m_red], cells[cells >= L.m_red]))
        self.coarse_inverse = None
        if options.coarse_exact:
            C = self.levels[last]
            A = np.diag(C.diag[:C.m].astype(np.float64))
            for d in range(6):
                at = C.nbr[d, :C.m]
                ok = at < C.m
                A[np.flatnonzero(ok), at[ok]] -= 1.0
            self.coarse_inverse = np.linalg.pinv(A)

    def _smooth(self, level, x, b, sweeps, after):
        """*level*'s smoothing of x before the coarse correction (from x = 0) or *after* it (the
        adjoint): level 1's blocks (``level1``), level 0's bricks (``smoother``), the polynomial
        (``poly``) or *sweeps* red-black sweeps (0 on level 1 with ``level1`` "none")."""
        o, L = self.options, self.levels[level]
        blocks = getattr(self, "_level1", None)  # KeptVCycle (bench/_mg_kept.py) builds none
        if level == 1 and blocks is not None:
            return blocks.post(x, b, o.omega, o.level1_sweeps) if after else \
                blocks.pre(b, o.omega, o.level1_sweeps)
        if o.smoother == "brick" and level == 0:
            if getattr(self, "_variant_inside", None) is None:
                self._variant_inside = brick_inside(L)
                self._brick_boundary = BrickBoundary(L, o.brick_boundary, o.brick_boundary_width,
                                                     o.brick_boundary_omega or o.omega,
                                                     o.brick_boundary_first) if o.brick_boundary else None
            k = o.brick_sweeps or sparse_multigrid_bricks.SWEEPS
            edge = self._brick_boundary
            return post_smooth(L, self._variant_inside, x, b, o.omega, k, boundary=edge) if after else \
                pre_smooth(L, self._variant_inside, b, o.omega, k, boundary=edge)
        if o.poly != "" and level < o.poly_levels:
            self._poly(level, x, b)
            return x
        for _ in range(0 if level == 1 and o.level1 == "none" else sweeps):
            for colour in ((1, 0) if after else (0, 1)):
                sweep(L, x, b, colour, o.omega)
        return x

    def _cycle(self, b, level):
        """``VCycle._cycle`` with ``self.options`` (``MGOptions``): the same passes, in the
        same palindromic order, plus the variant's."""
        o = self.options
        L = self.levels[level]
        x = np.zeros_like(b)
        if level == len(self.levels) - 1:
            if self.dense_mode and self.coarse_inverse is None:  # MG_DENSE (today's default "2")
                return dense_solve(self.dense, b)
            if self.coarse_inverse is not None:
                x[:L.m] = (self.coarse_inverse @ b[:L.m].astype(np.float64)).astype(np.float32)
                return x
            for _ in range(o.coarse_sweeps):
                sweep(L, x, b, 0)
                sweep(L, x, b, 1)
            for _ in range(o.coarse_sweeps):
                sweep(L, x, b, 1)
                sweep(L, x, b, 0)
            return x
        red, black = self.boundary[level]
        sweeps = o.coarse_level_sweeps if o.coarse_level_sweeps and level >= o.coarse_from else o.sweeps
        for _ in range(o.boundary_sweeps if red.shape[0] + black.shape[0] else 0):  # boundary: red, black
            sweep_some(L, x, b, red)
            sweep_some(L, x, b, black)
        x = self._smooth(level, x, b, sweeps, False)
        r = b - L.apply(x)
        bc = _F32(0.5 * o.correction) * gather_sum(r, self.down[level], RESTRICT_WEIGHTS)
        xc = self._cycle(bc, level + 1)
        x = x + gather_sum(xc, self.up[level], PROLONG_WEIGHTS)
        x = self._smooth(level, x, b, sweeps, True)
        for _ in range(o.boundary_sweeps if red.shape[0] + black.shape[0] else 0):  # boundary: black, red
            sweep_some(L, x, b, black)
            sweep_some(L, x, b, red)
        return x
