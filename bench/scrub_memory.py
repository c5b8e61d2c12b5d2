"""Memory and speed while scrubbing and rendering a baked sequence (issue 21).

    python3 bench/scrub_memory.py [--flakes 200000 --frames 500 --liquid-res 48
                                   --liquid-frames 300 --render 40 --mechanisms files,loader]

Writes a fake snow bake (flakes PLY + depth VDB per frame) and a fake liquid bake
(particles PLY + level set/velocity VDB per frame) with VoxFX's own writers
(tests/blender/scrub.py), attaches them with the add-on's own ``attach_outputs`` and,
per loading mechanism, in a fresh process:

* scrub: ``scene.frame_set(f)`` for every frame plus reading the evaluated geometry of
  every output; resident memory (VmRSS) after the first frame, at the end, the most;
  milliseconds per frame change (median and mean);
* render: ``bpy.ops.render.render(animation=True)`` with Cycles (CPU, 16×16 px, 1 sample,
  motion blur) over the first N frames; memory after the first and the last frame.

Mechanisms: ``files`` = the node trees read each frame's file (Import PLY / Import VDB;
Blender keeps what it read up to Memory Cache Limit: the loading before issue 21);
``loader`` = VoxFX loads each frame into the objects' meshes (addon/frame_loader).
Bound (issue 21): growth ≤ two frames' files + 100 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run(args):
    """One mechanism, one process: print a JSON line of results."""
    from tools.package import load

    load()
    import bpy

    from tests.blender.helpers import voxfx_registered
    from tests.blender.scrub import attach_bakes, frame_bytes, rss_mb
    from voxfx.addon import frame_loader, node_setups
    from voxfx.addon.cache import BakeCache
    from voxfx.kernels.snow.domain import SnowDomain
    import numpy as np

    root = Path(args.cache)
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    frames = max(args.frames, args.liquid_frames)
    domain = SnowDomain.from_box((0, 0, 0), (10, 10, 4), 16, args.ground)
    snow = (BakeCache(root / "snow", "snow", kind="snow"), np.zeros(domain.ground_shape[::-1], np.float32), domain)
    liquid = BakeCache(root / "liquid", "liquid", kind="flip")
    result = {"mechanism": args.run, "bpy": bpy.app.version_string,
              "frame_mb": max(frame_bytes(root / "snow", f) + frame_bytes(root / "liquid", f) for f in (1, 2)) / 2**20}
    with voxfx_registered():
        objects = attach_bakes(snow, liquid, args.liquid_frames)
        if args.run == "files":  # the loading before issue 21: the node trees read the files
            for obj in objects.values():
                del obj.data[frame_loader.SOURCE]
                node_setups.set_input(obj.modifiers["VoxFX"], frame_loader.LOADED_INPUT, False)
                if obj.name != "Snow Cover":
                    obj.data.clear_geometry()
        scene.frame_set(1)
        start = rss_mb()
        most, times = start, []
        for frame in range(1, frames + 1):
            t0 = time.perf_counter()
            scene.frame_set(frame)
            depsgraph = bpy.context.evaluated_depsgraph_get()
            for obj in objects.values():
                obj.evaluated_get(depsgraph).evaluated_geometry()
            times.append(1000 * (time.perf_counter() - t0))
            most = max(most, rss_mb())
        result.update(scrub_frames=frames, scrub_start=start, scrub_end=rss_mb(), scrub_most=most,
                      ms_median=statistics.median(times[1:]), ms_mean=statistics.fmean(times[1:]))
        if args.render:
            memory = []
            bpy.app.handlers.render_post.append(lambda *_: memory.append(rss_mb()))
            cam = bpy.data.objects.new("cam", bpy.data.cameras.new("cam"))
            scene.collection.objects.link(cam)
            scene.camera, cam.location = cam, (5, 5, 20)
            scene.render.engine = "CYCLES"
            scene.cycles.samples, scene.cycles.device = 1, "CPU"
            scene.render.resolution_x = scene.render.resolution_y = 16
            scene.render.use_motion_blur = True
            scene.render.filepath = str(root / "render" / "f_")
            scene.frame_start, scene.frame_end = 1, args.render
            t0 = time.perf_counter()
            bpy.ops.render.render(animation=True)
            result.update(render_frames=args.render, render_first=memory[0], render_last=memory[-1],
                          render_most=max(memory), render_s_per_frame=(time.perf_counter() - t0) / args.render)
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)  # skip interpreter teardown (the bpy 4.5 module can hang in it)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flakes", type=int, default=200_000)
    ap.add_argument("--frames", type=int, default=500, help="snow frames")
    ap.add_argument("--ground", type=int, default=256, help="snow depth grid vertices per side")
    ap.add_argument("--particles", type=int, default=100_000)
    ap.add_argument("--liquid-res", type=int, default=48)
    ap.add_argument("--liquid-frames", type=int, default=300)
    ap.add_argument("--render", type=int, default=40, help="frames to render (0: none)")
    ap.add_argument("--mechanisms", default="files,loader")
    ap.add_argument("--python", default=sys.executable, help="the Python with bpy to measure")
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        return run(args)

    from tools.package import load

    load()
    with tempfile.TemporaryDirectory(prefix="voxfx-scrub-") as cache:
        write = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tools.package import load; load(); "
                 "from tests.blender.scrub import write_snow_bake, write_liquid_bake; "
                 f"write_snow_bake({cache!r} + '/snow', {args.frames}, {args.flakes}, ground={args.ground}); "
                 f"write_liquid_bake({cache!r} + '/liquid', {args.liquid_frames}, {args.particles}, "
                 f"resolution={args.liquid_res}); import os; os._exit(0)")
        t0 = time.perf_counter()
        subprocess.run([args.python, "-c", write], check=True)
        print(f"wrote the bakes in {time.perf_counter() - t0:.0f} s", flush=True)
        rows = []
        for mechanism in args.mechanisms.split(","):
            out = subprocess.run([args.python, __file__, "--run", mechanism, "--cache", cache, "--frames",
                                  str(args.frames), "--liquid-frames", str(args.liquid_frames), "--ground",
                                  str(args.ground), "--render", str(args.render)],
                                 capture_output=True, text=True)
            line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"{mechanism} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
            rows.append(json.loads(line[7:]))
    bound = 2 * rows[0]["frame_mb"] + 100
    print(f"\nbpy {rows[0]['bpy']}; snow {args.flakes:,} flakes × {args.frames} frames (ground {args.ground}²), "
          f"liquid res {args.liquid_res} × {args.liquid_frames} frames ({args.particles:,} particles); "
          f"one frame's files {rows[0]['frame_mb']:.1f} MB; bound +{bound:.0f} MB\n")
    print("mechanism | scrub frames | RSS first → last (most) MB | growth MB | ms per frame (median / mean) | "
          "render frames | RSS first → last MB | render growth MB | s per rendered frame")
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    for r in rows:
        render = ("| — | — | — | —" if "render_frames" not in r else
                  f"| {r['render_frames']} | {r['render_first']:.0f} → {r['render_last']:.0f} | "
                  f"{r['render_most'] - r['render_first']:+.0f} | {r['render_s_per_frame']:.2f}")
        print(f"{r['mechanism']} | {r['scrub_frames']} | {r['scrub_start']:.0f} → {r['scrub_end']:.0f} "
              f"({r['scrub_most']:.0f}) | {r['scrub_most'] - r['scrub_start']:+.0f} | "
              f"{r['ms_median']:.1f} / {r['ms_mean']:.1f} {render}")


if __name__ == "__main__":
    main()
