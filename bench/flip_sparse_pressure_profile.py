"""Where one sparse FLIP substep's pressure stage spends its time (issue 24): the dam break
of ``bench/flip_sparse.py`` on the GPU, the pressure stage cut into its set-up pieces and
the PCG loop, each piece timed three ways: wall-clock with a sync on each side (what the
host waits for), CUDA events around it (the device's span, idle gaps included), and the
sum of CUDA events around each RawKernel launch inside it (the kernels' own time; the rest
is CuPy array code and launch gaps). Then one PCG iteration launched kernel by kernel (no
graph) with an event pair per launch, and the other stages of the substep.

    python3 bench/flip_sparse_pressure_profile.py [--n 256] [--particles 8e6] [--substeps 3]
        [--variants reference:0 fused:8192]

``--variants`` (``_pressure_variants.py``)
SETUP:TAIL[:SCAN[:PROJECT[:PREDICT[:SETUP_TAIL[:BRICKS[:WARM[:ONE_READ[:RANKS[:LINK[:PERSIST[:CLUSTER[:FIRST2[:BUFFERS[:AHEAD[:HOOK[:RESTRICT]]]]]]]]]]]]]]]]]:
the pressure set-up (``sparse_pressure.SETUP_KERNELS``:
"reference", the array code, or "fused", ``sparse_pressure_cells``' four kernels), the
V-cycle's one-block tail (``sparse_pressure_gpu.TAIL_UNKNOWNS``, 0 off), the set-up's scans
(``sparse_pressure_setup.SCAN``: "kernel", "lookback" or "cupy") and the projection
(``sparse_pressure.PROJECT``: "kernel" or "reference") and the PCG's guess of its
iterations (``sparse_pressure_gpu.PREDICT``: "1" or "0") and the set-up's one-block coarse
levels (``sparse_pressure_setup.TAIL_BOUND``, 0 off) and its level 1 by brick look-ups
(``sparse_pressure_setup.BRICKS``: "1" or "0", level 0 sorted by key) and the warm start
(``VOXFX_PRESSURE_WARM``: "1" or "0"; a warm variant starts from the pressure the warm
variants carried from the substep before, a cold one carries nothing) and the set-up's one
host read (``sparse_pressure_setup.ONE_READ``: "1" or "0"), level 1's key order by ranks
(``sparse_pressure_setup.RANKS``: "1") or a sort ("0"), and the labels' union-find start
(``sparse_pressure_cells.LINK_INIT``: "1" or "0") and the PCG's persistent buffers
(``sparse_pressure_gpu.PERSIST``: "1" or "0") and the V-cycle's levels above the tail in one
cluster launch (``sparse_pressure_gpu.CLUSTER_UNKNOWNS``, 0 off) and the first pre-smoothing
sweep with the second's red pass in one launch (``sparse_pressure_gpu.FIRST2_UNKNOWNS``, 0
off; the "it:" rows count one iteration's launches per kernel) and the set-up's buffers
(``sparse_pressure_workspace.MODE``: "fresh" or "workspace") and the workspace's coarse levels
launched ahead of the unknowns' read (``sparse_pressure_workspace.AHEAD``: "1" or "0") and the
labels' union-find (``sparse_pressure_cells.HOOK``: "bricks" or "cells") and the workspace's
coarse restriction tables (``sparse_pressure_setup.RESTRICT``: "search" or "scatter"); each on the same
simulation state, in turn, per substep (A/B in one run). E.g. the brick A/B:
``--variants fused:8192:kernel:kernel:1:16384:0 fused:8192:kernel:kernel:1:16384:1``.

``--count``: after the timings, one whole ``solve_pressure`` per variant with counters (no
events): RawKernel launches outside graphs (by name), graph replays, pool allocations
and their bytes (a CuPy memory hook), split into the set-up (everything before the PCG's
first graph replay) and the rest.

``--sweeps 1 2 3``: after the rest, the V-cycle's smoothing sweeps (``MG_SWEEPS``, shared with
the dense solver; patched here for the sparse solver alone, its kernels recompiled) on one
more substep's state before its solve: per count the CG iterations and wall ms of cold and warm solves (medians of
``--sweep-repeats``) and max |Δp| against the default count.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_multigrid import VCycle  # noqa: E402
from voxfx.kernels.grid import launch  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _pressure_variants import use_variant  # noqa: E402
from flip import dam_break  # noqa: E402
from flip_sparse import timed_sparse_substep  # noqa: E402
from flip_sparse_pressure import after_pressure, before_pressure  # noqa: E402

_kernel_ms = defaultdict(list)  # name → [(start event, end event)] while recording
_recording = [False]
_counting = [None]  # --count: the counters of the solve being counted (no events)
_plain = (launch.Kernels.launch, launch.Kernels.launch_grid)


def _timed(plain):
    def wrapped(self, name, *args):
        import cupy as cp

        if _counting[0] is not None and not cp.cuda.get_current_stream().is_capturing():
            _counting[0].launch(name)
        if not _recording[0] or cp.cuda.get_current_stream().is_capturing():  # no events inside a graph
            return plain(self, name, *args)

        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        plain(self, name, *args)
        b.record()
        _kernel_ms[name].append((a, b))
    return wrapped


launch.Kernels.launch, launch.Kernels.launch_grid = (_timed(f) for f in _plain)


def piece(rows, name, fn):
    """Run *fn* timed three ways (module notes); its result."""
    import cupy as cp

    cp.cuda.Device().synchronize()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    _recording[0] = True
    t0 = time.perf_counter()
    a.record()
    out = fn()
    b.record()
    b.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    _recording[0] = False
    kernels, launches = _kernel_sum()
    rows[name].append((wall, cp.cuda.get_elapsed_time(a, b), kernels, launches))
    return out


def _kernel_sum():
    """(ms, launches) of the RawKernels recorded since the last call, and per kernel name
    their ms into ``_by_kernel`` (the set-up pieces' breakdown)."""
    import cupy as cp

    total, count = 0.0, 0
    for name, pairs in _kernel_ms.items():
        ms = sum(cp.cuda.get_elapsed_time(a, b) for a, b in pairs)
        _by_kernel[name].append(ms)
        total, count = total + ms, count + len(pairs)
    _kernel_ms.clear()
    return total, count


_by_kernel = defaultdict(list)


def pressure_pieces(sim, dt, rows):
    """The pieces of ``sparse_pressure.solve_pressure`` (its order), each timed; p."""
    g, s = sim.grid, sim.settings
    xp = g.xp
    warm = sparse_pressure.warm_start_on(s.warm_start_pressure)
    staged = None
    if sparse_pressure_setup.ONE_READ:  # solve_pressure's path: the set-up and the unknowns, one read
        staged = piece(rows, "cells+labels+rhs+unknowns (one read)",
                       lambda: sparse_pressure_setup.staged_setup(g, dt, "mg"))
    if staged is None:
        b, kind, enclosed, labels = piece(rows, "cells+labels+rhs", lambda: sparse_pressure.pressure_rhs(g, dt))
    else:
        b, kind, enclosed, labels, level, _ = staged
    x0 = piece(rows, "warm x0", lambda: sparse_pressure.initial_guess(g, enclosed, labels)) if warm else None
    if staged is None:
        level = piece(rows, "unknowns", lambda: sparse_pressure.compact_unknowns(g, kind))
    M = piece(rows, "mg tables", lambda: VCycle(g, kind, level))
    bc = piece(rows, "gather b", lambda: level.gather(b))
    x0c = None if x0 is None else piece(rows, "gather x0", lambda: level.gather(x0))
    x, its, _, _ = piece(rows, "PCG loop", lambda: sparse_pressure_gpu.solve_unknowns(
        level, M, bc, s.pressure_tolerance, s.pressure_max_iterations, "mg", x0=x0c))
    rows["iterations"].append((its, its, its, its))

    def finish():
        p = level.scatter(x, g.size)
        if enclosed is not None:
            p = sparse_pressure._region_mean_removed(p, enclosed, labels, xp)
        return xp.where(g["cell"] == 1, p, np.float32(0)).astype(xp.float32)
    p = piece(rows, "scatter p", finish)
    pieces_kernels = {name: sum(ms) for name, ms in _by_kernel.items()}
    piece(rows, "solve_pressure (whole)", lambda: sparse_pressure.solve_pressure(
        g, dt, tolerance=s.pressure_tolerance, max_iterations=s.pressure_max_iterations))
    return p, pieces_kernels


def reference_pieces(sim, dt, rows):
    """The reference set-up's own pieces (sparse_pressure.solver_cells / pressure_rhs)."""
    g = sim.grid
    xp = g.xp
    fluid = piece(rows, "  ref: fluid mask", lambda: g["cell"] == 1)
    labels = piece(rows, "  ref: label_components", lambda: sparse_pressure.label_components(g, fluid))

    def reach():
        cell, nb = g["cell"], g.nbr
        touches = fluid & ((nb < 0) | (cell[xp.maximum(nb, 0)] == 0)).any(axis=0)
        reaches = xp.zeros(g.size + 1, bool)
        reaches[labels[touches]] = True
        return bool((fluid & ~reaches[labels]).any())
    piece(rows, "  ref: touches+enclosed (sync)", reach)
    faces = piece(rows, "  ref: boundary_faces", lambda: sparse_pressure.boundary_faces(g))
    piece(rows, "  ref: face_sum+b", lambda: xp.where(g["cell"] == 1, sparse_pressure.face_sum(g, *faces)
                                                      * np.float32(-g.h / dt), np.float32(0)))


def one_iteration(rows):
    """One PCG iteration of the kept solver, launch by launch (no graph): per kernel ms."""
    import cupy as cp

    solver = next(reversed(sparse_pressure_gpu._solvers.values()))
    solver.state[1] = 0  # not stopped
    solver.state[3] = 10 ** 6  # iteration limit
    solver.scalars[1] = -1.0  # tol²‖b‖² < 0: the ‖r‖² test never stops it
    cp.cuda.Device().synchronize()
    _recording[0] = True
    solver._iteration()
    cp.cuda.Device().synchronize()
    _recording[0] = False
    total = [0.0, 0]
    for name, pairs in _kernel_ms.items():
        ms = sum(cp.cuda.get_elapsed_time(a, b) for a, b in pairs)
        rows["it: " + name].append((ms,) * 3 + (len(pairs),))
        total = [total[0] + ms, total[1] + len(pairs)]
    rows["it: (every kernel)"].append((total[0],) * 3 + (total[1],))  # one iteration's RawKernel launches
    _kernel_ms.clear()
    solver.state[1] = 1


def host_profile(sim, dt, count):
    """cProfile of *count* solve_pressure calls and projections: the host's own time per call."""
    import cProfile
    import pstats

    import cupy as cp

    g = sim.grid
    prof = cProfile.Profile()
    for _ in range(count):
        cp.cuda.Device().synchronize()
        prof.enable()
        p, _ = sparse_pressure.solve_pressure(g, dt)
        prof.disable()
    cp.cuda.Device().synchronize()
    print(f"\nhost profile of {count} solve_pressure calls (the last variant), by own time:")
    pstats.Stats(prof).sort_stats("tottime").print_stats(28)


class _Counts:
    """--count's counters: launches by name, graph replays, pool allocations (count, bytes),
    each in the set-up (before the first replay) or after it."""

    def __init__(self):
        self.replays = 0
        self.parts = {"set-up": defaultdict(int), "loop": defaultdict(int)}

    def part(self):
        return self.parts["loop" if self.replays else "set-up"]

    def launch(self, name):
        self.part()["launches"] += 1
        self.part()["kernel " + name] += 1

    def malloc(self, size):
        self.part()["allocations"] += 1
        self.part()["bytes"] += int(size)


def count_solve(sim, dt):
    """One solve_pressure with --count's counters; the _Counts."""
    import cupy as cp
    from cupy.cuda import memory_hook

    counts = _Counts()

    class Hook(memory_hook.MemoryHook):
        name = "count"

        def malloc_preprocess(self, **kw):
            counts.malloc(kw["size"])

    plain_run = launch.GraphLoop.run

    def run(self):
        counts.replays += 1
        counts.part()["graph replays"] += 1
        return plain_run(self)

    cp.cuda.Device().synchronize()
    launch.GraphLoop.run, _counting[0] = run, counts
    try:
        with Hook():
            sparse_pressure.solve_pressure(sim.grid, dt, tolerance=sim.settings.pressure_tolerance,
                                           max_iterations=sim.settings.pressure_max_iterations)
        cp.cuda.Device().synchronize()
    finally:
        launch.GraphLoop.run, _counting[0] = plain_run, None
    return counts


def print_counts(variant, counts):
    for part, c in counts.parts.items():
        kernels = sorted((k[7:], v) for k, v in c.items() if k.startswith("kernel "))
        print(f"  count {variant!r} {part}: {c['launches']} RawKernel launches, {c['graph replays']} graph replays, "
              f"{c['allocations']} pool allocations ({c['bytes'] / 2 ** 20:.1f} MiB); "
              + ", ".join(f"{k} {v}" for k, v in kernels), flush=True)


def _carried(grid, keep=None):
    """The warm start's carried channel (a copy of its entry: [array, …]), or put *keep*
    back (None: drop it)."""
    name = sparse_pressure.CARRIED
    if keep is False:
        return [grid.channels[name][0].copy(), *grid.channels[name][1:]] if name in grid.channels else None
    grid.channels.pop(name, None)
    if keep is not None:
        grid.channels[name] = [keep[0].copy(), *keep[1:]]
    return None


def sweep_study(sim, dt, counts, repeats):
    """MG_SWEEPS patched for the sparse solver (module notes): iterations and ms per solve."""
    import cupy as cp

    from voxfx.kernels.flip import sparse_multigrid, sparse_pressure_vcycle

    g, s = sim.grid, sim.settings
    before_pressure(sim, dt)  # a substep's state up to its solve; warm solves start from the last substep's p
    carried = _carried(g, False)
    default = sparse_pressure_gpu.MG_SWEEPS
    plain_k, plain_mg, plain_tail = sparse_pressure_gpu._K, sparse_pressure_gpu._MG, sparse_pressure_gpu._MGT
    ref = {}
    print(f"\nV-cycle sweeps (MG_SWEEPS, default {default}; coarse {sparse_pressure_gpu.MG_COARSE_SWEEPS}), "
          f"{repeats} solves each: sweeps | start | CG it | wall ms (median) | max |p - p(default)|")
    for count in [default] + [c for c in counts if c != default]:
        sparse_pressure_gpu.MG_SWEEPS = sparse_multigrid.MG_SWEEPS = sparse_pressure_vcycle.MG_SWEEPS = count
        options = tuple(f"-DMG_SWEEPS={count}" if o.startswith("-DMG_SWEEPS=") else o for o in plain_k.options)
        assert f"-DMG_SWEEPS={count}" in options, plain_k.options
        sparse_pressure_gpu._K = launch.Kernels(plain_k.filename, options, plain_k.threads)
        sparse_pressure_gpu._MG = launch.Kernels(plain_mg.filename, options, plain_mg.threads)  # the V-cycle's
        tail_options = tuple(f"-DMG_SWEEPS={count}" if o.startswith("-DMG_SWEEPS=") else o for o in plain_tail.options)
        sparse_pressure_gpu._MGT = launch.Kernels(plain_tail.filename, tail_options, plain_tail.threads)  # its tail's
        sparse_pressure_gpu.release_gpu_solvers()
        for start in ("cold", "warm"):
            os.environ["VOXFX_PRESSURE_WARM"] = "1" if start == "warm" else "0"
            walls, its = [], []
            for _ in range(repeats + 1):  # the first compiles and captures
                _carried(g, carried)
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                p, stats = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,
                                                          max_iterations=s.pressure_max_iterations)
                cp.cuda.Device().synchronize()
                walls.append((time.perf_counter() - t0) * 1e3)
                its.append(stats["iterations"])
            p = cp.asnumpy(p)
            ref.setdefault(start, p)
            print(f"  {count} | {start} | {its[1:]} | {np.median(walls[1:]):.3f} | "
                  f"{float(np.abs(p - ref[start]).max()):.3g}", flush=True)
    sparse_pressure_gpu.MG_SWEEPS = sparse_multigrid.MG_SWEEPS = sparse_pressure_vcycle.MG_SWEEPS = default
    sparse_pressure_gpu._K, sparse_pressure_gpu._MG, sparse_pressure_gpu._MGT = plain_k, plain_mg, plain_tail
    sparse_pressure_gpu.release_gpu_solvers()


