"""The particle transfers' A/B (issue 24, helper i24p), on the GPU, in one process:

    python3 bench/flip_sparse_transfers_ab.py [--res 256] [--particles 8e6] [--substeps 4] [--rounds 7]
                                              [--steps 8] [--profile]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s, then:

1. G2P + advection alone at the state before a G2P (P2G, pressure and projection of the next
   substep done, ``flip_sparse_g2p.state_before_g2p``), on copies of the particles: the
   kernels ``bricks`` (``flip_sparse_g2p.cu``) and ``lean`` (``flip_sparse_g2p_lean.cu``,
   built for 2 blocks of 512 an SM, and for 1: ``lean/1``) and ``auto`` (the default: lean
   time-centred without C, else bricks), end-of-substep (FLIP 0.95),
   time-centred (a u_n of its own) and APIC; *rounds* rounds, the variants alternating in each,
   CUDA events, medians; each variant's positions, velocities (and C) against bricks' bit for
   bit.
2. P2G (the order binning and the scatter, ``sparse_gpu.particles_to_grid``) with the
   scatter's shared atomics ``serial`` and ``paired`` (``VOXFX_SPARSE_SCATTER_ATOMICS``),
   alternating: the whole P2G, and the faces and masks bit for bit.
3. *steps* whole substeps (``flip_sparse.timed_sparse_substep``) alternating between the
   old way (bricks, serial) and the new (auto, paired): the stages' medians; then
   *centred-steps* time-centred substeps (``sim.substep``, the kept faces as u_n) timed whole.

``--profile``: only one launch of each of bricks, lean, and the serial and paired scatter
after the stepping (for ``ncu -k regex:'g2p_advect|p2g_scatter_brick'``).
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
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu  # noqa: E402
from voxfx.kernels.grid.launch import Kernels  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from flip_sparse import STAGES, timed_sparse_substep  # noqa: E402
from flip_sparse_g2p import state_before_g2p  # noqa: E402

WAYS = {"old": {"VOXFX_SPARSE_G2P_KERNEL": "bricks", "VOXFX_SPARSE_SCATTER_ATOMICS": "serial"},
        "new": {"VOXFX_SPARSE_G2P_KERNEL": "auto", "VOXFX_SPARSE_SCATTER_ATOMICS": "paired"}}


def event_ms(cp, fn):
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    fn()
    b.record()
    b.synchronize()
    return cp.cuda.get_elapsed_time(a, b)


def lean_build(blocks):
    """flip_sparse_g2p_lean.cu built for *blocks* blocks of G2P_THREADS an SM."""
    module = sparse_g2p_gpu.G2P_LEAN
    defines = [o for o in module.options if not o.startswith("-DLEAN_MIN_BLOCKS=")]
    return Kernels("flip_sparse_g2p_lean.cu", (*defines, f"-DLEAN_MIN_BLOCKS={blocks}"), module.threads)


def g2p_ab(cp, sim, dt, rounds, profile=False):
    """Part 1 (module notes)."""
    g, s = sim.grid, sim.settings
    old, bins = state_before_g2p(sim, dt)
    n = int(sim.pos.shape[0])
    f32 = np.float32
    rng = cp.random.default_rng(5)
    before = tuple(f + f32(0.01) * rng.standard_normal(f.shape, dtype=cp.float32) for f in g.faces())
    c0 = rng.standard_normal((n, 3, 3), dtype=cp.float32) * f32(0.1)
    print(f"G2P + advection: {n:,} particles, {g.brick_count()} bricks ({g.size:,} pool cells)")
    saved = sparse_g2p_gpu.G2P_LEAN
    builds = {"bricks": ("bricks", None), "lean": ("lean", saved), "lean/1": ("lean", lean_build(1)),
              "auto": ("auto", None)}
    if profile:
        builds.pop("lean/1")
    cases = {"end": dict(flip=f32(s.flip_ratio), apic=False, before=None),
             "centred": dict(flip=f32(s.flip_ratio), apic=False, before=before),
             "apic": dict(flip=f32(0), apic=True, before=None)}
    if profile:
        cases = {"end": cases["end"]}
    state, out, times = {}, {}, defaultdict(list)

    def prepare(case):
        state["pos"], state["vel"] = sim.pos.copy(), sim.vel.copy()
        state["c"] = c0.copy() if cases[case]["apic"] else None
        g.bins = (state["pos"], *bins[1:])

    def run(name, case):
        kernel, module = builds[name]
        k = cases[case]
        if module is not None:
            sparse_g2p_gpu.G2P_LEAN = module
        try:
            sparse_g2p_gpu.g2p_advect(g, old, state["pos"], state["vel"], k["flip"], f32(1) - k["flip"], f32(dt),
                                  f32(0.5) * f32(dt), state["c"], order="cell", kernel=kernel, before=k["before"])
        finally:
            sparse_g2p_gpu.G2P_LEAN = saved

    for r in range(rounds + 1):  # round 0 warms (compiles) and checks the bits
        for case in cases:
            for name in builds:
                prepare(case)
                ms = event_ms(cp, lambda name=name, case=case: run(name, case))
                if r == 0:
                    got = [state["pos"].view(cp.uint32), state["vel"].view(cp.uint32)]
                    if state["c"] is not None:
                        got.append(state["c"].view(cp.uint32))
                    ref = out.setdefault(case, got)
                    same = all(bool((a == b).all()) for a, b in zip(got, ref))
                    print(f"{case}: {name} " + ("the same bits as bricks" if same else "BITS DIFFER"), flush=True)
                else:
                    times[case, name].append(ms)
        if profile:
            break
    if not profile:
        print("case | " + " | ".join(f"{b} ms" for b in builds) + "".join(f" | {b} / bricks" for b in list(builds)[1:]))
        for case in cases:
            med = [float(np.median(times[case, b])) for b in builds]
            print(f"{case} | " + " | ".join(f"{m:.3f}" for m in med) + "".join(f" | {m / med[0]:.3f}" for m in med[1:]))
    g.bins = None


def p2g_ab(cp, sim, rounds, profile=False):
    """Part 2 (module notes)."""
    g, pos, vel = sim.grid, sim.pos, sim.vel
    out, times = {}, defaultdict(list)
    for r in range(1 if profile else rounds + 1):
        for mode in ("serial", "paired"):
            os.environ["VOXFX_SPARSE_SCATTER_ATOMICS"] = mode
            ms = event_ms(cp, lambda: sparse_gpu.particles_to_grid(g, pos, vel, None, "scatter"))
            if r == 0:
                got = [cp.concatenate([g[f].view(cp.uint32) for f in g.FACES]), g.bins[1].copy()]
                ref = out.setdefault("faces", got)
                same = all(bool((a == b).all()) for a, b in zip(got, ref))
                print(f"P2G, {mode} atomics: " + ("the same faces and counts as serial" if same else "FACES DIFFER"))
            else:
                times[mode].append(ms)
    os.environ.pop("VOXFX_SPARSE_SCATTER_ATOMICS", None)
    if not profile:
        print("P2G whole (median ms): " + ", ".join(f"{m} {np.median(v):.3f}" for m, v in times.items()))


def substeps_ab(cp, sim, dt, steps):
    """Part 3 (module notes): the ways alternate, one round first to warm."""
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = defaultdict(list)
    names = list(WAYS)
    for i in range(steps + len(names)):
        way = names[i % len(names)]
        os.environ.update(WAYS[way])
        ms, it, _ = timed_sparse_substep(sim, dt, ev, sub)
        if i >= len(names):
            rows[way].append(ms + [sum(ms), it])
    for way, r in rows.items():
        med = np.median(np.array(r, dtype=np.float64), axis=0)
        print(f"substeps, {way} {WAYS[way]} ({len(r)}): " + ", ".join(f"{k} {v:.3f}" for k, v in zip(STAGES, med)) +
              f", substep {med[len(STAGES)]:.2f} ms, CG it {med[-1]:.0f}")
    for name in WAYS["new"]:
        os.environ.pop(name, None)


def centred_substeps_ab(cp, sim, dt, steps):
    """Part 3, time-centred: ``sim.substep`` (the kept faces as u_n) timed whole, the ways alternating."""
    sim.settings.time_centred_advection = True
    times = defaultdict(list)
    names = list(WAYS)
    for i in range(steps + len(names)):
        way = names[i % len(names)]
        os.environ.update(WAYS[way])
        ms = event_ms(cp, lambda: sim.substep(dt))
        if i >= len(names):
            times[way].append(ms)
    print("time-centred substeps (sim.substep, median ms): " +
          ", ".join(f"{w} {np.median(v):.2f} ({len(v)})" for w, v in times.items()))
    for name in WAYS["new"]:
        os.environ.pop(name, None)
    sim.settings.time_centred_advection = False


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--centred-steps", type=int, default=8, help="part 3 with the time-centred advection")
    ap.add_argument("--profile", action="store_true", help="one launch of each kernel (for ncu)")
    args = ap.parse_args()
    import cupy as cp

    _, sim, dt = stepped_dam_break(args)
    g2p_ab(cp, sim, dt, args.rounds, args.profile)
    p2g_ab(cp, sim, args.rounds, args.profile)
    if not args.profile and args.steps:
        substeps_ab(cp, sim, dt, args.steps)
    if not args.profile and args.centred_steps:
        centred_substeps_ab(cp, sim, dt, args.centred_steps)
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB")


if __name__ == "__main__":
    main()
