"""Host-side planning of the device sparse voxelizer (gpu_sparse.py), without a GPU: the
solid's crossings are sorted a group of whole brick slices at a time, and the groups must
cover every key once, cut only where a slice starts, each at most the limit plus one slice;
the kept brick rows move to the pool's front in place, a chunk at a time; brick numbers
become SparseGrid keys."""

import numpy as np
import pytest

from voxfx.kernels.grid.sparse import brick_keys
from voxfx.kernels.voxelize.gpu_sparse import TRIM_WASTE, _compact_rows, _lin_to_keys, _slice_groups, _sort_groups


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


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", [1, 7, 100, 10**6])
@pytest.mark.parametrize("max_slices", [1, 2, 8, 10**6])
def test_slice_groups_of_32_bit_keys_cover_the_slices(seed, limit, max_slices):
    """Consecutive slice ranges from the first slice to the last, each of at most
    max_slices slices (what a 32-bit key's slice bits can count) and at most limit keys
    unless it is a single slice; a group stops only where the next slice would break one
    of the two."""
    rng = np.random.default_rng(seed)
    per_slice = rng.integers(0, 60, size=rng.integers(1, 40))
    per_slice[rng.random(per_slice.size) < 0.3] = 0
    starts = np.concatenate([[0], np.cumsum(per_slice)]).astype(np.int64)
    groups = _slice_groups(starts, limit, max_slices)
    assert groups[0][0] == 0 and groups[-1][1] == per_slice.size
    assert all(b0 == a1 for (_, b0), (a1, _) in zip(groups, groups[1:]))
    for a, b in groups:
        assert 1 <= b - a <= max_slices
        assert b - a == 1 or starts[b] - starts[a] <= limit
    for (a, b), _ in zip(groups, groups[1:]):  # greedy: the next slice did not fit
        assert b - a == max_slices or starts[b + 1] - starts[a] > limit


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chunk", [1, 3, 64, 10**6])
@pytest.mark.parametrize("keep", [0.0, 0.1, 0.6, 0.9, 1.0])
def test_rows_compacted_in_place_equal_the_gather(seed, chunk, keep):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    pool = rng.integers(0, 2**63, size=(n, 8), dtype=np.uint64)
    idx = np.flatnonzero(rng.random(n) < keep)
    want = pool[idx].copy()
    got = _compact_rows(pool, idx, chunk, np)
    assert got.shape == want.shape and np.array_equal(got, want)
    # a view of the pool's front unless more than TRIM_WASTE of it would be held empty
    assert np.shares_memory(got, pool) == (idx.size >= (1 - TRIM_WASTE) * n and idx.size > 0)


def test_brick_numbers_become_sparse_grid_keys():
    nbx, nby, nbz = 5, 3, 7
    b = np.stack(np.meshgrid(np.arange(nbx), np.arange(nby), np.arange(nbz), indexing="ij"), -1).reshape(-1, 3)
    lin = (b[:, 2] * nby + b[:, 1]) * nbx + b[:, 0]
    assert np.array_equal(_lin_to_keys(lin.astype(np.int64), nbx, nby, np), brick_keys(b, np))
