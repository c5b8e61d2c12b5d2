"""Sparse FLIP benchmark (issue 12): ``bench/flip.py``'s dam break on the brick solver
(``FlipSimulation(..., sparse=True)``) on the GPU: ms per substep split by stage, active
bricks, CG iterations (Jacobi PCG to 1e-4), the grid's and the pool's device memory;
``--dense`` adds the dense solver's row for the same scene, measured in the same run;
the last columns are ``sparse_memory.sparse_flip_memory``'s bricks and bytes (estimated
from the particle count before baking) beside the measured ones.

    python3 bench/flip_sparse.py [--quick] [--dense] [--steps N] [--res N ...] [--particles P ...]
                                 [--max-cg N] [--gather scatter staged brick cell] [--g2p cell input]
                                 [--memory-trace] [--row 8m|65m|river] [--frames N] [--time-cap S]
                                 [--topology device legacy] [--cfl X ...] [--level-set-modes bricks legacy]
                                 [--pressure-warm 0 1] [--topology-update fused table] [--compile-log] [--stages]
                                 [--ab NAME=VALUE ... --ab NAME=VALUE ...] [--pace N [--rounds R]]

``--ab A=1 B=2 --ab A=3 --ab ''`` runs one simulation of the row whose substeps alternate between
the ways (their environment variables set before each substep; '' the defaults), the A/B on
nearly the same states in one process: each way's median stages and sub-stages. Ways whose
pressure solvers differ in configuration (``sparse_pressure_gpu._solver``'s key: MG_DENSE, NBR,
TAIL_FOLD, ...) are not compared fairly this way since the solve is queued ahead of the set-up's
read on the last solve's solver (``VOXFX_SPARSE_SOLVE_AHEAD``, default on): alternating, the guess
is the other way's solver and misses every substep, and three such ways outgrow the two-solver
cache (H100, fourteenth session: the session's start against its end read pressure 4.81 → 5.59 ms
alternating, 4.72 → 3.84 ms (medians of three) in separate processes). Compare those in separate
processes, alternating old / new.

``--frames N --ab ...`` runs one simulation a way in one process (``_sparse_frames.frames_ab``: the user's
``step(1/24)``, frame by frame in turn, the ways' order turned each frame, synced): each frame's step a way
side by side, the medians and frames 6–11's sums (processes differ 2× in host speed, so user frames are
compared here, not across processes).

``--pace N`` (with ``--row``, and ``--ab`` ways if given) runs the substep as the simulation does, no sync
of its own between substeps, in blocks of N beside the synced row in one simulation: the device's pace, its
idle where the host is behind and its busy time a substep (``_sparse_pace.py``; ``--rounds R`` rounds).

``--topology-update fused table`` runs each row once per topology update way
(``VOXFX_SPARSE_TOPOLOGY_UPDATE``, ``sparse_topology_gpu.TOPOLOGY_UPDATES``) in one process;
``bench/flip_sparse_topology.py`` times the ways on the same states, to the bit.

``--pressure-warm 0 1`` runs each row with the PCG's warm start off, then on
(``VOXFX_PRESSURE_WARM``, issue 24) in one process, and prints the CG iterations and the
pressure stage's ms of every timed substep.

Big-scene rows (issue 12), each within ``--time-cap`` seconds of simulating (default 90;
set-up, seeding included, is timed and printed apart):

    --row 8m      dam break, 8M particles at 256³ (the issue's ≤ 20 ms, ≤ 1.2 GB row)
    --row 65m     dam break, 65.5M particles at 512³ (goal ≤ 150 ms a substep, ≤ 10 GB)
    --row 8m-still  still water over a 256³ box's floor, ~8M particles (the warm start's case)
    --row river   a scene dense cannot hold: a 2048 × 1024 × 512-cell long box (4 × 2 × 1 m;
                  dense: 1.07G cells, ~100 GiB by its estimate, ~150 GiB at 512³'s measured
                  151 B a cell) with a 256.5 × 1024 × 48.5-cell block of water (~102M
                  particles) breaking along it: a wave down a 2048-cell channel

Expected on an H100 (fresh machine, kernels compiled on first use): ``--row 65m`` about
1–2 min in all (seeding ~10–20 s, most of it the host's inside test of the source's
surface cells); ``--row river --frames 12 --time-cap 45`` about 2 min (seeding ~20–30 s,
then frames until 12 or 45 s).

``--frames N`` times the user's frame instead of substeps (``_sparse_frames.py``):
``step(1/24)`` (adaptive substeps, the reason each frame's count is what it is) and, with
``--level-set``, the frame's level set (and its region's nodes), each frame's pool bytes,
until N frames or the time cap; ``--max-particles-per-cell N`` sets the particle count control's limit (0: off, for
the A/B); ``--trim`` gives the pool's outgrown free blocks back before each frame as a bake
does (``memory.trim_gpu_pool``: without it a spreading liquid's pool keeps every smaller
block it freed, and late frames pay CuPy's out-of-memory retries);
``--cfl X ...`` runs the frames once per CFL number (a fresh simulation each; default
the setting's 2); ``--level-set-modes bricks legacy`` computes each frame's level set
once per GPU way (``surface_gpu.LEVEL_SET_MODES``, ``VOXFX_LEVEL_SET``) — the level set column is
then each way's ms on the device (synchronized, ``level_set(on_device=True)``) + the copy
to the host through pinned memory (``backend.to_host``, what ``level_set()`` returns),
with the pageable ``.get()`` beside it, a line per frame with each way's stages
(``surface_gpu.PROFILE``: CUDA events as each stage is queued) and whether the ways' φ are
equal to the bit;
``--compile-log`` prints under each frame the kernels its step and level set used for the
first time in the process (``_compile_log.CompileLog``: compiled by NVRTC or loaded from CuPy's
disk cache, with their host ms): a frame slower than its neighbours for a kernel made late (the
8M Fast frame 5's level set, 905 ms, was ~15 CuPy kernels of the crowded cells' sort compiled
there; ``surface_gpu._compile_crowded_order`` now makes them at the first level set);
``--stages`` prints under each frame its step's stages summed over its substeps (host / device ms
by CUDA events on each side, the pool's cudaMallocs in each), the step's host time outside them,
the sparse pressure solvers built and the level set's own stages (``_frame_stages.FrameStages``);
``--profile-frames A-B`` and ``--timeline-frames A-B`` print, after the frames, a cProfile of frames A
to B's steps (functions by own and inside host ms a frame) and the pressure timeline's pieces in
them (``flip_sparse_pressure_timeline``'s marks: host Δ / device Δ medians; ``_frame_profile``);
``--narrow-band C`` runs it with a narrow band of C cells (the particles kept beside the
liquid's count), for the issue's narrow band row against the same command without it.
``--memory-trace`` records every pool allocation (a CuPy memory hook): the high-water
mark of live bytes, the stage it was reached in (set-up or a substep stage) and the
largest arrays alive at that moment by the source line that allocated them; with the pool's
own total (cached blocks included) beside it.

Stages are timed with CUDA events around the calls ``SparseFlipSimulation.substep``
makes: topology (margin, incremental update, walls/obstacles), P2G (+ classify,
extrapolate, gravity, boundaries), pressure, projection (+ extrapolation into the air),
G2P + advection. Topology, P2G and G2P are the kernels of ``sparse_gpu.py`` and
``sparse_g2p_gpu.py`` (issue 12, second increment). ``--res 256 --particles 8e6`` is issue 24's 8M-particle row;
``--max-cg`` caps the CG iterations (transfer timings of a large row without waiting
for a slow solve; the row then says so). ``--gather scatter staged brick cell`` runs each row once
per P2G kernel (``sparse_gpu.gather_mode``: the fixed-point scatter, one block per brick;
the gathers, one block per brick with its particles staged in shared memory a slab of
cell layers at a time, one block per brick with its halo in shared memory, or one thread
per cell), in the same process: an A/B; every row names the kernel it ran (default:
``VOXFX_SPARSE_GATHER``, else the scatter). ``--g2p cell input``
likewise runs G2P + advection over the particles in P2G's sorted order or in their own
(``sparse_g2p_gpu.g2p_order``); with both options, every pair. ``--topology device legacy``
runs each row with the device topology (``VOXFX_SPARSE_TOPOLOGY``: margins up to 16 cells
and the first build on the device) and with the earlier limits (one brick of margin, the
first build on the array path): an A/B in one process, the solver column naming the
legacy rows. The topology's margins are per brick (``sparse_grid.BrickReach``) unless
``VOXFX_SPARSE_MARGIN=global`` (every particle the fastest one's margin: the A/B baseline,
one process per mode).

Each row is followed by the stages' bandwidth floors (H100 HBM3, 3.35 TB/s) and the
measured/floor ratios: the bytes a stage must at least move — topology: positions read
(12 B/particle) and a byte per active cell; P2G: positions and velocities read (24, APIC
+36 B/particle), three faces, three masks and the cell type written (16 B/cell); pressure:
per CG iteration ten float32 streams over the fluid cells (``bench/flip.py``'s model);
project: pressure, cell and faces read, faces written (29 B/cell); G2P + advection:
positions and velocities read and written (48, APIC +72 B/particle; in the bins' order +8
for the order and the bins' cells), new and old faces read (24 B/cell). Cells are the
active bricks' (bricks · 512). A last line splits the topology, P2G and projection stages
into their calls (``SUBSTAGES``). With ``VOXFX_SPARSE_DEVICE_MARGIN=1`` (the default, as a
``substep`` that does not know its speed) the margin is learned by the topology's own read
(``sparse_topology_gpu.incremental_keys``): the margin sub-stage is then empty; ``=0`` reads the
fastest particle's speed first.
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
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu, sparse_pressure, sparse_topology_gpu, sparse_transfer, surface_gpu, transfer  # noqa: E402,E501
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_grid import BrickReach, margin_mode, substep_margin  # noqa: E402
from voxfx.kernels.flip.sparse_memory import sparse_flip_memory  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _compile_log import CompileLog  # noqa: E402
from _host_probe import on_cpu, python_us  # noqa: E402
from _memory_trace import MemoryTrace  # noqa: E402
from _sparse_frames import run_frames  # noqa: E402
from _sparse_pace import use_way  # noqa: E402
from _sparse_scene import river, scene, still_tank  # noqa: E402,F401  (imported from here by other benches and tests)
from flip import timed_substep  # noqa: E402

STAGES = ["topology", "p2g", "pressure", "project", "g2p+advect"]
ROWS = {"8m": (256, 8_000_000), "65m": (512, 65_536_000), "river": (2048, 100_663_296), "8m-still": (256, 8_000_000)}


BANDWIDTH = 3.35e12  # bytes/s, H100 SXM HBM3


def floors(particles, cells, fluid_cells, iterations, apic=False, binned=False):
    """ms per stage at the bandwidth floor (module notes)."""
    per = {"topology": 12 * particles + cells, "p2g": (24 + 36 * apic) * particles + 16 * cells,
           "pressure": iterations * 10 * fluid_cells * 4, "project": 29 * cells,
           "g2p+advect": (48 + 72 * apic + 8 * binned) * particles + 24 * cells}
    return {k: v / BANDWIDTH * 1e3 for k, v in per.items()}


SUBSTAGES = ["margin", "update", "bin+gather", "classify", "extrapolate", "old", "gravity+boundaries", "project",
             "fluid faces+extrapolate"]


def timed_sparse_substep(sim, dt, ev, sub, trace=None):
    """ms per stage (``STAGES``), CG iterations and ms per sub-stage (``SUBSTAGES``);
    *trace* (``MemoryTrace``) is told each stage."""
    g, s = sim.grid, sim.settings

    def stage(name):
        if trace is not None:
            trace.stage = name

    stage("topology")
    ev[0].record()
    reach = BrickReach(sim.vel, dt, float(np.linalg.norm(s.gravity)), sim.spec.voxel_size)  # as SparseFlipSimulation
    margin = None if margin_mode() == "brick" and sparse_topology_gpu.device_margin() else substep_margin(
        float(transfer.max_speed(sim.vel)), dt, sim.spec.voxel_size, float(np.linalg.norm(s.gravity)))  # as the sim
    sub[0].record()
    added, freed = g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, bodies=sim.obstacle_bodies,
                            scratch=sim.band is None, reach=reach if margin_mode() == "brick" else None)
    ev[1].record()
    stage("p2g")
    sparse_transfer.particles_to_grid(g, sim.pos, sim.vel, sim.c, ring=True)  # as the sim (no band)
    sub[1].record()
    sparse_transfer.classify(g, sim.pos)
    sub[2].record()
    add = [np.float32(a * dt) for a in s.gravity]
    if sparse_transfer.p2g_tail() == "apart":  # its three steps timed apart
        sparse_transfer.extrapolate(g)
        sub[3].record()
        old = tuple(f.copy() for f in g.faces())
        sub[4].record()
        sparse_transfer.enforce_boundaries(g, add=add)
    else:  # as SparseFlipSimulation: one kernel's tail (the sub-stage extrapolate)
        old = sparse_transfer.extrapolate_and_boundaries(g, add=add)
        sub[3].record()
        sub[4].record()
    ev[2].record()
    stage("pressure")
    p, stats = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,
                                              max_iterations=s.pressure_max_iterations,
                                              preconditioner=sim.preconditioner,
                                              warm_start=s.warm_start_pressure)  # VOXFX_PRESSURE_WARM overrides
    ev[3].record()
    stage("project")
    sparse_pressure.project(g, p, dt)
    sub[5].record()
    sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
    ev[4].record()
    stage("g2p+advect")
    sparse_transfer.g2p_advect(g, old, sim.pos, sim.vel, s.flip_ratio, dt, sim.c)
    ev[5].record()
    ev[5].synchronize()
    import cupy as cp

    t = cp.cuda.get_elapsed_time
    order = [ev[0], sub[0], ev[1], sub[1], sub[2], sub[3], sub[4], ev[2]]
    parts = [t(a, b) for a, b in zip(order, order[1:])] + [t(ev[3], sub[5]), t(sub[5], ev[4])]
    parts.append(float(len(added) + len(freed) > 0))  # the bricks changed
    return [t(ev[i], ev[i + 1]) for i in range(5)], stats["iterations"], parts


def run(n, particles, steps, warm, sparse, max_cg=None, kind="dam", trace=None, time_cap=None):
    import time

    import cupy as cp

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    spec, v, t = scene(n, particles, kind)
    settings = FlipSettings() if max_cg is None else FlipSettings(pressure_max_iterations=int(max_cg))
    if trace is not None:
        trace.stage = "set-up"
    start = time.perf_counter()
    sim = FlipSimulation(spec, settings, v, t, xp=cp, sparse=sparse)
    cp.cuda.Device().synchronize()
    setup = time.perf_counter() - start
    host = [python_us(5, 8)]  # the host's pace before and after the substeps (_host_probe: quick or slow vCPU)
    dt = 1 / 120
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows, its, parts = [], [], []
    start = time.perf_counter()
    for i in range(warm + steps):
        if sparse:
            ms, it, part = timed_sparse_substep(sim, dt, ev, sub, trace)
        else:
            ms, it = timed_substep(sim, dt, ev[:5])
            ms, part = [0.0] + ms, None
        if i >= warm:
            rows.append(ms)
            its.append(it)
            parts.append(part)
        if time_cap and time.perf_counter() - start > time_cap and rows:
            break
    host.append(python_us(5, 8))
    med = list(np.median(np.array(rows), axis=0))
    common = {"setup s": setup, "steps": len(rows), "host µs": host, "cpu": on_cpu()}
    extra = {"bricks": sim.grid.brick_count(), "grid MiB": sim.grid.nbytes / 2 ** 20,
             "estimate": sparse_flip_memory(spec, len(sim.pos), xp=cp, parts=True),
             "fluid": sim.fluid_cell_count(), "parts": list(np.median(np.array(parts), axis=0)),
             "changed": int(sum(p[-1] for p in parts)), "topology max": max(r[0] for r in rows),
             "its": its, "pressure ms": [r[2] for r in rows],
             **common} if sparse else common
    return len(sim.pos), med, int(np.median(its)), pool.total_bytes(), extra


def run_ab(n, particles, steps, warm, ways, kind="dam"):
    """One simulation whose substeps alternate between the environments *ways* (each a list of
    NAME=VALUE), the first way first on even substeps: {way: (median ms per stage, median
    sub-stages, CG iterations)} over *steps* substeps a way after *warm* of each."""
    import cupy as cp

    spec, v, t = scene(n, particles, kind)
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = {w: [] for w in range(len(ways))}
    for i in range(warm + steps):
        order = range(len(ways)) if i % 2 == 0 else reversed(range(len(ways)))
        for w in order:
            use_way(ways, w)
            ms, it, part = timed_sparse_substep(sim, 1 / 120, ev, sub)
            if i >= warm:
                rows[w].append((ms, it, part))
    print(f"{n}³, {len(sim.pos):,} particles, {sim.grid.brick_count():,} bricks; substeps alternate between the ways")
    out = {}
    for w, way in enumerate(ways):
        ms = np.median(np.array([r[0] for r in rows[w]]), axis=0)
        parts = np.median(np.array([r[2] for r in rows[w]]), axis=0)
        out[w] = (ms, parts, [r[1] for r in rows[w]])
        print(f"{' '.join(way) or '(defaults)'} | " + " | ".join(f"{k} {m:.3f}" for k, m in zip(STAGES, ms))
              + f" | substep {sum(ms):.2f} ms | CG it {out[w][2]}")
        print("   sub-stages (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in zip(SUBSTAGES, parts)))
    return out


def run_ways(args):
    """``--ab`` (substeps alternating between the ways), with ``--frames`` the user's frames a simulation a way
    (``_sparse_frames.frames_ab``), or ``--pace`` (``_sparse_pace.run_pace``, the ways if given)."""
    n, particles = ROWS[args.row or "8m"]
    ways = [[x for x in way if x] for way in args.ab or [[]]]
    if args.frames and not args.pace:  # the user's frames, one simulation a way in this process (_sparse_frames)
        from _sparse_frames import frames_ab

        frames_ab(n, particles, args.frames, {"river": "river", "8m-still": "still"}.get(args.row, "dam"),
                  args.time_cap, ways, args.timing)
    elif args.pace:
        from _sparse_pace import KINDS, run_pace

        run_pace(n, particles, args.pace, args.warm, args.rounds, ways, timed_sparse_substep, STAGES,
                 kinds=tuple(args.pace_kinds or KINDS))
    else:
        run_ab(n, particles, args.steps, args.warm, ways)


def level_set_way(text: str) -> str:
    """``--level-set-modes``' way: MODE or MODE:VAR=VALUE,VAR=VALUE (``_sparse_frames.timed_level_set``)."""
    mode, _, switches = text.partition(":")
    if mode not in surface_gpu.LEVEL_SET_MODES or any("=" not in s for s in switches.split(",") if s):
        raise argparse.ArgumentTypeError(f"{text!r}: a mode of {surface_gpu.LEVEL_SET_MODES}, then :VAR=VALUE,...")
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="64³ with 1M particles only")
    ap.add_argument("--dense", action="store_true", help="also the dense solver on the same scenes")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--res", type=int, nargs="+", help="grid sizes (with --particles: the rows to run)")
    ap.add_argument("--particles", type=float, nargs="+", help="particles per row (e.g. 8e6), one per --res")
    ap.add_argument("--max-cg", type=int, default=None, help="cap on CG iterations per solve")
    ap.add_argument("--gather", nargs="+", choices=sparse_gpu.GATHERS, default=None,
                    help="P2G gather kernels to run each row with (A/B in one process)")
    ap.add_argument("--g2p", nargs="+", choices=sparse_g2p_gpu.G2P_ORDERS, default=None,
                    help="G2P particle orders to run each row with (A/B in one process)")
    ap.add_argument("--topology", nargs="+", choices=sparse_topology_gpu.TOPOLOGY_MODES, default=None,
                    help="device topology modes to run each row with (A/B in one process)")
    ap.add_argument("--topology-update", nargs="+", choices=sparse_topology_gpu.TOPOLOGY_UPDATES, default=None,
                    help="topology update ways (VOXFX_SPARSE_TOPOLOGY_UPDATE) to run each row with (A/B)")
    ap.add_argument("--row", choices=sorted(ROWS), help="a big-scene row (module notes)")
    ap.add_argument("--frames", type=int, default=0, help="time N user frames (step(1/24)) instead of substeps")
    ap.add_argument("--level-set", action="store_true", help="with --frames: the frame's level set too")
    ap.add_argument("--time-cap", type=float, default=90.0, help="seconds of simulating per row (set-up apart)")
    ap.add_argument("--memory-trace", action="store_true", help="live-bytes high-water mark and its arrays")
    ap.add_argument("--narrow-band", type=int, default=0, help="with --frames: cells of narrow band (0: off)")
    ap.add_argument("--cfl", type=float, nargs="+", default=None, help="with --frames: CFL numbers to run each")
    ap.add_argument("--outputs", action="store_true", help="with --frames: the frame's outputs as a compact GPU bake "
                    "makes them (level set, cell velocity, particles encoded) instead of the level set alone")
    ap.add_argument("--max-particles-per-cell", type=int, default=None,
                    help="with --frames: the Max Particles per Cell setting (0: every particle kept)")
    ap.add_argument("--trim", action="store_true", help="with --frames: the pool's outgrown free blocks given back "
                    "before each frame, as a bake does (memory.trim_gpu_pool)")
    ap.add_argument("--stages", action="store_true", help="with --frames: each frame's step stages (host/device ms), "
                    "cudaMallocs, solvers built and level set stages (_frame_stages.py)")
    ap.add_argument("--profile-frames", default=None, metavar="A-B",
                    help="with --frames: cProfile of frames A to B's steps, top functions by own and inside time")
    ap.add_argument("--timeline-frames", default=None, metavar="A-B",
                    help="with --frames: the pressure timeline's marks in frames A to B (_frame_profile)")
    ap.add_argument("--compile-log", action="store_true", help="with --frames: the kernels each frame's step and "
                    "level set use for the first time in the process (compiled or from CuPy's disk cache)")
    ap.add_argument("--timing", choices=sorted(TIMINGS), default=None,
                    help="with --frames: the Liquid panel's Timing (fast: three substeps a 24 fps frame)")
    ap.add_argument("--pressure-warm", nargs="+", choices=("0", "1"), default=None,
                    help="A/B of the PCG's warm start (VOXFX_PRESSURE_WARM) in one process: each row per value")
    ap.add_argument("--level-set-modes", nargs="+", type=level_set_way, default=None,
                    help="with --frames --level-set: GPU level set ways to time each frame (A/B); a way is a mode "
                         "with switches, e.g. lean:VOXFX_LEVEL_SET_INTERIOR=0,VOXFX_LEVEL_SET_BOUNDS=0")
    ap.add_argument("--ab", nargs="+", action="append", default=None, metavar="NAME=VALUE",
                    help="a way (environment variables) for an A/B in one simulation, substeps alternating; "
                         "give --ab twice or more (--ab '' for the defaults)")
    ap.add_argument("--pace", type=int, default=0, metavar="N",
                    help="the substep as the simulation runs it, blocks of N substeps (_sparse_pace.py)")
    ap.add_argument("--rounds", type=int, default=2, help="with --pace: rounds of blocks a way")
    ap.add_argument("--pace-kinds", nargs="+", default=None, help="with --pace: the blocks run (_sparse_pace.KINDS)")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    if args.ab or args.pace:
        run_ways(args)
        return
    trace = MemoryTrace() if args.memory_trace else None
    kind = {"river": "river", "8m-still": "still"}.get(args.row, "dam")
    if args.frames:
        n, particles = ROWS[args.row or "8m"]
        compiles = CompileLog() if args.compile_log else None
        for cfl in args.cfl or [None]:
            if trace is not None:
                with trace.hook:
                    run_frames(n, particles, args.frames, kind, args.time_cap, args.level_set, trace, args.narrow_band,
                               cfl, args.level_set_modes, args.timing, args.outputs, args.trim,
                               args.max_particles_per_cell, compiles, args.stages, args.profile_frames,
                               args.timeline_frames)
                print(trace.report())
            else:
                run_frames(n, particles, args.frames, kind, args.time_cap, args.level_set, None, args.narrow_band,
                           cfl, args.level_set_modes, args.timing, args.outputs, args.trim,
                           args.max_particles_per_cell, compiles, args.stages, args.profile_frames,
                           args.timeline_frames)
        return
    configs = [(64, 1_000_000)] if args.quick else [(64, 1_000_000), (128, 4_000_000), (256, 8_000_000)]
    if args.row:
        configs = [ROWS[args.row]]
    if args.res:
        counts = args.particles or [8 * n ** 3 / 16 for n in args.res]
        configs = [(int(n), int(p)) for n, p in zip(args.res, counts)]
    gathers = args.gather or [sparse_gpu.gather_mode()]
    orders = args.g2p or [sparse_g2p_gpu.g2p_order()]
    header = ["solver", "gather", "g2p order", "grid", "particles"] + [f"{s} ms" for s in STAGES] + [
        "CG it", "substep ms", "bricks", "grid MiB", "pool peak MiB", "estimate: bricks", "estimate MiB"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    topologies = args.topology or [sparse_topology_gpu.topology_mode()]
    runs = [(True, g, o, m, w, u) for w in args.pressure_warm or [None] for m in topologies for g in gathers
            for o in orders for u in args.topology_update or [None]] + (
        [(False, "-", "-", "-", None, None)] if args.dense else [])
    for n, particles in configs:
        for sparse, gather, order, topology, warm, update in runs:
            if update is not None:
                os.environ["VOXFX_SPARSE_TOPOLOGY_UPDATE"] = update  # read at each topology update
            if warm is not None:
                os.environ["VOXFX_PRESSURE_WARM"] = warm  # read at each solve
            if sparse:
                os.environ["VOXFX_SPARSE_GATHER"] = gather  # read at each P2G
                os.environ["VOXFX_SPARSE_G2P"] = order  # and at each G2P
                os.environ["VOXFX_SPARSE_TOPOLOGY"] = topology  # and at each topology update
            if trace is not None:
                trace.__init__()
                with trace.hook:
                    count, med, it, peak, extra = run(n, particles, args.steps, args.warm, sparse, args.max_cg,
                                                      kind, trace, args.time_cap)
            else:
                count, med, it, peak, extra = run(n, particles, args.steps, args.warm, sparse, args.max_cg, kind,
                                                  None, args.time_cap)
            solver = ("sparse" if topology == "device" else f"sparse ({topology} topology)") if sparse else "dense"
            solver += "" if warm is None else f" (warm start {'on' if warm == '1' else 'off'})"
            solver += "" if update is None else f" (topology update {update})"
            row = [solver, gather, order, f"{n}³", f"{count:,}"]
            row += [f"{m:.2f}" for m in med] + [
                str(it) + (f" (cap {args.max_cg})" if args.max_cg else ""), f"{sum(med):.1f}",
                str(extra.get("bricks", "")), f"{extra['grid MiB']:.0f}" if extra else "", f"{peak / 2 ** 20:.0f}",
                str(extra["estimate"]["bricks"]) if extra else "",
                f"{extra['estimate']['total'] / 2 ** 20:.0f}" if extra else ""]
            print(" | ".join(row), flush=True)
            if sparse:
                fl = floors(count, extra["bricks"] * 512, extra["fluid"], it, binned=order == "cell")
                print("   floors (ms): " + ", ".join(f"{k} {v:.3f} ({m / v:.0f}×)" if v else f"{k} 0 (no work)"
                                                     for (k, v), m in
                                                     zip(fl.items(), med)), flush=True)
                print("   sub-stages (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in zip(SUBSTAGES, extra["parts"]))
                      + f"; bricks changed in {extra['changed']} of {extra['steps']} substeps, topology max "
                      f"{extra['topology max']:.2f} ms", flush=True)
                print(f"   CG iterations per substep: {extra['its']}; pressure ms per substep: "
                      + ", ".join(f"{v:.2f}" for v in extra["pressure ms"]), flush=True)
                e = extra["estimate"]
                print(f"   set-up {extra['setup s']:.1f} s; estimate (MiB): substep {e['substep'] / 2 ** 20:.0f}, "
                      f"frame output {e['frame output'] / 2 ** 20:.0f}, state {e['state'] / 2 ** 20:.0f}", flush=True)
            before, after = extra["host µs"]
            print(f"   host: Python probe {before:.1f} µs before the substeps, {after:.1f} after, on CPU "
                  f"{extra['cpu']} (s23f's H100 machines: ~12–14 a quick vCPU, ~24–40 a slow one)", flush=True)
            if trace is not None:
                print(trace.report(), flush=True)


if __name__ == "__main__":
    main()