def whole_substeps(sim, dt, variants, runs, alternate):
    """[(variant, stage ms, CG iterations)] of whole substeps as the bench times them: per
    variant *runs* after one not kept (its carry is another variant's), or with *alternate*
    the variants in turn each substep (the same simulated time for all)."""
    import cupy as cp

    ev, sub = [cp.cuda.Event() for _ in range(6)], [cp.cuda.Event() for _ in range(6)]
    stages = []
    order = [v for _ in range(runs) for v in variants] if alternate else [v for v in variants for _ in range(runs + 1)]
    for at, variant in enumerate(order):
        use_variant(variant)
        ms, its, _ = timed_sparse_substep(sim, dt, ev, sub)
        if alternate or at % (runs + 1):
            stages.append((variant, ms, its))
    return stages


def print_stages(variants, stages):
    """The whole substeps' stage times, each and their medians per variant."""
    print("\nsubstep stages (ms): variant | topology | p2g+classify+extrapolate+boundaries | pressure | project | "
          "g2p+advect | CG it")
    for variant, ms, its in stages:
        print(f"  {variant} | " + " | ".join(f"{m:.2f}" for m in ms) + f" | {its}")
    for variant in variants:
        mine = [(ms, its) for v, ms, its in stages if v == variant]
        med = np.median(np.array([ms[:5] for ms, _ in mine], float), axis=0)
        print(f"  median {variant} | " + " | ".join(f"{m:.2f}" for m in med) + f" | substep {med.sum():.2f} | "
              f"CG it {[its for _, its in mine]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--substeps", type=int, default=3)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--variants", nargs="+",
                    default=[f"{sparse_pressure.SETUP_KERNELS}:{sparse_pressure_gpu.TAIL_UNKNOWNS}"])
    ap.add_argument("--host-profile", type=int, default=0, metavar="N",
                    help="after the timings, cProfile N whole solves of the last variant (no events) and print "
                    "the host calls by own time: what the host spends between kernels")
    ap.add_argument("--count", action="store_true", help="launches, graph replays and allocations of one solve "
                    "per variant (module notes)")
    ap.add_argument("--sweeps", type=int, nargs="*", default=[], help="the V-cycle sweep study (module notes)")
    ap.add_argument("--sweep-repeats", type=int, default=5)
    ap.add_argument("--substep-runs", type=int, default=2, help="whole substeps timed per variant, in turn")
    ap.add_argument("--alternate", action="store_true", help="the whole substeps' variants in turn each substep "
                    "(the same simulated time for all; only where they agree on the warm start)")
    ap.add_argument("--reuse", action="store_true",
                    help="let solve_pressure reuse the tables (sparse_pressure.REUSE_TABLES): off by default, as "
                    "the variants solve the same cells in turn and would reuse each other's")
    args = ap.parse_args()
    import cupy as cp

    sparse_pressure.REUSE_TABLES = args.reuse
    sparse_pressure_gpu._SOLVER_CACHE = 2 * len(args.variants)  # a solver (and graph) per variant
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    for _ in range(args.warm):
        old = before_pressure(sim, dt)
        carried = _carried(sim.grid, False)
        for variant in args.variants:  # compile every variant's kernels, capture its graph
            use_variant(variant)
            _carried(sim.grid, carried)
            p, _ = sparse_pressure.solve_pressure(sim.grid, dt)
        sparse_pressure.carry(sim.grid, p)  # what a warm solve of the next substep starts from
        after_pressure(sim, dt, old, p)
    rows = {variant: defaultdict(list) for variant in args.variants}
    kernels = {variant: defaultdict(list) for variant in args.variants}
    pressures = {}
    for _step in range(args.substeps):
        old = before_pressure(sim, dt)
        carried = _carried(sim.grid, False)
        for variant in args.variants:
            use_variant(variant)
            _carried(sim.grid, carried)
            _by_kernel.clear()
            pressures[variant], per_kernel = pressure_pieces(sim, dt, rows[variant])
            for name, ms in per_kernel.items():
                kernels[variant][name].append(ms)
            if variant.startswith("reference"):
                reference_pieces(sim, dt, rows[variant])
            one_iteration(rows[variant])
        first = cp.asnumpy(pressures[args.variants[0]])
        rows[args.variants[0]]["max |p - p(first variant)| of others"].append(tuple(
            [max(float(abs(cp.asnumpy(p) - first).max()) for p in pressures.values())] * 4))
        sparse_pressure.carry(sim.grid, pressures[args.variants[-1]])
        after_pressure(sim, dt, old, pressures[args.variants[-1]])
    stages = whole_substeps(sim, dt, args.variants, args.substep_runs, args.alternate)
    print(f"{args.n}³, {len(sim.pos):,} particles, {sim.grid.brick_count()} bricks, "
          f"{sim.fluid_cell_count():,} fluid cells; medians of {args.substeps} substeps")
    for variant in args.variants:
        print(f"\nvariant {variant!r}: piece | wall ms | device span ms | RawKernel ms | RawKernel launches")
        for name, vals in rows[variant].items():
            med = np.median(np.array(vals, dtype=float), axis=0)
            print(f"  {name} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | {med[3]:.0f}")
        top = sorted(((float(np.median(ms)), name) for name, ms in kernels[variant].items()), reverse=True)
        print("  set-up + loop RawKernels (ms, median per solve): " + ", ".join(f"{n} {m:.3f}" for m, n in top))
    print_stages(args.variants, stages)
    if args.count:
        for variant in args.variants:
            use_variant(variant)
            print_counts(variant, count_solve(sim, dt))
    if args.host_profile:
        host_profile(sim, dt, args.host_profile)
    if args.sweeps:
        sweep_study(sim, dt, args.sweeps, args.sweep_repeats)
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB; "
          f"VOXFX env: {({k: v for k, v in os.environ.items() if k.startswith('VOXFX')})}")


if __name__ == "__main__":
    main()
