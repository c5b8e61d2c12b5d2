"""The sparse voxelizer on the device in a handful of launches (issue 11; seed 003 §5.1,
seed 004 §5), for surface, thin, solid and solid+surface (the 3-axis vote stays on the
tile path of ``sparse.py``).

Every voxel is decided by the dense kernels' own device functions (``cuda/voxelize.cu``,
included by ``cuda/voxelize_sparse.cu``) over the same work items as the dense launch of
the whole grid, so the set voxels are the dense voxelizer's bit for bit; only where a bit
is stored differs.

* **Surface topology** (003 §5.1): each triangle's touched brick range → (brick, triangle)
  pairs → CUB radix sort + unique (``cupy.unique``) → the candidate bricks, sorted, with
  the first index of each brick row (a short search per lookup, no dense index).
* **Surface voxels**: every triangle's setup built once into device memory (shared by the
  threads of its columns: built per thread it would live in local memory), then one
  launch over the dense pass's columns; each set voxel ORs its bit into its brick.
  Bricks left empty are dropped.
* **Solid** (004 §4.1, §5): the dense pass's flip starts, appended as keys (brick row, x,
  row inside the brick) instead of XORed into a dense grid → one sort → one thread per
  brick row walks along x with its 64 rows' parity: bricks where crossings land are
  stored bit by bit, runs of bricks whose rows are all inside become one **full run**
  (``SparseGrid.tiles``), mixed runs are stored brick by brick. Memory follows the
  surface: interior bricks cost 32 bytes per run, not 64 per brick.
* solid+surface: the solid's bricks join the surface candidates, the surface ORs in,
  and surface bricks inside a full run are dropped (already full).

Host syncs: the plan's totals, the pair count, the crossing count, the bricks and runs
per row, the check (a handful, independent of the grid's size). *progress* hears after
the solid and the surface stages (no cancel inside a launch: 0.5 s at 16384³).
"""

from __future__ import annotations

import zlib

import numpy as np

from .. import backend
from ..grid.launch import Kernels
from ..grid.sparse import BITS, OFFSET, Tiles
from ..progress import report
from . import gpu

_CU = "voxelize_sparse.cu"
# voxelize.cu is #included: its digest in the options recompiles when it changes (CuPy's
# cache keys on this file's text and the options only).
_DIGEST = zlib.crc32((backend.CUDA_DIR / "voxelize.cu").read_bytes()) & 0x7FFFFFFF
# Surface columns per thread (VOXFX_SPARSE_ITEMS of the .cu). With the setups shared in
# device memory one is best: bunny 4096³ surface on an H100, 1: 21.7 ms, 8: 24.9, 32: 30.8.
ITEMS_PER_THREAD = 1
_K = Kernels(_CU, ("--fmad=false", f"-I{backend.CUDA_DIR}"), 128,
             defines={**gpu.DEFINES, "VOXFX_VOXELIZE_DIGEST": _DIGEST, "VOXFX_SPARSE_ITEMS": ITEMS_PER_THREAD})


_SIZES: dict = {}


def _setup_bytes(cp) -> int:
    """sizeof(Setup) of the compiled kernels (asked once per device)."""
    dev = cp.cuda.Device().id
    if dev not in _SIZES:
        out = cp.zeros(1, cp.int64)
        _K.launch("sparse_setup_size", 1, (out,))
        _SIZES[dev] = int(out[0])
    return _SIZES[dev]


def _lin_to_keys(lin, nbx, nby, cp):
    """SparseGrid keys (kernels/grid/sparse.py) of brick numbers (bz·nby + by)·nbx + bx."""
    bx, rest = lin % nbx, lin // nbx
    by, bz = rest % nby, rest // nby
    return ((bz + OFFSET) << (2 * BITS)) | ((by + OFFSET) << BITS) | (bx + OFFSET)


def _surface_candidates(mesh, nb, cp):
    """Sorted unique brick numbers of every brick a triangle's touched range reaches."""
    T = mesh.n_tris
    nx, ny, nz = mesh.shape
    counts = cp.empty(T, cp.int64)
    bbox = cp.empty((T, 6), cp.int32)
    _K.launch("sparse_surface_boxes", T, (mesh.pv, mesh.tris, np.int64(T), np.int64(mesh.pv.shape[0]),
                                          np.int32(nx), np.int32(ny), np.int32(nz), counts, bbox, mesh.flags))
    ends = cp.cumsum(counts)
    total = int(ends[-1])  # sync
    pairs = cp.empty(total, cp.int64)
    _K.launch("sparse_expand_bricks", total, (ends, counts, bbox, np.int64(T), np.int64(total),
                                              np.int64(nb[0]), np.int64(nb[1]), pairs))
    return cp.unique(pairs)


