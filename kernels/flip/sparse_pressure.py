"""Pressure projection of the sparse FLIP solver (seed 003 §8, Alg. 2) on the FLUID cells
of a ``SparseFlipGrid``: the problem ``pressure.py`` states, on bricks.

Per FLUID cell c, D_c the sum of its outgoing face velocities (faces touching SOLID cells
or beyond a closed domain take the solid's velocity):

    Σ_{n non-SOLID} (p_c − p_n) = b_c,   b = −(h/Δt)·D,   p_AIR = 0,

A the 7-point Laplacian read through the neighbour index (the apron, §8); a missing
neighbour brick is AIR (the topology's margin keeps FLUID cells away from one). Sealed
FLUID regions (no AIR neighbour) are labelled on the bricks, b made compatible and their
lowest flat cell pinned, as in ``pressure.py``. ``project`` then subtracts (Δt/h)·∇p on
faces next to FLUID and restores the solid faces.

Solver: matrix-free PCG (Alg. 2) on the compacted unknowns (``Unknowns``: the FLUID
cells' values, red (i + j + k even) then black, plus a 0 sentinel every other neighbour
points to, so the work follows the fluid, not the bricks), float32 vectors, float64 dot
products, to the dense solver's relative residual ‖r‖₂/‖b‖₂ ≤ tolerance. The convergence
test runs on the device: every iteration updates a device flag ``done`` (converged,
non-finite or at the iteration limit) and every later update of the block is masked by
it (α = β = 0, the counter stops), so iterations after convergence change nothing; the
host reads the flag once per ``check_every`` iterations and the iteration count is
exact. Preconditioners (``PRECONDITIONERS``: name → (grid, kind, unknowns) → (r → z)):
``"mg"`` (default), the dense solver's multigrid V-cycle over a sparse hierarchy
(``sparse_multigrid.py``; the dense solver's iteration counts with
``sparse_multigrid.MG_OMEGA`` 1, fewer with its over-relaxed default), ``"jacobi"`` (z = r ·
(1/diag)) and ``"none"``. This module's loop is the NumPy reference; on CuPy the same
tables go to ``sparse_pressure_gpu.py`` (RawKernels of ``cuda/flip_sparse_pressure.cu``,
a CUDA graph per block of iterations).

Set-up, once per solve: on CuPy the right-hand side, cell types and sealed-region labels by
the four kernels of ``sparse_pressure_cells.py`` (``SETUP_KERNELS`` "fused", the default;
"reference": the array code below, the same values); the index tables (``Unknowns``, the
multigrid's) by flatnonzero, sort and binary search (on CuPy with
``VOXFX_SPARSE_PRESSURE_SETUP=device``, the kernels of ``sparse_pressure_setup.py``: the same
integers, sizes kept on the device, one host read for level 0's m — which brings the
sealed count back too, ``sparse_pressure_setup.staged_setup`` — and one for the
hierarchy), reused across substeps while the topology and cell types stay the same
(``solver_tables``); sealed regions by connected components of the FLUID cells on their
compacted neighbour table (SciPy's ``connected_components`` on NumPy, a union-find kernel
on the device; the result is each component's lowest flat index either way).

Warm start (issue 24; ``solve_pressure(..., warm_start=True)``): the PCG starts from the last
solve's p, carried per cell in the grid channel ``CARRIED`` (``sparse_pressure_warm``).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..errors import InputError
from ..progress import report
from . import density, sparse_multigrid
from .grid import AIR, FLUID, SOLID
from .sparse_multigrid import CompactLevel
from .sparse_pressure_cells import around_kernels
from .sparse_pressure_warm import (CARRIED, carry, initial_guess, relax_guess,  # noqa: F401 (callers use them here)
                                   warm_start_on)
from .sparse_transfer import solid_touch

_F32 = np.float32
# The set-up on CuPy (cell types, sealed regions, right-hand side): "reference", this
# module's array code, or "fused", the kernels of sparse_pressure_cells.py (the same values).
SETUP_KERNELS = os.environ.get("VOXFX_SPARSE_PRESSURE_CELLS", "fused")
REUSE_TABLES = os.environ.get("VOXFX_SPARSE_PRESSURE_REUSE", "1") != "0"  # solver_tables
# The projection on CuPy: "kernel", sparse_pressure_cells.project (one launch), or
# "reference", this module's array code (the same values).
PROJECT = os.environ.get("VOXFX_SPARSE_PROJECT", "kernel")


def _multigrid(grid, kind, level):
    from .sparse_multigrid import VCycle

    return VCycle(grid, kind, level)


def _jacobi(grid, kind, level):
    inv = _F32(1) / level.diag  # the sentinel's diag is 1 and its r 0
    return lambda r: r * inv  # the device's z = r · (1/diag), rounded alike


def _identity(grid, kind, level):
    return lambda r: r.copy()


PRECONDITIONERS = {"mg": _multigrid, "jacobi": _jacobi, "none": _identity}


def boundary_faces(grid):
    """u, v, w as the projection sees them: the solid's velocity on faces touching SOLID
    cells (walls included) or not existing, the grid's elsewhere."""
    xp = grid.xp
    return tuple(xp.where(solid_touch(grid, comp), grid["solid_" + n], grid[n]) for comp, n in enumerate(grid.FACES))


