"""Narrow-band sparse FLIP (issue 12; experimental, kernel-only): particles only within N
cells under the surface, the deep interior carried by the grid."""

import numpy as np
import pytest

from tests.meshes import box
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


def test_a_narrow_band_run_resumes_from_its_checkpoint():
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
