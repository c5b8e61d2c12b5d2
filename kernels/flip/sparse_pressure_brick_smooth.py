"""Level 0 of the sparse PCG's V-cycle smoothed brick by brick (``sparse_multigrid_bricks.SMOOTHER``
"brick", issue 24, h19a / h20a; kernels of ``cuda/flip_sparse_pressure_brick_smooth.cu``): the block
shape and grid of its kernels (``SMOOTH_THREADS``, ``SMOOTH_GRID``, ``SMOOTH_GRID_CELLS``: read when a
solver is built, in the solver key of ``sparse_pressure_solvers``) and their launches, ``BrickSmoothLaunches``,
which ``sparse_pressure_vcycle.VCycleLaunches`` derives from: the set-up of the smoother's buffers, the
span tables, and level 0's pre- and post-smoothing in the V-cycle.

Moved out of ``sparse_pressure_vcycle.py`` (issue 24's hygiene, session 21, helper h21b: that file had
grown to 584 lines against the ~500-line module guide) with no change of behaviour: the same kernels
launched with the same arguments in the same order, their notes and measurements as they were. The
settings live here now: a bench or test sets ``sparse_pressure_brick_smooth.SMOOTH_THREADS`` (and
``SMOOTH_GRID``), not ``sparse_pressure_vcycle``'s. ``BrickSmoothLaunches`` uses the V-cycle's launchers
and level helpers (``_one``, ``_launch``, ``_nbr_name``, ``_level_args``, ``_prolong``) and its solver's
``levels``, ``sizes``, ``state``, ``partials``, ``red_blocks``, ``brick_ptrs`` and ``brick_x``; the brick
table's first ``_BRICK_WORDS`` words are the brick transfers' and neighbours' (``VCycleLaunches._brick_load``),
the span tables' addresses the two after them."""

from __future__ import annotations

import numpy as np

from ..settings import env_choice
from .sparse_multigrid_bricks import SPAN_HALO as _SPAN_HALO
from .sparse_multigrid_bricks import SPAN_WORDS

_BRICK_WORDS = 6  # voxfx_mg_bricks.cuh's BT_WORDS

# Level 0 smoothed brick by brick (sparse_multigrid_bricks.SMOOTHER "brick", issue 24, h19a;
# cuda/flip_sparse_pressure_brick_smooth.cu): a block a brick (SMOOTH_THREADS threads, SMOOTH_GRID), the
# post-smoothing's r·z summed by its last block into the reduction grid's first partial. The fused
# V-cycle's level 0 then takes 5 launches (brick pre-smoothing, the residual over every unknown, the
# restriction, the prolongation onto every unknown, brick post-smoothing with r·z) where the red-black
# sweeps take 11.
# Measured (H100 80GB HBM3, driver 580.159.04, 8M dam break, strides 1271869, 313800, …, 3,198 slots):
# round 1 (512 threads on the reduction grid, one load after another; bench/flip_mg_bricks_call.sh) the
# PCG loop 222.3 → 216.3 µs an iteration (pre 35 µs, post 40 by event pairs); round 2 (h19a2, loads
# batched, a block a slot; bench/flip_mg_bricks_call2.sh, shapes in one process) rb 222.1, 128 threads
# 217.8 (pre 28, post 48), 128x16 225.8, 256 227.5, 64 230.2, 512 259.9, 512 on the reduction grid
# 237.7 (post 60 registers: 2 blocks an SM). The row (bench/flip_sparse.py --row 8m, separate
# processes): 2 sweeps one CG iteration more in half the substeps (pressure 3.59 / 3.62 → 3.71 / 3.70
# ms); 3 sweeps (sparse_multigrid_bricks.SWEEPS) the red-black counts but a slower loop (226.9 µs,
# pressure 3.77). Not the default (bench/RESULTS.md, h19a2: what is left).
SMOOTH_KERNELS = ("mg_brick_pre_smooth", "mg_brick_post_smooth", "mg_brick_pre_smooth_16", "mg_brick_post_smooth_16",
                  "mg_brick_pre_smooth_span", "mg_brick_post_smooth_span", "mg_brick_pre_smooth_span12",
                  "mg_brick_post_smooth_span12", "mg_brick_pre_smooth_spanh", "mg_brick_post_smooth_spanh",
                  "mg_brick_span_table")
