"""The sparse GPU solver's buffer sizing (sparse_pressure_buffers.grown_strides, carve: NumPy
here; the device runs are tests/gpu/test_flip_sparse_pressure_persist_gpu.py)."""

import numpy as np

from voxfx.kernels.flip import sparse_pressure_gpu
from voxfx.kernels.flip.sparse_pressure_buffers import carve, grown_strides


def test_fresh_strides_take_the_headroom():
    assert grown_strides([1000, 100, 1]) == [1314, 189, 65]
    assert grown_strides([1000, 100], old=[5000]) == [1314, 189]  # another number of levels: fresh


def test_strides_keep_what_fits_and_grow_geometrically_where_outgrown():
    old = [1314, 189, 65]
    assert grown_strides([1314, 10, 65], old) == old  # fits: never smaller
    grown = grown_strides([1315, 189, 66], old)
    assert grown[1] == 189 and grown[0] == int(1314 * 1.5) and grown[2] == int(66 * 1.25) + 64
    assert grown_strides([10_000, 189, 65], old)[0] == int(10_000 * 1.25) + 64  # more than the factor
    # growing by one entry at a time: a new size only every ~1.5×, not at every step
    strides, changes = [100], 0
    for n in range(100, 20_000):
        new = grown_strides([n], strides)
        changes += new != strides
        assert new[0] >= n
        strides = new
    assert changes <= 14


def test_carve_gives_aligned_disjoint_zeroed_views():
    lengths = [5, 64, 65, 1, 0, 130]
    arena, views = carve(np, lengths, np.float32, align=64)
    assert [v.shape[0] for v in views] == lengths and arena.dtype == np.float32
    starts = [v.__array_interface__["data"][0] - arena.__array_interface__["data"][0] for v in views]
    assert all(s % (64 * 4) == 0 for s in starts)
    for i, v in enumerate(views):
        v[...] = i + 1
    for i, v in enumerate(views):  # no view overlaps another
        assert np.all(v == i + 1)
    arena.fill(0)  # one fill zeroes them all
    assert all(not v.any() for v in views)
    assert sparse_pressure_gpu.PERSIST in (True, False)
