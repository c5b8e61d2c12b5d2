"""GPU particle level set (cuda/flip_surface.cu) == NumPy reference on fresh random
inputs: both take the same particles into every node's sums (float32 offsets rounded
alike), so φ agrees to float32 accuracy; smoothing rounds alike step for step."""

import numpy as np
import pytest

from tests.unit.test_flip_surface import seeded_ball
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip.surface import liquid_volume, particle_level_set
from voxfx.kernels.grid import GridSpec


def random_spec(rng):
    h = float(rng.uniform(0.02, 0.1))
    return GridSpec(tuple(rng.uniform(-3, 3, 3)), h, tuple(rng.integers(17, 53, 3)))


def random_particles(spec, rng):
    """Blobs of liquid, a spray of loose particles, some just off the grid and some far away."""
    lo, hi = np.asarray(spec.origin), np.asarray(spec.upper)
    h = spec.voxel_size
    parts = [seeded_ball(rng.uniform(lo, hi), float(rng.uniform(2, 8)) * h, float(rng.uniform(0.4, 1.0)) * h, rng)
             for _ in range(int(rng.integers(1, 4)))]
    parts.append(rng.uniform(lo - 3 * h, hi + 3 * h, (int(rng.integers(50, 500)), 3)))
    parts.append(rng.uniform(lo - 50 * h, hi + 50 * h, (20, 3)))
    return np.concatenate(parts).astype(np.float32)


def both(pos, spec, radius, kernel_radius=None, smooth_iterations=1):
    import cupy

    cpu = particle_level_set(pos, spec, radius, kernel_radius, xp=np, smooth_iterations=smooth_iterations)
    r = radius if np.ndim(radius) == 0 else cupy.asarray(radius)
    gpu = particle_level_set(cupy.asarray(pos), spec, r, kernel_radius, xp=cupy, smooth_iterations=smooth_iterations)
    assert isinstance(gpu, cupy.ndarray) and gpu.dtype == cupy.float32 and gpu.shape == cpu.shape
    return cpu, gpu.get()


def random_scene(rng, tries=50):
    """A random grid, particles, radius and kernel radius whose NumPy level set has both liquid
    and untouched background nodes (a kernel wider than a small grid can reach every node: a
    scene with nothing to cull, drawn again — call 2 of the fifteenth session drew one)."""
    for _ in range(tries):
        spec = random_spec(rng)
        pos = random_particles(spec, rng)
        radius = float(rng.uniform(0.4, 1.2)) * spec.voxel_size
        kernel = float(rng.uniform(1.5, 5.0)) * radius
        cpu = particle_level_set(pos, spec, radius, kernel, xp=np, smooth_iterations=0)
        band = np.float32(3 * spec.voxel_size)
        if (cpu < 0).any() and (cpu == band).any():
            return spec, pos, radius, kernel
    raise AssertionError(f"no scene with both liquid and background in {tries} draws")


@pytest.mark.parametrize("cells_per_radius", [1, 2, 2, 3])
def test_random_particles_match_cpu(cells_per_radius, monkeypatch):
    """Whatever the binning cell size, the culled gather takes every particle within R."""
    from voxfx.kernels.flip import surface_gpu

    monkeypatch.setattr(surface_gpu, "CELLS_PER_RADIUS", cells_per_radius)
    rng = np.random.default_rng()
    spec, pos, radius, kernel = random_scene(rng)
    cpu, gpu = both(pos, spec, radius, kernel, smooth_iterations=0)
    band = np.float32(3 * spec.voxel_size)
    # The same nodes see particles (bit-equal background elsewhere) ...
    np.testing.assert_array_equal(cpu == band, gpu == band)
    # ... and their sums agree to float32 accuracy.
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=2e-5 * kernel)


def test_per_particle_radii_and_smoothing_match_cpu():
    rng = np.random.default_rng()
    spec = random_spec(rng)
    pos = random_particles(spec, rng)
    radii = rng.uniform(0.3, 1.0, len(pos)).astype(np.float32) * spec.voxel_size
    cpu, gpu = both(pos, spec, radii, smooth_iterations=3)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-4 * spec.voxel_size)
    assert liquid_volume(gpu, spec) == pytest.approx(liquid_volume(cpu, spec), rel=1e-3)


def test_smoothing_alone_rounds_like_cpu():
    """Same input field, same float32 operations: the smoothing steps agree to the last bits."""
    import cupy

    from voxfx.kernels.flip import surface, surface_gpu

    rng = np.random.default_rng()
    spec = random_spec(rng)
    phi = rng.uniform(-0.2, 0.2, spec.array_shape).astype(np.float32)
    band = 0.15
    cpu = surface._smooth_cpu(phi, spec, band)
    out = cupy.empty(spec.array_shape, cupy.float32)
    nx, ny, nz = spec.shape
    surface_gpu._K.launch("smooth_level_set", spec.voxel_count, (
        cupy.asarray(phi), np.int32(nx), np.int32(ny), np.int32(nz), surface.SMOOTH_STEP,
        np.float32(surface.FLAT_GRADIENT * spec.voxel_size) ** 2, np.float32(band), out))
    np.testing.assert_array_equal(out.get(), cpu)


def test_liquid_volume_on_the_device_matches_cpu():
    import cupy

    rng = np.random.default_rng()
    spec = random_spec(rng)
    pos = random_particles(spec, rng)
    phi = particle_level_set(pos, spec, spec.voxel_size, xp=np)
    assert liquid_volume(cupy.asarray(phi), spec) == pytest.approx(liquid_volume(phi, spec), rel=1e-9)


def test_empty_and_far_away_particles_give_background():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (9, 7, 8))
    for pos in (np.zeros((0, 3), np.float32), np.full((10, 3), 100.0, np.float32)):
        phi = particle_level_set(cupy.asarray(pos), spec, 0.05, xp=cupy)
        assert (phi.get() == np.float32(0.15)).all()


def test_non_finite_particles_are_refused():
    import cupy

    pos = cupy.zeros((6, 3), cupy.float32)
    pos[4, 0] = cupy.inf
    with pytest.raises(InputError, match="1 particles have non-finite"):
        particle_level_set(pos, GridSpec((0, 0, 0), 0.1, (4, 4, 4)), 0.1, xp=cupy)
