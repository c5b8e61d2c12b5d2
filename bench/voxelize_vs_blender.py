"""CPU comparison (issue 3): VoxFX's NumPy voxelizer vs Blender's own Geometry Nodes
"Mesh to Volume" (interior fog volume ~ our solid mode) and "Mesh to SDF Grid" (narrow
band ~ our surface mode) at the same voxel size, on the Stanford bunny.

    .venv/bin/python bench/voxelize_vs_blender.py

Blender's time is a depsgraph evaluation of an object whose only modifier is the node;
the evaluation is forced by changing the voxel size by a tiny amount each repeat.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
import bpy  # noqa: E402

from tests.meshes import bunny  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402
from voxfx.kernels.voxelize import voxelize  # noqa: E402

REPEATS = 3


def bunny_object(v, t):
    mesh = bpy.data.meshes.new("bunny")
    mesh.vertices.add(len(v))
    mesh.vertices.foreach_set("co", v.ravel())
    mesh.loops.add(t.size)
    mesh.loops.foreach_set("vertex_index", t.ravel())
    mesh.polygons.add(len(t))
    mesh.polygons.foreach_set("loop_start", np.arange(0, t.size, 3))
    mesh.update()
    obj = bpy.data.objects.new("bunny", mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def node_modifier(obj, node_type):
    group = bpy.data.node_groups.new(node_type, "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    gin = group.nodes.new("NodeGroupInput")
    gout = group.nodes.new("NodeGroupOutput")
    node = group.nodes.new(node_type)
    group.links.new(gin.outputs[0], node.inputs["Mesh"])
    out = node.outputs[0]
    if node_type == "GeometryNodeMeshToSDFGrid":  # a grid, not a volume: wrap it into one
        store = group.nodes.new("GeometryNodeGridToMesh")
        group.links.new(out, store.inputs[0])
        out = store.outputs[0]
    group.links.new(out, gout.inputs[0])
    mod = obj.modifiers.new(node_type, "NODES")
    mod.node_group = group
    return node, mod


def time_blender(obj, node_type, voxel_size):
    node, mod = node_modifier(obj, node_type)
    times = []
    for r in range(REPEATS + 1):
        node.inputs["Voxel Size"].default_value = voxel_size * (1 + 1e-6 * r)
        t0 = time.perf_counter()
        dg = bpy.context.evaluated_depsgraph_get()
        dg.update()
        obj.evaluated_get(dg).data  # noqa: B018 - forces the evaluation
        if r:
            times.append(1e3 * (time.perf_counter() - t0))
    obj.modifiers.remove(mod)
    return statistics.median(times)


def time_voxfx(v, t, spec, mode):
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        voxelize(v, t, spec, mode, xp=np)
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def main():
    mesh, why = bunny()
    if mesh is None:
        sys.exit(f"no bunny: {why}")
    v, t = mesh
    bpy.ops.wm.read_homefile(use_empty=True)
    obj = bunny_object(v, t)
    lo, hi = v.min(axis=0), v.max(axis=0)
    print("res | voxel size | VoxFX solid (NumPy) ms | GN Mesh to Volume ms | VoxFX surface (NumPy) ms | "
          "GN Mesh to SDF Grid ms")
    print("--- | --- | --- | --- | --- | ---")
    for res in (64, 128, 256):
        vs = float((hi - lo).max()) / (res - 2)
        spec = GridSpec.around(lo, hi, vs)
        row = (f"{res}³", f"{vs:.4f}", f"{time_voxfx(v, t, spec, 'solid'):.0f}",
               f"{time_blender(obj, 'GeometryNodeMeshToVolume', vs):.0f}",
               f"{time_voxfx(v, t, spec, 'surface'):.0f}",
               f"{time_blender(obj, 'GeometryNodeMeshToSDFGrid', vs):.0f}")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
