"""Voxelizer CPU reference against independent oracles (seed 004 §3–4)."""

import numpy as np
import pytest

from tests.meshes import bunny, distance_to_mesh, rotation, torus, uv_sphere, winding_inside, winding_inside_lattice
from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.triangles import to_voxel_units

from .sat_oracle import brute_force_surface, candidate_surface


def unit_spec(shape):
    """Voxel units = world units: origin 0, voxel size 1."""
    return GridSpec((0.0, 0.0, 0.0), 1.0, shape)


def cpu(vertices, triangles, spec, mode, **kw):
    return voxelize(vertices, triangles, spec, mode, xp=np, **kw).dense()


def soup(rng, n, lo, hi, quantum=None):
    v = rng.uniform(lo, hi, size=(3 * n, 3))
    if quantum:
        v = np.round(v / quantum) * quantum
    return v, np.arange(3 * n).reshape(n, 3)


@pytest.mark.parametrize("seed", range(4))
def test_conservative_surface_matches_sat_oracle_on_random_soups(seed):
    rng = np.random.default_rng(seed)
    shape = (21, 17, 13)
    v, t = soup(rng, 25, -2.0, 23.0)
    assert np.array_equal(cpu(v, t, unit_spec(shape), "surface"), brute_force_surface(v, t, shape))


@pytest.mark.parametrize("quantum", [1.0, 0.5, 0.25])
def test_surface_matches_oracle_on_grid_aligned_and_axis_aligned_triangles(quantum):
    """Vertices on voxel boundaries make every touching case an exact tie."""
    rng = np.random.default_rng(int(4 / quantum))
    shape = (12, 12, 12)
    v, t = soup(rng, 40, -1.0, 13.0, quantum)
    v[:20 * 3, 2] = np.repeat(v[:20 * 3:3, 2], 3)  # half of them parallel to the xy plane
    v[20 * 3:30 * 3, 0] = np.repeat(v[20 * 3:30 * 3:3, 0], 3)  # some parallel to yz
    assert np.array_equal(cpu(v, t, unit_spec(shape), "surface"), brute_force_surface(v, t, shape))


def test_degenerate_triangles_give_the_conservative_cover_of_segments_and_points():
    rng = np.random.default_rng(9)
    shape = (12, 12, 12)
    a, b = rng.uniform(0, 12, (15, 3)), rng.uniform(0, 12, (15, 3))
    seg = np.stack([a, b, b], axis=1).reshape(-1, 3)
    pts = np.repeat(rng.integers(0, 12, (6, 3)).astype(float), 3, axis=0)  # on voxel corners
    v = np.concatenate([seg, pts])
    t = np.arange(len(v)).reshape(-1, 3)
    fast = cpu(v, t, unit_spec(shape), "surface")
    assert np.array_equal(fast, brute_force_surface(v, t, shape))
    assert fast.sum() > 0


def test_world_units_origin_and_voxel_size():
    """A triangle in metres lands in the voxels its world position says."""
    spec = GridSpec((-1.0, 2.0, 0.5), 0.25, (8, 8, 8))
    v = np.array([[-0.9, 2.1, 0.6], [-0.6, 2.1, 0.6], [-0.9, 2.4, 0.6]])  # z inside voxel k=0
    ijk = voxelize(v, np.array([[0, 1, 2]]), spec, "surface", xp=np).coordinates()
    assert set(map(tuple, ijk)) == {(i, j, 0) for i in range(2) for j in range(2)}


@pytest.mark.parametrize("seed", range(3))
def test_quad_split_along_either_diagonal_gives_identical_voxels(seed):
    rng = np.random.default_rng(100 + seed)
    # A convex planar quad: four increasing angles on an ellipse in a random plane.
    ang = np.sort(rng.uniform(0, 2 * np.pi, 4))
    r = rotation(*rng.uniform(0, np.pi, 3))
    q = np.stack([6.5 * np.cos(ang), 4.0 * np.sin(ang), np.zeros(4)], axis=1) @ r.T + 8.03
    spec = unit_spec((16, 16, 16))
    a = cpu(q, np.array([[0, 1, 2], [0, 2, 3]]), spec, "surface")
    b = cpu(q, np.array([[0, 1, 3], [1, 2, 3]]), spec, "surface")
    assert a.sum() > 10 and np.array_equal(a, b)


