"""Voxelizing in z-slabs (and in arbitrary boxes) gives the unsplit grid bit for bit
(issue 21 §6), in every mode, with and without the vote, on Blender's primitives, on
tie/sliver soups (unit and scaled grids) and on tilted meshes; the slabs' setup only
sees the triangles that reach them, and the vote's z parity is carried across slabs."""

from pathlib import Path

import numpy as np
import pytest

from tests import exact_soups, meshes
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.coverage import coverage
from voxfx.kernels.voxelize.slabs import (SplitMesh, slab_ranges, triangles_per_slab, voxelize_box,
                                          voxelize_slabs, voxelize_split)

DATA = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")
MODES = [("surface", False), ("thin", False), ("solid", False), ("solid+surface", False), ("solid", True),
         ("solid+surface", True)]
LAYERS = (1, 2, 3, 5, 8, 13)


def around(v, resolution):
    lo, hi = v.min(axis=0).astype(np.float64), v.max(axis=0).astype(np.float64)
    return GridSpec.around(lo, hi, float(np.max(hi - lo)) / resolution)


def primitive(name, resolution, tilt=None):
    v = DATA[f"{name}_vertices"].astype(np.float64)
    if tilt is not None:
        v = v @ meshes.rotation(*tilt).T
    return v.astype(np.float32), DATA[f"{name}_triangles"], around(v.astype(np.float32), resolution)


def soup_cases():
    for seed in (1, 2):
        v, t = exact_soups.soup(seed)
        yield f"soup{seed}-unit", v, t, exact_soups.UNIT
        yield f"soup{seed}-scaled", exact_soups.scaled(v), t, exact_soups.SCALED


def mesh_cases():
    yield "cube-19", *primitive("cube", 19)
    yield "cube-tilted-21", *primitive("cube", 21, (0.3, 0.5, 0.1))
    yield "uv_sphere-23", *primitive("uv_sphere", 23)
    yield "torus-25", *primitive("torus", 25, (0.9, 0.2, 0.0))  # a torus that failed before (issue 22 §2)
    yield "monkey-24", *primitive("monkey", 24)  # open, eyes piercing the head: the vote matters
    yield "cone-17", *primitive("cone", 17)
    yield from soup_cases()


CASES = list(mesh_cases())


@pytest.mark.parametrize("mode,vote", MODES, ids=lambda x: str(x))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_union_of_slabs_is_the_unsplit_grid(case, mode, vote):
    name, v, t, spec = case
    whole = voxelize(v, t, spec, mode, vote=vote, xp=np).bits
    assert whole.any() or name.startswith("soup")  # soups are open: their votes may be empty
    for layers in LAYERS + (spec.shape[2],):
        split = voxelize_split(v, t, spec, mode, layers, vote=vote)
        diff = np.flatnonzero((split != whole).any(axis=(1, 2)))
        assert not len(diff), f"{layers} layers: rows {diff.tolist()} differ"


@pytest.mark.parametrize("mode,vote", [("surface", False), ("solid", False), ("solid+surface", True)])
def test_any_box_is_that_box_of_the_unsplit_grid(mode, vote):
    """Boxes cut along x and y too (bricks of a sparse voxelizer), the vote's z parity
    computed from the triangles below (no carry)."""
    _, v, t, spec = CASES[3]
    whole = voxelize(v, t, spec, mode, vote=vote, xp=np).dense()
    mesh = SplitMesh(v, t, spec)
    rng = np.random.default_rng(5)
    nx, ny, nz = spec.shape
    for _ in range(12):
        lo = rng.integers(0, (nx - 1, ny - 1, nz - 1))
        hi = lo + 1 + rng.integers(0, (nx, ny, nz) - lo)
        bits = voxelize_box(mesh, lo, hi, mode, vote=vote)
        from voxfx.kernels.grid import bitgrid

        got = bitgrid.unpack(bits, int(hi[0] - lo[0]))
        assert np.array_equal(got, whole[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]), (lo, hi)


def test_slabs_are_yielded_bottom_to_top_and_cover_the_grid():
    assert slab_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    _, v, t, spec = CASES[2]
    mesh = SplitMesh(v, t, spec)
    seen = [(k0, k1) for k0, k1, _ in voxelize_slabs(mesh, "surface", 4)]
    assert seen == slab_ranges(spec.shape[2], 4)


def test_a_slab_sets_up_only_the_triangles_that_reach_it():
    _, v, t, spec = CASES[2]  # the UV sphere: 960 triangles spread over z
    mesh = SplitMesh(v, t, spec)
    nx, ny, nz = spec.shape
    per_row = [len(mesh.for_surface(np.array([0, 0, k]), np.array([nx, ny, k + 1]))) for k in range(nz)]
    assert triangles_per_slab(mesh, 1) == max(per_row) < len(t) // 3
    assert triangles_per_slab(mesh, nz) == len(t)
    for k, n in enumerate(per_row):  # every triangle of the row, and only those
        v3 = mesh.pv[t][:, :, 2]
        assert n == int(((np.floor(v3.min(1)) - 1 < k + 1) & (np.ceil(v3.max(1)) + 1 >= k)).sum())


def test_a_crossing_rounded_far_from_its_triangle_is_given_to_the_slab_it_lands_in():
    """A long triangle almost parallel to z: its crossing along z rounds wherever the
    division by a tiny n_z puts it, and the unsplit vote toggles there; the slab that
    holds that row must see the triangle too."""
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (8, 8, 40))
    v = np.array([[3.5, 3.5, 2.0], [3.5 + 1e-13, 3.6, 38.0], [3.6, 3.5 + 2e-13, 20.0],
                  [0.2, 0.2, 0.2], [7.8, 0.2, 0.2], [0.2, 7.8, 39.8]])
    t = np.array([[0, 1, 2], [3, 4, 5]])
    for mode in ("solid", "solid+surface"):
        whole = voxelize(v, t, spec, mode, vote=True, xp=np).bits
        for layers in (1, 3, 7):
            assert np.array_equal(voxelize_split(v, t, spec, mode, layers, vote=True), whole)


def test_coverage_does_not_depend_on_its_slab_size():
    v, t, spec = primitive("torus", 13, (0.4, 0.1, 0.0))
    ref = coverage(v, t, spec, xp=np)
    for slab_bytes in (1, 5000, 40000):
        assert np.array_equal(coverage(v, t, spec, xp=np, slab_bytes=slab_bytes), ref)
    ref_vote = coverage(v, t, spec, xp=np, vote=True)
    assert np.array_equal(coverage(v, t, spec, xp=np, vote=True, slab_bytes=1), ref_vote)


def test_owners_of_a_slab_are_those_of_the_unsplit_grid():
    from voxfx.kernels.voxelize.slabs import owners_box

    v, t, spec = primitive("monkey", 20)
    grid = voxelize(v, t, spec, "solid+surface", vote=True, xp=np)
    whole = owner_triangles(v, t, spec, grid.bits, xp=np)
    mesh = SplitMesh(v, t, spec)
    parts = []
    nx, ny, _ = spec.shape
    for k0, k1 in slab_ranges(spec.shape[2], 3):
        parts.append(owners_box(mesh, (0, 0, k0), (nx, ny, k1), grid.bits[k0:k1]))
    assert np.array_equal(np.concatenate(parts), whole)
