"""The sparse GPU pressure solvers a process keeps, and letting go of them (moved out of
``sparse_pressure_gpu.py``, issue 24: modules under ~500 lines; ``sparse_pressure_gpu`` imports
these names back, so they are reached there as before): per configuration — the switches of
``sparse_pressure_gpu`` read at each call (benches and tests set them there), the level count,
the device and a set-up workspace's generation — the last ``SparsePressureSolverGPU`` (its
buffers and CUDA graphs), at most ``sparse_pressure_gpu._SOLVER_CACHE`` of them, most recent
last. A solver that no longer fits its solve's unknowns is replaced by one with strides grown
geometrically (``grown_strides``); one of the same configuration for another number of levels,
or of an older workspace generation, is dropped before the new one's buffers are taken."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from . import sparse_pressure_buffers
from .sparse_multigrid_bricks import smoother
from .sparse_pressure_buffers import grown_strides
from .sparse_pressure_brick_smooth import smooth_grid, smooth_threads
from .sparse_pressure_vcycle import cluster_blocks, nbr_choice, nbr_table_choice, tail_fold

if TYPE_CHECKING:  # sparse_pressure_gpu imports this module: _solver reaches it at its call
    from .sparse_pressure_gpu import SparsePressureSolverGPU

_solvers: "OrderedDict[tuple, SparsePressureSolverGPU]" = OrderedDict()
# Solvers of a set-up workspace dropped when it took new buffers (``drop_workspace_solvers``):
# per key without the generation their (strides, last iterations), for the next generation's
# solver of as many levels to grow from, as one that outgrew its buffers does
_outgrown: dict = {}


def release_gpu_solvers():
    """Drop the cached sparse GPU solvers (their buffers and graphs), the set-up's
    workspaces (``sparse_pressure_workspace``) and the set-up scans' look-back state
    (``sparse_pressure_setup.lookback_state``: made again, zeroed, at the next scan)."""
    from . import sparse_pressure_setup, sparse_pressure_workspace

    _solvers.clear()
    _outgrown.clear()
    sparse_pressure_workspace.release()
    sparse_pressure_setup._lookback.clear()


def drop_workspace_solvers(device):
    """Drop every cached solver bound to a set-up workspace's tables on *device*: the
    workspace is about to replace them (a new generation). Their buffers go at once
    (``GraphLoop`` holds no cycle), before the new tables are taken."""
    for key in [k for k in _outgrown if k[-1] == device]:  # only the last generation's (as a stale one: not kept)
        del _outgrown[key]
    for key in [k for k in _solvers if k[-1] is not None and k[-2] == device]:
        solver = _solvers.pop(key)
        _outgrown[key[:-1]] = (solver.strides, solver.last_iterations)


def _prior(key):
    """The last iterations of a cached or workspace-dropped solver of *key*'s configuration and
    device for another level count, or None: a new level count's
    solver starts from its iteration guess (issue 24, session 15, i24b2: the 8M Fast frame 6's
    new solver, its hierarchy a level deeper, started from 0 and ran a block of 10 before its
    first check; carried, ``PREDICT`` launches the last solve's count, ~0.5 ms less there,
    i24b's --stages); its level-0 stride is fresh (carried, 1.27M where fresh took 1.09M at 8M,
    ~5 MB more held)."""
    for k, solver in reversed(_solvers.items()):
        if k[1:-1] == key[1:-1] and k[0] != key[0] and k[-1] is not None:
            return solver.last_iterations
    for k, (_, guess) in _outgrown.items():
        if k[1:] == key[1:-1] and k[0] != key[0]:
            return guess
    return None


def _solver(needs, preconditioner, check_every, levels=None, dense=0):
    """The cached solver for levels needing *needs* entries; where *levels* were built into
    a set-up workspace (``PERSIST``), one whose tables are that workspace's buffers; *dense*
    the V-cycle's ``dense_mode`` (``sparse_multigrid.dense_mode``)."""
    import cupy as cp

    from . import sparse_pressure_gpu as gpu  # its switches as they are now (benches and tests set them there)

    generation = getattr(levels[0], "ws_generation", None) if gpu.PERSIST and levels else None
    nbr, nbr_table, smooth, stop = nbr_choice(), nbr_table_choice(), smoother(), gpu.early_stop()
    key = (len(needs), preconditioner, int(check_every), gpu.VCYCLE, gpu.TAIL_UNKNOWNS, gpu.CLUSTER_UNKNOWNS,
           gpu.FIRST2_UNKNOWNS, gpu.TAIL_SHARED, gpu.COLOUR_GRID, gpu.BRICK_TRANSFERS, nbr, nbr_table, int(dense),
           cluster_blocks(), tail_fold(), smooth, smooth_threads(), smooth_grid(), stop, gpu.PERSIST,
           cp.cuda.Device().id, generation)
    solver = _solvers.pop(key, None)
    if solver is None or not solver.fits(needs):
        old, guess = (None, 0) if solver is None else (solver.strides, solver.last_iterations)
        solver = None  # its buffers go before the new ones are taken
        # One of the same configuration for another number of levels is stale: the liquid's
        # hierarchy gained or lost a level (issue 21 §6: at 65M the frame-0 solver, ~0.9 GiB,
        # stayed cached beside the frame-4 one); so is one on an older workspace generation.
        # The cache's second place is for another configuration (another simulation,
        # preconditioner or device).
        # Of the same level count, a solver of the other set-up mode stays (an A/B in one process).
        stale = [k for k in _solvers
                 if k[1:-1] == key[1:-1] and (k[0] != key[0] or (generation is None) == (k[-1] is None))]
        prior = _prior(key) if generation is not None else None  # of another level count
        for other in stale:
            if generation is not None and other[0] == key[0]:  # outgrown: as a solver that does not fit
                old, guess = _solvers[other].strides, _solvers[other].last_iterations
            del _solvers[other]
        dropped = _outgrown.pop(key[:-1], None) if generation is not None else None
        if dropped is not None and old is None:  # dropped by the workspace when it grew (drop_workspace_solvers)
            old, guess = dropped
        while len(_solvers) >= gpu._SOLVER_CACHE:
            _solvers.popitem(last=False)
        if generation is None:
            strides = grown_strides(needs, old if gpu.PERSIST else None)
            solver = gpu.SparsePressureSolverGPU(strides, preconditioner, check_every, dense=dense, nbr=nbr,
                                                 nbr_table=nbr_table, smoother=smooth, stop=stop,
                                                 dense_rows=sparse_pressure_buffers.dense_rows(needs[-1], strides[-1]))
        else:  # level 0's stride as above, the coarse levels' the workspace's capacities (≥ the needs)
            from .sparse_pressure_workspace import workspace

            ws = workspace()
            if ws.generation != generation:
                raise RuntimeError("sparse pressure tables of an earlier set-up workspace than the current one")
            old0 = old[:1] if old is not None and len(old) == len(needs) else None
            if old0 is None and prior is not None:  # a new level count: the same liquid's solve
                guess = prior  # PREDICT's guess (the iterations past convergence are no-ops: the same bits)
            strides = grown_strides(needs[:1], old0)
            strides += list(ws.caps[1:len(needs)])
            solver = gpu.SparsePressureSolverGPU(strides, preconditioner, check_every,
                                                 tables=ws.solver_tables(len(needs)), generation=generation,
                                                 dense=dense, nbr=nbr, nbr_table=nbr_table, smoother=smooth, stop=stop,
                                                 dense_rows=sparse_pressure_buffers.dense_rows(needs[-1], strides[-1]))
        solver.last_iterations = guess if gpu.PERSIST else 0
    _solvers[key] = solver
    return solver


