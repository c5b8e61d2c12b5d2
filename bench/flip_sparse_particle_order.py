"""What the particles' order in memory buys P2G and G2P (issue 24, helper i24o), and the
frame-end brick sort (``kernels/flip/particle_sort.py``, ``VOXFX_SPARSE_PARTICLE_SORT``) on
whole frames, on the GPU, in one process:

    python3 bench/flip_sparse_particle_order.py [--res 256] [--particles 8e6] [--timing fast]
                                                [--frames 12] [--repeat 3] [--runs 2] [--sorts auto auto@0.08 1 2]
                                                [--sort-only]

The dam break (``bench/flip.py``) with the Timing preset *timing* (Fast: 3 substeps a frame):

1. Stages at frame 0 (the seeding's order: cell by cell): one substep of 1/72 s
   (``flip_sparse.timed_sparse_substep``, CUDA events) from the same state with the particle
   arrays (pos, vel, C) in each order (``ORDERS``): as they are, brick order
   (``particle_sort.brick_order``), P2G's own bins' order (pool slot, then cell; the order P2G
   computes: ``grid.bins``), a random shuffle (the worst case), and brick order with G2P in the
   particles' own order (``VOXFX_SPARSE_G2P=input``: no reads through the bins); the ways in
   turn, *repeat* times, medians: topology, P2G, its binning + scatter (``particles_to_grid``),
   G2P + advection, the substep; P2G's binning and scatter launch by launch in each order (the
   same bricks); the sort's own time by each path
   (``VOXFX_SPARSE_PARTICLE_SORT_PATH``: keys, argsort, the gathers) and ``particle_sort.disorder``.
2. Frames: the frame-0 state restored (``checkpoint``/``restore``) and *frames* frames of
   1/24 s stepped with the sort off, auto (auto@X: sorting above a disorder of X) and every K
   frames (*sorts*), the ways in turn *runs*
   times (after a round of two frames a way untimed): each frame's step ms (synchronised), the
   sums over frames 0–5 and 6–11, which frames sorted, the off run's disorder a frame. The runs
   move the same particles (P2G's integer sums and G2P are order-free; tests/gpu), so each
   frame has the same substeps and CG iterations whichever way.
3. Stages after the last unsorted run (frame *frames*: the splash has mixed the order), as 1.

``--sort-only``: the set-up, then only the sort's parts by each path (``sort_parts``) on frame
0's order and on a random shuffle of it (helper i24o2).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import particle_sort, sparse_topology_gpu, sparse_transfer, transfer  # noqa: E402
from voxfx.kernels.flip.sparse_grid import BrickReach, margin_mode, substep_margin  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_frames import frame_settings  # noqa: E402
from flip import dam_break  # noqa: E402
from flip_sparse import STAGES, timed_sparse_substep  # noqa: E402

ORDERS = ("as is", "brick", "bins", "shuffle", "brick, G2P input")


def topology(sim, dt=1 / 72):
    """The bricks of *sim*'s particles for a substep of *dt* (``timed_sparse_substep``'s update)."""
    g, s = sim.grid, sim.settings
    gravity = float(np.linalg.norm(s.gravity))
    reach = BrickReach(sim.vel, dt, gravity, sim.spec.voxel_size)
    margin = None if margin_mode() == "brick" and sparse_topology_gpu.device_margin() else substep_margin(
        float(transfer.max_speed(sim.vel)), dt, sim.spec.voxel_size, gravity)
    g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, bodies=sim.obstacle_bodies,
             scratch=sim.band is None, reach=reach if margin_mode() == "brick" else None)


def launches(cp, sim, perms, repeat):
    """P2G's order binning and scatter launch by launch (``_p2g_order.OrderLaunches``) on the
    particles in each order, the same bricks (FLIP): ms, medians of *repeat*, ways in turn."""
    from _cuda_events import timed
    from _p2g_order import OrderLaunches

    from voxfx.kernels.flip import sparse_scatter

    names = ("count_particles_grouped", "scan", "place_particles", "p2g_scatter_brick")
    out = {w: {k: [] for k in names} for w in perms}
    runs = {}
    for way, p in perms.items():
        pos, vel = (sim.pos, sim.vel) if p is None else (sim.pos[p], sim.vel[p])
        run = OrderLaunches(cp, sim.grid, pos, vel)
        runs[way] = (run, dict(zip(names, (run.count_pass("count_particles_grouped"), run.scan, run.place,
                                           run.scatter(sparse_scatter.SCATTER)))))
    for r in range(repeat + 1):
        for way in (list(perms) if r % 2 == 0 else list(perms)[::-1]):
            run, fns = runs[way]
            for name in names:
                if name == "p2g_scatter_brick":
                    run.acc.fill(0)
                ms = timed(cp, fns[name], 1)
                if r:
                    out[way][name].append(ms)
    print("P2G launch by launch (FLIP, the same bricks), ms: order | " + " | ".join(names))
    for way in perms:
        print(f"   {way} | " + " | ".join(f"{np.median(out[way][k]):.3f}" for k in names))


def permutation(cp, sim, way):
    """The permutation (new index → old) of *way* for *sim*'s particles (None: as they are)."""
    if way == "as is":
        return None
    if way.startswith("brick"):
        return particle_sort.brick_order(sim.pos, sim.spec, sim.boundary == "closed", sim.kill_distance, cp)
    if way == "bins":  # the bins of these positions on their topology (``topology``)
        sparse_transfer.particles_to_grid(sim.grid, sim.pos, sim.vel, sim.c)
        bins, sim.grid.bins = getattr(sim.grid, "bins", None), None
        return None if bins is None else bins[2].astype(cp.int64)  # None: NumPy's P2G keeps no bins
    return cp.asarray(np.random.default_rng(11).permutation(len(sim.pos)))


