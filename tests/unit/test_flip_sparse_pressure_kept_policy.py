"""The device's rule for holding levels ≥ 2 across set-ups (sparse_pressure_workspace_kept, issue
24, h19d), its host part on the CPU: which set-ups keep (every k, the generation, the key base,
the level count of the bounds, a frame begun: h19e), the held rows written into the sizes' initial array, the level
count on the read, what a set-up leaves held, and the key base a set-up after its read uses. The
launches themselves: tests/unit/test_cuda_sparse_pressure_kept_host.py (host harness) and
tests/gpu/test_flip_sparse_pressure_kept_gpu.py."""

from types import SimpleNamespace

import numpy as np
import pytest

from voxfx.kernels.flip import sparse_pressure_setup as setup
from voxfx.kernels.flip import sparse_pressure_workspace_kept as kept
from voxfx.kernels.flip.sparse_multigrid_kept import frame_of, frame_started
from voxfx.kernels.flip.sparse_pressure_ahead import guessed_base
from voxfx.kernels.flip.sparse_pressure_workspace import Workspace

COUNT = 6
BASE = (-100, -90, -80)


class _Grid:  # a simulation's grid: what the held levels belong to
    pass


GRID = _Grid()


def _sizes(extents=(60, 30, 15, 8, 2, 0), ms=(5000, 600, 80, 10, 2, 0)):
    """Host cnt (4 a level) and span (6 a level) rows whose unknowns span *extents* cells."""
    cnt = np.zeros((COUNT, 4), np.int32)
    span = np.full((COUNT, 6), setup._NO_SPAN, np.int32)
    for level, (e, m) in enumerate(zip(extents, ms)):
        cnt[level] = (8 * m, m // 2, m, 0)
        if m:
            span[level] = (e - 1, 0, 0, 0, 0, 0)
    return cnt, span


def _rebuilt(every=3, generation=7, grid=GRID):
    ws = SimpleNamespace(held=None, generation=generation)
    cnt, span = _sizes()
    level0 = SimpleNamespace(mg_keep=False, mg_every=every, mg_base=BASE)
    kept.commit(ws, grid, level0, cnt, span, COUNT,
                setup.levels_kept(setup.level_extents(cnt, span, COUNT), COUNT))
    return ws, cnt, span


def test_a_rebuild_holds_its_levels_and_every_k_set_ups_rebuild():
    ws, cnt, span = _rebuilt(every=3)
    h = ws.held
    assert h.grid() is GRID and h.generation == 7 and h.base == BASE and h.count == COUNT and h.age == 0 and h.kept == 5
    assert np.array_equal(h.cnt, cnt[2:].ravel()) and np.array_equal(h.span, span[2:].ravel())
    bounds = [1] * COUNT
    done = []
    for _ in range(6):
        keep = kept.decide(ws, GRID, BASE, bounds, 3)
        done.append(keep)
        level0 = SimpleNamespace(mg_keep=keep, mg_every=3, mg_base=BASE)
        kept.commit(ws, GRID, level0, cnt, span, COUNT, 5)
    assert done == [True, True, False, True, True, False]


@pytest.mark.parametrize("change", ["off", "generation", "base", "count", "none held", "another grid",
                                    "a frame began"])
def test_each_trigger_rebuilds_and_drops_what_was_held(change):
    grid = _Grid()
    ws, _, _ = _rebuilt(grid=grid)
    bounds, base, every = [1] * COUNT, BASE, 3
    if change == "another grid":  # a second simulation, or a test's next scene, on the same device
        grid = _Grid()
    elif change == "a frame began":  # the simulation's step (sparse_sim): its first set-up rebuilds
        frame_started(grid)
    elif change == "off":
        every = 0
    elif change == "generation":
        ws.generation += 1
    elif change == "base":
        base = (BASE[0] - 1,) + BASE[1:]
    elif change == "count":
        bounds = bounds[:-1]
    else:
        ws.held = None
    assert kept.decide(ws, grid, base, bounds, every) is False and ws.held is None
    ws, _, _ = _rebuilt(grid=grid)
    assert kept.decide(ws, grid, BASE, [1] * COUNT, 3) is True and ws.held is not None


@pytest.mark.parametrize("per_frame, want", [(2, [False, True]), (4, [False, True, True, False])])
def test_every_frames_first_set_up_rebuilds_and_k_within_it(per_frame, want):
    """Three frames of *per_frame* set-ups, "3": each frame's first set-up rebuilds (a bake resumed
    at a frame keeps where the uninterrupted one does), within it every 3 set-ups."""
    grid, cnt, span = _Grid(), *_sizes()
    ws = SimpleNamespace(held=None, generation=7)
    done = []
    for _ in range(3):
        frame_started(grid)
        for _ in range(per_frame):
            keep = kept.decide(ws, grid, BASE, [1] * COUNT, 3)
            done.append(keep)
            kept.commit(ws, grid, SimpleNamespace(mg_keep=keep, mg_every=3, mg_base=BASE), cnt, span, COUNT, 5)
            assert ws.held.frame == frame_of(grid)  # what is held is this frame's
    assert done == want * 3


def test_the_held_rows_go_into_the_initial_sizes_and_the_rest_stays():
    ws, cnt, span = _rebuilt()
    init = np.concatenate([np.zeros(4 * COUNT, np.int32), np.full(6 * COUNT, setup._NO_SPAN, np.int32),
                           np.arange(9, dtype=np.int32)])  # then a box and extra values, as an ahead read
    init[:3] = (11, 12, 13)
    want = init.copy()
    kept.rows(init, ws, COUNT)
    want[8:4 * COUNT] = cnt[2:].ravel()
    want[4 * COUNT + 12:10 * COUNT] = span[2:].ravel()
    assert np.array_equal(init, want)


def test_a_kept_read_with_another_level_count_drops_the_held_levels():
    ws, cnt, span = _rebuilt()
    assert kept.count_holds(ws, cnt, span, COUNT) and ws.held is not None
    short = span.copy()
    short[1] = (2, 0, 0, 0, 0, 0)  # level 1 spans 3 cells now: under MG_MIN_SIDE, 2 levels kept
    assert not kept.count_holds(ws, cnt, short, COUNT) and ws.held is None


def test_a_set_up_after_its_read_launches_on_the_sticky_base_while_it_holds():
    ws = SimpleNamespace(guess=None, last=((10, 20, 30), (90, 80, 70), None))
    ws.sticky_guess = Workspace.sticky_guess.__get__(ws)
    first = kept.base_for(ws, (10, 20, 30), (90, 80, 70))
    assert first == guessed_base((10, 20, 30), (90, 80, 70))
    ws.last = ((14, 21, 30), (95, 80, 71), None)  # the liquid moved a little: the same base
    assert kept.base_for(ws, (14, 21, 30), (95, 80, 71)) == first
    assert setup._level0_base((14, 21, 30), (95, 80, 71)) != first


WIDE = [8 ** 7 // 8 ** level for level in range(COUNT)]  # level 1's set above the tail's bound: levels 2 … on their own


def test_from_3_holds_levels_3_on_and_keeps_only_where_level_2_is_launched_on_its_own(monkeypatch):
    """``VOXFX_SPARSE_MG_KEEP_FROM`` "3" (h19f): the rebuild holds the rows of levels ≥ 3; a set-up
    keeps them only where level 2 is launched on its own (``launched_to``: a tail from level 2 would
    build levels 2 … to the last, so it rebuilds), and what a "2" rebuild held is not kept under "3"
    nor the reverse."""
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP_FROM", "3")
    ws, cnt, span = _rebuilt()
    assert ws.held.first == 3 and np.array_equal(ws.held.cnt, cnt[3:].ravel())
    assert np.array_equal(ws.held.span, span[3:].ravel())
    init = np.concatenate([np.zeros(4 * COUNT, np.int32), np.full(6 * COUNT, setup._NO_SPAN, np.int32)])
    want = init.copy()
    want[12:4 * COUNT], want[4 * COUNT + 18:] = cnt[3:].ravel(), span[3:].ravel()
    kept.rows(init, ws, COUNT)
    assert np.array_equal(init, want)
    assert kept.launched_to(WIDE, 3) and not kept.launched_to([1] * COUNT, 3) and kept.launched_to([1] * COUNT, 2)
    assert kept.decide(ws, GRID, BASE, WIDE, 3) is True
    assert kept.decide(ws, GRID, BASE, [1] * COUNT, 3) is False and ws.held is None  # level 2 in the tail
    ws, _, _ = _rebuilt()
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP_FROM", "2")
    assert kept.decide(ws, GRID, BASE, WIDE, 3) is False and ws.held is None  # held from 3, asked from 2
    ws, _, _ = _rebuilt()
    assert ws.held.first == 2
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP_FROM", "3")
    assert kept.decide(ws, GRID, BASE, WIDE, 3) is False and ws.held is None  # held from 2, asked from 3
