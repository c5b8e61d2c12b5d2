"""The whole snow step on the GPU against the CPU reference (same seed): the wind and
ground stages agree to float rounding, the flakes statistically."""

import numpy as np
import pytest

from tests.meshes import box, merge
from tests.unit.test_snow_sim import plane
from voxfx.kernels.snow.domain import SnowDomain, SnowSettings
from voxfx.kernels.snow.sim import SnowSimulation


def test_gpu_snowfall_matches_cpu_statistically():
    import cupy

    v, t = merge(plane(16.0), box((6, 6, 0), (10, 10, 3)))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(
        initial_depth=0.0, flake_count=20000, wind_speed=2.0, gust_strength=0.2, snowfall_rate=3600.0,
                            seed=int(np.random.default_rng().integers(1000)))
    cpu = SnowSimulation(domain, settings, v, t, xp=np)
    gpu = SnowSimulation(domain, settings, v, t, xp=cupy)
    assert np.array_equal(cpu.terrain_host(), gpu.terrain_host())
    for _ in range(60):
        cpu.step(0.1)
        gpu.step(0.1)
    a, b = cpu.snow_host(), gpu.snow_host()
    # Same snowfall in total (both deposit rate·area·dt on every step with landings).
    assert b.sum() == pytest.approx(a.sum(), rel=2e-2)
    # Same distribution: roof vs open ground, and the field as a whole.
    assert np.abs(a - b).sum() / a.sum() < 0.15
    assert int(gpu.landed[0]) == pytest.approx(int(cpu.landed[0]), rel=0.05)
    wind_cpu = np.array(cpu.wind.u)
    assert np.allclose(np.asarray(gpu.wind.u.get()), wind_cpu, atol=0.05 * settings.wind_speed)