# Threads a block of the brick smoothing (VOXFX_SPARSE_MG_BRICK_THREADS, read when a solver is built; a
# value here overrides it): "128" (h19a2's: a thread 4 cells and 3 halo places, its loads issued
# together), "64", "256", "512" (a thread a cell), or "128x16" (128 threads, the kernels' registers
# bounded to 32 so 16 blocks fit an SM: the _16 entries; ptxas spills ~100 bytes a thread of the
# post-smoothing). The same values in any case; the bricks in flight at once set the pace (each a
# chain of ~3 dependent loads, a few µs: ~3,500 bricks at 8M). "span" (issue 24, helper h20a): 128
# threads, the _span entries — no per-cell lookup of a cell's unknown: level 0's red-then-black,
# flat-order numbering makes a brick's unknowns of one parity class one contiguous run, so a
# per-slot record (sparse_multigrid_bricks.span_table: a 512-bit mask, the runs' starts a mask
# word, the red parity; 256 B a slot) built once a set-up by mg_brick_span_table gives each cell
# its unknown by a popcount, and a warp's 32 cells of a class read 32 consecutive unknowns' b,
# diag and x; b and diag stay in registers through the sweeps. The same values bit for bit. "span12":
# the same, registers bounded to 40 (12 blocks an SM where "span" fits 8 of the post-smoothing).
# "spanh": "span" with the post-smoothing's halo unknowns from a halo table the same launch builds
# (384 ints a slot: one load where nbr27 → the neighbour's record takes two). Measured (H100 80GB HBM3,
# driver 580.159.04, 8M, h20a's call; loop µs an iteration in one process, pre / post µs by event pairs):
# 3 sweeps rb 221.9, 128 212.4 (27 / 37), span 207.0 (25 / 40), span12 203.1 (21 / 31), spanh 204.3
# (25 / 34); 2 sweeps rb 221.4, 128 205.5 (24 / 35), span12 197.9 (20 / 28). "span12" the default way;
# the brick smoothing itself (SMOOTHER "brick") the default from h20d (the 8M Fast frames' pressure device
# 6-11 72.1 / 83.1 / 77.3 → 64.2 / 74.4 / 76.8 ms, H100, alternating; bench/RESULTS.md, h20d) until session
# 20's final call: the 65M frames 10-11 22-34 s with it (sparse_multigrid_bricks' notes: its trajectory's spray
# past the topology classes' 256 cells, built on the array path, not a fault here); "rb" the default
# again; "brick" the default once more from session 21 (h20g's class limit: the 65M frames 10-11 225 / 244 ms).
SMOOTH_THREADS = None
SMOOTH_THREAD_WAYS = ("span12", "span", "spanh", "128", "64", "256", "512", "128x16")
_SPAN_TABLE_SLOTS = 8  # slots a block of mg_brick_span_table (BSS_TABLE_SLOTS: 128 threads)
# The brick smoothing's grid (read when a solver is built; in the solver key): "slots" (default, level
# 0's stride / SMOOTH_GRID_CELLS blocks: about a block a live brick; grid-stride past it) or "reduce"
# (the reduction grid, red_blocks, the first round's shape: a block several bricks in turn).
SMOOTH_GRID = "slots"
SMOOTH_GRID_CELLS = 256
_SMOOTH_GRID_MAX = 65535


def smooth_grid():
    """The brick smoothing's grid way and cells a block (``SMOOTH_GRID``, ``SMOOTH_GRID_CELLS``)."""
    return SMOOTH_GRID, int(SMOOTH_GRID_CELLS)


def smooth_threads(given=None) -> str:
    """Threads a block of mg_brick_pre_smooth and mg_brick_post_smooth (``SMOOTH_THREADS``)."""
    return env_choice("VOXFX_SPARSE_MG_BRICK_THREADS", SMOOTH_THREAD_WAYS, given or SMOOTH_THREADS, default="span12")


