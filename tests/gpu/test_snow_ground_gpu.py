"""GPU ground stages == CPU reference on fresh random inputs: terrain and solid bit for bit,
deposit and redistribution to float accuracy (they round alike, so in practice
bit for bit too)."""

import math
import numpy as np
import pytest

from tests.unit.test_snow_ground import box, grid_mesh, lattice, merge, plane
from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.snow import ground
from voxfx.kernels.snow.domain import NO_GROUND, SnowDomain, SnowSettings


def terrain_both(v, t, domain):
    import cupy

    cpu = ground.terrain_from_triangles(v, t, domain, xp=np)
    gpu = ground.terrain_from_triangles(cupy.asarray(v), cupy.asarray(t), domain, xp=cupy)
    assert gpu.dtype == cupy.float32 and gpu.shape == cpu.shape
    return cpu, gpu.get()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_terrain_of_a_random_soup_matches_cpu_bit_for_bit(dtype):
    rng = np.random.default_rng()
    n = int(rng.integers(100, 600))
    v = rng.uniform([-2, -2, -5], [30, 25, 9], size=(3 * n, 3)).astype(dtype)
    t = rng.integers(0, 3 * n, size=(n, 3))
    domain = lattice(tuple(rng.uniform(-1, 1, 2)), float(rng.uniform(0.1, 0.4)), (97, 83))
    cpu, gpu = terrain_both(v, t, domain)
    assert np.array_equal(cpu.view(np.uint32), gpu.view(np.uint32)) and (cpu != NO_GROUND).any()


def test_terrain_of_houses_and_a_jittered_plane_matches_cpu_bit_for_bit():
    rng = np.random.default_rng()
    xs, ys = np.linspace(-8, 8, 41), np.linspace(-8, 8, 37)
    v, t = grid_mesh(xs, ys, lambda x, y: 0.1 * np.sin(x) * y, rng)
    v[:, :2] += rng.uniform(-0.1, 0.1, (len(v), 2)) * (np.abs(v[:, :2]) < 7.9)
    houses = [box(rng.uniform(-6, 6, 2), rng.uniform(0.5, 2), rng.uniform(0, 3), -0.5, rng.uniform(1, 4))
              for _ in range(6)]
    v, t = merge((v.astype(np.float32), t), plane((-9, -9), (9, 9), -1.0), *houses)
    domain = lattice((-8.0, -8.0), 16.0 / 256, (257, 257))
    cpu, gpu = terrain_both(v, t, domain)
    assert np.array_equal(cpu.view(np.uint32), gpu.view(np.uint32))


def test_terrain_edge_cases_match_cpu():
    import cupy

    domain = lattice((0.0, 0.0), 1.0, (9, 7))
    empty = (np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32))
    cpu, gpu = terrain_both(*empty, domain)
    assert np.all(gpu == NO_GROUND) and np.array_equal(cpu, gpu)
    far = np.array([[-50, -50, 1], [-40, -50, 1], [-50, -40, 1]], np.float32)  # wholly off the lattice
    cpu, gpu = terrain_both(far, np.array([[0, 1, 2]]), domain)
    assert np.all(gpu == NO_GROUND)
    v = np.array([[0, 0, 0], [3, 0, 0], [0, 3, np.nan]], np.float32)
    with pytest.raises(InputError, match="1 vertices have non-finite"):
        ground.terrain_from_triangles(cupy.asarray(v), cupy.asarray([[0, 1, 2]]), domain, xp=cupy)
    with pytest.raises(InputError, match="outside the vertex array"):
        ground.terrain_from_triangles(cupy.asarray(np.nan_to_num(v)), cupy.asarray([[0, 1, 3]]), domain, xp=cupy)


def test_solid_matches_cpu_bit_for_bit():
    import cupy

    rng = np.random.default_rng()
    wind = GridSpec(tuple(rng.uniform(-1, 0, 3)), float(rng.uniform(0.1, 0.3)), (45, 38, 29))
    domain = SnowDomain(wind, tuple(rng.uniform(-1, 0, 2)), float(rng.uniform(0.05, 0.2)), (71, 66))
    terrain = rng.uniform(-1, 3, (66, 71)).astype(np.float32)
    terrain[rng.random(terrain.shape) < 0.1] = NO_GROUND
    snow = rng.uniform(0, 0.5, terrain.shape).astype(np.float32)
    cpu = ground.solid_from_ground(terrain, snow, domain)
    gpu = ground.solid_from_ground(cupy.asarray(terrain), cupy.asarray(snow), domain)
    assert np.array_equal(cpu, gpu.get()) and 0 < cpu.sum() < cpu.size
    objects = (rng.random(cpu.shape) < 0.05).astype(np.uint8)
    cpu = ground.solid_from_ground(terrain, snow, domain, out=objects.copy())
    gpu = ground.solid_from_ground(cupy.asarray(terrain), cupy.asarray(snow), domain, out=cupy.asarray(objects))
    assert np.array_equal(cpu, gpu.get())


