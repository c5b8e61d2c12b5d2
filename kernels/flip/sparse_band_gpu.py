"""The narrow band's per-substep work in kernels (issue 24; ``kernels/cuda/flip_sparse_band.cu``):
``sparse_band.NarrowBand``'s hot pieces on CuPy, its array code the reference, the same
bits (the same float operations in the same order, ``--fmad=false``; the same integer sets in
the same order).

    carry        one thread per (deep cell, face side, component): the face's brick from the
                 grid's brick index (closed) or a binary search over the brick keys, the
                 trace's corners by the neighbour table (``band_carry``), then the deep
                 cells FLUID (``band_deep_fluid``); was per component a concatenation,
                 ``grid.locate`` (searchsorted), a compaction and two ``sample_faces`` of
                 array code (~100 launches and host syncs).
    trace        §4.2's φ̃(x) = φ(x − Δt·u(x)) of every candidate cell in one kernel
                 (``band_trace``): the grid velocity as above, φ from a dense map of the
                 stored φ over the update's frame box (``_Frame``: its key is the map's
                 index), FAR elsewhere; was ``sample_faces`` and ``NarrowBand.sample`` (an
                 argsort of the stored cells and eight searchsorted passes).
    depths       the 6-neighbour erosion on a dense int8 map of the liquid's depths over the
                 frame box, one launch an erosion (``band_erode``); was per erosion six
                 searchsorted passes over the level's keys and a host sync each.
    resample     the refilled particles' φ and grid velocity from the new φ's map and the
                 bricks (``band_sample_points``, ``band_sample_faces``).

``VOXFX_SPARSE_BAND=kernels|arrays`` chooses (``band_mode``; default kernels). The kernels
serve a CuPy grid with brick tables and no obstacles (cells or bodies: the array code checks
those) whose frame box holds at most ``MAP_LIMIT`` cells; otherwise the array code runs.

Measured (H100 80GB HBM3, ``bench/flip_sparse_band.py``; see the module text of
``sparse_band.py`` for the numbers of each call).
"""

from __future__ import annotations

import os

import numpy as np

from ..grid.launch import Kernels
from . import sparse_gpu
from .grid import FLUID, SOLID

KERNELS = Kernels("flip_sparse_band.cu", ("--fmad=false",))
MODES = ("kernels", "arrays")
MAP_LIMIT = 1 << 28  # frame box cells of the dense maps (1 GiB of float32 φ): beyond it the array code
FAR = 2.0  # sparse_band.FAR (kept equal by tests/unit/test_flip_sparse_band_kernels.py)
_I32, _I64, _F = np.int32, np.int64, np.float32


def band_mode(mode=None) -> str:
    """The band's way: *mode*, else ``VOXFX_SPARSE_BAND``, else kernels."""
    mode = mode or os.environ.get("VOXFX_SPARSE_BAND", "").strip().lower() or MODES[0]
    if mode not in MODES:
        raise ValueError(f"VOXFX_SPARSE_BAND must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def usable(sim) -> bool:
    """The kernels serve *sim* now (module notes): CuPy, brick tables, no obstacles."""
    if band_mode() != "kernels" or not sparse_gpu.available(sim.grid):
        return False
    if len(sim.obstacle) or any(getattr(b, "count", 0) for b in sim.obstacle_bodies):
        return False
    return True


def map_fits(frame) -> bool:
    return float(np.prod(frame.span.astype(np.float64))) <= MAP_LIMIT


def _grid_args(grid):
    t = grid.topology
    return (t.keys, t.slots, _I64(t.count), grid.brick_nbr, *sparse_gpu.brick_index(grid), _I32(grid.closed),
            *(_I32(n) for n in grid.shape))


def _box_args(frame):
    return (*(_I64(v) for v in frame.lo), *(_I64(v) for v in frame.span))


def _rows(xp, a, dtype):
    return xp.ascontiguousarray(a, dtype=dtype)


def carry(grid, deep, carried, dt: float) -> None:
    """``NarrowBand.carry`` (deep: (D, 3) int64 lattice cells; *carried*: the faces of the
    snapshot) in two launches; new valid masks in ``grid.valid``."""
    cp = grid.xp
    d = _rows(cp, deep, cp.int64)
    n = int(d.shape[0])
    valid = tuple(cp.ascontiguousarray(m, dtype=cp.uint8) for m in grid.valid)
    out = tuple(m.copy() for m in valid)
    args = _grid_args(grid)
    KERNELS.launch("band_carry", 6 * n, (d, _I64(n), *carried, *args, _F(dt / grid.h), *valid, *grid.faces(), *out))
    grid.valid = out
    KERNELS.launch("band_deep_fluid", n, (d, _I64(n), *args, np.uint8(SOLID), np.uint8(FLUID), grid["cell"]))


def phi_map(frame, cells, phi):
    """float32 over *frame*'s box: φ at the stored *cells*, FAR elsewhere."""
    cp = frame.xp
    size = int(np.prod(frame.span))
    out = cp.full(size, _F(FAR), cp.float32)
    c = _rows(cp, cells, cp.int64)
    KERNELS.launch("band_scatter_phi", c.shape[0], (c, _rows(cp, phi, cp.float32), _I64(c.shape[0]), *_box_args(frame),
                                                    out))
    return out


def trace(grid, cells, dt: float, phi, frame):
    """§4.2: φ(x − Δt·u(x)) at the centres of *cells* ((m, 3) int64) over the map *phi*."""
    cp = grid.xp
    c = _rows(cp, cells, cp.int64)
    m = int(c.shape[0])
    out = cp.empty(m, cp.float32)
    KERNELS.launch("band_trace", m, (c, _I64(m), *grid.faces(), *_grid_args(grid), _F(dt / grid.h), phi,
                                     *_box_args(frame), out))
    return out


def sample_points(grid, x, phi, frame):
    """``NarrowBand.sample`` at points *x* ((m, 3) float32, cell units) over the map *phi*."""
    cp = grid.xp
    p = _rows(cp, x, cp.float32)
    m = int(p.shape[0])
    out = cp.empty(m, cp.float32)
    KERNELS.launch("band_sample_points", m, (p, _I64(m), phi, *_box_args(frame), _I32(grid.closed),
                                             *(_I32(n) for n in grid.shape), out))
    return out


def sample_faces(grid, x):
    """The grid velocity ((m, 3) float32) at points *x* ((m, 3) float32, cell units)."""
    cp = grid.xp
    p = _rows(cp, x, cp.float32)
    m = int(p.shape[0])
    out = cp.empty((m, 3), cp.float32)
    KERNELS.launch("band_sample_faces", m, (p, _I64(m), *grid.faces(), *_grid_args(grid), out))
    return out


def depths(grid, keys, cells: int, frame):
    """``NarrowBand._depths`` of the liquid cells of sorted *keys* (their frame keys): 6-neighbour
    erosions on a dense map, up to *cells* (the band's depth)."""
    cp = grid.xp
    k = _rows(cp, keys, cp.int64)
    m = int(k.shape[0])
    depth = cp.zeros(m, cp.int64)
    if m == 0:
        return depth
    depth_map = cp.full(int(np.prod(frame.span)), -1, cp.int8)
    depth_map[k] = 0
    for level in range(1, int(cells) + 1):
        KERNELS.launch("band_erode", m, (k, _I64(m), _I32(level), depth_map, *_box_args(frame), _I32(grid.closed),
                                         *(_I32(n) for n in grid.shape), depth))
    return depth
