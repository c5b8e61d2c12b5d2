"""A V-cycle whose coarse levels come from an earlier substep (issue 24, helper h19c), NumPy
only, bench code beside ``_mg_variants.py``: what ``bench/flip_mg_iterations.py`` counts the
CG iterations of (variants ``keep_lag`` / ``keep_every``) to see whether the pressure set-up's
coarse levels (~0.44 ms of device and ~0.7 ms of host a substep at 8M) need rebuilding every
substep.

``Snapshot(grid, kind, level0)``: one substep's hierarchy — its fresh ``VariantVCycle`` (the
product's tables) and, per level up to ``KEPT_CELLS``, the cell set (lattice keys, FLUID flags,
base, each cell's unknown) and the unknowns' keys, rebuilt by the same ``TableBuilder`` calls
``VCycle`` makes (the same sets: the build is deterministic).

``KeptVCycle(current, kept, options, keep_from)``: levels < ``keep_from`` from *current* (this
substep's snapshot), levels ≥ ``keep_from`` from *kept* (an earlier one) with their tables,
their smoothing operators and the coarsest level's dense inverse as they were; the transfers
between level ``keep_from`` − 1 (current) and ``keep_from`` (kept) rebuilt by
``TableBuilder.prolong`` / ``restrict`` from the current fine set against the kept coarse set.
Both tables come from the one map (a fine unknown's parent and its neighbours on the child's
side, looked up among the kept coarse unknowns): the restriction is ½·Pᵀ as in a fresh
hierarchy, so the V-cycle stays symmetric positive definite (tests/unit/
test_flip_sparse_multigrid_kept.py checks both). A current unknown whose parent is not a kept
coarse unknown takes no correction from it (its row points to the sentinel: the same rule as a
fresh hierarchy's child of an AIR parent). A kept coarse cell that the liquid has since left
keeps its old type (FLUID, its old operator row): its restriction gathers only the children
that are unknowns now, and its correction reaches only those — nothing is re-typed, so no table
of levels ≥ ``keep_from`` changes. Measured, and what a device version needs: bench/RESULTS.md,
section h19c (at 8M only levels ≥ 3 kept pay, rebuilt every 3–4 substeps).
"""

from __future__ import annotations

import numpy as np

from voxfx.kernels.flip.sparse_multigrid import TableBuilder, _level0_cells, _pack, _unpack
from voxfx.kernels.flip.sparse_multigrid_kept import common_bases  # noqa: F401 (the bench's callers use it here)
from voxfx.kernels.flip.sparse_multigrid_kept import rebased as _rebased

try:  # bench/ on the path (the bench scripts), else the checkout's root (the tests)
    from _mg_variants import MGOptions, VariantVCycle
except ImportError:
    from bench._mg_variants import MGOptions, VariantVCycle

KEPT_CELLS = 4  # levels 0 … 3: keep_from 1, 2 or 3


class Snapshot:
    """One substep's hierarchy (module notes): ``vcycle`` (a ``VariantVCycle`` with the default
    options), ``cells[l]`` (``_CellSet`` with positions) and ``keys[l]`` (the unknowns' keys in
    compact order, relative to ``cells[l].base``) for l < min(KEPT_CELLS, levels)."""

    def __init__(self, grid, kind, level0):
        self.vcycle = VariantVCycle(grid, kind, level0)
        self.level0 = level0
        build = TableBuilder(np)
        cells = _level0_cells(grid, kind, level0, np)
        self.cells, self.keys = [cells], [_pack(*level0.lattice, cells.base)]
        while len(self.cells) < min(KEPT_CELLS, len(self.vcycle.levels)):
            cells = build.coarser(cells)
            level = build.level(cells)
            assert level.m == self.vcycle.levels[len(self.cells)].m  # the same set as VCycle's
            self.cells.append(cells)
            self.keys.append(level.keys)


_FAR = (-(1 << 19),) * 3  # a base below any lattice cell of the benches' grids: keys comparable across substeps


def changed(now: Snapshot, then: Snapshot, level=1) -> float:
    """The share of *level*'s cells (the set: FLUID and SOLID) in one snapshot and not the
    other, over *now*'s count: how far the kept hierarchy has gone stale."""
    a, b = (_pack(*_unpack(s.cells[level].keys, s.cells[level].base), _FAR) for s in (now, then))
    return float(np.setxor1d(a, b).shape[0]) / max(int(a.shape[0]), 1)


class KeptVCycle(VariantVCycle):
    """Levels < *keep_from* of *current*, levels ≥ *keep_from* of *kept* (both ``Snapshot``),
    the transfers between them rebuilt (module notes); the cycle is ``VariantVCycle``'s with
    *options* (only the cycle's options: the kept tables are the default build's)."""

    def __init__(self, current: Snapshot, kept: Snapshot, options=None, keep_from=1):
        cur, old = current.vcycle, kept.vcycle
        if not 1 <= keep_from < min(len(cur.levels), len(old.levels), KEPT_CELLS):
            raise ValueError(f"keep_from {keep_from} needs both hierarchies deeper "
                             f"({len(cur.levels)}, {len(old.levels)} levels)")
        self.xp = np
        self.options = options = options or MGOptions()
        f = keep_from - 1
        fine_base, coarse_base = common_bases(current.cells[f].base, kept.cells[keep_from].base)
        fine, fine_keys = _rebased(current.cells[f], current.keys[f], fine_base)
        coarse, coarse_keys = _rebased(kept.cells[keep_from], kept.keys[keep_from], coarse_base)
        build = TableBuilder(np)
        m_fine, m_coarse = cur.levels[f].m, old.levels[keep_from].m
        self.levels = cur.levels[:keep_from] + old.levels[keep_from:]
        self.up = cur.up[:f] + [build.prolong(fine_keys, fine.base, coarse, m_coarse)] + old.up[keep_from:]
        self.down = cur.down[:f] + [build.restrict(coarse_keys, coarse.base, fine, m_fine)] + old.down[keep_from:]
        self.dense, self.dense_mode = old.dense, old.dense_mode
        self._variant_tables(options)
