"""A dam break several test modules compare against, run once a process
(``functools.cache``): the same scene, seed and steps wherever it is asked for."""

import functools

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

# 24 × 10 × 16 cells of 5 cm, a 0.4 × 0.5 × 0.5 m column in the corner
ONE_SECOND = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16)), box((0.0, 0.0, 0.0), (0.4, 0.5, 0.5))


@functools.cache
def sparse_after_one_second(seed=4):
    """The full-particle sparse dam break after 1 s (60 steps of 1/60 s): (centre of
    mass, particles, kinetic energy)."""
    spec, water = ONE_SECOND
    sim = FlipSimulation(spec, FlipSettings(seed=seed), *water, xp=np, sparse=True)
    for _ in range(60):
        sim.step(1 / 60)
    return sim.centre_of_mass(), len(sim.pos), sim.kinetic_energy()
