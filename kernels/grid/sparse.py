"""Sparse voxel grids: 8³ bricks in a pool, found by their sorted keys (issue 11; seeds 003
§5, 000, 004 §5). First increment: topology, index, pool, dense exchange; the voxelizer,
FLIP and snow move onto it in the increments that follow.

Design (the one place every effect will store its state):

* **Bricks.** A brick is 8 × 8 × 8 voxels (OpenVDB's leaf and GVDB's brick size, seed 003
  §5). Brick (bx, by, bz) holds voxels 8·b … 8·b + 7 of each axis of an *unbounded* signed
  voxel lattice (``origin`` + ``voxel_size`` place it in metres): a liquid may leave the box
  it started in. Each channel is one pool array ``(capacity, 8, 8, 8, *components)`` in
  (z, y, x) order inside a brick, as the dense arrays are (nz, ny, nx); a bit channel is
  ``(capacity, 8, 8)`` uint8, bit x of row (z, y). Memory follows the active bricks, not
  the domain: 512 B per brick per float channel.
* **Keys.** ``key = (bz + 2²⁰)·2⁴² + (by + 2²⁰)·2²¹ + (bx + 2²⁰)`` (int64, brick coordinates
  within ±2²⁰, i.e. ±8.4 M voxels per axis): sorting keys sorts bricks z-major, so a slab of
  z is one contiguous key range (a multi-GPU partition, issue 16, is a split of the array).
* **Index.** The active keys sorted and unique; brick → slot by binary search (O(log n)
  per query, ``xp.searchsorted``), no dense index over the domain (a dense index of 8³
  bricks over 4096³ would be 512 MB; the keys of 10⁶ bricks are 8 MB). A slot per key keeps
  pool positions stable when the topology changes.
* **Build** (seed 003 §5.1): keys of every brick an item's voxel box touches (points with a
  radius, triangles' boxes, voxels) → sort (CUB radix sort under CuPy, NumPy's sort on the
  CPU) → unique → slots. **Update** (§5.2): kept bricks keep their slots, bricks no longer
  touched go to the free list, new ones take free slots first, then grow the pool.
* **Tiles** (constant regions, like VDB tiles): ``grid.tiles[name]`` is a ``Tiles`` record
  of *runs* of whole bricks along x, ``(m, 4)`` int64 rows ``(bx0, bx1, by, bz)`` = bricks
  bx0 ≤ bx < bx1 of brick row (by, bz), sorted by (bz, by, bx0), disjoint from each other
  and from the channel's active bricks, every voxel of which holds ``value`` (a bit
  channel: set). The sparse solid voxelizer stores its interior so: memory follows the
  surface (32 bytes per run, not 64 per brick). ``nbytes`` counts them; ``to_dense`` and
  ``sparse_ops.count``, ``addon/sparse_vdb.py`` (VDB tiles, ``fill``) and the voxelizer's
  ``SparseVoxels`` (``voxelize(..., sparse=True)`` keeps its runs) honour them;
  ``expanded(name)`` turns them into ordinary bricks (for consumers that do not read
  tiles), ``tiled(name)`` the other way. A channel without an entry has no tiles.
* **Backends.** Every step is an ``xp`` array operation, identical on NumPy and CuPy (integer
  keys, no floating-point reductions): CPU and GPU topologies are bit-identical.

What each effect will store (issues 11–13): the voxelizer a bit channel (surface / solid)
plus owner and colour channels; FLIP the MAC velocities, cell type and pressure per brick
(faces of a brick's voxels, the +1 face read from the neighbour brick); snow the wind and
drifting snow, with receivers as surface bricks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import backend
from ..errors import InputError

BRICK = 8  # voxels per brick edge
LOG2 = 3
BITS = 21  # bits per brick coordinate in a key
OFFSET = 1 << (BITS - 1)  # brick coordinates −2²⁰ … 2²⁰ − 1
LIMIT = OFFSET * BRICK  # |voxel index| bound: 8 388 608
BUILD_CHUNK = 1 << 22  # (item, brick) pairs expanded at once: bounds the build's memory


def brick_keys(bijk, xp=None):
    """int64 keys of (n, 3) integer brick coordinates (x, y, z); ``InputError`` beyond ±2²⁰."""
    xp = xp or backend.array_module(bijk)
    b = xp.asarray(bijk).astype(xp.int64) + OFFSET
    if b.size and (int(b.min()) < 0 or int(b.max()) >= (1 << BITS)):
        raise InputError(f"a sparse grid reaches ±{LIMIT:,} voxels from its origin along each axis; "
                         "this input lies beyond that")
    return (b[:, 2] << (2 * BITS)) | (b[:, 1] << BITS) | b[:, 0]


def brick_coords(keys, xp=None):
    """(n, 3) int64 brick coordinates (x, y, z) of int64 *keys*."""
    xp = xp or backend.array_module(keys)
    keys = xp.asarray(keys, dtype=xp.int64)
    mask = (1 << BITS) - 1
    return xp.stack([keys & mask, (keys >> BITS) & mask, keys >> (2 * BITS)], axis=1) - OFFSET


def keys_of_boxes(lo, hi, xp=None):
    """Sorted unique keys of every brick that the inclusive voxel boxes lo[i] … hi[i]
    ((n, 3) integer, x y z) touch: expand each box's brick range (counts → exclusive scan →
    the item of each pair by binary search), in chunks of ``BUILD_CHUNK`` pairs, then sort
    and unique (seed 003 §5.1)."""
    xp = xp or backend.array_module(lo)
    lo = xp.asarray(lo).astype(xp.int64)
    hi = xp.asarray(hi).astype(xp.int64)
    if lo.shape != hi.shape or lo.ndim != 2 or lo.shape[1] != 3:
        raise InputError("voxel boxes must be two (n, 3) integer arrays")
    if lo.shape[0] == 0:
        return xp.zeros(0, xp.int64)
    blo, bhi = lo >> LOG2, hi >> LOG2  # floor division for negative indices too
    extent = xp.maximum(bhi - blo + 1, 0)
    counts = extent[:, 0] * extent[:, 1] * extent[:, 2]
    ends = xp.cumsum(counts)
    total = int(ends[-1])
    parts = []
    for start in range(0, total, BUILD_CHUNK):
        pair = xp.arange(start, min(total, start + BUILD_CHUNK), dtype=xp.int64)
        item = xp.searchsorted(ends, pair, side="right")
        local = pair - (ends[item] - counts[item])
        ex, ey = extent[item, 0], extent[item, 1]
        b = xp.stack([blo[item, 0] + local % ex, blo[item, 1] + (local // ex) % ey,
                      blo[item, 2] + local // (ex * ey)], axis=1)
        parts.append(xp.unique(brick_keys(b, xp)))
    keys = parts[0] if len(parts) == 1 else xp.unique(xp.concatenate(parts))
    return keys


def keys_of_points(pos, origin, voxel_size: float, radius: float = 0.0, xp=None):
    """Sorted unique keys of every brick within *radius* metres (a box) of the (n, 3)
    positions *pos*: a particle's influence box (seed 003 §5.1). float64 voxel units."""
    xp = xp or backend.array_module(pos)
    p = (xp.asarray(pos, dtype=xp.float64) - xp.asarray(origin, dtype=xp.float64)) / float(voxel_size)
    if p.size and not bool(xp.isfinite(p).all()):
        raise InputError("point positions must be finite numbers")
    r = float(radius) / float(voxel_size)
    return keys_of_boxes(xp.floor(p - r).astype(xp.int64), xp.floor(p + r).astype(xp.int64), xp)