def stages(cp, sim, label, repeat, dt=1 / 72):
    """Part 1 / 3: one substep from the same state in each order (module notes)."""
    saved = (sim.pos.copy(), sim.vel.copy(), None if sim.c is None else sim.c.copy(), sim.t)
    topology(sim)
    perms = {}
    for way in ORDERS:
        perms[way] = permutation(cp, sim, way)
    if cp is not np:  # NumPy (a smoke run): no launches
        launches(cp, sim, {w: perms[w] for w in ORDERS[:4]}, repeat)
    if perms["bins"] is not None:
        check = cp.sort(perms["bins"])
        ok = bool((check == cp.arange(len(check))).all())
        print(f"   (P2G's bins order a permutation of the particles: {ok})")
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = {w: [] for w in ORDERS}
    for r in range(repeat + 1):  # a first round untimed
        for way in (ORDERS if r % 2 == 0 else ORDERS[::-1]):
            p = perms[way]
            sim.pos, sim.vel = (saved[0].copy(), saved[1].copy()) if p is None else (saved[0][p], saved[1][p])
            if saved[2] is not None:
                sim.c = saved[2].copy() if p is None else saved[2][p]
            sim.t = saved[3]
            if way.endswith("G2P input"):
                os.environ["VOXFX_SPARSE_G2P"] = "input"
            try:
                ms, it, parts = timed_sparse_substep(sim, dt, ev, sub)
            finally:
                os.environ.pop("VOXFX_SPARSE_G2P", None)
            if r:
                rows[way].append([ms[0], ms[1], parts[2], ms[4], sum(ms)])
    sim.pos, sim.vel, sim.c, sim.t = saved
    print(f"{label}: {len(sim.pos):,} particles, {sim.grid.brick_count():,} bricks; one substep of {dt:.4f} s "
          f"from the same state, ms (median of {repeat}, the ways in turn)")
    print("order | topology | P2G | bin+scatter | G2P+advect | substep")
    print("--- | --- | --- | --- | --- | ---")
    for way in ORDERS:
        m = np.median(np.array(rows[way]), axis=0)
        print(f"{way} | " + " | ".join(f"{v:.3f}" for v in m))
    sort_parts(cp, sim, repeat)


