"""Coverage factors (seed 004 §5.5) and per-voxel owner triangles, against oracles."""

import numpy as np
import pytest

from tests.meshes import rotation, torus, uv_sphere, winding_inside_lattice
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import fill_along_rows, owner_triangles
from voxfx.kernels.voxelize.coverage import coverage

from .sat_oracle import sat_overlap_pairs


def test_coverage_equals_winding_number_fraction_of_sub_voxel_centres():
    v, t = torus(0.8, 0.3, 32, 16)
    v = v @ rotation(0.3, 0.2, 0.1).T
    spec = GridSpec.around((-1.2, -1.2, -0.5), (1.2, 1.2, 0.5), 0.2)
    cov = coverage(v, t, spec, xp=np, slab_bytes=4096)  # tiny slabs: several passes
    nx, ny, nz = spec.shape
    fine = winding_inside_lattice(np.asarray(spec.origin) + spec.voxel_size / 8, spec.voxel_size / 4,
                                  (4 * nx, 4 * ny, 4 * nz), v, t)  # 4³ sub-voxel centres a voxel
    inside = fine.reshape(nx, 4, ny, 4, nz, 4).mean(axis=(1, 3, 5)).transpose(2, 1, 0)
    assert np.allclose(cov, inside, atol=1 / 64 + 1e-9)  # a sample exactly on the surface may differ
    assert (cov == inside).mean() > 0.99
    assert 0 < cov.min() + 1 and cov.max() == 1.0


def test_coverage_volume_converges_to_the_mesh_volume():
    v, t = uv_sphere(1.0, 96, 48)
    tri = v[t].astype(np.float64)
    exact = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    spec = GridSpec.around((-1, -1, -1), (1, 1, 1), 0.125)
    vol = coverage(v, t, spec, xp=np).sum() * spec.voxel_size ** 3
    assert vol == pytest.approx(exact, rel=2e-3)


def brute_force_owner(pv, t, ijk):
    """Smallest triangle index whose closed triangle touches each voxel (SAT)."""
    best = np.full(len(ijk), np.iinfo(np.int32).max)
    tri = pv[t]
    for idx in range(len(t)):  # small meshes only
        hit = sat_overlap_pairs(np.broadcast_to(tri[idx], (len(ijk), 3, 3)), ijk.astype(np.float64))
        best[hit & (best == np.iinfo(np.int32).max)] = idx
    return best


def test_owners_of_surface_voxels_are_the_smallest_touching_triangle():
    rng = np.random.default_rng(5)
    v = rng.uniform(0, 10, size=(60, 3))
    t = np.arange(60).reshape(20, 3)
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (10, 10, 10))
    g = voxelize(v, t, spec, "surface", xp=np)
    owner = owner_triangles(v, t, spec, g.bits, xp=np)
    assert np.array_equal(owner, brute_force_owner(v, t, g.coordinates()))


def test_interior_voxels_take_the_owner_of_the_surface_before_them_in_x():
    v, t = uv_sphere(5.0, 24, 12)
    v = v + 8.3
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (17, 17, 17))
    g = voxelize(v, t, spec, "solid+surface", xp=np)
    ijk = g.coordinates()
    owner = owner_triangles(v, t, spec, g.bits, xp=np)
    assert (owner >= 0).all()
    surface = set(map(tuple, voxelize(v, t, spec, "surface", xp=np).coordinates()))
    for n, (i, j, k) in enumerate(ijk):
        if (i, j, k) in surface:
            continue
        left = [m for m in range(n - 1, -1, -1) if tuple(ijk[m][1:]) == (j, k) and tuple(ijk[m]) in surface]
        assert left and owner[n] == owner[left[0]]


def test_fill_along_rows_prev_then_next_then_none():
    M = np.iinfo(np.int32).max
    owner = np.array([M, 4, M, M, 7, M, M])
    row = np.array([0, 0, 0, 1, 1, 1, 2])
    assert fill_along_rows(owner, row).tolist() == [4, 4, 4, 7, 7, 7, -1]
