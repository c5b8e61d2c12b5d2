"""The sparse voxelizer (issue 11; seed 004 §5, seed 003 §5): the voxels of a mesh as 8³
bricks of a ``SparseGrid``, with memory that follows the surface, not the grid.

    grid = voxelize_sparse(vertices, triangles, spec, "surface")   # spec may be 16384³
    grid.channels["voxels"]      # (bricks, 8, 8) uint8: bit x of row (z, y) of each brick

How. The grid is cut into tiles of ``tile``³ voxels (8 × 8 × 8 bricks at 64). Only tiles
some triangle reaches are voxelized, each with ``slabs.voxelize_box`` semantics (the
whole grid's voxel units, setup and rounding bounds; the box only narrows what is
evaluated), so every voxel is decided bit for bit as the dense ``voxelize`` decides it.
Triangles are bucketed per tile once (their reach, ``SplitMesh``), not scanned per tile.

Solid voxels (parity along x, §4.1): along each row of tiles the parity only changes in
tiles where a crossing can land (a triangle's reach along x includes where its rounded
crossing may land, ``SplitMesh.cross_*``). Those tiles are voxelized; a tile between two
of them holds, in each of its rows, the parity that the last voxel of the tile before it
holds in that row (no crossing lands in between), so it is filled from that column
without evaluating anything. Tiles past the last crossing keep that parity too (for an
open mesh whole rows stay set to the grid's end, as the dense fill does). The 3-axis vote
has no such shortcut on the CPU: it voxelizes every tile of the mesh's bounding tiles
(on the GPU it runs on bricks, ``gpu_sparse_vote.py``).

Full bricks are found while walking: a tile's bricks whose 512 voxels are all set become
runs along x (``Tiles``), only its partial bricks are stored, and a tile filled from a
row's parity is never built (each brick row of it is one run, or one brick's rows
repeated). So the peak follows the surface, not the volume.

Backends: NumPy (the reference, tile by tile as above: the peak is one tile's arrays
plus the partial bricks and runs found), and CuPy: ``gpu_sparse.py``, the whole
grid in a handful of launches with no host round trip per tile (device topology, one
fused surface launch, solid parity per brick row with full runs as ``SparseGrid.tiles``).
The 3-axis vote on CuPy runs on bricks (``gpu_sparse_vote.py``: the device solid along
each axis, their majority on the partial bricks and, per brick, on bitmaps of their runs),
with no tile walk. Both backends give the same bricks and runs; ``voxelize(...,
sparse=True)`` keeps the runs (``tiles=True``), ``tiles=False`` expands them.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..grid.sparse import BRICK, SparseGrid, Tiles, Topology, brick_keys
from ..progress import report
from .slabs import SplitMesh, voxelize_box
from .solid import solid_voxels_cpu
from .surface import surface_voxels_cpu

TILE = 64  # voxels per tile edge: 8 bricks, 2 words of 32 voxels along x
CHANNEL = "voxels"


def _tile_pairs(lo, hi, ntiles, tile):
    """(tile key, triangle) pairs of each triangle's inclusive voxel range lo..hi (T, 3),
    as tile coordinates clipped to the grid's tiles: sorted by tile key (z-major)."""
    tlo = np.clip(np.floor_divide(lo, tile), 0, np.asarray(ntiles) - 1).astype(np.int64)
    thi = np.clip(np.floor_divide(hi, tile), 0, np.asarray(ntiles) - 1).astype(np.int64)
    ok = (hi >= 0).all(axis=1) & (lo < np.asarray(ntiles) * tile).all(axis=1) & (thi >= tlo).all(axis=1)
    idx = np.flatnonzero(ok)
    tlo, thi = tlo[idx], thi[idx]
    n = (thi - tlo + 1)
    counts = n[:, 0] * n[:, 1] * n[:, 2]
    owner = np.repeat(np.arange(len(idx)), counts)
    local = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    nx_, ny_ = n[owner, 0], n[owner, 1]
    t = tlo[owner] + np.stack([local % nx_, (local // nx_) % ny_, local // (nx_ * ny_)], axis=1)
    key = (t[:, 2] * ntiles[1] + t[:, 1]) * ntiles[0] + t[:, 0]
    order = np.argsort(key, kind="stable")
    return key[order], idx[owner[order]]


def _buckets(keys, tris):
    """{tile key: triangle indices} from sorted pairs."""
    if len(keys) == 0:
        return {}
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(keys)]
    return {int(keys[s]): tris[s:e] for s, e in zip(starts, ends)}


class _Boxes:
    """Box voxelization on the host: surface / thin into a box, the solid fill, the vote
    (CuPy: ``gpu_sparse.py``, ``gpu_sparse_vote.py``)."""

    def __init__(self, vertices, triangles, spec, xp):
        self.xp, self.spec = xp, spec
        self.mesh = SplitMesh(vertices, triangles, spec)

    def surface(self, lo, hi, tri, thin, words=None):
        out = surface_voxels_cpu(self.mesh.pv, self.mesh.triangles[tri], self.spec.shape, thin, box=(lo, hi))
        return out if words is None else (out | words)

    def solid(self, lo, hi, tri):
        return solid_voxels_cpu(self.mesh.pv, self.mesh.triangles[tri], self.spec.shape, box=(lo, hi))

    def vote_box(self, lo, hi, mode):
        return voxelize_box(self.mesh, lo, hi, mode, vote=True)


def _bricks_of_tile(words, tile_ijk, tile, xp):
    """(keys, (n, 8, 8) uint8 rows, (m, 4) runs) of one tile's bit grid: its partial
    bricks (some voxels set, not all) stored, its full bricks as runs along x (a brick
    row's consecutive full bricks, ``Tiles``), empty bricks dropped."""
    nb = tile // BRICK
    rows = xp.ascontiguousarray(words).view(xp.uint8)  # (tile, tile, tile / 8): byte b = voxels 8b … 8b + 7
    rows = rows.reshape(nb, BRICK, nb, BRICK, nb).transpose(0, 2, 4, 1, 3).reshape(-1, BRICK, BRICK)
    flat = rows.reshape(rows.shape[0], -1)
    full = (flat == 0xFF).all(axis=1)
    keep = xp.flatnonzero(flat.any(axis=1) & ~full)
    base = np.asarray(tile_ijk, np.int64) * nb
    b = xp.stack([keep % nb, (keep // nb) % nb, keep // (nb * nb)], axis=1) + xp.asarray(base)
    return brick_keys(b, xp), rows[keep], _runs_of_full(full.reshape(nb, nb, nb), base, xp)


def _runs_of_full(full, base, xp):
    """(m, 4) int64 runs (bx0, bx1, by, bz) of the True bricks of *full* ([bz, by, bx]
    bool, brick *base* (x, y, z) at [0, 0, 0]): consecutive bricks along x merged."""
    edge = xp.zeros(full.shape[:2] + (1,), bool)
    step = xp.diff(xp.concatenate([edge, full, edge], axis=2).astype(xp.int8), axis=2)
    z, y, x0 = xp.nonzero(step == 1)  # row-major: starts and ends pair up in order
    _, _, x1 = xp.nonzero(step == -1)
    bx, by, bz = (int(v) for v in base)
    return xp.stack([x0 + bx, x1 + bx, y + by, z + bz], axis=1).astype(xp.int64)


def merged_runs(parts, xp):
    """The runs of *parts* ((m, 4) arrays of disjoint runs) sorted by (bz, by, bx0), runs
    that meet along x joined: the maximal runs, as ``SparseGrid.tiled`` finds them."""
    parts = [r for r in parts if r.shape[0]]
    if not parts:
        return xp.zeros((0, 4), xp.int64)
    r = xp.concatenate(parts)
    r = r[xp.argsort(brick_keys(r[:, [0, 2, 3]], xp))]
    new = xp.ones(r.shape[0], bool)
    new[1:] = (r[1:, 0] != r[:-1, 1]) | (r[1:, 2] != r[:-1, 2]) | (r[1:, 3] != r[:-1, 3])
    first = xp.flatnonzero(new)
    last = xp.concatenate([first[1:], xp.asarray([r.shape[0]], first.dtype)]) - 1
    return xp.stack([r[first, 0], r[last, 1], r[first, 2], r[first, 3]], axis=1)


def _fill_bricks(last_column, t0, t1, ty, tz, tile, xp):
    """(keys, rows, runs) of tiles t0 … t1 − 1 of row (ty, tz) whose every voxel row
    holds the parity *last_column* (bool [z, y]), without building them: a brick row
    whose 64 rows are all set is one run across the tiles, one with some set repeats
    its rows in every brick (§4.1: no crossing lands in between)."""
    nb = tile // BRICK
    rows = xp.where(last_column, xp.uint8(0xFF), xp.uint8(0)).reshape(nb, BRICK, nb, BRICK)
    rows = xp.ascontiguousarray(rows.transpose(0, 2, 1, 3)).reshape(nb * nb, BRICK, BRICK)  # (bz, by): rows [z, y]
    flat = rows.reshape(nb * nb, -1)
    full = (flat == 0xFF).all(axis=1)
    part = xp.flatnonzero(flat.any(axis=1) & ~full)
    bx = xp.arange(t0 * nb, t1 * nb, dtype=xp.int64)
    fz, fy = xp.flatnonzero(full) // nb, xp.flatnonzero(full) % nb
    runs = xp.stack([xp.full(fz.shape, t0 * nb), xp.full(fz.shape, t1 * nb), fy + ty * nb, fz + tz * nb],
                    axis=1).astype(xp.int64)
    if part.shape[0] == 0:
        return None, None, runs
    pz, py = (part // nb).repeat(bx.shape[0]), (part % nb).repeat(bx.shape[0])
    b = xp.stack([xp.tile(bx, part.shape[0]), py + ty * nb, pz + tz * nb], axis=1)
    return brick_keys(b, xp), rows[part].repeat(bx.shape[0], axis=0), runs


class _Tiles:
    """The tiles of one sparse voxelization and the bricks found so far."""

    def __init__(self, boxes: _Boxes, spec: GridSpec, tile: int, xp):
        self.boxes, self.mesh, self.tile, self.xp = boxes, boxes.mesh, tile, xp
        self.n = tuple(int(n) // tile for n in spec.shape)
        self.found, self.runs = [], []  # partial bricks (keys, rows); runs of full bricks
        self.near = _buckets(*_tile_pairs(self.mesh.near_lo, self.mesh.near_hi, self.n, tile))

    def keep(self, words, t):
        self.add(*_bricks_of_tile(words, t, self.tile, self.xp))

    def add(self, keys, rows, runs):
        if keys is not None and keys.shape[0]:
            self.found.append((keys, rows))
        if runs.shape[0]:
            self.runs.append(runs)

    def box(self, t):
        lo = np.asarray(t, np.int64) * self.tile
        return lo, lo + self.tile

    def of(self, key):
        nx, ny, _ = self.n
        return key % nx, (key // nx) % ny, key // (nx * ny)

    def key(self, t):
        return (t[2] * self.n[1] + t[1]) * self.n[0] + t[0]

    # ------------------------------------------------------------- the three walks
    def surfaces(self, thin: bool, progress, skip=()):
        for n, (key, tri) in enumerate(self.near.items()):
            if key not in skip:
                lo, hi = self.box(self.of(key))
                self.keep(self.boxes.surface(lo, hi, tri, thin), self.of(key))
            report(progress, (n + 1) / len(self.near), "voxelizing tiles")

    def votes(self, mode: str, progress):
        """Every tile of the mesh's bounding tiles (the vote has no row shortcut yet)."""
        if not self.near:
            return
        t = np.array([self.of(k) for k in self.near])
        ranges = (np.arange(a, b + 1) for a, b in zip(t.min(axis=0), t.max(axis=0)))
        every = np.stack(np.meshgrid(*ranges, indexing="ij"), -1).reshape(-1, 3)
        for n, tt in enumerate(every):
            self.keep(self.boxes.vote_box(*self.box(tt), mode), tt)
            report(progress, (n + 1) / len(every), "voxelizing tiles")

    def solids(self, with_surface: bool, progress):
        """Rows of tiles along x: voxelize the tiles where crossings can land, fill the
        ones between from the parity of the last column before them (§4.1)."""
        m = self.mesh
        reach_lo, reach_hi = m.near_lo.copy(), m.near_hi.copy()
        finite = np.isfinite(m.cross_lo[:, 0])
        reach_lo[finite, 0] = np.minimum(reach_lo[finite, 0], m.cross_lo[finite, 0])
        reach_hi[finite, 0] = np.maximum(reach_hi[finite, 0], m.cross_hi[finite, 0])
        crossing = _buckets(*_tile_pairs(reach_lo, reach_hi, self.n, self.tile))
        rows = {}
        for key in crossing:
            tx, ty, tz = self.of(key)
            rows.setdefault((ty, tz), []).append(tx)
        # The triangles whose reach across x meets each row of tiles, bucketed once: the
        # reach along x is folded onto tile column 0, so a bucket's key is its row's.
        lo_yz, hi_yz = m.near_lo.copy(), m.near_hi.copy()
        lo_yz[:, 0] = hi_yz[:, 0] = 0
        per_row = _buckets(*_tile_pairs(lo_yz, hi_yz, self.n, self.tile))
        for done, ((ty, tz), txs) in enumerate(sorted(rows.items())):
            self._row(ty, tz, sorted(txs), with_surface, per_row.get(self.key((0, ty, tz)), np.zeros(0, np.int64)))
            report(progress, (done + 1) / len(rows), "voxelizing tiles")
        if with_surface:  # surface tiles no row of crossings visited
            self.surfaces(False, None, skip=set(crossing))

    def _row(self, ty, tz, txs, with_surface, row_tris):
        """One row of tiles along x; *row_tris*: the triangles whose reach across x meets it."""
        xp, m = self.xp, self.mesh
        parity, cursor = None, 0  # [z, y] parity carried along the row of tiles
        for tx in txs + [self.n[0]]:
            if parity is not None and tx > cursor and bool(parity.any()):
                self.add(*_fill_bricks(parity, cursor, tx, ty, tz, self.tile, xp))
            if tx == self.n[0]:
                return
            lo, hi = self.box((tx, ty, tz))
            tri = row_tris[m.cross_lo[row_tris, 0] < hi[0]]  # crossings before the tile's end
            words = self.boxes.solid(lo, hi, tri)
            key = self.key((tx, ty, tz))
            if with_surface and key in self.near:
                words = self.boxes.surface(lo, hi, self.near[key], False, words)
            parity = ((words[:, :, -1] >> 31) & 1).astype(bool)
            self.keep(words, (tx, ty, tz))
            cursor = tx + 1


def voxelize_sparse(vertices, triangles, spec: GridSpec, mode: str = "surface", *, vote: bool = False,
                    tile: int = TILE, xp=None, progress=None, tiles: bool = False) -> SparseGrid:
    """Voxelize a mesh into a ``SparseGrid`` whose bit channel ``"voxels"`` holds exactly
    the voxels ``voxelize(vertices, triangles, spec, mode, vote=vote)`` sets, without
    any array of the grid's size. *spec*'s shape is rounded up to whole tiles (the
    voxels past it are decided as the dense voxelizer of the rounded shape decides
    them; set voxels never lie past the mesh's reach).

    With *tiles* the bricks whose voxels are all set are kept as full runs
    (``grid.tiles["voxels"]``, ``kernels/grid/sparse.py``; both paths find them while
    walking: a full brick is never stored, an interior filled from a row's parity never
    built), so memory follows the surface. Without, every brick is stored (what readers
    of bricks alone expect; the runs are expanded at the end)."""
    from . import MODES

    if mode not in MODES:
        raise InputError(f"voxelization mode must be one of {', '.join(MODES)}, not {mode!r}")
    if tile % 32 or tile < 32:
        raise InputError(f"the sparse voxelizer's tile must be a multiple of 32 voxels, not {tile}")
    xp = xp or backend.xp()
    spec = GridSpec(spec.origin, spec.voxel_size, tuple(-(-int(n) // tile) * tile for n in spec.shape))
    if xp is not np:
        if vote and mode in ("solid", "solid+surface"):  # the 3-axis vote on bricks
            from .gpu_sparse_vote import voxelize_bricks_vote as voxelize_bricks
        else:
            from .gpu_sparse import voxelize_bricks

        keys, rows, runs = voxelize_bricks(vertices, triangles, spec, mode, progress)
        grid = _grid(keys, rows, spec, xp)
        if runs is not None:
            grid.tiles[CHANNEL] = runs
            if not tiles:
                grid = grid.expanded(CHANNEL)
        return grid
    walk = _Tiles(_Boxes(vertices, triangles, spec, xp), spec, tile, xp)
    if mode in ("solid", "solid+surface") and vote:
        walk.votes(mode, progress)
    elif mode in ("solid", "solid+surface"):
        walk.solids(mode == "solid+surface", progress)
    else:
        walk.surfaces(mode == "thin", progress)
    grid = _assemble(walk.found, walk.runs, spec, xp)
    return grid if tiles or CHANNEL not in grid.tiles else grid.expanded(CHANNEL)


def _assemble(found, runs, spec: GridSpec, xp) -> SparseGrid:
    """One ``SparseGrid`` of the partial bricks found (keys unique: tiles do not
    overlap) and the runs of full bricks, joined where they meet across tiles: the grid
    ``tiled(CHANNEL)`` makes of every brick stored."""
    found = [(k, r) for k, r in found if k.shape[0]]
    if found:
        keys = xp.concatenate([k for k, _ in found])
        rows = xp.concatenate([r for _, r in found])
        order = xp.argsort(keys)
        keys, rows = keys[order], rows[order]
    else:
        keys, rows = xp.zeros(0, xp.int64), xp.zeros((0, BRICK, BRICK), xp.uint8)
    grid = _grid(keys, rows, spec, xp)
    runs = merged_runs(runs, xp)
    if runs.shape[0]:
        grid.tiles[CHANNEL] = Tiles(runs, 1)
    return grid


def _grid(keys, rows, spec: GridSpec, xp) -> SparseGrid:
    """The ``SparseGrid`` of sorted unique *keys* and their bit rows, slot = position."""
    grid = SparseGrid(Topology.of_sorted(keys, xp), spec.origin, spec.voxel_size)
    grid.channels[CHANNEL] = xp.ascontiguousarray(rows)
    grid.backgrounds[CHANNEL] = 0
    return grid


def unpack_rows(rows, xp):
    """(n, 8, 8, 8) uint8 0/1 voxels [brick, z, y, x] of bit rows (n, 8, 8): bit x of row (z, y)."""
    return (rows[..., None] >> xp.arange(BRICK, dtype=xp.uint8)) & xp.uint8(1)


def with_density(grid: SparseGrid, name: str = "density") -> SparseGrid:
    """Give *grid* a float32 channel *name*: 1 at set voxels, background 0 (a Volume's
    density, for ``addon/sparse_vdb.write_sparse_vdb``); returns *grid*."""
    xp = grid.xp
    grid.channels[name] = unpack_rows(grid.channels[CHANNEL], xp).astype(xp.float32)
    grid.backgrounds[name] = 0.0
    if CHANNEL in grid.tiles:
        grid.tiles[name] = Tiles(grid.tiles[CHANNEL].runs, 1.0)
    return grid


def to_bits(grid: SparseGrid, shape):
    """The packed dense bit grid (nz, ny, ⌈nx/32⌉) uint32 of a sparse voxelization over
    the box 0 … *shape* (for tests and small grids)."""
    from ..grid import bitgrid

    if CHANNEL in grid.tiles:
        grid = grid.expanded(CHANNEL)
    xp = grid.xp
    nx, ny, nz = (int(n) for n in shape)
    rows = grid.channels[CHANNEL]
    bits = unpack_rows(rows, xp)  # (n, 8 z, 8 y, 8 x)
    dense = xp.zeros((nz + BRICK, ny + BRICK, nx + BRICK), bool)
    base = grid.topology.coords() * BRICK
    for b, (x, y, z) in enumerate(backend.to_numpy(base).tolist()):
        if x < nx and y < ny and z < nz:
            dense[z:z + BRICK, y:y + BRICK, x:x + BRICK] = bits[grid.topology.slots[b]].astype(bool)
    return bitgrid.pack(dense[:nz, :ny, :nx])