def solve_unknowns(level0, vcycle, b, tolerance, max_iterations, preconditioner="mg", check_every=10, progress=None,
                   x0=None):
    """PCG on the compacted unknowns *level0* (``sparse_pressure.Unknowns``) with the tables
    of *vcycle* (``sparse_multigrid.VCycle``, "mg") or none, from 0 or *x0* (compacted, a
    warm start): (x, iterations, relative residual, converged), x compacted with its sentinel."""
    if level0.m == 0:
        return level0.xp.zeros(1, level0.xp.float32), 0, 0.0, True
    levels = vcycle.levels if vcycle is not None else [level0]
    solver = _solver([L.m + 1 for L in levels], preconditioner, check_every, levels, getattr(vcycle, "dense_mode", 0))
    return solver.solve(levels, vcycle, b, float(tolerance), int(max_iterations), progress, x0)


def solve_flat(level0, vcycle, b, size, tolerance, max_iterations, preconditioner="mg", check_every=10, progress=None,
               x0=None, keep=False, carry=None):
    """``solve_unknowns`` on flat arrays (``PERSIST``): *b* and *x0* per flat cell (*size*
    of them), gathered into the solver's vectors; (p flat — 0 off the unknowns —,
    iterations, relative residual, converged), what ``sparse_pressure.pcg`` makes of
    ``solve_unknowns``' result by ``Unknowns.gather`` and ``scatter``; *keep* and *carry* as
    ``SparsePressureSolverGPU.solve``'s."""
    if level0.m == 0:
        return level0.xp.zeros(int(size), level0.xp.float32), 0, 0.0, True
    levels = vcycle.levels if vcycle is not None else [level0]
    solver = _solver([L.m + 1 for L in levels], preconditioner, check_every, levels, getattr(vcycle, "dense_mode", 0))
    from . import sparse_pressure_solve_ahead as ahead  # the solve queued before the set-up's read, where it was

    launched = ahead.taken(level0, solver, b, x0, tolerance, max_iterations)
    if launched is None:  # solved the old way: x₀ flat (a solve ahead's gathered Guess made into warm_guess's)
        x0 = ahead.flat_guess(x0)
    ahead.note(solver)
    return solver.solve(levels, vcycle, b, float(tolerance), int(max_iterations), progress, x0, cells=level0.cells,
                        size=size, keep=keep, ahead=launched, carry=carry)
