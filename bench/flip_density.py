"""The density correction (issue 24, ``kernels/flip/density.py``) on the CPU or, with
``--gpu``, the GPU (CuPy, the sparse solver, no meshed volume unless ``--volume``): the dam break
(``flip.dam_break``: a block twice as tall as wide in one corner of a closed n³ box of 1 m)
stepped at 24 fps with the stiffness α = 0 (off) and the given values, under the Accurate
and Fast timings (``grid.TIMINGS``). Per frame listed: the cells the particles occupy (the
liquid's volume in cells; at rest the block's), the fullest cell's count, the meshed
volume (``liquid_volume`` of the closed level set) against the water's, substeps and CG
iterations of the frame.

    python3 bench/flip_density.py [--res 48] [--particles 110e3] [--frames 40] [--every 10]
                                  [--alpha 0 0.1 0.3 0.5] [--timing accurate fast] [--sparse]
    python3 bench/flip_density.py --gpu --res 256 --particles 8e6 --frames 15 --every 3 --alpha 0 0.3

``VOXFX_DENSITY_DEADBAND`` (τ, default 1) picks the dead band (``density.py``). Measured on the
CPU (2 cores, --res 64 --particles 260e3 --every 5,
~2–5 min a run): Fast, frame 40, occupied cells / fullest cell / meshed volume: α 0 −21.6% /
284 / −27.5%; τ 1: α 0.1 −9.3% / 65 / −14.7%, α 0.3 −0.9% / 54 / −6.8%, α 0.5 +4.9% / 46 /
−2.9%; τ 0, α 0.3 +37.6% / 73 / +34.6% (swollen). Accurate: α 0 +24.6% / 22 / +20.6%, τ 1 α
0.3 +26.2% / 19 / +21.9% (no piles at 64³ to correct).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from tools.package import load  # noqa: E402

load()
from flip import dam_break  # noqa: E402

from voxfx.kernels.flip.grid import TIMINGS, FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.surface import liquid_volume  # noqa: E402


def occupancy(sim):
    """(occupied cells, the fullest cell's count) of the particles' lattice cells (on the
    simulation's device)."""
    xp = sim.xp
    nx, ny, nz = sim.spec.shape
    ijk = xp.floor((sim.pos - xp.asarray(sim.spec.origin, np.float32)) / np.float32(sim.spec.voxel_size))
    ijk = xp.clip(ijk.astype(xp.int64), 0, xp.asarray([nx - 1, ny - 1, nz - 1]))
    counts = xp.bincount((ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0])
    return int((counts > 0).sum()), int(counts.max())


def run(args, timing, alpha):
    spec, v, t = dam_break(args.res, int(args.particles))
    settings = FlipSettings(**TIMINGS[timing], density_correction=alpha, sparse=args.sparse or args.gpu)
    xp = np
    if args.gpu:
        import cupy as xp
    sim = FlipSimulation(spec, settings, v, t, xp=xp)
    water = len(sim.pos) * spec.voxel_size ** 3 / settings.particles_per_cell
    rows, start, stepping = [], time.perf_counter(), 0.0
    for frame in range(args.frames + 1):
        if frame % args.every == 0 or frame == args.frames:
            cells, fullest = occupancy(sim)
            volume = math.nan
            if args.volume or not args.gpu:
                phi = sim.level_set()
                volume = liquid_volume(phi if xp is np else xp.asnumpy(phi), sim.surface_spec) / water - 1
            last = sim.last or {}
            rows.append((frame, cells, fullest, volume, last.get("substeps", 0), last.get("iterations", 0)))
        if frame < args.frames:
            t0 = time.perf_counter()
            sim.step(1 / 24)
            if xp is not np:
                xp.cuda.get_current_stream().synchronize()
            stepping += time.perf_counter() - t0
    return rows, time.perf_counter() - start, len(sim.pos), stepping / max(1, args.frames)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--res", type=int, default=48)
    ap.add_argument("--particles", type=float, default=110e3)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--alpha", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5])
    ap.add_argument("--timing", nargs="+", default=["accurate", "fast"], choices=sorted(TIMINGS))
    ap.add_argument("--sparse", action="store_true", help="the sparse solver (NumPy) instead of the dense one")
    ap.add_argument("--gpu", action="store_true", help="CuPy and the sparse solver (the meshed volume: --volume)")
    ap.add_argument("--volume", action="store_true", help="with --gpu: the meshed volume too (slow at 8M)")
    args = ap.parse_args()
    where = "GPU (CuPy)" if args.gpu else "NumPy"
    if args.gpu:
        import cupy

        where += " on " + cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"dam break {args.res}³ (1 m box), ~{args.particles:.0f} particles, 24 fps, "
          f"{'sparse' if args.sparse or args.gpu else 'dense'} solver, {where}")
    print("timing   | alpha | frame | occupied cells (vs frame 0) | fullest cell | meshed volume | substeps | CG it")
    for timing in args.timing:
        for alpha in args.alpha:
            rows, seconds, n, per_frame = run(args, timing, alpha)
            first = rows[0][1]
            for frame, cells, fullest, volume, substeps, iterations in rows:
                print(f"{timing:8s} | {alpha:5.2f} | {frame:5d} | {cells:8d} ({cells / first - 1:+6.1%})"
                      f"           | {fullest:12d} | {volume:+12.1%}  | {substeps:8d} | {iterations:5d}")
            print(f"{timing:8s} | {alpha:5.2f} | {n} particles, {seconds:.0f} s in all, "
                  f"{per_frame * 1e3:.1f} ms a frame of stepping (timed in the run, the first frame's compiles "
                  f"included)", flush=True)


if __name__ == "__main__":
    main()
