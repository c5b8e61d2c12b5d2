"""Narrow-band sparse FLIP (issue 12; experimental, kernel-only): particles only within N
cells under the surface, the deep interior carried by the grid."""

import numpy as np
import pytest

from tests.meshes import box
from tests.unit.dam_break_runs import ONE_SECOND, sparse_after_one_second
from voxfx.kernels.errors import InputError, VoxFXError
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_sim import SparseFlipSimulation
from voxfx.kernels.flip.surface import liquid_volume
from voxfx.kernels.grid import GridSpec

SPEC = GridSpec((0.0, 0.0, 0.0), 0.1, (10, 10, 10))
WATER = box((0.0, 0.0, 0.0), (1.0, 1.0, 0.7))


def test_still_water_with_a_narrow_band_stays_still_with_a_third_of_the_particles():
    full = FlipSimulation(SPEC, FlipSettings(), *WATER, xp=np, sparse=True)
    band = FlipSimulation(SPEC, FlipSettings(narrow_band=2), *WATER, xp=np, sparse=True)
    n = len(full.pos)
    for _ in range(20):
        full.step(1 / 60)
        stats = band.step(1 / 60)
    assert stats["particles"] == len(band.pos) < n / 3  # 7 layers of 8 particles per cell, 2 kept
    assert len(band.band.deep) == 10 * 10 * 5  # the floor and walls are no surface
    assert band.liquid_particles() == n  # nothing lost or made
    assert np.abs(band.particles_host()["velocity"]).max() < 0.05
    assert np.abs(band.centre_of_mass() - full.centre_of_mass()).max() < 0.01
    v_full = liquid_volume(full.level_set(), full.surface_spec)
    v_band = liquid_volume(band.level_set(), band.surface_spec)
    assert v_band == pytest.approx(v_full, rel=0.01)  # deep cells are liquid in the surface, up to the walls


def test_a_narrow_band_run_resumes_from_its_checkpoint(monkeypatch):
    # index by index within 1e-4 m: the band's resume is within rounding, which a sort may turn into
    # two particles' indices swapped (kernels/flip/particle_sort.py)
    monkeypatch.setenv("VOXFX_SPARSE_PARTICLE_SORT", "off")
    settings = FlipSettings(narrow_band=2, seed=5)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (12, 6, 8))
    water = box((0.0, 0.0, 0.0), (0.6, 0.6, 0.6))
    a = FlipSimulation(spec, settings, *water, xp=np, sparse=True)
    for _ in range(3):
        a.step(1 / 60)
    state = a.checkpoint()
    assert len(state["deep"]) > 0 and state["deep_faces"].shape == (len(state["deep"]), 3)
    b = FlipSimulation(spec, settings, *water, xp=np, sparse=True)
    b.restore(state)
    for _ in range(3):
        a.step(1 / 60)
        b.step(1 / 60)
    assert len(a.pos) == len(b.pos)
    assert np.abs(a.pos - b.pos).max() < 1e-4
    bad = dict(state, deep_mass=state["deep_mass"][:-1])
    with pytest.raises(ValueError, match="deep_mass"):
        b.restore(bad)


def test_the_settings_choose_the_solver_and_its_options():
    assert isinstance(FlipSimulation(SPEC, FlipSettings(sparse=True), *WATER, xp=np), SparseFlipSimulation)
    sim = FlipSimulation(SPEC, FlipSettings(sparse=True, boundary="open"), *WATER, xp=np)
    assert sim.boundary == "open"
    with pytest.raises(VoxFXError, match="sparse solver"):
        FlipSimulation(SPEC, FlipSettings(narrow_band=3), *WATER, xp=np)
    with pytest.raises(VoxFXError, match="sparse solver"):
        FlipSimulation(SPEC, FlipSettings(boundary="open"), *WATER, xp=np)
    with pytest.raises(InputError, match="narrow band"):
        FlipSimulation(SPEC, FlipSettings(narrow_band=1), *WATER, xp=np, sparse=True)


def dam_break(narrow_band, seed=0):
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    return FlipSimulation(spec, FlipSettings(narrow_band=narrow_band, seed=seed), *water, xp=np, sparse=True)


def meshed_volume(sim):
    return liquid_volume(sim.level_set(), sim.surface_spec)