@dataclass
class Tiles:
    """Runs of whole bricks holding one value (module notes, **Tiles**)."""

    runs: object  # (m, 4) int64: bx0, bx1, by, bz
    value: object = 1

    @property
    def bricks(self) -> int:
        """Bricks the runs cover."""
        return int((self.runs[:, 1] - self.runs[:, 0]).sum()) if self.runs.shape[0] else 0

    def keys(self, xp=None):
        """Sorted int64 keys of every brick the runs cover."""
        xp = xp or backend.array_module(self.runs)
        r = self.runs
        n = r[:, 1] - r[:, 0]
        if r.shape[0] == 0:
            return xp.zeros(0, xp.int64)
        ends = xp.cumsum(n)
        item = xp.arange(int(ends[-1]), dtype=xp.int64)
        run = xp.searchsorted(ends, item, side="right")
        bx = r[run, 0] + item - (ends[run] - n[run])
        return brick_keys(xp.stack([bx, r[run, 2], r[run, 3]], axis=1), xp)


@dataclass
class Topology:
    """The active bricks: ``keys`` sorted unique int64, ``slots`` (same order) int32 pool
    positions, ``capacity`` pool bricks allocated, ``free`` int32 slots not in use."""

    keys: object
    slots: object
    capacity: int
    free: object
    xp: object = field(default=np, repr=False)

    @classmethod
    def from_keys(cls, keys, xp=None) -> "Topology":
        xp = xp or backend.array_module(keys)
        return cls.of_sorted(xp.unique(xp.asarray(keys, dtype=xp.int64)), xp)

    @classmethod
    def of_sorted(cls, keys, xp=None) -> "Topology":
        """The packed topology of *keys* already sorted and unique: brick i in slot i."""
        xp = xp or backend.array_module(keys)
        n = int(keys.shape[0])
        return cls(keys, xp.arange(n, dtype=xp.int32), n, xp.zeros(0, xp.int32), xp)

    @classmethod
    def from_points(cls, pos, origin, voxel_size: float, radius: float = 0.0, xp=None) -> "Topology":
        xp = xp or backend.array_module(pos)
        return cls.from_keys(keys_of_points(pos, origin, voxel_size, radius, xp), xp)

    @classmethod
    def from_boxes(cls, lo, hi, xp=None) -> "Topology":
        xp = xp or backend.array_module(lo)
        return cls.from_keys(keys_of_boxes(lo, hi, xp), xp)

    @property
    def count(self) -> int:
        return int(self.keys.shape[0])

    def coords(self):
        """(n, 3) int64 brick coordinates in key order."""
        return brick_coords(self.keys, self.xp)

    def lookup(self, keys):
        """Pool slot of each key (int32), −1 where the brick is not active."""
        xp = self.xp
        keys = xp.asarray(keys, dtype=xp.int64)
        if self.count == 0:
            return xp.full(keys.shape, -1, xp.int32)
        at = xp.minimum(xp.searchsorted(self.keys, keys), self.count - 1)
        return xp.where(self.keys[at] == keys, self.slots[at], xp.int32(-1)).astype(xp.int32)

    def update(self, keys) -> tuple["Topology", object, object]:
        """The topology of *keys* (any order, repeats allowed) where every brick kept from
        this one keeps its slot (seed 003 §5.2): returns (topology, added slots, freed
        slots). Freed slots are reused first (lowest first), then the pool grows."""
        xp = self.xp
        new = xp.unique(xp.asarray(keys, dtype=xp.int64))
        old_slot = self.lookup(new)
        added = old_slot < 0
        n_add = int(added.sum())
        keep = xp.zeros(self.count, bool)
        if self.count:
            at = xp.minimum(xp.searchsorted(new, self.keys), max(int(new.shape[0]) - 1, 0))
            keep = (new[at] == self.keys) if new.shape[0] else keep
        freed = self.slots[~keep]
        pool = xp.sort(xp.concatenate([self.free, freed]))
        reuse = pool[:n_add]
        grow = xp.arange(self.capacity, self.capacity + max(0, n_add - int(reuse.shape[0])), dtype=xp.int32)
        fresh = xp.concatenate([reuse, grow]).astype(xp.int32)
        slots = old_slot.copy()
        slots[added] = fresh
        topo = Topology(new, slots, self.capacity + int(grow.shape[0]), pool[n_add:].astype(xp.int32), xp)
        return topo, fresh, freed.astype(xp.int32)


