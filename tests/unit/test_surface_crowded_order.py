"""The GPU level set's crowded binning cells (``surface_gpu._order_crowded``): the cells of
more than ``SORT_CELL_MAX`` points get their points in tag order in their own slots, by a
sort of those points alone; every other slot is left to ``surface_order_cells``. Run with
NumPy arrays (the function takes the array module)."""

import numpy as np
import pytest

from voxfx.kernels.flip import surface_gpu


@pytest.mark.parametrize("limit", [0, 3, 7])
def test_crowded_cells_get_their_points_in_tag_order_and_nothing_else_is_written(monkeypatch, limit):
    monkeypatch.setattr(surface_gpu, "SORT_CELL_MAX", limit)
    rng = np.random.default_rng(limit)
    counts = rng.integers(0, 12, 40).astype(np.int32)
    counts[[0, 17, 39]] = [15, 0, 9]  # crowded at both ends, an empty cell between
    starts = np.zeros(len(counts) + 1, np.int32)
    starts[1:] = np.cumsum(counts)
    points = int(starts[-1])
    packed = rng.standard_normal((points, 4)).astype(np.float32)
    tags = rng.permutation(10 * points)[:points].astype(np.int64)  # unique, any order within a cell
    ordered = np.full_like(packed, np.nan)
    surface_gpu._order_crowded(packed, tags, starts, ordered, np)
    crowded = 0
    for c, n in enumerate(counts):
        a, b = starts[c], starts[c + 1]
        if n > limit:
            crowded += 1
            np.testing.assert_array_equal(ordered[a:b], packed[a:b][np.argsort(tags[a:b])])
        else:
            assert np.isnan(ordered[a:b]).all()
    assert crowded >= 3


def test_a_limit_argument_takes_the_place_of_sort_cell_max():
    """``_compile_crowded_order`` passes limit 0 so that its four points in two cells are
    both crowded, SORT_CELL_MAX left as it is."""
    starts = np.array([0, 2, 4], np.int32)
    packed = np.arange(16, dtype=np.float32).reshape(4, 4)
    tags = np.array([5, 1, 3, 9], np.uint32)
    ordered = np.full_like(packed, np.nan)
    surface_gpu._order_crowded(packed, tags, starts, ordered, np, limit=0)
    np.testing.assert_array_equal(ordered, packed[[1, 0, 2, 3]])
    assert surface_gpu.SORT_CELL_MAX > 2  # by SORT_CELL_MAX neither cell would be
