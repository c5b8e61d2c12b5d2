"""What ``voxelize(..., sparse=True)`` returns (issue 11): the voxels of a mesh as 8³
bricks of a ``SparseGrid`` (``sparse.voxelize_sparse``), cut to the grid's shape, with
the same questions a dense ``VoxelGrid`` answers and none of its memory.

    result = voxelize(vertices, triangles, spec, "solid", sparse=True)
    result.count()          # voxels set
    result.nbytes           # bytes the grid holds on its device (every channel)
    result.active_bricks    # 8³ bricks holding a set voxel
    result.to_dense()       # the dense VoxelGrid (only for grids that fit)
    result.grid             # the SparseGrid: channel "voxels" (bit rows), + "owner" etc.

Voxel order. Everything per voxel here (``coordinates``, ``chunks``, the attribute
channels of ``sparse_attributes``) runs over bricks in key order (z-major, then y, then
x) and over voxels z, y, x inside a brick: the *brick order*. The dense path lists voxels
in linear (k, j, i) order; the two hold the same set.

When sparse pays (``choose_sparse``, measured in bench/RESULTS.md "Sparse voxelizer"):
on the CPU the sparse path is up to 1.65× slower than dense (its per-tile
loop) for solids and as fast for surfaces, with a sixth of the memory or less, so ``auto``
takes it when the dense path would not fit in memory or above ``AUTO_CPU_VOXELS``
(1024³); on the GPU the dense kernels are 100× faster (H100: 2048³ surface
2.7 ms dense, 1024³ surface 1.2 s sparse), so ``auto`` takes sparse only where dense
does not fit on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backend
from ..grid import GridSpec
from ..grid.sparse import BRICK, SparseGrid, Topology
from .sparse import CHANNEL, unpack_rows

# Above this many grid voxels ``auto`` goes sparse on the CPU even where dense fits
# (bench/voxelize_sparse_auto.py, bunny, 2-core EPYC): from 256³ on, a sparse surface
# takes the dense time (1024³: 7.0 s vs 7.1 s) at a sixth of the memory (165 vs 962 MiB);
# a sparse solid+surface takes 1.4–1.65× the time at 0.15× the memory (1024³: 20 s,
# 164 MiB vs 14 s, 1089 MiB). Past 1024³ the dense peak passes 1 GiB and grows 8× per
# doubling, the sparse one 4×: sparse there.
AUTO_CPU_VOXELS = 1024 ** 3
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.uint8)
CHUNK_BRICKS = 1 << 14  # bricks per chunk of per-voxel lists: 8 M voxels at most


def choose_sparse(sparse, spec: GridSpec, dense_bytes: int, usable: int, xp) -> bool:
    """True where ``voxelize`` runs sparse: *sparse* True/False as given; ``"auto"``:
    sparse where the dense path's peak (*dense_bytes*) does not fit in *usable* bytes, or,
    on the CPU, where the grid has more than ``AUTO_CPU_VOXELS`` voxels."""
    if sparse is True or sparse is False:
        return sparse
    if sparse != "auto":
        from ..errors import InputError

        raise InputError(f"sparse must be True, False or 'auto', not {sparse!r}")
    if dense_bytes > usable:
        return True
    return xp is np and spec.voxel_count > AUTO_CPU_VOXELS


def popcount(rows, xp, chunk: int = 1 << 24) -> int:
    """Set bits of a uint8 array (a table lookup: the same on NumPy and CuPy), *chunk*
    bytes at a time so the lookup's index copy stays small."""
    table = xp.asarray(_POPCOUNT)
    flat = rows.reshape(-1)
    return sum(int(table[flat[s:s + chunk].astype(xp.int32)].sum(dtype=xp.int64)) for s in range(0, flat.size, chunk))


def clip_to_shape(grid: SparseGrid, shape) -> SparseGrid:
    """Clear the bits of *grid*'s bit channel at voxels ≥ *shape* (nx, ny, nz) and drop
    the bricks left empty: ``voxelize_sparse`` voxelizes a shape rounded up to whole
    tiles, where an open mesh's solid rows run on to the rounded end."""
    xp, topo = grid.xp, grid.topology
    rows = grid.channels[CHANNEL]
    if topo.count == 0:
        return grid
    base = topo.coords() * BRICK  # (n, 3) x y z
    lim = xp.asarray(np.asarray(shape, np.int64))
    over = ((base + BRICK) > lim).any(axis=1)
    if not bool(over.any()):
        return grid
    idx = xp.flatnonzero(over)
    b = base[idx]
    keep_x = xp.clip(lim[0] - b[:, 0], 0, BRICK)  # voxels of each row below nx
    xmask = (((xp.ones_like(keep_x) << keep_x) - 1) & 0xFF).astype(xp.uint8)
    lane = xp.arange(BRICK, dtype=xp.int64)
    ok_y = (b[:, 1:2] + lane) < lim[1]  # (m, 8)
    ok_z = (b[:, 2:3] + lane) < lim[2]
    part = rows[topo.slots[idx]] & xmask[:, None, None]
    part = xp.where(ok_z[:, :, None] & ok_y[:, None, :], part, xp.uint8(0))
    rows[topo.slots[idx]] = part  # the grid's own rows (fresh from voxelize_sparse): no copy
    emptied = idx[~part.reshape(len(idx), -1).any(axis=1)]
    if emptied.size == 0:
        return grid
    alive = xp.ones(topo.count, dtype=bool)  # only the crossing bricks can have emptied
    alive[emptied] = False
    keys, slots = topo.keys[alive], topo.slots[alive]
    rows = xp.ascontiguousarray(rows[slots])
    n = int(keys.shape[0])
    out = SparseGrid(Topology(keys, xp.arange(n, dtype=xp.int32), n, xp.zeros(0, xp.int32), xp),
                     grid.origin, grid.voxel_size)
    out.channels[CHANNEL] = rows
    out.backgrounds[CHANNEL] = 0
    return out


