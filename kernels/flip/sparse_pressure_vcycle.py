"""The multigrid V-cycle's launches of the sparse PCG (``sparse_pressure_gpu``'s solver
derives from ``VCycleLaunches``; kernels of ``cuda/flip_sparse_pressure_vcycle.cu``): the
sequence of ``sparse_multigrid.VCycle._cycle`` launch by launch ("split") or fused, the
coarse levels in one block (``mg_tail_vcycle``) or, above them, one cluster
(``mg_tail_cluster``; their launch: ``sparse_pressure_vcycle_tail``). Moved out of
``sparse_pressure_gpu.py`` (issue 24: under 500 lines); the switches (``VCYCLE``,
``TAIL_UNKNOWNS``, ``CLUSTER_UNKNOWNS``, ``FIRST2_UNKNOWNS``, ``TAIL_SHARED``, ``COLOUR_GRID``)
stay there, the solver passes their values in. The solver
provides ``levels`` (``_Buffers``), ``sizes``, ``state``, ``partials``, ``red_blocks``, ``r``,
``z``, ``tail``, ``cluster_from``, ``first2``, ``tail_shared``, ``colour_grid`` and the launchers
``_launch`` (a grid-stride launch over n), ``_reduce`` (the reduction grid) and ``_one`` (an
explicit grid and block, and dynamic shared memory). Level 0's brick smoothing (its settings
``SMOOTH_THREADS``, ``SMOOTH_GRID`` and its launches, ``BrickSmoothLaunches``) is
``sparse_pressure_brick_smooth``'s: moved out of here in session 21 (helper h21b; this file had
grown to 584 lines), no launch changed.

Fewer launches an iteration (issue 24; a level launched one by one takes 4·MG_SWEEPS + 2).
Two fusions that need no grid-wide barrier and recompute little: ``CLUSTER_UNKNOWNS`` (on by
default on compute capability 9.0 and later: measured faster, below) takes whole levels
above the one-block tail into the tail's launch, one cluster of blocks with the cluster's
hardware barrier between passes (no unknown computed twice); ``FIRST2_UNKNOWNS`` starts pre-
smoothing with the first sweep and the second's red pass in one launch (it reads b alone:
each red unknown recomputes its six black neighbours' first-sweep values). Not the per-cell
folds measured slower before (RESULTS: i24h's residual + restriction per coarse cell, 32
residuals serial in a thread; prolongation + first post-smoothing sweep; i24f's PCG fusion):
a residual needs its neighbours' smoothed
values, a restriction 64 residuals, so without a barrier each fold recomputes those.

Measured (H200, 8M dam break, 4 variants alternating in one process, the same pressure to
the bit and the same CG iterations): an iteration's kernels 0.510 ms in 36 launches; with the
cluster (levels up to 65536 unknowns) 0.375 ms in 26, the PCG loop 3.94 → 3.75 ms, the substep
9.93 → 9.27 ms; FIRST2 on every level 0.461 ms in 33 launches but the PCG loop 4.40 ms (slower:
off); both 0.367 ms in 25, the substep 9.38 ms (no gain over the cluster alone).

The coarse levels in one launch (the one-block tail, its shared memory, the cluster above it):
``sparse_pressure_vcycle_tail`` (``TailLaunches``), with what was measured on it.

The transfers between levels 0 and 1 from the grid's bricks (``BRICK_TRANSFERS``, default "1";
issue 24, i24r; ``cuda/flip_sparse_pressure_vcycle_bricks.cu``). mg_restrict into level 1 reads
down[0], 64 rows of level 1's stride (53.6 MB at 8M: 64 × 209,200 × 4 B), and mg_prolong_add onto
level 0 reads up[0], 8 rows over level 0's unknowns (32.4 MB: 8 × 1,012,653 × 4 B), every V-cycle;
mg_restrict_bricks (a thread a level-1 candidate, the pool's slot · 64 + its place in the brick's
4³ block) and mg_prolong_add_bricks (a thread a level-0 unknown, from its flat cell) find the same
indices as the set-up's mgb_restrict and mgb_prolong do — through nbr27, level 0's position and
cells, level 1's map1 and position: ~17 MB, mostly L2-resident — and add the same terms in the
same order (host harness and GPU test: bit for bit). The arrays change with each set-up while
the captured graph keeps its arguments, so they come through ``brick_ptrs``, a device table the
solver rewrites when it fills level 0's tables (``Level0.brick_words``); the solver no longer
fills up[0] (one mgb_prolong a set-up fewer). Measured (H100 80GB HBM3, 8M dam break, strides
1271869, 209200, …; ``bench/flip_sparse_pcg_loop.py`` variants in turn in one process, two
calls): the loop's iteration 252.1 → 245.4 and 252.0 → 245.9 µs (−2.5%), 12 CG iterations, the
pressure bit for bit; kernel by kernel (an event pair a launch, inflated alike) the restriction
34 → 28 µs, the prolongation 29 → 28 µs: 86 MB less read, yet ~6 µs saved, not the table
stream's ~25 µs — the look-ups are a chain of dependent loads (map1, position1, nbr27, position0,
then r) where the tables had two. The solve and the substep's pressure stage move by less than
their noise (solve medians 4.84 → 4.81 and 5.73 → 5.80 ms; pressure a substep 4.98 → 4.73 and
4.47 → 4.65 ms). "shared" (a block a brick: the brick's 10³ fine r or 6³ coarse x gathered into
shared memory once, then every stencil read there) gave 246.2 µs, no faster: kept selectable.

The coarsest level by its dense inverse (``sparse_multigrid.MG_DENSE``, VOXFX_SPARSE_MG_DENSE,
default "2" since the fourteenth session; issue 24, i24p4): the tail's coarsest level took
4·MG_COARSE_SWEEPS = 32 passes; G
(``_dense_inverse``: mg_dense_inverse once a solve, in the start's graph, one block, its scratch in
shared memory) makes it one mat-vec pass, G in the coarsest level's tail-table slot 6 (it has no
down table), mg_restrict_coarse_dense and mg_coarse_dense where no tail. "2" also drops the last
level (the one above it, ≤ 128 unknowns, solved exactly instead: ~11 passes fewer). The same G
and z as sparse_multigrid's NumPy reference bit for bit (host harness; GPU test on the solver's
own tables). Measured (H100 80GB HBM3, driver 580.159.04, 8M dam break, strides 1271869, 209200,
26206, 3332, 472, 115, 71 — the coarsest has ~6 unknowns, the one above ~45;
``bench/flip_sparse_pcg_loop.py`` variants in turn in one process, two calls): the loop's
iteration 250.4 / 250.8 µs (sweeps) → 243.6 / 244.4 ("1") → 236.4 / 237.4 ("2", −5.5%), the tail
kernel 92 / 90 → 86 / 86 → 78 / 82 µs, 12 CG iterations in each; mg_dense_inverse 30–34 µs ("1")
and 47 µs ("2", 59 before its pivot row was divided once a step) a solve (an event pair); the
solve's median 5.68 → 5.67 → 5.57 ms. ``bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab``,
two ways alternating in one simulation: "0" against "2" pressure 5.07 → 4.90 ms, substep 8.03 →
7.91 ms, CG iterations 92 → 90 over the 8 substeps; "0" against "1" 5.62 → 5.47 ms, 8.63 → 8.49
ms, 92 → 90. (Three ways in one --ab are not an A/B: the solver cache holds two, so two of them
rebuild a solver and its graphs every other substep — 6.5, 4.5, 6.4 ms.) The "1" inverse of a
~6-unknown level gives what 8 sweeps converge to (the host harness's tank: z to the bit), so
its gain is the 31 passes alone. Not the default yet: with "2" the GPU tests that pin the level
count or the tail's levels (test_flip_sparse_pressure_vcycle_gpu, _pcg_loop_gpu, the tables
against the CPU's) fail by design and the accuracy files were not run with it. The tail from
level 4 with levels 2 and 3 in the cluster (TAIL_UNKNOWNS 1024, with "2"): 243.7 µs, slower
than the one block's level 3 (237.4): not kept.

Folds of the loop's level-0 passes, measured and not kept (issue 24, i24l4; H100 80GB HBM3,
driver 580.159.04, 8M dam break with MG_DENSE 2, strides 1271869, 209200, 26206, 3332, 472, 115;
``bench/flip_sparse_pcg_loop.py --pace-rounds 2 --floor``, variants in turn in one process, two
calls, the second in another order; the same pressure to the bit and 12 CG iterations each; the
kernels, host harnesses and GPU tests are in the branch's commits 520e496 and 7d24100, reverted
after). The loop's iteration today 236.3 / 235.7 / 235.8 µs in 26 launches; with its kernels
stopped at their first line (the graph's launches alone, every grid still dispatched) 50.5 µs:
launches are a fifth of an iteration, the kernels' bytes and latencies the rest, so a fold pays
only where the fused kernel costs no more than the two it replaces. None did:
update_direction folded into the next iteration (apply_laplacian_direction computing d' = z + βd
at each unknown and its six neighbours, update_solution_direction writing it: 25 launches)
249.2 / 248.9 µs; level 0's red residuals folded into the restriction (a block a brick, the
brick's x over −2 … 9 per axis in shared memory) and the first black post-smoothing pass into
the prolongation (the coarse x over −1 … 4, the prolonged red values into level 0's r for the
red pass after it) 248.3 / 248.4 µs (24 launches), the prolongation's fold alone 236.7, both
folds with the direction's 262.1 / 260.8. The block-a-brick kernels chain their gathers (nbr27,
position0, then the value) through two or three barriers a brick, and the direction's fold
doubles the Laplacian's neighbour gathers (z and d): each costs more than a graph launch. (One
sweep on level 0 alone, levels ≥ 1 two: +35% / +40% CG iterations on the dam break's systems at
64³ / 128³ with ω = 1.3, ``bench/flip_mg_iterations.py``: not tried on the device.) In the same
calls ``COLOUR_GRID`` 2: 232.2 µs against 235.7 / 235.8, its launches alone 39.6 µs (half the
one-colour grids' empty blocks not dispatched): the default now.

Over-relaxed sweeps (``sparse_multigrid.MG_OMEGA``, issue 24, i24m; the kernels compile ω in):
the fused V-cycle then prolongs onto every unknown, not the red ones alone, since the
over-relaxed black sweep after it reads the black values."""

