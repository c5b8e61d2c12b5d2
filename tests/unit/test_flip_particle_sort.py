"""The sparse solver's particle sort (``particle_sort``, VOXFX_SPARSE_PARTICLE_SORT) on the CPU
reference: the keys' order, the stable permutation, the frames it runs on, and a resumed
bake with the sort on against an uninterrupted one."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import particle_sort
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

SPEC = GridSpec((0.5, -1.0, 0.0), 0.1, (20, 12, 17))


def lattice_order(pos, spec):
    """The expected order by hand: lattice brick z, y, x, then the cell's (lz·8 + ly)·8 + lx,
    ties by index (non-finite last)."""
    rows = []
    for i, p in enumerate(pos):
        if not np.isfinite(p).all():
            rows.append((1, 0, 0, 0, 0, i))
            continue
        c = np.clip(np.floor((p - np.float32(spec.origin)) / np.float32(spec.voxel_size)).astype(np.int64), 0,
                    np.asarray(spec.shape) - 1)
        b, r = c // 8, c % 8
        rows.append((0, b[2], b[1], b[0], (r[2] * 8 + r[1]) * 8 + r[0], i))
    return np.asarray([row[-1] for row in sorted(rows)])


def test_closed_keys_put_particles_in_brick_then_cell_order_stably():
    rng = np.random.default_rng(3)
    pos = (np.asarray(SPEC.origin) + rng.uniform(-0.05, 1.0, (600, 3)) * np.asarray(SPEC.shape) * 0.1).astype(
        np.float32)
    pos[rng.integers(0, 600, 40)] = pos[rng.integers(0, 600, 40)]  # shared cells: ties kept by index
    pos[[5, 77]] = np.nan
    order = particle_sort.brick_order(pos, SPEC, True, 0.0, np)
    assert np.array_equal(order, lattice_order(pos, SPEC))
    assert particle_sort.brick_keys(pos, SPEC, True, 0.0, np).dtype == np.int32


def test_open_keys_count_from_below_the_box_and_clamp_beyond_the_kill_distance():
    lo, bricks = particle_sort.key_frame(SPEC, False, 0.25)  # 3 cells + 1: bricks from −8
    assert lo == [-8, -8, -8] and bricks == [(20 + 3 - 1 + 8) // 8 + 1, (12 + 3 + 7) // 8 + 1, (17 + 3 + 7) // 8 + 1]
    h = np.float32(0.1)
    o = np.asarray(SPEC.origin, np.float32)
    pos = np.stack([o + h * np.float32(k) + h / 2 for k in (-3, 5, -20, 40)]).astype(np.float32)
    keys = particle_sort.brick_keys(pos, SPEC, False, 0.25, np)
    assert keys[2] == 0  # clamped onto the first cell
    assert list(np.argsort(keys, kind="stable")) == [2, 0, 1, 3]


def test_the_sort_runs_every_k_frames_and_reorders_every_particle_array(monkeypatch):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4))
    sims = [FlipSimulation(spec, FlipSettings(apic=True), v, t, xp=np, sparse=True) for _ in range(2)]
    shuffle = np.random.default_rng(1).permutation(len(sims[0].pos))
    for sim in sims:
        particle_sort.permute(sim, shuffle)
    sorting, plain = sims

    def step(sim, way):
        monkeypatch.setenv(particle_sort.SWITCH, way)
        return sim.step(1 / 60)["sorted"]

    assert not step(sorting, "2") and not step(plain, "off")  # frame 1 of every 2: the same run
    assert np.array_equal(sorting.pos, plain.pos) and not np.array_equal(sorting.pos, sorting.pos[shuffle])
    assert step(sorting, "2") and not step(plain, "off")
    order = particle_sort.brick_order(plain.pos, spec, True, plain.kill_distance, np)
    assert not np.array_equal(order, np.arange(len(order)))
    for a, b in ((sorting.pos, plain.pos), (sorting.vel, plain.vel), (sorting.c, plain.c)):
        assert np.array_equal(a, b[order])  # the same particles, each array through the one order
    keys = particle_sort.brick_keys(sorting.pos, spec, True, sorting.kill_distance, np)
    assert (np.diff(keys) >= 0).all()


@pytest.mark.parametrize("boundary", ["closed", "open"])
def test_a_resumed_bake_with_the_sort_is_the_uninterrupted_one(monkeypatch, boundary):
    monkeypatch.setenv(particle_sort.SWITCH, "1")
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4))
    settings = FlipSettings(boundary=boundary, max_particles_per_cell=16, particles_per_cell=8)
    a = FlipSimulation(spec, settings, v, t, xp=np, sparse=True)
    particle_sort.permute(a, np.random.default_rng(2).permutation(len(a.pos)))  # any order to start from
    for _ in range(2):
        a.step(1 / 60)
    b = FlipSimulation(spec, settings, v, t, xp=np, sparse=True)
    b.restore(a.checkpoint())
    for _ in range(3):
        a.step(1 / 60)
        b.step(1 / 60)
    assert np.array_equal(a.pos, b.pos) and np.array_equal(a.vel, b.vel)


def test_auto_sorts_a_shuffled_state_and_leaves_a_sorted_one(monkeypatch):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4))
    monkeypatch.setenv(particle_sort.SWITCH, "auto")
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True)
    assert not sim.step(1 / 60)["sorted"] and sim.last_disorder < 0.05  # the seeding's order: cell by cell
    particle_sort.permute(sim, np.random.default_rng(3).permutation(len(sim.pos)))
    key = particle_sort.brick_keys(sim.pos, spec, True, sim.kill_distance, np)
    assert particle_sort.disorder(key, spec, True, sim.kill_distance, np) > 0.5  # random: most particles jump
    assert sim.step(1 / 60)["sorted"] and sim.last_disorder > particle_sort.AUTO_DISORDER
    assert not sim.step(1 / 60)["sorted"] and sim.last_disorder < 0.05  # a frame after the sort


def test_the_switch_names_its_choices(monkeypatch):
    monkeypatch.setenv(particle_sort.SWITCH, "3")
    with pytest.raises(ValueError, match=particle_sort.SWITCH):
        particle_sort.every()
    monkeypatch.delenv(particle_sort.SWITCH)
    assert particle_sort.every() == 0 and particle_sort.every("auto") == -1 and particle_sort.every("4") == 4
