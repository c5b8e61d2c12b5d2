"""Obstacles, inflows and outflows of the sparse liquid as bricks (issue 12): the
``bodies.py`` boundaries without a dense box, so that in an open domain they may lie
anywhere on the lattice, outside the original box too.

A body (``bodies.Body``: world triangles and matrix) is voxelized by the sparse
voxelizer (``voxelize_sparse``, solid+surface with the 3-axis vote, as ``bodies.cells``)
over a grid aligned to the simulation's lattice that covers the body: its origin is the
simulation box's origin moved by a whole number of tiles towards the body only where the
body reaches below it, so a body inside the box is voxelized on exactly the box's origin
(the voxels ``bodies.cells`` finds). Its voxels are kept as 8³ bricks of bits on the
lattice (``BrickBody``: sorted keys and bit rows, 64 B a brick): memory follows the
body's surface and interior, not the domain.

Obstacles are marked SOLID on the liquid's active bricks only (``mark``): the topology
is the particles' influence boxes (``sparse_grid``), so the obstacle bricks within the
liquid's margin are the ones in the topology — the only cells the solve reads. A moving
obstacle carries its rigid step over the coming frame, ``step = M_next · M_now⁻¹``; the
velocity of a marked cell is (step·x − x)·fps at its centre x (``bodies.obstacle_state``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backend
from ..grid import GridSpec
from ..grid.sparse import BRICK, LOG2, brick_coords, brick_keys
from ..grid.sparse_mac import CELLS
from ..voxelize.sparse import CHANNEL, TILE, unpack_rows, voxelize_sparse


@dataclass
class BrickBody:
    """A voxelized body on the simulation lattice: ``keys`` sorted unique int64 brick keys
    (``grid.sparse.brick_keys``), ``rows`` (n, 8, 8) uint8 bit rows (bit x of row (z, y)),
    and for a moving obstacle its rigid ``step`` (4×4, NumPy) over one frame at ``fps``."""

    keys: object
    rows: object
    step: object = None
    fps: float = 0.0

    @property
    def count(self) -> int:
        return int(self.keys.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.rows.nbytes)


def empty(xp) -> BrickBody:
    return BrickBody(xp.zeros(0, xp.int64), xp.zeros((0, BRICK, BRICK), xp.uint8))


def voxel_bricks(body, spec: GridSpec, xp, progress=None) -> BrickBody:
    """The cells *body* fills (solid + surface, 3-axis vote) as bricks of *spec*'s lattice."""
    if body is None or len(body.triangles) == 0:
        return empty(xp)
    v = np.asarray(backend.to_numpy(body.vertices), np.float64).reshape(-1, 3)
    h = float(spec.voxel_size)
    origin = np.asarray(spec.origin, np.float64)
    lo = np.floor((v.min(axis=0) - origin) / h).astype(np.int64) - 1
    lo = np.minimum(lo, 0) // TILE * TILE  # whole tiles below the box's origin, 0 where the body is above it
    hi = np.floor((v.max(axis=0) - origin) / h).astype(np.int64) + 2
    shape = tuple(int(n) for n in np.maximum(hi - lo, 1))
    sub = GridSpec(tuple(float(o) + int(n) * h if n else float(o) for o, n in zip(spec.origin, lo)), h, shape)
    grid = voxelize_sparse(body.vertices, body.triangles, sub, "solid+surface", vote=True, xp=xp,
                           progress=progress)
    topo = grid.topology
    rows = grid.channels[CHANNEL][topo.slots]
    keep = (rows.reshape(rows.shape[0], -1) != 0).any(axis=1) if rows.shape[0] else xp.zeros(0, bool)
    coords = brick_coords(topo.keys[keep], xp) + xp.asarray(lo >> LOG2)
    keys = brick_keys(coords, xp)
    order = xp.argsort(keys)
    return BrickBody(keys[order], xp.ascontiguousarray(rows[keep][order]))


def cells(body: BrickBody, xp):
    """(M, 3) int64 lattice cells (i, j, k) of a ``BrickBody``."""
    if body.count == 0:
        return xp.zeros((0, 3), xp.int64)
    bits = unpack_rows(body.rows, xp).reshape(body.count, CELLS).astype(bool)  # [brick, z·64 + y·8 + x]
    brick, local = xp.nonzero(bits)
    base = brick_coords(body.keys, xp)[brick] * BRICK
    return xp.stack([base[:, 0] + (local & 7), base[:, 1] + ((local >> 3) & 7), base[:, 2] + (local >> 6)], axis=1)


def contains(body: BrickBody, ijk, xp):
    """bool per lattice cell (M, 3) int64: inside the body."""
    ijk = xp.asarray(ijk, dtype=xp.int64).reshape(-1, 3)
    if body.count == 0 or ijk.shape[0] == 0:
        return xp.zeros(ijk.shape[0], bool)
    keys = brick_keys(ijk >> LOG2, xp)
    at = xp.minimum(xp.searchsorted(body.keys, keys), body.count - 1)
    hit = body.keys[at] == keys
    x, y, z = ijk[:, 0] & 7, ijk[:, 1] & 7, ijk[:, 2] & 7
    bit = (body.rows[at, z, y] >> x.astype(xp.uint8)) & xp.uint8(1)
    return hit & (bit != 0)


