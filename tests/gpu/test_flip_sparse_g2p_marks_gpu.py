"""The topology's first pass folded into G2P + advection (``sparse_g2p_marks``, ``VOXFX_SPARSE_G2P_MARKS``,
issue 24, helper s23j) on the device: the marks the block G2P holds are mark_occupied's over the particles it
left, to the bit (flags, speed2, missed) and its maximum is ``transfer.max_speed``'s; dam breaks of ≥ 12
substeps with "1" and "0", frame by frame in turn, give the same particles, velocities, topology and faces to the
bit, the marks taken at every substep but the first (the host harness: tests/unit/test_cuda_g2p_marks_host.py)."""

import pytest

from tests.gpu.test_flip_sparse_topology_gpu import host
from tests.meshes import box
from voxfx.kernels.flip import sparse_g2p_marks as marks
from voxfx.kernels.flip import sparse_topology_ahead as ahead
from voxfx.kernels.flip import sparse_topology_args as topology_args
from voxfx.kernels.flip import sparse_topology_gpu as tg
from voxfx.kernels.flip import transfer
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


@pytest.fixture
def counts(monkeypatch):
    monkeypatch.setattr(marks, "counts", {"made": 0, "taken": 0, "refused": 0, "speeds": 0})
    monkeypatch.setattr(ahead, "counts", {"launched": 0, "taken": 0, "refused": 0})
    return marks.counts


def dam_break(cupy, timing, apic=False):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (40, 28, 32))
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.9, 1.0))
    settings = FlipSettings(seed=5, apic=apic, **(TIMINGS["fast"] if timing == "fast" else {}))
    return FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)


@pytest.mark.parametrize("timing", ["default", "fast"])
def test_held_marks_are_mark_occupieds_of_the_moved_particles(monkeypatch, counts, timing):
    """After each of three frames with "1" the grid holds the last G2P's marks: its occupied flags, speed2 and
    missed word are mark_occupied's over the same positions, velocities and topology in fresh zeroed arrays (the
    same speed code), byte for byte, and its maximum's √ is ``transfer.max_speed``'s."""
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_G2P_MARKS", "1")
    sim = dam_break(cupy, timing)
    for frame in range(3):
        sim.step(1 / 24)
        grid = sim.grid
        held = grid._occupied_ahead
        assert held is not None and held[2] is marks.counts, frame
        work, key = held[1], held[0]
        t = grid.topology
        index = tg.brick_index(grid)
        on = topology_args.kept()
        occupied = cupy.zeros_like(work["occupied"])
        speed2 = cupy.zeros_like(work["speed2"])
        flags = cupy.zeros_like(work["flags"])
        ahead.mark_occupied(sim.pos, t.keys, t.slots, topology_args.i64(t.keys.shape[0], on),
                            topology_args.index_args(grid, index, on), occupied,
                            topology_args.flag_words(flags)[0], sim.vel, speed2, key[1][5], on,
                            topology_args.grid_args(grid, on))
        assert host(occupied).tobytes() == host(work["occupied"]).tobytes(), frame
        assert host(speed2).tobytes() == host(work["speed2"]).tobytes(), frame
        assert int(host(flags)[0]) == int(host(work["flags"])[0]), frame
        assert int(host(occupied).sum()) > 100 and int((host(speed2) > 0).sum()) > 10
        most = grid._g2p_marks_most[1]
        assert float(cupy.sqrt(most.view(cupy.float32)[0])) == float(transfer.max_speed(sim.vel)), frame


@pytest.mark.parametrize("timing, apic", [("default", False), ("fast", False), ("default", True)],
                         ids=["default", "fast", "apic"])
def test_steps_with_the_marks_give_the_same_particles_and_topology(monkeypatch, counts, timing, apic):
    """Dam breaks stepped frame by frame (≥ 12 substeps) with "1" and "0" in turn: the same particles,
    velocities, bricks, slots and faces to the bit after every frame; with "1" every substep's G2P made marks,
    every one but the first was taken by the next pipeline and gave the step's speed, none refused, and the
    occupied ahead (``VOXFX_SPARSE_OCCUPIED_AHEAD``) launched at most for the first substep (none has a topology
    to mark in yet: test_flip_sparse_occupied_ahead_gpu.py)."""
    import cupy

    sims = {way: dam_break(cupy, timing, apic) for way in ("1", "0")}
    substeps = frames = launched = 0
    while substeps < 12:
        for way, sim in sims.items():
            monkeypatch.setenv("VOXFX_SPARSE_G2P_MARKS", way)
            before = ahead.counts["launched"]
            stats = sim.step(1 / 24)
            if way == "1":
                substeps += stats["substeps"]
                launched += ahead.counts["launched"] - before
        frames += 1
        a, b = sims["1"], sims["0"]
        ta, tb = a.grid.topology, b.grid.topology
        for x, y in ((a.pos, b.pos), (a.vel, b.vel), (ta.keys, tb.keys), (ta.slots, tb.slots),
                     *zip(a.grid.faces(), b.grid.faces())):
            assert host(x).tobytes() == host(y).tobytes(), frames
    assert counts["made"] == substeps and counts["taken"] == substeps - 1 and counts["refused"] == 0
    assert counts["speeds"] == substeps - 1 and launched <= 1