from __future__ import annotations

import numpy as np

from ..settings import env_choice
from .pressure import MG_SWEEPS
from .sparse_multigrid import MG_OMEGA
from .sparse_pressure_brick_smooth import _BRICK_WORDS, BrickSmoothLaunches
from .sparse_pressure_vcycle_tail import _TAIL_THREADS, TailLaunches

# Blocks of mg_tail_cluster's cluster (issue 24, i24k1): "8" (default, the portable limit) or
# "16", a non-portable cluster (H100: up to 16 blocks of a GPC; the kernels compiled with
# TAIL_CLUSTER 16, the attribute that allows it set): the cluster's levels (level 2 at 8M,
# 15,510 unknowns) two unknowns a thread a pass become one. The same passes on the same values:
# z bit for bit (host harness, GPU test). H100, 8M: the loop's iteration 233.2 → 231.5 µs, the
# row's pressure not faster (sparse_pressure_vcycle_tail's notes): not the default. Read when a
# solver is built (``cluster_blocks``); CLUSTER_BLOCKS set (a bench's variant) overrides
# VOXFX_SPARSE_MG_CLUSTER_BLOCKS.
CLUSTER_BLOCKS_CHOICES = ("8", "16")
CLUSTER_BLOCKS = None
# The shared tails' first pre-smoothing sweep in two passes (issue 24, i24k1; the _fold kernels):
# "1" the red unknowns' first-sweep values b/diag written where their b is (the restriction into
# the level, the shared copy-in; a red pass on the cluster's first level), then the black ones
# from x (the default); "0" first_sweep_value, each black unknown recomputing its six red
# neighbours behind ~12 dependent loads (the profile's 6.1 / 5.2 / 4.3 µs first sweeps on levels
# 2 / 3 / 4). The same values bit for bit (host harness; the H100: 230.7 → 220.3 µs an iteration,
# sparse_pressure_vcycle_tail's notes). Read when a solver is built (``tail_fold``); TAIL_FOLD set
# overrides VOXFX_SPARSE_MG_TAIL_FOLD.
TAIL_FOLD = None


