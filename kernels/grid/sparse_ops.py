"""Neighbours, aprons and stencils on the sparse brick core (issue 11; seed 003 §8).

* ``neighbour_table``: for every active brick the pool slots of its 3³ neighbourhood
  (itself at the centre, index 13), −1 where a neighbour is inactive: 27 binary searches
  per brick, once per topology; every stencil reads it.
* ``with_apron``: each brick's data with a halo of *width* voxels copied from its
  neighbours (background where a neighbour is inactive): ``(n, 8 + 2w, 8 + 2w, 8 + 2w)``.
  Stencils then run on plain arrays without border cases (seed 003 §8's apron).
* ``laplacian``: the 7-point Laplacian Σ neighbours − 6·centre on every active voxel,
  read from the apron; inactive neighbours count as the background (Dirichlet outside the
  active bricks), exactly as a dense array padded with the background.
* ``active_voxels`` / ``count``: lattice indices of the voxels that differ from the
  background, without a dense copy.

All of it is ``xp`` array operations, identical on NumPy and CuPy.
"""

from __future__ import annotations

import numpy as np

from .launch import Kernels
from ..errors import InputError
from .sparse import BRICK, LOG2, SparseGrid, brick_keys

_K = Kernels("sparse.cu")

CENTRE = 13  # index of (0, 0, 0) among the 27 offsets (dz, dy, dx) ∈ {−1, 0, 1}³, z slowest


def offsets27(xp):
    """(27, 3) int64 neighbour offsets (dx, dy, dz), in the order dz, then dy, then dx."""
    r = xp.arange(-1, 2, dtype=xp.int64)
    dz, dy, dx = (a.ravel() for a in xp.meshgrid(r, r, r, indexing="ij"))
    return xp.stack([dx, dy, dz], axis=1)


def neighbour_table(grid: SparseGrid):
    """(n, 27) int32 pool slots of each active brick's neighbourhood, in key order; −1
    where the neighbour is inactive."""
    xp, topo = grid.xp, grid.topology
    coords = topo.coords()
    off = offsets27(xp)
    keys = brick_keys((coords[:, None, :] + off[None, :, :]).reshape(-1, 3), xp)
    return topo.lookup(keys).reshape(topo.count, 27)