def centres(shape):
    nx, ny, nz = shape
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    return np.stack([i, j, k], axis=-1).reshape(-1, 3) + 0.5


def inside_centres(v, t, shape):
    """``winding_inside`` of ``centres(shape)``, in their order (z slowest, x fastest)."""
    return winding_inside_lattice((0.5, 0.5, 0.5), 1.0, shape, v, t).transpose(2, 1, 0).reshape(-1)


def assert_solid_matches_winding(v, t, shape):
    solid = cpu(v, t, unit_spec(shape), "solid").reshape(-1)
    c = centres(shape)
    truth = inside_centres(v, t, shape)
    wrong = np.flatnonzero(solid != truth)
    if len(wrong):  # allowed only where the centre is (numerically) on the surface
        assert distance_to_mesh(c[wrong], v, t).max() < 1e-6
    assert truth.sum() > 100


@pytest.mark.parametrize("size,angles", [(24, (0, 0, 0)), (31, (0.3, 0.5, 0.7)), (40, (1.1, -0.4, 2.0))])
def test_solid_sphere_matches_winding_number(size, angles):
    r = 0.4 * size
    v, t = uv_sphere(r, 32, 16)
    v = v @ rotation(*angles).T + size / 2 + 0.0137
    assert_solid_matches_winding(v, t, (size, size + 1, size + 2))


@pytest.mark.parametrize("origin,step", [((0.0, 0.0, 0.0), 1.0), ((0.13, -0.29, 0.41), 0.8)])
def test_the_lattice_oracle_is_the_winding_number_of_every_point(origin, step):
    """``winding_inside_lattice`` (the winding number near the surface, once per region
    away from it) gives each lattice point its own winding number."""
    v, t = torus(5.0, 2.0, 24, 12)
    v = v @ rotation(0.5, 0.1, 0.9).T + 8.0
    shape = tuple(int(np.ceil(n / step)) for n in (17, 16, 15))
    fast = winding_inside_lattice(origin, step, shape, v, t)
    points = np.asarray(origin) + np.indices(shape).reshape(3, -1).T * step
    assert np.array_equal(fast.reshape(-1), winding_inside(points, v, t))
    assert 100 < fast.sum() < fast.size - 100


@pytest.mark.parametrize("size,angles", [(28, (0, 0, 0)), (36, (0.9, 0.2, -0.3))])
def test_solid_torus_matches_winding_number(size, angles):
    v, t = torus(0.3 * size, 0.1 * size, 40, 20)
    v = v @ rotation(*angles).T + size / 2 + 0.021
    assert_solid_matches_winding(v, t, (size, size, size))


def test_solid_sphere_on_exact_grid_ties_counts_each_crossing_once():
    """Octahedron with vertices on voxel centres' columns: rays hit edges and vertices
    exactly; the top-left rule must still count one crossing per surface pass."""
    c = np.array([8.0, 8.0, 8.0])
    r = 5.5
    v = np.array([c + [r, 0, 0], c - [r, 0, 0], c + [0, r, 0], c - [0, r, 0], c + [0, 0, r], c - [0, 0, r]])
    t = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    v = v - [0.5, 0.5, 0.0]  # vertices and edges exactly through column centres (j+½, k+½)
    shape = (16, 16, 16)
    solid = cpu(v, t, unit_spec(shape), "solid").reshape(-1)
    c3 = centres(shape)
    l1 = np.abs(c3 - (c - [0.5, 0.5, 0.0])).sum(axis=1)
    inside, outside = l1 < r - 1e-9, l1 > r + 1e-9
    assert solid[inside].all() and not solid[outside].any()


def test_solid_plus_surface_is_the_union():
    v, t = uv_sphere(6.3, 24, 12)
    v = v + 8.2
    spec = unit_spec((17, 17, 17))
    union = cpu(v, t, spec, "solid+surface")
    assert np.array_equal(union, cpu(v, t, spec, "solid") | cpu(v, t, spec, "surface"))


