"""The topology's first kernel queued ahead of the step's speed read (``sparse_topology_ahead``,
``VOXFX_SPARSE_OCCUPIED_AHEAD``, issue 24): what an ahead is matched on (the very same objects, equal
values), that it is taken once or dropped, and that the CPU path is the same either way. The device path
(the same grids and particles to the bit, taken every substep): ``tests/gpu/test_flip_sparse_occupied_ahead_gpu.py``."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.unit.test_flip_sparse_substep_reads import cpu_ways_agree
from voxfx.kernels.flip import sparse_topology_ahead as ahead
from voxfx.kernels.flip import sparse_topology_gpu as tg


def _grid_and_key(n=5):
    """A stand-in holder of an ahead (``take`` reads these attributes only) and the key it was made for."""
    grid = SimpleNamespace(topology=object(), brick_slot=np.zeros(3, bool), capacity=3)
    pos, vel, index = np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32), (np.zeros(8, np.int32),) + (0,) * 6
    ways, on = ("kept", "on"), True
    key = ((grid.topology, pos, vel, index[0], grid.brick_slot),
           (n, 3, 8, ways, on, tg.SPEED_CODES[tg.speed_max_mode()]))
    return grid, key, pos, SimpleNamespace(vel=vel), index, ways, on


def test_a_key_is_the_same_objects_and_equal_values():
    grid, key, pos, reach, index, ways, on = _grid_and_key()
    assert ahead.same_key(key, ((*key[0],), (*key[1],)))
    copy = ((key[0][0], pos.copy(), *key[0][2:]), key[1])  # equal positions in another array: another launch
    assert not ahead.same_key(key, copy)
    assert not ahead.same_key(key, (key[0], (*key[1][:4], not on, key[1][5])))
    assert not ahead.same_key(None, key) and not ahead.same_key(key, None)


@pytest.fixture
def counts(monkeypatch):
    monkeypatch.setattr(ahead, "counts", {"launched": 0, "taken": 0, "refused": 0})
    return ahead.counts


def test_an_ahead_is_taken_once_where_its_key_is_the_pipelines(counts):
    grid, key, pos, reach, index, ways, on = _grid_and_key()
    assert ahead.take(grid, pos, reach, index, 8, ways, on, True) is None  # nothing held: nothing counted
    assert counts == {"launched": 0, "taken": 0, "refused": 0}
    work = {"occupied": "the ahead's scratch"}
    grid._occupied_ahead = (key, work, counts)
    assert ahead.take(grid, pos, reach, index, 8, ways, on, True) is work
    assert grid._occupied_ahead is None and counts["taken"] == 1
    assert ahead.take(grid, pos, reach, index, 8, ways, on, True) is None  # taken once


@pytest.mark.parametrize("change", ["positions", "velocities", "topology", "capacity", "entries", "ways", "scalars",
                                    "not merged", "one margin"])
def test_an_ahead_that_is_not_the_pipelines_launch_is_dropped(counts, change):
    grid, key, pos, reach, index, ways, on = _grid_and_key()
    grid._occupied_ahead = (key, {}, counts)
    entries, merged = 8, True
    if change == "positions":
        pos = pos.copy()
    elif change == "velocities":
        reach = SimpleNamespace(vel=reach.vel.copy())
    elif change == "topology":
        grid.topology = object()
    elif change == "capacity":
        grid.capacity = 4
    elif change == "entries":
        entries = 9
    elif change == "ways":
        ways = ("fresh", "on")
    elif change == "scalars":
        on = not on
    elif change == "not merged":
        merged = False
    else:
        reach = None
    assert ahead.take(grid, pos, reach, index, entries, ways, on, merged) is None
    assert grid._occupied_ahead is None and counts == {"launched": 0, "taken": 0, "refused": 1}


def test_drop_forgets_an_ahead_and_counts_it(counts):
    grid, key, *_ = _grid_and_key()
    ahead.drop(grid)
    assert counts["refused"] == 0
    grid._occupied_ahead = (key, {}, counts)
    ahead.drop(grid)
    assert grid._occupied_ahead is None and counts["refused"] == 1


def test_the_cpu_path_is_the_same_with_the_switch_on(monkeypatch, counts):
    """NumPy: no ahead (``speed_read`` leaves the speed to the caller), the same particles to the bit."""
    def no_ahead(sim):
        assert ahead.speed_read(sim) is None

    assert cpu_ways_agree(monkeypatch, "VOXFX_SPARSE_OCCUPIED_AHEAD", no_ahead)
    assert counts == {"launched": 0, "taken": 0, "refused": 0}