def face_sum(grid, u, v, w):
    """D per cell: outgoing minus incoming face velocities, added x, y, then z (``mac.face_sum``)."""
    return ((grid.neighbour(u, 1) - u) + (grid.neighbour(v, 3) - v)) + (grid.neighbour(w, 5) - w)


def neighbour_sum(grid, x):
    """Σ x over the six neighbours, −x, +x, −y, +y, −z, +z (``mac.neighbour_sum``)."""
    s = grid.neighbour(x, 0)
    for d in range(1, 6):
        s = s + grid.neighbour(x, d)
    return s


def label_components(grid, mask):
    """Per cell of *mask* the lowest flat index of its 6-connected component (through
    the neighbour index), ``grid.size`` elsewhere (``components.label_components``):
    components of the compacted mask cells and their +x, +y, +z links."""
    xp = grid.xp
    n = grid.size
    out = xp.full(n, n, xp.int64)
    cells = xp.flatnonzero(mask)  # flat order: the lowest compact index is the lowest flat one
    count = int(cells.shape[0])
    if count == 0:
        return out
    position = xp.full(n, -1, xp.int32)
    position[cells] = xp.arange(count, dtype=xp.int32)
    links = xp.stack([_compact(grid.nbr[d][cells], position, -1, xp) for d in (1, 3, 5)])
    if xp is np:
        roots = _component_roots(links)
    else:
        from .sparse_pressure_gpu import component_roots

        roots = component_roots(links)
    out[cells] = cells[roots]
    return out


def _compact(flat, position, none, xp):
    """Compact positions of flat neighbour indices (−1: missing), *none* where missing."""
    return xp.where(flat >= 0, position[xp.maximum(flat, 0)], none).astype(xp.int32)


def _component_roots(links):
    """NumPy: per compacted cell the lowest index of its component, from its (3, n) links
    (−1: none). SciPy's connected_components, or min-label propagation without SciPy."""
    count = links.shape[1]
    have = links >= 0
    a = np.broadcast_to(np.arange(count), links.shape)[have]
    b = links[have].astype(np.int64)
    try:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components
    except ImportError:
        lab = np.arange(count)
        while True:
            old = lab
            low = np.minimum(lab[a], lab[b])
            lab = lab.copy()
            np.minimum.at(lab, a, low)
            np.minimum.at(lab, b, low)
            for _ in range(4):  # pointer jumping: a label's own label is no larger
                lab = lab[lab]
            if np.array_equal(lab, old):
                return lab
    graph = coo_matrix((np.ones(a.shape[0], np.int8), (a, b)), shape=(count, count))
    _, lab = connected_components(graph, directed=False)
    first = np.unique(lab, return_index=True)[1]  # labels 0.. in order: each one's lowest cell
    return first[lab]


def solver_cells(grid):
    """(kind, enclosed, labels) as ``pressure._solver_cells``: sealed FLUID regions get
    their lowest cell pinned (AIR)."""
    xp = grid.xp
    cell = grid["cell"]
    fluid = cell == FLUID
    kind = cell.copy()
    labels = label_components(grid, fluid)
    nb = grid.nbr
    touches = fluid & ((nb < 0) | (cell[xp.maximum(nb, 0)] == AIR)).any(axis=0)  # a missing brick is AIR
    reaches = xp.zeros(grid.size + 1, bool)
    reaches[labels[touches]] = True
    enclosed = fluid & ~reaches[labels]
    if not bool(enclosed.any()):
        return kind, None, None
    pins = enclosed & (labels == xp.arange(grid.size, dtype=labels.dtype))
    kind[pins] = AIR
    return kind, enclosed, labels


