"""Write tests/data/blender_primitives.npz: the world-space triangles of Blender's default
primitives (cube, UV sphere, ico sphere, cylinder, cone, torus, monkey) at the origin, as
the add-on extracts them (scene_io.extract_triangles: float32 vertices, int32 corners).

    python tools/make_blender_primitives.py        # needs bpy (Blender as a Python module)

tests/blender/test_voxelize_primitives.py checks that the file still matches what bpy
makes; the GPU tests read it where bpy is not installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "blender_primitives.npz"
PRIMITIVES = ("cube", "uv_sphere", "ico_sphere", "cylinder", "cone", "torus", "monkey")


def primitive_triangles(name):
    """(vertices, triangles) of one default primitive added at the origin of an empty scene."""
    import bpy

    from voxfx.addon import scene_io

    bpy.ops.wm.read_homefile(use_empty=True)
    getattr(bpy.ops.mesh, f"primitive_{name}_add")()
    obj = bpy.context.active_object
    soup = scene_io.extract_triangles([obj], bpy.context.evaluated_depsgraph_get())
    return np.asarray(soup.vertices, dtype=np.float32), np.asarray(soup.triangles, dtype=np.int32)


def all_primitives():
    return {name: primitive_triangles(name) for name in PRIMITIVES}


def main():
    sys.path.insert(0, str(ROOT))
    from tools.package import load

    load()
    arrays = {}
    for name, (v, t) in all_primitives().items():
        arrays[f"{name}_vertices"], arrays[f"{name}_triangles"] = v, t
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
