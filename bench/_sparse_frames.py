"""``bench/flip_sparse.py --frames``: the user's frame timed (``run_frames``: ``step(1/24)``
with adaptive substeps, and the frame's level set or outputs), each GPU level set way
timed on the device and to the host (``timed_level_set``); that bench's module notes
describe the options and the columns."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.addon import compact_points  # noqa: E402
from voxfx.kernels import backend  # noqa: E402
from voxfx.kernels.flip import surface_gpu, surface_host_copy  # noqa: E402
from voxfx.kernels.flip.bake import frame_arrays  # noqa: E402
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_memory import sparse_flip_memory  # noqa: E402
from voxfx.kernels.memory import trim_gpu_pool  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _compile_log import CompileLog  # noqa: E402
from _frame_profile import FrameProfile, FrameTimeline, frame_range  # noqa: E402
from _frame_stages import FrameStages  # noqa: E402
from _sparse_scene import scene  # noqa: E402


def timed_level_set(sim, mode):
    """(device ms, pinned copy ms, pageable copy ms, [(stage, ms)], φ on the device) of
    one level set the GPU way *mode*: a mode of ``surface_gpu.LEVEL_SET_MODES``, or
    MODE:VAR=VALUE,... with those environment variables set for it (restored after). The
    stages end with the copies: "pinned" (``backend.to_host``, a block of φ's exact size),
    "pinned class" (``surface_host_copy.host_copy``'s, a block of its size class, CuPy's pool
    reusing it from frame to frame) and "pageable" (``.get()``); the level set's own
    numbers (points, fullest cell) follow as stages too (``surface_gpu.STATS``), and the way's own
    ``level_set()`` to the host, timed whole, with whether its bits are the device φ's."""
    import time

    import cupy as cp

    mode, _, switches = mode.partition(":")
    chosen = dict(s.split("=", 1) for s in switches.split(",") if s)
    chosen["VOXFX_LEVEL_SET"] = mode
    kept = {k: os.environ.get(k) for k in chosen}
    os.environ.update(chosen)
    try:
        cp.cuda.Device().synchronize()
        first = cp.cuda.Event()
        first.record()
        surface_gpu.PROFILE = [("start", first)]
        surface_gpu.STATS = {}
        a = time.perf_counter()
        phi = sim.level_set(on_device=True)
        cp.cuda.Device().synchronize()
        b = time.perf_counter()
        marks, surface_gpu.PROFILE = surface_gpu.PROFILE, None
        stats, surface_gpu.STATS = surface_gpu.STATS, None
        e = time.perf_counter()
        on_host = sim.level_set()  # the way's level_set() to the host (VOXFX_LEVEL_SET_COPY's way), timed whole
        stats["level_set() to host ms"] = (time.perf_counter() - e) * 1e3
        stats["host bits same"] = float(on_host.tobytes() == phi.get().tobytes())
        del on_host
    finally:
        for k, v in kept.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    stages = [(name, cp.cuda.get_elapsed_time(e0, e1)) for (_, e0), (name, e1) in zip(marks, marks[1:])]
    host = backend.to_host(phi)
    c = time.perf_counter()
    del host
    host = surface_host_copy.host_copy(phi, "pinned")
    c2 = time.perf_counter()
    del host
    phi.get()
    d = time.perf_counter()
    stages.append(("[pinned class copy]", (c2 - c) * 1e3))
    stages += [(f"[{k}]", v) for k, v in stats.items()]
    return (b - a) * 1e3, (c - b) * 1e3, (d - c2) * 1e3, stages, phi


def frame_settings(timing, cfl, narrow_band, most) -> FlipSettings:
    """``run_frames``' settings: the timing's (None: the defaults), with *cfl*, *narrow_band* and
    *most* (Max Particles per Cell) where given."""
    chosen = dict(TIMINGS[timing]) if timing else {}
    if cfl is not None:
        chosen["cfl"] = float(cfl)
    if most is not None:
        chosen["max_particles_per_cell"] = int(most)
    return FlipSettings(narrow_band=int(narrow_band), **chosen)


def _phase(compiles, phase):
    """Name what runs next in the ``CompileLog`` *compiles* (None: no log)."""
    if compiles is not None:
        compiles.phase = phase


def _first_uses(compiles, frame) -> list:
    """The frame's line of kernels first used (set-up too at frame 0); none without a log."""
    if compiles is None:
        return []
    notes = compiles.take()
    phases = ("set-up", "step", "level set") if frame == 0 else ("step", "level set")
    return ["   kernels first used: " + "; ".join(CompileLog.summary(notes, phase) for phase in phases)]


def _plain_level_set(sim, began, watch) -> str:
    """The frame's level set as ``level_set()`` gives it (φ on the host); its column's text
    (host ms from *began*, the step's end). With *watch* (``FrameStages``) its stages are
    marked (``surface_gpu.PROFILE``, read by ``_stage_lines``)."""
    import time

    import cupy as cp

    if watch is not None:
        first = cp.cuda.Event()
        first.record()
        surface_gpu.PROFILE = [("start", first)]
    phi = sim.level_set()
    return f"{(time.perf_counter() - began) * 1e3:.0f} ({phi.size / 1e6:.1f}M nodes)"


def _stage_lines(watch, step_ms) -> list:
    """``FrameStages.report``'s lines for the frame (none without *watch*)."""
    if watch is None:
        return []
    marks, surface_gpu.PROFILE = surface_gpu.PROFILE, None
    return watch.report(step_ms, marks)


def run_frames(n, particles, frames, kind, time_cap, level_set=False, trace=None, narrow_band=0, cfl=None,
               modes=None, timing=None, outputs=False, trim=False, most=None, compiles=None, stages=False,
               profile=None, timeline=None):
    """The user's frame: ``step(1/24)`` (+ the level set), until *frames* or *time_cap* s;
    *narrow_band* cells (0: every particle) with the particles kept and the liquid's; *cfl*
    the CFL number (None: the setting's default); *modes* the GPU level set ways to time;
    *timing* a name of ``TIMINGS`` (the Liquid panel's Timing buttons; None: the defaults);
    *outputs*: also the frame's outputs as a compact-format GPU bake makes them before its
    writer thread writes them (``frame_arrays`` with the particles on the device: the level
    set closed against the walls, the cell velocity; the particles encoded on the device and
    the grids copied to the host), instead of the level set alone. *trim*: CuPy's outgrown free
    blocks given back before each frame (``memory.trim_gpu_pool``), as a bake does. *most*: the
    Max Particles per Cell setting (None: its default; 0: every particle kept). *compiles*: a
    ``CompileLog``, whose first uses of kernels are printed per frame (step, level set). *stages*: each
    frame's step stages, cudaMallocs and level set stages printed under it (``_frame_stages``).
    *profile* / *timeline* ("A-B": frames A to B): cProfile of those frames' steps and the pressure
    timeline's marks in them, printed after the frames (``_frame_profile``)."""
    import time

    import cupy as cp

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    spec, v, t = scene(n, particles, kind)
    watch = FrameStages(cp) if stages else None
    profiler = FrameProfile(frame_range(profile))
    marks = FrameTimeline(frame_range(timeline))
    _phase(compiles, "set-up")
    start = time.perf_counter()
    settings = frame_settings(timing, cfl, narrow_band, most)
    sim = FlipSimulation(spec, settings, v, t, xp=cp, sparse=True)
    print(f"timing {timing or 'accurate'}: CFL {settings.cfl:g}, Max Substeps {settings.max_substeps}, Max Time Step "
          f"{settings.max_time_step:.4f} s, time-centred {'on' if settings.time_centred_advection else 'off'}, "
          f"Max Particles per Cell {settings.max_particles_per_cell}")
    cp.cuda.Device().synchronize()
    print(f"{kind} {'×'.join(map(str, spec.shape))}: {len(sim.pos):,} particles, set-up "
          f"{time.perf_counter() - start:.1f} s, pool {pool.total_bytes() / 2 ** 30:.2f} GiB; estimate "
          f"{sparse_flip_memory(spec, len(sim.pos), xp=cp, narrow_band=narrow_band) / 2 ** 30:.2f} GiB", flush=True)
    print(f"narrow band: {int(narrow_band)} cells" if narrow_band else "narrow band: off")
    print("frame | substeps (why) | step ms | ms/substep | level set ms | CG it (frame) | bricks | particles (liquid) "
          "| pool GiB | user frame ms (trim + step + level set)")
    print("--- | --- | --- | --- | --- | --- | --- | --- | --- | ---")
    for mode in (modes or []) if level_set else []:  # compile the level set's kernels before the frames
        timed_level_set(sim, mode)
    begin = time.perf_counter()
    for frame in range(frames):
        if trace is not None:
            trace.stage = f"frame {frame}"
        trimmed = None
        if trim:  # as the bake does before each frame (addon/flip_sparse.py): the outgrown free blocks back
            t0 = time.perf_counter()
            freed = trim_gpu_pool()
            trimmed = (time.perf_counter() - t0) * 1e3, freed
        _phase(compiles, "step")
        marks.begin(frame)
        a = time.perf_counter()
        stats = profiler.step(sim, frame, 1 / 24)
        cp.cuda.Device().synchronize()
        b = time.perf_counter()
        marks.end(frame)
        _phase(compiles, "level set")
        detail = []
        if level_set and modes:
            cells, phis = [], {}
            for mode in modes if frame % 2 == 0 else modes[::-1]:  # the ways' order reversed every other frame
                dev, pinned, pageable, stages, phis[mode] = timed_level_set(sim, mode)
                cells.append(f"{mode} {dev:.1f} + {pinned:.1f}")
                detail.append(f"   {mode}: device {dev:.2f} ms, to host pinned {pinned:.2f} / pageable {pageable:.2f} "
                              f"ms; " + ", ".join(f"{k} {v:.2f}" for k, v in stages))
            if len(phis) > 1:
                base = phis[modes[0]]
                diff = [int((phis[m] != base).sum()) for m in modes[1:]]
                worst = [float(cp.abs(phis[m] - base).max()) for m in modes[1:]]
                detail.append(f"   φ against {modes[0]}: nodes differing {diff}, max |Δφ| {worst} "
                              f"({base.size:,} nodes, {int((base < 0).sum()):,} inside)")
                del base
            del phis
            surface_text = "; ".join(cells)
        elif outputs:
            arrays = frame_arrays(sim, spec, particles_on_device=True)
            c = time.perf_counter()
            encoded = compact_points.encode_here(arrays["position"], {"velocity": arrays["velocity"],
                                                                      "size": arrays["size"]}, cell=spec.voxel_size)
            d = time.perf_counter()
            surface_text = f"outputs {(d - b) * 1e3:.0f}"
            detail.append(f"   outputs: level set + cell velocity to the host {(c - b) * 1e3:.1f} ms, particles "
                          f"encoded on the device {(d - c) * 1e3:.1f} ms ({len(encoded) / len(sim.pos):.1f} bytes a "
                          f"particle); the frame {(d - a) * 1e3:.0f} ms")
        elif level_set:
            surface_text = profiler.call(frame, _plain_level_set, sim, b, watch)
        else:
            surface_text = "-"
        # the user's frame as the issue counts it: the step and the level set (several ways timed: none)
        whole = "-" if level_set and modes else \
            f"{(time.perf_counter() - a) * 1e3 + (trimmed[0] if trimmed is not None else 0.0):.0f}"
        if stats.get("limited"):
            detail.append(f"   particle count control: {stats['limited']:,} deleted from crowded cells")
        print(f"{frame} | {stats['substeps']} ({stats.get('limit', '')}, CFL asks {stats.get('cfl_substeps', '')}) | "
              f"{(b - a) * 1e3:.0f} | "
              f"{(b - a) * 1e3 / max(1, stats['substeps']):.0f} | {surface_text} | "
              f"{stats.get('iterations', '')} | {sim.grid.brick_count()} | {len(sim.pos):,} "
              f"({sim.liquid_particles():,}) | {pool.total_bytes() / 2 ** 30:.2f} | {whole}",
              flush=True)
        if trimmed is not None:
            detail.append(f"   pool trimmed before the frame: {trimmed[0]:.1f} ms, "
                          f"{trimmed[1] / 2 ** 30:.2f} GiB given back")
        detail += _first_uses(compiles, frame)
        detail += _stage_lines(watch, (b - a) * 1e3)
        for line in detail:
            print(line, flush=True)
        if time.perf_counter() - begin > time_cap:
            print(f"(time cap {time_cap:.0f} s reached after {frame + 1} frames)")
            break
    for line in profiler.lines() + marks.lines():
        print(line, flush=True)


def frames_ab(n, particles, frames, kind, time_cap, ways, timing=None):
    """``--frames N --ab ...``: one simulation a way (environment *ways*, ``_sparse_pace.use_way``) in one process,
    the same scene and settings (*timing*), stepped frame by frame in turn (``step(1/24)``, synced), the ways'
    order turned each frame: each frame's step ms a way side by side (ways that keep the same bits follow the
    same states: the particles are compared after the last frame), then the medians and sums over frames 6–11."""
    import time

    import cupy as cp
    import numpy as np

    from _sparse_pace import use_way

    spec, v, t = scene(n, particles, kind)
    settings = frame_settings(timing, None, 0, None)
    sims = []
    for w in range(len(ways)):
        use_way(ways, w)
        sims.append(FlipSimulation(spec, settings, v, t, xp=cp, sparse=True))
    names = [" ".join(way) or "(defaults)" for way in ways]
    print(f"{kind} {'×'.join(map(str, spec.shape))}: {len(sims[0].pos):,} particles, timing {timing or 'accurate'}; "
          f"frames_ab: {len(ways)} simulations in one process, frame by frame, the order turned each frame")
    print("frame | " + " | ".join(f"way {w} step ms (substeps, CG, bricks)" for w in range(len(ways))))
    times = [[] for _ in ways]
    begin = time.perf_counter()
    for frame in range(frames):
        cells = [""] * len(ways)
        for k in range(len(ways)):
            w = (frame + k) % len(ways)
            use_way(ways, w)
            cp.cuda.Device().synchronize()
            a = time.perf_counter()
            stats = sims[w].step(1 / 24)
            cp.cuda.Device().synchronize()
            ms = (time.perf_counter() - a) * 1e3
            times[w].append(ms)
            cells[w] = f"{ms:.1f} ({stats['substeps']}, {stats.get('iterations', '')}, {sims[w].grid.brick_count()})"
        print(f"{frame} | " + " | ".join(cells), flush=True)
        if time.perf_counter() - begin > time_cap:
            print(f"(time cap {time_cap:.0f} s reached after {frame + 1} frames)")
            break
    for w, name in enumerate(names):
        late = times[w][6:12]
        rest = times[w][6:]
        diff = [a - b for a, b in zip(rest, times[0][6:])]
        print(f"way {w} {name}: step median {np.median(times[w]):.1f} ms; frames 6-11: sum {sum(late):.1f} ms, "
              f"median {np.median(late) if late else float('nan'):.1f}; frames 6-{len(times[w]) - 1}: sum "
              f"{sum(rest):.1f} ms" + (f", less way 0's frame by frame: median {np.median(diff):+.2f} ms, mean "
                                       f"{np.mean(diff):+.2f}" if w and diff else ""))
    same = all(cp.asnumpy(s.pos).tobytes() == cp.asnumpy(sims[0].pos).tobytes() for s in sims[1:])
    print(f"particles after the last frame the same bits in every way: {same}")
