"""tests/data/blender_primitives.npz holds what this Blender makes of its default
primitives (``tools/make_blender_primitives.py``), so the exact-solid tests that read it
(tests/unit/test_voxelize_exact_solid.py, and the GPU tests where bpy is absent) test
the geometry artists get."""

from pathlib import Path

import numpy as np
import pytest

from tools.make_blender_primitives import PRIMITIVES, primitive_triangles

DATA = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def oriented(vertices, triangles):
    """The triangles as a sorted list of corner coordinates, each rotated to start at its
    smallest corner: the same geometry with the same windings, whatever the vertex and
    triangle order (which varies between Blender versions and sessions; voxels do not
    depend on it)."""
    corners = np.asarray(vertices)[np.asarray(triangles)].tolist()
    out = []
    for tri in corners:
        k = min(range(3), key=lambda i: tri[i])
        out.append(tuple(map(tuple, tri[k:] + tri[:k])))
    return sorted(out)


@pytest.mark.parametrize("name", PRIMITIVES)
def test_stored_primitive_is_what_blender_makes(name):
    v, t = primitive_triangles(name)
    assert oriented(v, t) == oriented(DATA[f"{name}_vertices"], DATA[f"{name}_triangles"])