def sort_parts(cp, sim, repeat, label=""):
    """The brick sort's own time by each path (``VOXFX_SPARSE_PARTICLE_SORT_PATH``) on *sim*'s
    particles as they are (restored after): CUDA events around the keys, argsort, the fancy
    indexing of each array and ``gather_particles`` through the order (into arrays allocated
    once, as ``gather`` keeps them); medians of *repeat*."""
    closed = sim.boundary == "closed"
    ev = [cp.cuda.Event() for _ in range(5)]
    times = []
    state = (sim.pos, sim.vel, sim.c)
    kept = tuple(None if x is None else cp.empty_like(x) for x in state)  # the gathers' arrays kept between frames
    for _ in range(repeat + 1):  # a first round untimed
        sim.pos, sim.vel, sim.c = state
        sim.sort_spare = kept
        ev[0].record()
        key = particle_sort.brick_keys(sim.pos, sim.spec, closed, sim.kill_distance, cp)
        ev[1].record()
        order = particle_sort.order_of(key, cp)
        ev[2].record()
        moved = [x[order] for x in state if x is not None]  # argsort path: one fancy index an array
        ev[3].record()
        particle_sort.gather(sim, order)  # gather path: every array in one launch
        ev[4].record()
        ev[4].synchronize()
        times.append([cp.cuda.get_elapsed_time(x, y) for x, y in zip(ev, ev[1:])])
        del moved, order
    sim.pos, sim.vel, sim.c = state
    sim.sort_spare = None
    a = time.perf_counter()
    share = particle_sort.disorder(key, sim.spec, closed, sim.kill_distance, cp)
    took = (time.perf_counter() - a) * 1e3
    k, o, g, g1 = np.median(np.array(times[1:]), axis=0)
    arrays = f"pos, vel{', C' if sim.c is not None else ''}"
    print(f"{label}the brick sort itself, ms: keys {k:.3f}; argsort {o:.3f}, gathers of {arrays} one at a time "
          f"{g:.3f}: {k + o + g:.3f} (VOXFX_SPARSE_PARTICLE_SORT_PATH=argsort); "
          f"argsort, {arrays} in one launch (gather_particles) {g1:.3f}: {k + o + g1:.3f} (gather); "
          f"disorder {share:.3f} ({took:.2f} ms on the host with its read; auto sorts above "
          f"{particle_sort.AUTO_DISORDER})")


