"""The whole snowfall step on the CPU reference: a house on a plane, snowfall-rate
accounting, a wall's lee."""

import math
import numpy as np
import pytest

from tests.meshes import box, merge
from voxfx.kernels.snow.domain import NO_GROUND, SnowDomain, SnowSettings
from voxfx.kernels.snow.sim import SnowSimulation
from voxfx.kernels.errors import InputError


def plane(size, z=0.0):
    v = np.array([[0, 0, z], [size, 0, z], [size, size, z], [0, size, z]], dtype=np.float32)
    return v, np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int32)


def scene(wind=0.0, flakes=4000, drift=False, house=True, seed=1):
    meshes = [plane(16.0)] + ([box((6, 6, 0), (10, 10, 3))] if house else [])
    v, t = merge(*meshes)
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(
        initial_depth=0.0, flake_count=flakes, wind_speed=wind, gust_strength=0.0, snowfall_rate=3600.0,
                            drift=drift, seed=seed, obstacle_update_every=5)
    return SnowSimulation(domain, settings, v, t, xp=np)


def test_snow_lands_on_the_roof_and_the_roof_is_the_ground_there():
    sim = scene()
    terrain = sim.terrain_host()
    c = sim.domain.ground_cell
    roof = (slice(int(6.5 / c), int(9.5 / c) + 1),) * 2
    assert np.all(terrain[roof] == pytest.approx(3.0))  # the top surface, not the plane under the roof
    for _ in range(60):
        sim.step(0.1)
    snow = sim.snow_host()
    assert snow[roof].mean() > 0
    assert snow[roof].mean() == pytest.approx(snow[:8, :8].mean(), rel=0.5)  # similar to open ground in still air


def test_flat_roof_keeps_full_depth_to_its_edge():
    """A 4 × 4 m flat roof 2.5 m up in still air (issue 22 §4): the roof's outer ring of
    ground samples holds the interior's depth within 10 % and the ground beside the house
    the open ground's (with the thesis's rule: 0.05× and 1.9× here). Flakes that drift
    sideways into the house below the roof meet its wall and land at its foot, not on the
    roof's lip (1.06–1.15× before that rule)."""
    v, t = merge(plane(16.0), box((6, 6, 0), (10, 10, 2.5)))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=65)
    settings = SnowSettings(
        initial_depth=0.0, flake_count=20000, wind_speed=0.0, gust_strength=0.0, snowfall_rate=3600.0,
                            drift=False, seed=1)
    sim = SnowSimulation(domain, settings, v, t, xp=np)
    for _ in range(60):
        sim.step(0.1)
    snow, roof = sim.snow_host(), sim.terrain_host() > 2.0
    c = domain.ground_cell
    x = np.arange(domain.ground_shape[0]) * c
    X, Y = np.meshgrid(x, x)
    d = np.maximum(np.abs(X - 8), np.abs(Y - 8))  # distance from the roof's centre line, max-norm
    ring, interior = roof & (d > 2 - 0.5 * c), roof & (d < 2 - 1.5 * c)
    beside, open_ground = ~roof & (d < 2 + 1.5 * c), ~roof & (d > 4) & (d < 7)
    ratio = snow[ring].mean() / snow[interior].mean()
    assert 0.9 <= ratio <= 1.1, ratio
    assert snow[beside].mean() == pytest.approx(snow[open_ground].mean(), rel=0.1)


def test_snow_volume_is_exactly_the_snowfall_of_the_steps_with_landings():
    sim = scene(wind=1.0)
    dt, expected = 0.1, 0.0
    for _ in range(50):
        before = int(sim.landed[0])
        sim.step(dt)
        if int(sim.landed[0]) > before:  # a step with landings deposits its whole snowfall
            expected += sim.settings.snowfall_rate_m_per_s * sim.area * dt
    assert expected > 0
    assert sim.snow_volume() == pytest.approx(expected, rel=1e-5)  # redistribution and drift conserve


def test_no_snow_where_there_is_no_receiver():
    v, t = plane(8.0)
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    sim = SnowSimulation(
        domain, SnowSettings(initial_depth=0.0, flake_count=3000, wind_speed=0.0, gust_strength=0.0,
                             snowfall_rate=2.0), v, t, xp=np)
    for _ in range(40):
        sim.step(0.1)
    terrain, snow = sim.terrain_host(), sim.snow_host()
    assert (terrain == NO_GROUND).any()
    assert snow[terrain == NO_GROUND].sum() == 0  # not even spill from neighbouring impacts
    assert snow[terrain != NO_GROUND].sum() > 0


def test_wall_in_a_crosswind_shelters_its_lee():
    """A 4 m wall across a 4 m/s wind in a 32 m long domain (long enough that flakes
    wrapping around do not reach the lee again): the lee gets far less snow than open
    ground downstream; the windward side piles up. Over 10 s (lee/open 0.31, windward/open
    1.8; the shelter is fullest from 8 to 10 s, then the lee slowly fills: 0.42 and 2.1 at
    15 s)."""
    wall = box((10.0, 1.0, 0.0), (10.5, 15.0, 4.0))
    ground = (np.array([[0, 0, 0], [32, 0, 0], [32, 16, 0], [0, 16, 0]], np.float32),
              np.array([[0, 1, 2], [0, 2, 3]], np.int32))
    v, t = merge(ground, wall)
    domain = SnowDomain.from_box((0, 0, 0), (32, 16, 8), wind_cells_xy=32, ground_vertices_xy=65)
    settings = SnowSettings(
        initial_depth=0.0, flake_count=30000, wind_speed=4.0, gust_strength=0.0, drift=False, seed=3,
                            snowfall_rate=3600.0, repose_angle=math.radians(80.0))
    sim = SnowSimulation(domain, settings, v, t, xp=np)
    for _ in range(100):
        sim.step(0.1)
    c = domain.ground_cell
    profile = sim.snow_host()[int(3 / c):int(13 / c)].mean(axis=0)  # rows away from the wall's ends
    x = np.arange(len(profile)) * c

    def band(a, b):
        return profile[(x >= a) & (x < b)].mean()

    lee, open_ground, windward = band(11, 17), band(22, 30), band(8, 10)
    assert lee < 0.5 * open_ground, (lee, open_ground)
    assert windward > open_ground


