"""The unsplit Volume guard's parts (issue 21 §6, bench/RESULTS.md "unsplit solid Volume"):
a solid's density is constant inside, so OpenVDB keeps leaves only where the surface
passes; the estimate counts the dense arrays the job holds and the surface's leaves, not
16 B per set voxel (which made it 2.9× the measured growth at 512³)."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.grid import bitgrid
from voxfx.kernels.voxelize.guard import BASE_BYTES, VDB_PER_GRID_VOXEL, VDB_PER_VOXEL, MemoryGuard
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.split_plan import LEAVES_PER_AREA, VDB_LEAF_BYTES, triangle_area


def cube_soup():
    v, t = box((0, 0, 0), (1, 1, 1))
    return SimpleNamespace(vertices=v, triangles=t, corner_colors=None, bounds=(v.min(0), v.max(0)))


def guard_for(mode, outputs, resolution):
    soup = cube_soup()
    request = Request(mode=mode, resolution=resolution, outputs=set(outputs))
    guard = MemoryGuard(soup, None, request, False, *soup.bounds, usable=1 << 50)
    return guard, guard.spec_at(resolution)


def test_triangle_area_sums_the_cube_faces():
    v, t = box((0, 0, 0), (2, 1, 1))
    assert triangle_area(v, t) == pytest.approx(2 * (2 + 2 + 1))


@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_a_solid_volume_counts_its_dense_arrays_and_the_surface_leaves(mode):
    guard, spec = guard_for(mode, {"volume"}, 512)
    G, N = spec.voxel_count, 512 ** 3
    est = guard.estimate(spec, voxels=N)
    area = 6 / spec.voxel_size ** 2  # the unit cube's faces in voxel units²
    leaves = int(VDB_LEAF_BYTES * (LEAVES_PER_AREA * area + 12))
    # the coverage kept as the density (4 B), write_vdb's copies (5 B) and the surface's leaves
    assert est["volume"] == 4 * G + VDB_PER_GRID_VOXEL * G + leaves
    assert leaves < 0.1 * VDB_PER_VOXEL * N  # the old count: every set voxel a leaf voxel
    # the density and its (x, y, z) copy are alive together: 8 B a voxel is the floor,
    # and the bench's 1.5× rule holds against it
    floor = 8 * G
    assert floor <= est["total"] <= 1.5 * floor
    assert est["total"] == BASE_BYTES + bitgrid.nbytes(spec.shape) + max(
        v for k, v in est.items() if k not in ("G", "N", "F", "total"))


def test_a_surface_volume_still_counts_every_set_voxel():
    guard, spec = guard_for("surface", {"volume"}, 256)
    G, N = spec.voxel_count, 6 * 256 ** 2
    est = guard.estimate(spec, voxels=N)
    assert est["volume"] == 4 * G + VDB_PER_GRID_VOXEL * G + VDB_PER_VOXEL * N


def test_the_tree_is_never_counted_above_the_set_voxels():
    guard, spec = guard_for("solid+surface", {"volume"}, 512)
    small = guard.estimate(spec, voxels=1000)  # a few voxels: fewer than the surface's leaves
    assert small["volume"] == 4 * spec.voxel_count + VDB_PER_GRID_VOXEL * spec.voxel_count + VDB_PER_VOXEL * 1000
    assert np.isfinite(small["total"])
