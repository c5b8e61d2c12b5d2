"""The set-up workspace's levels ≥ 2 held across set-ups on the device (``sparse_multigrid_kept``,
``VOXFX_SPARSE_MG_KEEP``; issue 24, helper h19d; h19c's design, bench/RESULTS.md). Level 0 and
level 1 are built every set-up as before (``sparse_pressure_workspace_levels._level1``); of levels
≥ 2 the generation's buffers already keep ``nbr``, ``diag``, ``up``, ``down`` and ``position``
(``_KEPT``); what a kept set-up needs besides is level 2's sorted set ``keys``, which lives in the
coarse scratch: that scratch is kept with the tables while the switch is on
(``Workspace.scratch(keep=True)``, as the coarse levels' graph keeps it), so its pointers and
contents hold. A kept set-up then launches, after level 1, two kernels instead of levels ≥ 2's
~16: ``mgs_down_fill`` (level 2's ``down`` filled again with level 1's new sentinel) and
``mgs_prolong_restrict`` (level 2's ``up`` and ``down`` from level 1's unknowns against the held
level 2's keys and positions — the "scatter" restriction: one map for both, R = ½·Pᵀ, the NumPy
``Held.transfers``' integers).

From level 3 (``VOXFX_SPARSE_MG_KEEP_FROM`` "3", helper h19f; h19c's CPU count: at the 8M scene's
motion levels ≥ 3 held cost ~no CG iterations, levels ≥ 2 +0.35 … +2 a substep): levels 0 … 2 are
built every set-up (level 2 by ``_coarse_level``, as a rebuild launches it), then the same two
kernels onto the held level 3 (they name no level). Kept only where level 2 is launched on its own
(``launched_to``): the set-up's one-block tail builds every level from its first to the last, so a
tail from level 2 (scenes whose level-1 set is ≤ ``TAIL_BOUND``) rebuilds; at 8M the tail starts at
level 4. Level 3 may itself lie in the rebuild's tail: the tail writes its keys and positions into
the same workspace buffers.

The sizes: every read of ``Workspace.sizes`` starts from an initial array written from the host
(counts 0, spans −2^31 + 1); on a kept set-up the rows of levels ≥ 2 in it are the held ones
(``rows``), so the kernels, the solve launched ahead (``ahead_sizes``) and the host's read see
the held levels' counts and spans as the rebuild left them, in the same write. The level count
(``levels_kept`` on the read) must be the rebuild's; where level 0's or level 1's span changes
it, the set-up is built again the two-read way (as a guess that missed, ``sparse_pressure_ahead``)
with levels ≥ 2 rebuilt. Rebuilt too (``decide``) where nothing is held, or what is held is
another grid's (the workspace serves every grid on the device: a second simulation in the process,
a test's next scene; the NumPy V-cycle holds its levels on its grid), a frame of the grid began
since they were built (``sparse_multigrid_kept.frame_started``, the NumPy rule: the first set-up of
every frame rebuilds, so a resumed bake keeps where the uninterrupted one does; h19e), the held
levels are ``keep_every()`` set-ups old, the workspace made a new generation (capacities that grew: new
buffers, a new solver), the level count of the bounds is another, or level 0's key base moved
(the kept set-ups launch on ``Workspace.sticky_guess``, which holds while the liquid stays within
~2^18 cells). A rebuild drops what was held before its launches overwrite it, and holds the new
levels once its read is back (``commit``). Two of these triggers are the workspace's history, not
the grid's: a new generation and a moved key base. A bake resumed in a fresh process grows its
capacities on its own set-ups (the uninterrupted bake's were grown by the frames before), so
where one of them grows within a frame and the other does not, that set-up rebuilds in one bake
and keeps in the other — the resume then differs within the solve's tolerance (the frame-start
rule makes every other set-up the same; tests/gpu/test_flip_sparse_pressure_kept_gpu.py compares
on a warmed workspace). Not handled (h19e): the held levels copied into a new generation's buffers
would remove it. The solver and its captured graphs keep their
arguments: the same buffers of the same generation, strides and level count.

Measured on an H100 80GB HBM3 (driver 580.159.04, session 19, bench/mg_keep_call.sh; the 8M row,
bench/_mg_keep_count.py --row 8m --steps 8 --warm 2, separate processes alternating off, 3, off,
3): with "3" 6 of 10 set-ups kept, one generation, the same 91 CG iterations over the 8 substeps,
the pressure stage 4.87 / 4.47 → 4.14 / 4.17 ms (medians), the substep 7.7 / 6.9 → 7.0 / 6.9 ms —
two processes a way on a host-paced stretch (bench/RESULTS.md "h19d"). Off by default until the
GPU files have run again with the grid rule (the held levels are their grid's: added after that
call, where the pressure and warm-start files' second scenes kept the first one's levels).
"""

from __future__ import annotations

import weakref

import numpy as np

from . import sparse_pressure_setup as setup
from .sparse_multigrid import _CellSet
from .sparse_multigrid_kept import frame_of, keep_from
from .sparse_pressure_setup import _ints


