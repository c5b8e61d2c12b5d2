"""The sparse PCG loop per iteration (issue 24): ``bench/flip_sparse.py``'s dam break on the
GPU, its pressure solves timed with the loop's switches of ``sparse_pressure_gpu`` A/B in one
process, every variant on the same state in turn.

    python3 bench/flip_sparse_pcg_loop.py [--n 256] [--particles 8e6] [--warm 2] [--substeps 3]
        [--repeats 5] [--replays 5] [--pace-rounds 1] [--substep-runs 4]
        [--variants plain:0:1 shared:1:1 shared-colour2:1:2 shared-launched:1:1:0]

A variant is
NAME:TAIL_SHARED:COLOUR_GRID[:CLUSTER_UNKNOWNS[:BRICK_TRANSFERS[:DENSE[:TAIL[:NBR[:BLOCKS[:FOLD[:SMOOTHER[:THREADS[:GRID[:EARLY]]]]]]]]]]]
(``sparse_pressure_gpu.TAIL_SHARED``, the one-block tail's vectors in shared memory;
``COLOUR_GRID``, the one-colour launches over stride / COLOUR_GRID threads; ``CLUSTER_UNKNOWNS``,
the cluster tail's bound, 0: those levels launch by launch, "-" or left out: the module's value
at start; ``BRICK_TRANSFERS``, the level 0 ↔ 1 transfers from the bricks: 0, 1, restrict or
prolong, left out: the module's value at start; ``DENSE``, ``sparse_multigrid.MG_DENSE``, the
coarsest level's solve: 0 the sweeps, 1 its dense inverse, 2 the last level dropped and the new
coarsest's inverse, left out: the environment's; ``TAIL``, ``TAIL_UNKNOWNS``, the one-block tail's
bound, left out: the module's value at start; ``NBR``, ``sparse_pressure_vcycle.NBR``, level 0's
neighbours: table or bricks, left out: the environment's; ``BLOCKS``, ``sparse_pressure_vcycle.CLUSTER_BLOCKS``,
the cluster tail's blocks, 8 or 16, left out: the environment's; ``FOLD``, ``sparse_pressure_vcycle.TAIL_FOLD``,
the shared tails' first sweep in two passes, 0 or 1, left out: the environment's; ``SMOOTHER``,
``sparse_multigrid_bricks.SMOOTHER``, level 0's smoother: rb or brick, left out: the environment's;
``THREADS``, ``sparse_pressure_brick_smooth.SMOOTH_THREADS``, the brick smoothing's block: 128, 64, 256, 512,
128x16, span or span12, left out: the environment's; ``GRID``, ``sparse_pressure_brick_smooth.SMOOTH_GRID``, its
grid: slots or reduce, left out: slots; ``EARLY``, ``sparse_pressure_gpu.EARLY_STOP``, the stopping test ahead of
the V-cycle: 1 or 0, left out: the environment's at start — the loop's pace runs with the test
off, so it shows the latch's cost an iteration, the ``solve`` column its saving). Per substep, on its state
before the
solve (the warm start's carried pressure put back before each solve, the tables built every
solve as the profile bench does):

- ``solve``: the whole ``solve_pressure`` (CUDA events, median of ``--repeats``), its CG
  iterations and max |p − p(first variant)| (0: the same bits);
- ``loop/it``: the solver's loop graph (``check_every`` iterations) replayed ``--replays``
  times with the convergence test off (threshold −1), per iteration: the loop's own pace, in
  ``--pace-rounds`` rounds of the variants in turn (median and least); with ``--floor`` also
  the graph replayed with every kernel stopped at its first line (its launches alone);
- ``kernels``: one iteration launched kernel by kernel, an event pair a launch (first substep);
  with a dense coarsest level mg_dense_inverse's time (once a solve, in its start);
- ``--tail-profile R`` (issue 24, i24k1): the tail kernel's passes, from R iterations launched
  kernel by kernel (the other kernels as in the loop, so the caches hold what they hold there)
  with the tail compiled with TAIL_PROFILE (block 0's thread 0 stamps clock64 after each
  barrier): per pass its level, kind and median cycles, µs by the kernel's %globaltimer span.

Then ``--substep-runs`` whole substeps with the variants in turn each substep
(``flip_sparse.timed_sparse_substep``), their stages' medians. These favour a round's later
variants (issue 24, i24w's second call: substeps of 17.7, 13.8, 13.5, 11.0, 11.0, 10.2 ms in
the variants' order, their loops within 3% of each other): the loop's pace is the A/B of a
loop switch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import (sparse_multigrid, sparse_multigrid_bricks, sparse_pressure,  # noqa: E402
                                sparse_pressure_brick_smooth, sparse_pressure_gpu, sparse_pressure_vcycle)
from voxfx.kernels.flip.sparse_pressure_vcycle_tail import NON_PORTABLE_CLUSTER_ATTRIBUTE  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid import launch  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import timed_sparse_substep  # noqa: E402
from flip_sparse_pressure import after_pressure, before_pressure  # noqa: E402


_CLUSTER = sparse_pressure_gpu.CLUSTER_UNKNOWNS
_BRICKS = sparse_pressure_gpu.BRICK_TRANSFERS
_TAIL = sparse_pressure_gpu.TAIL_UNKNOWNS
_EARLY = os.environ.get(sparse_pressure_gpu.EARLY_STOP)
sparse_pressure_vcycle.HOLD_BRICK_LEVEL = True  # the loop graph is replayed after its solve


def use(variant):
    _, shared, colour, *rest = variant.split(":")
    sparse_pressure_gpu.TAIL_SHARED = shared != "0"
    sparse_pressure_gpu.COLOUR_GRID = int(colour)
    cluster, bricks, dense, tail, nbr, blocks, fold, smooth, threads, grid, early = (rest + ["-"] * 11)[:11]
    sparse_pressure_gpu.TAIL_UNKNOWNS = _TAIL if tail == "-" else int(tail)
    sparse_pressure_gpu.CLUSTER_UNKNOWNS = _CLUSTER if cluster == "-" else int(cluster)
    sparse_pressure_gpu.BRICK_TRANSFERS = _BRICKS if bricks == "-" else bricks
    sparse_multigrid.MG_DENSE = None if dense == "-" else int(dense)
    sparse_pressure_vcycle.NBR = None if nbr == "-" else nbr
    sparse_pressure_vcycle.CLUSTER_BLOCKS = None if blocks == "-" else int(blocks)
    sparse_pressure_vcycle.TAIL_FOLD = None if fold == "-" else fold != "0"
    sparse_multigrid_bricks.SMOOTHER = None if smooth == "-" else smooth
    sparse_pressure_brick_smooth.SMOOTH_THREADS = None if threads == "-" else threads
    sparse_pressure_brick_smooth.SMOOTH_GRID = "slots" if grid == "-" else grid
    early = _EARLY if early == "-" else early
    if early is None:
        os.environ.pop(sparse_pressure_gpu.EARLY_STOP, None)
    else:
        os.environ[sparse_pressure_gpu.EARLY_STOP] = early


def carried(grid, keep=None):
    """A copy of the warm start's carried channel (keep None), or put *keep* back."""
    name = sparse_pressure.CARRIED
    if keep is None:
        return [grid.channels[name][0].copy(), *grid.channels[name][1:]] if name in grid.channels else False
    grid.channels.pop(name, None)
    if keep is not False:
        grid.channels[name] = [keep[0].copy(), *keep[1:]]