def test_a_narrow_band_dam_break_keeps_the_full_runs_volume():
    """The band's meshed volume follows the full-particle run's within 2 points of the
    water over ½ s (the grid's level set, not a whole cell's count, refills the band:
    before it the band ran 1.4 and 2.6 points below at ¼ and ½ s)."""
    full, band = dam_break(0), dam_break(3)
    water = len(full.pos) * 0.05 ** 3 / 8
    assert band.liquid_particles() == len(full.pos)
    for frame in range(12):
        full.step(1 / 24)
        band.step(1 / 24)
        if frame in (5, 11):
            v_full, v_band = meshed_volume(full) / water, meshed_volume(band) / water
            assert abs(v_band - v_full) < 0.02, (frame, v_full, v_band)
    assert 0 < len(band.band.deep) and len(band.pos) < 0.9 * len(full.pos)
    assert band.liquid_particles() == pytest.approx(len(full.pos), rel=0.06)


def test_no_particle_stays_in_a_deep_cell():
    """Particles that flow into the deep region are deleted (its cells stand for a full
    cell each): none is counted twice."""
    from voxfx.kernels.flip.sparse_band_frame import _isin

    sim = dam_break(3, seed=1)
    for _ in range(6):
        sim.step(1 / 24)
        cells = sim._lattice_cells_of_particles()
        assert len(sim.band.deep) and not _isin(cells, sim.band.deep, np).any()


def test_deep_still_water_stays_still_with_a_three_cell_band():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 14))
    water = box((0.0, 0.0, 0.0), (0.8, 0.8, 1.1))
    sim = FlipSimulation(spec, FlipSettings(narrow_band=3), *water, xp=np, sparse=True)
    n = len(sim.pos)
    v0 = meshed_volume(sim)
    for _ in range(30):
        sim.step(1 / 60)
    assert len(sim.band.deep) == 8 * 8 * 8  # 11 layers, the top 3 in the band
    assert sim.liquid_particles() == n
    assert np.abs(sim.particles_host()["velocity"]).max() < 0.05
    assert meshed_volume(sim) == pytest.approx(v0, rel=0.01)


def test_the_level_set_samples_a_linear_field_exactly_and_leaves_walls_out():
    """Trilinear over the stored cells: a linear φ comes back exactly inside; at a wall
    the missing corners are left out (not air), so a level field stays level."""
    sim = FlipSimulation(SPEC, FlipSettings(narrow_band=2), *WATER, xp=np, sparse=True)
    band = sim.band
    ijk = np.stack(np.meshgrid(*(np.arange(10),) * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    band.lattice = ijk.astype(np.int64)
    band.phi = (ijk[:, 2] + 0.5 - 6.25).astype(np.float32)  # surface at z = 6.25 cells
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 9.5, (200, 3)).astype(np.float32)
    assert np.allclose(band.sample(sim, x), x[:, 2] - 6.25, atol=1e-5)
    edge = np.array([[0.1, 0.2, 3.0], [9.9, 9.7, 3.0]], np.float32)  # within half a cell of the walls
    assert np.allclose(band.sample(sim, edge), 3.0 - 6.25, atol=1e-5)
    far = np.array([[5.0, 5.0, 30.0]], np.float32)  # beyond the stored cells: air
    assert band.sample(sim, far)[0] > 0


@pytest.mark.slow
@pytest.mark.parametrize("cells", [3, 4])
def test_a_narrow_band_dam_break_keeps_the_full_runs_centre_of_mass_after_one_second(cells):
    """The sparse/dense tolerance of the issue (1 cm after 1 s of the same dam break):
    measured 0.5–0.7 cm (3 cells) and 0.4 cm (4 cells) over seeds 1, 4 and 9; full runs of
    different seeds differ by 0.4 cm. (At ½ s the band runs 1.5–2 cm (3) and 0.8–1 cm (4)
    off: its deep cells count as full cells while the band's lowest cells are short of
    particles that flowed into them.)"""
    spec, water = ONE_SECOND
    full_centre, full_particles, _ = sparse_after_one_second(seed=4)  # run once for both widths
    band = FlipSimulation(spec, FlipSettings(seed=4, narrow_band=cells), *water, xp=np, sparse=True)
    for _ in range(60):
        band.step(1 / 60)
    assert len(band.band.deep) > 0
    assert np.linalg.norm(band.centre_of_mass() - full_centre) < 0.01
    assert band.liquid_particles() == pytest.approx(full_particles, rel=0.05)
