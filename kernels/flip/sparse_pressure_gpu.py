"""The sparse FLIP pressure solve on the device (CuPy, kernels of
``cuda/flip_sparse_pressure.cu`` and, for the V-cycle, ``flip_sparse_pressure_vcycle.cu`` and
``flip_sparse_pressure_vcycle_tail.cu``):
the PCG loop of seed 003 Alg. 2 on the compacted unknowns with every scalar on the device,
the multigrid V-cycle over the sparse hierarchy, and a block of ``check_every`` iterations
as one CUDA graph; the union-find of the sealed regions. ``sparse_pressure.py`` (the loop)
and ``sparse_multigrid.py`` (the tables and the V-cycle) are the NumPy reference it follows;
``pressure_gpu.py`` is the dense twin, whose ``finish_*`` kernels close the reductions here
too (same state and scalar layout).

Buffers outlive a solve (``sparse_pressure_buffers``: their sizes and what a solve loads
into them): each level's vectors and tables are ``stride`` long, a little more than its
m + 1 entries, and the kernels read m from a device array, so the captured graph stays valid
from substep to substep while the unknowns change; a solve that needs more room, or another
number of levels, takes a new solver (its buffers, a new capture). The host syncs once per
``check_every`` iterations (the convergence read) and never inside the loop. A solve starts
with as many single iterations as the last one took (``PREDICT``) before its first check. A
warm start (``sparse_pressure``'s module notes) puts x₀ in x and begins with cg_init_warm
(r = b − A x₀, ‖b‖², ‖r‖²), finish_init_warm and cg_warm_select (back to x = 0, r = b where
‖r‖ > ‖b‖) instead of cg_init and finish_init.

``PERSIST`` (default): the vectors in one allocation zeroed by one fill, one control array
(one write a solve, one read a check), the start up to the loop as one graph replay, the
tables copied only when new (H200, 8M dam break, alternating substeps: pressure stage 6.72 →
6.17 ms, set-up RawKernel launches 84 → 48, 14 iterations, Δp = 0; still water 2.3–3.3 →
0.9–1.8 ms).

``sparse_pressure_workspace`` (``VOXFX_SPARSE_SETUP``, "workspace" by default with ``PERSIST``):
the set-up builds the coarse levels' tables straight into buffers a solver takes as its own
(no copies) and level 0's into the solver's (``Level0.fill``); such a solver is keyed by the
workspace's generation as well, and dropped (``drop_workspace_solvers``) before a new
generation's tables are taken.
"""

from __future__ import annotations

import os

import numpy as np

from .. import backend
from ..grid.launch import THREADS, GraphLoop, Kernels, Repeat
from ..settings import env_choice
from .pressure import MG_COARSE_SWEEPS, MG_SWEEPS
from .sparse_multigrid import KEY_BITS, MG_OMEGA
from .sparse_multigrid_bricks import SWEEPS as BRICK_SWEEPS
from .sparse_pressure_buffers import (BufferLoads, _Buffers, ahead_limits, carve, dense_scratch_bytes,
                                      solver_memory_bytes, vector_layout)
# The solver cache and its release, reached here as before (sparse_pressure, the set-up workspace,
# the solve ahead, tests and benches)
from .sparse_pressure_solvers import (_outgrown, _solver, _solvers, drop_workspace_solvers,  # noqa: F401
                                      release_gpu_solvers, solve_flat, solve_unknowns)
from .sparse_pressure_vcycle import VCycleLaunches, cluster_blocks, nbr_bricks_apply, tail_fold
from .sparse_pressure_vcycle_tail import NON_PORTABLE_CLUSTER_ATTRIBUTE, _TAIL_CLUSTER
from .pressure_gpu import (_D_ALPHA, _D_BB, _D_BETA, _D_RR, _D_RZ, _D_THRESH, _MAX_BLOCKS, _S_CONVERGED, _S_IT,
                           _S_MAXIT, _S_STOPPED, run_blocks)
from .pressure_gpu import _K as _DENSE  # finish_init, finish_alpha, finish_beta

