"""The fused GPU flake step (cuda/snow_flakes.cu) against the NumPy reference on fresh
random inputs: identical RNG bits and first spawn, a one-step match to float32 rounding,
and, after many steps in a random wind, the same statistics and exact deposit
conservation (seed 002 §2.4.1, §3.3.1–3.3.2)."""

import numpy as np
import pytest

from voxfx.kernels.snow import flakes as fl
from voxfx.kernels import rng
from voxfx.kernels.snow import rng as streams
from voxfx.kernels.snow.domain import NO_GROUND, SnowDomain, SnowSettings

cp = pytest.importorskip("cupy")


def random_world(rs, landed_dtype=np.uint64):
    """A random box, a smooth random MAC wind, hilly terrain with a block, a hole, snow."""
    lo = rs.uniform(-20, 20, 3)
    size = rs.uniform([6, 5, 4], [14, 12, 8])
    domain = SnowDomain.from_box(lo, lo + size, int(rs.integers(12, 28)), int(rs.integers(20, 60)))
    nx, ny, nz = domain.wind.shape
    h = domain.wind.voxel_size

    def smooth(shape, offset):
        k, j, i = np.indices(shape)
        f = rs.uniform(-1.5, 1.5)
        for _ in range(3):
            a, b, c, ph = rs.uniform(0.2, 1.2, 3).tolist() + [rs.uniform(0, 6.3)]
            f = f + rs.uniform(0.3, 1.0) * np.sin(a * (i + offset[0]) * h + b * (j + offset[1]) * h
                                                 + c * (k + offset[2]) * h + ph)
        return f.astype(np.float32)

    u = smooth((nz, ny, nx + 1), (0, .5, .5)) + np.float32(rs.uniform(0.5, 3.0))
    v = smooth((nz, ny + 1, nx), (.5, 0, .5))
    w = smooth((nz + 1, ny, nx), (.5, .5, 0)) * np.float32(0.3)
    gx, gy = domain.ground_shape
    X, Y = np.meshgrid(np.arange(gx), np.arange(gy))
    base = lo[2] + 0.15 * size[2] * (1 + np.sin(X * 0.3) * np.cos(Y * 0.2))
    terrain = base.astype(np.float32)
    terrain[gy // 4: gy // 2, gx // 3: gx // 2] += np.float32(0.4 * size[2])  # a block
    terrain[:, -3:] = NO_GROUND  # a hole along one edge
    snow = rs.uniform(0, 0.05, (gy, gx)).astype(np.float32)
    state = dict(u=u, v=v, w=w, terrain=terrain, snow=snow, deposit=np.zeros((gy, gx), np.uint32),
                 landed=np.zeros(1, landed_dtype))
    return domain, state


def on_gpu(state):
    return {k: cp.asarray(a) for k, a in state.items()}


def run(flakes, domain, state, settings, dt, steps):
    for i in range(steps):
        fl.step_flakes(flakes, state["u"], state["v"], state["w"], domain, state["terrain"], state["snow"],
                       state["deposit"], state["landed"], dt, i * dt, settings)
    return flakes


def test_gpu_rng_bits_match_cpu():
    rs = np.random.default_rng()
    n = 1 << 18
    ids = rs.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    spawn = rs.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    for seed in (0, -1, int(rs.integers(0, 2**62)), 2**64 + 3):
        for stream in (0, streams.STREAM_PHASE, streams.STREAM_Z + 7 * streams.INIT_ATTEMPT_STRIDE, 2**31 + 1):
            cpu = rng.uniform(seed, ids, spawn, stream)
            gpu = rng.uniform(seed, cp.asarray(ids), cp.asarray(spawn), stream)
            assert np.array_equal(cpu.view(np.uint32), gpu.get().view(np.uint32))


@pytest.mark.parametrize("with_terrain", [False, True])
@pytest.mark.parametrize("preset", ["wet", "dry"])
def test_gpu_init_matches_cpu_bit_for_bit(with_terrain, preset):
    rs = np.random.default_rng()
    domain, state = random_world(rs)
    settings = SnowSettings(preset=preset, seed=int(rs.integers(0, 2**31)), spiral_scale=float(rs.uniform(0, 1)))
    ground = dict(terrain=state["terrain"], snow=state["snow"]) if with_terrain else {}
    cpu = fl.init_flakes(50001, domain, settings, **ground)
    gpu = fl.init_flakes(50001, domain, settings, xp=cp, **{k: cp.asarray(a) for k, a in ground.items()})
    assert isinstance(gpu.pos, cp.ndarray)
    g = gpu.to_numpy()
    for a, b in zip((cpu.pos, cpu.vel, cpu.phase, cpu.spawn), (g.pos, g.vel, g.phase, g.spawn)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("landed_dtype", [np.uint64, np.uint32])
def test_gpu_one_step_matches_cpu_to_rounding(landed_dtype):
    rs = np.random.default_rng()
    domain, state = random_world(rs, landed_dtype)
    settings = SnowSettings(seed=int(rs.integers(0, 2**31)), spiral_scale=0.3)
    cpu = fl.init_flakes(100_000, domain, settings, terrain=state["terrain"], snow=state["snow"])
    cpu.vel += rs.uniform(-1, 1, cpu.vel.shape).astype(np.float32)  # off terminal velocity
    gpu = fl.Flakes(*(cp.asarray(a) for a in (cpu.pos, cpu.vel, cpu.phase, cpu.spawn)))
    gstate = on_gpu(state)
    dt = 0.1
    run(cpu, domain, state, settings, dt, 1)
    run(gpu, domain, gstate, settings, dt, 1)
    g = gpu.to_numpy()
    same_life = g.spawn == cpu.spawn
    assert same_life.mean() > 0.999  # a landing decided differently by one ulp is rare
    moved = same_life & (cpu.spawn == 0)
    assert np.allclose(g.pos[moved], cpu.pos[moved], rtol=0, atol=2e-5 * (1 + np.abs(cpu.pos[moved]).max()))
    assert np.allclose(g.vel[moved], cpu.vel[moved], rtol=1e-5, atol=1e-5)
    assert np.allclose(g.phase[moved], cpu.phase[moved], atol=1e-5) or np.allclose(
        np.cos(g.phase[moved]), np.cos(cpu.phase[moved]), atol=1e-5)
    reborn = same_life & (cpu.spawn == 1)  # respawns come from the RNG alone: same bits
    assert reborn.sum() > 100
    for a, b in ((g.pos, cpu.pos), (g.vel, cpu.vel), (g.phase, cpu.phase)):
        assert np.array_equal(a[reborn], b[reborn])
    landed_gpu, landed_cpu = int(gstate["landed"].get()[0]), int(state["landed"][0])
    assert abs(landed_gpu - landed_cpu) <= (~same_life).sum()
    assert int(gstate["deposit"].get().sum(dtype=np.int64)) == 16 * landed_gpu
    assert gstate["landed"].dtype == landed_dtype


def test_gpu_many_steps_match_cpu_statistically():
    rs = np.random.default_rng()
    domain, state = random_world(rs)
    settings = SnowSettings(seed=int(rs.integers(0, 2**31)))
    n, steps, dt = 60_000, 150, 1 / 24
    cpu = fl.init_flakes(n, domain, settings, terrain=state["terrain"], snow=state["snow"])
    gstate = on_gpu(state)
    gpu = fl.init_flakes(n, domain, settings, xp=cp, terrain=gstate["terrain"], snow=gstate["snow"])
    run(cpu, domain, state, settings, dt, steps)
    run(gpu, domain, gstate, settings, dt, steps)
    g = gpu.to_numpy()
    landed_cpu, landed_gpu = int(state["landed"][0]), int(gstate["landed"].get()[0])
    deposit_gpu = gstate["deposit"].get()
    # Exact on each backend: integer units, atomics on the GPU.
    assert int(state["deposit"].sum(dtype=np.int64)) == 16 * landed_cpu
    assert int(deposit_gpu.sum(dtype=np.int64)) == 16 * landed_gpu
    assert landed_cpu > 0.2 * n
    # Statistically equal: float32 rounding differences only move a few landings.
    assert abs(landed_gpu - landed_cpu) <= 0.02 * landed_cpu, (landed_gpu, landed_cpu)
    diff = np.abs(deposit_gpu.astype(np.int64) - state["deposit"].astype(np.int64)).sum()
    assert diff <= 0.05 * state["deposit"].sum(dtype=np.int64), diff
    assert np.allclose(g.vel.mean(0), cpu.vel.mean(0), atol=0.02)
    assert np.allclose(g.pos.mean(0), cpu.pos.mean(0), atol=0.02 * np.ptp(cpu.pos, axis=0).max())
    assert abs(int(g.spawn.sum(dtype=np.int64)) - int(cpu.spawn.sum(dtype=np.int64))) <= 0.02 * cpu.spawn.sum()


def test_gpu_still_air_reaches_terminal_velocity_at_large_steps():
    domain = SnowDomain.from_box((0, 0, 0), (10, 8, 400), 20, 21)
    nx, ny, nz = domain.wind.shape
    gx, gy = domain.ground_shape
    state = on_gpu(dict(u=np.zeros((nz, ny, nx + 1), np.float32), v=np.zeros((nz, ny + 1, nx), np.float32),
                        w=np.zeros((nz + 1, ny, nx), np.float32), terrain=np.full((gy, gx), NO_GROUND, np.float32),
                        snow=np.zeros((gy, gx), np.float32), deposit=np.zeros((gy, gx), np.uint32),
                        landed=np.zeros(1, np.uint64)))
    settings = SnowSettings(preset="wet", seed=1)
    flakes = fl.init_flakes(10_000, domain, settings, xp=cp)
    flakes.pos[:, 2] = 390.0
    run(flakes, domain, state, settings, 0.25, 16)
    vmax, _, _ = fl.parameters_of(flakes, settings, domain)
    assert int(flakes.spawn.max()) == 0
    assert float(cp.abs(flakes.vel[:, 2] / -vmax - 1).max()) < 0.01
