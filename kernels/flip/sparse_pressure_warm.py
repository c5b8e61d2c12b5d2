"""The sparse pressure solve's warm start (moved out of ``sparse_pressure``, which calls it).

Issue 24 (``sparse_pressure.solve_pressure(..., warm_start=True)``, the ``FlipSettings``
field "Warm Start Pressure"): between substeps the pressure changes little, so the PCG
starts from the last solve's p instead of 0. It is carried per cell in the grid channel
``CARRIED`` (brick storage: it follows the topology's kept bricks through the unknowns'
renumbering; NaN where no FLUID cell had a value — new bricks, cells that were not FLUID,
so a cell leaving the liquid drops its value). p is pressure over density (b scales with
1/Δt, D with Δt): the same units whatever the substep's Δt, so it is carried unscaled.
Cells new to the liquid start from 0 (``NEW_CELLS`` "zero") or their known neighbours'
mean ("mean"); each sealed region is shifted so that its pinned cell is 0 (the solve's
own gauge; its mean is removed after the solve as before). The loop then starts from
r = b − A x₀ with the same stopping rule (‖r‖ ≤ tolerance·‖b‖), and falls back to x₀ = 0
where ‖b − A x₀‖ > ‖b‖ (never a worse start than cold; b = 0 gives p = 0 at once).
``VOXFX_PRESSURE_WARM`` "0"/"1" overrides the setting (bench A/B).

On CuPy with ``sparse_pressure_cells.around_kernels`` (``VOXFX_SPARSE_PRESSURE_AROUND``) x₀
(new cells "zero") and the carry are one launch each (warm_guess, warm_carry), the same bits; a solve
without sealed regions makes the carry in its scatter's launch (unknowns_scatter_carry).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .grid import FLUID

_F32 = np.float32
CARRIED = "pressure_carried"  # the grid channel of the warm start (module notes)
# Cells new to the liquid in a warm start: "zero" or "mean" (their known neighbours' mean).
NEW_CELLS = os.environ.get("VOXFX_PRESSURE_WARM_NEW", "zero")


def warm_start_on(setting) -> bool:
    """The warm start's switch: *setting* (``FlipSettings.warm_start_pressure``) unless
    ``VOXFX_PRESSURE_WARM`` is "0" or "1" (read at each solve)."""
    forced = os.environ.get("VOXFX_PRESSURE_WARM", "")
    return forced == "1" if forced in ("0", "1") else bool(setting)


def initial_guess(grid, enclosed, labels):
    """x₀ per flat cell from the carried pressure (module notes), or None where nothing is
    carried: cells without a value 0 or their known neighbours' mean (``NEW_CELLS``), each
    sealed region shifted so that its pin (its lowest cell, ``labels``) is 0."""
    xp = grid.xp
    if CARRIED not in grid.channels:
        return None
    carried = grid[CARRIED]
    if xp is not np and NEW_CELLS == "zero" and _kernels(carried):
        from .sparse_pressure_cells import warm_guess

        x0 = warm_guess(carried)
        if enclosed is not None:  # the solve pins each sealed region's lowest cell at 0
            x0 = xp.where(enclosed, x0 - x0[xp.minimum(labels, grid.size - 1)], x0).astype(xp.float32)
        return x0
    known = xp.isfinite(carried)
    x0 = xp.where(known, carried, _F32(0))
    if NEW_CELLS == "mean":
        nb = grid.nbr
        total, count = xp.zeros(grid.size, xp.float32), xp.zeros(grid.size, xp.float32)
        for d in range(6):  # −x, +x, −y, +y, −z, +z in order: both backends round alike
            at = xp.maximum(nb[d], 0)
            ok = (nb[d] >= 0) & known[at]
            total = total + xp.where(ok, x0[at], _F32(0))
            count = count + ok.astype(xp.float32)
        x0 = xp.where(~known & (count > 0), total / xp.maximum(count, _F32(1)), x0).astype(xp.float32)
    elif NEW_CELLS != "zero":
        raise ValueError(f"VOXFX_PRESSURE_WARM_NEW must be zero or mean, not {NEW_CELLS!r}")
    if enclosed is not None:  # the solve pins each sealed region's lowest cell at 0
        x0 = xp.where(enclosed, x0 - x0[xp.minimum(labels, grid.size - 1)], x0).astype(xp.float32)
    return x0


def carry(grid, p, carried=None) -> None:
    """Keep *p* (flat, after the solve) in the grid's ``CARRIED`` channel on FLUID cells,
    NaN elsewhere: the next substep's warm start; *carried*: that array already made
    (``sparse_pressure_cells.unknowns_scatter_carry``, with p's scatter)."""
    xp = grid.xp
    if CARRIED not in grid.channels:
        grid.add(CARRIED, xp.float32, math.nan)
    if carried is not None:
        grid[CARRIED] = carried
        return
    if xp is not np and _kernels(p):
        from .sparse_pressure_cells import warm_carry

        grid[CARRIED] = warm_carry(grid["cell"], p)
        return
    grid[CARRIED] = xp.where(grid["cell"] == FLUID, p, _F32(math.nan)).astype(xp.float32)


def _kernels(a) -> bool:
    """``sparse_pressure_cells.around_kernels`` on, for a flat float32 array *a* they can read."""
    from .sparse_pressure_cells import around_kernels

    return a.dtype == np.float32 and a.ndim == 1 and a.flags.c_contiguous and around_kernels()
