"""``sparse_gpu._frame`` and ``_dims`` (the kernels' frame and size arguments, kept on the grid)
give the float32 and int32 values of the grid's current ``origin``, ``h`` and ``shape``: the same
tuple again while those are unchanged, new values once any is rebound; a grid that takes no
attributes gets them made each time."""

from types import SimpleNamespace

import numpy as np

from voxfx.kernels.flip.sparse_gpu import _dims, _frame


def _want_frame(origin, h):
    return [np.float32(o) for o in origin] + [np.float32(h), np.float32(1.0 / h)]


def test_frame_and_dims_follow_the_grid():
    grid = SimpleNamespace(origin=(0.1, -2.5, 3.0), h=0.0078125, shape=(64, 48, 40))
    first = _frame(grid)
    assert [type(x) for x in first] == [np.float32] * 5 and list(first) == _want_frame(grid.origin, grid.h)
    assert _frame(grid) is first  # kept
    dims = _dims(grid)
    assert [type(x) for x in dims] == [np.int32] * 3 and list(dims) == [64, 48, 40] and _dims(grid) is dims
    grid.h = 0.05
    assert list(_frame(grid)) == _want_frame(grid.origin, 0.05)
    grid.origin = (1.0, 2.0, 3.0)
    assert list(_frame(grid)) == _want_frame((1.0, 2.0, 3.0), 0.05)
    grid.shape = (8, 16, 24)
    assert list(_dims(grid)) == [8, 16, 24]


class _Slotted:
    __slots__ = ("origin", "h", "shape")

    def __init__(self):
        self.origin, self.h, self.shape = (0.0, 0.0, 0.0), 0.5, (8, 8, 8)


def test_a_grid_without_attributes_gets_them_made():
    grid = _Slotted()
    assert list(_frame(grid)) == _want_frame((0.0, 0.0, 0.0), 0.5) and list(_dims(grid)) == [8, 8, 8]
    grid.h = 0.25
    assert list(_frame(grid)) == _want_frame((0.0, 0.0, 0.0), 0.25)