def test_checkpoint_restores_an_identical_continuation():
    a = scene(wind=1.0, flakes=2000)
    for _ in range(10):
        a.step(0.1)
    state = a.checkpoint()
    b = scene(wind=1.0, flakes=2000)
    b.restore(state)
    for _ in range(5):
        a.step(0.1)
        b.step(0.1)
    assert np.array_equal(a.snow_host(), b.snow_host())
    assert np.array_equal(a.flakes_host()["position"], b.flakes_host()["position"])


@pytest.mark.parametrize("key, damage", [("snow", lambda a: a[:-1]), ("u", lambda a: a.astype(np.int64) * 0 + 1.5j),
                                         ("pos", lambda a: a[:, :2]), ("spawn", lambda a: a[:-1])])
def test_a_damaged_state_is_refused(key, damage):
    state = scene(flakes=500).checkpoint()
    state[key] = damage(state[key])
    with pytest.raises(ValueError, match=key):
        scene(flakes=500).restore(state)


@pytest.mark.parametrize("field,value", [("wind_speed", float("nan")), ("wind_direction", float("inf")),
                                         ("snowfall_rate", -1.0), ("repose_angle", math.radians(95.0))])
def test_bad_settings_are_refused_before_anything_is_allocated(field, value):
    from voxfx.kernels.errors import InputError

    settings = SnowSettings(**{field: value})
    with pytest.raises(InputError):
        settings.check()


@pytest.mark.parametrize("vertices", [17, 129])
def test_mean_depth_on_open_flat_ground_is_snowfall_times_time(vertices):
    """Issue 18: 3600 cm/h for 12.5 s is 12.5 cm, at any ground resolution (the receiving
    area is the plane's, not vertices × cell²)."""
    v, t = plane(20.0)
    domain = SnowDomain.from_box((0, 0, 0), (20, 20, 6), wind_cells_xy=8, ground_vertices_xy=vertices)
    settings = SnowSettings(
        initial_depth=0.0, flake_count=20000, wind_speed=0.0, gust_strength=0.0, snowfall_rate=3600.0,
                            drift=False, seed=3, obstacle_update_every=50)
    sim = SnowSimulation(domain, settings, v, t, xp=np)
    assert sim.area == pytest.approx(400.0, rel=1e-9)
    dt, steps = 0.125, 100
    for _ in range(steps):
        sim.step(dt)
    expected = 36.0 / 3600.0 * dt * steps  # m: 3600 cm/h = 0.01 m/s
    snow = sim.snow_host()
    assert sim.snow_volume() == pytest.approx(expected * 400.0, rel=1e-3)  # float32 depths summed 100 times
    assert snow[1:-1, 1:-1].mean() == pytest.approx(expected, rel=0.01)  # interior
    assert snow.mean() == pytest.approx(expected, rel=0.02)  # sides get the same depth too
    assert f"mean snow {100 * expected:.2f} cm" in sim.summary()


def test_starting_depth_lies_on_receivers_only_and_time_scale_speeds_up_accumulation():
    v, t = plane(8.0)
    domain = SnowDomain.from_box((0, 0, 0), (12, 12, 6), wind_cells_xy=8, ground_vertices_xy=25)
    base = dict(flake_count=3000, wind_speed=0.0, gust_strength=0.0, snowfall_rate=3600.0, drift=False,
                seed=2, obstacle_update_every=50)
    start = SnowSimulation(domain, SnowSettings(initial_depth=0.05, **base), v, t, xp=np)
    open_ground = start.terrain_host() != NO_GROUND
    assert 0 < open_ground.sum() < open_ground.size  # the plane covers part of the lattice
    assert np.all(start.snow_host()[open_ground] == np.float32(0.05))
    assert np.all(start.snow_host()[~open_ground] == 0)
    volumes = {}
    for scale in (1.0, 4.0):
        sim = SnowSimulation(domain, SnowSettings(time_scale=scale, initial_depth=0.0, **base), v, t, xp=np)
        for _ in range(20):
            sim.step(0.1)
        volumes[scale] = sim.snow_volume()
        assert volumes[scale] == pytest.approx(0.01 * scale * 2.0 * sim.area, rel=1e-3)  # rate × scale × t × area
    assert volumes[4.0] == pytest.approx(4 * volumes[1.0], rel=1e-3)


@pytest.mark.parametrize("field, value", [("time_scale", 0.0), ("time_scale", float("inf")), ("initial_depth", -0.1)])
def test_bad_time_scale_or_starting_depth_is_refused(field, value):
    with pytest.raises(InputError):
        SnowSettings(**{field: value}).check()
