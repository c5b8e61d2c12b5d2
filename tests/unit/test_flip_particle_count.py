"""Particle count control (``kernels/flip/particle_count.py``): at the end of a frame a cell
holding more than the limit keeps about the limit, every other cell keeps all its particles,
the same on the dense and the sparse solver; 0 keeps every particle; the choice is
deterministic (a frame stepped twice from one state deletes the same particles)."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import particle_count
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def test_limit_is_at_least_twice_the_seeded_count():
    assert particle_count.limit_of(FlipSettings()) == 0  # off by default
    assert particle_count.limit_of(FlipSettings(max_particles_per_cell=32)) == 32
    assert particle_count.limit_of(FlipSettings(max_particles_per_cell=5)) == 16
    assert particle_count.limit_of(FlipSettings(max_particles_per_cell=100, particles_per_cell=27)) == 100


def test_a_crowded_cell_keeps_about_the_limit_and_the_others_all():
    rng = np.random.default_rng()
    cells = np.concatenate([np.repeat(np.arange(50), 20), np.full(20000, 50), np.full(33, 51), np.full(32, 52)])
    order = rng.permutation(len(cells))
    counts = particle_count.counts_of(cells[order].astype(np.int64), 60, np)
    keep = particle_count.keep_mask(counts, 32, int(rng.integers(1 << 20)), np)
    kept = np.bincount(cells[order][keep], minlength=60)
    assert (kept[:50] == 20).all() and kept[52] == 32  # at most the limit: all stay
    assert 10 <= kept[50] <= 60  # 20,000 → 32 on average (binomial, sd 5.7)
    assert kept[51] <= 33
    assert particle_count.counts_of(np.array([-1, 3, 3], np.int64), 5, np).tolist() == [1, 2, 2]


def test_the_choice_is_an_integer_function_of_index_count_and_frame():
    counts = np.full(5000, 4000, np.int64)
    a = particle_count.keep_mask(counts, 32, 7, np)
    b = particle_count.keep_mask(counts, 32, 7, np)
    c = particle_count.keep_mask(counts, 32, 8, np)
    assert (a == b).all() and (a != c).any() and 0 < a.sum() < 100


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_pile_in_one_cell_is_thinned_at_the_frames_end(sparse):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.8, 0.2))

    def run(most):
        # the count control alone: the density correction (on by default) would spread the pile first
        sim = FlipSimulation(spec, FlipSettings(max_particles_per_cell=most, density_correction=0.0), v, t,
                             sparse=sparse)
        n = len(sim.pos)
        pile = np.random.default_rng(3).uniform(0.41, 0.49, (3000, 3)).astype(np.float32)
        pile[:, 2] = np.float32(0.05)  # one cell, (4, 4, 0), on the floor
        sim.pos = np.concatenate([sim.pos, pile])
        sim.vel = np.concatenate([sim.vel, np.zeros_like(pile)])
        stats = sim.step(1 / 24)
        return sim, n, stats

    kept, n, stats = run(32)
    cells = np.floor(kept.pos / 0.1).astype(np.int64)
    per_cell = np.unique((cells[:, 2] * 8 + cells[:, 1]) * 8 + cells[:, 0], return_counts=True)[1]
    assert stats["limited"] > 2500 and stats["particles"] == len(kept.pos) == n + 3000 - stats["limited"]
    assert per_cell.max() < 100 and kept.limited == stats["limited"]
    again, _, stats2 = run(32)
    assert np.array_equal(again.pos, kept.pos) and stats2["limited"] == stats["limited"]
    every, _, stats0 = run(0)
    assert stats0["limited"] == 0 and len(every.pos) == n + 3000


def test_passes_of_a_chunk_give_the_mask_of_one_pass(monkeypatch):
    """``thin`` counts and decides ``CHUNK`` particles a pass (its temporaries stay small): the
    same mask as all particles at once, the hash numbering them globally."""
    rng = np.random.default_rng()
    cells = np.concatenate([rng.integers(0, 40, 3000), np.full(4000, 7), np.full(9, -1)]).astype(np.int64)
    rng.shuffle(cells)
    whole = particle_count.keep_mask(particle_count.counts_of(cells, 40, np), 32, 11, np)
    monkeypatch.setattr(particle_count, "CHUNK", 1000)
    chunked = particle_count.thin(lambda lo, hi: cells[lo:hi], len(cells), 40, 32, 11, np)
    assert np.array_equal(chunked, whole) and 1000 < whole.sum() < 1600  # 40 cells over 32: ~32 each (+ 9 alone)
