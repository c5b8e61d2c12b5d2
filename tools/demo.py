"""The three effects end to end, headless: build the demo scenes (demo_blends/build.py),
bake each at a small size and render one still per effect with Cycles on the CPU.

    python -m tools.demo --out out [--size tiny|small] [--resolution 48]

Writes out/voxelize.blend (point cloud, volume, block mesh; plus out/voxelize.vox),
out/snow.blend and out/flip.blend (baked), the caches in out/voxfx_cache/<blend>/{voxelize,snow,
liquid}/ and the stills out/voxelize.png, out/snow.png, out/flip.png. Bakes on the GPU
when CUDA works, else on the CPU (VOXFX_BACKEND=cpu forces the CPU).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Bake and render sizes. "small" (default) finishes in a few minutes on a 2-core CPU;
# "tiny" is for the test.
SIZES = {
    "tiny": dict(still=(160, 90), samples=4, voxels=16, snow_frames=4, wind=12, ground=32, flakes=4000,
                 flip_frames=4, flip_resolution=16),
    "small": dict(still=(640, 360), samples=16, voxels=96, snow_frames=24, wind=24, ground=128, flakes=200_000,
                  flip_frames=24, flip_resolution=40),
}


def render_still(bpy, path: Path, size) -> float:
    """One Cycles still on the CPU: low resolution, few samples, denoised when possible."""
    scene = bpy.context.scene
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = size["samples"]
    scene.cycles.use_adaptive_sampling = False
    # Glass water needs light paths through two surfaces and back: 4 bounces left the
    # liquid black where rays ran out inside it (measured, issue 23); Cycles' default is 12.
    scene.cycles.max_bounces = 12
    scene.cycles.transmission_bounces = 12
    scene.cycles.use_denoising = True
    scene.cycles.denoiser = "OPENIMAGEDENOISE"
    scene.render.resolution_x, scene.render.resolution_y = size["still"]
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGB"
    scene.render.image_settings.compression = 90
    scene.render.filepath = str(path)
    t0 = time.perf_counter()
    try:
        bpy.ops.render.render(write_still=True)
    except RuntimeError:  # a build without OpenImageDenoise: render noisy
        scene.cycles.use_denoising = False
        bpy.ops.render.render(write_still=True)
    return time.perf_counter() - t0


def fresh(out: Path, blend: str) -> None:
    """A clean bake (the add-on resumes a matching cache; the demo times a full bake).
    Each .blend bakes into ``voxfx_cache/<its name>/`` (the default Cache Folder)."""
    shutil.rmtree(out / "voxfx_cache" / blend, ignore_errors=True)


def bake_voxelize(bpy, build, out: Path, size, resolution: int) -> str:
    fresh(out, "voxelize")
    blend = build.build("voxelize", out)
    s = bpy.context.scene.voxfx.voxelize
    s.resolution = resolution
    s.mode = "SOLID_SURFACE"
    s.output_points = s.output_volume = s.output_blocks = s.output_vox = True
    s.vox_path = "//voxelize.vox"
    sources = list(bpy.context.selected_objects)
    if bpy.ops.voxfx.voxelize() != {"FINISHED"}:
        raise RuntimeError("voxelize failed")
    made = list(bpy.data.collections["VoxFX Voxels"].objects)
    for o in sources:  # the still shows the block meshes
        o.hide_render = True
    for o in made:
        o.hide_render = not o.name.endswith("_blocks")
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    return "into " + ", ".join(o.name for o in made)


def bake_snow(bpy, build, out: Path, size) -> str:
    fresh(out, "snow")
    blend = build.build("snow", out, frames=size["snow_frames"])
    scene = bpy.context.scene
    s = scene.voxfx.snow
    s.wind_resolution, s.ground_resolution, s.flake_count = size["wind"], size["ground"], size["flakes"]
    if bpy.ops.voxfx.snow_bake() != {"FINISHED"}:
        raise RuntimeError("snow bake failed")
    scene.frame_set(scene.frame_end)
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    return f"frames {scene.frame_start}-{scene.frame_end}, {s.flake_count:,} flakes"


def bake_flip(bpy, build, out: Path, size) -> str:
    fresh(out, "flip")
    blend = build.build("flip", out, frames=size["flip_frames"])
    scene = bpy.context.scene
    f = scene.voxfx.flip
    f.resolution = size["flip_resolution"]
    if bpy.ops.voxfx.flip_bake() != {"FINISHED"}:
        raise RuntimeError("liquid bake failed")
    # The surface keeps the add-on's own clear-water material (materials.liquid): the demo
    # used to repaint it deep blue (base colour 0.05, 0.3, 0.75 under transmission 1), which
    # is what made the README's water read as navy glass (issue 23).
    bpy.data.objects["Liquid Particles"].hide_render = True  # the surface shows the liquid
    scene.frame_set(scene.frame_end)
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    return f"frames {scene.frame_start}-{scene.frame_end} at resolution {f.resolution}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--size", choices=sorted(SIZES), default="small",
                    help="bake and render size (tiny: for tests; small: a few minutes on a laptop CPU)")
    ap.add_argument("--resolution", type=int, default=None, help="voxelize resolution (default by --size)")
    ap.add_argument("--only", choices=["voxelize", "snow", "flip"], action="append",
                    help="run only these effects (repeatable)")
    args = ap.parse_args(argv)
    size = SIZES[args.size]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    import bpy

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from demo_blends import build
    from tools.package import load

    voxfx = load()  # the checkout as the package "voxfx"
    from voxfx.kernels import backend

    bpy.context.preferences.filepaths.save_version = 0  # no .blend1 backups in out/
    print(f"demo: size {args.size}, baking on {backend.device_info().name}")
    jobs = {
        "voxelize": lambda: bake_voxelize(bpy, build, out, size, args.resolution or size["voxels"]),
        "snow": lambda: bake_snow(bpy, build, out, size),
        "flip": lambda: bake_flip(bpy, build, out, size),
    }
    total = time.perf_counter()
    voxfx.register()
    try:
        for name in args.only or jobs:
            t0 = time.perf_counter()
            try:
                what = jobs[name]()
            except RuntimeError as e:
                print(f"demo: {name} failed: {e}", file=sys.stderr)
                return 1
            baked = time.perf_counter() - t0
            rendered = render_still(bpy, out / f"{name}.png", size)
            print(f"demo: {name} baked in {baked:.1f} s ({what}), still rendered in {rendered:.1f} s")
    finally:
        voxfx.unregister()
    print(f"demo: done in {time.perf_counter() - total:.1f} s; outputs in {out}:")
    for p in sorted(out.iterdir()):
        if p.is_file():
            print(f"  {p.name}  ({p.stat().st_size:,} bytes)")
    cache = out / "voxfx_cache"
    for folder in sorted(p for p in cache.glob("*/*") if p.is_dir()) if cache.is_dir() else []:
        files = [p for p in folder.iterdir() if p.is_file()]
        kinds = sorted({p.suffix for p in files})
        print(f"  {folder.relative_to(out)}/  ({len(files)} files: {' '.join(kinds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
