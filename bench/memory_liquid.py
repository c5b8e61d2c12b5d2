"""A sparse liquid's GPU memory frame by frame against its estimates (issue 21 §6).

Runs the user's frame (``step(1/24)`` and the frame's level set, as a bake does) of the
sparse solver on scenes that spread, and per frame records the bricks and particles
held, the high-water mark of the pool's bytes in use during the frame (a CuPy memory
hook: what the frame really needed; the pool's own total, cached blocks included,
beside it) and three estimates:

* *old*: ``sparse_memory``'s estimate before the spread was counted (the start's cube of
  bricks ×1.5, capped by the box);
* *new*: ``sparse_flip_memory`` (the start's cube plus the volume spread as a layer over
  the box floor, capped by the box; with the narrow band, its stage);
* *check*: ``frame_check.FrameCheck``'s need for the frame, taken before it from the
  bricks and particles held then and the last frame's growth (what the bake's per-frame
  check compares with the usable memory).

Rows (each within its time cap; the whole run within ``--budget`` seconds):

    dam     the 8M dam break at 256³ (``bench/flip.py``'s), up to --frames frames
    dam65   the 65M dam break at 512³ (``bench/flip_sparse.py --row 65m``'s scene), up to
            --frames frames within --dam65-cap seconds of frames (set-up ~10-20 s before)
    band    the same with a narrow band of 2, 4 and 8 cells, --band-frames frames each
    river   ``bench/flip_sparse.py``'s 100M river (2048 × 1024 × 512 box), as many
            frames as fit
    band-sizes  the narrow band's rows at other sizes (``--band-sizes 128:1000000
            160:2000000``: dam breaks of n³ cells and P particles), --band-frames frames each

A band row records the band's ways (``sparse_memory.band_ways``: kernels or arrays, whose
estimates differ) and per frame its stored cells and the box of its cells (``band_box``).

``--stages`` names what each frame allocates by stage (``_stage_trace.py``: the highest
bytes in use while each stage ran, the live bytes at the frame's peak by stage and source
line) into each frame's ``stages`` in the JSON.

    OUT=/tmp/out python3 bench/memory_liquid.py [--rows dam band river] [--frames 60] [--budget 165]
    OUT=/tmp/out python3 bench/memory_liquid.py --rows dam65 --budget 150    (not in the default rows)

Writes ``$OUT/memory_liquid.json`` after every frame (a run cut short keeps its rows)
and prints one line per frame and a summary per row: the largest in-use peak against
each estimate (est / peak; the guard's target is 1 to 1.5).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_memory as M  # noqa: E402
from voxfx.kernels.flip.frame_check import FrameCheck, next_frame  # noqa: E402
from voxfx.kernels.flip import sparse_pressure_workspace  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import ROWS, river, scene  # noqa: E402

GIB = 2 ** 30


class InUse:
    """The pool's bytes in use (``used_bytes``, read after every allocation) and their
    high-water mark since ``reset`` (a CuPy hook; on NumPy, ``--smoke``, nothing is counted).
    It counted the hook's own mallocs less its frees before: a block allocated before the row
    (a row before's, collected later) and freed during it stayed counted, 43-76 MiB too high
    on the 1M rows after the 2M ones (H100, i21p's call 2)."""

    def __init__(self, cp):
        self.peak, self.pool = 0, None
        if cp is None:
            import contextlib

            self.hook = contextlib.nullcontext()
            return
        from cupy.cuda import memory_hook

        watch = self

        class Hook(memory_hook.MemoryHook):
            name = "voxfx_in_use"

            def malloc_postprocess(self, **kw):
                watch.peak = max(watch.peak, int(watch.pool.used_bytes()))

        self.hook, self.pool = Hook(), cp.get_default_memory_pool()

    @property
    def bytes(self) -> int:
        return int(self.pool.used_bytes()) if self.pool is not None else 0

    def start(self):
        """A new row: count from the pool's bytes in use now."""
        self.peak = self.bytes

    def reset(self):
        self.peak = self.bytes


def old_bricks(liquid_cells, spec):
    """The estimate's bricks before this change: the start's cube ×1.5, capped by the box."""
    return int(math.ceil(min(M.SPREAD * M.start_bricks(liquid_cells), M.box_bricks(spec))))


# The estimate's bytes before this change (GPU): 64 B a pool cell, 32 B of state; the band
# beside the state, 40 B a particle and 960 B a liquid cell
OLD_GPU = {"GPU_CELL": 64, "GPU_PARTICLE": 100, "GPU_STATE_CELL": 32, "GPU_STATE_PARTICLE": 24}
OLD_BAND = 40, 960


def estimates(spec, vertices, particles, ppc, band, xp):
    """(new, old) estimates (stage dicts) of a closed box's liquid at rest: new climbs to
    ``climb_cells`` of the liquid's top, old is the start's cube ×1.5 at the old bytes."""
    import numpy as np

    top = (float(np.asarray(vertices)[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    new = M.sparse_flip_memory(spec, particles, ppc, xp=xp, narrow_band=band, parts=True,
                               climb=M.climb_cells(top, 0.0, spec))
    kept = {k: getattr(M, k) for k in OLD_GPU}
    try:
        if xp is not np:
            for k, value in OLD_GPU.items():
                setattr(M, k, value)
        old = M.memory_at(spec, old_bricks(particles / ppc, spec), particles, ppc, xp=xp, parts=True)
        if band and xp is not np:
            old["narrow band"] = int(old["state"] + OLD_BAND[0] * particles + OLD_BAND[1] * particles / ppc)
            old["total"] = max(old["substep"], old["frame output"], old["narrow band"])
        elif band:
            old = M.memory_at(spec, old["bricks"], particles, ppc, xp=xp, narrow_band=band, parts=True)
    finally:
        for k, value in kept.items():
            setattr(M, k, value)
    return new, old


def run_row(name, spec, v, t, frames, cap, out, rows, band=0, ppc=8, xp=None):
    import contextlib

    watch = rows["_watch"]
    watch.start()
    with watch.hook, (watch.stages() if hasattr(watch, "stages") else contextlib.nullcontext()):
        _run_row(name, spec, v, t, frames, cap, out, rows, band, ppc, xp, watch)


def _run_row(name, spec, v, t, frames, cap, out, rows, band, ppc, xp, watch):
    import numpy as np

    gpu = xp is not np
    pool = xp.get_default_memory_pool() if gpu else None

    def sync():
        if gpu:
            xp.cuda.Device().synchronize()

    def pool_total():
        return pool.total_bytes() if gpu else 0

    t0 = time.perf_counter()
    sim = FlipSimulation(spec, FlipSettings(narrow_band=int(band)), v, t, xp=xp, sparse=True)
    sync()
    P0 = len(sim.pos)
    setup_peak = watch.peak
    new, old = estimates(spec, v, P0, ppc, band, xp)
    asked = []  # the check's stages (its first call of a frame: the next frame's need)

    def memory(b, p, parts=False, kept=None):
        stages = M.memory_at(spec, b, p, ppc, False, True, parts, xp, band, kept=kept)
        asked.append(stages)
        return stages

    check = FrameCheck(memory, True, M.box_bricks(spec), xp=xp, first=new["bricks"], band=band > 0)
    row = {"row": name, "shape": list(spec.shape), "particles": P0, "band": band, "setup s":
           time.perf_counter() - t0, "setup peak": setup_peak, "old": old, "new": new,
           "start bricks": sim.grid.brick_count(), "setup mode": sparse_pressure_workspace.MODE, "frames": [],
           "band ways": list(M.band_ways()) if band else None}
    rows[name] = row
    print(f"{name}: pressure set-up {row['setup mode']}; band ways {row['band ways']}; "
          f"{'×'.join(map(str, spec.shape))}, {P0:,} particles, "
          f"band {band}; set-up {row['setup s']:.1f} s, "
          f"peak {setup_peak / GIB:.2f} GiB, {row['start bricks']} bricks; estimate old {old['total'] / GIB:.2f} GiB "
          f"({old['bricks']} bricks), new {new['total'] / GIB:.2f} GiB ({new['bricks']} bricks)", flush=True)
    print("frame | substeps | s | bricks | particles (liquid) | in-use peak GiB | pool GiB | check GiB (bricks) | "
          "workspace MiB")
    begin = time.perf_counter()
    for frame in range(1, frames + 1):
        before = {"bricks": sim.grid.brick_count(), "particles": len(sim.pos), "liquid": sim.liquid_particles(),
                  "deep": len(sim.band.deep) if sim.band is not None else 0, "used": pool.used_bytes() if gpu else 0}
        asked.clear()
        need, held = check.need(sim)
        need_parts = dict(asked[0]) if asked else {}
        bricks_before, capacity, _, _ = check.counts(sim)
        predicted = max(capacity, next_frame(bricks_before, check.bricks)) if bricks_before else check.first
        a = time.perf_counter()
        watch.reset()
        stats = sim.step(1 / 24)
        sim.level_set()
        sync()
        check.seen(sim)
        f = {"frame": frame, "substeps": stats["substeps"], "s": time.perf_counter() - a,
             "bricks": sim.grid.brick_count(), "particles": len(sim.pos), "liquid": sim.liquid_particles(),
             "peak": watch.peak, "pool": pool_total(), "check": need, "held": held, "check bricks": predicted,
             "capacity": max(check.counts(sim)[1], 0), "workspace": sparse_pressure_workspace.held_bytes(),
             "before": before, "check parts": need_parts,
             "deep": len(sim.band.deep) if sim.band is not None else 0, **band_box(sim)}
        if hasattr(watch, "frame_report"):
            f["stages"] = watch.frame_report()
        row["frames"].append(f)
        print(f"{frame} | {f['substeps']} | {f['s']:.2f} | {f['bricks']} | {f['particles']:,} ({f['liquid']:,}) | "
              f"{f['peak'] / GIB:.3f} | {f['pool'] / GIB:.2f} | {need / GIB:.3f} ({predicted}) | "
              f"{f['workspace'] / 2 ** 20:.1f}", flush=True)
        if "stages" in f:
            print("   " + short(f["stages"], need_parts), flush=True)
        save(out, rows)
        if time.perf_counter() - begin > cap:
            print(f"(cap {cap:.0f} s after {frame} frames)")
            break
    top = max([f["peak"] for f in row["frames"]] + [setup_peak]) or 1
    late = [f["check"] / f["peak"] for f in row["frames"] if f["peak"]]
    row["summary"] = {"peak": top, "old/peak": old["total"] / top, "new/peak": new["total"] / top,
                      "check/peak min": min(late) if late else None, "check/peak max": max(late) if late else None,
                      "bricks max": max([f["bricks"] for f in row["frames"]] or [row["start bricks"]])}
    s = row["summary"]
    print(f"== {name}: in-use peak {top / GIB:.3f} GiB over {len(row['frames'])} frames, bricks {row['start bricks']}"
          f" -> max {s['bricks max']}; old {s['old/peak']:.2f}x, new {s['new/peak']:.2f}x; per-frame check "
          f"{s['check/peak min'] or 0:.2f}-{s['check/peak max'] or 0:.2f}x of the frame's peak", flush=True)
    save(out, rows)
    del sim
    if gpu:
        pool.free_all_blocks()


def band_box(sim):
    """A band's stored cells and the box of its particles', stored and deep cells after the frame
    (the next update's frame box before its padding: what the kernel way's maps span)."""
    if sim.band is None:
        return {}
    from voxfx.kernels.flip.sparse_band_frame import _Frame, _particle_cell_bounds

    b = sim.band
    frame = _Frame.around([b.lattice, b.deep], _particle_cell_bounds(sim), 0, sim.xp)
    return {"lattice": len(b.lattice), "box cells": 0 if frame is None else int(math.prod(int(n) for n in frame.span))}


def short(report, parts):
    """One line of a frame's stage report: its highest stages and what held the peak (MiB)."""
    mib = lambda b: f"{b / 2 ** 20:.0f}"  # noqa: E731
    top = ", ".join(f"{k} {mib(b)}" for k, b in list(report["stage peaks"].items())[:4])
    held = ", ".join(f"{k.split(' | ')[-1]}[{k.split(' | ')[0]}] {mib(b)}" for k, b in
                     list(report["at peak"].items())[:6])
    want = ", ".join(f"{k} {mib(b)}" for k, b in parts.items() if k not in ("bricks", "total"))
    return f"stages: {top} | at peak: {held} | check: {want}"


def replay(path):
    """The estimates of this code against a saved run's per-frame counts and peaks (no
    device needed): est / peak for the start estimates and the per-frame check."""
    import json

    gpu = object()  # any module but NumPy: the estimates' device branch
    data = json.loads(Path(path).read_text())
    for name, row in data.items():
        if name.startswith("river"):
            spec, v, _ = river(row["shape"][0], row["particles"])
        else:
            spec, v, _ = dam_break(row["shape"][0], row["particles"])
        P0, band, frames = row["particles"], row["band"], row["frames"]
        new, old = estimates(spec, v, P0, 8, band, gpu)
        ws = row.get("setup mode") == "workspace"  # the set-up's workspace counted as the run's mode
        check = FrameCheck(lambda b, p, parts=False, kept=None, spec=spec, band=band, ws=ws: M.memory_at(
                               spec, b, p, 8, False, True, parts, gpu, band, workspace=ws, kept=kept),
                           True, M.box_bricks(spec), first=new["bricks"], band=band > 0)
        ratios, capacity, bricks, liquid, kept = [], 0, 0, P0, P0  # before frame 1: every particle held
        for f in frames:
            need, _ = check.plan(bricks, capacity, liquid, kept, used=f.get("before", {}).get("used"))  # pool in use
            ratios.append(need / f["peak"])
            bricks, capacity, liquid = f["bricks"], max(capacity, f["bricks"]), f["liquid"]
            kept = f.get("particles", liquid)  # the particles held after the frame (a band keeps fewer)
            check.saw(bricks, liquid, kept)
        peak = max([f["peak"] for f in frames] + [row["setup peak"]])
        late = ratios[1:] or ratios
        print(f"{name}: {len(frames)} frames, bricks max {max(f['bricks'] for f in frames)} (estimate {new['bricks']},"
              f" old {old['bricks']}); peak {peak / GIB:.3f} GiB; new {new['total'] / GIB:.3f} GiB "
              f"({new['total'] / peak:.2f}x), old {old['total'] / GIB:.3f} GiB ({old['total'] / peak:.2f}x); "
              f"per-frame check {min(late):.2f}-{max(late):.2f}x of the frame's peak (frame 1: {ratios[0]:.2f}x)")


def save(out, rows):
    if out:
        data = {k: v for k, v in rows.items() if not k.startswith("_")}
        Path(out, "memory_liquid.json").write_text(json.dumps(data, indent=1, default=float))


def band_sizes(args, left, out, rows, xp):
    """The band rows at ``--band-sizes``' dam breaks (smoke: small ones)."""
    for size in args.band_sizes:
        n, p = (int(x) for x in size.split(":"))
        if args.smoke:
            n, p = max(16, n // 8), max(4000, p // 500)
        for cells in args.bands:
            if left() < 10:
                print(f"(budget: band {cells} at {n}³ not run)")
                continue
            spec, v, t = dam_break(n, p)
            run_row(f"band {cells} {p / 1e6:g}M {n}", spec, v, t, args.band_frames, min(args.band_cap, left() - 8),
                    out, rows, band=cells, xp=xp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=["dam", "band", "river"],
                    choices=["dam", "dam65", "band", "band-sizes", "river"])
    ap.add_argument("--band-sizes", nargs="+", default=["128:1000000", "160:2000000"],
                    help="n:particles dam breaks for the band-sizes rows")
    ap.add_argument("--stages", action="store_true", help="name each frame's allocations by stage (_stage_trace)")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--band-frames", type=int, default=3)
    ap.add_argument("--bands", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--budget", type=float, default=160.0, help="seconds for the whole run")
    ap.add_argument("--dam-cap", type=float, default=40.0, help="seconds of frames for the dam row")
    ap.add_argument("--dam65-cap", type=float, default=60.0, help="seconds of frames for the dam65 row")
    ap.add_argument("--band-cap", type=float, default=8.0, help="seconds of frames per band row")
    ap.add_argument("--smoke", action="store_true", help="NumPy, small scenes: the script's paths, no GPU")
    ap.add_argument("--replay", help="a saved memory_liquid.json: this code's estimates against its counts")
    args = ap.parse_args()
    if args.replay:
        return replay(args.replay)
    if args.smoke:
        import numpy as xp

        dam_n, dam_p, river_n, river_p, name = 32, 20_000, 128, 300_000, "NumPy (smoke)"
        dam65_n, dam65_p = 48, 65_536  # the 65M row's scene at 1/1000 of its particles
    else:
        import cupy as xp

        dam_n, dam_p, river_n, river_p = 256, 8_000_000, 2048, 100_663_296
        dam65_n, dam65_p = ROWS["65m"]  # 512³, 65,536,000 particles
        name = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    start = time.perf_counter()
    out = os.environ.get("OUT")
    print(f"device: {name}", flush=True)
    if args.stages and not args.smoke:
        from _stage_trace import StageTrace

        rows = {"_watch": StageTrace(xp)}
    else:
        rows = {"_watch": InUse(None if args.smoke else xp)}
    left = lambda: args.budget - (time.perf_counter() - start)  # noqa: E731
    if "dam" in args.rows:
        spec, v, t = dam_break(dam_n, dam_p)
        run_row("dam 8M", spec, v, t, args.frames, min(args.dam_cap, left() - 5), out, rows, xp=xp)
    if "dam65" in args.rows:
        if left() < 30:  # set-up alone is 10-20 s on an H100
            print("(budget: dam65 not run)")
        else:
            spec, v, t = scene(dam65_n, dam65_p, "dam")
            run_row("dam65 65M", spec, v, t, args.frames, min(args.dam65_cap, left() - 5), out, rows, xp=xp)
    if "band" in args.rows:
        for cells in args.bands:
            if left() < 25:
                print(f"(budget: band {cells} not run)")
                continue
            spec, v, t = dam_break(dam_n, dam_p)
            run_row(f"band {cells} 8M", spec, v, t, args.band_frames, min(args.band_cap, left() - 20), out, rows,
                    band=cells, xp=xp)
    if "band-sizes" in args.rows:
        band_sizes(args, left, out, rows, xp)
    if "river" in args.rows and left() > 45:
        spec, v, t = river(river_n, river_p)
        run_row("river 100M", spec, v, t, 1000, left() - 40, out, rows, xp=xp)  # set-up ~25 s, a frame ~1-2 s
    print(f"total {time.perf_counter() - start:.0f} s; rows:")
    for key, row in rows.items():
        s = row.get("summary") if isinstance(row, dict) else None
        if s:
            print(f"  {key}: {row['particles']:,} particles, {len(row['frames'])} frames, bricks {row['start bricks']} "
                  f"-> max {s['bricks max']} (old {row['old']['bricks']}, new {row['new']['bricks']}); in-use peak "
                  f"{s['peak'] / GIB:.3f} GiB; old {row['old']['total'] / GIB:.3f} GiB ({s['old/peak']:.2f}x), new "
                  f"{row['new']['total'] / GIB:.3f} GiB ({s['new/peak']:.2f}x)")


if __name__ == "__main__":
    main()