def the_solver():
    return next(reversed(sparse_pressure_gpu._solvers.values()))  # the last used (moved to the end)


def solve(sim, dt, keep):
    import cupy as cp

    carried(sim.grid, keep)
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    p, stats = sparse_pressure.solve_pressure(sim.grid, dt, tolerance=sim.settings.pressure_tolerance,
                                              max_iterations=sim.settings.pressure_max_iterations)
    b.record()
    b.synchronize()
    return cp.cuda.get_elapsed_time(a, b), p, stats["iterations"]


def loop_pace(replays, stopped=False):
    """ms an iteration of the last solver's loop graph, the convergence test off; and whether
    it ran to the end (not stopped: a stopped loop's kernels return at once). *stopped*: the
    loop replayed with S_STOPPED set, every kernel returning at its first line — the pace of
    its launches alone (each grid still dispatched), the floor no fold of work goes under."""
    import cupy as cp

    solver = the_solver()
    solver.state[1] = int(stopped)  # S_STOPPED
    solver.state[3] = 10 ** 8  # S_MAXIT
    solver.scalars[1] = -1.0  # D_THRESH: ‖r‖² ≤ −1 never holds
    solver.loop.run()  # captured here if the solve never needed a whole block
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    for _ in range(replays):
        solver.loop.run()
    b.record()
    b.synchronize()
    ran = int(solver.state[1].get()) == int(stopped)
    solver.state[1] = 1
    return cp.cuda.get_elapsed_time(a, b) / (replays * solver.check_every), ran


