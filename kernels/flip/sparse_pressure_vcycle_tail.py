"""The fused V-cycle's coarse levels in one launch (``sparse_pressure_vcycle.VCycleLaunches``
derives from ``TailLaunches``; kernels of ``cuda/flip_sparse_pressure_vcycle_tail.cu``): levels
first..last in one block (``mg_tail_vcycle``), first the lowest level ≥ 1 whose buffers hold at
most ``TAIL_UNKNOWNS`` unknowns, and the levels above them of at most ``CLUSTER_UNKNOWNS`` in the
same launch by one cluster of blocks (``mg_tail_cluster``, compute capability 9.0 on); the
block's vectors in its shared memory (``TAIL_SHARED``: the _shared kernels), their first sweep in
two passes (``TAIL_FOLD``: the _shared_fold ones). Moved out of ``sparse_pressure_vcycle.py``
(issue 24: modules under ~500 lines; the same launches). The switches stay where benches and
tests set them (``sparse_pressure_gpu``'s ``TAIL_UNKNOWNS``, ``CLUSTER_UNKNOWNS``,
``TAIL_SHARED``; ``sparse_pressure_vcycle``'s ``CLUSTER_BLOCKS``, ``TAIL_FOLD``): the solver
passes their values in. The solver provides ``levels``, ``cp``, ``dense``, ``sizes``, ``state``
and ``_one``, and sets ``tail`` (``_tail_table``), ``cluster_from`` (``_cluster_from``),
``cluster_blocks``, ``tail_shared`` (``_tail_shared_bytes``) and ``tail_fold``.

The one-block tail in shared memory (``TAIL_SHARED``, default; issue 24, i24q): the tail
kernel (mg_tail_cluster at 8M, ~0.1 ms, the largest of an iteration) runs ~60 passes between
barriers, the coarsest level alone 4·MG_COARSE_SWEEPS, each waiting on L2 loads of a few
thousand unknowns; with the block's levels' x, b, r in its shared memory (``_tail_shared_bytes``,
tables still global) each pass reads shared memory. Measured (H100 80GB HBM3, 8M dam break,
strides 1271869, 209200, 26206, 3332, 472, 115, 71: the cluster from level 2, its block from 3
with 47,596 B of shared memory; ``bench/flip_sparse_pcg_loop.py``, variants in turn in one
process, two calls): the loop graph's iteration 253.9 → 237.6 and 254.3 → 237.4 µs (−6.6%), the
tail kernel 96 → 80 and 100 → 84 µs (an event pair a launch), the whole solve 6.07 → 5.73 and
5.88 → 5.77 ms; 14–15 CG iterations either way, the pressure bit for bit. Measured in the same
calls and not kept (the same bits every time): the reduction grid's kernels four unknowns a
thread at a time (253.3 µs against 253.9: bandwidth-, not latency-bound), finish_alpha and
finish_beta folded into the last block of the kernels before them (a ticket; 258.3 µs, slower:
the last block's 1024-partial sum costs what the one-block launch did), the tails' passes four
unknowns a thread at a time (global 253.0 µs; with the shared tail 260.0, slower: 64 registers a
thread at 1024 threads). ``COLOUR_GRID`` 2 (one-colour launches over half the grid) gave 237.4 →
233.8 µs in the loop but not in the substep's pressure over three substeps (off then; the
default since i24l4's call, sparse_pressure_vcycle's notes).

Measured and not kept (issue 24, i24w; H100 80GB HBM3, 8M dam break, the strides above;
``bench/flip_sparse_pcg_loop.py --pace-rounds 2`` and ``3``, variants in turn in one process,
two calls; the same bits and 14 CG iterations every time; the kernels are in the branch's
commits 8fab733 and 003d16c, reverted after): a "staged" shared tail — its levels of at most
100 / 128 / 512 unknowns (the coarsest; the last two; the last three) by the block's first warp
with __syncwarp between passes, each lane two unknowns at a time: the loop's iteration 236.4 →
242.9 / 250.8 / 269.1 µs; the tail levels' nbr and diag copied into shared memory as well
(159,316 B): 247.8 µs (with the last two levels by the warp 258.5, the last three 267.6); the
tail's tables prefetched into L2 at its start: 237.5 → 239.2 µs (block 0's also into its L1
241.0; with the coarsest by the warp 240.5; with the shared tables 243.3). Level 2 launch by
launch instead of in the cluster (``CLUSTER_UNKNOWNS`` 0): 238.4 µs in 36 launches. So the
tail's ~70 passes are bound neither by the block's barrier, nor by where the tables live, nor
by DRAM misses, but by each pass's dependent chain (table, then vector loads; six serial adds;
an IEEE divide): fewer passes (the coarsest level alone takes 4·MG_COARSE_SWEEPS = 32) would
cut it, a change to the preconditioner, not to the launches.

Where the tail's time goes (issue 24, i24k1; H100 80GB HBM3, 8M dam break, unknowns 15,510 /
1,829 / 191 / 16 on levels 2–5; ``bench/flip_sparse_pcg_loop.py --tail-profile``, the kernel built
with TAIL_PROFILE): 59.9 µs from its first barrier stamp to its last (72 by an event pair), of
which the first pre-smoothing sweeps 15.7 µs (levels 2 / 3 / 4: 6.1 / 5.2 / 4.3), the restrictions
13.2 (into level 5's 16 unknowns alone 4.2), the prolongations 7.5, G b 2.6, the shared copies and
the cluster's hand-overs 3.1, the other 21 red / black / residual passes 17.7 — the passes that
first touch a level's tables in an iteration, or chain their loads, not the passes' count or
thread count. ``CLUSTER_BLOCKS`` 16 (a non-portable cluster: level 2 one unknown a thread a pass):
the loop's iteration 233.2 → 231.5 µs, the row's pressure 3.998 → 4.112 ms (92 against 90 CG
iterations over 8 substeps): kept selectable, default 8; level 3 in the 16-block cluster too:
239.0 µs. ``TAIL_FOLD`` (the first sweep in two passes, sparse_pressure_vcycle's switch notes; default since the
fourteenth session's call 4, H100: ``bench/flip_sparse_pcg_loop.py --variants today:1:2
fold:1:2:-:-:-:-:-:-:1 --pace-rounds 3``): the loop's iteration 230.7 → 220.3 µs, the cluster
tail kernel 73 → 61 µs, 12 CG iterations and the same bits; the pressure GPU files passed with it.

The tail's restrictions in two passes, measured and not kept (issue 24, i24k2; H100 80GB HBM3, 8M
dam break; bench/RESULTS.md; the kernels in the branch's commits c9ec966 and 9f0807f, reverted after):
each term by its own thread into a scratch, then each coarse unknown's 64 added in order — the loop's
iteration 220.0 → 230.7 µs (the cluster's restriction in one pass: 227.6), the restrictions into
levels 4 / 5 3.9 / 4.7 → 7.0 / 7.6 µs (the block is one SM: the terms' instructions, not their
loads, then bound it), the prolongations two unknowns a thread unchanged; only G b from shared memory
paid (2.73 → 1.21 µs). Built on that alone, and measured slower, so removed too (i24k2's
TAIL_STAGE; fourteenth session's call 8): the last restriction's down table, G and the first
prolongation's up table copied into level first's dead r by idle threads — the loop's iteration
219.5 → 222.9 µs, the tail span 53.2 µs either way.
"""

