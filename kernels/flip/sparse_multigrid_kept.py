"""The sparse V-cycle's levels ≥ 2 kept across substeps (issue 24, helper h19d; measured by h19c,
``bench/_mg_kept.py``, bench/RESULTS.md "h19c"): the V-cycle is only PCG's preconditioner (the
stop is on the true residual), so its coarse levels may come from an earlier substep. Level 0
and level 1 are built every substep as before; levels ≥ 2 (their sets, tables, transfers among
them) are rebuilt every ``keep_every()`` set-ups and held in between; on a kept set-up only the
transfers between level 1 (this substep's) and the kept level 2 are rebuilt, both from the one
map (a level-1 unknown's parent and its neighbours on the child's side, looked up among the
kept level-2 cells: ``TableBuilder.prolong``, and ``restrict`` on the same sets), so R = ½·Pᵀ
and the V-cycle stays symmetric positive definite (tests/unit/test_flip_sparse_multigrid_kept.py).
A level-1 unknown whose parent is not a kept unknown takes no correction from it (the sentinel,
as a fresh hierarchy's child of an AIR parent); a kept level-2 cell the liquid has left keeps its
old type and operator row.

The policy, the same on both backends (``VOXFX_SPARSE_MG_KEEP``, read at each set-up; "0" the
default: every level every set-up, today's): levels ≥ 2 are rebuilt at a set-up where

* none are held (the first, after a switch, or after a set-up whose V-cycle had < 3 levels),
* a frame began since they were built (``frame_started``: the sparse simulation's ``step``
  marks its grid, helper h19e): the first set-up of every frame rebuilds, so a bake resumed from
  a frame's checkpoint (its new grid holds nothing) keeps and rebuilds on the set-ups the
  uninterrupted bake does — bit for bit on the CPU (tests/unit/test_flip_sparse_mg_keep_resume.py);
  with the Fast preset's 3 substeps a frame and k = 3 the schedule h19d measured,
* they are ``keep_every()`` set-ups old (rebuilt at age 0, held at ages 1 … k − 1),
* the V-cycle's level count (before ``MG_DENSE``'s drop) would change: level 0's or level 1's
  span falls under ``MG_MIN_SIDE`` (fewer levels: nothing to keep);

and, on the device only (``sparse_pressure_workspace``), where the workspace makes a new
generation of buffers (capacities that grow) or level 0's key base moves (the base an ahead
set-up launches on is kept, ``Workspace.sticky_guess``: it moves only where the liquid travels
~2^18 cells). The NumPy V-cycle (``sparse_multigrid.VCycle``) holds its levels on the grid
(``grid._mg_held``), the device's in its workspace.

CG iterations (h19c, NumPy, the dam break's systems at dt 1/120): levels ≥ 2 kept and rebuilt
every 3 set-ups +0.01 / +0.00 / +0.00 iterations a substep at 64³ / 128³ / 256³, every 4 +0.10
at 128³, every 8 +0.10 / +0.50 / +0.08; estimated at 8M ~0.2 ms of device and ~0.3 ms of host a
substep saved (~16 of the set-up's ~25 launches are levels ≥ 2's). On an H100 (h19d, the 8M row,
"3" against "0" in alternating processes): the same 91 CG iterations over 8 substeps, the pressure
stage 4.87 / 4.47 → 4.14 / 4.17 ms (``sparse_pressure_workspace_kept``'s notes).
"""

from __future__ import annotations

from ..settings import env_choice
from .sparse_multigrid import _CellSet, _pack, _unpack

SWITCH = "VOXFX_SPARSE_MG_KEEP"
KEEP_WAYS = ("0", "2", "3", "4", "6", "8")  # "0": rebuilt every set-up; "k": every k set-ups
# The first level held (``VOXFX_SPARSE_MG_KEEP_FROM``, read with ``SWITCH`` at each set-up; issue
# 24, h19f): "2" (default: levels 0, 1 built every set-up) or "3" (levels 0 … 2 built, level 2 ↔ 3's
# transfers made on a kept set-up). h19c's CPU count (bench/flip_mg_iterations.py keep_from=3,
# bench/RESULTS.md): at the 8M scene's motion levels ≥ 2 held cost +0.35 … +2 CG iterations a
# substep once the liquid runs, levels ≥ 3 held ~none.
FROM_SWITCH = "VOXFX_SPARSE_MG_KEEP_FROM"
FROM_WAYS = ("2", "3")
KEPT_FROM = 2  # the default first level held