_CU = "flip_sparse_pressure.cu"
_MODES = ("mg", "jacobi", "none")  # sparse_pressure.PRECONDITIONERS, in order
_D_COLD = 6  # scalars[]: the warm start fell back to x₀ = 0 (finish_init_warm)
_FINISH_THREADS = 1024  # the finish_* kernels' one block (_finish): update_solution_stop sums in its order
_DEFINES = {
    "S_IT": _S_IT, "S_STOPPED": _S_STOPPED, "S_CONVERGED": _S_CONVERGED, "S_MAXIT": _S_MAXIT,
    "FINISH_THREADS": _FINISH_THREADS, "D_BB": _D_BB, "D_THRESH": _D_THRESH,
    "D_RR": _D_RR, "D_RZ": _D_RZ, "D_ALPHA": _D_ALPHA, "D_BETA": _D_BETA, "D_COLD": _D_COLD,
    "MG_COARSE_SWEEPS": MG_COARSE_SWEEPS,
    "MG_SWEEPS": MG_SWEEPS, "KEY_BITS": KEY_BITS,
    **({"MG_OMEGA": MG_OMEGA} if MG_OMEGA != 1.0 else {}),  # sparse_multigrid.MG_OMEGA (i24m)
    **{f"PRE_{name.upper()}": i for i, name in enumerate(_MODES)}}
_K = Kernels(_CU, ("--fmad=false",), THREADS, defines=_DEFINES)  # PCG, labels, tables
_MG = Kernels("flip_sparse_pressure_vcycle.cu", ("--fmad=false",), THREADS, defines=_DEFINES)  # the V-cycle
_MGT = Kernels("flip_sparse_pressure_vcycle_tail.cu", ("--fmad=false",), THREADS,  # mg_tail_*: its coarse levels
               defines={**_DEFINES, "TAIL_CLUSTER": _TAIL_CLUSTER})
_MGT16 = Kernels("flip_sparse_pressure_vcycle_tail.cu", ("--fmad=false",), THREADS,  # the cluster tail of 16 blocks
                 defines={**_DEFINES, "TAIL_CLUSTER": 16})
_MGB = Kernels("flip_sparse_pressure_vcycle_bricks.cu", ("--fmad=false",), THREADS, defines=_DEFINES)  # *_bricks
_NB = Kernels("flip_sparse_pressure_level0.cu", ("--fmad=false",), THREADS, defines=_DEFINES)  # *_nb (NBR)
_BS = Kernels("flip_sparse_pressure_brick_smooth.cu", ("--fmad=false",), THREADS,  # mg_brick_* (SMOOTHER)
              defines={**_DEFINES, "BRICK_SWEEPS": BRICK_SWEEPS})
_LOOP_KERNELS = ("cg_init", "cg_init_warm", "finish_init_warm", "cg_warm_select",
                 "apply_laplacian", "update_solution", "update_solution_stop", "dot_rz", "update_direction")
_VCYCLE_KERNELS = ("mg_smooth", "mg_residual", "mg_restrict", "mg_prolong_add", "mg_coarse_solve", "mg_smooth_first",
                   "mg_smooth_red_dot", "mg_restrict_coarse_solve", "mg_smooth_black_residual", "mg_smooth_first2",
                   "mg_dense_inverse", "mg_coarse_dense", "mg_restrict_coarse_dense")  # mg_tail_*: below, with a tail