def _region_mean_removed(a, enclosed, labels, xp):
    idx = labels[enclosed]
    n = int(a.size)
    sums = xp.bincount(idx, weights=a[enclosed].astype(xp.float64), minlength=n)
    counts = xp.bincount(idx, weights=xp.ones(idx.shape, xp.float64), minlength=n)
    out = a.copy()
    out[enclosed] = (a[enclosed] - (sums[idx] / counts[idx])).astype(a.dtype)
    return out


def pressure_rhs(grid, dt, source=None):
    """(b, kind, enclosed, labels): b = −(h/Δt)·D on the unknowns (``pressure.pressure_rhs``);
    *source*: a target divergence s (1/s) per flat cell (an array) or a ``density.Crowding``
    (the counts it is made from), b += (h²/Δt)·s on FLUID cells (``density.py``)."""
    xp = grid.xp
    if xp is not np and SETUP_KERNELS == "fused" and fused_source(source):
        from . import sparse_pressure_cells

        fused = sparse_pressure_cells.pressure_rhs(grid, dt, source)
        if fused is not None:
            return fused
    kind, enclosed, labels = solver_cells(grid)
    D = face_sum(grid, *boundary_faces(grid))
    fluid = grid["cell"] == FLUID
    b = xp.where(fluid, D * _F32(-grid.h / dt), _F32(0)).astype(xp.float32)
    if source is not None:
        b = xp.where(fluid, b + _F32(grid.h * grid.h / dt) * density.source_array(source, fluid), b).astype(xp.float32)
    if enclosed is not None:
        b = _region_mean_removed(b, enclosed, labels, xp)
        b = xp.where(kind == FLUID, b, _F32(0)).astype(xp.float32)
    return b, kind, enclosed, labels


def fused_source(source) -> bool:
    """Whether the fused set-up kernels can take *source*: none, or a ``density.Crowding``
    (they add the source from its counts); an array goes to the array code."""
    return source is None or isinstance(source, density.Crowding)


def diagonal(grid, kind):
    """float32 per cell: non-SOLID neighbours of a FLUID cell (missing ones are AIR), else 0."""
    xp = grid.xp
    nb = grid.nbr
    count = xp.where(nb >= 0, kind[xp.maximum(nb, 0)] != SOLID, True).sum(axis=0)
    return xp.where(kind == FLUID, count, 0).astype(xp.float32)


class Unknowns(CompactLevel):
    """The unknowns of one grid (FLUID cells not pinned), compacted (``CompactLevel``):
    the solver's vectors hold them, red cells (i + j + k even) first, then black, plus one
    sentinel entry, always 0, that every neighbour that is not an unknown points to (AIR
    is p = 0; SOLID and pinned cells hold 0 as well), so the Laplacian is 6 gathers and no
    masks, a Gauss-Seidel colour is a contiguous range, and the work follows the fluid,
    not the bricks' margin. ``cells``: their flat indices; ``position``: flat → unknown
    (m where none); ``lattice``: their (i, j, k)."""

    def __init__(self, grid, kind):
        xp = grid.xp
        flat_diag = diagonal(grid, kind)
        i, j, k = grid.lattice()
        unknown = flat_diag > 0
        red = ((i + j + k) & 1) == 0
        reds, blacks = xp.flatnonzero(unknown & red), xp.flatnonzero(unknown & ~red)
        self.cells = xp.concatenate([reds, blacks])
        m = self.m = int(self.cells.shape[0])
        self.m_red = int(reds.shape[0])
        if m >= 2 ** 31 - 1:
            raise InputError(f"the sparse pressure solve has {m:,} unknowns, more than its 32-bit tables hold")
        self.lattice = (i[self.cells], j[self.cells], k[self.cells])
        self.position = xp.full(grid.size, m, xp.int32)  # flat cell → its unknown, m where none
        self.position[self.cells] = xp.arange(m, dtype=xp.int32)
        self.nbr = xp.full((6, m + 1), m, xp.int32)
        self.nbr[:, :m] = _compact(grid.nbr[:, self.cells], self.position, m, xp)
        self.diag = xp.concatenate([flat_diag[self.cells], xp.ones(1, xp.float32)])
        self.xp = xp

    def gather(self, flat):
        """The unknowns of a flat array, plus the 0 sentinel."""
        xp = self.xp
        return xp.concatenate([flat[self.cells], xp.zeros(1, flat.dtype)])

    def scatter(self, x, size):
        """A flat array: *x* on the unknowns, 0 elsewhere."""
        out = self.xp.zeros(size, x.dtype)
        out[self.cells] = x[:self.m]
        return out


