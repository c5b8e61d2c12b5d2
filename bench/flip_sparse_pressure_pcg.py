"""The sparse PCG loop alone, A/B (issue 24): ``bench/flip_sparse.py``'s dam break on the
GPU brought to its first pressure solve, its unknowns and multigrid tables built once, then
``sparse_pressure_gpu.solve_unknowns`` on them again and again, the variants of
``sparse_pressure_gpu.FUSE`` (the iteration's fused kernels) taking turns (the same
right-hand side: the same iterations). Per variant: the median wall ms of a solve (a sync
on each side), its iterations, ms per iteration, the launches of one iteration (counted on
the Kernels' launch calls, the iteration launched kernel by kernel), the graphs captured
(each once: replays do not capture), and whether the pressures are equal bit for bit.

    python3 bench/flip_sparse_pressure_pcg.py [--n 256] [--particles 8e6] [--repeats 20] [--fuse 0 finish 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_multigrid import VCycle  # noqa: E402
from voxfx.kernels.grid import launch  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse_pressure import before_pressure  # noqa: E402


def launches_per_iteration(solver) -> int:
    """The launches of one iteration of *solver*, kernel by kernel (its solve has stopped:
    every kernel returns at once)."""
    names = []
    plain = launch.Kernels.launch_grid
    launch.Kernels.launch_grid = lambda self, name, *a: (names.append(name), plain(self, name, *a))
    try:
        solver._iteration()
    finally:
        launch.Kernels.launch_grid = plain
    return len(names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--fuse", nargs="+", default=["0", "finish", "1"], help="sparse_pressure_gpu.FUSE values, in turn")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    before_pressure(sim, dt)
    g, s = sim.grid, sim.settings
    b, kind, _, _ = sparse_pressure.pressure_rhs(g, dt)
    level = sparse_pressure.compact_unknowns(g, kind)
    M = VCycle(g, kind, level)
    bc = level.gather(b)
    sparse_pressure_gpu._SOLVER_CACHE = 2 * len(args.fuse)
    ms = {f: [] for f in args.fuse}
    out = {}
    for rep in range(args.repeats + 1):  # the first: compile and capture
        for f in args.fuse:
            sparse_pressure_gpu.FUSE = f
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            x, its, res, ok = sparse_pressure_gpu.solve_unknowns(level, M, bc, s.pressure_tolerance,
                                                                 s.pressure_max_iterations, "mg")
            cp.cuda.Device().synchronize()
            if rep:
                ms[f].append((time.perf_counter() - t0) * 1e3)
            out[f] = (cp.asnumpy(x), its, res, ok)
    print(f"{args.n}³, {len(sim.pos):,} particles, {level.m:,} unknowns, {len(M.levels)} levels; "
          f"medians of {args.repeats} solves")
    print("FUSE | solve ms | iterations | ms / iteration | launches / iteration | graphs captured | p equal to first")
    first = out[args.fuse[0]][0]
    for f in args.fuse:
        sparse_pressure_gpu.FUSE = f
        solver = sparse_pressure_gpu._solver([L.m + 1 for L in M.levels], "mg", 10)
        its = out[f][1]
        med = float(np.median(ms[f]))
        print(f"  {f} | {med:.3f} | {its} | {med / max(its, 1):.4f} | {launches_per_iteration(solver)} | "
              f"{solver.captures} | {np.array_equal(out[f][0], first)}")


if __name__ == "__main__":
    main()
