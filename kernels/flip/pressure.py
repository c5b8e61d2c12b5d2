"""Pressure projection of the FLIP liquid (seed 003 §8, Alg. 1 steps "divergence",
"pressure solve", "pressure gradient to velocity"; Alg. 2 for the solver loop).

The problem is the one ``grid.py`` defines. Per FLUID cell c, with D_c the sum of its
outgoing face velocities (face differences, no 1/h):

    Σ_{n non-SOLID} (p_c − p_n) = b_c,   b = −(h/Δt)·D = −(h²/Δt)·∇·u*,  p_AIR = 0

i.e. A p = b with A the 7-point Laplacian whose diagonal counts the non-SOLID neighbours
(cells outside the grid are SOLID walls: Neumann); AIR neighbours are Dirichlet p = 0
(first-order free surface). ``project`` then sets u = u* − (Δt/h)(p_hi − p_lo) on every
face between a FLUID cell and a FLUID or AIR cell, so the new D_c = D_c + (Δt/h)(A p)_c
= −(Δt/h)·r_c with r = b − A p: the divergence left in a cell is −(Δt/h²)·r_c.
p is the pressure divided by the density (m²/s²); hydrostatic p grows by g·h per cell.

Faces touching a SOLID cell (domain walls included) carry the solid's velocity
``grid.solid_u/v/w`` — before the divergence is taken (they are data of the problem) and
after the projection. ``divergence`` reports the divergence of exactly those faces.

Solver: preconditioned conjugate gradients, matrix-free (seed 003 §8: "matrix-free CG
on the 7-point Laplacian"), float32 vectors, float64 dot products. Convergence test:
the relative residual in the 2-norm over the unknowns, ‖r‖₂/‖b‖₂ ≤ ``tolerance``, with r
the recursively updated CG residual (on float32 it tracks b − A p to ~1e-6 relative; the
tests recompute it). Alg. 2 of the seed reads the residual on the host every 10
iterations; here the device computes ‖r‖² every iteration and latches the first
iteration at which it passes (later iterations of the block become no-ops), while the
host reads that latch only every ``check_every`` iterations. The reported iteration
count is therefore exact and independent of ``check_every``; the host syncs once per
``check_every`` iterations. On the GPU a block of ``check_every`` iterations is one
CUDA graph (stream capture), replayed. On the CPU the host is the device: the residual
is tested every iteration, ``check_every`` is only validated, and the iteration counts
are those the GPU reports (up to float32 rounding).

Preconditioners (the seed names "a GPU-friendly preconditioner (multigrid-like)" as
its missing piece):
  * ``"mg"``: one geometric multigrid V-cycle (MGPCG style). Levels coarsen 2×2×2 while
    every side is ≥ 4 cells. Coarse cell types: AIR if any child is AIR, else FLUID if
    any child is FLUID, else SOLID (Dirichlet cells dominate, so no coarse region is a
    pure-Neumann, singular one). Coarse operators are rediscretised (the same integer
    Laplacian on the coarse cell types). Prolongation P: cell-centred trilinear
    (weights ¾, ¼ per axis); restriction: b_c = ½·Pᵀ r (the average Pᵀ/8 of the fine
    residual, times 4 for the (2h)²/h² scaling of the unscaled operator). Smoother:
    red-black Gauss-Seidel, ``MG_SWEEPS`` sweeps red→black before and black→red after the
    coarse correction; the coarsest level gets ``MG_COARSE_SWEEPS`` forward and as many
    backward sweeps. The colour sequence is a palindrome around a symmetric coarse
    correction, so the V-cycle is a symmetric positive definite operator and CG stays
    valid.
  * ``"jacobi"``: z = r / diag.   * ``"none"``: plain CG.

Fluid regions that touch no AIR cell (sealed by solids) make A singular (pure Neumann:
p defined up to a constant). Each such region is found (6-connected labelling), b is
made compatible by removing its mean over the region (a net inflow through moving walls
is spread evenly: it cannot be removed), and its lowest-index cell is pinned to p = 0
(it joins the system as an AIR cell would). After the solve p is shifted to zero mean
over the region; only its gradient is used. Every equation of the region then holds:
the pinned cell's follows from the others because the region's equations sum to zero.

Arrays live on the grid's module; results stay there. This module sets the problem up
and projects and runs the NumPy PCG loop (the reference), with the multigrid of
``pressure_mg.py``; on CuPy the solver is ``pressure_gpu.py`` (kernels of
``cuda/flip_pressure.cu``).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..grid import components, mac
from ..progress import report
from . import density
from .grid import AIR, FLUID, SOLID
from .pressure_mg import (MG_COARSE_SWEEPS, MG_MIN_SIDE, MG_SWEEPS, PRECONDITIONERS, _coarsen_kind,  # noqa: F401
                          _diag_of, _Level, _mg_levels, _prolong, _restrict, _vcycle, mg_level_shapes)
from .pressure_gpu import (PressureSolverGPU, _divergence_gpu, crowd_args as _crowd_args, _gpu_solver, _gpu_solvers,  # noqa: F401
                           _project_gpu, pressure_memory_bytes, release_gpu_solvers)

_F32 = np.float32


# =========================================================================== faces

def _solid_face_masks(cell):
    """Boolean masks of the u, v, w faces that touch a SOLID cell or the domain wall."""
    return mac.fixed_face_masks(cell, SOLID, True)


def _boundary_faces(grid):
    """The faces as the projection sees them: solid velocity where a SOLID cell or a wall
    is on either side, the grid's velocity elsewhere (the grid core's ``fixed_faces``)."""
    return mac.fixed_faces(grid.u, grid.v, grid.w, grid.cell, SOLID, True,
                           (grid.solid_u, grid.solid_v, grid.solid_w))


def _check_grid(grid):
    nx, ny, nz = grid.shape
    fu, fv, fw = mac.face_shapes(nx, ny, nz)
    want = {"cell": (nz, ny, nx), "u": fu, "v": fv, "w": fw, "solid_u": fu, "solid_v": fv, "solid_w": fw}
    for name, shape in want.items():
        got = tuple(getattr(grid, name).shape)
        if got != shape:
            raise InputError(f"FLIP grid array {name} has shape {got}, expected {shape} for a {nx}×{ny}×{nz} grid")


def divergence(grid):
    """∇·u (1/s) per FLUID cell, (nz, ny, nx) float32, 0 elsewhere: face differences / h,
    with faces touching SOLID cells or walls taken from ``grid.solid_u/v/w``."""
    _check_grid(grid)
    xp = grid.xp
    if xp is not np:
        return _divergence_gpu(grid, _F32(1.0 / grid.h))
    D = mac.face_sum(*_boundary_faces(grid))
    return np.where(grid.cell == FLUID, D * _F32(1.0 / grid.h), _F32(0.0)).astype(np.float32)


# =========================================================================== cell set-up

def _solver_cells(cell, xp):
    """(kind, enclosed, labels): the solver's cell types — the grid's, with the lowest
    cell of every FLUID region that touches no AIR turned into AIR (pinned, p = 0) —,
    a flat mask of the cells of such sealed regions (or None) and their region labels."""
    fluid = cell == FLUID
    kind = cell.astype(xp.uint8, copy=True)
    labels = components.label_components(fluid)
    n = int(cell.size)
    touches_air = mac.any_neighbour(cell == AIR) & fluid
    reaches = xp.zeros(n + 1, dtype=bool)
    reaches[labels[touches_air.reshape(-1)]] = True
    enclosed = fluid.reshape(-1) & ~reaches[labels]
    if not bool(enclosed.any()):
        return kind, None, None  # the labels are not needed: free them before the solve
    pins = enclosed & (labels == xp.arange(n, dtype=labels.dtype))
    kind.reshape(-1)[pins] = AIR
    return kind, enclosed, labels


def _region_mean_removed(a, enclosed, labels, xp):
    """*a* (flat) minus its mean over each sealed region, on the cells of those regions."""
    idx = labels[enclosed]
    n = int(a.size)
    sums = xp.bincount(idx, weights=a[enclosed].astype(xp.float64), minlength=n)
    counts = xp.bincount(idx, weights=xp.ones(idx.shape, xp.float64), minlength=n)  # weighted: no CUB histogram
    out = a.copy()
    out[enclosed] = (a[enclosed] - (sums[idx] / counts[idx])).astype(a.dtype)
    return out


# =========================================================================== NumPy solver

def _dot(a, b):
    return float(np.add.reduce((a.astype(np.float64) * b).ravel()))


def _pcg_numpy(kind, b, tolerance, max_iterations, preconditioner, progress=None, check_every=10):
    """PCG on A p = b (Alg. 2 of the seed with a preconditioner). Returns
    (p, iterations, relative residual, converged). *progress* hears every
    *check_every* iterations (False cancels)."""
    levels = _mg_levels(kind) if preconditioner == "mg" else [_Level(kind)]
    L = levels[0]
    if preconditioner == "mg":
        def precondition(r):
            return _vcycle(levels, r)
    elif preconditioner == "jacobi":
        def precondition(r):
            return r / L.safe
    else:
        def precondition(r):
            return r.copy()
    x = np.zeros_like(b)
    r = b.copy()
    bb = _dot(b, b)
    thresh = tolerance * tolerance * bb
    rr = bb
    if not math.isfinite(bb) or rr <= thresh:
        return x, 0, (0.0 if bb == 0.0 else math.sqrt(rr / bb)), math.isfinite(bb)
    z = precondition(r)
    d = z.copy()
    rz = _dot(r, z)
    iterations, converged = 0, False
    while iterations < max_iterations:
        q = L.apply(d)
        dq = _dot(d, q)
        alpha = rz / dq if dq > 0.0 else 0.0
        x += _F32(alpha) * d
        r -= _F32(alpha) * q
        rr = _dot(r, r)
        iterations += 1
        if not math.isfinite(rr):
            break
        if rr <= thresh:
            converged = True
            break
        if iterations % check_every == 0:
            report(progress, iterations / max_iterations, f"pressure: iteration {iterations}")
        z = precondition(r)
        rz_new = _dot(r, z)
        beta = rz_new / rz if rz != 0.0 else 0.0
        rz = rz_new
        d = z + _F32(beta) * d
    return x, iterations, math.sqrt(rr / bb), converged


# =========================================================================== public API

def _check_args(dt, tolerance, max_iterations, preconditioner, check_every):
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0.0):
        raise InputError(f"The FLIP time step must be a positive number of seconds, not {dt}")
    tolerance = float(tolerance)
    if not (math.isfinite(tolerance) and tolerance > 0.0):
        raise InputError(f"The pressure tolerance must be a positive relative residual, not {tolerance}")
    if int(max_iterations) < 1:
        raise InputError(f"The pressure solve needs at least 1 iteration, not {max_iterations}")
    if preconditioner not in PRECONDITIONERS:
        raise InputError(f"Unknown pressure preconditioner {preconditioner!r}: "
                         f"use one of {', '.join(PRECONDITIONERS)}")
    if int(check_every) < 1:
        raise InputError(f"check_every must be at least 1 iteration, not {check_every}")
    return dt, tolerance, int(max_iterations), int(check_every)


def pressure_rhs(grid, dt, source=None):
    """(b, kind, enclosed, labels): the right-hand side b = −(h/Δt)·D on the solver's
    unknowns (sealed regions made compatible, pinned cells 0) and the solver's cell types.
    *source*: a target divergence s (1/s) per FLUID cell — an (nz, ny, nx) float32 array or
    a ``density.Crowding`` (the counts it is made from; on CuPy added in the divergence
    kernel) — b += (h²/Δt)·s (``density.py``: the projection then leaves ∇·u = s); None: b as ever."""
    xp = grid.xp
    kind, enclosed, labels = _solver_cells(grid.cell, xp)
    scale = _F32(-grid.h / dt)
    if xp is np:
        D = mac.face_sum(*_boundary_faces(grid))
        b = np.where(grid.cell == FLUID, D * scale, _F32(0.0)).astype(np.float32)
    else:
        crowd = _crowd_args(grid, source) if isinstance(source, density.Crowding) else None
        b = _divergence_gpu(grid, scale, crowd)
        if crowd is not None:
            source = None  # added in the kernel
    if source is not None:
        fluid = grid.cell == FLUID
        b = xp.where(fluid, b + _F32(grid.h * grid.h / dt) * density.source_array(source, fluid),
                     b).astype(xp.float32)
    if enclosed is not None:
        b = _region_mean_removed(b.reshape(-1), enclosed, labels, xp).reshape(b.shape)
        b = xp.where(kind == FLUID, b, _F32(0.0)).astype(xp.float32)
    return b, kind, enclosed, labels


def solve_pressure(grid, dt, tolerance=1e-4, max_iterations=500, preconditioner="mg", check_every=10,
                   progress=None, source=None):
    """Solve A p = b (module docstring) by matrix-free PCG. Returns (p, stats): p (nz, ny,
    nx) float32 on the grid's module, 0 outside FLUID cells; stats = {"iterations",
    "residual" (‖r‖₂/‖b‖₂ over the unknowns), "converged"}. *progress* hears once per
    block of *check_every* iterations (on the GPU after the block's one host sync);
    False cancels (``Cancelled``). *source*: ``pressure_rhs``'s target divergence (NumPy)."""
    _check_grid(grid)
    dt, tolerance, max_iterations, check_every = _check_args(dt, tolerance, max_iterations,
                                                             preconditioner, check_every)
    xp = grid.xp
    b, kind, enclosed, labels = pressure_rhs(grid, dt, source)
    if xp is np:
        p, iterations, residual, converged = _pcg_numpy(kind, b, tolerance, max_iterations, preconditioner,
                                                        progress, check_every)
    else:
        solver = _gpu_solver(kind.shape, preconditioner, check_every)
        p, iterations, residual, converged = solver.solve(kind, b, tolerance, max_iterations, progress)
    if enclosed is not None:  # only ∇p matters: zero mean over each sealed region
        p = _region_mean_removed(p.reshape(-1), enclosed, labels, xp).reshape(p.shape)
    p = xp.where(grid.cell == FLUID, p, _F32(0.0)).astype(xp.float32, copy=False)
    return p, {"iterations": int(iterations), "residual": float(residual), "converged": bool(converged)}


def project(grid, p, dt):
    """u ← u* − (Δt/h)(p_hi − p_lo) on faces between a FLUID cell and a FLUID or AIR cell
    (p = 0 in AIR); faces touching SOLID cells or walls ← grid.solid_u/v/w; faces between
    two AIR cells are left alone. In place on grid.u, grid.v, grid.w."""
    _check_grid(grid)
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0.0):
        raise InputError(f"The FLIP time step must be a positive number of seconds, not {dt}")
    xp = grid.xp
    nx, ny, nz = grid.shape
    if tuple(p.shape) != (nz, ny, nx):
        raise InputError(f"pressure has shape {tuple(p.shape)}, expected {(nz, ny, nx)}")
    c = _F32(dt / grid.h)
    if xp is not np:
        _project_gpu(grid, xp.ascontiguousarray(p, dtype=xp.float32), c)
        return
    mac.project(grid.u, grid.v, grid.w, np.asarray(p, dtype=np.float32), c, grid.cell, FLUID, SOLID, True,
                (grid.solid_u, grid.solid_v, grid.solid_w))


def project_pressure(grid, dt, **solver_options):
    """The whole stage: solve, then project. Returns (p, stats)."""
    p, stats = solve_pressure(grid, dt, **solver_options)
    project(grid, p, dt)
    return p, stats


def pressure_stage_bytes(shape, preconditioner="mg", enclosed=False) -> int:
    """Peak device bytes of ``solve_pressure`` on the GPU beyond the grid, with its solver
    (cached between substeps, so alive throughout):

    * cell set-up: the fluid mask and solver kinds (1 + 1 B/cell) and ``label_components``
      (int32 labels: the previous round's, the current, the running one, an index
      clamp and a gather, 5 × 4 B; its masks reuse the pool's blocks);
    * solve: kinds (1), b (4), the solution's copy (4), the final mask and masked p
      (1 + 4); sealed regions keep their labels and mask (4 + 1) to the end."""
    nx, ny, nz = (int(n) for n in shape)
    cells = nx * ny * nz
    idx = 4 if cells < 2 ** 31 - 1 else 8
    setup = cells * (2 + 5 * idx + 1)
    solve = cells * (1 + 4 + 4 + 1 + 4) + (cells * (idx + 1) if enclosed else 0)
    return int(pressure_memory_bytes(shape, preconditioner) + max(setup, solve))
