"""What a sparse FLIP substep reads and writes no more than it needs (issue 24), without
changing a bit: ``step`` measures the fastest particle once a substep (the margin reuses
the CFL's speed of the same velocities), and the topology update leaves the flow channels
(u, v, w, cell) unfilled for P2G and classify to write whole (``update(scratch=True)``)."""

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip import transfer
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def dam_break():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.5, 0.5))
    return FlipSimulation(spec, FlipSettings(seed=9), v, t, xp=np, sparse=True)


def same_bits(a, b):
    return all(np.array_equal(x.view(np.uint32), y.view(np.uint32)) for x, y in zip(a, b))


def cpu_ways_agree(monkeypatch, variable, check=lambda sim: None):
    """Two frames of the NumPy dam break with *variable* "0", then "1" (*check*: called on each fresh
    simulation first): whether the particles are the same to the bit."""
    runs = {}
    for way in ("0", "1"):
        monkeypatch.setenv(variable, way)
        sim = dam_break()
        check(sim)
        for _ in range(2):
            sim.step(1 / 24)
        runs[way] = (sim.pos, sim.vel)
    return same_bits(runs["0"], runs["1"])


def test_step_measures_the_fastest_particle_once_a_substep(monkeypatch):
    calls = []
    original = transfer.max_speed

    def counted(vel):
        calls.append(1)
        return original(vel)

    monkeypatch.setattr(transfer, "max_speed", counted)
    reuse, measure = dam_break(), dam_break()
    measure._margin_speed = lambda: float(original(measure.vel))  # the earlier way: measured again
    substeps = 0
    for _ in range(6):
        calls.clear()
        substeps = reuse.step(1 / 24)["substeps"]
        assert len(calls) == substeps  # the CFL's, reused by the margin
        measure.step(1 / 24)
        assert same_bits((reuse.pos, reuse.vel), (measure.pos, measure.vel))
    assert substeps > 1
    reuse.vel = reuse.vel.copy()  # other velocities: the margin measures them
    calls.clear()
    reuse.substep(1 / 120)
    assert len(calls) == 1


def test_scratch_flow_channels_give_the_same_substeps(monkeypatch):
    """The dam break spreads (bricks added, the pool grown) with the flow channels unfilled
    and with them filled: the same particles, bit for bit."""
    scratch, filled = dam_break(), dam_break()
    update = SparseFlipGrid.update

    def filling(self, *args, **kwargs):
        kwargs["scratch"] = False
        return update(self, *args, **kwargs)

    grew, after = 0, 0
    for _ in range(40):  # until two substeps past the pool's second growth (substep 18 of 40)
        capacity = scratch.grid.capacity
        scratch.substep(1 / 120)
        monkeypatch.setattr(SparseFlipGrid, "update", filling)
        filled.substep(1 / 120)
        monkeypatch.setattr(SparseFlipGrid, "update", update)
        grew += scratch.grid.capacity > capacity
        after = 0 if scratch.grid.capacity > capacity else after + 1
        assert same_bits((scratch.pos, scratch.vel), (filled.pos, filled.vel))
        if grew >= 2 and after >= 2:
            break
    assert grew >= 2


def test_scratch_update_leaves_reused_slots_unfilled():
    """``update(scratch=True)``: a slot freed and reused keeps its stale flow values (the
    substep's P2G and classify write them whole), the marks are written; without scratch it
    starts at the background."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (40, 8, 8))
    out = {}
    for scratch in (True, False):
        g = SparseFlipGrid(spec, np, closed=False)
        g.update(np.array([[0.45, 0.45, 0.45]], np.float32), 2)
        capacity = g.capacity
        for name in g.FLOW:
            g[name] = np.full(g.size, 3, g[name].dtype)
        g.update(np.array([[2.05, 0.45, 0.45]], np.float32), 2, scratch=scratch)  # the brick freed, another added
        assert g.capacity == capacity and g.topology.free.shape[0] == 0  # the freed slots reused, no growth
        out[scratch] = {name: g[name].copy() for name in (*g.FLOW, "exists_u")}
    assert all((out[True][name] == 3).all() for name in SparseFlipGrid.FLOW)
    assert all((out[False][name] == 0).all() for name in SparseFlipGrid.FLOW)
    assert np.array_equal(out[True]["exists_u"], out[False]["exists_u"]) and out[True]["exists_u"].all()
