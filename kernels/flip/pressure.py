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

Arrays live on the grid's module (NumPy, or CuPy with kernels from
``cuda/flip_pressure.cu``); results stay there.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import components, mac
from ..grid.launch import GraphLoop, Kernels
from ..progress import report
from .grid import AIR, FLUID, SOLID

PRECONDITIONERS = ("mg", "jacobi", "none")
MG_SWEEPS = 2  # red-black GS sweeps before and after each coarse correction
MG_COARSE_SWEEPS = 8  # forward (and as many backward) sweeps on the coarsest level
MG_MIN_SIDE = 4  # coarsen while every side has at least this many cells

_CU = "flip_pressure.cu"
_OPTIONS = ()
_THREADS = 256
_MAX_BLOCKS = 1024  # blocks of the fused dot-product kernels (fixed: deterministic sums)
_F32 = np.float32
_SOLVER_CACHE = 2  # GPU solvers (buffers + graph) kept per process, most recent first

# Device state (int) and scalars (double) layout of the PCG loop; flip_pressure.cu gets
# these (and the cell types, the preconditioner numbers) as -D options from here.
_S_IT, _S_STOPPED, _S_CONVERGED, _S_MAXIT = 0, 1, 2, 3  # iterations, stopped, converged, limit
_D_BB, _D_THRESH, _D_RR, _D_RZ, _D_ALPHA, _D_BETA = 0, 1, 2, 3, 4, 5  # ‖b‖², tol²‖b‖², ‖r‖², r·z, α, β
_K = Kernels(_CU, _OPTIONS, _THREADS, defines={
    **mac.CELL_TYPES, "S_IT": _S_IT, "S_STOPPED": _S_STOPPED, "S_CONVERGED": _S_CONVERGED, "S_MAXIT": _S_MAXIT,
    "D_BB": _D_BB, "D_THRESH": _D_THRESH, "D_RR": _D_RR, "D_RZ": _D_RZ, "D_ALPHA": _D_ALPHA, "D_BETA": _D_BETA,
    **{f"PRE_{name.upper()}": i for i, name in enumerate(PRECONDITIONERS)}})


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


def _diag_of(kind):
    """uint8 per cell: non-SOLID neighbours (inside the grid) of a FLUID cell, else 0."""
    d = mac.neighbour_count(kind != SOLID)
    d[kind != FLUID] = 0
    return d


