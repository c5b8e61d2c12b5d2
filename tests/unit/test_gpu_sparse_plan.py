"""Host-side planning of the device sparse voxelizer (gpu_sparse.py), without a GPU: the
solid's crossings are sorted a group of whole brick slices at a time, and the groups must
cover every key once, cut only where a slice starts, each at most the limit plus one slice."""

import numpy as np
import pytest

from voxfx.kernels.voxelize.gpu_sparse import _sort_groups


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", [1, 7, 100, 10**6])
def test_sort_groups_cover_the_keys_at_slice_starts(seed, limit):
    rng = np.random.default_rng(seed)
    per_slice = rng.integers(0, 60, size=rng.integers(1, 40))
    per_slice[rng.random(per_slice.size) < 0.3] = 0  # empty slices
    starts = np.concatenate([[0], np.cumsum(per_slice)]).astype(np.int64)
    n = int(starts[-1])
    groups = _sort_groups(starts, limit)
    if n == 0:
        assert groups == [] or all(a == b for a, b in groups)
        return
    assert groups[0][0] == 0 and groups[-1][1] == n
    assert all(b0 == a1 for (_, b0), (a1, _) in zip(groups, groups[1:]))  # contiguous, no overlap
    assert all(a < b for a, b in groups)
    assert {a for a, _ in groups} <= set(starts.tolist())  # cut where a slice starts
    biggest = int(per_slice.max())
    assert all(b - a <= limit + biggest for a, b in groups)
    if n <= limit:
        assert groups == [(0, n)]
