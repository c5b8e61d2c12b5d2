"""Benchmark: evaluated Blender geometry → world-space triangle arrays (addon/scene_io).

Target: a 1M-triangle mesh extracts in under 0.5 s on a 2-core CPU machine.

    .venv/bin/python bench/scene_io.py [--quads-per-side 708] [--repeats 7]

Grids are built directly with foreach_set (not timed). Rows: a plain ~1M-triangle grid
without colours, with a FLOAT_COLOR point and a BYTE_COLOR corner attribute, and a
quarter-size grid taken to ~1M triangles by a Subdivision Surface modifier (evaluated
mesh read without a copy). Depsgraph evaluation is timed on its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.package import load  # noqa: E402

load()

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from voxfx.addon import scene_io  # noqa: E402


def build_grid(name: str, quads_per_side: int):
    """A flat grid of n×n quads (2n² triangles) in the XY plane, 10 m wide."""
    n = quads_per_side
    side = np.linspace(-5.0, 5.0, n + 1, dtype=np.float32)
    x, y = np.meshgrid(side, side, indexing="xy")
    positions = np.stack([x.ravel(), y.ravel(), np.zeros(x.size, np.float32)], axis=1)

    row, col = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    first = (row * (n + 1) + col).ravel().astype(np.int32)
    quads = np.stack([first, first + 1, first + n + 2, first + n + 1], axis=1)

    mesh = bpy.data.meshes.new(name)
    mesh.vertices.add(len(positions))
    mesh.attributes["position"].data.foreach_set("vector", positions.ravel())
    mesh.loops.add(quads.size)
    mesh.polygons.add(len(quads))
    mesh.polygons.foreach_set("loop_start", np.arange(0, quads.size, 4, dtype=np.int32))
    mesh.attributes[".corner_vert"].data.foreach_set("value", quads.ravel())
    mesh.update(calc_edges=True)

    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def add_colors(mesh) -> None:
    """A FLOAT_COLOR point and a BYTE_COLOR corner attribute with varying values."""
    rng = np.random.default_rng(0)
    point = mesh.color_attributes.new("PointColor", "FLOAT_COLOR", "POINT")
    point.data.foreach_set("color", rng.random(len(point.data) * 4, dtype=np.float32))
    corner = mesh.color_attributes.new("CornerColor", "BYTE_COLOR", "CORNER")
    corner.data.foreach_set("color", rng.random(len(corner.data) * 4, dtype=np.float32))


def time_depsgraph(obj, repeats: int) -> float:
    """Median seconds to re-evaluate the view layer after the object's vertices moved.

    Blender defers work past depsgraph.update(): a last Subdivision modifier runs when
    the evaluated mesh is first read, triangulation when loop triangles are first read.
    Reading one loop triangle forces both, so they are counted here.
    """
    depsgraph = bpy.context.evaluated_depsgraph_get()
    positions = np.empty(len(obj.data.vertices) * 3, dtype=np.float32)
    obj.data.vertices.foreach_get("co", positions)
    times = []
    for _ in range(repeats):
        # Writing through vertices.co (not the attribute) tags the positions as changed,
        # as an edit or animation would, so cached triangles are rebuilt.
        obj.data.vertices.foreach_set("co", positions)
        obj.data.update()
        start = time.perf_counter()
        depsgraph.update()
        obj.evaluated_get(depsgraph).data.loop_triangles[0].loops[0]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_extract(obj, repeats: int, **options):
    depsgraph = bpy.context.evaluated_depsgraph_get()
    # One untimed run: deferred evaluation (Subdivision, triangulation) and first-touch
    # page faults belong to the depsgraph rows, not to extraction.
    soup = scene_io.extract_triangles([obj], depsgraph, **options)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        soup = scene_io.extract_triangles([obj], depsgraph, **options)
        times.append(time.perf_counter() - start)
    return statistics.median(times), soup


def print_row(label, seconds, soup) -> None:
    triangles, vertices = len(soup.triangles), len(soup.vertices)
    print(
        f"{label:<42} {triangles:>10,} {vertices:>10,} {seconds * 1e3:>9.1f} "
        f"{triangles / seconds / 1e6:>10.2f}"
    )


TARGET_SECONDS = 0.5  # per 1M triangles, without colours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quads-per-side", type=int, default=708, help="708: 1,002,528 tris")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per row (median)")
    args = parser.parse_args()

    bpy.ops.wm.read_homefile(use_empty=True)
    grid = build_grid("Grid", args.quads_per_side)
    add_colors(grid.data)
    colors = grid.data.color_attributes
    coarse = build_grid("CoarseGrid", args.quads_per_side // 2)
    coarse.modifiers.new("Subdivision", "SUBSURF").levels = 1

    print(f"Blender {bpy.app.version_string}, median of {args.repeats} runs\n")
    print(f"{'case':<42} {'triangles':>10} {'vertices':>10} {'time (ms)':>9} {'Mtri/s':>10}")
    plain_seconds, soup = time_extract(grid, args.repeats)
    print_row("grid, no colours", plain_seconds, soup)
    for label, name in [("FLOAT_COLOR point", "PointColor"), ("BYTE_COLOR corner", "CornerColor")]:
        colors.active_color = colors[name]
        seconds, soup_with_colors = time_extract(grid, args.repeats, with_colors=True)
        print_row(f"grid, {label} colours", seconds, soup_with_colors)
    print_row("coarse grid + Subdivision 1, no colours", *time_extract(coarse, args.repeats))

    print("\ndepsgraph re-evaluation + triangulation (not part of extract_triangles):")
    for label, obj in [("grid (no modifiers)", grid), ("coarse grid + Subdivision", coarse)]:
        print(f"  {label:<26} {time_depsgraph(obj, args.repeats) * 1e3:9.1f} ms")

    per_million = plain_seconds * 1e6 / len(soup.triangles)
    verdict = "meets" if per_million < TARGET_SECONDS else "MISSES"
    print(f"\n{per_million:.3f} s per 1M triangles: {verdict} the {TARGET_SECONDS} s target")


if __name__ == "__main__":
    main()
