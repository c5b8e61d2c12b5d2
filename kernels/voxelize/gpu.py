"""CuPy launches of ``cuda/voxelize.cu``: the same passes as the NumPy reference."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid import bitgrid

_CU = "voxelize.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: bit-identical voxels on both backends
_THREADS = 128


def _kernel(name):
    return backend.get_kernel(_CU, name, _OPTIONS)


def _blocks(n):
    return ((int(n) + _THREADS - 1) // _THREADS,)


def _scan(counts):
    """Inclusive scan and total (the one host sync: the launch size of the next pass)."""
    import cupy as cp

    ends = cp.cumsum(counts)
    total = int(ends[-1]) if counts.size else 0
    return ends, total


def _surface_work(pv, triangles, shape):
    """Column work items of the surface pass: (pv, tris, counts, ends, total)."""
    import cupy as cp

    nx, ny, nz = (int(n) for n in shape)
    T = int(triangles.shape[0])
    pv = cp.ascontiguousarray(pv, dtype=cp.float64)
    tris = cp.ascontiguousarray(triangles, dtype=cp.int32)
    counts = cp.empty(T, dtype=cp.int64)
    _kernel("surface_column_counts")(_blocks(T), (_THREADS,), (pv, tris, np.int64(T), np.int32(nx), np.int32(ny),
                                                               np.int32(nz), counts))
    ends, total = _scan(counts)
    return pv, tris, counts, ends, total


def surface_voxels_gpu(pv, triangles, shape, thin=False, words=None):
    import cupy as cp

    nx, ny, nz = (int(n) for n in shape)
    if words is None:
        words = cp.zeros((nz, ny, bitgrid.words_along_x(nx)), dtype=cp.uint32)
    T = int(triangles.shape[0])
    if T == 0:
        return words
    pv, tris, counts, ends, total = _surface_work(pv, triangles, shape)
    if total:
        _kernel("surface_columns")(_blocks(total), (_THREADS,),
                                   (pv, tris, ends, counts, np.int64(T), np.int64(total), np.int32(nx),
                                    np.int32(ny), np.int32(nz), np.int32(1 if thin else 0), words))
    return words


def flip_starts_gpu(pv, triangles, shape):
    import cupy as cp

    nx, ny, nz = (int(n) for n in shape)
    words = cp.zeros((nz, ny, bitgrid.words_along_x(nx)), dtype=cp.uint32)
    T = int(triangles.shape[0])
    if T == 0:
        return words
    pv = cp.ascontiguousarray(pv, dtype=cp.float64)
    tris = cp.ascontiguousarray(triangles, dtype=cp.int32)
    counts = cp.empty(T, dtype=cp.int64)
    _kernel("solid_column_counts")(_blocks(T), (_THREADS,), (pv, tris, np.int64(T), np.int32(ny), np.int32(nz), counts))
    ends, total = _scan(counts)
    if total:
        _kernel("solid_flip_starts")(_blocks(total), (_THREADS,),
                                     (pv, tris, ends, counts, np.int64(T), np.int64(total), np.int32(nx),
                                      np.int32(ny), np.int32(nz), words))
    return words


def prefix_xor_rows_gpu(words, nx):
    nz, ny, wx = words.shape
    rows = nz * ny
    _kernel("prefix_xor_rows")(_blocks(rows), (_THREADS,), (words, np.int64(rows), np.int32(wx), np.int32(nx)))
    return words


def solid_voxels_gpu(pv, triangles, shape):
    return prefix_xor_rows_gpu(flip_starts_gpu(pv, triangles, shape), int(shape[0]))


def majority_vote_gpu(pv, triangles, shape):
    import cupy as cp

    nx, ny, nz = (int(n) for n in shape)
    votes = bitgrid.unpack(solid_voxels_gpu(pv, triangles, shape), nx).view(cp.uint8).copy()
    sy = bitgrid.unpack(solid_voxels_gpu(pv[:, [1, 2, 0]], triangles, (ny, nz, nx)), ny).view(cp.uint8)
    votes += sy.transpose(1, 2, 0)
    sz = bitgrid.unpack(solid_voxels_gpu(pv[:, [2, 0, 1]], triangles, (nz, nx, ny)), nz).view(cp.uint8)
    votes += sz.transpose(2, 0, 1)
    return bitgrid.pack(votes >= 2)


def surface_owners_gpu(pv, triangles, shape, linear):
    """Smallest index of a triangle whose conservative test covers each listed voxel
    (sorted linear indices); INT32_MAX where none does."""
    import cupy as cp

    nx, ny, nz = (int(n) for n in shape)
    owner = cp.full(int(linear.size), np.iinfo(np.int32).max, dtype=cp.int32)
    T = int(triangles.shape[0])
    if T == 0 or linear.size == 0:
        return owner
    pv, tris, counts, ends, total = _surface_work(pv, triangles, shape)
    if total:
        _kernel("surface_owners")(_blocks(total), (_THREADS,),
                                  (pv, tris, ends, counts, np.int64(T), np.int64(total), np.int32(nx), np.int32(ny),
                                   np.int32(nz), cp.ascontiguousarray(linear, dtype=cp.int64),
                                   np.int64(linear.size), owner))
    return owner
