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

Long substeps (issue 24: the H100's 8M dam break at Fast asks up to ~20 cells a substep and
kept −46.5% of its volume with α 0.3): ``--max-substeps 1 --max-time-step 0`` at 64³ (260k
particles, Fast otherwise, one substep a 24 fps frame, 16–26 cells a substep; CPU, 2 cores,
~40 s a run of 24 frames), meshed volume at frame 24 (frame 12): α 0 −71.3% (−40.0%), α 0.3
−45.5% (−35.5%), α 0.6 −37.4% (−30.9%), α 1 −30.4% (−26.0%); frame 8 −18.5% at every α, the
fullest cell then ~150–350 (the dead band leaves the mild compression alone; 75% of the
particles in cells past 2n₀ are on the floor's 3 lowest layers). Prototypes tried (their code not
kept, ``kernels/flip/density_positions.py`` notes): sub-cycled advection (C 4) α 0 −71.0%,
α 0.3 −45.8%; 2: α 0 −76.6% (fullest 33,229, 99% of the crowding at walls: the exact path
of the frozen field piles more); the air band as deep as the reach α 0 −69.5%, α 0.3 −46.8%;
``VOXFX_DENSITY_POSITIONS`` 0.3 (position-only correction) α 0 −43.6%, α 0.3 −31.4%, and
with τ 0 (``VOXFX_DENSITY_DEADBAND=0``, both corrections) α 0.3 −4.9% at frame 12 but +10.3%
at frame 4 (swollen); τ 0 alone α 0.3 −23.7% at frame 12. Fast as it is (3 substeps, 2–7
cells): α 0 −13.7%, α 0.3 −7.2%, α 0.3 with positions 0.3 −5.1%. ``--fps``, ``--cfl``,
``--max-substeps``, ``--max-time-step`` replace the timing's values;
``VOXFX_AIR_BAND_PROJECTION=1`` (i24d3, ``kernels/flip/air_band.py``: the air band made
divergence-free, the advection sub-cycled in ≤ 4-cell steps; ~100–170 s a run): α 0 −0.2% at
frame 8 (against −19.4%), −20.0% at 12, −46.5% at 24; α 0.3 +0.3% / −19.8% / −17.9% with the
energy rising past the start's (3.88 → 6.84 J/kg): the loss up to frame 8 was the band's
divergence; from frame 10 (the front at the far wall) another mechanism, which
``VOXFX_AIR_BAND_WALL_PIECES=1`` (i24d4: a substep meeting a wall split) meets: α 0 −0.2% at frame
24. ``--sparse`` runs both switches on the sparse solver's NumPy path (i24d5,
``sparse_air_band.py``; 48³, 110e3 particles, 12 frames: band −17.3%, band + split −9.6% at frame
12, the dense prototype's −17.7% / −9.0%); with ``--gpu`` on the GPU (i24b, ``sparse_air_band_gpu.py``;
its notes: 8M, α 0, frame 16 −10.9% against −62.0%). The columns cells/substep
(the fastest particle's at the frames' starts), ½v² and ½v² + gz (J/kg: a dam break only
loses energy), the share of the crowding (particles past 2n₀) in the wall cells and the mean
stepping of the frames since the row before (each row printed as it comes: a run cut short keeps
its rows); after each run the median frame and the substeps a frame with the wall split's pieces,
frame by frame.