def test_thin_is_a_subset_of_conservative_and_6_separating_on_a_closed_mesh():
    v, t = torus(9.0, 3.5, 36, 18)
    v = v @ rotation(0.4, 0.7, 0.1).T + 14.3
    spec = unit_spec((29, 29, 29))
    thin = cpu(v, t, spec, "thin")
    cons = cpu(v, t, spec, "surface")
    assert thin.sum() < cons.sum() and not (thin & ~cons).any()
    inside = inside_centres(v, t, spec.shape).reshape(thin.shape)
    free = ~thin
    for axis in range(3):  # no face-neighbour pair crosses the surface outside the thin shell
        a = [slice(None)] * 3
        b = [slice(None)] * 3
        a[axis], b[axis] = slice(None, -1), slice(1, None)
        a, b = tuple(a), tuple(b)
        leak = free[a] & free[b] & (inside[a] != inside[b])
        assert not leak.any(), f"6-connected leak along axis {axis}"


def test_majority_vote_equals_parity_on_closed_and_tolerates_a_hole():
    v, t = uv_sphere(8.0, 32, 16)
    v = v + 10.3
    spec = unit_spec((21, 21, 21))
    closed = cpu(v, t, spec, "solid")
    assert np.array_equal(cpu(v, t, spec, "solid", vote=True), closed)
    # Punch a hole where +x rays leave the sphere: x-parity then fills rows outside.
    cent = v[t].mean(axis=1)
    open_t = t[~((cent[:, 0] > 17.5) & (np.abs(cent[:, 1] - 10.3) < 2) & (np.abs(cent[:, 2] - 10.3) < 2))]
    assert len(open_t) < len(t)
    parity = cpu(v, open_t, spec, "solid")
    voted = cpu(v, open_t, spec, "solid", vote=True)
    assert (parity != closed).sum() > 10
    assert (voted != closed).sum() <= 2


def test_bunny_surface_matches_sat_oracle():
    mesh, why = bunny()
    if mesh is None:
        pytest.skip(why)
    v, t = mesh
    spec = GridSpec.around(v.min(axis=0), v.max(axis=0), voxel_size=1.3)
    fast = voxelize(v, t, spec, "surface", xp=np).dense()
    pv = to_voxel_units(v, spec.origin, spec.voxel_size)
    assert np.array_equal(fast, candidate_surface(pv, t.astype(np.int64), spec.shape))
    assert fast.sum() > 1000


def test_bad_inputs_are_clear_errors():
    spec = unit_spec((4, 4, 4))
    v = np.array([[0, 0, 0], [1, 0, 0], [0, np.nan, 0]], dtype=np.float32)
    with pytest.raises(InputError, match="non-finite"):
        voxelize(v, np.array([[0, 1, 2]]), spec, xp=np)
    with pytest.raises(InputError, match="mode"):
        voxelize(np.zeros((3, 3)), np.array([[0, 1, 2]]), spec, "volume", xp=np)
    with pytest.raises(InputError, match="outside"):
        voxelize(np.zeros((3, 3)), np.array([[0, 1, 5]]), spec, xp=np)
    with pytest.raises(InputError, match="voxel size"):
        GridSpec((0, 0, 0), 0.0, (4, 4, 4))


def test_empty_mesh_gives_empty_grid():
    g = voxelize(np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int32), unit_spec((5, 5, 5)), "solid+surface", xp=np)
    assert g.count() == 0 and g.bits.shape == (5, 5, 1)


def test_progress_reports_and_cancels():
    from voxfx.kernels.errors import Cancelled

    v, t = uv_sphere(6.0, 24, 12)
    v = v + 8
    seen = []
    voxelize(v, t, unit_spec((16, 16, 16)), "solid+surface", xp=np, progress=lambda f, m: seen.append(f) or True)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
    with pytest.raises(Cancelled):
        voxelize(v, t, unit_spec((16, 16, 16)), "surface", xp=np, progress=lambda f, m: f < 0.5)