def compact_unknowns(grid, kind):
    """``Unknowns(grid, kind)``; on CuPy by sparse_pressure_setup's kernels where its SETUP
    is "device" (the same integers)."""
    from . import sparse_pressure_setup

    if grid.xp is not np and sparse_pressure_setup.SETUP == "device":
        return sparse_pressure_setup.unknowns(grid, kind)
    return Unknowns(grid, kind)


def tables_key(preconditioner, on_host) -> tuple:
    """What kept tables were built for (``solver_tables``' memo; ``sparse_pressure_setup``
    compares it too): the preconditioner, NumPy or not, and ``sparse_multigrid.dense_mode``
    (its "2" keeps one level fewer)."""
    return preconditioner, bool(on_host), sparse_multigrid.dense_mode()


def solver_tables(grid, kind, preconditioner, level=None, same=None):
    """(unknowns, preconditioner) of a solve: ``compact_unknowns`` and the preconditioner's
    tables (on CuPy the V-cycle's for "mg", None otherwise: the kernels apply Jacobi and none
    themselves). Kept on the grid and reused while its topology (the neighbour table) and
    the cell types stay the same — still or settled liquid: building them is ~4 ms of an 8M
    substep (H200). They are kept only once a substep finds the cell types of the one
    before, so liquid that changes every substep keeps nothing but a copy of the types.
    ``REUSE_TABLES`` (``VOXFX_SPARSE_PRESSURE_REUSE``, "1"): "0" builds them every solve.
    *level* (the unknowns) and *same* (the reuse test's answer), where
    ``sparse_pressure_setup.staged_setup`` found them with its one read. The memo's copy of the
    types is one device-to-device copy on CuPy (``_copy``)."""
    xp = grid.xp
    key = tables_key(preconditioner, xp is np)
    memo = getattr(grid, "_pressure_memo", None)  # (nbr, kind, key, tables or None)
    if same is None:
        same = (REUSE_TABLES and memo is not None and memo[0] is grid.nbr and memo[2] == key
                and memo[1].shape == kind.shape and bool((memo[1] == kind).all()))
    if same and memo[3] is not None and tables_hold(memo[3]):
        return memo[3]
    if level is None:
        level = compact_unknowns(grid, kind)
    if xp is np:
        M = PRECONDITIONERS[preconditioner](grid, kind, level)
    else:
        from .sparse_multigrid import VCycle

        M = VCycle(grid, kind, level) if preconditioner == "mg" else None
    level.level0_set = None  # read by VCycle's build alone (a whole-grid lattice: not to be kept)
    if REUSE_TABLES:
        grid._pressure_memo = (grid.nbr, _copy(kind), key, (level, M) if same else None)
    return level, M


def _copy(a):
    """*a*.copy(); a C-contiguous CuPy array by one device-to-device copy into an array of its own
    (the same allocation, at the same point): CuPy's copy launches its elementwise copy kernel, a
    thread a byte for the memo's uint8 types — queued behind the solve's iterations, 0.012 ms of an
    8M solve's device time, where keeping the set-up's own array instead took 0.001 (h21f's call,
    H100 80GB HBM3, bench/flip_sparse_pressure_timeline.py). Not kept that way: those processes held
    pool peaks of 998–1060 MiB in 3 of 4 against main's 907 (with the x₀ fold of
    ``sparse_pressure_solve_ahead.GATHER_SWITCH`` "guess"; not isolated), so the copy stays, cheaper."""
    if isinstance(a, np.ndarray) or not a.flags.c_contiguous:
        return a.copy()
    out = a.__class__(a.shape, a.dtype)  # cupy.ndarray: empty, as copy's own allocation
    if a.nbytes:
        out.data.copy_from_device_async(a.data, a.nbytes)
    return out


def tables_hold(tables) -> bool:
    """Whether kept (unknowns, preconditioner) still hold: not built into a set-up workspace
    that a later set-up rebuilt (``sparse_pressure_workspace.current``)."""
    if getattr(tables[0], "ws_serial", None) is None:
        return True
    from .sparse_pressure_workspace import current

    return current(tables[0])


