"""The solid fill is exact on Blender's default primitives (issue 22 §2): every voxel
centre strictly inside or outside the closed mesh is classified as the winding number
says (``exact_oracle.solid_voxels``: ray parity in rationals with simulation of
simplicity), on the add-on's own grid (``GridSpec.around(lo, hi, longest side /
Resolution)``). Before edge endpoints were ordered canonically, a centre within rounding
of a shared edge counted for both triangles or neither: Ico Sphere at Resolution 29 had
27 wrong voxels in 3 rows, the Torus at 25, 35, 43, 45 had 45, 8, 12 and 10.

The full sweep (the six closed primitives × Resolution 16–96: 0 differences, measured)
runs with VOXFX_FULL_SWEEP=1 (about 4 minutes); CI runs each at a spread of resolutions
plus the cases that failed."""

import os
from pathlib import Path

import numpy as np
import pytest

from tests.unit import exact_oracle as exact
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize

DATA = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")
# Suzanne (monkey) is left out: it is open (42 boundary edges round the eyes) and its eyes
# pierce the head (winding number 2 there), so no parity fill is its winding-number solid;
# where a ray runs exactly along a boundary edge, the fill's top-left rule and the
# oracle's perturbation legitimately differ (19 voxels at Resolution 25, 2 at 75, where
# the generalized winding number says "inside" for all of them). Fill Holes (the vote)
# is the mode for such meshes.
PRIMITIVES = ("cube", "uv_sphere", "ico_sphere", "cylinder", "cone", "torus")
FAILED_BEFORE = [("ico_sphere", 29), ("torus", 25), ("torus", 35), ("torus", 43), ("torus", 45)]
SPREAD = (16, 23, 31, 40, 57, 64, 77, 96)
if os.environ.get("VOXFX_FULL_SWEEP"):
    CASES = [(p, r) for p in PRIMITIVES for r in range(16, 97)]
else:
    CASES = sorted(set([(p, r) for p in PRIMITIVES for r in SPREAD] + FAILED_BEFORE))


def addon_grid(v, resolution):
    lo, hi = v.min(axis=0).astype(np.float64), v.max(axis=0).astype(np.float64)
    return GridSpec.around(lo, hi, float(np.max(hi - lo)) / resolution)


def differences(v, t, spec, mode="solid"):
    got = bitgrid.unpack(voxelize(v, t, spec, mode, xp=np).bits, spec.shape[0]).astype(bool)
    inside, on_surface = exact.solid_voxels(exact.voxel_units(v, spec.origin, spec.voxel_size), t, spec.shape)
    return int(((got != inside) & ~on_surface).sum())


@pytest.mark.parametrize("name,resolution", CASES, ids=[f"{p}-{r}" for p, r in CASES])
def test_primitive_solid_is_the_winding_number_solid(name, resolution):
    v, t = DATA[f"{name}_vertices"], DATA[f"{name}_triangles"]
    assert differences(v, t, addon_grid(v, resolution)) == 0


def test_uv_sphere_centred_on_a_voxel_centre():
    """Poles and rings on voxel-centre columns: the worst case for ties. Before the fix
    these grids had 1–267 wrong voxels (n = 36: 19, 46: 166, 54: 267, 58: 253), whole
    rows far from the surface. What may remain is a centre within 1e-9 voxel of a vertex
    (at n = 62 and 66 a pole sits 4e-16 voxel from a centre: whether the centre is inside
    turns on the rounding of a crossing with a fan triangle almost parallel to the ray;
    an exact orientation predicate would decide it, see the README's known limits)."""
    v, t = DATA["uv_sphere_vertices"], DATA["uv_sphere_triangles"]
    for n in (24, 28, 36, 46, 54, 58, 60, 62, 66):
        h = 2.0 / n
        spec = GridSpec((-(n // 2 + 0.5) * h,) * 3, h, (n + 2,) * 3)  # the origin is a voxel centre
        got = bitgrid.unpack(voxelize(v, t, spec, "solid", xp=np).bits, spec.shape[0]).astype(bool)
        pv = exact.voxel_units(v, spec.origin, spec.voxel_size)
        inside, on_surface = exact.solid_voxels(pv, t, spec.shape)
        k, j, i = np.nonzero((got != inside) & ~on_surface)
        centres = np.stack([i, j, k], axis=1) + 0.5
        gap = np.abs(centres[:, None, :] - pv[None, :, :]).max(axis=2).min(axis=1) if len(centres) else []
        assert len(centres) <= 1 and all(g < 1e-9 for g in gap), (n, len(centres), gap)


def test_many_batches_give_the_one_batch_solid(monkeypatch):
    """The column crossings are processed in batches; every batch must see the same edge
    set-up (a name clash once overwrote it after the first batch)."""
    from voxfx.kernels.voxelize import surface

    v, t = DATA["torus_vertices"], DATA["torus_triangles"]
    spec = addon_grid(v, 40)
    whole = voxelize(v, t, spec, "solid", xp=np).bits
    monkeypatch.setattr(surface, "CHUNK_ITEMS", 97)
    assert np.array_equal(voxelize(v, t, spec, "solid", xp=np).bits, whole)