from __future__ import annotations

import numpy as np

_TAIL_THREADS = 1024  # a tail's block (and mg_dense_inverse's)
_TAIL_CLUSTER = 8  # blocks of mg_tail_cluster's one cluster (the portable limit)
# CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (the driver's CUfunction_attribute)
NON_PORTABLE_CLUSTER_ATTRIBUTE = 14


class TailLaunches:
    """The coarse levels' V-cycle in one launch: the tail's levels, pointer table, shared memory
    and kernel."""

    tail_shared = 0  # bytes of the one-block tail's shared memory (``_tail_shared_bytes``; 0: global vectors)
    cluster_blocks = _TAIL_CLUSTER  # blocks of the cluster tail's launch (``cluster_blocks()``)
    tail_fold = False  # the shared tails' first sweep in two passes (``tail_fold()``; the _fold kernels)

    def _tail_first(self, bound):
        """mg_tail_vcycle's first level, or None: levels first..last in one block, first the
        lowest level ≥ 1 whose stride is at most *bound* (``TAIL_UNKNOWNS``), at least two
        levels (the coarsest alone is one launch already)."""
        last = len(self.levels) - 1
        return next((lv for lv in range(1, last) if self.levels[lv].stride <= bound), None)

    def _tail_table(self, bound):
        """(first, pointer table, strides) of mg_tail_vcycle (``_tail_first``), or None."""
        cp = self.cp
        first = self._tail_first(bound)
        if first is None:
            return None
        ptr = lambda a: 0 if a is None else a.data.ptr  # noqa: E731
        table = [ptr(a) for B in self.levels for a in (B.x, B.b, B.r, B.nbr, B.diag, B.up, B.down)]
        table[-1] = ptr(self.dense)  # the coarsest level's slot 6 (no down): G, or 0 for the sweeps
        return first, cp.asarray(np.array(table, np.uint64)), self.device_strides()

    def device_strides(self):
        """The levels' strides as a device int32 array, made once a solver (the tail kernels' and
        ``sparse_pressure_solve_ahead``'s ahead_sizes' argument)."""
        kept = getattr(self, "_device_strides", None)
        if kept is None:
            kept = self._device_strides = self.cp.asarray(np.array([B.stride for B in self.levels], np.int32))
        return kept

    def _tail_shared_bytes(self, on, limit):
        """Dynamic shared memory of mg_tail_vcycle_shared / mg_tail_cluster_shared (x, b and,
        but on the coarsest level, r of each tail level, ``stride`` floats each), or 0: *on*
        off (``TAIL_SHARED``), no one-block tail, or more than *limit* bytes (the device's
        opt-in maximum per block: the tail's vectors then stay global)."""
        if not on or not self.tail:
            return 0
        first, last = self.tail[0], len(self.levels) - 1
        size = 4 * sum((3 if lv < last else 2) * self.levels[lv].stride for lv in range(first, last + 1))
        return size if size <= limit else 0

    def _tail_kernel(self):
        """The tail's kernel: mg_tail_cluster (from ``cluster_from``) or mg_tail_vcycle, with its
        vectors in shared memory (``tail_shared``: the _shared kernels, with ``tail_fold`` the
        _shared_fold ones) or not."""
        shared = ("_shared" + ("_fold" if self.tail_fold else "")) if self.tail_shared else ""
        return ("mg_tail_cluster" if self.cluster_from else "mg_tail_vcycle") + shared

    def _cluster_from(self, bound, capability):
        """mg_tail_cluster's first level, or None: the lowest level ≥ 1 above the tail's
        whose stride is at most *bound* (``CLUSTER_UNKNOWNS``), on a device of compute
        *capability* (major·10 + minor) 9.0 on."""
        if not self.tail or bound <= 0 or capability < 90:
            return None
        return next((lv for lv in range(1, self.tail[0]) if self.levels[lv].stride <= bound), None)

    def _tail_launch(self, lead, first, last):
        """The tail's one launch (``_tail_kernel``): levels *lead*..*last* by the cluster
        (*lead* ``cluster_from``, its block from *first*) or *first*..*last* by one block; on
        entry level *lead*'s b holds the restricted residual, on exit its x the post-smoothed
        correction."""
        _, table, strides = self.tail
        if self.cluster_from:
            self._one(self._tail_kernel(), (self.cluster_blocks,), (_TAIL_THREADS,), (
                table, strides, np.int32(lead), np.int32(first), np.int32(last), self.sizes, self.state),
                self.tail_shared)
        else:
            self._one(self._tail_kernel(), (1,), (_TAIL_THREADS,), (
                table, strides, np.int32(first), np.int32(last), self.sizes, self.state), self.tail_shared)
