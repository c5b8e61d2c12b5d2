"""Whole sparse runs on the device under each value of a switch (an environment variable),
for the GPU tests that check a switch changes no particle bit: a dam break (FLIP or APIC,
a fresh seed) of 12 substeps per value, every particle array compared byte for byte."""

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def assert_runs_agree(monkeypatch, apic, variable, values, **settings):
    """Runs the dam break once with *variable* set to each of *values*: the same particle
    state bits (positions, velocities, APIC's C) as the first run. *settings*: more
    ``FlipSettings`` fields (``time_centred_advection=True``)."""
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.04, (40, 16, 24))
    v, t = box((0.0, 0.0, 0.0), (0.6, 0.64, 0.5))
    settings = FlipSettings(seed=int(np.random.default_rng().integers(1000)), apic=apic, **settings)
    runs = []
    for value in values:
        monkeypatch.setenv(variable, value)
        sim = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)
        for _ in range(12):
            sim.substep(1 / 120)
        state = sim.particles_host()
        if apic:
            state["c"] = cupy.asnumpy(sim.c)
        runs.append(state)
    first = runs[0]
    assert len(first["position"]) > 10000
    assert np.abs(first["velocity"]).max() > 0.1  # the liquid moved
    for other in runs[1:]:
        assert sorted(other) == sorted(first)
        for key in first:
            assert np.array_equal(other[key].view(np.uint8), first[key].view(np.uint8)), key
