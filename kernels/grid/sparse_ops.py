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

from .sparse import BRICK, SparseGrid, brick_keys

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
    """Voxels of *channel* that differ from its background."""
    xp, topo = grid.xp, grid.topology
    differs = grid.channels[channel][topo.slots] != grid.backgrounds[channel]
    if differs.ndim > 4:
        differs = differs.reshape(differs.shape[:4] + (-1,)).any(axis=-1)
    return int(xp.count_nonzero(differs))
