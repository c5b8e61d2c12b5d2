"""Initial guesses for the warm-started PCG from the carried history (issue 24, helper h20b;
read by ``bench/flip_mg_iterations.py --guesses`` alone, CPU, NumPy).

Today's warm start (``sparse_pressure_warm``) starts the solve of substep n + 1 from p_n, the
last solve's p carried per cell in the grid channel ``CARRIED`` (new cells 0). The bench
carries two more channels the same way (they follow the topology as ``CARRIED`` does, being
grid channels too): ``PREV``, p_{n−1}, and ``GUESS``, the x₀ today's warm start gave solve n.
A guess is one of

* ``cold``: x₀ = 0; ``warm``: today's x₀ (p_n, new cells 0); ``mean``: today's with new cells
  from their known neighbours' mean (``VOXFX_PRESSURE_WARM_NEW=mean``);
* ``extrap=θ``: p_n + θ·(p_n − p_{n−1}) where both are known, p_n where p_{n−1} is not, 0 on new
  cells (θ = 1: linear extrapolation in time at a constant Δt);
* ``corr=θ``: p_n + θ·(p_n − x₀_n), the last solve's own correction scaled;
* ``scaled``: α·p_n with α = (p_n·b)/(p_n·A p_n), the A-norm's best multiple (a Galerkin step
  on span{p_n}: A p_n is the start's r = b − A x₀ already, so one reduction more in the set-up);
* ``span2``: the A-norm's best x₀ in span{p_n, p_{n−1}} (a 2 × 2 Galerkin system: one more
  Laplacian, A p_{n−1}, and one reduction of five dots in the set-up, no launch an iteration);
* ``span3``: the same over span{p_n, p_{n−1}, p_{n−2}} (the bench carries ``PREV2`` for it);
* ``relax=k,w``: today's x₀ with k Jacobi sweeps over the new cells and the unknowns within w
  cells of one (the start's residual sits there: module notes of the bench); ``relaxl=k,w``: the
  same over the new cells and the unknowns next to a cell that left the liquid;
* ``mr1``, ``mr2``: the x₀ in span{p_n} or span{p_n, p_{n−1}} of the least ‖b − A x₀‖₂ (never
  above ‖b‖: the start the stopping rule measures).

Each is shifted like today's in a sealed region (its pin 0), and the loop's start falls back to
0 where ‖b − A x₀‖ > ‖b‖ as the product's does.
"""

from __future__ import annotations

import numpy as np

from voxfx.kernels.flip import sparse_pressure
from voxfx.kernels.flip.grid import FLUID

PREV = "h20b_prev"  # p_{n−1} on the current topology
PREV2 = "h20b_prev2"  # p_{n−2}
GUESS = "h20b_guess"  # the x₀ today's warm start gave the last solve
_F32 = np.float32
SHARES: dict = {}  # per relaxing guess: the share of the unknowns it swept, per solve


def known(grid, name):
    """(values with NaN → 0, known mask) of channel *name*, or (None, None) where absent."""
    if name not in grid.channels:
        return None, None
    a = grid[name]
    ok = np.isfinite(a)
    return np.where(ok, a, _F32(0)).astype(np.float32), ok


def shift(grid, kind, x0):
    """x₀ with each sealed region's pin at 0 (as ``initial_guess``)."""
    if not bool((kind != grid["cell"]).any()):
        return x0
    _, enclosed, labels = sparse_pressure.solver_cells(grid)
    if enclosed is None:
        return x0
    return np.where(enclosed, x0 - x0[np.minimum(labels, grid.size - 1)], x0).astype(np.float32)


def galerkin(level, b, basis):
    """The compacted x₀ in span(*basis*) (compacted vectors) minimising the A-norm of the error:
    G c = B^T b with G = B^T A B (float64; dependent vectors dropped by lstsq)."""
    AB = [level.apply(v) for v in basis]
    G = np.array([[float(np.dot(u.astype(np.float64), w)) for w in AB] for u in basis])
    rhs = np.array([float(np.dot(u.astype(np.float64), b)) for u in basis])
    c = np.linalg.lstsq(G, rhs, rcond=1e-10)[0]
    x = np.zeros_like(b)
    for ci, v in zip(c, basis):
        x = x + _F32(ci) * v
    return x.astype(np.float32), c