def iteration_kernels():
    """{kernel: (ms, launches)} of one iteration of the last solver, launched directly."""
    import cupy as cp

    solver = the_solver()
    solver.state[1] = 0
    solver.state[3] = 10 ** 8
    solver.scalars[1] = -1.0
    pairs = defaultdict(list)
    plain = launch.Kernels.launch_grid

    def timed(self, name, *args):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        plain(self, name, *args)
        b.record()
        pairs[name].append((a, b))
    cp.cuda.Device().synchronize()
    launch.Kernels.launch_grid = timed
    try:
        solver._iteration()
    finally:
        launch.Kernels.launch_grid = plain
    cp.cuda.Device().synchronize()
    out = {k: (sum(cp.cuda.get_elapsed_time(a, b) for a, b in v), len(v)) for k, v in pairs.items()}
    if solver.dense is not None:  # once a solve (the start), not an iteration's: its own entry
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        solver._dense_inverse()
        b.record()
        b.synchronize()
        out["(start) mg_dense_inverse"] = (cp.cuda.get_elapsed_time(a, b), 1)
    solver.state[1] = 1
    return out


_PASSES = ("start", "first sweep", "red", "black", "residual", "restrict", "prolong", "coarsest", "copy")


def tail_profile(runs, length=256):
    """Per stamp of the last solver's tail kernel (TAIL_PROFILE; module notes): (level, pass,
    median cycles since the stamp before, median µs likewise by the kernel's %globaltimer span),
    and the median span in µs; None without a tail."""
    import cupy as cp

    from voxfx.kernels import backend

    solver = the_solver()
    if not solver.tail:
        return None
    name = solver._tail_kernel()
    base = solver._module(name)
    options = base.options + (f"-DTAIL_PROFILE={length}",)
    profiled = launch.Kernels(base.filename, options, base.threads)
    kernel = profiled.get(name)
    if solver.tail_shared:
        kernel.max_dynamic_shared_size_bytes = solver.tail_shared
    if solver.cluster_blocks > 8:
        cp.cuda.driver.funcSetAttribute(kernel.kernel.ptr, NON_PORTABLE_CLUSTER_ATTRIBUTE, 1)
    module = backend.load_module(base.filename, options)
    stamps = cp.ndarray((length, 3), cp.int64, module.get_global("tail_stamps"))
    count = cp.ndarray((1,), cp.int32, module.get_global("tail_stamp_count"))
    own = solver._module
    solver._module = lambda n: profiled if n == name else own(n)
    solver.state[1] = 0
    solver.state[3] = 10 ** 8
    solver.scalars[1] = -1.0
    rows = []
    try:
        for _ in range(runs):
            count[...] = 0
            solver._iteration()
            cp.cuda.Device().synchronize()
            n = int(count.get()[0])
            rows.append(cp.asnumpy(stamps[:n]))
    finally:
        del solver._module
        solver.state[1] = 1
    n = min(len(r) for r in rows)
    cycles = np.median(np.array([np.diff(r[:n, 0]) for r in rows], float), axis=0)
    span = np.median([(r[n - 1, 1] - r[0, 1]) * 1e-3 for r in rows])
    per_cycle = span / max(cycles.sum(), 1.0)
    codes = rows[0][1:n, 2]
    return [(int(c) // 16, _PASSES[int(c) % 16], cy, cy * per_cycle) for c, cy in zip(codes, cycles)], span


def safe_profile(variant, runs):
    """tail_profile, or None printing why (a bench's instrument: the A/B goes on)."""
    try:
        return tail_profile(runs)
    except Exception as e:  # noqa: BLE001
        print(f"tail profile of {variant} failed: {type(e).__name__}: {e}", flush=True)
        return None


def print_profile(variant, profile):
    if profile is None:
        print(f"  {variant}: no tail")
        return
    rows, span = profile
    print(f"  {variant}: span {span:.1f} µs in {len(rows)} passes (block 0's thread 0, clock64 → µs by the span)")
    by_level = defaultdict(float)
    for level, _, _, us in rows:
        by_level[level] += us
    print("    per level (the passes ending there, µs): "
          + ", ".join(f"{lv} {us:.1f}" for lv, us in sorted(by_level.items())))
    print("    passes: " + "; ".join(f"{lv}:{kind} {us:.2f}" for lv, kind, _, us in rows))


def print_brick_shape(solver):
    """The pool's slots and the brick smoothing's grid (the last variant's solver, where it smooths so)."""
    if solver.brick_smooth:
        print(f"pool slots {int(solver.brick_ptrs.get()[5]) >> 6}; brick smoothing {solver.smooth_blocks} blocks of "
              f"{solver.smooth_threads} threads")


def print_kernels(kernels, profiles):
    print("\none iteration kernel by kernel (event pair a launch, first substep): kernel ms (launches)")
    for variant, k in kernels.items():
        total = sum(ms for ms, _ in k.values())
        print(f"  {variant}: total {total:.3f} ms in {sum(n for _, n in k.values())} launches; "
              + ", ".join(f"{name} {ms:.3f} ({n})" for name, (ms, n) in sorted(k.items(), key=lambda kv: -kv[1][0])))
    if profiles:
        print("\nthe tail's passes (first substep; level:pass µs, each ending at its barrier)")
        for variant, profile in profiles.items():
            print_profile(variant, profile)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--substeps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--substep-runs", type=int, default=4)
    ap.add_argument("--pace-rounds", type=int, default=1, help="rounds of the loop's pace, the variants in turn")
    ap.add_argument("--floor", action="store_true", help="also the loop's pace with every kernel stopped at once")
    ap.add_argument("--tail-profile", type=int, default=0, help="iterations of the tail's pass profile per variant")
    ap.add_argument("--variants", nargs="+", default=["plain:0:1", "shared:1:1", "shared-colour2:1:2",
                                                      "shared-colour4:1:4"])
    args = ap.parse_args()
    import cupy as cp

    sparse_pressure.REUSE_TABLES = False  # the variants solve the same cells in turn
    sparse_pressure_gpu._SOLVER_CACHE = 2 * len(args.variants)
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; variants "
          "NAME:TAIL_SHARED:COLOUR_GRID[:CLUSTER_UNKNOWNS[:BRICK_TRANSFERS[:DENSE[:TAIL[:NBR]]]]]",
          flush=True)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    for _ in range(args.warm):  # compile every variant's kernels, capture its graphs
        old = before_pressure(sim, dt)
        keep = carried(sim.grid)
        for variant in args.variants:
            use(variant)
            _, p, _ = solve(sim, dt, keep)
            loop_pace(1)
        sparse_pressure.carry(sim.grid, p)
        after_pressure(sim, dt, old, p)
    rows = {variant: defaultdict(list) for variant in args.variants}
    kernels, profiles = {}, {}
    for step in range(args.substeps):
        old = before_pressure(sim, dt)
        keep = carried(sim.grid)
        first = None
        for _ in range(args.repeats):
            for variant in args.variants:
                use(variant)
                ms, p, its = solve(sim, dt, keep)
                p = cp.asnumpy(p)
                first = p if first is None else first
                rows[variant]["solve"].append(ms)
                rows[variant]["iterations"].append(its)
                rows[variant]["max |dp|"].append(float(np.abs(p - first).max()))
                rows[variant]["same bits"].append(bool(np.array_equal(p.view(np.int32), first.view(np.int32))))
                rows[variant]["levels"].append(len(the_solver().strides))
        for variant in [v for _ in range(args.pace_rounds) for v in args.variants]:  # rounds of the variants in turn
            use(variant)
            solve(sim, dt, keep)
            pace, ran = loop_pace(args.replays)
            rows[variant]["loop/it"].append(pace)
            rows[variant]["loop ran"].append(ran)
            if args.floor:
                rows[variant]["floor/it"].append(loop_pace(args.replays, stopped=True)[0])
            if step == 0 and variant not in kernels:
                kernels[variant] = iteration_kernels()
            if step == 0 and args.tail_profile and variant not in profiles:
                profiles[variant] = safe_profile(variant, args.tail_profile)
        use(args.variants[-1])
        _, p, _ = solve(sim, dt, keep)
        sparse_pressure.carry(sim.grid, p)
        after_pressure(sim, dt, old, p)
    solver = the_solver()
    print(f"{args.n}³, {len(sim.pos):,} particles, {sim.grid.brick_count()} bricks, {sim.fluid_cell_count():,} fluid "
          f"cells; strides {solver.strides}, tail {solver.tail[0] if solver.tail else None}, cluster from "
          f"{solver.cluster_from} ({solver.cluster_blocks} blocks), tail shared {solver.tail_shared} B; sizes "
          f"{solver.sizes.get().tolist()}")
    print_brick_shape(solver)
    print("\nvariant | solve ms (median) | loop ms an iteration (median, min) | CG iterations | max |dp| | same bits | "
          "loop ran | levels")
    for variant, r in rows.items():
        pace = np.array(r["loop/it"]) * 1e3
        print(f"  {variant} | {np.median(r['solve']):.3f} | {np.median(pace):.1f}, {pace.min():.1f} µs | "
              f"{sorted(set(r['iterations']))} | {max(r['max |dp|']):.3g} | {all(r['same bits'])} | "
              f"{all(r['loop ran'])} | {sorted(set(r['levels']))}"
              + (f" | launches alone {np.median(r['floor/it']) * 1e3:.1f} µs" if r["floor/it"] else ""))
    print_kernels(kernels, profiles)
    if args.substep_runs:
        ev, sub = [cp.cuda.Event() for _ in range(6)], [cp.cuda.Event() for _ in range(6)]
        stages = defaultdict(list)
        for _ in range(args.substep_runs):
            for variant in args.variants:
                use(variant)
                ms, its, _ = timed_sparse_substep(sim, dt, ev, sub)
                stages[variant].append((ms, its))
        print("\nwhole substeps, variants in turn (ms medians): variant | topology | p2g | pressure | project | "
              "g2p+advect | substep | CG it")
        for variant, runs in stages.items():
            med = np.median(np.array([ms[:5] for ms, _ in runs], float), axis=0)
            print(f"  {variant} | " + " | ".join(f"{m:.2f}" for m in med) + f" | {med.sum():.2f} | "
                  f"{[its for _, its in runs]}")
    print(f"VOXFX env: {({k: v for k, v in os.environ.items() if k.startswith('VOXFX')})}")


if __name__ == "__main__":
    main()
