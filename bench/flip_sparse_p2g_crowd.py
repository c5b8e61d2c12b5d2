"""P2G launch by launch before and after the splash and the scatter's bricks split over blocks
(``VOXFX_SPARSE_SCATTER_SPLIT``; helper h17d, whose crowded-warp builds were measured here and
removed), on the 8M dam break with a user Timing preset:

    python3 bench/flip_sparse_p2g_crowd.py [--res 256] [--particles 8e6] [--timing fast] [--frames 12]
                                           [--repeat 7] [--splits 4096x16 2048x16 8192x32]
                                           [--way 'NAME=VALUE ...' ...]

At frame 0 (the seeding's order, no crowding) and after *frames* frames of 1/24 s
(``sim.step``: the splash piles particles into few cells), on that state's topology for a
substep of 1/72 s:

1. the crowding: pool cells and bricks, the fullest cell, the cells holding ≥ 32 / 256
   particles and the share of the particles in them, the heaviest bricks (particles a brick);
2. the order binning and the brick scatter alone (``_p2g_order.OrderLaunches``: count, scan,
   place, then ``p2g_scatter_brick`` of each build: the lean flip code unsplit, the split
   bricks of *splits*), in turn, medians of
   *repeat*, with the builds' integer sums compared bit for bit against the default's;
3. the whole P2G stage (``flip_sparse_p2g_stage.p2g_stage``: the row's P2G calls) each way
   (``WAYS``, or *way*), alternating, idle and queued (the device's time alone), then each
   launch of the stage by CUDA events (queued), each way; first each way's outputs' digest (the
   stage's, then the two rings from the fluid faces after it, ``stage_digest``: the ways' bits
   compared). Line 1 also counts the pool's idle bricks (no particle in their 27:
   ``sparse_gpu.brick_live``, the P2G tail "live" way's flags; helper h18f).

H100 numbers: bench/RESULTS.md, "h17d"."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_scatter  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _p2g_order import OrderLaunches  # noqa: E402
from _sparse_frames import frame_settings  # noqa: E402
from flip import dam_break  # noqa: E402
from flip_sparse_p2g_stage import SPIN, LaunchEvents, p2g_stage, set_way, timed_stage  # noqa: E402
from flip_sparse_particle_order import topology  # noqa: E402

WAYS = ["VOXFX_SPARSE_SCATTER_SPLIT=off", "VOXFX_SPARSE_SCATTER_SPLIT=on"]


def crowding(cp, run):
    """Line 1 of the notes from the order binning's counts (after its count and scan)."""
    count = run.count[:run.cells]
    n = int(run.n)
    big = [(k, int((count >= k).sum()), int(count[count >= k].sum())) for k in (32, 256)]
    bricks = cp.sort(count.reshape(-1, 512).sum(axis=1))[::-1]  # particles a pool slot, heaviest first
    from voxfx.kernels.flip.sparse_gpu import brick_live

    live = brick_live(run.g, run.count)  # the idle-brick way's flags (sparse_transfer.P2G_TAILS "live")
    used = int(run.g.brick_slot.sum())
    idle = (f"; bricks in use {used:,}, with particles {int((bricks > 0).sum()):,}, live (those or a neighbour's) "
            f"{int(live.sum()):,}: idle {1 - int(live.sum()) / max(used, 1):.1%}")
    heavy = [(k, int((bricks >= k).sum()), int(bricks[bricks >= k].sum())) for k in (4096, 16384)]
    return (f"{run.cells:,} pool cells, fullest cell {int(count.max()):,} particles, occupied cells "
            f"{int((count > 0).sum()):,}; " + "; ".join(f"cells ≥ {k}: {c:,} holding {p / n:.1%} of the particles"
                                                        for k, c, p in big)
            + f"; heaviest bricks {', '.join(f'{int(b):,}' for b in bricks[:5])} particles, the ten heaviest "
            f"{int(bricks[:10].sum()) / n:.1%}; " + "; ".join(f"bricks ≥ {k:,}: {c:,} holding {p / n:.1%}"
                                                               for k, c, p in heavy) + idle)


def stage_digest(cp, sim, dt):
    """A digest of the stage's outputs (old faces, faces, masks, cell types) and of the two rings
    from the fluid faces after it (as after the projection: ``sparse_transfer.extrapolate(valid=
    fluid_faces)``), for the ways' bits compared on this state (helper h18f)."""
    import hashlib

    from voxfx.kernels.flip import sparse_transfer

    g = sim.grid
    old = p2g_stage(sim, dt)
    arrays = [*old, *g.faces(), *g.valid, g["cell"]]
    sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
    arrays += [*g.faces(), *g.valid]
    h = hashlib.sha1()
    for a in arrays:
        h.update(cp.asnumpy(a).tobytes())
    return h.hexdigest()[:12]