def _solid(mesh, work, nb, cp):
    """(brick numbers, (n, 8, 8) uint8 rows, (m, 4) int64 full runs) of the solid."""
    counts, ends, total = work
    nx, ny, nz = mesh.shape
    xbits = max(1, (nx - 1).bit_length())
    n_out = cp.zeros(1, cp.uint64)
    args = (mesh.pv, mesh.tris, ends, counts, np.int64(mesh.n_tris), np.int64(total), np.int32(nx), np.int32(ny),
            np.int32(nz), np.int32(xbits))
    _K.launch("sparse_solid_crossings", total, args + (np.int32(0), n_out, n_out))  # count them
    n = int(n_out[0])  # sync
    empty = (cp.zeros(0, cp.int64), cp.zeros((0, 8, 8), cp.uint8), cp.zeros((0, 4), cp.int64))
    if n == 0:
        return empty
    keys = cp.empty(n, cp.int64)
    n_out[:] = 0
    _K.launch("sparse_solid_crossings", total, args + (np.int32(1), keys, n_out))
    keys.sort()  # CUB radix sort, in place
    starts = cp.empty(n, cp.uint8)
    _K.launch("sparse_row_starts", n, (keys, np.int64(n), np.int32(xbits), starts))
    seg = cp.concatenate([cp.flatnonzero(starts), cp.asarray([n], cp.int64)]).astype(cp.int64)
    del starts
    n_segs = int(seg.shape[0]) - 1
    nbk, nrn = cp.zeros(n_segs, cp.int64), cp.zeros(n_segs, cp.int64)
    args = (keys, seg, np.int64(n_segs), np.int32(xbits), np.int64(nb[0]), np.int64(nb[1]))
    dummy = cp.zeros(1, cp.int64)
    _K.launch("sparse_solid_rows", n_segs, args + (np.int32(0), nbk, nrn, dummy, dummy.view(cp.uint8), dummy))
    bk_end, rn_end = cp.cumsum(nbk), cp.cumsum(nrn)
    n_bricks, n_runs = (int(x) for x in cp.concatenate([bk_end[-1:], rn_end[-1:]]).get())  # sync
    lin = cp.empty(n_bricks, cp.int64)
    rows = cp.empty((n_bricks, 8, 8), cp.uint8)
    runs = cp.empty((n_runs, 4), cp.int64)
    _K.launch("sparse_solid_rows", n_segs, args + (np.int32(1), bk_end - nbk, rn_end - nrn,
                                                   lin if n_bricks else dummy,
                                                   rows if n_bricks else dummy.view(cp.uint8),
                                                   runs if n_runs else dummy))
    return lin, rows, runs


def _in_runs(lin, runs, nb, cp):
    """Whether each brick number lies in one of the sorted, disjoint full runs."""
    nbx, nby = nb[0], nb[1]
    start = (runs[:, 3] * nby + runs[:, 2]) * nbx + runs[:, 0]
    at = cp.searchsorted(start, lin, side="right") - 1
    r = runs[cp.maximum(at, 0)]
    return (at >= 0) & (lin // nbx == r[:, 3] * nby + r[:, 2]) & (lin % nbx < r[:, 1])


def voxelize_bricks(vertices, triangles, spec, mode: str, progress=None):
    """(keys, (n, 8, 8) uint8 rows, Tiles or None) of ``voxelize(vertices, triangles,
    spec, mode)`` (not the vote) on the device; *spec*'s shape a multiple of 8."""
    import cupy as cp

    mesh = gpu.DeviceMesh(vertices, triangles, spec)
    nx, ny, nz = mesh.shape
    nb = (nx // 8, ny // 8, nz // 8)
    solid = mode in ("solid", "solid+surface")
    surface = mode in ("surface", "thin", "solid+surface")
    empty = cp.zeros(0, cp.int64), cp.zeros((0, 8, 8), cp.uint8), None
    if mesh.n_tris == 0:
        return empty
    work = gpu.plan(([(mesh, "solid")] if solid else []) + ([(mesh, "surface")] if surface else []))
    lin, rows, runs = cp.zeros(0, cp.int64), cp.zeros((0, 8, 8), cp.uint8), cp.zeros((0, 4), cp.int64)
    if solid:
        lin, rows, runs = _solid(mesh, work[0], nb, cp)
        report(progress, 0.5 if surface else 1.0, "solid bricks")
    if surface:
        cand = _surface_candidates(mesh, nb, cp)
        if solid and lin.shape[0]:
            cand = cp.unique(cp.concatenate([cand, lin]))
        pool = cp.zeros((int(cand.shape[0]), 8, 8), cp.uint8)
        if solid and lin.shape[0]:
            pool[cp.searchsorted(cand, lin)] = rows
        row_start = cp.searchsorted(cand, cp.arange(nb[1] * nb[2] + 1, dtype=cp.int64) * nb[0]).astype(cp.int64)
        missing = cp.zeros(1, cp.uint64)
        counts, ends, total = work[-1]
        if total:
            T = mesh.n_tris
            setups = cp.empty(T * _setup_bytes(cp), cp.uint8)
            _K.launch("sparse_surface_setups", T, (mesh.pv, mesh.tris, np.int64(T), np.int64(mesh.pv.shape[0]),
                                                   np.int32(nx), np.int32(ny), np.int32(nz),
                                                   np.int32(1 if mode == "thin" else 0), setups, mesh.flags))
            _K.launch("sparse_surface_columns", -(-total // ITEMS_PER_THREAD),
                      (setups, ends, counts, np.int64(T), np.int64(total), cand, row_start, np.int64(nb[0]),
                       np.int64(nb[1]), pool.view(cp.uint32), missing))
            del setups
        del row_start
        keep = pool.reshape(-1, 64).view(cp.uint64).any(axis=1)
        if runs.shape[0]:
            keep &= ~_in_runs(cand, runs, nb, cp)
        if int(missing[0]):  # sync
            raise RuntimeError("the sparse voxelizer set a voxel outside its bricks (a bug: please report it)")
        idx = cp.flatnonzero(keep)
        lin, rows = cand[idx], pool[idx]
        report(progress, 1.0, "surface bricks")
    tiles = Tiles(runs, 1) if runs.shape[0] else None
    return _lin_to_keys(lin, nb[0], nb[1], cp), cp.ascontiguousarray(rows), tiles