def test_deposit_matches_cpu_without_reading_units_on_the_host():
    import cupy

    rng = np.random.default_rng()
    deposit = rng.integers(0, 300, (53, 61)).astype(np.uint32)
    snow = rng.uniform(0, 0.1, deposit.shape).astype(np.float32)
    volume, cell = float(rng.uniform(1e-4, 1e-1)), float(rng.uniform(0.02, 0.2))
    units = cupy.asarray(deposit.sum(dtype=np.uint64)).reshape(1)
    g_snow, g_dep = cupy.asarray(snow), cupy.asarray(deposit)
    ground.apply_deposit(g_snow, g_dep, units, volume, cell)
    c_snow, c_dep = snow.copy(), deposit.copy()
    ground.apply_deposit(c_snow, c_dep, units.get(), volume, cell)
    assert np.array_equal(c_snow, g_snow.get()) and not g_dep.any()
    added = g_snow.get().astype(np.float64) - snow
    assert abs((added * ground.vertex_areas(added.shape, cell)).sum() - volume) <= 1e-5 * volume
    # No units landed: nothing changes (and no division by zero).
    g_dep[3, 4] = 7
    ground.apply_deposit(g_snow, g_dep, cupy.zeros((), cupy.uint32), volume, cell)
    assert np.array_equal(c_snow, g_snow.get()) and not g_dep.any()


def random_ground(rng, shape):
    terrain = rng.normal(0, 0.3, shape).astype(np.float32)
    terrain[rng.random(shape) < 0.05] = NO_GROUND
    terrain[: shape[0] // 4, : shape[1] // 5] = NO_GROUND
    snow = rng.exponential(0.2, shape).astype(np.float32)
    snow[terrain == NO_GROUND] = 0
    return terrain, snow


@pytest.mark.parametrize("iterations", [1, 6, 7])
def test_redistribution_matches_cpu(iterations):
    import cupy

    rng = np.random.default_rng()
    terrain, snow = random_ground(rng, (77, 91))
    s = SnowSettings(repose_angle=math.radians(float(rng.uniform(20, 50))),
                     redistribute_fraction=float(rng.uniform(0.1, 0.5)),
                     redistribute_min_depth=float(rng.uniform(0, 0.05)))
    cell = float(rng.uniform(0.05, 0.3))
    g_snow = cupy.asarray(snow)
    out = ground.redistribute(cupy.asarray(terrain), g_snow, s, cell, iterations)
    assert out is g_snow
    cpu = ground.redistribute(terrain, snow.copy(), s, cell, iterations)
    assert not np.array_equal(cpu, snow)
    np.testing.assert_allclose(g_snow.get(), cpu, rtol=1e-6, atol=1e-7)
    mass = snow.sum(dtype=np.float64)
    assert abs(float(g_snow.sum(dtype=cupy.float64)) - mass) <= 1e-6 * mass


def test_redistribution_at_roof_ledges_and_on_a_cone_matches_cpu_and_conserves_exactly():
    """Ledges (a roof edge, random steps) and a steep cone, many iterations: the quantised
    transfers round alike on both backends and conserve snow to float64 summation."""
    import cupy

    from tests.unit.test_snow_ground import roof_scene

    rng = np.random.default_rng()
    terrain, d = roof_scene(0.1)
    j, i = np.indices(terrain.shape)
    r = np.hypot(i - 20, j - 20) * 0.1
    snow = np.maximum(0.0, 2.0 * (1.0 - r / 1.5)).astype(np.float32)  # a 53° cone beside the house
    snow += np.where(terrain > 2.0, rng.uniform(0.0, 0.4, terrain.shape), 0.0).astype(np.float32)
    s = SnowSettings(repose_angle=math.radians(float(rng.uniform(25, 45))))
    g_snow = cupy.asarray(snow)
    ground.redistribute(cupy.asarray(terrain), g_snow, s, 0.1, 300)
    cpu = ground.redistribute(terrain, snow.copy(), s, 0.1, 300)
    np.testing.assert_allclose(g_snow.get(), cpu, rtol=1e-6, atol=1e-7)
    mass = snow.sum(dtype=np.float64)
    assert abs(float(g_snow.sum(dtype=cupy.float64)) - mass) <= 1e-7 * mass
