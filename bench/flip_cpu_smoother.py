"""Level 0's smoother on the CPU backend (issue 24, helper h20d): the sparse dam break on NumPy
(``FlipSimulation(..., xp=np, sparse=True)``, the product path without a GPU) stepped with the
red-black sweeps (``sparse_multigrid_bricks.SMOOTHER`` "rb") and brick by brick ("brick"), two
simulations of the same scene in one process, their substeps interleaved (the order alternating
substep by substep) so both see the same host: ms a substep, of it the pressure solve
(``sparse_pressure.solve_pressure``), and the CG iterations.

    python3 bench/flip_cpu_smoother.py [--n 64 96] [--substeps 8] [--dt 1/120]

Measured: bench/RESULTS.md, section h20d.
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
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402

WAYS = ("rb", "brick")


def run_size(n, args):
    particles = int(args.density * n ** 3)
    spec, v, t = dam_break(n, particles)
    sims = {way: FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True) for way in WAYS}
    rows = {way: [] for way in WAYS}  # (substep ms, pressure ms, iterations)
    solve, spent = sparse_pressure.solve_pressure, [0.0]

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return solve(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t0

    sparse_pressure.solve_pressure = timed
    try:
        for s in range(args.substeps):
            for way in (WAYS if s % 2 == 0 else WAYS[::-1]):
                sparse_multigrid_bricks.SMOOTHER = way
                spent[0] = 0.0
                t0 = time.perf_counter()
                stats = sims[way].substep(args.dt)
                rows[way].append((1e3 * (time.perf_counter() - t0), 1e3 * spent[0], int(stats["iterations"])))
    finally:
        sparse_pressure.solve_pressure = solve
        sparse_multigrid_bricks.SMOOTHER = None
    print(f"n {n}: {len(sims['rb'].pos):,} particles, dt {args.dt:.5f}, {args.substeps} substeps "
          f"(the first left out of the means)")
    means = {}
    for way in WAYS:
        a = np.array(rows[way][1:], np.float64)
        means[way] = a.mean(axis=0)
        print(f"  {way:5s} substep ms {[round(r[0]) for r in rows[way]]}")
        print(f"  {way:5s} pressure ms {[round(r[1]) for r in rows[way]]}")
        print(f"  {way:5s} CG iterations {[r[2] for r in rows[way]]} (sum {sum(r[2] for r in rows[way])})")
    rb, br = means["rb"], means["brick"]
    print(f"  means: substep {rb[0]:.0f} → {br[0]:.0f} ms ({100 * (br[0] / rb[0] - 1):+.1f}%), "
          f"pressure {rb[1]:.0f} → {br[1]:.0f} ms ({100 * (br[1] / rb[1] - 1):+.1f}%), "
          f"iterations {rb[2]:.2f} → {br[2]:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[64, 96])
    ap.add_argument("--density", type=float, default=0.477, help="particles per grid cell of the box (8M at 256³)")
    ap.add_argument("--substeps", type=int, default=8)
    ap.add_argument("--dt", type=float, default=1 / 120)
    args = ap.parse_args()
    for n in args.n:
        run_size(n, args)


if __name__ == "__main__":
    main()
