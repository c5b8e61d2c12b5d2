"""Particle count control on the GPU (``kernels/flip/particle_count.py``): the keep mask is
the NumPy reference's bit for bit, each particle's count on the sparse solver's bricks is the
number of particles in its lattice cell (a brute force over the positions), and a pile
injected into one cell is thinned at the frame's end on both solvers."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import particle_count
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def test_keep_mask_is_the_numpy_references():
    import cupy

    rng = np.random.default_rng()
    counts = rng.integers(1, 100000, 300001).astype(np.int64)
    for frame in (0, 1, int(rng.integers(1 << 30))):
        want = particle_count.keep_mask(counts, 32, frame, np)
        got = particle_count.keep_mask(cupy.asarray(counts), 32, frame, cupy)
        assert np.array_equal(backend.to_numpy(got), want)


def scene(sparse, boundary="closed"):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 20, 16))
    v, t = box((0.0, 0.0, 0.0), (0.6, 0.5, 0.3))
    import cupy

    extra = {"boundary": boundary} if sparse else {}  # the dense solver's box is closed
    settings = FlipSettings(max_particles_per_cell=32, density_correction=0.0)  # the count control alone
    sim = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=sparse, **extra)
    pile = np.random.default_rng(5).uniform(0.201, 0.249, (5000, 3)).astype(np.float32)
    pile[:, 2] = np.float32(0.02)  # one floor cell, (4, 4, 0)
    sim.pos = cupy.concatenate([sim.pos, cupy.asarray(pile)])
    sim.vel = cupy.concatenate([sim.vel, cupy.zeros((len(pile), 3), cupy.float32)])
    return sim


@pytest.mark.parametrize("boundary", ["closed", "open"])
def test_counts_on_the_bricks_are_the_lattice_cells(boundary):
    import cupy

    sim = scene(True, boundary)
    sim.step(1 / 24)  # the bricks around the liquid
    pos = backend.to_numpy(sim.pos)
    cells = sim._particle_cells(0, len(sim.pos))
    got = backend.to_numpy(particle_count.counts_of(cells, sim._cell_count(), cupy))
    ijk = np.floor(pos / np.float32(0.05)).astype(np.int64)
    if boundary == "closed":
        ijk = np.clip(ijk, 0, np.array([23, 19, 15]))
    _, inverse, per = np.unique(ijk, axis=0, return_inverse=True, return_counts=True)
    assert (backend.to_numpy(cells) >= 0).all()
    assert np.array_equal(got, per[inverse.reshape(-1)])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_pile_is_thinned_at_the_frames_end(sparse):
    sim = scene(sparse)
    n = len(sim.pos)
    stats = sim.step(1 / 24)
    pos = backend.to_numpy(sim.pos)
    ijk = np.floor(pos / np.float32(0.05)).astype(np.int64)
    per = np.unique(ijk, axis=0, return_counts=True)[1]
    assert stats["limited"] > 4000 and len(pos) == n - stats["limited"]
    assert per.max() < 100
