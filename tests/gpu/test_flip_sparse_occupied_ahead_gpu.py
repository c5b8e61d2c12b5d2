"""The topology's first kernel queued ahead of the step's speed read (``sparse_topology_ahead``,
``VOXFX_SPARSE_OCCUPIED_AHEAD``, issue 24, helper s22d): the grids and the particles of "1" are "0"'s to the
bit, and the ahead is taken wherever the substep's pipeline is its launch."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_topology_gpu import assert_same_grids, drifted, host
from tests.meshes import box
from voxfx.kernels.flip import sparse_topology_ahead as ahead
from voxfx.kernels.flip import sparse_topology_gpu
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid
from voxfx.kernels.grid import GridSpec


@pytest.fixture
def counts(monkeypatch):
    monkeypatch.setenv("VOXFX_SPARSE_G2P_MARKS", "0")  # the ahead alone: the G2P's marks (the default) replace it
    monkeypatch.setattr(ahead, "counts", {"launched": 0, "taken": 0, "refused": 0})
    return ahead.counts


def test_an_ahead_mark_gives_the_grid_of_the_pipelines_own(counts):
    """Two grids over 10 substeps of a drifting blob (bricks come and go, the pool grows, fast particles every
    third substep), each margin the fastest particle's as ``step`` gives it, per-brick margins: one with
    ``mark_occupied`` queued ahead before each update, one without; the same grids to the bit after each. At
    substep 5 the positions the update gets are a copy of those marked ahead: dropped, marked again."""
    import cupy

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {w: SparseFlipGrid(spec, cupy, True) for w in ("ahead", "plain")}
    for step in range(10):
        scale = [0.06, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        vel = cupy.asarray(rng.normal(0, 2.0 + 18.0 * (step % 3 == 2), (20000, 3)).astype(np.float32))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size)
        margin = sparse_topology_gpu.host_margin(reach)
        launched = ahead.launch(grids["ahead"], pos, vel)
        assert launched == (step > 0)  # the first build has no topology to mark in
        given = pos.copy() if step == 5 else pos
        for g in grids.values():
            g.update(given, margin, reach=reach, scratch=True)
        assert getattr(grids["ahead"], "_occupied_ahead", None) is None
        assert_same_grids(grids["ahead"], grids["plain"], step, index=True)
    assert counts == {"launched": 9, "taken": 8, "refused": 1}


def dam_break(cupy, timing):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (40, 28, 32))
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.9, 1.0))
    settings = FlipSettings(seed=5, **(TIMINGS["fast"] if timing == "fast" else {}))
    return FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)


@pytest.mark.parametrize("timing", ["default", "fast"])
def test_steps_with_the_ahead_give_the_same_particles_and_grids(monkeypatch, counts, timing):
    """A dam break stepped three frames (``step``: the speed read before each substep) with "1" and with "0",
    frame by frame in turn: the same particles, velocities, bricks and faces to the bit after every frame;
    every substep after the first took its ahead (the Fast timing: time-centred advection's kept faces too)."""
    import cupy

    sims = {way: dam_break(cupy, timing) for way in ("1", "0")}
    substeps = 0
    for frame in range(3):
        for way, sim in sims.items():
            monkeypatch.setenv("VOXFX_SPARSE_OCCUPIED_AHEAD", way)
            stats = sim.step(1 / 24)
            substeps += stats["substeps"] if way == "1" else 0
        a, b = sims["1"], sims["0"]
        for x, y in ((a.pos, b.pos), (a.vel, b.vel), (a.grid.topology.keys, b.grid.topology.keys),
                     *zip(a.grid.faces(), b.grid.faces())):
            assert host(x).tobytes() == host(y).tobytes(), frame
    assert substeps >= 3 and counts["taken"] == substeps - 1 and counts["refused"] == 0
    assert counts["launched"] == counts["taken"]
