"""Level 0 dense in the pool's bricks (issue 24, h20c's probe; ``bench/_dense_bricks.py``: the layout, the
passes, their references): how fast level 0's passes run in that layout on the 8M dam break's real system,
against today's level-0 kernels timed in the same process.

    python3 bench/flip_sparse_dense_bricks.py [--n 256] [--particles 8e6] [--warm 2] [--repeats 30]
        [--today 7]

The state: ``bench/flip_sparse_pcg_loop.py``'s set-up (the dam break, ``--warm`` substeps, then one
substep's stages up to the solve and today's solve on it). Then:

- today: one PCG iteration launched kernel by kernel (pcg_loop's ``iteration_kernels``: an event pair a
  launch), ``--today`` times, each kernel's median; the loop graph's pace (``loop_pace``);
- the dense system of the same cells (``DenseSystem``: diag, level 1's mask, nbr27, the bricks holding
  FLUID) and the check that the dense kernels give today's values on the unknowns — the sweeps, the
  residual and A p (``sparse_multigrid`` / ``CompactLevel`` xp code on CuPy with today's tables), the
  restriction and the prolongation (``TableBuilder``'s level 1, down[0], up[0]): max |difference| and
  whether the bits are the same;
- each dense pass by event pairs (median of ``--repeats`` after 5), and a captured graph of level 0's
  share of a V-cycle (pre-smoothing 2 sweeps, residual, restriction, prolongation, post-smoothing 2
  sweeps) plus q = A p with p·q (replayed ``--repeats`` times, an event pair each); each pass's floor (its
  bytes over the bricks / 3.35 TB/s, the H100's HBM3 peak).

Measured (H100 80GB HBM3, driver 580.159.04, session 20's h20c call; bench/RESULTS.md "h20c"): 3168 bricks, 2027
holding FLUID — 1,037,824 dense cells for 1,017,700 unknowns (the dam break's liquid fills its bricks); the
sweeps, residual, A p and prolongation today's bits on every unknown. Level 0's V-cycle share in a graph 84.6 µs
(11 launches), with A p·dot 100.4 µs (13), against today's level 0 by event pairs 177.0 µs in 11 launches, an
estimated ~108–117 µs of its 222.3 µs loop iteration: ~3–7% of an iteration, the passes ~2–3× their bytes' floor.
Event pairs a launch (this bench's and pcg_loop's) carry ~5 µs of host launch each: compare the graphs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import flip_sparse_pcg_loop as pcg  # noqa: E402  (loads the package)

import _dense_bricks as db  # noqa: E402
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.pressure import MG_SWEEPS  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA, PROLONG_WEIGHTS, RESTRICT_WEIGHTS  # noqa: E402

PEAK = 3.35e12  # B/s, H100 SXM HBM3


def today_kernels(runs):
    """{kernel: (median ms, launches)} of today's iteration launched kernel by kernel, *runs* times."""
    per = defaultdict(list)
    launches = {}
    for _ in range(runs):
        for name, (ms, n) in pcg.iteration_kernels().items():
            per[name].append(ms)
            launches[name] = n
    return {name: (float(np.median(v)), launches[name]) for name, v in per.items()}


def timed(cp, fn, repeats, warm=5):
    """Median ms of *fn* by an event pair a call."""
    for _ in range(warm):
        fn()
    out = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(out)), float(np.min(out))


def diff(cp, mine, today):
    """(max |mine − today|, max |today|, the same bits)."""
    mine, today = cp.asarray(mine, cp.float32), cp.asarray(today, cp.float32)
    return (float(cp.abs(mine - today).max()), float(cp.abs(today).max()),
            bool(cp.array_equal(mine.view(cp.int32), today.view(cp.int32))))