def cluster_blocks() -> int:
    """Blocks of the cluster tail's cluster: ``CLUSTER_BLOCKS`` where set, else
    VOXFX_SPARSE_MG_CLUSTER_BLOCKS ("8")."""
    given = None if CLUSTER_BLOCKS is None else str(int(CLUSTER_BLOCKS))
    return int(env_choice("VOXFX_SPARSE_MG_CLUSTER_BLOCKS", CLUSTER_BLOCKS_CHOICES, given, default="8"))


def tail_fold() -> bool:
    """The shared tails' first sweep in two passes: ``TAIL_FOLD`` where set, else
    VOXFX_SPARSE_MG_TAIL_FOLD ("1")."""
    given = None if TAIL_FOLD is None else str(int(TAIL_FOLD))
    return env_choice("VOXFX_SPARSE_MG_TAIL_FOLD", ("0", "1"), given, default="1") == "1"


_COARSE_THREADS = 256


# Level 0's neighbours in the loop's passes (``VOXFX_SPARSE_MG_NBR``, read at each solve by
# sparse_pressure_gpu's solver cache; a value here overrides it): "bricks" (default: each unknown's
# flat cell, its neighbours found from the grid's brick table and level 0's position:
# flip_sparse_pressure_level0.cu's name_nb kernels, NBR_KERNELS; workspace solvers of two levels
# on) or "table" (nbr, six int32 rows an unknown read by each pass). The same indices in the same
# order: the same values bit for bit. Level 0's ~10 passes an iteration read about a third fewer bytes
# (an unknown of a colour pass 24 B of table → 8 B of its cell: ~120 → ~40 MB an iteration at
# 8M), yet the loop gains ~1%: so the table's bytes were not what bounds these passes (likely
# their dependent loads, now cell → position → x where they were nbr → x; not profiled).
# Measured (H100 80GB HBM3, driver 580.159.04, 8M dam break, 1,017,357 fluid cells,
# strides 1271869, 209200, …; i24n1's call): bench/flip_sparse_pcg_loop.py, variants in turn in
# one process, the loop's iteration 232.6 (least 232.1) → 230.6 (230.3) µs, the solve's median
# 4.98 → 4.87 ms, 12 CG iterations, the pressure bit for bit; bench/flip_sparse.py --row 8m
# --steps 8 --warm 2 --ab, the ways alternating in one simulation: pressure 4.79 → 4.63 ms,
# substep 7.48 → 7.29 ms.
NBR = None
NBR_WAYS = ("bricks", "table")
NBR_KERNELS = ("mg_smooth_nb", "mg_smooth_first_nb", "mg_smooth_first2_nb", "mg_smooth_red_dot_nb",
               "mg_smooth_black_residual_nb", "mg_residual_nb", "apply_laplacian_nb", "cg_init_warm_nb")
