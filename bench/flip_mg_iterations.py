"""MGPCG iterations to 1e-4 per multigrid variant, on the dam break's own pressure systems
(issue 24, helper i24m; CPU, NumPy): the sparse simulation steps on NumPy, and at chosen
substeps every variant solves that substep's system (the same b, cell types and warm
start) with the PCG loop of ``sparse_pressure.pcg``; the simulation goes on with the
default's pressure.

    python3 bench/flip_mg_iterations.py [--n 64 128] [--substeps 10] [--every 3]
        [--variants base omega=1 boundary_sweeps=2 ...] [--cold]

A variant is ``base`` (the default V-cycle) or ``key=value,key=value`` over
``sparse_multigrid_variants.MGOptions``'s fields. Printed per variant: the iterations at
each captured substep, their sum, the change against the first variant, and the estimated
cost of an 8M iteration on the H100 (today's 237 µs plus each extra launch at ~6 µs and
its bytes at ~6 µs a level-0 sweep).

Measured (this 2-core CPU, 2026-11-26, before the default became ω = 1.3, so "base" is
plain Gauss-Seidel; the 8M scene's 0.48 particles a box cell; warm starts; the sum over
the captured substeps):

| variant | 64³, 125k particles, substeps 1–10 | 128³, 1M, substeps 1 and 6 | est. µs an 8M iteration |
|---|---|---|---|
| base (ω = 1, 2 sweeps) | 29 | 17 | 237 |
| ω = 1.3 | 28 (−3%); 40 vs 45 over substeps 1–41 (−11%) | 15 (−12%); 33 vs 39 over 1–13 (−15%) | 237 |
| ω = 1.15 / 1.45 / 1.6 | — ; 44 / 43 / 46 vs 45 | 36 / 33 / 36 vs 39 | 237 |
| boundary smoothing, 1 sweep | 26 (−10%) | 15 (−12%) | 287 |
| boundary smoothing, 2 sweeps | 25 (−14%) | 13 (−24%) | 336 |
| 2 sweeps, band of 2 cells | 24 (−17%) | — | 344 |
| 2 sweeps next to AIR only | 30 (+3%) | — | 339 |
| 2 sweeps on levels 0–1 / from level 1 / from level 2 | 26 / 28 / — | — / — / 17 | — |
| 1 sweep on level 0 alone | — | 17 (0%) | 263 |
| 3 sweeps (``MG_SWEEPS``) | 26 (−10%) | 15 (−12%) | ~285 (8 launches) |
| 4 or 8 sweeps on levels ≥ 2 (the tail) | — | 17 (0%) | tail ×2–4 |
| coarsest solved exactly / 32 coarsest sweeps | 29 / 29 | — | — |
| coarse FLUID if ≥ 4 / ≥ 1 FLUID children | 33 (+14%) / 35 (+21%) | — | — |
| coarse correction × 1.2 / 1.4 / 1.6 | 30 / 33 / 34 | — | — |
| coarse free surface at the fine layer (1/θ) / every AIR coefficient 0.8, 0.9, 1.33, 2 | 30 / 33, 32, 32, 33 | — | — |

Only ω costs nothing on the device (no launch; ~10% more bytes an iteration, measured), so
it alone went into the kernels. On the H100 (``bench/flip_mg_omega_call.sh``): 8M 14 → 11
iterations, pressure 5.15 / 4.99 → 4.50 / 4.64 ms; 65M 20–21 → 17, 32.0 / 32.2 → 30.1 / 30.3 ms.

The hierarchy kept across substeps (issue 24, helper h19c; ``bench/_mg_kept.py``): variants
``keep_every=k`` (levels ≥ ``keep_from`` rebuilt at substeps s with s % k = 0, held in between:
ages 0 … k − 1) and ``keep_lag=k`` (always k substeps old); level 0 and the transfers between
level ``keep_from`` − 1 and the kept level ``keep_from`` are the current substep's. Printed too:
the share of level 0's and level 1's sets changed over each substep, and the change of the
iterations by the kept hierarchy's age. Measured (this 2-core CPU, 2026-11-27, dt 1/120, the 8M
scene's 0.48 particles a box cell, warm starts, ``--every 1``), mean CG iterations a substep and
the change against a fresh hierarchy:

| policy | 64³ (125k), substeps 0–95 | 128³ (1M), 0–47 | 256³ (8M, the row's scene), 0–11 |
|---|---|---|---|
| fresh (today) | 6.81 | 8.75 | 11.08 |
| levels ≥ 1 kept, rebuilt every 2 | +0.12 | +0.27 | +0.33 |
| … every 3 | +0.19 | +0.85 | +0.83 |
| … every 4 | +0.33 | +1.46 | +2.08 |
| … every 8 | +1.07 | +4.75 | +3.00 |
| levels ≥ 2 kept (level 1 fresh), every 2 | — | +0.06 | — |
| … every 3 | +0.01 | +0.00 | +0.00 |
| … every 4 | — | +0.10 | — |
| … every 8 | +0.10 | +0.50 | +0.08 |

Levels ≥ 1 kept cost more the older they are and the finer the grid (the liquid crosses more
cells a substep): at age 1 / 2 / 3 / 7 substeps +0.25 / +0.34 / +0.75 / +2.7 iterations at 64³,
+0.54 / +2.06 / +3.42 / +10.8 at 128³, +0.7–1.0 / +1.8–3.0 / +5.0 / +10 at 256³ (few samples:
12 substeps, one to four an age); level 1's set changes 2–7% a substep at 128³ after substep 10,
up to 12.6% at 64³. With level 1 fresh, levels ≥ 2 kept cost ≤ +0.17 up to age 3 and +1.2 at
age 7 (128³); over 128³ substeps 0–95 (past the splash) levels ≥ 1 every 2 +0.24, levels ≥ 2
every 3 / 4 / 8 +0.01 / +0.02 / +0.36. The cost follows the surface's motion in the kept level's cells:
at the 8M frames' motion (128³ at ``--dt`` 1/96, one level up: 8M's levels ≥ 2 and ≥ 3) levels ≥ 1
every 2 / 3 +0.35 / +0.95, levels ≥ 2 every 2 / 3 / 4 +0.03 / +0.05 / +0.03; at the row's (1/60)
+0.77 and +0.02 / +0.25 / +0.25; 256³ at 1/120 after substep 10, levels ≥ 2 two substeps old
+1 to +2. So at 8M only levels ≥ 3 keep (~0.1–0.14 ms of device a substep). The ``--every 2``
and ``keep_lag`` runs, the cost estimate at 8M and what a device version needs: bench/RESULTS.md,
section h19c.

Initial guesses (issue 24, helper h20b; ``--guesses``, ``bench/_mg_guess.py``; each solved with the first
variant's V-cycle, its start ‖b − A x₀‖/‖b‖ printed). Today's warm start (p_n) starts at 1.2–2.7 ‖b‖ once the
dam break runs (64³ and 128³, Δt 1/72 and 1/120), so the loop falls back to x₀ = 0: warm = cold, 8.67 (1/72) and
9.00 (1/120) iterations a substep at 128³ from substep 10. The residual sits on the cells that changed (new to
the liquid, or next to one that left it). Predictors from the history — p_n + θ(p_n − p_{n−1}) (θ 0.5, 1), the
last correction scaled, α p_n, the A-norm's best over span{p_n, p_{n−1}(, p_{n−2})}, the least ‖r‖₂ over
span{p_n(, p_{n−1})}, new cells from their neighbours' mean — change no count at 128³ (±0.00; −0.31 for the
least-‖r‖ fits at 64³). ``relaxl=k,w`` (k Jacobi sweeps on the changed unknowns and those within w of them;
``sparse_pressure_warm.relax_guess``, ``VOXFX_PRESSURE_WARM_RELAX``): 128³ 2,1 −0.86 (1/72) / −1.00 (1/120) over
5–9% of the unknowns, 8,3 −0.93 / −1.00; 1 sweep or w = 0 nothing (the start stays over ‖b‖). Level 0's
smoother as a polynomial (``poly=cheb|jacobi``): Chebyshev 3 / 4 +0.17 / −0.33 at 128³, Jacobi 2–4 +0 to
+1.9; each step gathers six neighbours for every unknown (two colour passes' bytes). bench/RESULTS.md, h20b.

Level 1 smoothed block by block (issue 24, helper h20i; ``level1=block4|block8|block4rb|none``,
``level1_sweeps=k``; the last column, launches an 8M iteration): block8 (the aligned 2×2×2 slots' 4³ blocks)
with level 0 brick by brick keeps the red-black counts at 64³ and 128³ (k 2) and takes +0.43 a substep at 256³
(substeps 1-13, k 2 or 3), +0.33 at Δt 1/60 (k 3), for 18 launches an iteration against 22. bench/RESULTS.md, h20i.

Boundary sweeps inside level 0's bricks (issue 24, helper s23a; ``brick_boundary=k``, ``brick_boundary_width=w``,
``brick_boundary_first=1``, ``brick_boundary_omega``; no launch on the device, so free but for the passes). Printed
too: the mean convergence factor (‖r‖/‖b‖ at the end ^ 1/iterations). This CPU, 2026-11-27, Δt 1/120, warm starts:
64³ (substeps 1-39 every 2) 137 → 135 iterations (k 1 or 2, w 1; −1.5%), factor 0.240 → 0.223; 128³ (substeps 1-13
every 3) 42 → 41 (−2.4%, substep 1 alone; w 2, "first", ω 1 or k 4 w 3 no better), factor 0.298 → 0.275; 256³ (8M,
substeps 1, 5, 9) 31 → 30 (−3.2%), factor 0.385 → 0.376. Below the ~10% that would pay for building it in the
kernels; boundary sweeps on levels ≥ 1 (red-black, launches on level 1) −4.8% at 128³, with the bricks' −7.1%.
bench/RESULTS.md, s23a.
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
import _mg_guess  # noqa: E402  (bench/, beside this script)
import _mg_kept  # noqa: E402
import _mg_variants as mgv  # noqa: E402
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


def launches(options):
    """Launches of an 8M PCG iteration on the device with *options*' level-0 and level-1 smoothers (h20i;
    counted from ``sparse_pressure_vcycle._vcycle_fused``, the CG vectors' launches included): red-black 27
    (h19a's event pairs), level 0 brick by brick 22 (h20a, h20e); level 1 launched one by one today takes 9
    (mg_smooth_first2, the last black sweep with the black residuals, the red residuals, the restriction into
    level 2; the prolongation, 2 × 2 colour passes), by blocks 5 (pre-smoothing, residual, restriction;
    prolongation, post-smoothing: level 0's brick pattern), "block4rb" 7 (two passes a smoothing), "none" 3."""
    level1 = {"rb": 9, "block4": 5, "block8": 5, "block4rb": 7, "none": 3}[options.level1]
    return (22 if options.smoother == "brick" else 27) - 9 + level1


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
    ap.add_argument("--dt", type=float, default=1 / 120, help="the substep (s): 1/120 the 8M row's")
    ap.add_argument("--every", type=int, default=3, help="capture every k-th substep (from the second)")
    ap.add_argument("--variants", nargs="+", default=["base"])
    ap.add_argument("--cold", action="store_true", help="solve from 0 (default: the warm start)")
    ap.add_argument("--guesses", nargs="+", default=[],
                    help="initial guesses from the carried history, each solved with the first variant's "
                         "V-cycle (bench/_mg_guess.py: warm cold mean extrap=θ corr=θ scaled span2 span3 mr1 mr2)")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first k captured substeps from the means")
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
    ages = {label: [] for label, _ in variants}  # substeps since the kept hierarchy was built
    counts["solver"] = []
    rates = {}  # per variant: the final relative residual^(1/iterations) per captured substep (s23a)
    starts = {}  # per guess: ‖b − A x₀‖ / ‖b‖ at each captured substep
    for name in args.guesses:
        counts["guess " + name] = []
        starts["guess " + name] = []
    keeping = [o for _, o in variants if o.keep_lag or o.keep_every]
    history = {}  # substep → _mg_kept.Snapshot, while a keeping variant may still ask for it
    stale = []  # per captured substep: the share of level 0's and level 1's sets changed since the last
    fractions = []
    original = sparse_pressure.pcg
    state = {"substep": 0}

    def capture(grid, kind, b, tolerance, max_iterations, preconditioner="mg", check_every=10, progress=None,
                x0=None, tables=(), **more):
        result = original(grid, kind, b, tolerance, max_iterations, preconditioner, check_every, progress,
                          x0=x0, tables=tables, **more)
        s = state["substep"]
        level = sparse_pressure.Unknowns(grid, kind)
        if keeping:  # every substep's hierarchy, for the substeps after it
            history[s] = _mg_kept.Snapshot(grid, kind, level)
            oldest = min([kept_source(o, s) for o in keeping] + [s - 1])  # what this and later substeps ask for
            for old in [t for t in history if t < oldest]:
                del history[old]
        if args.every > 1 and s % args.every != 1:
            _mg_guess.remember(grid, x0, args.guesses)
            return result
        start = None if args.cold else x0
        for label, options in variants:
            if options.keep_lag or options.keep_every:
                source = kept_source(options, s)
                ages[label].append(s - source)
                M = _mg_kept.KeptVCycle(history[s], history[source], options, options.keep_from)
            else:
                M = mgv.VariantVCycle(grid, kind, level, options)
            it, rel = solve(level, M, b, tolerance, max_iterations, start)
            counts[label].append(it)
            rates.setdefault(label, []).append(rel ** (1 / it) if it and rel > 0 else np.nan)
        counts["solver"].append(result[1])  # sparse_pressure.pcg's own count (base's check)
        solve_guesses(args.guesses, grid, kind, level, variants[0][1], (b, tolerance, max_iterations), start, counts,
                      starts)
        _mg_guess.remember(grid, x0, args.guesses)
        fractions.append([boundary_fraction(level, w) for w in (1, 2, 3)])
        if keeping and s - 1 in history:
            stale.append([_mg_kept.changed(history[s], history[s - 1], lv) for lv in (0, 1)])
        print(f"  n {n} substep {s}: unknowns {level.m:,}, levels {len(M.levels)} "
              f"(m {[L.m for L in M.levels]}), " + ", ".join(f"{lab} {counts[lab][-1]}" for lab, _ in variants)
              + "".join(f", {g} {counts['guess ' + g][-1]}" for g in args.guesses), flush=True)
        return result

    sparse_pressure.pcg = capture
    try:
        t0 = time.perf_counter()
        for s in range(args.substeps):
            state["substep"] = s
            sim.substep(args.dt)
        elapsed = time.perf_counter() - t0
    finally:
        sparse_pressure.pcg = original
    f = np.mean(np.array(fractions), axis=0)
    print(f"n {n}, {particles:,} particles, {args.substeps} substeps in {elapsed:.0f} s, "
          f"{'cold' if args.cold else 'warm'} starts; boundary unknowns (width 1/2/3): "
          + "/".join(f"{x:.1%}" for x in f))
    if stale:
        print("the sets changed over one substep (cells in one and not the other / cells now), "
              "level 0: " + " ".join(f"{a:.1%}" for a, _ in stale) + "; level 1: "
              + " ".join(f"{b:.1%}" for _, b in stale))
    base = sum(counts[variants[0][0]])
    print(f"sparse_pressure.pcg (the default, check every 10): {counts['solver']}")
    print(f"{'variant':44s} | iterations per captured substep | sum | vs first | mean, vs first | "
          f"est. µs/it | est. ms/solve | launches/it")
    first = np.mean(counts[variants[0][0]])
    for label, options in variants:
        c = counts[label]
        width = max(1, options.boundary_width)
        cost = ITERATION_US + extra_cost_us(options, f[min(width, 3) - 1])
        print(f"{label:44s} | {c} | {sum(c)} | {sum(c) / base - 1:+.1%} | {np.mean(c):.2f}, "
              f"{np.mean(c) - first:+.2f} | {cost:.0f} | {cost * np.mean(c) / 1000:.2f} | {launches(options)}")
    print("mean convergence factor an iteration (‖r‖/‖b‖ at the end ^ (1/iterations), captured substeps): "
          + ", ".join(f"{label} {np.nanmean(rates[label]):.3f}" for label, _ in variants if rates.get(label)))
    print_guesses(args.guesses, args.skip, counts, starts)
    for label, _ in variants:
        if ages[label]:
            print(f"{label}: kept hierarchy's age (substeps) per captured substep {ages[label]}")
            print(f"{label}: mean iterations vs first by age: " + by_age(ages[label], counts[label],
                                                                      counts[variants[0][0]]))


def solve_guesses(names, grid, kind, level, options, system, start, counts, starts):
    """Each initial guess of *names* (``_mg_guess``) solved with *options*' V-cycle on *system*
    (b, tolerance, iteration limit): its iterations into *counts*, its ‖b − A x₀‖/‖b‖ into *starts*."""
    if not names:
        return
    b, tolerance, max_iterations = system
    M = mgv.VariantVCycle(grid, kind, level, options)
    for name in names:
        g = _mg_guess.guess(name, grid, kind, level, b, start)
        counts["guess " + name].append(solve(level, M, b, tolerance, max_iterations, g)[0])
        starts["guess " + name].append(_mg_guess.start_residual(level, b, g))


def print_guesses(names, k, counts, starts):
    """The guesses' iterations and start residuals, their means from the *k*-th captured substep."""
    if not names:
        return
    ref = np.array(counts["guess " + names[0]][k:])
    print(f"guesses (the first variant's V-cycle), captured substeps from the {k}-th: "
          f"mean iterations, change against {names[0]}, substeps fewer / more, start ‖r‖/‖b‖")
    for name in names:
        c = np.array(counts["guess " + name][k:])
        r0 = np.array(starts["guess " + name][k:])
        print(f"  {name:12s} | {counts['guess ' + name]} | mean {c.mean():.2f} | {c.mean() - ref.mean():+.2f} | "
              f"{int((c < ref).sum())} / {int((c > ref).sum())} | geometric mean "
              f"{np.exp(np.log(np.maximum(r0, 1e-30)).mean()):.3g} "
              f"({' '.join(f'{v:.2f}' for v in starts['guess ' + name])})"
              + (f"; swept {np.mean(_mg_guess.SHARES[name]):.1%} of the unknowns" if name in _mg_guess.SHARES else ""))


def by_age(ages, counts, first):
    """'age a: +d (n)' per age: the mean change of the iterations against *first*'s."""
    ages, diff = np.array(ages), np.array(counts) - np.array(first)
    return ", ".join(f"{a}: {diff[ages == a].mean():+.2f} ({int((ages == a).sum())})" for a in np.unique(ages))


def kept_source(options, s):
    """The substep whose hierarchy a keeping variant uses at substep *s* (the first substep's
    while *s* is under the lag)."""
    if options.keep_lag:
        return max(0, s - options.keep_lag)
    return s - s % options.keep_every


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