def guess(name, grid, kind, level, b_flat, x0_warm):
    """Flat x₀ of guess *name* (module notes) at this solve, or *x0_warm* where the history
    it needs is absent."""
    if name == "cold":
        return None
    if x0_warm is None or name == "warm":
        return x0_warm
    if name == "mean":  # today's, new cells from their known neighbours' mean (VOXFX_PRESSURE_WARM_NEW)
        from voxfx.kernels.flip import sparse_pressure_warm

        enclosed = labels = None
        if bool((kind != grid["cell"]).any()):
            _, enclosed, labels = sparse_pressure.solver_cells(grid)
        old, sparse_pressure_warm.NEW_CELLS = sparse_pressure_warm.NEW_CELLS, "mean"
        try:
            return sparse_pressure_warm.initial_guess(grid, enclosed, labels)
        finally:
            sparse_pressure_warm.NEW_CELLS = old
    p_n, ok_n = known(grid, sparse_pressure.CARRIED)
    p_m, ok_m = known(grid, PREV)
    if name.startswith("extrap="):
        if p_m is None:
            return x0_warm
        th = _F32(float(name.split("=")[1]))
        x0 = np.where(ok_n & ok_m, p_n + th * (p_n - p_m), p_n).astype(np.float32)
        return shift(grid, kind, x0)
    if name.startswith("corr="):
        g, ok_g = known(grid, GUESS)
        if g is None:
            return x0_warm
        th = _F32(float(name.split("=")[1]))
        x0 = np.where(ok_n & ok_g, p_n + th * (p_n - g), p_n).astype(np.float32)
        return shift(grid, kind, x0)
    if name.startswith("relax"):
        return relaxed(name, grid, kind, level, b_flat, x0_warm, ok_n)
    if name in ("mr1", "mr2"):  # the residual's 2-norm least over span{p_n} or span{p_n, p_{n−1}}
        basis = [x0_warm] + ([shift(grid, kind, p_m)] if name == "mr2" and p_m is not None else [])
        b = level.gather(b_flat)
        B = [level.gather(v) for v in basis]
        AB = np.stack([level.apply(v).astype(np.float64) for v in B], axis=1)
        c = np.linalg.lstsq(AB, b.astype(np.float64), rcond=None)[0]
        x = sum(_F32(ci) * v for ci, v in zip(c, B)).astype(np.float32)
        return level.scatter(x, grid.size)
    if name in ("scaled", "span2", "span3"):
        basis = [x0_warm]
        if name != "scaled" and p_m is not None:
            basis.append(shift(grid, kind, p_m))
        if name == "span3":
            p_2, _ = known(grid, PREV2)
            if p_2 is not None:
                basis.append(shift(grid, kind, p_2))
        b = level.gather(b_flat)
        x, _ = galerkin(level, b, [level.gather(v) for v in basis])
        return level.scatter(x, grid.size)
    raise ValueError(f"unknown guess {name!r}")


def relaxed(name, grid, kind, level, b_flat, x0_warm, ok_n):
    """``relax=k,w`` and ``relaxl=k,w`` (module notes): k Jacobi sweeps on the changed cells."""
    k, w = (int(v) for v in name.split("=")[1].split(","))
    changed = ~ok_n
    if name.startswith("relaxl="):  # and the unknowns next to a cell that left the liquid
        gone = ok_n & (kind != FLUID)
        for d in range(6):
            at = grid.nbr[d]
            changed = changed | ((at >= 0) & gone[np.maximum(at, 0)])
    x0, share = relax(level, b_flat, x0_warm, changed, k, w, grid.size)
    SHARES.setdefault(name, []).append(share)
    return x0


def relax(level, b_flat, x0_flat, new_flat, sweeps, width, size):
    """x₀ with *sweeps* Jacobi sweeps x_c ← (b_c + Σ x_n)/diag_c over the unknowns that are new
    cells (*new_flat*: no carried value) or within *width* cells of one, the others held."""
    m = level.m
    b = level.gather(b_flat)
    x = level.gather(x0_flat)
    near = np.concatenate([new_flat[level.cells], [False]])
    for _ in range(width):
        grown = near[:m].copy()
        for d in range(6):
            grown |= near[level.nbr[d, :m]]
        near = np.concatenate([grown, [False]])
    at = np.flatnonzero(near[:m])  # (x, the share of the unknowns swept) is returned
    for _ in range(sweeps):
        s = x[level.nbr[0, at]]
        for d in range(1, 6):
            s = s + x[level.nbr[d, at]]
        x[at] = (b[at] + s) / level.diag[at]
    return level.scatter(x, size), at.shape[0] / max(m, 1)


def remember(grid, x0_warm, on=True):
    """After a captured solve (before the product's carry): p_n becomes ``PREV``, p_{n−1}
    ``PREV2``, today's x₀ ``GUESS`` — the next solve's history (nothing where not *on*)."""
    if not on:
        return
    if PREV in grid.channels:
        grid.add(PREV2, np.float32, np.nan)
        grid[PREV2] = grid[PREV].copy()
    if sparse_pressure.CARRIED in grid.channels:
        grid.add(PREV, np.float32, np.nan)
        grid[PREV] = grid[sparse_pressure.CARRIED].copy()
    if x0_warm is not None:
        grid.add(GUESS, np.float32, np.nan)
        grid[GUESS] = np.where(grid["cell"] == FLUID, x0_warm, np.nan).astype(np.float32)


def start_residual(level, b_flat, x0_flat):
    """‖b − A x₀‖ / ‖b‖ the loop starts from (1 where it starts cold)."""
    b = level.gather(b_flat)
    bb = float(np.dot(b.astype(np.float64), b))
    if x0_flat is None or bb == 0.0:
        return 1.0
    r = b - level.apply(level.gather(x0_flat))
    return float(np.sqrt(np.dot(r.astype(np.float64), r) / bb))
