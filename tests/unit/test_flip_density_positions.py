"""The position-only density correction (``kernels/flip/density_positions.py``, issue 24; an
environment switch of the dense NumPy solver): it spreads a crowded cell without touching a
velocity, alone and in a substep; the sparse solver refuses it; a bad value is refused."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import density_positions
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

from .test_flip_density import CROWDED, H, crowded_tank


def occupied(pos):
    return len(np.unique(np.floor(pos / np.float32(H)).astype(np.int64), axis=0))


def test_position_correction_spreads_without_touching_velocities(monkeypatch):
    sim, _ = crowded_tank(0.0, False)
    sim.vel = np.random.default_rng(2).normal(0, 1e-3, sim.vel.shape).astype(np.float32)
    before = occupied(sim.pos)
    mine = (np.floor(sim.pos / np.float32(H)).astype(np.int64) == CROWDED).all(axis=1)
    vel = sim.vel.copy()
    density_positions.correct_positions(sim, 1.0)
    assert np.array_equal(sim.vel, vel)
    assert occupied(sim.pos) >= before
    left = (np.floor(sim.pos / np.float32(H)).astype(np.int64) == CROWDED).all(axis=1)
    assert left.sum() < 0.8 * mine.sum()  # the triple-full cell gave particles to its neighbours


def test_position_correction_in_a_substep(monkeypatch):
    sims = []
    for beta in ("", "1"):
        monkeypatch.setenv("VOXFX_DENSITY_POSITIONS", beta)
        sim, crowded = crowded_tank(0.0, False)
        sim.substep(0.01)
        sims.append(sim)
    count = [int((np.floor(s.pos / np.float32(H)).astype(np.int64) == CROWDED).all(axis=1).sum()) for s in sims]
    assert count[1] < 0.8 * count[0], count


@pytest.mark.parametrize("name", ["VOXFX_DENSITY_POSITIONS"])
def test_the_switch_is_refused_by_the_sparse_solver_and_checked(monkeypatch, name):
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4))
    spec = GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8))
    monkeypatch.setenv(name, "1")
    with pytest.raises(NotImplementedError, match="dense NumPy"):
        FlipSimulation(spec, FlipSettings(sparse=True), v, t, xp=np)
    FlipSimulation(spec, FlipSettings(), v, t, xp=np)  # the dense NumPy solver takes them
    monkeypatch.setenv(name, "-1")
    with pytest.raises(InputError, match=name):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np)