# The V-cycle's launches: "fused" (default) folds the first pre-smoothing sweep's two colours
# into one launch, the black residuals into the last pre-smoothing sweep, the coarsest level's
# restriction into its solve and r·z into level 0's last sweep, and prolongs onto the red
# unknowns alone; "split" is launch for launch the reference's
# sequence. Both give the same values bit for bit (tests/unit/test_cuda_sparse_pressure_host.py).
VCYCLE = os.environ.get("VOXFX_SPARSE_MG_VCYCLE", "fused")
# The fused V-cycle's coarse levels in one block (mg_tail_vcycle) from the first level ≥ 1
# whose buffers hold at most this many unknowns (fixed per solver: its graph stays valid);
# 0: every level launch by launch. The same z bit for bit (host harness).
TAIL_UNKNOWNS = int(os.environ.get("VOXFX_SPARSE_MG_TAIL", "8192"))
# The levels above the one-block tail whose buffers hold at most this many unknowns (from
# level 1) in the same launch, one cluster of _TAIL_CLUSTER blocks synchronised by the
# cluster's barrier (mg_tail_cluster, compute capability 9.0 on; issue 24: the ~10 launches
# a level of 10⁴ unknowns takes). 0: every such level launch by launch. The same z bit for bit
# (host harness, GPU test). Default 65536 (H200, 8M dam break, same call: 36 → 26 launches an
# iteration, the PCG loop 3.94 → 3.75 ms, the substep 9.93 → 9.27 ms; bench/RESULTS.md).
CLUSTER_UNKNOWNS = int(os.environ.get("VOXFX_SPARSE_MG_CLUSTER", "65536"))
# The fused V-cycle's levels launched one by one whose buffers hold at most this many
# unknowns start their pre-smoothing with one launch for the first sweep and the second's
# red pass (mg_smooth_first2: from b alone, each red unknown through its black neighbours'
# first-sweep values; one launch fewer a level). 0 (default): today's launches. The same z
# bit for bit (host harness).
FIRST2_UNKNOWNS = int(os.environ.get("VOXFX_SPARSE_MG_FIRST2", "0"))
# The one-block tail's vectors (x, b, r of its levels) in the block's shared memory
# (mg_tail_vcycle_shared, mg_tail_cluster_shared: block_tail<true>) where they fit the
# device's opt-in limit per block; the tables stay global. The same passes on the same values:
# z bit for bit (host harness, GPU test). "0": in global memory. Default "1" (H100, 8M dam
# break, variants in turn in one process, two calls: the loop's iteration 253.9 → 237.6 and
# 254.3 → 237.4 µs; sparse_pressure_vcycle_tail's notes).
TAIL_SHARED = os.environ.get("VOXFX_SPARSE_MG_TAIL_SHARED", "1") != "0"
# The fused V-cycle's one-colour launches (a colour's sweep, the red residuals, the red
# prolongation) over stride / COLOUR_GRID threads, not stride: half a level's unknowns are of
# one colour, so half the grid's blocks found nothing to do (the grid-stride loop covers any
# colour larger than that; the same values). "1": the grid of every unknown; "2" (default since
# i24l4): the loop's iteration 237.4 → 233.8 µs (H100, i24q) and 235.7 / 235.8 → 232.2 µs (H100,
# MG_DENSE 2, variants in turn, i24l4), its launches alone 50.5 → 39.6 µs; the substep's pressure
# does not resolve 12 × 3.6 µs.
COLOUR_GRID = int(os.environ.get("VOXFX_SPARSE_MG_COLOUR_GRID", "2"))
# The V-cycle's restriction into level 1 and prolongation onto level 0 with their indices found
# from the grid's bricks instead of read from down[0] and up[0] (sparse_pressure_vcycle's
# notes): "1" both (default: H100, 8M dam break, two calls, the loop 252.1 → 245.4 and 252.0 →
# 245.9 µs an iteration, 12 CG iterations, the same bits), "restrict" or "prolong" one, "shared"
# both a block a brick (its neighbourhood gathered into shared memory once: 246.2 µs, no
# faster), "0" the tables. Workspace solvers of three levels on; the same z bit for bit.
BRICK_TRANSFERS = os.environ.get("VOXFX_SPARSE_MG_BRICK_TRANSFERS", "1")
_MAX_GRID = 8192  # blocks of a grid-stride launch
# A solve's first iterations as one-iteration graph replays, as many as the solver's last
# solve took (substeps change the liquid a little: the count moves by a few), then one
# host check: a block of check_every iterations launches up to check_every − 1 masked
# iterations (~35 launches each) after convergence. "0": blocks of check_every from the
# start. The same iterations and values either way (masked iterations change nothing).
PREDICT = os.environ.get("VOXFX_SPARSE_PCG_PREDICT", "1") != "0"
_SOLVER_CACHE = 2  # solvers (buffers + graph) kept per process, most recent first (sparse_pressure_solvers)
# Persistent buffers (issue 24, the set-up's launches): "1" (default) — every float vector of
# a solver carved out of one allocation (zeroed by one launch a solve), the device scalars,
# state and sizes in one (one H2D write a solve, one D2H read a check: the state read brings
# the scalars too), the tables copied only when they are not the ones already loaded, the
# right-hand side gathered and the pressure scattered straight from the solver's vectors,
# and a solver that outgrows its buffers replaced by one with strides grown geometrically
# (``grown_strides``: never smaller within a process); the start (cg_init … the first V-cycle
# … d = z, ~35 launches) one graph replay. "0": the earlier allocations, copies and launches.
# The same kernels in the same order: the same values and iterations.
PERSIST = os.environ.get("VOXFX_SPARSE_PCG_PERSIST", "1") != "0"
# ``run_blocks``' block of ``check_every`` iterations (issue 24: the 8M Fast frames that built a
# solver took more host time in their pressure stage): "singles" (default since session 16) — that many
# replays of the one-iteration graph (``launch.Repeat``), nothing more captured; "graph" — its own CUDA
# graph, ~260 launches recorded and instantiated at the solver's first solve (2.3–3.8 ms of host time at
# 8M), though with ``PREDICT`` the predicted iterations and up to two singles mostly end the solve before
# any block runs (H100 80GB HBM3, session 16 call 1, ``bench/flip_sparse.py --stages``: frame 10's two
# new solvers captured 3.76 and 3.79 ms of block each and ran none). The same launches in the same order:
# the same iterations and pressure bit for bit (tests/gpu/test_flip_sparse_pressure_gpu.py). Read when a
# solver is built. 8M Fast frames (session 16 call 1, two processes a way, alternating): frame 10, which
# builds two solvers, 42 / 46 ms → 37 / 38; frames 1–9 and 11 within the runs' spread (their solves run
# no block); the memory check passes with it (session 15 call 3).
BLOCK = "VOXFX_SPARSE_PCG_BLOCK"
BLOCK_MODES = ("singles", "graph")
# The stopping test ahead of the V-cycle (issue 24, h20b's audit; h20f): "1" — the MG solve's
# update_solution is update_solution_stop, whose last block totals the ‖r‖² partials in finish_beta's
# order and, where finish_beta would stop the solve on this iteration, latches the stop then, so the
# converging iteration's V-cycle (~22 launches), dot_rz, finish_beta and update_direction return at
# their first line (x is final; that iteration's z, r·z and β are never read). "0": the test in
# finish_beta after the V-cycle. The same x, iterations, residual and flag bit for bit (host harness
# test_cuda_sparse_pcg_stop_host.py, GPU test test_flip_sparse_pcg_early_stop_gpu.py). Read when a
# solver is built (in the solver cache's key). Measured (H100 80GB HBM3, driver 580.159.04, h20f's call):
# the latch costs every iteration — flip_sparse_pcg_loop's loop graph (the test off, variants in turn,
# 3 rounds) 222.0 → 226.1 µs red-black, 202.0 → 207.5 brick (the blocks' fence and ticket, the last
# block's sum) — against ~185 µs saved a solve; the 8M row (red-black, separate processes alternating,
# two pairs, slow processes) pressure 4.04 / 4.21 → 4.00 / 4.00 ms, per substep −0.065 / −0.24 ms on
# average, the same CG counts [10, 12, 12, 12, 11, 11, 11, 11]. Default "1".
EARLY_STOP = "VOXFX_SPARSE_PCG_EARLY_STOP"
EARLY_STOPS = ("1", "0")


