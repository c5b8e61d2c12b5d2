"""Packed bit grids: one bit per voxel, 32 voxels per uint32 word along x.

The word array has shape (nz, ny, ceil(nx / 32)); bit b of word w in row (j, k) is voxel
(32·w + b, j, k). Padding bits past nx are always zero. This is the layout the
voxelizer writes with ``atomicOr`` (seed 004 §3.2) and every other effect reads.

Each function runs on the array module of its input (NumPy reference or CuPy kernels in
``cuda/bitgrid.cu``) and gives identical results on both.
"""

from __future__ import annotations

import numpy as np

from .. import backend

_THREADS = 256
_CU = "bitgrid.cu"


def words_along_x(nx: int) -> int:
    return (int(nx) + 31) // 32


def nbytes(shape) -> int:
    """Bytes of a bit grid for a grid of (nx, ny, nz) voxels."""
    nx, ny, nz = (int(n) for n in shape)
    return 4 * words_along_x(nx) * ny * nz


def empty(shape, xp=None):
    """An all-zero bit grid for (nx, ny, nz) voxels on the current (or given) backend."""
    xp = xp or backend.xp()
    nx, ny, nz = (int(n) for n in shape)
    backend.ensure_fits(nbytes(shape), f"a {nx}×{ny}×{nz} bit grid", xp=xp)
    return xp.zeros((nz, ny, words_along_x(nx)), dtype=xp.uint32)


def pack(dense):
    """Bit grid from a boolean-like dense array indexed [k, j, i]."""
    xp = backend.array_module(dense)
    nz, ny, nx = dense.shape
    wx = words_along_x(nx)
    if xp is np:
        padded = np.zeros((nz, ny, wx * 32), dtype=bool)
        padded[..., :nx] = np.asarray(dense, dtype=bool)
        return np.packbits(padded, axis=-1, bitorder="little").view("<u4").astype(np.uint32)
    words = xp.empty((nz, ny, wx), dtype=xp.uint32)
    src = xp.ascontiguousarray(dense.astype(xp.uint8, copy=False))
    _launch("pack_bits", words.size, (src, words, np.int64(nz * ny), np.int32(nx), np.int32(wx)))
    return words


def unpack(words, nx: int):
    """Dense boolean array [k, j, i] of a bit grid of row length *nx*."""
    xp = backend.array_module(words)
    nz, ny, wx = words.shape
    if wx != words_along_x(nx):
        raise ValueError(f"a row of {wx} words cannot hold nx={nx} voxels")
    if xp is np:
        bits = np.unpackbits(np.ascontiguousarray(words, dtype="<u4").view(np.uint8), axis=-1, bitorder="little")
        return bits[..., :nx].astype(bool)
    dense = xp.empty((nz, ny, nx), dtype=xp.uint8)
    _launch("unpack_bits", words.size, (xp.ascontiguousarray(words), dense, np.int64(nz * ny), np.int32(nx), np.int32(wx)))
    return dense.view(xp.bool_)


def count(words) -> int:
    """Number of set voxels."""
    xp = backend.array_module(words)
    if xp is np:
        return int(np.unpackbits(np.ascontiguousarray(words, dtype="<u4").view(np.uint8)).sum(dtype=np.int64))
    return int(_popcounts(words).sum(dtype=xp.int64))


def coordinates(words, nx: int):
    """(N, 3) int32 voxel indices (i, j, k) of the set bits, in linear (k, j, i) order."""
    xp = backend.array_module(words)
    if xp is np:
        k, j, i = np.nonzero(unpack(words, nx))
        return np.stack([i, j, k], axis=1).astype(np.int32)
    nz, ny, wx = words.shape
    words = xp.ascontiguousarray(words)
    counts = _popcounts(words)
    first = xp.cumsum(counts, dtype=xp.int64) - counts  # exclusive scan
    total = int(first[-1] + counts[-1]) if counts.size else 0  # one sync: the output size
    ijk = xp.empty((total, 3), dtype=xp.int32)
    if total:
        _launch("bits_to_coords", words.size, (words, first, ijk, np.int64(words.size), np.int32(wx), np.int32(ny)))
    return ijk


def _popcounts(words):
    xp = backend.array_module(words)
    counts = xp.empty(words.size, dtype=xp.int32)
    _launch("popcount_words", words.size, (xp.ascontiguousarray(words), counts, np.int64(words.size)))
    return counts


def _launch(name: str, n: int, args) -> None:
    if n == 0:
        return
    kernel = backend.get_kernel(_CU, name)
    kernel(((n + _THREADS - 1) // _THREADS,), (_THREADS,), args)
