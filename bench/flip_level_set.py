"""The GPU particle level set's ways side by side on one state (issue 24: the frame's level
set), in one process:

    python3 bench/flip_level_set.py [--res 256] [--particles 8e6] [--substeps 4]
                                    [--modes bricks lean] [--lean-blocks 2 3] [--repeat 8]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s on the sparse solver,
then ``sim.level_set(on_device=True)`` (what a frame computes before its copy to the host)
runs *repeat* times per way (``surface_gpu.LEVEL_SET_MODES``, ``VOXFX_LEVEL_SET``), the
ways alternating and their order reversed every other repeat; printed per way: the
medians of the whole level set and of each stage (``surface_gpu.PROFILE``'s CUDA events),
in ms, whether every way's φ has the first way's bits, and the bandwidth floor (the
particles' positions read once, 12 B each, and φ written once, 4 B a node, at the H100's
3.35 TB/s). The 65M row: ``--res 512 --particles 65.5e6``. ``--lean-blocks 2 3`` times
"lean" once per build of its gather (``surface_gpu.LEAN_BLOCKS``: 2 or 3 blocks an SM) and
``--region-bounds 0 1`` without and with the region from one pass over the particles
(``surface_gpu.REGION_BOUNDS``, ``VOXFX_LEVEL_SET_BOUNDS``: the 65M row, whose box is too
large for a box-sized level set), as ways ``lean/B/R``; ``--interior 0 1`` without and with
the interior skip (``surface_interior``, ``VOXFX_LEVEL_SET_INTERIOR``), as ways ``lean/B/R/I``.
Every way prints whether its φ has the first way's bits, whether its surface is the first
way's (the same signs everywhere and the same bits on every node beside a sign change:
the same zero crossing for any mesher, the same volume), and its VDB's active voxels
(|φ| < band, what ``addon/vdb_files._vdb_grid`` keeps active; the rest become ±band tiles).
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
from voxfx.kernels.flip import surface_gpu  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402

BANDWIDTH = 3.35e12


def beside_a_crossing(phi):
    """Nodes (device bool) with a node of the other sign among their 26 neighbours."""
    import cupy as cp

    neg = phi < 0
    p = cp.pad(neg, 1, mode="edge")
    near = cp.zeros_like(neg)
    for dz in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                near |= p[1 + dz:p.shape[0] - 1 + dz, 1 + dy:p.shape[1] - 1 + dy, 1 + dx:p.shape[2] - 1 + dx] != neg
    return near


def same_surface(phi, first):
    """The same signs everywhere and the same bits beside every sign change of *first*."""
    near = beside_a_crossing(first)
    return bool(((phi < 0) == (first < 0)).all()) and bool((phi.view("uint32")[near] == first.view("uint32")[near])
                                                           .all())


def timed(sim, way):
    """(ms on the device, {stage: ms}, φ) of one level set the way *way* (a mode, or
    "lean/B/R/I": lean with its gather built for B blocks an SM, R = 1: the region from
    ``particle_bounds``, I = 1: the interior skip)."""
    import cupy as cp

    parts = way.split("/")
    mode, blocks, bounds, interior = parts + ["", "2", "0", "0"][len(parts):]
    os.environ["VOXFX_LEVEL_SET"] = mode
    os.environ["VOXFX_LEVEL_SET_INTERIOR"] = interior
    surface_gpu.LEAN_BLOCKS = int(blocks)
    surface_gpu.REGION_BOUNDS = bounds == "1"
    cp.cuda.Device().synchronize()
    first = cp.cuda.Event()
    first.record()
    surface_gpu.PROFILE = [("start", first)]
    phi = sim.level_set(on_device=True)
    last = cp.cuda.Event()
    last.record()
    last.synchronize()
    marks, surface_gpu.PROFILE = surface_gpu.PROFILE, None
    stages = {name: cp.cuda.get_elapsed_time(e0, e1) for (_, e0), (name, e1) in zip(marks, marks[1:])}
    return cp.cuda.get_elapsed_time(first, last), stages, phi


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--modes", nargs="+", choices=surface_gpu.LEVEL_SET_MODES, default=["bricks", "lean"])
    ap.add_argument("--lean-blocks", type=int, nargs="+", choices=(2, 3), default=None,
                    help="time lean once per build of its gather (blocks an SM)")
    ap.add_argument("--region-bounds", type=int, nargs="+", choices=(0, 1), default=None,
                    help="time lean without (0) and with (1) VOXFX_LEVEL_SET_BOUNDS (an open or large liquid's region)")
    ap.add_argument("--interior", type=int, nargs="+", choices=(0, 1), default=None,
                    help="time lean without (0) and with (1) VOXFX_LEVEL_SET_INTERIOR (the interior skip)")
    ap.add_argument("--repeat", type=int, default=8)
    args = ap.parse_args()
    if args.lean_blocks or args.region_bounds or args.interior:
        lean = [f"lean/{b}/{r}/{i}" for b in args.lean_blocks or [2] for r in args.region_bounds or [0]
                for i in args.interior or [0]]
        args.modes = [w for m in args.modes for w in (lean if m == "lean" else [m])]
    import cupy as cp

    start = time.perf_counter()
    spec, sim, _ = stepped_dam_break(args)
    print(f"{args.res}³, {len(sim.pos):,} particles, {args.substeps} substeps: "
          f"set-up {time.perf_counter() - start:.1f} s", flush=True)
    for mode in args.modes:  # compile
        timed(sim, mode)
    totals = {m: [] for m in args.modes}
    stages = {m: [] for m in args.modes}
    same = {m: True for m in args.modes}
    surface = {m: True for m in args.modes}
    active = {}
    band = 3.0 * sim.spec.voxel_size  # surface.BAND_VOXELS of the surface grid (the simulation's cell)
    nodes = 0
    for r in range(args.repeat):
        phis = {}
        for mode in args.modes if r % 2 == 0 else args.modes[::-1]:
            ms, parts, phis[mode] = timed(sim, mode)
            totals[mode].append(ms)
            stages[mode].append(parts)
        first = phis[args.modes[0]].view(cp.uint32)
        nodes = first.size
        for mode in args.modes[1:]:
            same[mode] &= bool((phis[mode].view(cp.uint32) == first).all())
            surface[mode] &= same_surface(phis[mode], phis[args.modes[0]])
        for mode in args.modes:
            active[mode] = int((cp.abs(phis[mode]) < cp.float32(band)).sum())
        del phis, first
    floor = (12 * len(sim.pos) + 4 * nodes) / BANDWIDTH * 1e3
    print(f"level set grid {nodes:,} nodes; floor {floor:.3f} ms (positions read, φ written)")
    print("way | level set ms (median, min–max) | stages (median ms) | φ bits as the first way's | surface as the "
          "first way's | VDB active voxels")
    print("--- | --- | --- | --- | --- | ---")
    for mode in args.modes:
        t = np.array(totals[mode])
        names = list(stages[mode][0])
        med = {k: float(np.median([s[k] for s in stages[mode]])) for k in names}
        print(f"{mode} | {np.median(t):.3f} ({t.min():.3f}–{t.max():.3f}) | "
              + ", ".join(f"{k} {v:.3f}" for k, v in med.items()) + f" | {same[mode]} | {surface[mode]} | "
              f"{active[mode]:,}", flush=True)


if __name__ == "__main__":
    main()
