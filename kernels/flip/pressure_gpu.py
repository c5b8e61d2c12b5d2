"""The FLIP pressure solver on the device (CuPy, kernels of ``cuda/flip_pressure.cu``):
the PCG loop of seed 003 Alg. 2 with every scalar on the device and a block of
``check_every`` iterations as one CUDA graph; the divergence and projection launches.
``pressure.py`` and ``pressure_mg.py`` are the reference it follows; ``pressure.py`` states the problem.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from .. import backend
from ..grid import mac
from ..grid.launch import GraphLoop, Kernels
from ..progress import report
from . import density
from .pressure_mg import MG_COARSE_SWEEPS, MG_SWEEPS, PRECONDITIONERS, mg_level_shapes

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


# =========================================================================== launches

def crowd_args(grid, crowding):
    """``divergence``'s density-correction arguments (``density.device_args`` over the grid's
    cells)."""
    return density.device_args(crowding, grid.cell.size, grid.h)


def _divergence_gpu(grid, scale, crowd=None):
    """b = scale·D on FLUID cells (0 elsewhere), plus the density correction's source with
    *crowd* (``crowd_args``' tuple; None: off)."""
    cp = grid.xp
    nx, ny, nz = grid.shape
    out = cp.empty((nz, ny, nx), dtype=cp.float32)
    args = [cp.ascontiguousarray(a, dtype=cp.float32) for a in
            (grid.u, grid.v, grid.w, grid.solid_u, grid.solid_v, grid.solid_w)]
    cell = cp.ascontiguousarray(grid.cell, dtype=cp.uint8)
    crowd = crowd_args(grid, None) if crowd is None else crowd
    _K.launch("divergence", out.size, (*args, cell, np.int32(nx), np.int32(ny), np.int32(nz), _F32(scale), out,
                                       *crowd))
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


def run_blocks(solver, max_iterations: int, progress=None, predicted: int = 0, single=None, before_check=None):
    """Alg. 2's loop on a set-up GPU solver (dense ``PressureSolverGPU`` or the sparse one):
    capture its block of ``check_every`` iterations, run blocks until the device's state
    says stopped or *max_iterations* are launched, reading the state once per block (the one
    host sync per check). With *single* (a ``GraphLoop`` of one iteration) and *predicted*
    > 0: that many single iterations before the first check, then up to two more one check
    each, then blocks (the sparse solver's guess from its last solve: fewer masked
    iterations launched after convergence). *before_check* (a callable): queued before each
    check read that follows launched iterations, so its last call follows the last iteration
    (``sparse_pressure_scatter_ahead``: the work after the loop queued ahead of the read).
    (iterations, relative residual, converged)."""
    solver.loop.capture()
    launched, singles = 0, 0
    if single is not None and predicted > 0:
        for _ in range(predicted):
            single.run()
        launched = predicted
    pending = launched > 0  # iterations launched since before_check last ran
    read = getattr(solver, "read_control", None) if getattr(solver, "persist", False) else None
    scal = None
    while True:
        if before_check is not None and pending:
            before_check()
            pending = False
        if read is not None:  # the state and the scalars in one read (sparse_pressure_gpu.PERSIST)
            host_state, scal = read()
        else:
            host_state = solver.state.get()  # the one host sync per check (Alg. 2)
        if host_state[_S_STOPPED] or launched >= max_iterations:
            break
        if launched:  # between blocks, on the state this check read anyway: no extra sync
            report(progress, launched / max_iterations, f"pressure: iteration {launched}")
        if single is not None and predicted > 0 and singles < 2:
            single.run()
            launched, singles = launched + 1, singles + 1
        else:
            solver.loop.run()  # check_every iterations (the graph, or launch by launch)
            launched += solver.check_every
        pending = True
    if scal is None:
        scal = solver.scalars.get()
    bb, rr = float(scal[_D_BB]), float(scal[_D_RR])
    residual = 0.0 if bb == 0.0 else math.sqrt(rr / bb) if math.isfinite(rr) else math.inf
    return int(host_state[_S_IT]), residual, bool(host_state[_S_CONVERGED])


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
        iterations, residual, converged = run_blocks(self, max_iterations, progress)
        return (self.x.copy(), iterations, residual, converged)
