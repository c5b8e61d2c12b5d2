"""Sparse FLIP P2G and G2P at 8M, old against new in one process (issue 24, helper i24t):

    python3 bench/flip_sparse_transfer_ab.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 7]
                                             [--steps 8] [--builds 3:512 6:256]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s, then:

1. P2G's scatter by kind (``sparse_scatter.SCATTER_KINDS``: "particles", a thread a
   particle and 96 shared atomics each, and "cells", a thread per (component, cell) summing
   in registers) on the order binning of these positions: the scatter launch alone (its
   zeroing, kernel and division) and the whole ``particles_to_grid``, CUDA-event medians of
   *repeat*, alternating; the two kinds' fixed-point sums and faces compared bit for bit.
2. The binning's scan: ``sparse_gpu.scan_counts`` (two launches, the exclusive scan and the
   max count) against ``sparse_pressure_setup.inclusive_scan`` (two launches) and the
   subtraction and max it would need (two more), the same starts.
3. G2P + advection (``flip_sparse_g2p.g2p_variants``) with the bricks kernel also built for
   *builds* (BLOCKS:THREADS, ``sparse_gpu.g2p_build``), every variant's bits against the walk's.
4. *steps* whole substeps each of "old" (defaults of main) and "new" (the cells scatter and
   the fastest G2P build of part 3 with the same bits), alternating after two warm ones:
   the stages' medians (``flip_sparse.timed_sparse_substep``).
"""

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
from voxfx.kernels.flip import sparse_gpu, sparse_pressure_setup, sparse_scatter  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import STAGES, timed_sparse_substep  # noqa: E402
from flip_sparse_g2p import g2p_variants, timed  # noqa: E402

ENV = ("VOXFX_SPARSE_SCATTER", "VOXFX_SPARSE_G2P_MIN_BLOCKS", "VOXFX_SPARSE_BINNING")


def scatter_kinds(cp, g, pos, vel, repeat):
    """Part 1 (module notes)."""
    from voxfx.kernels.flip.sparse_gpu import _I32, _I64, _dims, _frame

    size = g.size
    start, count, order, _, bounds = sparse_gpu.bin_particles_order(g, pos, vel, None)
    faces = tuple(cp.empty(size, cp.float32) for _ in range(3))
    valid = tuple(cp.empty(size, cp.uint8) for _ in range(3))
    args = (pos, vel, count, _I32(0), start, count, g.brick_slot, g.slot_coords, g.brick_nbr, _I64(size),
            _I32(g.closed), *_dims(g), *_frame(g), *faces, *valid)
    occupied = count[:-1][count[:-1] > 0]
    print(f"particles per occupied cell: mean {float(occupied.mean()):.2f}, max {int(occupied.max())}")
    sums, ms = {}, {k: [] for k in sparse_scatter.SCATTER_KINDS}
    whole = {k: [] for k in sparse_scatter.SCATTER_KINDS}
    for kind in sparse_scatter.SCATTER_KINDS:  # warm (compiles) and the bits
        acc, _ = sparse_scatter.launch(size, args, order=order, bounds=bounds, kind=kind)
        sums[kind] = (acc.copy(), [f.view(cp.uint32).copy() for f in faces] + [m.copy() for m in valid])
    for _ in range(3):  # alternating rounds
        for kind in sparse_scatter.SCATTER_KINDS:
            ms[kind].append(timed(cp, lambda kind=kind: sparse_scatter.launch(size, args, order=order, bounds=bounds,
                                                                              kind=kind), repeat))
            os.environ["VOXFX_SPARSE_SCATTER"] = kind
            whole[kind].append(timed(cp, lambda: sparse_gpu.particles_to_grid(g, pos, vel, None, "scatter"), repeat))
            os.environ.pop("VOXFX_SPARSE_SCATTER")
    a, b = sums["particles"], sums["cells"]
    same = bool((a[0] == b[0]).all()) and all(bool((x == y).all()) for x, y in zip(a[1], b[1]))
    print("scatter kind | scatter launch ms (zero + kernel + divide) | whole particles_to_grid ms")
    for kind in sparse_scatter.SCATTER_KINDS:
        print(f"{kind} | {np.median(ms[kind]):.3f} | {np.median(whole[kind]):.3f}")
    print("cells scatter: " + ("the same sums and faces bit for bit" if same else "SUMS DIFFER"))
    return same