def early_stop(given=None) -> str:
    """``EARLY_STOP``'s way: *given*, else VOXFX_SPARSE_PCG_EARLY_STOP ("1")."""
    return env_choice(EARLY_STOP, EARLY_STOPS, given, default="1")


def component_roots(links):
    """Per compacted cell the lowest index of its component, from its (3, n) links (−1:
    none): the union-find of ``label_hook`` then ``label_flatten``."""
    import cupy as cp

    n = int(links.shape[1])
    parent = cp.arange(n, dtype=cp.int32)
    links = cp.ascontiguousarray(links, dtype=cp.int32)
    _K.launch("label_hook", n, (links, np.int32(n), parent))
    _K.launch("label_flatten", n, (parent, np.int32(n)))
    return parent


def _module(name):
    """The kernels holding *name*."""
    return (_NB if name.endswith("_nb") else _BS if name.startswith("mg_brick_") else _MGB if "_bricks" in name
            else _MGT if name.startswith("mg_tail")
            else _MG if name.startswith("mg_") else _K)


def _grid(n) -> tuple:
    return (max(1, min(_MAX_GRID, (int(n) + THREADS - 1) // THREADS)),)


class SparsePressureSolverGPU(VCycleLaunches, BufferLoads):
    """The PCG loop of Alg. 2 on the device for a number of levels and buffer strides:
    owns the vectors, tables, device scalars and the CUDA graph of one block of
    ``check_every`` iterations. Every kernel of the loop first reads the device's
    ``stopped`` flag, so iterations after convergence (or the iteration limit) are no-ops."""

    def __init__(self, strides, preconditioner="mg", check_every=10, use_graph=True, tables=None, generation=None,
                 dense=0, nbr="bricks", nbr_table="skip", dense_rows=None, smoother="rb", stop=None):
        import cupy as cp

        self.cp = cp
        self.preconditioner = preconditioner
        self.mode = np.int32(_MODES.index(preconditioner))
        self.check_every = int(check_every)
        self.vcycle = VCYCLE
        if self.vcycle not in ("fused", "split"):
            raise ValueError(f"VOXFX_SPARSE_MG_VCYCLE must be fused or split, not {self.vcycle!r}")
        self.strides = tuple(int(s) for s in strides)
        self.generation = generation if tables is not None else None
        # level 0's nbr rows: none where its passes find their neighbours from the bricks
        # (sparse_pressure_vcycle.NBR_TABLE "skip"; its diag alone filled: Level0.fill)
        self.level0_nbr = not (nbr_bricks_apply(nbr, self.generation, preconditioner, len(self.strides))
                               and nbr_table == "skip")
        s0 = self.strides[0]
        last = len(self.strides) - 1
        limit = self.shared_limit = (backend._device_properties(cp.cuda.Device().id).get("sharedMemPerBlockOptin", 0)
                                     or cp.cuda.Device().attributes.get("MaxSharedMemoryPerBlockOptin", 0))
        dense = dense if preconditioner == "mg" and last else 0  # the VCycle's dense_mode
        # the coarsest level's unknowns its dense inverse holds (sparse_pressure_buffers.DENSE_ROWS)
        self.dense_rows = self.strides[-1] if dense_rows is None else min(self.strides[-1], int(dense_rows))
        # level 0 smoothed brick by brick (sparse_multigrid_bricks.SMOOTHER "brick"): its x before the
        # post-smoothing, which writes z from it (_brick_setup decides whether it applies)
        smooth = smoother == "brick" and preconditioner == "mg" and last > 0 and self.generation is not None
        backend.ensure_fits(solver_memory_bytes(self.strides, preconditioner, self.level0_nbr, dense, limit,
                                                self.dense_rows, smooth), "the sparse FLIP pressure solve", cp)
        lengths, self.vector_levels = vector_layout(self.strides, smooth)  # ahead_sizes: 0 at each level's m
        self._sentinels = None  # (vector pointers, their levels) on the device (solve ahead's sentinel_table)
        self.persist = PERSIST
        if self.persist:  # one arena of vectors, one of control values (PERSIST)
            self.vectors, views = carve(cp, lengths, cp.float32)
            self.vector_views = views
            ints = 4 + 2 * len(self.strides)
            self.control = cp.zeros(8 + (ints + 1) // 2, cp.float64)
            self.scalars = self.control[:8]
            self.ints = self.control[8:].view(cp.int32)[:ints]
            self.state, self.sizes = self.ints[:4], self.ints[4:]
        else:
            views = [cp.zeros(n, cp.float32) for n in lengths]
            self.scalars = cp.zeros(8, cp.float64)
            self.state = cp.zeros(4, cp.int32)
            self.sizes = cp.zeros(2 * len(self.strides), cp.int32)
        views = iter(views)
        self.b, self.x, self.r, self.z, self.d, self.q = (next(views) for _ in range(6))
        self.red_blocks = min(_MAX_BLOCKS, (s0 + THREADS - 1) // THREADS)
        self.partials = cp.zeros(2 * self.red_blocks, cp.float64)
        # EARLY_STOP (MG): update_solution_stop's last-block ticket, 0 between launches
        self.early_stop = early_stop(stop) == "1" and preconditioner == "mg"
        self.stop_ticket = cp.zeros(1, cp.int32) if self.early_stop else None
        # tables: per level (nbr, diag, up, down), a set-up workspace's buffers of these
        # strides or None (sparse_pressure_workspace; generation: theirs): the set-up builds
        # into them, no copies; level 0's own are filled in place (Level0.fill).
        tables = tables or [(None,) * 4] * len(self.strides)
        self.levels = [_Buffers(cp, s, None if tables[level][0] is None else tables[level][:2],
                                nbr=level > 0 or self.level0_nbr)
                       for level, s in enumerate(self.strides)]
        for level, B in enumerate(self.levels):
            if level == 0:  # the V-cycle maps the CG residual r to z
                B.b, B.x, B.r = self.r, self.z, (next(views) if last else None)
            else:
                B.b, B.x, B.r = next(views), next(views), (next(views) if level < last else None)
            if level < last:
                up, down = tables[level][2:]
                B.up = cp.zeros((8, B.stride), cp.int32) if up is None else up
                B.down = cp.zeros((64, self.levels[level + 1].stride), cp.int32) if down is None else down
        self.brick_x = next(views) if smooth else None
        self._filled = None  # a workspace solver: the level 0 whose tables it holds
        self._loaded = None  # PERSIST: the tables last copied in (kept alive: compared by identity)
        self.tables_skipped = 0  # PERSIST: solves whose tables were already loaded
        self._dense_setup(dense, limit)
        self.tail = self._tail_table(TAIL_UNKNOWNS) if preconditioner == "mg" and self.vcycle == "fused" else None
        self.cluster_from = self._cluster_from(CLUSTER_UNKNOWNS, int(cp.cuda.Device().compute_capability))
        self.cluster_blocks = cluster_blocks() if self.cluster_from else _TAIL_CLUSTER
        self.first2 = self._first2_levels(FIRST2_UNKNOWNS if self.vcycle == "fused" else 0)
        self.tail_shared = self._tail_shared_bytes(TAIL_SHARED, limit)
        self.tail_fold = bool(self.tail_shared) and tail_fold()
        self.colour_grid = max(1, COLOUR_GRID)
        self._brick_setup(BRICK_TRANSFERS, _MGB, nbr == "bricks", _NB, smooth, _BS)
        _K.load(*_LOOP_KERNELS)  # compile and load before any capture
        _MG.load(*_VCYCLE_KERNELS)
        if self.tail:  # above 48 KiB a kernel must ask for its dynamic shared memory
            kernel = self._module(self._tail_kernel()).get(self._tail_kernel())
            if self.cluster_blocks > 8:  # beyond the portable cluster size: allowed per kernel
                cp.cuda.driver.funcSetAttribute(kernel.kernel.ptr, NON_PORTABLE_CLUSTER_ATTRIBUTE, 1)
            if self.tail_shared and kernel.max_dynamic_shared_size_bytes < self.tail_shared:
                kernel.max_dynamic_shared_size_bytes = self.tail_shared
        if self.dense_shared:
            kernel = _MG.get("mg_dense_inverse")
            if kernel.max_dynamic_shared_size_bytes < self.dense_shared:
                kernel.max_dynamic_shared_size_bytes = self.dense_shared
        _DENSE.load("finish_init", "finish_alpha", "finish_beta")
        self.use_graph = bool(use_graph)
        self.single = GraphLoop(self._iteration, enabled=use_graph)  # PREDICT's iterations
        self.block = env_choice(BLOCK, BLOCK_MODES)
        self.loop = (GraphLoop(self._block, enabled=use_graph) if self.block == "graph"
                     else Repeat(self.single, self.check_every))
        self._starts = {}  # PERSIST: (warm, tolerance) → the start's GraphLoop
        self.last_iterations = 0  # of the last solve: PREDICT's guess

    def _dense_setup(self, mode, limit):
        """``sparse_multigrid.MG_DENSE`` (*mode*, 0: the sweeps): G of the coarsest level
        (``dense_rows`` rows of its stride, row j at j·stride: stride² floats with ``DENSE_ROWS``
        "stride") and mg_dense_inverse's scratch, its shared memory where rows² + 2·rows doubles fit
        *limit* bytes (at 8M strides 71 and 115: 41 KB, 107 KB), else global."""
        self.dense_mode = int(mode)
        if not self.dense_mode:
            return
        S, R = self.strides[-1], self.dense_rows
        self.dense = self.cp.zeros(R * S, self.cp.float32)
        need = dense_scratch_bytes(R)  # solver_memory_bytes counts both (dense_bytes)
        if need <= limit:
            self.dense_work, self.dense_shared = np.uint64(0), need
        else:
            self.dense_work = self.cp.zeros(R * R + 2 * R, self.cp.float64)

    def fits(self, needs) -> bool:
        """Whether levels needing *needs* entries (m + 1 each) fit the buffers and the coarsest
        level's m the dense inverse's rows."""
        return (len(needs) == len(self.strides) and all(n <= s for n, s in zip(needs, self.strides))
                and (self.dense is None or int(needs[-1]) - 1 <= self.dense_rows))

    def ahead_limits(self):
        """``device_strides`` with the coarsest level's bound m + 1 ≤ its dense inverse's rows + 1:
        ahead_sizes' limits (``sparse_pressure_solve_ahead``: a guess whose coarsest level outgrows
        G's rows launches on sizes of 0, as one that outgrows a stride)."""
        if self.dense is None or self.dense_rows + 1 >= self.strides[-1]:
            return self.device_strides()
        kept = getattr(self, "_ahead_limits", None)
        if kept is None:
            limits = ahead_limits([B.stride for B in self.levels], self.dense_rows)
            kept = self._ahead_limits = self.cp.asarray(np.array(limits, np.int32))
        return kept

    # ------------------------------------------------------------------ launches

    def _launch(self, name, n, args):
        _module(name).launch_grid(name, _grid(n), (THREADS,), args)

    def _reduce(self, name, args):
        _module(name).launch_grid(name, (self.red_blocks,), (THREADS,), args)

    def _module(self, name):
        """The kernels holding *name*: ``_module``'s, the cluster tail's of 16 blocks from _MGT16."""
        if name.startswith("mg_tail_cluster") and self.cluster_blocks != _TAIL_CLUSTER:
            return _MGT16
        return _module(name)

    def _one(self, name, grid, block, args, shared_mem=0):
        self._module(name).launch_grid(name, grid, block, args, shared_mem)

    def _finish(self, name, args):
        _DENSE.launch_grid(name, (1,), (_FINISH_THREADS,), args)

    def _precondition_and_dot(self):
        """z = M r (MG) and the partial sums of r·z; for Jacobi / none, update_solution
        (or cg_init) already did both."""
        if self.preconditioner == "mg" and self.vcycle == "fused":
            self._vcycle_fused()
        elif self.preconditioner == "mg":
            self._vcycle()
            self._reduce("dot_rz", (self.r, self.z, self.sizes, self.partials[self.red_blocks:], self.state))

    def _z(self):
        return self.r if self.preconditioner == "none" else self.z

    def _iteration(self):
        """One PCG iteration (Alg. 2 body with z = M r), every scalar on the device."""
        G = np.int32(self.red_blocks)
        L0 = self.levels[0]
        self._reduce(self._nbr_name("apply_laplacian", 0), (self.d, self.q, *self._nbr_args(0), self.sizes,
                                                            self.partials, self.state))  # q = A d
        self._finish("finish_alpha", (self.partials, G, self.scalars, self.state))  # α = r·z / d·q
        args = (self.x, self.r, self.d, self.q, self.z, L0.diag, self.sizes, self.mode, self.scalars, self.partials,
                self.state)
        if self.early_stop:  # and the ‖r‖² test: a stop latched here masks the rest of the iteration
            self._reduce("update_solution_stop", (*args, self.stop_ticket))
        else:
            self._reduce("update_solution", args)
        self._precondition_and_dot()  # z = M r
        self._finish("finish_beta", (self.partials, G, self.scalars, self.state, np.int32(0)))  # β, ‖r‖² test
        self._reduce("update_direction", (self.d, self._z(), self.sizes, self.scalars, self.state))  # d = z + β d

    def _block(self):
        for _ in range(self.check_every):
            self._iteration()

    # ------------------------------------------------------------------ solve

    def _start(self, warm, tolerance):
        """Alg. 2 up to its loop: r = b (x = 0) or r = b − A x₀ (*warm*: x holds x₀), the
        stopping threshold from *tolerance*, z = M r, r·z, d = z."""
        G = np.int32(self.red_blocks)
        L0 = self.levels[0]
        self._dense_inverse()  # MG_DENSE: the coarsest level's G from its tables just loaded
        if not warm:  # x = 0, d = 0, r = b, ‖b‖²; stop at once if b = 0
            self._reduce("cg_init", (self.b, self.x, self.r, self.d, self.z, L0.diag, self.sizes, self.mode,
                                     self.partials))
            self._finish("finish_init", (self.partials, G, self.scalars, self.state, np.float64(tolerance)))
        else:  # r = b − A x₀, back to x = 0 where that is no better (‖r‖ > ‖b‖)
            self._reduce(self._nbr_name("cg_init_warm", 0), (self.b, self.x, self.r, self.d, *self._nbr_args(0),
                                                             self.sizes, self.partials))
            _K.launch_grid("finish_init_warm", (1,), (_FINISH_THREADS,), (self.partials, G, self.scalars, self.state,
                                                                np.float64(tolerance)))
            self._reduce("cg_warm_select", (self.b, self.x, self.r, self.z, L0.diag, self.sizes, self.mode,
                                            self.scalars, self.partials[self.red_blocks:]))
        self._precondition_and_dot()  # z = M r, r·z
        self._finish("finish_beta", (self.partials, G, self.scalars, self.state, np.int32(1)))  # rz, β = 0
        self._reduce("update_direction", (self.d, self._z(), self.sizes, self.scalars, self.state))  # d = z

    def solve(self, levels, vcycle, b, tolerance, max_iterations, progress=None, x0=None, cells=None, size=None,
              keep=False, ahead=None, carry=None):
        """x (m + 1, sentinel 0), iterations, relative residual, converged for the
        compacted right-hand side *b* (m + 1, sentinel 0), from x = 0 or from *x0* (m + 1,
        sentinel 0: a warm start, ``sparse_pressure._start``). With *cells* (level 0's flat
        cells) and *size* (``PERSIST``): *b* and *x0* flat, gathered straight into the
        solver's vectors, and x flat (0 off the unknowns), scattered straight from them.
        *keep*: the tables are kept by the caller for later solves (``solver_tables``' memo):
        the next solve skips their copies if it gets the same arrays; otherwise the solver
        lets go of them now (no table outlives its solve here). *ahead*: the load, the gathers, the
        start and the predicted iterations queued already (``sparse_pressure_solve_ahead.taken``).
        *carry* ({"cell": the grid's cell types}, a warm solve without sealed regions): where p is
        scattered in one launch, the carried pressure of it made in the same launch
        (``unknowns_scatter_carry``) and put in *carry* as "carried"."""
        cp = self.cp
        m = levels[0].m
        if ahead is None:
            predicted, single = self._begin(levels, vcycle, b, tolerance, max_iterations, x0, cells), self.single
        else:
            self._filled = levels[0]
            predicted, single = ahead.predicted, ahead.queued(self.single)
        from . import sparse_pressure_scatter_ahead as after
        from .sparse_pressure_cells import around_kernels

        position = getattr(levels[0], "position", None) if cells is not None else None
        scatter = None  # p (and the carry in the same launch) by one kernel, queued ahead of the reads where on
        if around_kernels() and position is not None and position.shape == (int(size),):
            scatter = after.Scatter(position, self.x, m, size, carry)
        iterations, residual, converged = run_blocks(self, max_iterations, progress, predicted, single,
                                                     scatter if scatter is not None and after.enabled() else None)
        self.last_iterations = iterations
        if not keep:
            self._loaded = self._filled = None
            self._brick_release()
        if cells is None:
            return self.x[:m + 1].copy(), iterations, residual, converged
        if scatter is not None:  # one launch (after the loop, or the last one queued before the read)
            return scatter.result(), iterations, residual, converged
        out = cp.zeros(int(size), cp.float32)  # Unknowns.scatter
        out[cells] = self.x[:m]
        return out, iterations, residual, converged

    def start_graph(self, warm, tolerance):
        """``PERSIST``: the start's ~35 launches (``_start``) as one graph, one per (*warm*, *tolerance*)."""
        key = (bool(warm), float(tolerance))
        start = self._starts.get(key)
        if start is None:
            start = self._starts[key] = GraphLoop(self._start, self.use_graph, key)
        return start

    def _begin(self, levels, vcycle, b, tolerance, max_iterations, x0, cells):
        """``solve``'s load, gathers and start; the iterations ``PREDICT`` launches before its first check."""
        cp = self.cp
        m = levels[0].m
        if self.persist:
            self._load_persist(levels, vcycle, max_iterations)
            if cells is None:
                self.b[:m + 1] = b
            else:  # the sentinel b[m] stays 0 from the fill
                cp.take(b.astype(cp.float32, copy=False), cells, out=self.b[:m])
        else:
            self._load(levels, vcycle)
            self.b[:m + 1] = b
            self.state[...] = cp.asarray(np.array([0, 0, 0, max_iterations], dtype=np.int32))
        if x0 is not None:  # x = x₀ (a warm start)
            if cells is None:
                self.x[:m + 1] = x0
            else:
                cp.take(x0.astype(cp.float32, copy=False), cells, out=self.x[:m])
        if self.persist:  # the start's ~35 launches as one graph replay
            self.start_graph(x0 is not None, tolerance).run()
        else:
            self._start(x0 is not None, tolerance)
        return min(self.last_iterations, max_iterations) if PREDICT else 0
