"""The topology's first pass folded into G2P + advection (``sparse_g2p_marks``, ``VOXFX_SPARSE_G2P_MARKS``,
issue 24, helper s23j): the marks' module built only with the switch (the default modules untouched), how marks
are held, kept at the substep's end, taken or dropped under ``sparse_topology_ahead``'s launch key and counted,
and that the CPU path is the same either way. The kernel's marks against mark_occupied's, bit for bit:
tests/unit/test_cuda_g2p_marks_host.py; the device path (the same particles and topology to the bit, the marks
taken every substep but the first): tests/gpu/test_flip_sparse_g2p_marks_gpu.py."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.unit.test_flip_sparse_substep_reads import cpu_ways_agree
from tests.unit.test_sparse_topology_ahead import _grid_and_key
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_g2p_marks as marks
from voxfx.kernels.flip import sparse_topology_ahead as ahead


@pytest.fixture
def counts(monkeypatch):
    monkeypatch.setattr(marks, "counts", {"made": 0, "taken": 0, "refused": 0, "speeds": 0})
    monkeypatch.setattr(ahead, "counts", {"launched": 0, "taken": 0, "refused": 0})
    return marks.counts


def test_only_the_marks_module_is_built_with_g2p_marks():
    """Every variant's default module has no G2P_MARKS define (its PTX main's: tools/compare_ptx.py); with marks
    the same corners, shape and table code plus -DG2P_MARKS=1, the same entry."""
    for centred in (False, True):
        for apic in (False, True):
            plain, entry = sparse_g2p_gpu.g2p_block_entry(centred, apic)
            marked, entry2 = sparse_g2p_gpu.g2p_block_entry(centred, apic, marks=True)
            assert not any("G2P_MARKS" in o for o in plain.options)
            assert "-DG2P_MARKS=1" in marked.options and entry2 == entry
            assert [o for o in marked.options if o != "-DG2P_MARKS=1"] == list(plain.options)


def test_marks_are_held_kept_at_the_end_and_taken_once(counts):
    grid, key, pos, reach, index, ways, on = _grid_and_key()
    sim = SimpleNamespace(grid=grid)
    held = marks.Marks(key, {"occupied": "the G2P's scratch"}, np.zeros(1, np.uint32), ())
    marks.hold(sim, held)  # not written (no GPU launch): nothing held
    assert getattr(grid, "_occupied_ahead", None) is None and counts["made"] == 0
    held.written = True
    marks.hold(sim, held)
    assert grid._occupied_ahead == (key, held.work, counts) and counts["made"] == 1
    marks.keep_end(grid)  # the substep's end keeps the marks
    assert grid._occupied_ahead is not None and counts["refused"] == 0
    assert ahead.take(grid, pos, reach, index, 8, ways, on, True) is held.work
    assert counts["taken"] == 1 and ahead.counts["taken"] == 0  # counted as the G2P's
    assert ahead.take(grid, pos, reach, index, 8, ways, on, True) is None


def test_an_ahead_is_dropped_at_the_end_and_marks_not_of_the_pipeline_are_refused(counts):
    grid, key, pos, reach, index, ways, on = _grid_and_key()
    grid._occupied_ahead = (key, {}, ahead.counts)
    marks.keep_end(grid)  # an ahead not taken: dropped as before
    assert grid._occupied_ahead is None and ahead.counts["refused"] == 1
    held = marks.Marks(key, {}, np.zeros(1, np.uint32), ())
    held.written = True
    marks.hold(SimpleNamespace(grid=grid), held)
    assert ahead.take(grid, pos.copy(), reach, index, 8, ways, on, True) is None  # other positions
    assert counts == {"made": 1, "taken": 0, "refused": 1, "speeds": 0} and ahead.counts["refused"] == 1


def test_speed_read_refuses_marks_not_of_these_particles(counts):
    """``speed_read`` leaves the speed to the caller (None) where the marks' key is not ``_plan``'s (NumPy here:
    no plan), and drops them, counted refused; with nothing held, nothing counted."""
    grid, key, *_ = _grid_and_key()
    grid.xp = np
    sim = SimpleNamespace(grid=grid, pos=np.zeros((5, 3), np.float32), vel=np.zeros((5, 3), np.float32), xp=np)
    assert marks.speed_read(sim) is None and counts["refused"] == 0
    held = marks.Marks(key, {}, np.zeros(1, np.uint32), ())
    held.written = True
    marks.hold(sim, held)
    assert marks.speed_read(sim) is None
    assert grid._occupied_ahead is None and counts["refused"] == 1 and counts["speeds"] == 0


def test_the_cpu_path_is_the_same_with_the_switch_on(monkeypatch, counts):
    """NumPy: no marks made (``prepare`` None), the same particles to the bit."""
    def no_marks(sim):
        assert marks.prepare(sim) is None

    assert cpu_ways_agree(monkeypatch, "VOXFX_SPARSE_G2P_MARKS", no_marks)
    assert counts == {"made": 0, "taken": 0, "refused": 0, "speeds": 0}


def test_marks_held_when_the_switch_turns_off_are_dropped_at_the_substeps_start(monkeypatch, counts):
    """An A/B alternating substeps (bench/flip_sparse.py --ab): a "0" substep drops the marks of a "1" one (its
    pipeline marks as before); with "1" they stay for the pipeline."""
    grid, key, *_ = _grid_and_key()
    held = marks.Marks(key, {}, np.zeros(1, np.uint32), ())
    held.written = True
    marks.hold(SimpleNamespace(grid=grid), held)
    monkeypatch.setenv("VOXFX_SPARSE_G2P_MARKS", "1")
    marks.start(grid)
    assert grid._occupied_ahead is not None
    monkeypatch.setenv("VOXFX_SPARSE_G2P_MARKS", "0")
    marks.start(grid)
    assert grid._occupied_ahead is None and counts["refused"] == 1
    grid._occupied_ahead = (key, {}, ahead.counts)  # an occupied ahead is not the marks' to drop
    marks.start(grid)
    assert grid._occupied_ahead is not None and ahead.counts["refused"] == 0