class HeldLevels:
    """What a rebuild leaves for the next set-ups: its ``grid`` (weakly: the held levels are its
    liquid's; the workspace serves every grid of the device), its workspace ``generation``, level
    0's key ``base``, the ``count`` of levels built, the ``first`` level held (K,
    ``sparse_multigrid_kept.keep_from``), the host rows of levels ≥ K (``cnt`` 4 a level, ``span``
    6 a level), the V-cycle's level count ``kept`` (``levels_kept``), ``age`` and the grid's
    ``frame`` they were built in (``sparse_multigrid_kept.frame_of``)."""

    def __init__(self, grid, generation, base, count, cnt_h, span_h, kept, first):
        self.grid, self.frame = weakref.ref(grid), frame_of(grid)
        self.generation, self.base, self.count = generation, tuple(int(b) for b in base), int(count)
        self.first = int(first)
        self.cnt = np.array(cnt_h[first:count], np.int32).reshape(-1)
        self.span = np.array(span_h[first:count], np.int32).reshape(-1)
        self.kept, self.age = int(kept), 0


def launched_to(bounds, first) -> bool:
    """Whether levels 2 … *first* − 1 are launched on their own on the host *bounds* (none of them
    in the set-up's one-block tail, ``sparse_pressure_workspace_levels._tail_start``'s test): a
    kept set-up builds them so, the tail (which runs to the last level) not being cut short."""
    return all(not (setup.TAIL_BOUND and bounds[level - 1] <= setup.TAIL_BOUND) for level in range(2, first))


def decide(ws, grid, base, bounds, every) -> bool:
    """Whether this set-up of *grid* keeps levels ≥ 2 (module notes: held from a set-up of the same
    grid in the same frame); where not, what was held goes (the launches about to be queued overwrite
    it)."""
    h, first = ws.held, keep_from() if every > 0 else 0
    keep = (every > 0 and h is not None and h.grid() is grid and h.frame == frame_of(grid) and h.first == first
            and len(bounds) > first and launched_to(bounds, first) and h.generation == ws.generation
            and h.base == tuple(int(b) for b in base) and h.count == len(bounds) and h.age + 1 < every)
    if not keep:
        ws.held = None
    return keep


def rows(init, ws, count) -> None:
    """The held rows of levels ≥ K into a sizes' initial array *init* (*count* levels: counts,
    then spans)."""
    h = ws.held
    init[4 * h.first:4 * count] = h.cnt
    init[4 * count + 6 * h.first:10 * count] = h.span


def count_holds(ws, cnt_h, span_h, count) -> bool:
    """Whether the V-cycle's level count on a kept set-up's read is the rebuild's; else nothing is
    held any more (the set-up is built again, levels ≥ 2 with it)."""
    extents = setup.level_extents(cnt_h, span_h, count)
    if setup.levels_kept(extents, count) == ws.held.kept:
        return True
    ws.held = None
    return False


def commit(ws, grid, level0, cnt_h, span_h, count, kept) -> None:
    """After the set-up's read: a kept set-up ages what is held; a rebuild of *grid* with the switch
    on holds its levels ≥ 2 (``HeldLevels``)."""
    if getattr(level0, "mg_keep", False) and ws.held is not None:
        ws.held.age += 1
    elif getattr(level0, "mg_every", 0) > 0 and count > keep_from():
        ws.held = HeldLevels(grid, ws.generation, level0.mg_base, count, cnt_h, span_h, kept, keep_from())
    else:
        ws.held = None


def launch(ws, fine) -> None:
    """A kept set-up's two launches after level K − 1 (*fine*: (K − 1, its key base)), onto the
    held level K (the same kernels for K = 2 and 3: level-free)."""
    K = setup._K
    f, fbase = fine
    held = f + 1
    t1, t2 = ws.work[f], ws.work[held]
    c1, c2 = ws.caps[f], ws.caps[held]
    cbase = _CellSet(None, None, fbase).coarser_base()
    cnt = ws.cnt
    K.launch("mgs_down_fill", c2, (cnt[held], cnt[f], np.int32(c2), t2["down"]))
    K.launch("mgs_prolong_restrict", c1, (t1["ukeys"], cnt[f], np.int32(c1), *_ints(fbase), t2["keys"],
                                          cnt[held], t2["position"], *_ints(cbase), t2["up"], np.int32(c2),
                                          t2["down"]))


def base_for(ws, lo, hi):
    """Level 0's key base for a set-up after its read with the switch on: the sticky guess
    (``Workspace.sticky_guess`` of the centred guess, which the set-ups launched ahead use) where
    it holds the box, else the box's own (``_level0_base``): the same tables on either."""
    from .sparse_multigrid import _MARGIN, KEY_BITS
    from .sparse_pressure_ahead import guessed_base

    exact = setup._level0_base(lo, hi)  # raises where the box is too wide, as there
    guess = ws.sticky_guess(guessed_base(lo, hi))
    if any(lo_ - _MARGIN < g or hi_ - g + _MARGIN >= 1 << KEY_BITS for lo_, hi_, g in zip(lo, hi, guess)):
        return exact
    return guess
