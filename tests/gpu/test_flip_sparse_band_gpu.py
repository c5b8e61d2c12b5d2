"""Narrow-band sparse FLIP (issue 12, experimental) on the GPU against the CPU reference."""

import numpy as np

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import liquid_volume
from voxfx.kernels.grid import GridSpec


def test_gpu_narrow_band_still_water_matches_cpu():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (10, 10, 10))
    water = box((0.0, 0.0, 0.0), (1.0, 1.0, 0.7))
    sims = [FlipSimulation(spec, FlipSettings(narrow_band=2), *water, xp=xp, sparse=True) for xp in (np, cupy)]
    for _ in range(10):
        for sim in sims:
            sim.step(1 / 60)
    cpu, gpu = sims
    assert np.array_equal(backend.to_numpy(gpu.band.deep), cpu.band.deep)
    assert len(gpu.pos) == len(cpu.pos) and gpu.liquid_particles() == cpu.liquid_particles()
    assert np.abs(gpu.particles_host()["velocity"]).max() < 0.05
    assert liquid_volume(gpu.level_set(), gpu.surface_spec) == \
        pytest_approx(liquid_volume(cpu.level_set(), cpu.surface_spec))


def pytest_approx(v):
    import pytest

    return pytest.approx(v, rel=1e-3)


def test_gpu_narrow_band_dam_break_keeps_the_full_runs_volume_and_no_particle_in_deep_cells():
    import cupy

    from voxfx.kernels.flip.sparse_band_frame import _isin

    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    full, band = (FlipSimulation(spec, FlipSettings(narrow_band=nb), *water, xp=cupy, sparse=True) for nb in (0, 3))
    volume = len(full.pos) * h ** 3 / 8
    for frame in range(12):
        full.step(1 / 24)
        band.step(1 / 24)
        assert not bool(_isin(band._lattice_cells_of_particles(), band.band.deep, cupy).any())
        if frame in (5, 11):
            v_full = liquid_volume(full.level_set(), full.surface_spec) / volume
            v_band = liquid_volume(band.level_set(), band.surface_spec) / volume
            assert abs(v_band - v_full) < 0.02, (frame, v_full, v_band)
    assert band.liquid_particles() == pytest_approx_count(len(full.pos))


def pytest_approx_count(n):
    import pytest

    return pytest.approx(n, rel=0.06)


def test_gpu_narrow_band_dam_break_keeps_the_full_runs_centre_of_mass_after_one_second():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (0.4, 0.5, 0.5))
    full, band = (FlipSimulation(spec, FlipSettings(seed=4, narrow_band=nb), *water, xp=cupy, sparse=True)
                  for nb in (0, 4))
    for _ in range(60):
        full.step(1 / 60)
        band.step(1 / 60)
    assert len(band.band.deep) > 0
    assert np.linalg.norm(band.centre_of_mass() - full.centre_of_mass()) < 0.01


def test_gpu_keyed_band_update_matches_the_row_list_update():
    """The band's update on packed keys (bounded memory at 65M particles) keeps the deep
    cells, φ and particles of the row-list update it replaced, on the device, with the
    candidates dilated (one substep a frame)."""
    import cupy

    from tests.unit.test_flip_sparse_band_memory import RowListBand

    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    settings = FlipSettings(narrow_band=4, seed=2, max_substeps=1)
    new, old = (FlipSimulation(spec, settings, *water, xp=cupy, sparse=True) for _ in range(2))
    old.band = RowListBand(4, cupy)
    for frame in range(6):
        new.step(1 / 24)
        old.step(1 / 24)
        for name in ("deep", "lattice", "phi", "mass"):
            assert np.array_equal(backend.to_numpy(getattr(new.band, name)),
                                  backend.to_numpy(getattr(old.band, name))), (frame, name)
        assert np.array_equal(backend.to_numpy(new.pos), backend.to_numpy(old.pos)), frame
    assert max(old.band.reaches) > 2 and len(new.band.deep) > 0
