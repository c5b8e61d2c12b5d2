"""The main job on an embedded default: build a small scene (Suzanne, a text object, a
curve), voxelize it into every output and save the result, all headless.

    python -m tools.demo --out out [--resolution 48]

Writes out/voxelize_demo.blend (point cloud, volume, block mesh), out/voxelize_demo.vox
and the VDB in out/voxfx_cache/. Uses the GPU when CUDA works, else the CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def build_scene(bpy):
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.mesh.primitive_monkey_add(location=(0, 0, 1))
    monkey = bpy.context.active_object
    bpy.ops.object.shade_smooth()
    mat = bpy.data.materials.new("Clay")
    mat.diffuse_color = (0.8, 0.35, 0.2, 1)
    monkey.data.materials.append(mat)
    bpy.ops.object.text_add(location=(-1.6, -1.2, 0))
    text = bpy.context.active_object
    text.data.body = "VoxFX"
    text.data.extrude = 0.08
    bpy.ops.curve.primitive_bezier_circle_add(radius=1.4, location=(0, 0, 1))
    ring = bpy.context.active_object  # no bevel: voxelized as a line
    for o in (monkey, text, ring):
        o.select_set(True)
    return [monkey, text, ring]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")
    ap.add_argument("--resolution", type=int, default=48)
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    import bpy

    from tools.package import load

    voxfx = load()
    bpy.context.preferences.filepaths.save_version = 0  # no .blend1 backups in out/
    build_scene(bpy)
    blend = out / "voxelize_demo.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    voxfx.register()
    try:
        s = bpy.context.scene.voxfx.voxelize
        s.resolution = args.resolution
        s.mode = "SOLID_SURFACE"
        s.output_points = s.output_volume = s.output_blocks = s.output_vox = True
        s.vox_path = "//voxelize_demo.vox"
        t0 = time.perf_counter()
        result = bpy.ops.voxfx.voxelize()
        seconds = time.perf_counter() - t0
        if result != {"FINISHED"}:
            print("demo: voxelize failed", file=sys.stderr)
            return 1
        bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    finally:
        voxfx.unregister()
    made = [o.name for o in bpy.data.collections["VoxFX Voxels"].objects]
    print(f"demo: voxelized in {seconds:.2f} s into {', '.join(made)}")
    print(f"demo: outputs in {out}:")
    for p in sorted(out.rglob("*")):
        if p.is_file():
            print(f"  {p.relative_to(out)}  ({p.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