def _dot(xp, a, b):
    return (a.astype(xp.float64) * b).sum()


def _start(level, b, bb, x0):
    """(x, r, ‖r‖²) the loop starts from: x = 0, r = b (cold, *x0* None), or the compacted
    *x0* and r = b − A x₀ (one Laplacian), back to cold where ‖r‖² > ‖b‖² or is not finite."""
    xp = level.xp
    if x0 is not None:
        r = b - level.apply(x0)
        rr = _dot(xp, r, r)
        if bool(rr <= bb):
            return x0.copy(), r, rr
    return xp.zeros_like(b), b.copy(), bb


def pcg(grid, kind, b, tolerance, max_iterations, preconditioner="mg", check_every=10, progress=None, x0=None,
        tables=(), carry=None):
    """PCG on A p = b (Alg. 2) over the compacted unknowns, with the device-side
    convergence flag (module notes), from p = 0 or from *x0* (flat, a warm start: module
    notes); *tables*: ``solver_tables``' level and same, where found; *carry*: as
    ``SparsePressureSolverGPU.solve``'s (the persistent GPU solve alone fills it). Returns (p
    flat, iterations, relative residual, converged)."""
    xp = grid.xp
    level, M = solver_tables(grid, kind, preconditioner, *tables)
    if xp is not np:  # the same tables, the kernels of cuda/flip_sparse_pressure.cu
        from . import sparse_pressure_gpu
        from .sparse_pressure_gpu import solve_unknowns

        if sparse_pressure_gpu.PERSIST:  # gathered into and scattered from the solver's vectors
            kept = getattr(grid, "_pressure_memo", (None,) * 4)[3]
            keep = kept is not None and kept[0] is level and kept[1] is M
            return sparse_pressure_gpu.solve_flat(level, M, b, grid.size, tolerance, max_iterations, preconditioner,
                                                  check_every, progress, x0=x0, keep=keep, carry=carry)

        from .sparse_pressure_solve_ahead import flat_guess

        x0 = flat_guess(x0)  # (a solve ahead's Guess: PERSIST alone launches ahead)
        x, iterations, residual, converged = solve_unknowns(level, M, level.gather(b), tolerance, max_iterations,
                                                            preconditioner, check_every, progress,
                                                            x0=None if x0 is None else level.gather(x0))
        return level.scatter(x, grid.size), iterations, residual, converged
    b = level.gather(b)
    bb = _dot(xp, b, b)
    thresh = bb * (float(tolerance) ** 2)
    x, r, rr = _start(level, b, bb, None if x0 is None else level.gather(x0))
    z = M(r)
    d = z.copy()
    rz = _dot(xp, r, z)
    it = xp.zeros((), xp.int64)
    done = ~xp.isfinite(bb) | (rr <= thresh)
    launched = 0
    while launched < max_iterations and not bool(done):  # the host sync, once per block
        if launched:
            report(progress, launched / max_iterations, f"pressure: iteration {launched}")
        for _ in range(check_every):
            q = level.apply(d)
            dq = _dot(xp, d, q)
            alpha = xp.where(done | ~(dq > 0), 0.0, rz / xp.where(dq > 0, dq, 1.0))
            x = x + alpha.astype(xp.float32) * d
            r = r - alpha.astype(xp.float32) * q
            rr = xp.where(done, rr, _dot(xp, r, r))
            it = it + (~done).astype(xp.int64)
            done = done | ~xp.isfinite(rr) | (rr <= thresh) | (it >= max_iterations)
            if bool(done):  # x is final: the block's later iterations would be masked no-ops, and no M(r)
                break  # for a β never used (the device's masked launches return at once: EARLY_STOP)
            z = M(r)
            rz_new = _dot(xp, r, z)
            beta = xp.where(done | (rz == 0), 0.0, rz_new / xp.where(rz == 0, 1.0, rz))
            rz = xp.where(done, rz, rz_new)
            d = xp.where(done, d, z + beta.astype(xp.float32) * d)
        launched += check_every
    bb_h, rr_h = float(bb), float(rr)
    converged = math.isfinite(rr_h) and rr_h <= bb_h * float(tolerance) ** 2 and math.isfinite(bb_h)
    residual = 0.0 if bb_h == 0.0 else (math.sqrt(rr_h / bb_h) if math.isfinite(rr_h) else math.inf)
    return level.scatter(x, grid.size), int(it), residual, bool(converged)


