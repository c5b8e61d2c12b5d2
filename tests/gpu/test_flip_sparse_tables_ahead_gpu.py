"""The fused tables queued ahead of the topology's flags read (``sparse_topology_tables_ahead``,
``VOXFX_SPARSE_TABLES_AHEAD``, issue 24, helper s22f): the grids and particles of "1" are "0"'s to the bit,
and the tables queued ahead are taken wherever the bricks changed within the room."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_topology_gpu import assert_same_grids, drifted, host
from tests.meshes import box
from voxfx.kernels.flip import sparse_topology_gpu
from voxfx.kernels.flip import sparse_topology_tables_ahead as ahead
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid
from voxfx.kernels.grid import GridSpec


@pytest.fixture
def counts(monkeypatch):
    monkeypatch.setattr(ahead, "counts", {"queued": 0, "taken": 0})
    return ahead.counts


@pytest.mark.parametrize("margins", ["device", "host"])
def test_tables_ahead_give_the_plain_grid(monkeypatch, counts, margins):
    """Two grids over 12 substeps of a drifting blob (bricks come and go, the pool grows past its room at
    substep 1, fast particles every third substep), per-brick margins (the host's, or learned on the device:
    the pipeline run again where the radius was short), each grid with a kept channel of background NaN
    written with noise before each update (the fills of the added and freed slots): "1" against "0", the same
    grids to the bit after each substep (tables, marks, channels, the cached brick index)."""
    import cupy

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {w: SparseFlipGrid(spec, cupy, True) for w in ("1", "0")}
    for g in grids.values():
        g.add("kept", np.float32, np.nan)
    changed = 0
    for step in range(12):
        scale = [0.06, 0.20, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09, 0.10][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        vel = cupy.asarray(rng.normal(0, 2.0 + 18.0 * (step % 3 == 2), (20000, 3)).astype(np.float32))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size)
        margin = sparse_topology_gpu.host_margin(reach) if margins == "host" else None
        noise = rng.normal(0, 1, grids["1"].size).astype(np.float32)
        before = grids["0"].topology.keys
        for way, g in grids.items():
            monkeypatch.setenv("VOXFX_SPARSE_TABLES_AHEAD", way)
            g["kept"] = cupy.asarray(noise[:g.size])
            g.update(pos, margin, reach=reach, scratch=True)
        assert getattr(grids["1"], "_tables_ahead", None) is None  # taken, or dropped at the read
        after = grids["0"].topology.keys
        changed += step > 0 and (before.shape != after.shape or bool((before != after).any()))
        assert_same_grids(grids["1"], grids["0"], step, index=True)
    assert changed >= 6
    assert 0 < counts["taken"] <= changed and counts["queued"] >= counts["taken"]


def dam_break(cupy, timing):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (40, 28, 32))
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.9, 1.0))
    settings = FlipSettings(seed=5, **(TIMINGS["fast"] if timing == "fast" else {}))
    return FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)


@pytest.mark.parametrize("timing", ["default", "fast"])
def test_steps_with_tables_ahead_give_the_same_particles_and_grids(monkeypatch, counts, timing):
    """A dam break stepped three frames with "1" and with "0", frame by frame in turn: the same particles,
    velocities, bricks, faces and the carried channels to the bit after every frame (the Fast timing:
    time-centred advection's kept faces and masks, filled by retopologize); tables taken ahead."""
    import cupy

    sims = {way: dam_break(cupy, timing) for way in ("1", "0")}
    for frame in range(3):
        for way, sim in sims.items():
            monkeypatch.setenv("VOXFX_SPARSE_TABLES_AHEAD", way)
            sim.step(1 / 24)
        a, b = sims["1"], sims["0"]
        for x, y in ((a.pos, b.pos), (a.vel, b.vel), (a.grid.topology.keys, b.grid.topology.keys),
                     *zip(a.grid.faces(), b.grid.faces())):
            assert host(x).tobytes() == host(y).tobytes(), frame
        assert_same_grids(a.grid, b.grid, frame)
    assert counts["taken"] > 0
