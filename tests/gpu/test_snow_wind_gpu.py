"""The CuPy wind field (cuda/snow_wind.cu) follows the NumPy reference step for step on
fresh random scenes, keeps its own divergence within the solver's tolerance, samples like
the reference and runs its pressure loop as a CUDA graph."""

import math
import numpy as np
import pytest

from voxfx.kernels.snow.domain import SnowDomain, SnowSettings
from voxfx.kernels.snow.wind import WindField

SPEED = 2.0
DT = 0.1


def random_scene(rng, shape):
    """A few boxes standing on the ground, one of them a long wall."""
    nz, ny, nx = shape
    solid = np.zeros(shape, np.uint8)
    for n in range(5):
        x0, y0 = rng.integers(2, nx - 4), rng.integers(1, ny - 3)
        wx, wy = (1, ny // 2) if n == 0 else rng.integers(1, 4, size=2)
        height = rng.integers(2, nz // 2 + 1)
        solid[:height, y0 : y0 + wy, x0 : x0 + wx] = 1
    return solid


def pair(rng, solver, cells=24):
    import cupy as cp

    domain = SnowDomain.from_box((-2.0, 1.0, 0.5), (10.0, 9.0, 6.5), cells, 16)
    settings = SnowSettings(wind_speed=SPEED, wind_direction=math.radians(float(rng.uniform(0.0, 360.0))),
                            gust_strength=0.4, gust_period=1.5, seed=int(rng.integers(1000)),
                            pressure_solver=solver)
    cpu, gpu = WindField(domain, settings, np), WindField(domain, settings, cp)
    solid = random_scene(rng, cpu.solid.shape)
    cpu.set_obstacles(solid)
    gpu.set_obstacles(cp.asarray(solid))
    return cpu, gpu, solid


@pytest.mark.parametrize("solver", ["converge", "thesis"])
def test_gpu_wind_matches_cpu_reference(solver):
    import cupy as cp

    rng = np.random.default_rng()
    cpu, gpu, _ = pair(rng, solver)
    t = 0.0
    for _ in range(6):
        rc, rg = cpu.step(DT, t), gpu.step(DT, t)
        t += DT
        # same rounding (--fmad=false): same sweeps, give or take one residual check
        assert abs(rc["iterations"] - rg["iterations"]) <= cpu.check_every, (rc, rg)
        assert rg["converged"] == rc["converged"]
        assert abs(rg["residual"] - rc["residual"]) <= 0.5 * rc["residual"] + 1e-6
    # float32, stated tolerance: 1e-4 of the wind speed on the faces, 1e-4 of max|p| on p
    for a, b in ((cpu.u, gpu.u), (cpu.v, gpu.v), (cpu.w, gpu.w)):
        assert np.abs(a - cp.asnumpy(b)).max() <= 1e-4 * SPEED
    scale = np.abs(cpu.p).max()
    assert np.abs(cpu.p - cp.asnumpy(gpu.p)).max() <= 1e-4 * scale
    assert np.abs(cpu.rhs - cp.asnumpy(gpu.rhs)).max() <= 1e-4 * np.abs(cpu.rhs).max() + 1e-6


def test_gpu_projection_leaves_divergence_within_tolerance():
    import cupy as cp

    rng = np.random.default_rng()
    _, gpu, solid = pair(rng, "converge", cells=48)
    t = 0.0
    for _ in range(5):
        r = gpu.step(DT, t)
        t += DT
        assert r["converged"] and r["residual"] <= gpu.settings.pressure_tolerance
        u, v, w = (cp.asnumpy(a).astype(np.float64) for a in (gpu.u, gpu.v, gpu.w))
        div = (np.diff(u, axis=2) + np.diff(v, axis=1) + np.diff(w, axis=0)) / gpu.h
        assert np.abs(div[solid == 0]).max() <= 1e-3 * SPEED / gpu.h  # as on the CPU
    assert np.allclose(cp.asnumpy(gpu.divergence())[solid == 0], div[solid == 0], atol=1e-6 * SPEED / gpu.h)


def test_gpu_sample_matches_cpu_sample():
    import cupy as cp

    rng = np.random.default_rng()
    cpu, gpu, _ = pair(rng, "converge")
    for n in range(3):
        cpu.step(DT, n * DT)
        gpu.step(DT, n * DT)
    gpu.u[...] = cp.asarray(cpu.u)  # same field, so only the sampling is compared
    gpu.v[...] = cp.asarray(cpu.v)
    gpu.w[...] = cp.asarray(cpu.w)
    lo, hi = np.array(cpu.domain.wind.origin), np.array(cpu.domain.wind.upper)
    pts = (lo - 1.0 + rng.random((20000, 3)) * (hi - lo + 2.0)).astype(np.float32)  # some outside
    want = cpu.sample(pts)
    got = cp.asnumpy(gpu.sample(cp.asarray(pts)))
    assert np.abs(got - want).max() <= 1e-6 * SPEED
    assert gpu.sample(cp.zeros((0, 3), cp.float32)).shape == (0, 3)


def test_gpu_pressure_loop_is_a_cuda_graph():
    rng = np.random.default_rng()
    _, gpu, _ = pair(rng, "converge")
    gpu.step(DT, 0.0)
    loop = gpu._loops.get("converge")
    assert loop is not None and not loop.failed and loop.graph is not None and loop.launches >= 1


def test_gpu_seals_the_same_pockets_as_the_cpu():
    import cupy as cp

    domain = SnowDomain.from_box((0.0, 0.0, 0.0), (12.0, 8.0, 6.0), 24, 16)
    settings = SnowSettings(wind_speed=SPEED, wind_direction=math.radians(0.0))
    cpu, gpu = WindField(domain, settings, np), WindField(domain, settings, cp)
    solid = np.zeros(cpu.solid.shape, np.uint8)
    solid[:, 3, :7] = solid[:, 11, :7] = 1  # a bay open only to the inflow side
    solid[:, 3:12, 6] = 1
    cpu.set_obstacles(solid)
    gpu.set_obstacles(cp.asarray(solid))
    assert np.array_equal(cp.asnumpy(gpu.solid), cpu.solid)
    assert cpu.solid.sum() > solid.sum()
    assert gpu.step(DT, 0.0)["converged"]
