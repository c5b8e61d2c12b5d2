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

Relaxed where the liquid changed (issue 24, helper h20b; ``VOXFX_PRESSURE_WARM_RELAX``, read at each
solve, "0" by default): the start's residual b − A x₀ sits where the liquid's cells changed since
the last solve — new cells (x₀ 0 beside neighbours holding the old pressure) and cells next to
one that left the liquid (their x₀ made with its pressure, now 0) — and there the V-cycle, whose
coarse levels blur the free surface, is weakest. ``relax_guess`` runs k Jacobi sweeps
x_c ← (b_c + Σ x_n)/diag_c over those unknowns and the unknowns within w cells of them ("k,w";
"1" is "2,1"), the others held; no launch an iteration, k + w + 1 launches a solve. Measured
(``bench/flip_mg_iterations.py --guesses``, this 2-core CPU, the dam break at the 8M scene's
particle density, CG iterations a substep from substep 10 on): 128³ at Δt 1/72 8.86 → 8.00 (2,1),
7.93 (8,3); at 1/120 9.00 → 8.00; 64³ at 1/72 7.31 → 7.00 (2,1); 256³ (the 8M row's scene) at 1/120
over substeps 4–15 11.42 → 11.00 (2,1), 10.92 (4,2). On the device (H100, the 8M row, substeps 2–9)
[10, 12, 12, 12, 11, 11, 11, 11] → [10, 10, 10, 11, 11, 11, 11, 11], the relaxation ~+0.05 ms a solve.
The start's ‖b − A x₀‖/‖b‖ there was 1.2–2.7 (so the loop started cold: today's warm start gave
the dam break nothing after its first substeps), 0.5–1.0 relaxed; predictors from the carried
history (p_n + θ(p_n − p_{n−1}), Galerkin fits over p_n, p_{n−1}, p_{n−2}) changed no count
(bench/RESULTS.md, h20b).

On CuPy with ``sparse_pressure_cells.around_kernels`` (``VOXFX_SPARSE_PRESSURE_AROUND``) x₀
(new cells "zero") and the carry are one launch each (warm_guess, warm_carry), the same bits; a solve
without sealed regions makes the carry in its scatter's launch (unknowns_scatter_carry).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..settings import env_value
from .grid import FLUID

_F32 = np.float32
CARRIED = "pressure_carried"  # the grid channel of the warm start (module notes)
# Cells new to the liquid in a warm start: "zero" or "mean" (their known neighbours' mean).
NEW_CELLS = os.environ.get("VOXFX_PRESSURE_WARM_NEW", "zero")
RELAX = "VOXFX_PRESSURE_WARM_RELAX"  # module notes: "0" (default), "1" (= "2,1") or "k,w"


def warm_start_on(setting) -> bool:
    """The warm start's switch: *setting* (``FlipSettings.warm_start_pressure``) unless
    ``VOXFX_PRESSURE_WARM`` is "0" or "1" (read at each solve)."""
    forced = env_value("VOXFX_PRESSURE_WARM")
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


def carried_guess(grid):
    """The carried pressure where ``initial_guess`` (no sealed region) would make x₀ of it by
    warm_guess alone and ``relax_guess`` leaves it so — CuPy, new cells "zero", the kernels on, no
    relaxation — else None: a solve launched ahead then gathers x₀ straight from it
    (``sparse_pressure_solve_ahead.GATHER_SWITCH``)."""
    xp = grid.xp
    if xp is np or CARRIED not in grid.channels or NEW_CELLS != "zero" or relax_setting() is not None:
        return None
    carried = grid[CARRIED]
    return carried if _kernels(carried) else None


def relax_setting():
    """(sweeps, width) of ``RELAX`` (module notes), None where off; read at each solve."""
    value = env_value(RELAX).strip()  # unset: "", off as "0"
    if value in ("", "0"):
        return None
    if value == "1":
        return 2, 1
    try:
        sweeps, width = (int(v) for v in value.split(","))
    except ValueError:
        sweeps = width = -1
    if sweeps < 1 or width < 0:
        raise ValueError(f"{RELAX} must be 0, 1 or 'sweeps,width' (sweeps ≥ 1, width ≥ 0), not {value!r}")
    return sweeps, width


def relax_guess(grid, kind, b, x0):
    """*x0* relaxed where the liquid changed (module notes; ``RELAX``): a new array, or *x0*
    itself where off, cold (None) or nothing is carried. *kind*: the solve's cell types (sealed
    regions' pins AIR), *b* its flat right-hand side."""
    setting = relax_setting()
    if setting is None or x0 is None or CARRIED not in grid.channels:
        return x0
    sweeps, width = setting
    xp = grid.xp
    if xp is not np and _kernels(x0) and _kernels(b):
        from .sparse_pressure_cells import warm_relax

        return warm_relax(grid[CARRIED], kind, grid.nbr, b, x0, sweeps, width)
    from .sparse_pressure import diagonal  # (sparse_pressure imports this module)

    nb = grid.nbr
    has = [nb[d] >= 0 for d in range(6)]
    at = [xp.maximum(nb[d], 0) for d in range(6)]
    fluid = kind == FLUID
    count = diagonal(grid, kind)  # non-SOLID neighbours of a FLUID cell, else 0
    unknown = count > 0
    known = xp.isfinite(grid[CARRIED])
    gone = known & ~fluid  # had a value, not an unknown now
    mark = ~known
    for d in range(6):
        mark = mark | (has[d] & gone[at[d]])
    mark = mark & unknown
    for _ in range(width):
        grown = mark
        for d in range(6):
            grown = grown | (has[d] & mark[at[d]])
        mark = grown & unknown
    diag = xp.where(mark, count, _F32(1))
    x = x0
    for _ in range(sweeps):  # Jacobi: every sum from the last sweep's x; −x, +x, −y, +y, −z, +z in order
        s = xp.where(has[0] & fluid[at[0]], x[at[0]], _F32(0))
        for d in range(1, 6):
            s = s + xp.where(has[d] & fluid[at[d]], x[at[d]], _F32(0))
        x = xp.where(mark, (b + s) / diag, x).astype(xp.float32)
    return x


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