def checks(cp, grid, kind, level, s, k, b_flat):
    """Rows (pass, max |dense − today| on the unknowns, max |today|, same bits) and level 1's counts."""
    rng = cp.random.default_rng(3)
    m = level.m
    on = cp.arange(m + 1) < m
    b = cp.where(on, level.gather(b_flat), 0).astype(cp.float32)
    x = cp.where(on, rng.standard_normal(m + 1, dtype=cp.float32), 0).astype(cp.float32)
    bd, xd = s.from_unknowns(level, b), s.from_unknowns(level, x)
    rows = []
    today = cp.zeros_like(x)
    for colour in (0, 1):
        sparse_multigrid.sweep(level, today, b, colour, MG_OMEGA)
        k.sweep(xd, bd, colour, True)
    rows.append(("first sweep (red, black from x = 0)", *diff(cp, s.to_unknowns(level, xd)[:m], today[:m])))
    for colour, name in ((0, "sweep red"), (1, "sweep black")):
        sparse_multigrid.sweep(level, today, b, colour, MG_OMEGA)
        k.sweep(xd, bd, colour)
        rows.append((name, *diff(cp, s.to_unknowns(level, xd)[:m], today[:m])))
    xd = s.from_unknowns(level, x)
    r = b - level.apply(x)
    rd = cp.zeros_like(xd)  # the kernels write the bricks holding FLUID alone: the others stay 0, as read
    k.residual(xd, bd, rd)
    rows.append(("residual", *diff(cp, s.to_unknowns(level, rd)[:m], r[:m])))
    q = level.apply(x)
    qd = cp.zeros_like(xd)
    k.apply_dot(xd, qd)
    rows.append(("A p", *diff(cp, s.to_unknowns(level, qd)[:m], q[:m])))
    dot = float((x[:m].astype(cp.float64) * q[:m].astype(cp.float64)).sum())
    mine = float(k.dot.get()[0])
    rows.append(("p·Ap (relative)", abs(mine - dot) / abs(dot), abs(dot), mine == dot))
    coarse, lattice, down, up = db.today_level1(grid, kind, level)
    places = db.level1_places(grid, lattice)
    counts = (coarse.m, int((s.diag1 > 0).sum()), bool((places >= 0).all()),
              bool(cp.array_equal(s.diag1[places].astype(cp.float32), coarse.diag[:coarse.m])))
    bc = cp.float32(0.5) * sparse_multigrid.gather_sum(r, down, RESTRICT_WEIGHTS)
    b1 = cp.zeros(s.capacity * db.COARSE, cp.float32)
    k.restrict(rd, b1)
    rows.append(("restriction", *diff(cp, b1[places], bc[:coarse.m])))
    x1 = cp.where(cp.arange(coarse.m + 1) < coarse.m, rng.standard_normal(coarse.m + 1, dtype=cp.float32), 0)
    x1 = x1.astype(cp.float32)
    x1d = cp.zeros(s.capacity * db.COARSE, cp.float32)
    x1d[places] = x1[:coarse.m]
    xt = x + sparse_multigrid.gather_sum(x1, up, PROLONG_WEIGHTS)
    k.prolong(x1d, xd)
    rows.append(("prolongation", *diff(cp, s.to_unknowns(level, xd)[:m], xt[:m])))
    return rows, counts