def moving(now, next_matrices, spec: GridSpec, fps: float, xp) -> list:
    """``BrickBody`` per obstacle at this frame, each with its rigid step over the frame
    (None when it rests: ``bodies.obstacle_state``'s test)."""
    out = []
    for body, m1 in zip(now, next_matrices):
        b = voxel_bricks(body, spec, xp)
        if b.count == 0:
            continue
        step = np.asarray(m1, dtype=np.float64) @ np.linalg.inv(np.asarray(body.matrix, dtype=np.float64))
        if np.abs(step - np.eye(4)).max() > 1e-12:
            b.step, b.fps = step, float(fps)
        out.append(b)
    return out


def speed(body, spec: GridSpec, xp) -> float:
    """The fastest cell's speed (m/s) of a moving ``BrickBody`` over its rigid step (0
    at rest): |step·x − x|·fps at its cells' centres, for the substeps' CFL."""
    if body.step is None or body.count == 0:
        return 0.0
    ijk = cells(body, xp)
    x = xp.asarray(spec.origin, xp.float64) + (ijk.astype(xp.float64) + 0.5) * spec.voxel_size
    moved = x @ xp.asarray(body.step[:3, :3].T) + xp.asarray(body.step[:3, 3])
    return float(xp.sqrt(((moved - x) ** 2).sum(axis=1)).max()) * body.fps


def mark(grid, bodies_, solid, cell_vel):
    """Mark the cells of *bodies_* on *grid*'s active bricks: *solid* (bool per pool cell)
    set; *cell_vel* ((size, 3) float32 or None) takes each moving body's velocity. Returns
    *cell_vel* (allocated when a body moves)."""
    xp = grid.xp
    topo = grid.topology
    if topo.count == 0:
        return cell_vel
    local = xp.arange(CELLS, dtype=xp.int64)
    for b in bodies_:
        if b.count == 0:
            continue
        at = xp.minimum(xp.searchsorted(b.keys, topo.keys), b.count - 1)
        hit = xp.flatnonzero(b.keys[at] == topo.keys)
        if hit.shape[0] == 0:
            continue
        bits = unpack_rows(b.rows[at[hit]], xp).reshape(-1, CELLS).astype(bool)
        flat = (topo.slots[hit].astype(xp.int64)[:, None] * CELLS + local[None, :])[bits]
        solid[flat] = True
        if b.step is None:
            continue
        if cell_vel is None:
            cell_vel = xp.zeros((grid.size, 3), xp.float32)
        base = brick_coords(topo.keys[hit], xp) * BRICK
        ijk = xp.stack([base[:, 0:1] + (local & 7), base[:, 1:2] + ((local >> 3) & 7),
                        base[:, 2:3] + (local >> 6)], axis=-1)[bits]
        x = xp.asarray(grid.origin, dtype=xp.float64) + (ijk.astype(xp.float64) + 0.5) * grid.h
        x = x.astype(xp.float32).astype(xp.float64)  # the cell centres as ``bodies.centres`` rounds them
        moved = x @ xp.asarray(b.step[:3, :3].T) + xp.asarray(b.step[:3, 3])
        cell_vel[flat] = ((moved - x) * b.fps).astype(xp.float32)
    return cell_vel


def lattice_keys(a, b, xp):
    """int64 keys of lattice cells *a* (N, 3) and *b* (M, 3), comparable with each other
    (linear over their common bounding box): for ``isin`` tests."""
    both = xp.concatenate([xp.asarray(a, xp.int64).reshape(-1, 3), xp.asarray(b, xp.int64).reshape(-1, 3)])
    if both.shape[0] == 0:
        return xp.zeros(0, xp.int64), xp.zeros(0, xp.int64)
    lo = both.min(axis=0)
    span = both.max(axis=0) - lo + 1
    rel = both - lo
    key = (rel[:, 2] * span[1] + rel[:, 1]) * span[0] + rel[:, 0]
    n = int(len(a))
    return key[:n], key[n:]


def seeding_spec(spec: GridSpec, ijk) -> tuple:
    """(spec, offset): a grid on *spec*'s lattice that holds the cells *ijk* (NumPy
    (M, 3)), and the offset to subtract from them: *spec* itself (offset 0) when they lie
    in its box, so seeding there is the dense solver's."""
    ijk = np.asarray(ijk, np.int64).reshape(-1, 3)
    if ijk.shape[0] == 0:
        return spec, np.zeros(3, np.int64)
    lo, hi = ijk.min(axis=0), ijk.max(axis=0)
    if (lo >= 0).all() and (hi < np.asarray(spec.shape)).all():
        return spec, np.zeros(3, np.int64)
    h = spec.voxel_size
    origin = tuple(float(o) + int(n) * h for o, n in zip(spec.origin, lo))
    return GridSpec(origin, h, tuple(int(n) for n in hi - lo + 1)), lo
