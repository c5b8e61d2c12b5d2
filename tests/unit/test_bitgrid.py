"""Bit grid packing on the CPU reference path, checked against plain NumPy booleans."""

import numpy as np
import pytest

from voxfx.kernels.grid import bitgrid


@pytest.mark.parametrize("shape", [(1, 1, 1), (31, 2, 3), (32, 4, 1), (33, 3, 2), (100, 7, 5)])
def test_pack_unpack_round_trip(shape):
    nx, ny, nz = shape
    rng = np.random.default_rng(nx * 1000 + ny)
    dense = rng.random((nz, ny, nx)) < 0.3
    words = bitgrid.pack(dense)
    assert words.dtype == np.uint32 and words.shape == (nz, ny, bitgrid.words_along_x(nx))
    assert np.array_equal(bitgrid.unpack(words, nx), dense)
    assert bitgrid.count(words) == int(dense.sum())


def test_bit_b_of_word_w_is_voxel_32w_plus_b():
    dense = np.zeros((1, 1, 70), dtype=bool)
    dense[0, 0, [0, 5, 31, 32, 69]] = True
    words = bitgrid.pack(dense)
    assert words[0, 0, 0] == (1 << 0) | (1 << 5) | (1 << 31)
    assert words[0, 0, 1] == 1 << 0
    assert words[0, 0, 2] == 1 << (69 - 64)


def test_coordinates_are_ijk_in_linear_order():
    rng = np.random.default_rng(7)
    dense = rng.random((4, 5, 40)) < 0.2
    ijk = bitgrid.coordinates(bitgrid.pack(dense), 40)
    expected = sorted((k, j, i) for k, j, i in zip(*np.nonzero(dense)))
    assert [tuple(r) for r in ijk[:, ::-1]] == expected
    assert ijk.dtype == np.int32


def test_nbytes_and_empty():
    assert bitgrid.nbytes((33, 2, 3)) == 4 * 2 * 2 * 3
    g = bitgrid.empty((33, 2, 3), xp=np)
    assert g.shape == (3, 2, 2) and not g.any()


def test_count_and_coordinates_by_chunks_match_the_dense_answer():
    rng = np.random.default_rng(5)
    dense = rng.random((23, 17, 70)) < 0.3
    words = bitgrid.pack(dense)
    k, j, i = np.nonzero(dense)
    want = np.stack([i, j, k], axis=1).astype(np.int32)
    for chunk in (1, 3, 7, 50, 10 ** 6):  # below a row, a few rows, a layer, whole grid
        assert bitgrid.count(words, chunk_words=chunk) == int(dense.sum())
        got = bitgrid.coordinates(words, 70, chunk_words=chunk)
        assert got.dtype == np.int32 and np.array_equal(got, want)


def test_count_and_coordinates_need_no_dense_copy_of_the_grid(monkeypatch):
    """Issue 21 §6: counting or reading back never needs another copy of the whole grid
    (the old count unpacked every voxel to a byte: 128 MiB here)."""
    import tracemalloc

    monkeypatch.setattr(bitgrid, "CHUNK_WORDS", 1 << 16)
    shape = (1024, 1024, 128)  # 128 M voxels, a 16 MiB bit grid
    words = np.zeros(bitgrid.nbytes(shape) // 4, np.uint32).reshape(128, 1024, 32)
    words[5, 7, 3] = 0b1011  # three set voxels
    words[100, 2, 31] = 1 << 31
    tracemalloc.start()
    try:
        assert bitgrid.count(words) == 4
        count_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        ijk = bitgrid.coordinates(words, 1024)
        coords_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ijk.tolist() == [[96, 7, 5], [97, 7, 5], [99, 7, 5], [1023, 2, 100]]
    assert count_peak < 2 << 20, count_peak  # ≤ a chunk's temporaries, not 128 MiB
    assert coords_peak < 3 * bitgrid.coordinates_bytes(shape, 4), coords_peak
    assert bitgrid.coordinates_bytes(shape, 4) < 8 << 20
