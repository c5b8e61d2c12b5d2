"""MGPCG iterations to 1e-4 per multigrid variant, on the dam break's own pressure systems
(issue 24, helper i24m; CPU, NumPy): the sparse simulation steps on NumPy, and at chosen
substeps every variant solves that substep's system (the same b, cell types and warm
start) with ``sparse_pressure.pcg``; the simulation goes on with the default's pressure.

    python3 bench/flip_mg_iterations.py [--n 64 128] [--substeps 10] [--every 3]
        [--variants base omega=1.15 ...] [--cold]

A variant is ``name`` or ``key=value,key=value`` over ``mgv.MGOptions``'s
fields. Printed per variant: the iterations at each captured substep, their sum, the
relative change against the first variant, and the estimated cost of an iteration on the
H100 (``cost``: today's 237 µs plus each extra launch at ~6 µs and its bytes at the
measured ~6 µs a level-0 sweep).
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
from voxfx.kernels.flip import sparse_multigrid_variants as mgv  # noqa: E402
from voxfx.kernels.flip import sparse_pressure  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402

ITERATION_US = 237.0  # an 8M PCG iteration on the H100 (RESULTS, ninth session)
LAUNCH_US = 6.0  # one extra launch
SWEEP_US = 6.0  # one level-0 colour pass's bytes over all unknowns, both colours


def parse_variant(text):
    """(label, MGOptions) of 'base' or 'key=value,...'."""
    if text == "base":
        return text, mgv.MGOptions()
    fields = {}
    for part in text.split(","):
        key, value = part.split("=")
        kind = type(getattr(mgv.MGOptions(), key))
        fields[key] = kind(value) if kind is not bool else value in ("1", "true", "True")
    return text, mgv.MGOptions(**fields)


def extra_cost_us(options, fraction):
    """Estimated µs an 8M iteration gains from *options* against today's V-cycle."""
    extra = 0.0
    if options.boundary_sweeps:
        passes = 4 * options.boundary_sweeps  # red and black, before and after
        levels = 2 if options.boundary_levels < 0 else min(options.boundary_levels, 2)  # levels 0-1 launch by launch
        extra += passes * levels * LAUNCH_US + passes * fraction * SWEEP_US / 2 * (1 + 1 / 8)
    return extra


def boundary_fraction(level, width):
    unknown = mgv.boundary_unknowns(level, width)
    return float(unknown.shape[0]) / max(level.m, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[64])
    ap.add_argument("--density", type=float, default=0.477, help="particles per grid cell of the box (8M at 256³)")
    ap.add_argument("--substeps", type=int, default=10)
    ap.add_argument("--every", type=int, default=3, help="capture every k-th substep (from the second)")
    ap.add_argument("--variants", nargs="+", default=["base"])
    ap.add_argument("--cold", action="store_true", help="solve from 0 (default: the warm start)")
    args = ap.parse_args()
    variants = [parse_variant(v) for v in args.variants]
    for n in args.n:
        run_size(n, args, variants)


def run_size(n, args, variants):
    """Step the dam break at n³ and print every variant's iterations (module notes)."""
    particles = int(args.density * n ** 3)
    spec, v, t = dam_break(n, particles)
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True)
    counts = {label: [] for label, _ in variants}
    counts["solver"] = []
    fractions = []
    original = sparse_pressure.pcg
    state = {"substep": 0}

    def capture(grid, kind, b, tolerance, max_iterations, preconditioner="mg", check_every=10, progress=None,
                x0=None, tables=()):
        result = original(grid, kind, b, tolerance, max_iterations, preconditioner, check_every, progress,
                          x0=x0, tables=tables)
        s = state["substep"]
        if args.every > 1 and s % args.every != 1:
            return result
        level = sparse_pressure.Unknowns(grid, kind)
        start = None if args.cold else x0
        for label, options in variants:
            M = mgv.VariantVCycle(grid, kind, level, options)
            counts[label].append(solve(level, M, b, tolerance, max_iterations, start)[0])
        counts["solver"].append(result[1])  # sparse_pressure.pcg's own count (base's check)
        fractions.append([boundary_fraction(level, w) for w in (1, 2, 3)])
        print(f"  n {n} substep {s}: unknowns {level.m:,}, levels {len(M.levels)} "
              f"(m {[L.m for L in M.levels]}), " + ", ".join(f"{lab} {counts[lab][-1]}" for lab, _ in variants),
              flush=True)
        return result

    sparse_pressure.pcg = capture
    try:
        t0 = time.perf_counter()
        for s in range(args.substeps):
            state["substep"] = s
            sim.substep(1 / 120)  # the 8M bench's substep
        elapsed = time.perf_counter() - t0
    finally:
        sparse_pressure.pcg = original
    f = np.mean(np.array(fractions), axis=0)
    print(f"n {n}, {particles:,} particles, {args.substeps} substeps in {elapsed:.0f} s, "
          f"{'cold' if args.cold else 'warm'} starts; boundary unknowns (width 1/2/3): "
          + "/".join(f"{x:.1%}" for x in f))
    base = sum(counts[variants[0][0]])
    print(f"sparse_pressure.pcg (the default, check every 10): {counts['solver']}")
    print(f"{'variant':44s} | iterations per captured substep | sum | vs first | est. µs/it | est. ms/solve")
    for label, options in variants:
        c = counts[label]
        width = max(1, options.boundary_width)
        cost = ITERATION_US + extra_cost_us(options, f[min(width, 3) - 1])
        print(f"{label:44s} | {c} | {sum(c)} | {sum(c) / base - 1:+.1%} | {cost:.0f} | "
              f"{cost * np.mean(c) / 1000:.2f}")


def solve(level, M, b_flat, tolerance, max_iterations, x0_flat):
    """(iterations, relative residual) of the NumPy PCG with preconditioner *M*
    (``sparse_pressure.pcg``'s loop, check every iteration)."""
    xp = np
    b = level.gather(b_flat)
    bb = sparse_pressure._dot(xp, b, b)
    thresh = bb * float(tolerance) ** 2
    x, r, rr = sparse_pressure._start(level, b, bb, None if x0_flat is None else level.gather(x0_flat))
    if not rr > thresh:
        return 0, 0.0
    z = M(r)
    d = z.copy()
    rz = sparse_pressure._dot(xp, r, z)
    it = 0
    while it < max_iterations:
        q = level.apply(d)
        alpha = rz / sparse_pressure._dot(xp, d, q)
        x = x + np.float32(alpha) * d
        r = r - np.float32(alpha) * q
        rr = sparse_pressure._dot(xp, r, r)
        it += 1
        if rr <= thresh:
            break
        z = M(r)
        rz_new = sparse_pressure._dot(xp, r, z)
        d = z + np.float32(rz_new / rz) * d
        rz = rz_new
    return it, float(np.sqrt(rr / bb))


if __name__ == "__main__":
    main()