def keep_every(given=None) -> int:
    """Set-ups between rebuilds of the held levels (``SWITCH``; 0: every set-up)."""
    return int(env_choice(SWITCH, KEEP_WAYS, given))


def keep_from(given=None) -> int:
    """The first level held (``FROM_SWITCH``: 2 or 3)."""
    return int(env_choice(FROM_SWITCH, FROM_WAYS, given))


def frame_started(grid) -> None:
    """A frame of the simulation owning *grid* begins (``SparseFlipSimulation.step``): levels ≥ 2
    held for *grid* are not kept past its next set-up, on either backend (module notes)."""
    grid._mg_frame = frame_of(grid) + 1


def frame_of(grid) -> int:
    """The frames begun on *grid* (``frame_started``; 0 for a grid no simulation steps)."""
    return getattr(grid, "_mg_frame", 0)


def common_bases(fine_base, coarse_base):
    """Key bases for a current fine set and a kept coarse set that keep every query of
    ``TableBuilder.prolong`` (a fine cell's parent ± 1) and ``restrict`` (2I − 1 … 2I + 2) at or
    above its base, as a fresh hierarchy's margin does: fine F = min(fine, 2·coarse), coarse
    min(coarse, the base ``coarser_base`` gives F)."""
    fine = tuple(min(f, 2 * c) for f, c in zip(fine_base, coarse_base))
    coarse = tuple(min(c, (f + 4) // 2 - 4) for f, c in zip(fine, coarse_base))
    return fine, coarse


def rebased(cells, keys, base):
    """*cells* (a ``_CellSet`` with positions) and unknown *keys* relative to *base* (≤ theirs on
    every axis: the sorted order stays)."""
    if tuple(base) == cells.base:
        return cells, keys
    out = _CellSet(_pack(*_unpack(cells.keys, cells.base), base), cells.fluid, base)
    out.position = cells.position
    return out, _pack(*_unpack(keys, cells.base), base)


class Held:
    """Levels ≥ K (*first*, ``keep_from()``) of the set-up that last rebuilt them: ``levels``
    (their ``_Level``), ``up`` and ``down`` (the transfers among them: ``VCycle.up[K:]``,
    ``down[K:]``), level K's set ``cells`` (with positions) and its unknowns' ``keys``, the
    V-cycle's level ``count`` before the dense drop, ``age`` (set-ups since the rebuild) and the
    grid's ``frame`` it was built in (``frame_of``)."""

    def __init__(self, levels, up, down, cells, keys, frame=0, first=KEPT_FROM):
        self.levels, self.up, self.down = list(levels), list(up), list(down)
        self.cells, self.keys, self.first = cells, keys, int(first)
        self.count = self.first + len(self.levels)
        self.age, self.frame = 0, int(frame)

    def keeps(self, every, frame=0, first=KEPT_FROM) -> bool:
        """Whether the next set-up, in the grid's *frame* (``frame_of``), keeps these levels
        (``every``: ``keep_every()``; *first*: ``keep_from()``, the same as at the rebuild)."""
        return every > 0 and self.frame == frame and self.first == first and self.age + 1 < every

    def transfers(self, build, cells, keys, m_fine):
        """(up, down) between level K − 1 (*cells* with positions, its unknowns' *keys*, *m_fine*
        of them) and the held level K: ``TableBuilder.prolong`` and ``restrict`` on bases that hold
        both sets (``common_bases``)."""
        fine_base, coarse_base = common_bases(cells.base, self.cells.base)
        fine, fine_keys = rebased(cells, keys, fine_base)
        coarse, coarse_keys = rebased(self.cells, self.keys, coarse_base)
        m = self.levels[0].m
        return build.prolong(fine_keys, fine.base, coarse, m), build.restrict(coarse_keys, coarse.base, fine, m_fine)
