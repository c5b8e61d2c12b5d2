"""GPU bit grid kernels equal the NumPy reference bit for bit, on fresh random inputs."""

import numpy as np
import pytest

from voxfx.kernels.grid import bitgrid


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 3, 2), (257, 31, 17), (1000, 64, 9)])
def test_gpu_bitgrid_matches_cpu(shape):
    import cupy as cp

    nx, ny, nz = shape
    dense = np.random.default_rng().random((nz, ny, nx)) < 0.37
    cpu_words = bitgrid.pack(dense)
    gpu_words = bitgrid.pack(cp.asarray(dense))
    assert np.array_equal(cp.asnumpy(gpu_words), cpu_words)
    assert np.array_equal(cp.asnumpy(bitgrid.unpack(gpu_words, nx)), dense)
    assert bitgrid.count(gpu_words) == bitgrid.count(cpu_words) == int(dense.sum())
    assert np.array_equal(cp.asnumpy(bitgrid.coordinates(gpu_words, nx)), bitgrid.coordinates(cpu_words, nx))


def test_gpu_coordinates_of_empty_grid():
    import cupy as cp

    words = cp.zeros((2, 3, 1), dtype=cp.uint32)
    assert bitgrid.coordinates(words, 10).shape == (0, 3)