_BRICK_THREADS = 64  # a block of mg_restrict_bricks_shared: a thread a level-1 candidate of its brick
_BRICK_GRID = 8192
# Keep the level 0 whose arrays the brick transfers read after a solve that keeps no tables
# (a bench replaying the loop graph after the solve: bench/flip_sparse_pcg_loop.py); off, the
# solver lets go of it as of the tables (its ~13 B a pool cell are not held between substeps).
HOLD_BRICK_LEVEL = False


def nbr_choice(given=None) -> str:
    """How level 0's passes find their neighbours (``NBR``)."""
    return env_choice("VOXFX_SPARSE_MG_NBR", NBR_WAYS, given or NBR, default="bricks")


# Level 0's nbr table where its passes find their neighbours from the bricks (``NBR`` "bricks";
# ``VOXFX_SPARSE_MG_NBR_TABLE``, read when a solver is built; a value here overrides it; issue 24,
# i24n2): "skip" (default) — the solver holds no level-0 nbr rows and the set-up writes none
# (Level0.fill and the solve ahead launch unk_diag_strided, the diag alone, instead of
# unk_tables_strided); "fill" — the rows allocated and filled every solve as before, though no
# pass reads them. With NBR "table", or a solver the brick passes do not apply to (no set-up
# workspace, one level, Jacobi), the table is always kept. Nothing else reads level 0's rows
# on the brick path: the loop's and the start graph's level-0 passes are the name_nb kernels, the
# transfers read up / down or the bricks, the tail's pointer table names levels ≥ 1 only, the warm
# start and the sealed regions read the grid's own nbr, the CPU reference its own tables. The
# same kernels on the same values otherwise: the pressure bit for bit. Saves 24 B an entry of
# level 0's stride: H100 80GB HBM3 (driver 580.159.04), bench/flip_sparse.py --row 8m --steps 8
# --warm 2 in separate processes alternating fill / skip (stride 1,271,869): the pool's total
# 945 → 916 MiB in both pairs, the same CG iterations; the times moved in untouched stages too
# (between processes, bench/RESULTS.md), the change's own saving one kernel's 30 MB of writes.
NBR_TABLE = None
NBR_TABLE_WAYS = ("skip", "fill")