def solve_pressure(grid, dt, tolerance=1e-4, max_iterations=500, preconditioner="mg", check_every=10,
                   progress=None, warm_start=False, source=None):
    """p per flat cell (0 off FLUID) and stats {"iterations", "residual", "converged"}.
    *source*: ``pressure_rhs``'s target divergence or ``density.Crowding`` (the density correction).
    *warm_start* (``warm_start_on``): start from the pressure the last warm solve on this
    grid carried, and carry this one (module notes); off, the grid carries nothing."""
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0.0):
        raise InputError(f"The FLIP time step must be a positive number of seconds, not {dt}")
    if preconditioner not in PRECONDITIONERS:
        raise InputError(f"Unknown sparse pressure preconditioner {preconditioner!r}: "
                         f"use one of {', '.join(PRECONDITIONERS)}")
    xp = grid.xp
    warm = warm_start_on(warm_start)
    if not warm:
        grid.channels.pop(CARRIED, None)
    staged = None
    if xp is not np and fused_source(source):  # the set-up and the unknowns with one host read (ONE_READ)
        from .sparse_pressure_setup import staged_setup

        staged = staged_setup(grid, dt, preconditioner, source, solve=(tolerance, max_iterations, check_every, warm))
    b, kind, enclosed, labels, *tables = pressure_rhs(grid, dt, source) if staged is None else staged
    ahead = getattr(tables[0], "solve_ahead", None) if tables else None  # sparse_pressure_solve_ahead
    if warm and ahead is not None and ahead.guessed(enclosed, b):  # x₀ as the solve queued ahead took it
        x0 = ahead.x0  # (a sparse_pressure_solve_ahead.Guess where its gather took x₀ from the carried pressure)
    else:  # relaxed where the liquid changed where VOXFX_PRESSURE_WARM_RELAX asks (sparse_pressure_warm)
        x0 = relax_guess(grid, kind, b, initial_guess(grid, enclosed, labels)) if warm else None
    # a warm solve without sealed regions carries p as scattered: both in one launch where the solver
    # scatters in one (sparse_pressure_cells.unknowns_scatter_carry, the same bits)
    fused = {"cell": grid["cell"]} if warm and enclosed is None and xp is not np else None
    p, iterations, residual, converged = pcg(grid, kind, b, tolerance, int(max_iterations), preconditioner,
                                             int(check_every), progress, x0=x0, tables=tables, carry=fused)
    if enclosed is not None:
        p = _region_mean_removed(p, enclosed, labels, xp)
    # p is 0 off FLUID already (the unknowns and the sealed regions are FLUID cells): the mask
    # is kept for the array path alone (sparse_pressure_cells.around_kernels drops it: 3 launches)
    if xp is np or not around_kernels() or p.dtype != xp.float32:
        p = xp.where(grid["cell"] == FLUID, p, _F32(0)).astype(xp.float32)
    if warm:
        carry(grid, p, None if fused is None else fused.get("carried"))
    return p, {"iterations": iterations, "residual": residual, "converged": converged}


def project(grid, p, dt) -> None:
    """u ← u* − (Δt/h)(p_hi − p_lo) on faces next to a FLUID cell, then the solid faces
    take the solid's velocity (``pressure.project``). On CuPy one kernel (``PROJECT``)."""
    xp = grid.xp
    if xp is not np and PROJECT == "kernel":
        from . import sparse_pressure_cells

        if sparse_pressure_cells.project(grid, p, dt):
            return
    c = _F32(float(dt) / grid.h)
    fluid = (grid["cell"] == FLUID).astype(xp.uint8)
    for comp, name in enumerate(grid.FACES):
        f = grid[name]
        touch = (fluid != 0) | (grid.neighbour(fluid, 2 * comp) != 0)
        new = f - c * (p - grid.neighbour(p, 2 * comp))
        f = xp.where(touch, new, f)
        grid[name] = xp.where(solid_touch(grid, comp), grid["solid_" + name], f)


def divergence(grid, dt=None):
    """∇·u (1/s) per FLUID cell (0 elsewhere), faces as the projection sees them."""
    xp = grid.xp
    D = face_sum(grid, *boundary_faces(grid))
    return xp.where(grid["cell"] == FLUID, D * _F32(1.0 / grid.h), _F32(0)).astype(xp.float32)