def floors(bricks):
    """Bytes a pass moves over *bricks* bricks (each array once; halos not counted) and its floor µs."""
    half, cells, f, u8 = 256, 512, 4, 1
    per = {
        "sweep (one colour)": half * (f + f + f + f + u8),  # the other colour's x, own x, b, diag; x written
        "residual": cells * (f + f + u8 + f),  # x, b, diag; r written
        "A p · dot": cells * (f + u8 + f),  # p, diag; q written
        "restriction": cells * f + 64 * (u8 + f),  # r; diag1, b1 written
        "prolongation": 64 * f + cells * (u8 + f + f),  # x1; diag, x read and written
    }
    return {name: (b * bricks, b * bricks / PEAK * 1e6) for name, b in per.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--today", type=int, default=7, help="today's iterations launched kernel by kernel")
    args = ap.parse_args()
    import cupy as cp

    assert MG_SWEEPS == 2, "level0_vcycle is written for MG_SWEEPS 2"
    t0 = time.perf_counter()
    sparse_pressure.REUSE_TABLES = False
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = pcg.dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    for _ in range(args.warm):
        old = pcg.before_pressure(sim, dt)
        _, p, _ = pcg.solve(sim, dt, pcg.carried(sim.grid))
        sparse_pressure.carry(sim.grid, p)
        pcg.after_pressure(sim, dt, old, p)
    pcg.before_pressure(sim, dt)
    keep = pcg.carried(sim.grid)
    ms, _, its = pcg.solve(sim, dt, keep)
    solver = pcg.the_solver()
    sizes = solver.sizes.get().tolist()
    today = today_kernels(args.today)
    pace = [pcg.loop_pace(5)[0] * 1e3 for _ in range(3)]
    print(f"state after {args.warm} substeps ({time.perf_counter() - t0:.0f} s): solve {ms:.2f} ms, {its} CG "
          f"iterations; strides {solver.strides}; sizes {sizes}", flush=True)
    total = sum(ms for ms, _ in today.values())
    level0 = {n: v for n, v in today.items() if n.endswith("_nb") or "_bricks" in n}
    tail = {n: v for n, v in today.items() if n.startswith("mg_tail") or n.startswith("mg_coarse")}
    rest = {n: v for n, v in today.items() if n not in level0 and n not in tail}
    l0 = sum(ms for ms, _ in level0.values())
    print(f"today (same process), one iteration kernel by kernel (median of {args.today}; µs, launches): total "
          f"{total * 1e3:.1f} in {sum(n for _, n in today.values())} launches; loop graph's pace "
          f"{np.median(pace):.1f} µs an iteration")
    for title, group in (("level 0", level0), ("tail", tail), ("the rest (CG vectors, reductions)", rest)):
        ordered = sorted(group.items(), key=lambda kv: -kv[1][0])
        print(f"  {title}: {sum(ms for ms, _ in group.values()) * 1e3:.1f} µs — "
              + ", ".join(f"{n} {ms * 1e3:.1f} ({c})" for n, (ms, c) in ordered))

    grid = sim.grid
    b_flat, kind = sparse_pressure.pressure_rhs(grid, dt)[:2]
    level = sparse_pressure.Unknowns(grid, kind)
    s = db.DenseSystem(grid, kind)
    k = db.Kernels(s)
    nb = len(s.bricks)
    print(f"\n{grid.brick_count()} bricks (capacity {s.capacity}), {nb} holding FLUID: dense level 0 "
          f"{nb * 512:,} cells for {level.m:,} unknowns (today's m {sizes[1]:,}), level 1 {nb * 64:,} for "
          f"{int((s.diag1 > 0).sum()):,}; dense vectors {s.n * 4 / 2**20:.1f} MiB each over the pool "
          f"(diag {s.n / 2**20:.1f} MiB uint8, nbr27 {s.capacity * 27 * 4 / 2**20:.2f} MiB)", flush=True)
    rows, counts = checks(cp, grid, kind, level, s, k, b_flat)
    print(f"level 1: today {counts[0]:,} unknowns, dense mask {counts[1]:,}, every one placed {counts[2]}, "
          f"the same diagonal {counts[3]} (today's solver: {sizes[3]:,})")
    print("check against today on the unknowns: pass | max |dense − today| | max |today| | same bits")
    for name, d, scale, same in rows:
        print(f"  {name} | {d:.3g} | {scale:.3g} | {same}")

    on = cp.asarray(s.diag > 0)
    rng = cp.random.default_rng(1)
    x = cp.where(on, rng.standard_normal(s.n, dtype=cp.float32), 0).astype(cp.float32)
    b = s.dense(b_flat)
    r, q = cp.zeros_like(x), cp.zeros_like(x)
    b1 = cp.zeros(s.capacity * 64, cp.float32)
    x1 = cp.where(cp.asarray(s.diag1 > 0), rng.standard_normal(s.capacity * 64, dtype=cp.float32), 0)
    x1 = x1.astype(cp.float32)
    R = args.repeats
    passes = {
        "sweep red": lambda: k.sweep(x, b, 0),
        "sweep black": lambda: k.sweep(x, b, 1),
        "sweep red (first, x = 0)": lambda: k.sweep(x, b, 0, True),
        "residual": lambda: k.residual(x, b, r),
        "A p · dot (partials)": lambda: k.apply_dot(x, q, finish=False),
        "partials' sum": k.sum_partials,
        "restriction": lambda: k.restrict(r, b1),
        "prolongation": lambda: k.prolong(x1, x),
    }
    times = {name: timed(cp, fn, R) for name, fn in passes.items()}
    stream = cp.cuda.Stream(non_blocking=True)
    graphs = {}
    with stream:
        for name, body in (("level 0 of a V-cycle", lambda: k.level0_vcycle(x, b, r, b1, x1)),
                           ("level 0 of a V-cycle + A p·dot", lambda: (k.level0_vcycle(x, b, r, b1, x1),
                                                                       k.apply_dot(x, q)))):
            stream.begin_capture()
            body()
            graphs[name] = stream.end_capture()
        graph_ms = {}
        for name, g in graphs.items():
            for _ in range(5):
                g.launch(stream)
            out = []
            for _ in range(R):
                a, e = cp.cuda.Event(), cp.cuda.Event()
                a.record(stream)
                g.launch(stream)
                e.record(stream)
                e.synchronize()
                out.append(cp.cuda.get_elapsed_time(a, e))
            graph_ms[name] = (float(np.median(out)), float(np.min(out)))

    fl = floors(nb)
    print(f"\ndense bricks, a pass by an event pair (median, least of {R}; µs) | its bytes | floor at 3.35 TB/s µs")
    floor_of = {"sweep red": "sweep (one colour)", "sweep black": "sweep (one colour)",
                "sweep red (first, x = 0)": None, "residual": "residual", "A p · dot (partials)": "A p · dot",
                "partials' sum": None, "restriction": "restriction", "prolongation": "prolongation"}
    for name, (med, least) in times.items():
        f = fl.get(floor_of[name]) if floor_of[name] else None
        extra = f" | {f[0] / 1e6:.1f} MB | {f[1]:.1f}" if f else ""
        print(f"  {name} | {med * 1e3:.1f}, {least * 1e3:.1f}{extra}")
    sweep = (times["sweep red"][0] + times["sweep black"][0]) / 2
    vcycle = (times["sweep red (first, x = 0)"][0] + 7 * sweep + times["residual"][0] + times["restriction"][0]
              + times["prolongation"][0])
    ap_ = times["A p · dot (partials)"][0] + times["partials' sum"][0]
    print(f"  sum of level 0's V-cycle passes (first red + 7 colour passes + residual + restriction + "
          f"prolongation) {vcycle * 1e3:.1f} µs; + A p·dot {(vcycle + ap_) * 1e3:.1f} µs (13 launches)")
    for name, (med, least) in graph_ms.items():
        print(f"  graph: {name} | {med * 1e3:.1f}, {least * 1e3:.1f} µs")

    dense_l0 = vcycle + ap_
    est = np.median(pace) - l0 * 1e3 + dense_l0 * 1e3
    print(f"\nestimate: today's iteration {np.median(pace):.1f} µs − today's level-0 kernels {l0 * 1e3:.1f} µs "
          f"+ the dense passes {dense_l0 * 1e3:.1f} µs = {est:.1f} µs an iteration (the CG vectors' "
          f"{sum(ms for ms, _ in rest.values()) * 1e3:.1f} µs kept as today's: over the dense vectors they would "
          f"stream {nb * 512 / max(level.m, 1):.2f}× the cells)")
    print(f"elapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
