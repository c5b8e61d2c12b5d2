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


@pytest.mark.parametrize("chunk", [1, 5, 64, 10 ** 6])
def test_gpu_count_and_coordinates_by_slabs(chunk):
    """Slab-wise popcount and coordinates (the kernel's k0 offset) equal the CPU answer."""
    import cupy as cp

    dense = np.random.default_rng(3).random((19, 13, 70)) < 0.3
    words = bitgrid.pack(dense)
    gw = cp.asarray(words)
    assert bitgrid.count(gw, chunk_words=chunk) == int(dense.sum())
    assert np.array_equal(cp.asnumpy(bitgrid.coordinates(gw, 70, chunk_words=chunk)),
                          bitgrid.coordinates(words, 70))


def test_gpu_count_allocates_at_most_a_chunk():
    """count() on a big grid: the pool grows by one chunk of int32, not a word per word."""
    import cupy as cp

    pool = cp.get_default_memory_pool()
    words = cp.zeros((256, 1024, 32), dtype=cp.uint32)  # 8 M words, 32 MiB
    words[3, 4, 5] = 7
    pool.free_all_blocks()
    before = pool.total_bytes()
    assert bitgrid.count(words, chunk_words=1 << 16) == 3
    assert pool.total_bytes() - before <= 4 * (1 << 16) + (1 << 20)
