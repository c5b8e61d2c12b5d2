"""The block G2P kernel (``flip_sparse_g2p_block.cu``, ``VOXFX_SPARSE_G2P_KERNEL=block``; issue
24: G2P + advection ≤ 0.4 ms at 8M) against the bricks and lean kernels, on the GPU, in one
process:

    python3 bench/flip_sparse_g2p_block.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 7]
                                           [--steps 8] [--warm 2] [--ncu]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s, then:

1. G2P + advection alone at the state before a G2P (``flip_sparse_g2p.state_before_g2p``), in
   the bins' order: bricks (512 threads), block built for (min blocks, threads) (4, 256) with
   each of its corners (``sparse_g2p_gpu.G2P_CORNERS``: select, the kernel before, and pairs)
   and (2, 512) with pairs (``sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS``, ``G2P_BLOCK_THREADS``), lean;
   at the end of the substep, time-centred (the old faces standing in for u_n) and with APIC's C
   written (the FLIP blend kept), on copies of the particles, CUDA events (median of *repeat*),
   and the host's time to enqueue the launch on an idle device; every kernel's positions and
   velocities (and C) compared bit for bit with bricks'.
2. *steps* whole substeps a way after *warm* (``flip_sparse.timed_sparse_substep``), the
   substeps alternating between the block kernel's corners pairs and select (``--ab`` of
   ``flip_sparse.py``): the stages' medians per way.

``--ncu``: one launch of block with the select corners, then with pairs (end of the substep),
nothing timed, for ``ncu -k regex:g2p_advect_block -s 2 -c 2`` (past the stepped substeps' G2P).
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
from voxfx.kernels.flip import sparse_g2p_gpu  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from flip_sparse import STAGES, timed_sparse_substep  # noqa: E402
from flip_sparse_g2p import state_before_g2p, timed  # noqa: E402

# (kernel, (min blocks, threads) of the block kernel, its corners (sparse_g2p_gpu.G2P_CORNERS))
KERNELS = (("bricks", None, None), ("block", (4, 256), "select"), ("block", (4, 256), "pairs"),
           ("block", (2, 512), "pairs"), ("lean", None, None))


def launch(g, old, state, scalars, c, kernel, min_blocks, before, corners=None):
    saved = sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS
    if min_blocks is not None:
        sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS = min_blocks
    saved_corners = os.environ.pop("VOXFX_SPARSE_G2P_CORNERS", None)
    if corners is not None:
        os.environ["VOXFX_SPARSE_G2P_CORNERS"] = corners
    try:
        sparse_g2p_gpu.g2p_advect(g, old, state["pos"], state["vel"], *scalars, c, order="cell", kernel=kernel,
                              before=before)
    finally:
        sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS = saved
        os.environ.pop("VOXFX_SPARSE_G2P_CORNERS", None)
        if saved_corners is not None:
            os.environ["VOXFX_SPARSE_G2P_CORNERS"] = saved_corners


def host_ms(cp, run, prepare, repeat):
    """Median host time (ms) of *run* enqueuing its launch on an idle device (what a G2P stage
    pays before its kernel starts when the device has caught up with the host)."""
    import time

    out = []
    for _ in range(repeat):
        prepare()
        cp.cuda.Device().synchronize()
        a = time.perf_counter()
        run()
        out.append((time.perf_counter() - a) * 1e3)
        cp.cuda.Device().synchronize()
    return float(np.median(out))


def kernels(cp, sim, dt, repeat, ncu=False):
    g, s = sim.grid, sim.settings
    old, bins = state_before_g2p(sim, dt)
    f32 = np.float32
    flip = f32(s.flip_ratio)
    scalars = (flip, f32(1) - flip, f32(dt), f32(0.5) * f32(dt))
    state = {}

    def prepare():
        state["pos"], state["vel"] = sim.pos.copy(), sim.vel.copy()
        g.bins = (state["pos"], *bins[1:])

    if ncu:
        for kernel, corners in (("block", "select"), ("block", "pairs")):
            prepare()
            launch(g, old, state, scalars, sim.c, kernel, None, None, corners)
        cp.cuda.Device().synchronize()
        g.bins = None
        return
    print(f"G2P + advection: {len(sim.pos):,} particles, {g.brick_count()} bricks, bins' order, 512 threads")
    print("case | kernel | (min blocks, threads) | corners | ms | host ms (enqueue) | same bits as bricks")
    print("--- | --- | --- | --- | --- | --- | ---")
    before_faces = tuple(f.copy() for f in old)
    apic_c = cp.zeros((len(sim.pos), 3, 3), cp.float32)
    for case, before, c in (("end of substep", None, sim.c), ("time-centred", before_faces, sim.c),
                            ("APIC (flip 0.95 kept), end of substep", None, apic_c)):
        first = None
        for kernel, m, corners in KERNELS:
            def run(kernel=kernel, m=m, before=before, c=c, corners=corners):
                launch(g, old, state, scalars, c, kernel, m, before, corners)

            prepare()
            run()  # warm (compiles)
            ms = timed(cp, run, repeat, prepare)
            out = (cp.asnumpy(state["pos"]), cp.asnumpy(state["vel"])) + (() if c is None else (cp.asnumpy(c),))
            first = out if first is None else first
            same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(out, first))
            host = host_ms(cp, run, prepare, repeat)
            print(f"{case} | {kernel} | {m or '-'} | {corners or '-'} | {ms:.3f} | {host:.3f} | {same}", flush=True)
    g.bins = None


def substeps(cp, sim, dt, steps, warm):
    ways = ({"VOXFX_SPARSE_G2P_CORNERS": "pairs"}, {"VOXFX_SPARSE_G2P_CORNERS": "select"})
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = {w: [] for w in range(len(ways))}
    for i in range(warm + steps):
        for w in (range(len(ways)) if i % 2 == 0 else reversed(range(len(ways)))):
            os.environ.pop("VOXFX_SPARSE_G2P_CORNERS", None)
            os.environ.update(ways[w])
            ms, it, _ = timed_sparse_substep(sim, dt, ev, sub)
            if i >= warm:
                rows[w].append(ms)
    os.environ.pop("VOXFX_SPARSE_G2P_CORNERS", None)
    print(f"substeps alternating, {len(sim.pos):,} particles, {sim.grid.brick_count():,} bricks, {steps} a way")
    for w, way in enumerate(ways):
        a = np.array(rows[w])
        med = np.median(a, axis=0)
        print(f"{way or '(defaults)'} | " + " | ".join(f"{k} {m:.3f}" for k, m in zip(STAGES, med))
              + f" | substep {np.median(a.sum(axis=1)):.2f} ms | g2p min/max {a[:, -1].min():.3f}/{a[:, -1].max():.3f}")


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--ncu", action="store_true", help="one launch of block with each corners, nothing timed")
    args = ap.parse_args()
    import cupy as cp

    _, sim, dt = stepped_dam_break(args)
    kernels(cp, sim, dt, args.repeat, args.ncu)
    if not args.ncu:
        substeps(cp, sim, dt, args.steps, args.warm)


if __name__ == "__main__":
    main()