def frames_ab(cp, sim, state, frames, runs, sorts):
    """Part 2 (module notes): the state restored, *frames* frames per way, the ways in turn
    (a first round of two frames a way untimed); the off runs' disorder at each frame's end
    (untimed, after the frame's time)."""
    ways = ["off"] + [str(k) for k in sorts]
    out = {w: [] for w in ways}
    default = particle_sort.AUTO_DISORDER
    closed = sim.boundary == "closed"
    for r in range(-1, runs):
        for way in (ways if r % 2 == 0 else ways[::-1]):  # an even count of runs ends with "off" (part 3)
            mode, _, limit = way.partition("@")  # auto@X: auto with AUTO_DISORDER X
            os.environ[particle_sort.SWITCH] = mode
            particle_sort.AUTO_DISORDER = float(limit) if limit else default
            sim.restore(state)
            cp.cuda.Device().synchronize()
            row = []
            for _ in range(frames if r >= 0 else 2):
                a = time.perf_counter()
                stats = sim.step(1 / 24)
                cp.cuda.Device().synchronize()
                ms = (time.perf_counter() - a) * 1e3
                key = particle_sort.brick_keys(sim.pos, sim.spec, closed, sim.kill_distance, cp)
                share = particle_sort.disorder(key, sim.spec, closed, sim.kill_distance, cp)
                row.append((ms, stats["substeps"], stats["iterations"], sim.grid.brick_count(), stats["sorted"], share))
            if r >= 0:
                out[way].append(row)
                print(f"   run {r} sort {way}: " + " ".join(f"{ms:.1f}{'*' if s else ''}" for ms, _, _, _, s, _ in row),
                      flush=True)
    os.environ.pop(particle_sort.SWITCH, None)
    particle_sort.AUTO_DISORDER = default
    print(f"frames from frame 0's state, step ms (synchronised; the sort, when it runs, inside the frame), the ways "
          f"in turn {runs} times: per frame the median over runs; * sorted at the frame's end (the last run)")
    print("sort | " + " | ".join(str(f) for f in range(frames)) + " | Σ 0–5 | Σ 6–11 | Σ all")
    print("--- | " + " | ".join("---" for _ in range(frames)) + " | --- | --- | ---")
    for way in ways:
        med = np.median(np.array([[ms for ms, *_ in row] for row in out[way]]), axis=0)
        mark = ["*" if r[4] else "" for r in out[way][-1]]
        print(f"{way} | " + " | ".join(f"{v:.1f}{m}" for v, m in zip(med, mark))
              + f" | {med[:6].sum():.1f} | {med[6:12].sum():.1f} | {med.sum():.1f}")
    base = out["off"][-1]
    print("substeps | " + " | ".join(str(r[1]) for r in base))
    print("CG it | " + " | ".join(str(r[2]) for r in base))
    print("bricks | " + " | ".join(str(r[3]) for r in base))
    print("disorder (off) | " + " | ".join(f"{r[5]:.3f}" for r in base))
    same = all([r[1:3] for r in row] == [r[1:3] for r in base] for w in ways for row in out[w])
    print(f"every run the same substeps and CG iterations: {same}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--timing", default="fast")
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--sorts", nargs="*", default=["auto", "auto@0.08", "1", "2"],
                    help="ways besides off: a value of VOXFX_SPARSE_PARTICLE_SORT, or auto@X (auto sorting above X)")
    ap.add_argument("--sort-only", action="store_true",
                    help="only the sort's parts by each path, on frame 0's order and on a random shuffle")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    spec, v, t = dam_break(args.res, int(args.particles))
    a = time.perf_counter()
    os.environ.pop(particle_sort.SWITCH, None)
    sim = FlipSimulation(spec, frame_settings(args.timing, None, 0, None), v, t, xp=cp, sparse=True)
    cp.cuda.Device().synchronize()
    print(f"{args.res}³ dam break, {len(sim.pos):,} particles, timing {args.timing}: set-up "
          f"{time.perf_counter() - a:.1f} s", flush=True)
    state = {k: np.array(x) for k, x in sim.checkpoint().items()}  # frame 0, as a resumed bake reads it
    if args.sort_only:
        sort_parts(cp, sim, args.repeat, "frame 0 (the seeding's order): ")
        shuffle = cp.asarray(np.random.default_rng(1).permutation(len(sim.pos)))
        particle_sort.permute(sim, shuffle)
        sort_parts(cp, sim, args.repeat, "a random shuffle: ")
        return
    stages(cp, sim, "frame 0 (the seeding's order)", args.repeat)
    sim.restore(state)
    for _ in range(3):  # the frames' kernels compiled (count control, CFL, ...) before any is timed
        sim.step(1 / 24)
    frames_ab(cp, sim, state, args.frames, args.runs, args.sorts)
    last = "never sorted" if args.runs % 2 == 0 or not args.sorts else f"sort {args.sorts[-1]}"
    stages(cp, sim, f"frame {args.frames}, {last} (the splash)", args.repeat)
    print("stages:", ", ".join(STAGES))


if __name__ == "__main__":
    main()
