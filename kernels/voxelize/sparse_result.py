"""What ``voxelize(..., sparse=True)`` returns (issue 11): the voxels of a mesh as 8³
bricks of a ``SparseGrid`` (``sparse.voxelize_sparse``), cut to the grid's shape, with
the same questions a dense ``VoxelGrid`` answers and none of its memory.

    result = voxelize(vertices, triangles, spec, "solid", sparse=True)
    result.count()          # voxels set
    result.nbytes           # bytes the grid holds on its device (every channel)
    result.active_bricks    # 8³ bricks holding a set voxel (stored ones and those in runs)
    result.full_bricks      # of which in runs of full bricks (no memory per brick)
    result.to_dense()       # the dense VoxelGrid (only for grids that fit)
    result.grid             # the SparseGrid: channel "voxels" (bit rows), + "owner" etc.

Full runs. The interior of a solid is kept as runs of full bricks along x
(``grid.tiles["voxels"]``, ``kernels/grid/sparse.py``), not brick by brick: memory
follows the surface. Every question below counts them, and every per-voxel list
expands them at most a chunk of bricks at a time: the *bricks* of the result are its
stored bricks and the bricks of its runs, merged in key order.

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

from dataclasses import dataclass, field

import numpy as np

from .. import backend
from ..grid import GridSpec
from ..grid.sparse import BITS, BRICK, SparseGrid, Tiles, Topology, brick_coords, brick_keys
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


def _clip_runs(grid: SparseGrid, shape) -> SparseGrid:
    """Cut *grid*'s runs of full bricks at *shape*: bricks wholly inside stay in runs,
    bricks crossing the grid's end become stored full bricks (cut by ``clip_to_shape``),
    bricks past it go."""
    tiles = grid.tiles.get(CHANNEL)
    if tiles is None or tiles.runs.shape[0] == 0:
        return grid
    xp = grid.xp
    nx, ny, nz = (int(n) for n in shape)
    runs = tiles.runs
    whole_x, some_x = nx // BRICK, -(-nx // BRICK)  # bricks wholly inside / touching x < nx
    row_in = ((runs[:, 2] + 1) * BRICK <= ny) & ((runs[:, 3] + 1) * BRICK <= nz)
    row_some = (runs[:, 2] * BRICK < ny) & (runs[:, 3] * BRICK < nz)
    keep_hi = xp.where(row_in, xp.minimum(runs[:, 1], whole_x), runs[:, 0])  # runs kept: bx0 … keep_hi
    part_hi = xp.where(row_some, xp.minimum(runs[:, 1], some_x), runs[:, 0])  # partial: keep_hi … part_hi
    part_lo = xp.minimum(xp.maximum(runs[:, 0], keep_hi), part_hi)
    kept = runs.copy()
    kept[:, 1] = keep_hi
    kept = kept[kept[:, 1] > kept[:, 0]]
    parts = runs.copy()
    parts[:, 0], parts[:, 1] = part_lo, part_hi
    parts = parts[parts[:, 1] > parts[:, 0]]
    if kept.shape[0] == runs.shape[0] and parts.shape[0] == 0:
        return grid
    topo = grid.topology
    keys, rows = topo.keys, grid.channels[CHANNEL][topo.slots]
    if parts.shape[0]:
        extra = Tiles(parts, 1).keys(xp)
        keys = xp.concatenate([keys, extra])
        rows = xp.concatenate([rows, xp.full((int(extra.shape[0]), BRICK, BRICK), 0xFF, xp.uint8)])
        order = xp.argsort(keys)
        keys, rows = keys[order], rows[order]
    out = SparseGrid(Topology.of_sorted(keys, xp), grid.origin, grid.voxel_size)
    out.channels[CHANNEL] = xp.ascontiguousarray(rows)
    out.backgrounds[CHANNEL] = 0
    if kept.shape[0]:
        out.tiles[CHANNEL] = Tiles(xp.ascontiguousarray(kept), tiles.value)
    return out


def clip_to_shape(grid: SparseGrid, shape) -> SparseGrid:
    """Clear the bits of *grid*'s bit channel at voxels ≥ *shape* (nx, ny, nz) and drop
    the bricks left empty: ``voxelize_sparse`` voxelizes a shape rounded up to whole
    tiles, where an open mesh's solid rows run on to the rounded end (runs of full
    bricks too: ``_clip_runs``)."""
    grid = _clip_runs(grid, shape)
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
    out = SparseGrid(Topology.of_sorted(keys, xp), grid.origin, grid.voxel_size)
    out.channels[CHANNEL] = rows
    out.backgrounds[CHANNEL] = 0
    if CHANNEL in grid.tiles:
        out.tiles[CHANNEL] = grid.tiles[CHANNEL]
    return out


@dataclass
class SparseVoxels:
    """A sparse voxelization over *spec* (every set voxel lies inside ``spec.shape``):
    stored bricks (bit rows) and runs of full bricks (module notes, **Full runs**)."""

    spec: GridSpec
    grid: SparseGrid
    _order_cache: tuple = field(default=None, repr=False, compare=False)

    @property
    def xp(self):
        return self.grid.xp

    @property
    def runs(self):
        """(m, 4) int64 runs of full bricks (bx0, bx1, by, bz), sorted; none: (0, 4)."""
        tiles = self.grid.tiles.get(CHANNEL)
        return tiles.runs if tiles is not None else self.xp.zeros((0, 4), self.xp.int64)

    @property
    def rows(self):
        """(bricks, 8, 8) uint8 bit rows of the *stored* bricks (not the runs), key order."""
        return self.grid.channels[CHANNEL][self.grid.topology.slots]

    def count(self) -> int:
        """Voxels set: the stored bricks' bits and 512 per brick of a run."""
        return popcount(self.grid.channels[CHANNEL][self.grid.topology.slots], self.xp) + BRICK ** 3 * self.full_bricks

    @property
    def nbytes(self) -> int:
        """Bytes the grid holds on its device (bit rows, keys, slots, runs: 32 B a run;
        with ``sparse_attributes`` channels, their pools and their runs' values)."""
        g, t = self.grid, self.grid.topology
        runs = {id(tl.runs): tl.runs.nbytes for tl in g.tiles.values()}  # channels may share one runs array
        values = sum(getattr(tl.value, "nbytes", 0) for tl in g.tiles.values())
        return int(sum(a.nbytes for a in g.channels.values()) + t.keys.nbytes + t.slots.nbytes + t.free.nbytes
                   + sum(runs.values()) + values)

    @property
    def stored_bricks(self) -> int:
        """Bricks stored as bit rows (64 B each)."""
        return self.grid.topology.count

    @property
    def full_bricks(self) -> int:
        """Bricks inside runs of full bricks (no memory per brick)."""
        tiles = self.grid.tiles.get(CHANNEL)
        return tiles.bricks if tiles is not None else 0

    @property
    def active_bricks(self) -> int:
        """8³ bricks holding a set voxel: the stored ones and those in runs (``full_bricks``)."""
        return self.stored_bricks + self.full_bricks

    # ---------------------------------------------------------------- brick order
    def _order(self):
        """(stored_pos, run_keys, run_len, run_pos): the position in the merged brick
        order of each stored brick and of each run's first brick (cached per grid)."""
        g = self.grid
        runs = self.runs
        tag = (g, g.topology, g.tiles.get(CHANNEL))  # the objects themselves: no id reused
        if self._order_cache is not None and all(a is b for a, b in zip(self._order_cache[0], tag)):
            return self._order_cache[1]
        xp, keys = self.xp, g.topology.keys
        n = int(keys.shape[0])
        rkeys = brick_keys(runs[:, [0, 2, 3]], xp) if runs.shape[0] else xp.zeros(0, xp.int64)
        rlen = runs[:, 1] - runs[:, 0]
        rcum = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(rlen)])
        # runs and stored bricks are disjoint and a run's keys are consecutive: every run
        # starting before a stored brick ends before it
        stored_pos = xp.arange(n, dtype=xp.int64) + rcum[xp.searchsorted(rkeys, keys)]
        run_pos = xp.searchsorted(keys, rkeys).astype(xp.int64) + rcum[:-1]
        order = (stored_pos, rkeys, rlen, run_pos)
        self._order_cache = (tag, order)
        return order

    def bricks_of(self, start: int, stop: int):
        """(keys (c,) int64, rows (c, 8, 8) uint8) of bricks start … stop of the merged
        brick order: stored bricks and the bricks of runs (full rows), in key order."""
        xp, topo = self.xp, self.grid.topology
        stored_pos, rkeys, rlen, run_pos = self._order()
        a0, a1 = (int(i) for i in xp.searchsorted(stored_pos, xp.asarray([start, stop], xp.int64)))
        keys = topo.keys[a0:a1]
        rows = self.grid.channels[CHANNEL][topo.slots[a0:a1]]
        if rkeys.shape[0] == 0:
            return keys, rows
        r0 = int(xp.searchsorted(run_pos + rlen, xp.asarray([start], xp.int64), side="right")[0])
        r1 = int(xp.searchsorted(run_pos, xp.asarray([stop], xp.int64))[0])
        if r1 <= r0:
            return keys, rows
        pos, ln, rk = run_pos[r0:r1], rlen[r0:r1], rkeys[r0:r1]
        lo = xp.maximum(pos, start) - pos
        hi = xp.minimum(pos + ln, stop) - pos
        n = hi - lo
        ends = xp.cumsum(n)
        item = xp.arange(int(ends[-1]), dtype=xp.int64)
        run = xp.searchsorted(ends, item, side="right")
        extra = rk[run] + lo[run] + item - (ends[run] - n[run])  # consecutive keys along x
        keys = xp.concatenate([keys, extra])
        rows = xp.concatenate([rows, xp.full((int(extra.shape[0]), BRICK, BRICK), 0xFF, xp.uint8)])
        order = xp.argsort(keys)
        return keys[order], rows[order]

    def parts_of(self, start: int, stop: int):
        """(keys, rows, runs) of bricks start … stop of the merged brick order, runs not
        expanded: the stored bricks' keys and bit rows, and the runs that start there
        (whole, for a range of whole rows of bricks: ``row_chunks``)."""
        xp, topo = self.xp, self.grid.topology
        stored_pos, _, _, run_pos = self._order()
        bounds = xp.asarray([start, stop], xp.int64)
        a0, a1 = (int(i) for i in xp.searchsorted(stored_pos, bounds))
        r0, r1 = (int(i) for i in xp.searchsorted(run_pos, bounds))
        return topo.keys[a0:a1], self.grid.channels[CHANNEL][topo.slots[a0:a1]], self.runs[r0:r1]

    def rows_at(self, keys):
        """(n, 8, 8) uint8 bit rows of the bricks *keys* (any): stored rows, full rows in
        runs, empty elsewhere."""
        xp = self.xp
        pool = self.grid.channels[CHANNEL]
        if pool.shape[0]:
            slot = self.grid.topology.lookup(keys)
            rows = xp.where((slot >= 0)[:, None, None], pool[xp.maximum(slot, 0)], xp.uint8(0))
        else:  # every brick in runs: nothing stored to index
            rows = xp.zeros((int(keys.shape[0]), BRICK, BRICK), xp.uint8)
        _, rkeys, rlen, _ = self._order()
        if rkeys.shape[0]:
            r = xp.searchsorted(rkeys, keys, side="right") - 1
            rr = xp.maximum(r, 0)
            inside = (r >= 0) & ((keys >> BITS) == (rkeys[rr] >> BITS)) & (keys - rkeys[rr] < rlen[rr])
            rows = xp.where(inside[:, None, None], xp.uint8(0xFF), rows)
        return rows

    def row_chunks(self, bricks: int = CHUNK_BRICKS):
        """(start, stop) ranges of the merged brick order, about *bricks* each, cut only
        between rows of bricks (a new (by, bz)), so each holds whole x rows of voxels."""
        xp = self.xp
        stored_pos, rkeys, _, run_pos = self._order()
        pos = backend.to_numpy(xp.concatenate([stored_pos, run_pos]))
        row = backend.to_numpy(xp.concatenate([self.grid.topology.keys, rkeys]) >> BITS)
        n = self.active_bricks
        if n == 0:
            return []
        order = np.argsort(pos, kind="stable")
        pos, row = pos[order], row[order]
        starts = pos[np.flatnonzero(np.r_[True, row[1:] != row[:-1]])]
        out, s = [], 0
        for r in starts[1:].tolist() + [n]:
            if r - s >= bricks:
                out.append((s, r))
                s = r
        if s < n:
            out.append((s, n))
        return out

    def brick_chunks(self, bricks: int = CHUNK_BRICKS):
        """(start, stop) ranges of the merged brick order, *bricks* at a time."""
        n = self.active_bricks
        return [(s, min(n, s + bricks)) for s in range(0, n, bricks)]

    def coordinates_of(self, start: int, stop: int):
        """(m, 3) int32 (i, j, k) of the set voxels of bricks start … stop, brick order."""
        xp = self.xp
        keys, rows = self.bricks_of(start, stop)
        b, z, y, x = xp.nonzero(unpack_rows(rows, xp))
        base = brick_coords(keys, xp)[b] * BRICK if keys.shape[0] else xp.zeros((0, 3), xp.int64)
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

        xp = self.xp
        nx, ny, nz = self.spec.shape
        dense = xp.zeros((nz + BRICK, ny + BRICK, nx + BRICK), bool)
        lz, ly, lx = (a.ravel() for a in xp.meshgrid(*(xp.arange(BRICK),) * 3, indexing="ij"))
        for s, e in self.brick_chunks():
            keys, rows = self.bricks_of(s, e)
            bits = unpack_rows(rows, xp).astype(bool)
            base = brick_coords(keys, xp) * BRICK
            z = (base[:, 2:3] + lz).ravel()
            y = (base[:, 1:2] + ly).ravel()
            x = (base[:, 0:1] + lx).ravel()
            dense[z, y, x] = bits.reshape(int(keys.shape[0]), -1).ravel()
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
    out.tiles = {k: Tiles(backend.to_numpy(v.runs), backend.to_numpy(v.value) if hasattr(v.value, "shape") else v.value)
                 for k, v in g.tiles.items()}
    return SparseVoxels(result.spec, out)