@dataclass
class SparseVoxels:
    """A sparse voxelization over *spec* (every set voxel lies inside ``spec.shape``)."""

    spec: GridSpec
    grid: SparseGrid

    @property
    def xp(self):
        return self.grid.xp

    @property
    def rows(self):
        """(bricks, 8, 8) uint8 bit rows: bit x of row (z, y) of each brick, in key order."""
        return self.grid.channels[CHANNEL][self.grid.topology.slots]

    def count(self) -> int:
        return popcount(self.grid.channels[CHANNEL][self.grid.topology.slots], self.xp)

    @property
    def nbytes(self) -> int:
        return self.grid.nbytes

    @property
    def active_bricks(self) -> int:
        return self.grid.topology.count

    def brick_chunks(self, bricks: int = CHUNK_BRICKS):
        """(start, stop) ranges of bricks in key order, *bricks* at a time."""
        n = self.active_bricks
        return [(s, min(n, s + bricks)) for s in range(0, n, bricks)]

    def coordinates_of(self, start: int, stop: int):
        """(m, 3) int32 (i, j, k) of the set voxels of bricks start … stop, brick order."""
        xp, topo = self.xp, self.grid.topology
        bits = unpack_rows(self.grid.channels[CHANNEL][topo.slots[start:stop]], xp)
        b, z, y, x = xp.nonzero(bits)
        base = topo.coords()[start:stop][b] * BRICK if stop > start else xp.zeros((0, 3), xp.int64)
        return (base + xp.stack([x, y, z], axis=1)).astype(xp.int32)

    def chunks(self, bricks: int = CHUNK_BRICKS):
        """Yield (start, stop, (m, 3) int32 ijk) per chunk of bricks (brick order)."""
        for s, e in self.brick_chunks(bricks):
            yield s, e, self.coordinates_of(s, e)

    def coordinates(self):
        """(N, 3) int32 (i, j, k) of every set voxel, in brick order."""
        parts = [c for _, _, c in self.chunks()]
        return self.xp.concatenate(parts) if parts else self.xp.zeros((0, 3), self.xp.int32)

    def to_dense(self):
        """The dense ``VoxelGrid`` of the same voxels (bits on the grid's device)."""
        from ..grid import bitgrid
        from . import VoxelGrid

        xp, topo = self.xp, self.grid.topology
        nx, ny, nz = self.spec.shape
        dense = xp.zeros((nz + BRICK, ny + BRICK, nx + BRICK), bool)
        for s, e in self.brick_chunks():
            bits = unpack_rows(self.grid.channels[CHANNEL][topo.slots[s:e]], xp).astype(bool)
            base = topo.coords()[s:e] * BRICK
            nb = (e - s)
            lz, ly, lx = (a.ravel() for a in xp.meshgrid(*(xp.arange(BRICK),) * 3, indexing="ij"))
            z = (base[:, 2:3] + lz).ravel()
            y = (base[:, 1:2] + ly).ravel()
            x = (base[:, 0:1] + lx).ravel()
            dense[z, y, x] = bits.reshape(nb, -1).ravel()
        return VoxelGrid(self.spec, bitgrid.pack(dense[:nz, :ny, :nx]))

    def dense(self):
        """bool [k, j, i] (for tests and small grids)."""
        return self.to_dense().dense()


def to_host(result: SparseVoxels) -> SparseVoxels:
    """The same voxels with every channel on the host (NumPy)."""
    g, xp = result.grid, result.xp
    if xp is np:
        return result
    t = g.topology
    topo = Topology(backend.to_numpy(t.keys), backend.to_numpy(t.slots), t.capacity, backend.to_numpy(t.free), np)
    out = SparseGrid(topo, g.origin, g.voxel_size)
    out.channels = {k: backend.to_numpy(v) for k, v in g.channels.items()}
    out.backgrounds = dict(g.backgrounds)
    return SparseVoxels(result.spec, out)