def nbr_table_choice(given=None) -> str:
    """Whether a brick-neighbour solver keeps level 0's nbr rows (``NBR_TABLE``)."""
    return env_choice("VOXFX_SPARSE_MG_NBR_TABLE", NBR_TABLE_WAYS, given or NBR_TABLE, default="skip")


def nbr_bricks_apply(nbr, generation, preconditioner, count) -> bool:
    """Whether level 0's passes find their neighbours from the bricks (``VCycleLaunches.nbr_bricks``,
    as ``_brick_setup`` sets it): *nbr* "bricks" on a set-up workspace's solver (*generation*) of the
    multigrid with at least two levels (*count*)."""
    return nbr == "bricks" and generation is not None and preconditioner == "mg" and count >= 2


class VCycleLaunches(BrickSmoothLaunches, TailLaunches):
    """z = V-cycle(r) on the device, launch by launch."""

    dense = None  # the coarsest level's dense inverse G (stride² floats, MG_DENSE) or None: the sweeps
    dense_work = None  # mg_dense_inverse's scratch (global doubles) or np.uint64(0): its shared memory
    dense_shared = 0  # bytes of mg_dense_inverse's dynamic shared memory (0 with a global scratch)

    colour_grid = 1  # one-colour launches over stride / colour_grid threads
    brick_transfers = (False, False)  # (restriction into level 1, prolongation onto level 0) by bricks
    brick_suffix = "_bricks"  # their kernels: a thread an item, or "_bricks_shared" (a block a brick)
    brick_ptrs = None  # their kernels' table of level 0's and 1's arrays (BT_*), rewritten with the tables
    nbr_bricks = False  # level 0's neighbours found from the bricks (NBR "bricks": the name_nb kernels)
    _brick_level = None  # the level 0 whose arrays brick_ptrs names

    def _brick_setup(self, switch, kernels, nbr=False, nbr_kernels=None, smooth=False, smooth_kernels=None):
        """``brick_transfers`` from ``BRICK_TRANSFERS`` (*switch*) and ``nbr_bricks`` from
        *nbr* (``NBR`` "bricks"): for a workspace solver's V-cycle (level 0's arrays and level
        1's map from its set-up, ``Level0.brick_words``) of at least two levels, the
        restriction where level 0's is mg_restrict's (three levels on; with two
        mg_restrict_coarse_solve reads down[0]); their table and kernels (*kernels*,
        *nbr_kernels*); ``brick_smooth`` from *smooth* (SMOOTHER "brick", the solver's ``brick_x``
        allocated) where level 0 is launched by itself (not in the tail's launch), its kernels
        *smooth_kernels*."""
        if switch not in ("0", "1", "restrict", "prolong", "shared"):
            raise ValueError(f"VOXFX_SPARSE_MG_BRICK_TRANSFERS must be 0, 1, restrict, prolong or shared, "
                             f"not {switch!r}")
        if self.generation is None or self.preconditioner != "mg" or len(self.levels) < 2:
            return
        self.nbr_bricks = bool(nbr)
        self.brick_smooth = bool(smooth) and self.brick_x is not None and self._level0_alone()
        if self.brick_smooth:
            self._brick_smooth_setup(smooth_kernels)
        if switch != "0":
            both = switch in ("1", "shared")
            self.brick_transfers = ((both or switch == "restrict") and len(self.levels) > 2,
                                    both or switch == "prolong")
            self.brick_suffix = "_bricks_shared" if switch == "shared" else "_bricks"
            kernels.load(*(name + self.brick_suffix for name, on in zip(("mg_restrict", "mg_prolong_add"),
                                                                         self.brick_transfers) if on))
        if self.nbr_bricks:
            nbr_kernels.load(*NBR_KERNELS)
        if any(self.brick_transfers) or self.nbr_bricks or self.brick_smooth:
            # the span kernels read their tables' addresses from a seventh and an eighth word (BT_SPAN, BT_SPAN_HALO)
            self.brick_ptrs = self.cp.zeros(_BRICK_WORDS + 2 * self.smooth_suffix.startswith("_span"), self.cp.uint64)

    def _level0_alone(self):
        """Whether the fused V-cycle launches level 0 by itself (the tail's and the cluster's
        launches start above it); the split one always does."""
        if self.vcycle != "fused":
            return True
        last = len(self.levels) - 1
        return (self.cluster_from or (self.tail[0] if self.tail else last)) > 0

    def _brick_load(self, level0):
        """The brick transfers' and neighbours' table for *level0* (its tables just filled in)."""
        if any(self.brick_transfers) or self.nbr_bricks or self.brick_smooth:
            self.brick_ptrs[:_BRICK_WORDS].set(level0.brick_words())
            self._span_due = self._span_tables(level0)  # built by _brick_span_table once the sizes are set
            self._brick_level = level0

    def _brick_release(self):
        if not HOLD_BRICK_LEVEL:
            self._brick_level = None

    def _brick_blocks(self, C):
        """The grid of a block-a-brick kernel (the _shared ones: grid-stride over the pool's
        slots, whose count is the table's): level 1's stride / 32 blocks, twice its bricks
        where the pool is full (each holds at most 64 level-1 cells)."""
        return (max(1, min(_BRICK_GRID, C.stride // 32)),)

    def _restrict(self, level, L, C):
        """b of level + 1 from level's r: mg_restrict (down), or from level 0 mg_restrict_bricks
        (a thread a level-1 candidate: grid-stride over their count, read from the table) or
        mg_restrict_bricks_shared (a block of _BRICK_THREADS a brick)."""
        if level == 0 and self.brick_transfers[0]:
            args = (L.r, self.brick_ptrs, self.sizes, C.b, self.state)
            if self.brick_suffix == "_bricks":
                self._launch("mg_restrict_bricks", 2 * C.stride, args)
            else:
                self._one("mg_restrict_bricks_shared", self._brick_blocks(C), (_BRICK_THREADS,), args)
        else:
            self._launch("mg_restrict", C.stride, (L.r, L.down, np.int32(C.stride), self.sizes, np.int32(level + 1),
                                                   C.b, self.state))

    def _prolong(self, level, L, C, n, all_unknowns, target=None):
        """x of *level* (or *target*) += P x of level + 1 over *n* threads: mg_prolong_add (up), or
        onto level 0 mg_prolong_add_bricks."""
        x = L.x if target is None else target
        if level == 0 and self.brick_transfers[1]:
            args = (C.x, self.brick_ptrs, self.sizes, np.int32(all_unknowns), x, self.state)
            if self.brick_suffix == "_bricks":
                self._launch("mg_prolong_add_bricks", n, args)
            else:
                self._one("mg_prolong_add_bricks_shared", self._brick_blocks(C), (4 * _BRICK_THREADS,), args)
        else:
            self._launch("mg_prolong_add", n, (C.x, L.up, np.int32(L.stride), self.sizes, np.int32(level),
                                               np.int32(all_unknowns), x, self.state))

    def _first2_levels(self, bound):
        """Per level whether its pre-smoothing starts with mg_smooth_first2 (the first sweep
        and the second's red pass in one launch): the levels launched one by one whose stride
        is at most *bound* (``FIRST2_UNKNOWNS``), where there is a second sweep."""
        return tuple(bound > 0 and MG_SWEEPS > 1 and B.stride <= bound for B in self.levels)

    def _dense_inverse(self):
        """G of the coarsest level (``dense``; mg_dense_inverse, one block), once a solve after its
        tables are loaded: the solver's start."""
        if self.dense is not None:
            last = len(self.levels) - 1
            C = self.levels[last]
            self._one("mg_dense_inverse", (1,), (_TAIL_THREADS,), (C.nbr, C.diag, np.int32(C.stride), self.sizes,
                                                                   np.int32(last), self.dense_work, self.dense,
                                                                   self.state), self.dense_shared)

    def _coarse_solve(self, last, restrict_from=None):
        """The coarsest level's solve in one block: its sweeps (mg_coarse_solve) or, with ``dense``,
        G b (mg_coarse_dense); with *restrict_from* (level last − 1) the restriction into it first
        (mg_restrict_coarse_solve, mg_restrict_coarse_dense)."""
        C = self.levels[last]
        F = restrict_from
        if self.dense is None:
            if F is None:
                self._one("mg_coarse_solve", (1,), (_COARSE_THREADS,), (C.x, C.b, *self._level_args(last), self.state))
            else:
                self._one("mg_restrict_coarse_solve", (1,), (_COARSE_THREADS,),
                          (F.r, F.down, C.x, C.b, *self._level_args(last), self.state))
        elif F is None:
            self._one("mg_coarse_dense", (1,), (_COARSE_THREADS,),
                      (C.x, C.b, self.dense, np.int32(C.stride), self.sizes, np.int32(last), self.state))
        else:
            self._one("mg_restrict_coarse_dense", (1,), (_COARSE_THREADS,),
                      (F.r, F.down, C.x, C.b, self.dense, np.int32(C.stride), self.sizes, np.int32(last), self.state))

    def _nbr_name(self, name, level):
        """The kernel *name* on *level*: its level-0 twin that finds the neighbours from the
        bricks (flip_sparse_pressure_level0.cu, name_nb) where ``nbr_bricks``."""
        return name + "_nb" if level == 0 and self.nbr_bricks else name

    def _nbr_args(self, level):
        """A level's neighbours and diagonal as its kernels take them: (nbr, diag, stride), or
        on level 0 with ``nbr_bricks`` (the brick table, diag)."""
        B = self.levels[level]
        if level == 0 and self.nbr_bricks:
            return (self.brick_ptrs, B.diag)
        return (B.nbr, B.diag, np.int32(B.stride))

    def _level_args(self, level):
        return (*self._nbr_args(level), self.sizes, np.int32(level))

    def _smooth(self, level, colour, first=False, fused=False):
        B = self.levels[level]
        self._launch(self._nbr_name("mg_smooth", level), self._colour_n(B.stride) if fused else B.stride,
                     (B.x, B.b, *self._level_args(level), np.int32(colour), np.int32(first), self.state))

    def _colour_n(self, stride):
        """Threads of the fused V-cycle's one-colour launches (``colour_grid``)."""
        return stride // self.colour_grid + 1 if self.colour_grid > 1 else stride

    def _vcycle_fused(self):
        """z = V-cycle(r) and the partial sums of r·z, VCYCLE "fused": per level down
        2·MG_SWEEPS − 1 sweeps (the last with the black residuals), the red residuals,
        restriction; the coarsest level's restriction and
        solve in one block; per level up prolongation (red) and 2·MG_SWEEPS sweeps, the
        last one of level 0 with r·z."""
        levels = self.levels
        last = len(levels) - 1
        first = self.tail[0] if self.tail else last  # levels from here on: one block
        lead = self.cluster_from or first  # levels from here on: one launch
        for level in range(lead):
            L, C = levels[level], levels[level + 1]
            if level == 0 and self.brick_smooth:
                self._brick_pre(L)
                if level + 1 < last:
                    self._restrict(level, L, C)
                continue
            two = self.first2[level]  # the first sweep and the second's red pass in one launch
            self._launch(self._nbr_name("mg_smooth_first2" if two else "mg_smooth_first", level), L.stride,
                         (L.x, L.b, *self._level_args(level), self.state))
            for sweep in range(1, MG_SWEEPS):
                if not (two and sweep == 1):
                    self._smooth(level, 0, fused=True)
                if sweep < MG_SWEEPS - 1:
                    self._smooth(level, 1, fused=True)
                else:  # the last black sweep with the black residuals
                    self._launch(self._nbr_name("mg_smooth_black_residual", level), self._colour_n(L.stride),
                                 (L.x, L.b, *self._level_args(level), L.r, self.state))
            self._launch(self._nbr_name("mg_residual", level), L.stride if MG_SWEEPS == 1 else self._colour_n(L.stride),
                         (L.x, L.b, *self._level_args(level), np.int32(MG_SWEEPS == 1), L.r, self.state))
            if level + 1 < last:
                self._restrict(level, L, C)
        if self.tail:
            self._tail_launch(lead, first, last)
        elif last:
            self._coarse_solve(last, levels[last - 1])
        else:
            self._coarse_solve(last)
        for level in range(lead - 1, -1, -1):
            L, C = levels[level], levels[level + 1]
            if level == 0 and self.brick_smooth:
                self._brick_post(L, C, self._colour_n(L.stride))
                continue
            # the red (all: MG_OMEGA ≠ 1 reads black)
            self._prolong(level, L, C, self._colour_n(L.stride), MG_OMEGA != 1)
            for sweep in range(MG_SWEEPS):
                self._smooth(level, 1, fused=True)
                if level == 0 and sweep == MG_SWEEPS - 1:
                    self._reduce(self._nbr_name("mg_smooth_red_dot", 0), (L.x, L.b, *self._nbr_args(0), self.sizes,
                                                                          self.partials[self.red_blocks:], self.state))
                else:
                    self._smooth(level, 0, fused=True)
        if not last:  # one level: no post-smoothing to fold r·z into
            self._reduce("dot_rz", (self.r, self.z, self.sizes, self.partials[self.red_blocks:], self.state))

    def _vcycle(self):
        """z = V-cycle(r): the sequence of ``sparse_multigrid.VCycle._cycle``."""
        levels = self.levels
        last = len(levels) - 1
        for level in range(last):  # down: pre-smooth red, black; residual; restrict
            L, C = levels[level], levels[level + 1]
            if level == 0 and self.brick_smooth:
                self._brick_pre(L)
                self._restrict(level, L, C)
                continue
            for sweep in range(MG_SWEEPS):
                self._smooth(level, 0, first=sweep == 0)
                self._smooth(level, 1)
            self._launch(self._nbr_name("mg_residual", level), L.stride,
                         (L.x, L.b, *self._level_args(level), np.int32(1), L.r, self.state))
            self._restrict(level, L, C)
        self._coarse_solve(last)
        for level in range(last - 1, -1, -1):  # up: prolong-add; post-smooth black, red
            L, C = levels[level], levels[level + 1]
            if level == 0 and self.brick_smooth:
                self._brick_post(L, C, L.stride)
                continue
            self._prolong(level, L, C, L.stride, 1)  # all unknowns
            for _ in range(MG_SWEEPS):
                self._smooth(level, 1)
                self._smooth(level, 0)
