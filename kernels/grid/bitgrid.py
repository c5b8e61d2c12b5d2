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
from .launch import Kernels

_CU = "bitgrid.cu"
_K = Kernels(_CU)


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
    # bool and uint8 share a layout: a view, not a copy of the whole grid
    src = xp.ascontiguousarray(dense.view(xp.uint8) if dense.dtype == xp.bool_ else dense.astype(xp.uint8))
    _K.launch("pack_bits", words.size, (src, words, np.int64(nz * ny), np.int32(nx), np.int32(wx)))
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
    _K.launch("unpack_bits", words.size,
              (xp.ascontiguousarray(words), dense, np.int64(nz * ny), np.int32(nx), np.int32(wx)))
    return dense.view(xp.bool_)


# Words per chunk when counting or listing: bounds the temporaries (a popcount per word,
# an unpacked slab) to a few hundred MiB whatever the grid's size.
CHUNK_WORDS = 1 << 21
_BYTE_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.uint8)


def count(words, chunk_words: int | None = None) -> int:
    """Number of set voxels: a popcount over the packed words, chunk by chunk (never a
    dense copy of the grid; temporaries of at most *chunk_words* words)."""
    xp = backend.array_module(words)
    chunk_words = chunk_words or CHUNK_WORDS
    flat = xp.ascontiguousarray(words).reshape(-1)
    total = 0
    for w0 in range(0, flat.size, chunk_words):
        part = flat[w0:w0 + chunk_words]
        if xp is np:
            total += int(_BYTE_POPCOUNT[part.view(np.uint8)].sum(dtype=np.int64))
        else:
            total += int(_popcounts(part).sum(dtype=xp.int64))
    return total


def count_bytes(shape, xp=np, chunk_words: int | None = None) -> int:
    """Temporary memory of ``count`` on a grid of (nx, ny, nz) voxels."""
    words = nbytes(shape) // 4
    chunk = min(words, chunk_words or CHUNK_WORDS)
    return chunk * 4  # CPU: a uint8 count per byte; GPU: an int32 count per word


def _row_chunks(words, chunk_words):
    """(k0, k1) ranges of z-layers holding about *chunk_words* words each."""
    nz, ny, wx = words.shape
    layers = max(1, (chunk_words or CHUNK_WORDS) // max(ny * wx, 1))
    for k0 in range(0, nz, layers):
        yield k0, min(nz, k0 + layers)


def coordinates(words, nx: int, chunk_words: int | None = None):
    """(N, 3) int32 voxel indices (i, j, k) of the set bits, in linear (k, j, i) order.

    Filled slab by slab of z-layers: besides the (N, 3) result only one slab's
    temporaries are alive, never a dense copy of the whole grid."""
    xp = backend.array_module(words)
    nz, ny, wx = words.shape
    words = xp.ascontiguousarray(words)
    total = count(words, chunk_words)
    ijk = xp.empty((total, 3), dtype=xp.int32)
    if total == 0:
        return ijk
    out = 0
    if xp is np:
        for k0, k1 in _row_chunks(words, chunk_words):
            k, j, i = np.nonzero(unpack(words[k0:k1], nx))
            n = len(k)
            ijk[out:out + n, 0] = i
            ijk[out:out + n, 1] = j
            ijk[out:out + n, 2] = k + k0
            out += n
        return ijk
    flat = words.reshape(-1)
    row_words = ny * wx
    for k0, k1 in _row_chunks(words, chunk_words):
        part = flat[k0 * row_words:k1 * row_words]
        counts = _popcounts(part)
        first = xp.cumsum(counts, dtype=xp.int64) - counts  # exclusive scan within the slab
        n = int(first[-1] + counts[-1])  # one sync per slab: where the next slab starts
        if n:
            _K.launch("bits_to_coords", part.size, (part, first, ijk[out:out + n], np.int64(part.size), np.int32(wx),
                                                    np.int32(ny), np.int32(k0)))
        out += n
    return ijk


def coordinates_bytes(shape, voxels: int, xp=np, chunk_words: int | None = None) -> int:
    """Peak memory of ``coordinates``: the (N, 3) int32 result and one slab's temporaries
    (CPU: unpacked uint8 + bool per voxel and nonzero's three int64 arrays; GPU: an
    int32 count and an int64 scan per word)."""
    nx, ny, nz = (int(n) for n in shape)
    wx = words_along_x(nx)
    layers = min(nz, max(1, (chunk_words or CHUNK_WORDS) // max(ny * wx, 1)))
    slab_words = layers * ny * wx
    slab_voxels = slab_words * 32
    per_slab_set = min(int(voxels), slab_voxels)
    if xp is np:
        temps = 2 * slab_voxels + 24 * per_slab_set + count_bytes(shape, xp, chunk_words)
    else:
        temps = 4 * slab_words + 2 * 8 * slab_words  # counts, cumsum, first
    return 12 * int(voxels) + temps


def _popcounts(words):
    xp = backend.array_module(words)
    counts = xp.empty(words.size, dtype=xp.int32)
    _K.launch("popcount_words", words.size, (xp.ascontiguousarray(words), counts, np.int64(words.size)))
    return counts