def scans(cp, g, pos, vel, repeat):
    """Part 2 (module notes)."""
    _, count, _, _, _ = sparse_gpu.bin_particles_order(g, pos, vel, None)
    cells = g.size
    bounds = cp.zeros(2, cp.uint32)

    def shared_scan():
        inclusive = sparse_pressure_setup.inclusive_scan(count)
        start = inclusive - count
        most = count[:cells].max()
        return start, most

    ours = timed(cp, lambda: sparse_gpu.scan_counts(cp, count, cells, bounds), repeat)
    theirs = timed(cp, shared_scan, repeat)
    start, most = shared_scan()
    same = bool((sparse_gpu.scan_counts(cp, count, cells, bounds) == start).all()) and int(bounds[1]) == int(most)
    print(f"scan: scan_counts {ours:.3f} ms; inclusive_scan + subtraction + max {theirs:.3f} ms; "
          + ("the same starts and max" if same else "STARTS DIFFER"))


def substeps(cp, sim, dt, steps, new_env):
    """Part 4 (module notes)."""
    modes = {"old": {}, "new": new_env}
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = {m: [] for m in modes}
    for i in range(2 + 2 * steps):
        mode = "old" if i % 2 == 0 else "new"
        for name in ENV:
            os.environ.pop(name, None)
        os.environ.update(modes[mode])
        ms, it, part = timed_sparse_substep(sim, dt, ev, sub)
        if i >= 2:
            rows[mode].append(ms + [sum(ms), it, part[2]])
    for name in ENV:
        os.environ.pop(name, None)
    print("mode | " + " | ".join(f"{s} ms" for s in STAGES) + " | substep ms | CG it | bin+gather ms")
    for mode, r in rows.items():
        med = np.median(np.array(r, dtype=np.float64), axis=0)
        print(f"{mode} {modes[mode]} | " + " | ".join(f"{m:.3f}" for m in med[:len(STAGES)])
              + f" | {med[len(STAGES)]:.2f} | {med[len(STAGES) + 1]:.0f} | {med[len(STAGES) + 2]:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--substeps", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--builds", nargs="*", default=["3:512", "6:256"])
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = dam_break(args.res, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    for _ in range(args.substeps):
        sim.substep(dt)
    cp.cuda.Device().synchronize()
    g, pos, vel = sim.grid, sim.pos, sim.vel
    print(f"{args.res}³, {int(pos.shape[0]):,} particles, {g.brick_count()} bricks ({g.size:,} pool cells)",
          flush=True)
    same = scatter_kinds(cp, g, pos, vel, args.repeat)
    scans(cp, g, pos, vel, args.repeat)
    builds = [tuple(int(x) for x in b.split(":")) for b in args.builds]
    results = g2p_variants(cp, sim, dt, args.repeat, builds)
    default = results[("bricks", "cell", sparse_gpu.G2P_THREADS, 0)][0]
    best = min(((ms, key) for key, (ms, ok) in results.items() if ok and key[:2] == ("bricks", "cell")
                and key[3] and key[2] == sparse_gpu.G2P_THREADS), default=None)
    new_env = {"VOXFX_SPARSE_SCATTER": "cells"} if same else {}
    if best is not None and best[0] < default:
        new_env["VOXFX_SPARSE_G2P_MIN_BLOCKS"] = str(best[1][3])
    print(f"G2P default build {default:.3f} ms; fastest build at {sparse_gpu.G2P_THREADS} threads: {best}")
    substeps(cp, sim, dt, args.steps, new_env)
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB")


if __name__ == "__main__":
    main()
