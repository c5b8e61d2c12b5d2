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