class SparseGrid:
    """Channels of voxel data on a ``Topology``: ``channels[name]`` is a pool array of
    ``capacity`` bricks. Voxel (i, j, k) of the lattice is at ``origin + (i, j, k)·voxel_size``
    (its min corner), as ``GridSpec``'s voxel (0, 0, 0) is at its origin."""

    def __init__(self, topology: Topology, origin=(0.0, 0.0, 0.0), voxel_size: float = 1.0):
        self.topology = topology
        self.origin = tuple(float(o) for o in origin)
        self.voxel_size = float(voxel_size)
        self.channels: dict = {}
        self.backgrounds: dict = {}
        self.tiles: dict = {}  # name → Tiles (module notes)

    @property
    def xp(self):
        return self.topology.xp

    def add_channel(self, name: str, dtype, components: tuple = (), background=0):
        """A new channel filled with *background* (the value of every inactive voxel)."""
        xp = self.xp
        shape = (self.topology.capacity, BRICK, BRICK, BRICK) + tuple(components)
        self.channels[name] = xp.full(shape, background, dtype=dtype)
        self.backgrounds[name] = background
        return self.channels[name]

    @property
    def nbytes(self) -> int:
        """Bytes the grid holds on its device: pool channels, keys and slots."""
        t = self.topology
        return int(sum(a.nbytes for a in self.channels.values()) + t.keys.nbytes + t.slots.nbytes + t.free.nbytes
                   + sum(tl.runs.nbytes for tl in self.tiles.values()))

    def tiled(self, name: str, value=1) -> "SparseGrid":
        """A grid with channel *name* only, whose bricks holding *value* in every voxel (a
        bit channel: every row set) become runs of ``tiles[name]`` (consecutive bricks
        along x merged): the inverse of ``expanded``."""
        xp = self.xp
        arr = self.channels[name]
        data = arr[self.topology.slots]
        keys = self.topology.keys
        fill = 0xFF if (arr.ndim == 3 and arr.dtype == xp.uint8 and value) else value
        full = (data.reshape(data.shape[0], -1) == fill).all(axis=1) if data.shape[0] else xp.zeros(0, bool)
        fk = keys[full]
        c = brick_coords(fk, xp)
        new_run = xp.ones(fk.shape[0], bool)
        new_run[1:] = fk[1:] - fk[:-1] != 1  # the next brick along x of the same row
        first = xp.flatnonzero(new_run)
        last = xp.concatenate([first[1:], xp.asarray([fk.shape[0]], first.dtype)]) - 1
        if fk.shape[0] == 0:  # no full brick: no runs (``last`` would be −1)
            runs = xp.zeros((0, 4), xp.int64)
        else:
            runs = xp.stack([c[first, 0], c[last, 0] + 1, c[first, 1], c[first, 2]], axis=1).astype(xp.int64)
        grid = SparseGrid(Topology.of_sorted(keys[~full], xp), self.origin, self.voxel_size)
        grid.channels[name] = xp.ascontiguousarray(data[~full])
        grid.backgrounds[name] = self.backgrounds[name]
        if runs.shape[0]:
            grid.tiles[name] = Tiles(runs, value)
        return grid

    def expanded(self, name: str) -> "SparseGrid":
        """A grid with channel *name* only, its tiles stored as ordinary bricks (every
        voxel their value; a bit channel's rows all set): for readers of bricks alone."""
        xp = self.xp
        arr = self.channels[name]
        tiles = self.tiles.get(name)
        keys, slots = self.topology.keys, self.topology.slots
        data = arr[slots]
        if tiles is not None and tiles.runs.shape[0]:
            extra = tiles.keys(xp)
            fill = 0xFF if (arr.ndim == 3 and arr.dtype == xp.uint8 and tiles.value) else tiles.value
            keys = xp.concatenate([keys, extra])
            data = xp.concatenate([data, xp.full((int(extra.shape[0]),) + arr.shape[1:], fill, arr.dtype)])
            order = xp.argsort(keys)
            keys, data = keys[order], data[order]
        grid = SparseGrid(Topology.of_sorted(keys, xp), self.origin, self.voxel_size)
        grid.channels[name] = xp.ascontiguousarray(data)
        grid.backgrounds[name] = self.backgrounds[name]
        return grid

    def retopologize(self, keys):
        """Move to the topology of *keys* (seed 003 §5.2): kept bricks keep their data, new
        bricks start at each channel's background, the pool grows only when no freed slot
        is left. Returns the added and freed slots."""
        xp = self.xp
        topo, added, freed = self.topology.update(keys)
        for name, arr in self.channels.items():
            if topo.capacity > arr.shape[0]:
                grown = xp.full((topo.capacity,) + arr.shape[1:], self.backgrounds[name], arr.dtype)
                grown[:arr.shape[0]] = arr
                arr = grown
            if added.shape[0]:
                arr[added] = self.backgrounds[name]
            self.channels[name] = arr
        self.topology = topo
        return added, freed

    # ------------------------------------------------------------------ dense exchange
    @classmethod
    def from_dense(cls, name: str, array, origin_ijk=(0, 0, 0), background=0, origin=(0.0, 0.0, 0.0),
                   voxel_size: float = 1.0, xp=None) -> "SparseGrid":
        """The bricks of a dense (nz, ny, nx[, c]) *array* whose voxel (0, 0, 0) is lattice
        voxel *origin_ijk* and that hold any value other than *background*."""
        xp = xp or backend.array_module(array)
        a = xp.asarray(array)
        nz, ny, nx = a.shape[:3]
        comp = a.shape[3:]
        o = np.asarray(origin_ijk, np.int64)
        # Pad to whole bricks on the lattice: lattice brick borders are multiples of 8.
        lo = o - (o % BRICK)
        pad_lo = o - lo
        hi = o + np.array([nx, ny, nz]) - 1
        nb = ((hi >> LOG2) - (lo >> LOG2) + 1).astype(np.int64)
        padded = xp.full((int(nb[2]) * BRICK, int(nb[1]) * BRICK, int(nb[0]) * BRICK) + comp, background, a.dtype)
        padded[pad_lo[2]:pad_lo[2] + nz, pad_lo[1]:pad_lo[1] + ny, pad_lo[0]:pad_lo[0] + nx] = a
        bricks = padded.reshape((int(nb[2]), BRICK, int(nb[1]), BRICK, int(nb[0]), BRICK) + comp)
        order = (0, 2, 4, 1, 3, 5) + tuple(range(6, 6 + len(comp)))
        bricks = bricks.transpose(order).reshape((-1, BRICK, BRICK, BRICK) + comp)
        active = (bricks != background).reshape(bricks.shape[0], -1).any(axis=1)
        idx = xp.flatnonzero(active)
        bz, rem = idx // int(nb[0] * nb[1]), idx % int(nb[0] * nb[1])
        bijk = xp.stack([rem % int(nb[0]), rem // int(nb[0]), bz], axis=1) + xp.asarray(lo >> LOG2)
        keys = brick_keys(bijk, xp)  # idx is z-major, so keys come out sorted and unique
        grid = cls(Topology(keys, xp.arange(keys.shape[0], dtype=xp.int32), int(keys.shape[0]),
                            xp.zeros(0, xp.int32), xp), origin, voxel_size)
        grid.channels[name] = xp.ascontiguousarray(bricks[idx])
        grid.backgrounds[name] = background
        return grid

    def to_dense(self, name: str, origin_ijk, shape):
        """Channel *name* over the dense box of *shape* (nx, ny, nz) whose voxel (0, 0, 0)
        is lattice voxel *origin_ijk*, as an (nz, ny, nx[, c]) array; inactive voxels take
        the channel's background; tiles hold their value."""
        if name in self.tiles:
            return self.expanded(name).to_dense(name, origin_ijk, shape)
        xp = self.xp
        arr = self.channels[name]
        comp = arr.shape[4:]
        nx, ny, nz = (int(n) for n in shape)
        out = xp.full((nz, ny, nx) + comp, self.backgrounds[name], arr.dtype)
        if self.topology.count == 0:
            return out
        o = xp.asarray(np.asarray(origin_ijk, np.int64))
        base = self.topology.coords() * BRICK - o  # each brick's min voxel in the box
        inside = ((base + BRICK > 0) & (base < xp.asarray([nx, ny, nz]))).all(axis=1)
        base, slots = base[inside], self.topology.slots[inside]
        lz, ly, lx = (a.ravel() for a in xp.meshgrid(*(xp.arange(BRICK),) * 3, indexing="ij"))
        step = max(1, BUILD_CHUNK // BRICK ** 3)
        for c0 in range(0, int(base.shape[0]), step):  # a scatter per chunk of bricks, on the device
            b, sl = base[c0:c0 + step], slots[c0:c0 + step]
            x, y, z = b[:, 0:1] + lx, b[:, 1:2] + ly, b[:, 2:3] + lz
            ok = (x >= 0) & (x < nx) & (y >= 0) & (y < ny) & (z >= 0) & (z < nz)
            src = arr[sl[:, None], lz, ly, lx]  # (bricks, 512[, c])
            out[z[ok], y[ok], x[ok]] = src[ok]
        return out