def with_apron(grid: SparseGrid, channel: str, width: int = 1, table=None):
    """Every active brick (key order) with a halo of *width* voxels (1 ≤ width ≤ 8) from
    its neighbours: (n, 8 + 2w, 8 + 2w, 8 + 2w[, c]), z y x."""
    xp = grid.xp
    w = int(width)
    if not 1 <= w <= BRICK:
        raise ValueError(f"apron width must be 1..{BRICK}, not {width}")
    table = neighbour_table(grid) if table is None else table
    pool = grid.channels[channel]
    comp = pool.shape[4:]
    n = grid.topology.count
    side = BRICK + 2 * w
    out = xp.full((n, side, side, side) + comp, grid.backgrounds[channel], pool.dtype)
    # Per axis, the part of a neighbour that lands in the apron: offset −1 → its last w
    # voxels, 0 → all 8, +1 → its first w.
    src = {-1: slice(BRICK - w, BRICK), 0: slice(0, BRICK), 1: slice(0, w)}
    dst = {-1: slice(0, w), 0: slice(w, w + BRICK), 1: slice(w + BRICK, side)}
    off = [(dx, dy, dz) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    for m, (dx, dy, dz) in enumerate(off):
        slots = table[:, m]
        have = xp.flatnonzero(slots >= 0)
        if have.size == 0:
            continue
        block = pool[slots[have]][:, src[dz], src[dy], src[dx]]
        out[have, dst[dz], dst[dy], dst[dx]] = block
    return out


def laplacian(grid: SparseGrid, channel: str, table=None):
    """(n, 8, 8, 8) Σ of the 6 face neighbours − 6 × the voxel, on every voxel of the
    active bricks (key order), in the channel's dtype, summed as ((z− + z+) + (y− + y+)) +
    (x− + x+) − 6·c; neighbours outside the active bricks are the background."""
    a = with_apron(grid, channel, 1, table)
    c = a[:, 1:-1, 1:-1, 1:-1]
    return (a[:, :-2, 1:-1, 1:-1] + a[:, 2:, 1:-1, 1:-1]) + (a[:, 1:-1, :-2, 1:-1] + a[:, 1:-1, 2:, 1:-1]) \
        + (a[:, 1:-1, 1:-1, :-2] + a[:, 1:-1, 1:-1, 2:]) - c * 6


def active_voxels(grid: SparseGrid, channel: str):
    """(m, 3) int64 lattice (i, j, k) of the voxels whose value differs from the channel's
    background, bricks in key order, voxels z y x inside each; no dense copy."""
    xp, topo = grid.xp, grid.topology
    pool = grid.channels[channel]
    data = pool[topo.slots]
    differs = data != grid.backgrounds[channel]
    if differs.ndim > 4:
        differs = differs.reshape(differs.shape[:4] + (-1,)).any(axis=-1)
    b, z, y, x = xp.nonzero(differs)
    base = topo.coords()[b] * BRICK
    return base + xp.stack([x, y, z], axis=1).astype(xp.int64)


def count(grid: SparseGrid, channel: str) -> int:
    """Voxels of *channel* that differ from its background (its tiles' whole bricks too)."""
    xp, topo = grid.xp, grid.topology
    differs = grid.channels[channel][topo.slots] != grid.backgrounds[channel]
    if differs.ndim > 4:
        differs = differs.reshape(differs.shape[:4] + (-1,)).any(axis=-1)
    tiles = grid.tiles.get(channel)
    full = tiles.bricks * BRICK ** 3 if tiles is not None and bool(xp.any(xp.asarray(tiles.value)
                                                                            != grid.backgrounds[channel])) else 0
    return int(xp.count_nonzero(differs)) + full


def _voxels(ijk, xp):
    ijk = xp.ascontiguousarray(xp.asarray(ijk), dtype=xp.int64)
    if ijk.ndim != 2 or ijk.shape[1] != 3:
        raise InputError(f"voxel indices must be an (m, 3) integer array, not shape {tuple(ijk.shape)}")
    return ijk


def _slots_of_voxels(topo, ijk, xp):
    """Pool slot of each voxel's brick, −1 where it is inactive or beyond the key range."""
    from .sparse import BITS, OFFSET

    b = (ijk >> LOG2) + OFFSET
    inside = ((b >= 0) & (b < (1 << BITS))).all(axis=1)
    keys = (b[:, 2] << (2 * BITS)) | (b[:, 1] << BITS) | b[:, 0]
    return xp.where(inside, topo.lookup(xp.where(inside, keys, 0)), xp.int32(-1))


def values_at(grid: SparseGrid, channel: str, ijk):
    """Values of a scalar *channel* at lattice voxels *ijk* ((m, 3) integer, x y z); the
    background where the brick is inactive. One binary search per voxel."""
    xp = grid.xp
    ijk = _voxels(ijk, xp)
    pool = grid.channels[channel]
    bg = grid.backgrounds[channel]
    topo = grid.topology
    if xp is not np and pool.dtype == np.float32 and pool.ndim == 4:
        out = xp.empty(ijk.shape[0], xp.float32)
        if ijk.shape[0]:
            _K.launch("sparse_gather_f32", ijk.shape[0],
                      (ijk, np.int64(ijk.shape[0]), topo.keys, topo.slots, np.int64(topo.count), pool, np.float32(bg),
                       out))
        return out
    slot = _slots_of_voxels(topo, ijk, xp)
    local = (ijk & (BRICK - 1))
    got = pool[xp.maximum(slot, 0), local[:, 2], local[:, 1], local[:, 0]]
    return xp.where(slot >= 0, got, xp.asarray(bg, dtype=pool.dtype))


def set_voxels(grid: SparseGrid, channel: str, ijk, value=1) -> int:
    """Set a uint8 *channel* to *value* at lattice voxels *ijk* whose brick is active;
    returns how many voxels had no active brick (and were not set)."""
    xp = grid.xp
    ijk = _voxels(ijk, xp)
    pool = grid.channels[channel]
    if pool.dtype != np.uint8 or pool.ndim != 4:
        raise InputError(f"set_voxels writes a scalar uint8 channel, not {pool.dtype} {pool.shape[4:]}")
    topo = grid.topology
    if xp is not np:
        missed = xp.zeros(1, xp.uint64)
        if ijk.shape[0]:
            _K.launch("sparse_set_u8", ijk.shape[0],
                      (ijk, np.int64(ijk.shape[0]), topo.keys, topo.slots, np.int64(topo.count), pool, np.uint8(value),
                       missed))
        return int(missed[0])
    slot = _slots_of_voxels(topo, ijk, xp)
    ok = slot >= 0
    local = ijk[ok] & (BRICK - 1)
    pool[slot[ok], local[:, 2], local[:, 1], local[:, 0]] = value
    return int((~ok).sum())
