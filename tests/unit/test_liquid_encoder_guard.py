"""The liquid GPU guard counts the device encoder of Compact frames (issue 21 §6, issue
17's GPU encode path): ~60 bytes a particle beside the simulation's state, between steps.
The device peak itself is measured by ``tests/gpu/test_encoder_memory_gpu.py``; here the
count is checked on the NumPy encoder (the same arrays, smaller quantize chunks) and the
guard's combination of stages."""

import tracemalloc

import numpy as np

from voxfx.addon import compact_points
from voxfx.kernels.flip.sim import flip_memory
from voxfx.kernels.grid import GridSpec


def _liquid_frame(n, per_cell=8, seed=1):
    """*n* particles, *per_cell* to a cell of 1 cm on average, with velocity and size."""
    rng = np.random.default_rng(seed)
    side = int(round((n / per_cell) ** (1 / 3)))
    pos = (rng.random((n, 3)) * side * 0.01).astype(np.float32)
    vel = rng.normal(size=(n, 3)).astype(np.float32)
    return pos, {"velocity": vel, "size": np.full(n, 0.0025, np.float32)}


def test_encoder_count_bounds_the_encoders_own_arrays():
    """Traced peak of ``encode`` on NumPy beyond its inputs, per particle, at 8 particles a
    cell (a liquid) and at one (spray): within the per-particle count (the device adds
    CuPy's sort scratch, which the count includes) and not far below it."""
    for per_cell in (8, 1):
        n = 1 << 20
        pos, columns = _liquid_frame(n, per_cell)
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        compact_points.encode(pos, columns, cell=0.01)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        per_particle = (peak - compact_points.CHUNK * 200) / n  # the CPU quantizes 16k at a time
        assert per_particle <= compact_points.ENCODER_BYTES_PER_PARTICLE * 1.5, (per_cell, per_particle)
        assert per_particle >= 0.4 * compact_points.ENCODER_BYTES_PER_PARTICLE, (per_cell, per_particle)


def test_device_encoder_bytes_grow_with_the_frame():
    assert compact_points.device_encoder_bytes(0) == 0
    small, big = compact_points.device_encoder_bytes(1000), compact_points.device_encoder_bytes(8_000_000)
    assert small == 1000 * (compact_points.ENCODER_BYTES_PER_PARTICLE + compact_points.QUANTIZE_BYTES_PER_PARTICLE)
    # 8M particles: 60 B each plus one 1M-particle quantize chunk
    assert big == 8_000_000 * 60 + compact_points.QUANTIZE_BYTES_PER_PARTICLE * compact_points.DEVICE_CHUNK


def test_guard_counts_the_encoder_beside_the_state():
    """Where the state plus the encoder is above every stage of the simulation, the
    bake's estimate is that sum; where a stage is larger, that stage (the encoder runs
    between steps, when their transients are gone). The stages are the GPU estimate's
    shape (``flip_memory(..., parts=True)`` on CuPy: state, stages, total)."""
    particles = 8_000_000
    encoder = compact_points.device_encoder_bytes(particles)
    particle_heavy = {"state": 24 * particles, "pressure": 24 * particles + encoder // 2,
                      "total": 24 * particles + encoder // 2}
    assert compact_points.with_device_encoder(particle_heavy, particles) == 24 * particles + encoder
    grid_heavy = {"state": 24 * particles, "pressure": 24 * particles + 3 * encoder,
                  "total": 24 * particles + 3 * encoder}
    assert compact_points.with_device_encoder(grid_heavy, particles) == grid_heavy["total"]


def test_cpu_stages_have_the_state_the_guard_adds_to():
    """Both estimates the guard combines give their state (the dense one here on the CPU;
    the GPU one is the same dict, ``tests/gpu/test_encoder_memory_gpu.py``)."""
    res = 32
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    stages = flip_memory(spec, 100_000, parts=True, xp=np)
    assert 0 < stages["state"] <= stages["total"]