def _coarse_shape(shape):
    return tuple((n + 1) // 2 for n in shape)


def mg_level_shapes(shape):
    """(nz, ny, nx) of every multigrid level, finest first."""
    shapes = [tuple(int(n) for n in shape)]
    while min(shapes[-1]) >= MG_MIN_SIDE:
        shapes.append(_coarse_shape(shapes[-1]))
    return shapes


def _coarsen_kind(kind, xp):
    """Coarse cell types from 2×2×2 children: AIR if any child is AIR, else FLUID if any
    is FLUID, else SOLID (children outside the grid do not count)."""
    nz, ny, nx = kind.shape
    cz, cy, cx = _coarse_shape(kind.shape)
    pad = xp.full((2 * cz, 2 * cy, 2 * cx), SOLID, dtype=xp.uint8)
    pad[:nz, :ny, :nx] = kind
    blocks = pad.reshape(cz, 2, cy, 2, cx, 2)
    any_air = (blocks == AIR).any(axis=(1, 3, 5))
    any_fluid = (blocks == FLUID).any(axis=(1, 3, 5))
    return xp.where(any_air, AIR, xp.where(any_fluid, FLUID, SOLID)).astype(xp.uint8)


# =========================================================================== NumPy reference

class _Level:
    """One multigrid level (NumPy): diag, its float copy, colour masks of the unknowns."""

    def __init__(self, kind):
        self.kind = kind
        self.diag = _diag_of(kind)
        self.unknown = self.diag > 0
        self.d = self.diag.astype(np.float32)
        self.safe = np.where(self.unknown, self.d, _F32(1.0))
        red = mac.red_cells(kind.shape, np)
        self.colours = (red & self.unknown, ~red & self.unknown)

    def apply(self, x):
        """A x (0 off the unknowns)."""
        return np.where(self.unknown, self.d * x - mac.neighbour_sum(x), _F32(0.0))

    def sweep(self, x, b, colour):
        """One colour of Gauss-Seidel: x_c ← (b_c + Σ x_n) / diag_c."""
        cells = self.colours[colour]
        new = (b + mac.neighbour_sum(x)) / self.safe
        x[cells] = new[cells]


def _prolong_axis(c, axis, nf):
    """Cell-centred linear interpolation along *axis*: fine 2I ← ¾c_I + ¼c_{I−1},
    fine 2I+1 ← ¾c_I + ¼c_{I+1} (missing coarse cells count 0), cropped to nf."""
    c = np.moveaxis(c, axis, 0)
    nc = c.shape[0]
    padded = np.zeros((nc + 2,) + c.shape[1:], dtype=c.dtype)
    padded[1:-1] = c
    even = _F32(0.75) * padded[1:-1] + _F32(0.25) * padded[:-2]
    odd = _F32(0.75) * padded[1:-1] + _F32(0.25) * padded[2:]
    f = np.empty((2 * nc,) + c.shape[1:], dtype=c.dtype)
    f[0::2], f[1::2] = even, odd
    return np.moveaxis(f[:nf], 0, axis)


def _restrict_axis(f, axis, nc):
    """The transpose of ``_prolong_axis``: coarse I ← ¾(f_2I + f_2I+1) + ¼(f_2I−1 + f_2I+2)."""
    f = np.moveaxis(f, axis, 0)
    nf = f.shape[0]
    padded = np.zeros((2 * nc,) + f.shape[1:], dtype=f.dtype)
    padded[:nf] = f
    fe, fo = padded[0::2], padded[1::2]
    c = _F32(0.75) * (fe + fo)
    c[1:] += _F32(0.25) * fo[:-1]
    c[:-1] += _F32(0.25) * fe[1:]
    return np.moveaxis(c, 0, axis)


def _prolong(xc, fine_shape):
    for axis in range(3):
        xc = _prolong_axis(xc, axis, fine_shape[axis])
    return xc


def _restrict(rf, coarse_shape):
    for axis in range(3):
        rf = _restrict_axis(rf, axis, coarse_shape[axis])
    return rf


def _vcycle(levels, b, level=0):
    """z ≈ A⁻¹ b by one V-cycle (a fixed, symmetric positive definite linear operator)."""
    L = levels[level]
    x = np.zeros_like(b)
    if level == len(levels) - 1:
        for _ in range(MG_COARSE_SWEEPS):
            L.sweep(x, b, 0)
            L.sweep(x, b, 1)
        for _ in range(MG_COARSE_SWEEPS):
            L.sweep(x, b, 1)
            L.sweep(x, b, 0)
        return x
    for _ in range(MG_SWEEPS):  # pre-smoothing: red, black
        L.sweep(x, b, 0)
        L.sweep(x, b, 1)
    r = np.where(L.unknown, b - L.apply(x), _F32(0.0))
    C = levels[level + 1]
    bc = np.where(C.unknown, _F32(0.5) * _restrict(r, C.kind.shape), _F32(0.0))
    xc = _vcycle(levels, bc, level + 1)
    x += np.where(L.unknown, _prolong(xc, L.kind.shape), _F32(0.0))
    for _ in range(MG_SWEEPS):  # post-smoothing: black, red (the adjoint order)
        L.sweep(x, b, 1)
        L.sweep(x, b, 0)
    return x


def _mg_levels(kind):
    shapes = mg_level_shapes(kind.shape)
    kinds = [kind]
    for _ in shapes[1:]:
        kinds.append(_coarsen_kind(kinds[-1], np))
    return [_Level(k) for k in kinds]


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


def pressure_rhs(grid, dt):
    """(b, kind, enclosed, labels): the right-hand side b = −(h/Δt)·D on the solver's
    unknowns (sealed regions made compatible, pinned cells 0) and the solver's cell types."""
    xp = grid.xp
    kind, enclosed, labels = _solver_cells(grid.cell, xp)
    scale = _F32(-grid.h / dt)
    if xp is np:
        D = mac.face_sum(*_boundary_faces(grid))
        b = np.where(grid.cell == FLUID, D * scale, _F32(0.0)).astype(np.float32)
    else:
        b = _divergence_gpu(grid, scale)
    if enclosed is not None:
        b = _region_mean_removed(b.reshape(-1), enclosed, labels, xp).reshape(b.shape)
        b = xp.where(kind == FLUID, b, _F32(0.0)).astype(xp.float32)
    return b, kind, enclosed, labels


def solve_pressure(grid, dt, tolerance=1e-4, max_iterations=500, preconditioner="mg", check_every=10,
                   progress=None):
    """Solve A p = b (module docstring) by matrix-free PCG. Returns (p, stats): p (nz, ny,
    nx) float32 on the grid's module, 0 outside FLUID cells; stats = {"iterations",
    "residual" (‖r‖₂/‖b‖₂ over the unknowns), "converged"}. *progress* hears once per
    block of *check_every* iterations (on the GPU after the block's one host sync);
    False cancels (``Cancelled``)."""
    _check_grid(grid)
    dt, tolerance, max_iterations, check_every = _check_args(dt, tolerance, max_iterations,
                                                             preconditioner, check_every)
    xp = grid.xp
    b, kind, enclosed, labels = pressure_rhs(grid, dt)
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


def pressure_memory_bytes(shape, preconditioner="mg"):
    """Device bytes a ``PressureSolverGPU`` for a grid of (nx, ny, nz) cells allocates
    (and keeps while cached): the six float32 CG vectors b, x, r, z, d, q; per level the
    uint8 kind and diag; for the multigrid the level-0 residual and, per coarser level,
    float32 b and x (and r but on the coarsest)."""
    nx, ny, nz = (int(n) for n in shape)
    cells = nx * ny * nz
    total = cells * (6 * 4 + 2)
    if preconditioner == "mg":
        shapes = mg_level_shapes((nz, ny, nx))
        total += cells * 4
        for i, s in enumerate(shapes[1:], start=1):
            total += int(np.prod(s)) * (2 + 8 + (4 if i < len(shapes) - 1 else 0))
    return int(total + 2 * 8 * _MAX_BLOCKS + 1024)


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


# =========================================================================== CuPy

def _divergence_gpu(grid, scale):
    cp = grid.xp
    nx, ny, nz = grid.shape
    out = cp.empty((nz, ny, nx), dtype=cp.float32)
    args = [cp.ascontiguousarray(a, dtype=cp.float32) for a in
            (grid.u, grid.v, grid.w, grid.solid_u, grid.solid_v, grid.solid_w)]
    cell = cp.ascontiguousarray(grid.cell, dtype=cp.uint8)
    _K.launch("divergence", out.size, (*args, cell, np.int32(nx), np.int32(ny), np.int32(nz), _F32(scale), out))
    return out


def _project_gpu(grid, p, c):
    cp = grid.xp
    nx, ny, nz = grid.shape
    for name in ("u", "v", "w"):
        a = getattr(grid, name)
        if not (a.dtype == cp.float32 and a.flags.c_contiguous):
            setattr(grid, name, cp.ascontiguousarray(a, dtype=cp.float32))
    solid = [cp.ascontiguousarray(a, dtype=cp.float32) for a in (grid.solid_u, grid.solid_v, grid.solid_w)]
    cell = cp.ascontiguousarray(grid.cell, dtype=cp.uint8)
    total = mac.face_count(nx, ny, nz)
    _K.launch("project", total, (grid.u, grid.v, grid.w, *solid, cell, p, np.int32(nx), np.int32(ny), np.int32(nz), c))


_gpu_solvers: "OrderedDict[tuple, PressureSolverGPU]" = OrderedDict()


def _gpu_solver(shape, preconditioner, check_every):
    import cupy as cp

    key = (tuple(shape), preconditioner, check_every, cp.cuda.Device().id)
    solver = _gpu_solvers.pop(key, None)
    if solver is None:
        while len(_gpu_solvers) >= _SOLVER_CACHE:
            _gpu_solvers.popitem(last=False)
        solver = PressureSolverGPU(shape, preconditioner, check_every)
    _gpu_solvers[key] = solver
    return solver


def release_gpu_solvers():
    """Drop the cached GPU solvers (their buffers and graphs)."""
    _gpu_solvers.clear()


class PressureSolverGPU:
    """The PCG loop of Alg. 2 on the device for one grid shape (nz, ny, nx): owns the CG
    vectors, the multigrid levels, the device scalars and the CUDA graph of one block of
    ``check_every`` iterations. Every kernel of the loop first reads the device's
    ``stopped`` flag, so iterations after convergence (or the iteration limit) are no-ops."""

    def __init__(self, shape, preconditioner="mg", check_every=10, use_graph=True):
        import cupy as cp

        self.cp = cp
        self.shape = tuple(int(n) for n in shape)
        self.preconditioner = preconditioner
        self.check_every = int(check_every)
        self.use_graph = bool(use_graph)
        nz, ny, nx = self.shape
        self.cells = nx * ny * nz
        backend.ensure_fits(pressure_memory_bytes((nx, ny, nz), preconditioner), "the FLIP pressure solve", cp)
        vec = lambda s: cp.zeros(s, dtype=cp.float32)  # noqa: E731
        self.b, self.x, self.r, self.z, self.d, self.q = (vec(self.shape) for _ in range(6))
        self.red_blocks = min(_MAX_BLOCKS, (self.cells + _THREADS - 1) // _THREADS)
        self.partials = cp.zeros(2 * self.red_blocks, dtype=cp.float64)
        self.scalars = cp.zeros(8, dtype=cp.float64)
        self.state = cp.zeros(4, dtype=cp.int32)
        shapes = mg_level_shapes(self.shape) if preconditioner == "mg" else [self.shape]
        self.levels = []
        for level, s in enumerate(shapes):
            L = {"shape": s, "kind": cp.zeros(s, dtype=cp.uint8), "diag": cp.zeros(s, dtype=cp.uint8)}
            if preconditioner == "mg":
                if level == 0:  # the V-cycle maps the CG residual r to z
                    L.update(b=self.r, x=self.z, r=vec(s))
                else:
                    L.update(b=vec(s), x=vec(s), r=vec(s) if level < len(shapes) - 1 else None)
            self.levels.append(L)
        self.loop = GraphLoop(self._block, enabled=use_graph)  # check_every iterations, one CUDA graph
        _K.load("build_diag", "coarsen_kind", "cg_init", "finish_init", "apply_laplacian", "finish_alpha",
                "update_solution", "dot_rz", "finish_beta", "update_direction", "mg_smooth", "mg_residual",
                "mg_restrict", "mg_prolong_add")  # compile and load before any capture

    # ------------------------------------------------------------------ launches

    @staticmethod
    def _dims(s):
        nz, ny, nx = s
        return np.int32(nx), np.int32(ny), np.int32(nz)

    def _cells_launch(self, name, s, args):
        _K.launch(name, int(np.prod(s)), args)

    def _reduce_launch(self, name, args):
        _K.launch_grid(name, (self.red_blocks,), (_THREADS,), args)

    def _finish(self, name, args):
        _K.launch_grid(name, (1,), (1024,), args)

    def _set_levels(self, kind):
        L0 = self.levels[0]
        L0["kind"][...] = kind
        for level, L in enumerate(self.levels):
            if level > 0:
                F = self.levels[level - 1]
                self._cells_launch("coarsen_kind", L["shape"],
                                   (F["kind"], L["kind"], *self._dims(F["shape"]), *self._dims(L["shape"])))
            self._cells_launch("build_diag", L["shape"], (L["kind"], L["diag"], *self._dims(L["shape"])))

    def _smooth(self, L, colour, first=False):
        nz, ny, nx = L["shape"]
        threads = nx * ny * nz if first else ((nx + 1) // 2) * ny * nz
        _K.launch("mg_smooth", threads, (L["x"], L["b"], L["diag"], *self._dims(L["shape"]), np.int32(colour),
                                         np.int32(first), self.state))

    def _vcycle(self):
        """z = V-cycle(r): the same sequence as the NumPy ``_vcycle``."""
        levels = self.levels
        last = len(levels) - 1
        for level in range(last):  # down: pre-smooth red, black; residual; restrict
            L, C = levels[level], levels[level + 1]
            for sweep in range(MG_SWEEPS):
                self._smooth(L, 0, first=sweep == 0)
                self._smooth(L, 1)
            self._cells_launch("mg_residual", L["shape"], (L["x"], L["b"], L["diag"], L["r"],
                                                           *self._dims(L["shape"]), self.state))
            self._cells_launch("mg_restrict", C["shape"], (L["r"], C["b"], C["diag"], *self._dims(L["shape"]),
                                                           *self._dims(C["shape"]), self.state))
        L = levels[last]
        for sweep in range(MG_COARSE_SWEEPS):
            self._smooth(L, 0, first=sweep == 0)
            self._smooth(L, 1)
        for _ in range(MG_COARSE_SWEEPS):
            self._smooth(L, 1)
            self._smooth(L, 0)
        for level in range(last - 1, -1, -1):  # up: prolong-add; post-smooth black, red
            L, C = levels[level], levels[level + 1]
            self._cells_launch("mg_prolong_add", L["shape"], (C["x"], L["x"], L["diag"], *self._dims(L["shape"]),
                                                              *self._dims(C["shape"]), self.state))
            for _ in range(MG_SWEEPS):
                self._smooth(L, 1)
                self._smooth(L, 0)

    def _precondition_and_dot(self):
        """z = M r (MG) and the partial sums of r·z; for Jacobi / none, update_solution
        already did both."""
        if self.preconditioner == "mg":
            self._vcycle()
            self._reduce_launch("dot_rz", (self.r, self.z, np.int64(self.cells),
                                           self.partials[self.red_blocks:], self.state))

    def _mode(self):
        return np.int32(PRECONDITIONERS.index(self.preconditioner))  # 0 mg, 1 jacobi, 2 none

    def _z(self):
        return self.r if self.preconditioner == "none" else self.z

    def _iteration(self):
        """One PCG iteration (Alg. 2 body with z = M r), every scalar on the device."""
        dims = self._dims(self.shape)
        G = np.int32(self.red_blocks)
        diag = self.levels[0]["diag"]
        self._reduce_launch("apply_laplacian", (self.d, self.q, diag, *dims, self.partials, self.state))  # q = A d
        self._finish("finish_alpha", (self.partials, G, self.scalars, self.state))  # α = r·z / d·q
        self._reduce_launch("update_solution", (self.x, self.r, self.d, self.q, self.z, diag, np.int64(self.cells),
                                                self._mode(), self.scalars, self.partials, self.state))
        self._precondition_and_dot()  # z = M r
        self._finish("finish_beta", (self.partials, G, self.scalars, self.state, np.int32(0)))  # β, ‖r‖² test
        self._reduce_launch("update_direction", (self.d, self._z(), np.int64(self.cells), self.scalars,
                                                 self.state))  # d = z + β d

    def _block(self):
        for _ in range(self.check_every):
            self._iteration()

    # ------------------------------------------------------------------ solve

    def solve(self, kind, b, tolerance, max_iterations, progress=None):
        cp = self.cp
        self._set_levels(kind)
        self.b[...] = b
        self.state[...] = cp.asarray(np.array([0, 0, 0, max_iterations], dtype=np.int32))
        G = np.int32(self.red_blocks)
        diag = self.levels[0]["diag"]
        # x = 0, d = 0, r = b, ‖b‖²; stop at once if b = 0
        self._reduce_launch("cg_init", (self.b, self.x, self.r, self.d, self.z, diag, np.int64(self.cells),
                                        self._mode(), self.partials))
        self._finish("finish_init", (self.partials, G, self.scalars, self.state, np.float64(tolerance)))
        self._precondition_and_dot()  # z = M r, r·z
        self._finish("finish_beta", (self.partials, G, self.scalars, self.state, np.int32(1)))  # rz, β = 0
        self._reduce_launch("update_direction", (self.d, self._z(), np.int64(self.cells), self.scalars,
                                                 self.state))  # d = z
        self.loop.capture()
        launched = 0
        while True:
            host_state = self.state.get()  # the one host sync per check (Alg. 2)
            if host_state[_S_STOPPED] or launched >= max_iterations:
                break
            if launched:  # between blocks, on the state this check read anyway: no extra sync
                report(progress, launched / max_iterations, f"pressure: iteration {launched}")
            self.loop.run()  # check_every iterations (the graph, or launch by launch)
            launched += self.check_every
        scal = self.scalars.get()
        bb, rr = float(scal[_D_BB]), float(scal[_D_RR])
        residual = 0.0 if bb == 0.0 else math.sqrt(rr / bb) if math.isfinite(rr) else math.inf
        return (self.x.copy(), int(host_state[_S_IT]), residual, bool(host_state[_S_CONVERGED]))