How many substeps Fast needs (i24c2, CPU, 2 cores, dense NumPy solver, α 0.3, 24 frames; 64³ 260e3
particles, 96³ 880e3, 128³ 2.1e6): meshed volume at frames 8 / 12 / 16 / 24, substeps a frame mean
(most), the run's wall seconds. 64³: Fast −2.6 / −6.4 / −8.5 / −7.2% (3, 67 s), Max Substeps 2
(Max Time Step 0) −6.0 / −17.4 / −15.2 / −17.9% (1.92), 1 −18.7 / −35.5 / −38.4 / −45.5%, CFL 8
(Max Substeps 64) −2.6 / −6.4 / −7.2 / −6.4% (3.12 (4), 37 s), Accurate −1.2 / −3.4 / −4.4 / −2.8%
(6.58 (8), 112 s). 96³: Fast −5.0 / −16.2 / −11.4 / −12.9% (3, 159 s), Max Substeps 4 −3.5 / −8.6
/ −6.6 / +1.3% (3.75, 216 s), 6 −3.5 / −3.7 / −3.6 / +0.5% (4.92, 234 s), CFL 10 −5.0 / −16.2 /
−4.2 / −9.5% (3.29 (5), 158 s), CFL 8 −5.0 / −9.9 / −2.0 / +0.1% (3.96 (7), 201 s), CFL 6 −5.0 /
−4.1 / −2.7 / +2.4% (4.42 (7), 207 s), Accurate −0.8 / −2.2 / −2.6 / −1.5% (7.29 (8), 371 s).
128³: Fast −9.9 / −24.6 / −16.4 / −26.2% (3, 430 s), CFL 8 −5.4 / −5.9 / −0.2 / +5.1% (5.21 (10),
781 s; frame by frame 3 3 3 3 3 4 4 4 6 6 6 6 10 9 7 6 6 6 5 5 4 4 5 7), CFL 8 with Max Substeps 6
−5.4 / −6.1 / −1.9 / +0.8% (4.75 (6), 672 s; at 256³ that is 12). Three substeps a frame
lose more the finer the grid (the H100's 8M, 256³: −46.5%), as one substep at 64³ does: the loss
follows the cells a substep moves, not the substep count. At most 8 cells a substep (CFL 8, the
CFL's own measure, ``sim.step``) keeps all three resolutions within 10% (CFL 10 not: −16.2% at
96³; CFL 6 within 5%), its substeps growing with the grid (the wall hit, frames 9–16: 3–4 at 64³,
4–7 at 96³, 6–10 at 128³). ``grid.TIMINGS["balanced"]`` is that bound, Max Substeps 16. At 8M
(256³) it would take ~10 substeps a frame (an estimate: the 128³ frames doubled, 6–16, mean 10.2;
the H100's 8M Fast frames ask CFL 5 → 23 substeps over frames 1–9, i.e. 4 → 15 at CFL 8), ~100 ms
of stepping a frame at ~10 ms a substep, against Fast's ~30 ms and Accurate's ~80 ms (its 8
substeps, −5.5% there); not run on a GPU. At 512³ Max Substeps 16 caps it, as 3 would at 96³
(Fast there: −16.2% at frame 12).
"""

from __future__ import annotations

import argparse
import math
import os
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

from voxfx.kernels.flip.grid import TIMING_FIELDS, TIMINGS, FlipSettings  # noqa: E402
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


def energy(sim):
    """Mechanical energy per unit mass (J/kg, mean over particles): ½|v|² and g·z (z above
    the box's floor); a dam break only dissipates, so a rising sum is energy the solver put in."""
    xp = sim.xp
    v = sim.vel.astype(xp.float64)
    z = sim.pos[:, 2].astype(xp.float64) - sim.spec.origin[2]
    return float(0.5 * (v * v).sum(axis=1).mean()), float(9.81 * z.mean())


def wall_share(sim):
    """Of the particles above twice the rest count in their cell (the crowding the correction
    is for), the share in the cells touching a wall (the box's outer layer of cells)."""
    xp = sim.xp
    nx, ny, nz = sim.spec.shape
    ijk = xp.floor((sim.pos - xp.asarray(sim.spec.origin, np.float32)) / np.float32(sim.spec.voxel_size))
    ijk = xp.clip(ijk.astype(xp.int64), 0, xp.asarray([nx - 1, ny - 1, nz - 1]))
    counts = xp.bincount((ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0], minlength=nx * ny * nz).reshape(nz, ny, nx)
    excess = xp.maximum(counts - 2 * sim.settings.particles_per_cell, 0)
    wall = xp.zeros(counts.shape, bool)
    wall[0], wall[-1], wall[:, 0], wall[:, -1], wall[:, :, 0], wall[:, :, -1] = (True,) * 6
    total = int(excess.sum())
    return float(excess[wall].sum()) / total if total else math.nan


def print_row(timing, alpha, first, row, frame_ms):
    """One row as it comes (a run cut short keeps its rows); *frame_ms*: the stepping of the
    frames since the last row (their mean, the last column)."""
    frame, cells, fullest, volume, substeps, iterations, reach, kinetic, total, wall = row
    print(f"{timing:8s} | {alpha:5.2f} | {frame:5d} | {cells:8d} ({cells / first - 1:+6.1%})"
          f"           | {fullest:12d} | {volume:+12.1%}  | {substeps:8d} | {iterations:5d}"
          f" | {reach:13.1f} | {kinetic:8.3f} | {total:11.3f} | {wall:6.0%}"
          f" | {np.mean(frame_ms) if frame_ms else 0.0:8.1f}", flush=True)


def run(args, timing, alpha):
    spec, v, t = dam_break(args.res, int(args.particles))
    values = dict(TIMINGS[timing])
    for key in ("cfl", "max_substeps", "max_time_step"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    settings = FlipSettings(**values, density_correction=alpha, sparse=args.sparse or args.gpu)
    xp = np
    if args.gpu:
        import cupy as xp
    sim = FlipSimulation(spec, settings, v, t, xp=xp)
    water = len(sim.pos) * spec.voxel_size ** 3 / settings.particles_per_cell
    rows, start, stepping, reach, taken = [], time.perf_counter(), 0.0, 0.0, 0
    run.frame_ms, run.taken = [], []  # per frame stepped: ms, and its substeps (with the wall split's pieces)
    shown = 0  # frames whose ms a row has shown
    for frame in range(args.frames + 1):
        if frame % args.every == 0 or frame == args.frames:
            cells, fullest = occupancy(sim)
            volume = math.nan
            if args.volume or not args.gpu:
                phi = sim.level_set()
                volume = liquid_volume(phi if xp is np else xp.asnumpy(phi), sim.surface_spec) / water - 1
            last = sim.last or {}
            kinetic, potential = energy(sim)
            rows.append((frame, cells, fullest, volume, taken, last.get("iterations", 0),
                         reach, kinetic, kinetic + potential, wall_share(sim)))
            print_row(timing, alpha, rows[0][1], rows[-1], run.frame_ms[shown:])
            shown = len(run.frame_ms)
            reach = 0.0
        if frame < args.frames:
            speed = float(sim.xp.sqrt((sim.vel * sim.vel).sum(axis=1).max()))  # not timed: a reduction + a read
            pieces = getattr(sim, "air_band_pieces", 0)
            t0 = time.perf_counter()
            sim.step(1 / args.fps)
            if xp is not np:
                xp.cuda.get_current_stream().synchronize()
            stepping += time.perf_counter() - t0
            run.frame_ms.append((time.perf_counter() - t0) * 1e3)
            taken = sim.last["substeps"] + getattr(sim, "air_band_pieces", 0) - pieces  # + the wall split's
            run.taken.append(taken)
            reach = max(reach, speed / (args.fps * taken * spec.voxel_size))
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
    ap.add_argument("--fps", type=float, default=24.0, help="frames a second (a longer frame: longer substeps)")
    ap.add_argument("--cfl", type=float, help="the timing's CFL Number replaced")
    ap.add_argument("--max-substeps", type=int, help="the timing's Max Substeps replaced")
    ap.add_argument("--max-time-step", type=float, help="the timing's Max Time Step replaced (0: none)")
    ap.add_argument("--gpu", action="store_true", help="CuPy and the sparse solver (the meshed volume: --volume)")
    ap.add_argument("--volume", action="store_true", help="with --gpu: the meshed volume too (slow at 8M)")
    args = ap.parse_args()
    where = "GPU (CuPy)" if args.gpu else "NumPy"
    if args.gpu:
        import cupy

        where += " on " + cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"dam break {args.res}³ (1 m box), ~{args.particles:.0f} particles, {args.fps:g} fps, "
          f"{'sparse' if args.sparse or args.gpu else 'dense'} solver, {where}")
    names = ("VOXFX_DENSITY_DEADBAND", "VOXFX_DENSITY_POSITIONS", "VOXFX_AIR_BAND_PROJECTION",
             "VOXFX_AIR_BAND_WALL_PIECES")
    switches = [f"{k}={os.environ[k]}" for k in names if os.environ.get(k)]
    print(f"{', '.join(TIMING_FIELDS)} overridden: cfl {args.cfl}, max_substeps {args.max_substeps}, "
          f"max_time_step {args.max_time_step}; switches: {' '.join(switches) or 'none'}")
    print("timing   | alpha | frame | occupied cells (vs frame 0) | fullest cell | meshed volume | substeps | CG it"
          " | cells/substep | ½v² J/kg | ½v²+gz J/kg | crowding at walls | ms/frame")
    for timing in args.timing:
        for alpha in args.alpha:
            rows, seconds, n, per_frame = run(args, timing, alpha)
            print(f"{timing:8s} | {alpha:5.2f} | {n} particles, {seconds:.0f} s in all, "
                  f"{per_frame * 1e3:.1f} ms a frame of stepping (timed in the run, the first frame's compiles "
                  f"included); frames 2 on: median {np.median(run.frame_ms[1:] or [math.nan]):.1f} ms, "
                  f"{np.mean(run.taken or [0]):.2f} substeps a frame (with the wall split's pieces), "
                  f"frame by frame {' '.join(map(str, run.taken))}",
                  flush=True)


if __name__ == "__main__":
    main()