def stage_ways(cp, sim, dt, repeat):
    """Part 3 of the notes."""
    spin = cp.RawKernel(SPIN, "spin")
    events = LaunchEvents(cp)
    times = {(w, q): [] for w in WAYS for q in (False, True)}
    digests = {}
    for way in WAYS:  # warm: compiles; each way's outputs' digest
        set_way(WAYS, way)
        timed_stage(cp, sim, dt, spin, True)
        digests[way] = stage_digest(cp, sim, dt)
    print("outputs' digests (the stage, then the fluid faces' rings): " + ", ".join(
        f"{w or '(defaults)'} {d}" for w, d in digests.items())
        + (" — the same" if len(set(digests.values())) == 1 else " — DIFFER"))
    for r in range(repeat):
        for way in (WAYS if r % 2 == 0 else WAYS[::-1]):
            set_way(WAYS, way)
            for queued in (False, True):
                times[(way, queued)].append(timed_stage(cp, sim, dt, spin, queued)[0])
    print(f"P2G stage (medians of {repeat}, ways alternating) | idle ms | queued ms (device alone)")
    for way in WAYS:
        print(f"{way or '(defaults)'} | {np.median(times[(way, False)]):.3f} | {np.median(times[(way, True)]):.3f}")
    for way in WAYS:
        set_way(WAYS, way)
        per = [timed_stage(cp, sim, dt, spin, True, events) for _ in range(repeat)]
        names = [n for n, _ in per[0][2]]
        med = [float(np.median([rows[i][1] for _, _, rows in per])) for i in range(len(names))]
        total = float(np.median([ms for ms, _, _ in per]))
        print(f"launches, {way or '(defaults)'}, queued (medians of {repeat}): "
              + ", ".join(f"{n} {ms:.3f}" for n, ms in zip(names, med))
              + f"; launches {sum(med):.3f}, the rest {total - sum(med):.3f}, stage {total:.3f}")
    set_way(WAYS, "")


def split_scatter(run, kernels, blocks, spread=sparse_scatter.SCATTER_SPREAD):
    """``OrderLaunches.scatter`` over a grid of (slots, *blocks*): a SCATTER_SPLIT build."""
    from voxfx.kernels.flip.sparse_gpu import _I32, _I64, _dims, _frame

    g, cells = run.g, run.cells

    def go():
        kernels.launch_grid("p2g_scatter_brick", (cells // 512, blocks), (sparse_scatter.SCATTER_THREADS,), (
            run.pos, run.vel, run.count, _I32(0), run.start, run.count, g.brick_slot, g.slot_coords, g.brick_nbr,
            _I64(cells), _I32(g.closed), *_dims(g), *_frame(g), run.bounds, _I32(spread), run.order, _I32(1),
            run.acc))
    return go


def scatter_builds(cp, sim, repeat, splits=()):
    """Part 2 of the notes (FLIP: the stage's own particles, no C); *splits*: (T, K) of the split
    builds (SCATTER_SPLIT T, a grid of K blocks a brick)."""
    from _cuda_events import timed

    run = OrderLaunches(cp, sim.grid, sim.pos, sim.vel)
    count = run.count_pass("count_particles_grouped")
    count()
    run.scan()
    run.place()
    print("   " + crowding(cp, run))
    builds = {"lean flip, unsplit": sparse_scatter._build(4, 1, 1, 1)}
    fns = {name: run.scatter(k) for name, k in builds.items()}
    for t, k in splits:
        fns[f"split, ≥ {t} a block, ≤ {k} blocks"] = split_scatter(run, sparse_scatter._build(4, 1, 1, 1, t), k)
    sums = {}
    for name, fn in fns.items():  # warm, and each build's sums
        run.acc.fill(0)
        fn()
        sums[name] = cp.asnumpy(run.acc)
    first = next(iter(sums.values()))
    same = {name: bool(np.array_equal(s, first)) for name, s in sums.items()}
    rows = {"count_particles_grouped": count, "scan": run.scan, "place_particles": run.place}
    out = {k: [] for k in list(rows) + list(fns)}
    for r in range(repeat):
        for name, fn in (list(rows.items()) + list(fns.items()))[:: 1 if r % 2 == 0 else -1]:
            if name in fns:
                run.acc.fill(0)
            out[name].append(timed(cp, fn, 1))
    print(f"   launches alone (medians of {repeat}, in turn): " + ", ".join(
        f"{k} {np.median(v):.3f}" + (f" (sums {'the same' if same[k] else 'DIFFER'})" if k in same else "")
        for k, v in out.items()))


def report(cp, sim, label, repeat, splits, dt=1 / 72):
    topology(sim, dt)
    print(f"{label}: {len(sim.pos):,} particles, {sim.grid.brick_count():,} bricks", flush=True)
    scatter_builds(cp, sim, repeat, splits)
    stage_ways(cp, sim, dt, repeat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--timing", default="fast")
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--splits", nargs="*", default=["4096x16", "2048x16", "8192x32"],
                    help="the split builds, TxK: ≥ T particles a block, ≤ K blocks a brick")
    ap.add_argument("--way", action="append", default=None, help="the stage's ways, NAME=VALUE ... ('' the defaults)")
    args = ap.parse_args()
    if args.way is not None:
        WAYS[:] = args.way
    splits = [tuple(int(x) for x in s.split("x")) for s in args.splits]
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    os.environ.pop("VOXFX_SPARSE_SCATTER_SPLIT", None)
    spec, v, t = dam_break(args.res, int(args.particles))
    sim = FlipSimulation(spec, frame_settings(args.timing, None, 0, None), v, t, xp=cp, sparse=True)
    state = {k: np.array(x) for k, x in sim.checkpoint().items()}  # frame 0, restored after its report
    report(cp, sim, "frame 0 (the seeding's order)", args.repeat, splits)
    sim.restore(state)
    for f in range(args.frames):
        stats = sim.step(1 / 24)
        print(f"   frame {f}: {stats['substeps']} substeps, {sim.grid.brick_count():,} bricks", flush=True)
    report(cp, sim, f"after {args.frames} frames (the splash)", args.repeat, splits)


if __name__ == "__main__":
    main()