class BrickSmoothLaunches:
    """Level 0's brick smoothing in the V-cycle on the device (module text)."""

    brick_smooth = False  # level 0 smoothed brick by brick (sparse_multigrid_bricks.SMOOTHER "brick")
    brick_x = None  # its x before the post-smoothing (a level-0 vector of the solver)
    smooth_threads = 128  # threads a block of its kernels (SMOOTH_THREADS)
    smooth_suffix = ""  # their entries: "", "_16" (SMOOTH_THREADS "128x16"), "_span", "_span12", "_spanh"
    smooth_blocks = 1  # their grid (SMOOTH_GRID)
    brick_span = None  # SMOOTH_THREADS "span…": the span table (int32, SPAN_WORDS a slot), grown with the pool
    brick_span_halo = None  # "spanh": the halo table (int32, _SPAN_HALO a slot)
    brick_rz = brick_ticket = None  # the post-smoothing's partial r·z a block and its last-block ticket

    def _brick_smooth_setup(self, smooth_kernels):
        """The brick smoothing's kernels (*smooth_kernels*), block shape (``SMOOTH_THREADS``), grid
        (``SMOOTH_GRID``) and r·z partials, where ``VCycleLaunches._brick_setup`` turned it on."""
        smooth_kernels.load(*SMOOTH_KERNELS)
        way = smooth_threads()
        self.smooth_threads, self.smooth_suffix = {"128x16": (128, "_16"), "span": (128, "_span"),
                                                   "span12": (128, "_span12"), "spanh": (128, "_spanh")}.get(
            way, (int(way) if way.isdigit() else 0, ""))
        if SMOOTH_GRID not in ("slots", "reduce"):
            raise ValueError(f"sparse_pressure_brick_smooth.SMOOTH_GRID must be slots or reduce, not {SMOOTH_GRID!r}")
        self.smooth_blocks = (self.red_blocks if SMOOTH_GRID == "reduce" else
                              max(1, min(_SMOOTH_GRID_MAX, self.levels[0].stride // SMOOTH_GRID_CELLS)))
        self.brick_rz = self.cp.zeros(self.smooth_blocks, self.cp.float64)
        self.brick_ticket = self.cp.zeros(1, self.cp.int32)  # 0 between launches (the last block resets it)

    def _span_tables(self, level0):
        """SMOOTH_THREADS "span…": the span table (and the halo table) grown to *level0*'s pool slots, their
        addresses in brick_ptrs' last two words where they moved (the captured graph keeps its
        arguments); the slots, 0 for another solver."""
        if not (self.brick_smooth and self.smooth_suffix.startswith("_span")):
            return 0
        slots = int(level0.candidates) // 64
        grown, halo, moved = max(1, slots + slots // 4), self.smooth_suffix == "_spanh", False
        if self.brick_span is None or self.brick_span.size < slots * SPAN_WORDS:
            self.brick_span, moved = self.cp.zeros(grown * SPAN_WORDS, self.cp.int32), True
        if halo and (self.brick_span_halo is None or self.brick_span_halo.size < slots * _SPAN_HALO):
            self.brick_span_halo, moved = self.cp.zeros(grown * _SPAN_HALO, self.cp.int32), True
        if moved:
            self.brick_ptrs[_BRICK_WORDS:].set(np.array([self.brick_span.data.ptr,
                                                         self.brick_span_halo.data.ptr if halo else 0], np.uint64))
        return slots

    def _brick_span_table(self):
        """The span table of the level 0 just loaded (mg_brick_span_table: after the solver's sizes
        hold its m_red and m), where one is due."""
        slots, self._span_due = getattr(self, "_span_due", 0), 0
        if slots:
            self._one("mg_brick_span_table", (max(1, min(_SMOOTH_GRID_MAX, -(-slots // _SPAN_TABLE_SLOTS))),),
                      (128,), (self.brick_ptrs, self.sizes, self.brick_span))

    def _brick_pre(self, L):
        """Level 0's pre-smoothing brick by brick into ``brick_x`` (mg_brick_pre_smooth) and its
        residual over every unknown into L.r."""
        self._one("mg_brick_pre_smooth" + self.smooth_suffix, (self.smooth_blocks,), (self.smooth_threads,),
                  (L.b, self.brick_ptrs, L.diag, self.sizes, self.brick_x, self.state))
        self._launch(self._nbr_name("mg_residual", 0), L.stride,
                     (self.brick_x, L.b, *self._level_args(0), np.int32(1), L.r, self.state))

    def _brick_post(self, L, C, n):
        """The prolongation onto every unknown of ``brick_x``, then level 0's post-smoothing brick by
        brick into z (L.x) with r·z (mg_brick_post_smooth: its total in the first of the reduction
        grid's partials, the others 0)."""
        self._prolong(0, L, C, n, 1, self.brick_x)
        self._one("mg_brick_post_smooth" + self.smooth_suffix, (self.smooth_blocks,), (self.smooth_threads,),
                  (self.brick_x, L.b, self.brick_ptrs, L.diag, self.sizes, L.x, self.brick_rz, self.brick_ticket,
                   self.partials[self.red_blocks:], np.int32(self.red_blocks), self.state))
