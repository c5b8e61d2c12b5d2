"""The level set's interior skip (kernels/flip/surface_interior.py) on the device: every GPU
way (lean, bricks, legacy) gives the same bits with it on, the same skipped nodes as the
NumPy reference (−band, or the box cut's d_box by the walls) and φ to float32 accuracy
elsewhere; on a GPU-stepped dam break the skip keeps the signs, the nodes beside a crossing
and the volume (test_flip_surface_interior.py's check)."""

import numpy as np
import pytest

from tests.unit.test_flip_surface import seeded_ball, seeded_pool
from tests.unit.test_flip_surface_interior import assert_surface_kept
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import closed_level_set, particle_level_set, surface_grid, surface_radii
from voxfx.kernels.grid import GridSpec


def every_way(monkeypatch, call):
    """φ (NumPy) of *call* in each GPU way, checked equal to the bit; the first."""
    out = []
    for mode in ("lean", "bricks", "legacy"):
        monkeypatch.setenv("VOXFX_LEVEL_SET", mode)
        out.append(call().get())
    for mode, phi in zip(("bricks", "legacy"), out[1:]):
        assert phi.tobytes() == out[0].tobytes(), mode
    return out[0]


@pytest.mark.parametrize("smooth", [0, 1])
def test_closed_skip_matches_the_cpu_in_every_way(monkeypatch, smooth):
    import cupy

    rng = np.random.default_rng()
    h = float(rng.uniform(0.02, 0.06))
    spec = GridSpec(tuple(rng.uniform(-2, 2, 3)), h, (30, 26, 34))
    lo = np.asarray(spec.origin)
    parts = [seeded_pool(26 * h, 14 * h, 14 * h, h / 2, rng) + lo,
             seeded_ball(lo + [15 * h, 13 * h, 24 * h], 7 * h, h / 2, rng), rng.uniform(lo, spec.upper, (300, 3))]
    pos = np.clip(np.concatenate(parts), lo + 1e-3 * h, np.asarray(spec.upper) - 1e-3 * h).astype(np.float32)
    r, R = surface_radii(h, 8)
    band = np.float32(3 * h)
    gpu = every_way(monkeypatch, lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy,
                                                          smooth_iterations=smooth, interior=True))
    cpu = closed_level_set(pos, spec, r, R, xp=np, smooth_iterations=smooth, interior=True)
    off = closed_level_set(pos, spec, r, R, xp=np, smooth_iterations=smooth, interior=False)
    assert (cpu == -band).sum() > 100
    np.testing.assert_array_equal(gpu == -band, cpu == -band)
    # smoothed: 1e-4 h, and at least 32 float32 steps of the box's largest coordinate (φ is made from
    # positions of up to ~3.3 m here: at h ≈ 0.038 one node of 46,080 differed by 3.86e-6 against
    # 3.79e-6, 16 steps of 3.3; session 17's final call)
    coords = float(np.abs(np.concatenate([lo, np.asarray(spec.upper)])).max())
    smoothed = max(1e-4 * h, 32 * float(np.spacing(np.float32(coords))))
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=2e-5 * R if smooth == 0 else smoothed)
    assert_surface_kept(off, cpu, surface_grid(spec))


def test_open_skip_with_radii_matches_the_cpu_in_every_way(monkeypatch):
    import cupy

    rng = np.random.default_rng()
    h = 0.05
    pos = np.concatenate([seeded_ball(np.array([0.9, 0.9, 0.9]), 12 * h, h / 2, rng),
                          rng.uniform(0.2, 1.6, (400, 3))]).astype(np.float32)
    spec = GridSpec.around(pos.min(0), pos.max(0), h, padding=4)
    radii = (rng.uniform(0.4, 0.5, len(pos)) * h).astype(np.float32)
    band = np.float32(3 * h)
    gpu = every_way(monkeypatch, lambda: particle_level_set(cupy.asarray(pos), spec, cupy.asarray(radii), xp=cupy,
                                                            interior=True))
    cpu = particle_level_set(pos, spec, radii, xp=np, interior=True)
    assert (cpu == -band).sum() > 0
    np.testing.assert_array_equal(gpu == -band, cpu == -band)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-4 * h)


def test_gpu_dam_break_keeps_its_surface_with_the_skip(monkeypatch):
    """bench/flip.py's dam break at 64³ (~0.5M particles) stepped 6 substeps on the sparse
    solver; ``level_set`` (the switch read from the environment) off and on."""
    import cupy

    from tests.meshes import box

    h = 1 / 64
    spec = GridSpec((0.0, 0.0, 0.0), h, (64, 64, 64))
    sim = FlipSimulation(spec, FlipSettings(), *box((0.0, 0.0, 0.0), (0.4, 0.4, 0.8)), xp=cupy, sparse=True)
    for _ in range(6):
        sim.substep(1 / 120)
    phis = []
    for skip in ("0", "1"):
        monkeypatch.setenv("VOXFX_LEVEL_SET_INTERIOR", skip)
        phis.append(cupy.asnumpy(sim.level_set(on_device=True)))
    off, on = phis
    assert (on != off).sum() > 0.1 * (off < 0).sum()  # a good part of the liquid's nodes skipped: a real test
    assert_surface_kept(off, on, sim.surface_spec)
