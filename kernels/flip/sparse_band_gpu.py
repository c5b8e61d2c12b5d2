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
    update       after its frame (``NarrowBand._reach_and_frame``: the speed and the bounds in
                 one host read), on dense maps over the frame box (``_Frame``: its key is the
                 maps' flat index, x fastest, so a map's nonzero cells are the array code's
                 sorted keys): the candidates marked (stored cells, deep cells, the particles'
                 cells) and dilated a box radius an axis (``band_mark_rows``,
                 ``band_mark_particles``, ``band_dilate``); §4.2's trace φ(x − Δt·u(x)) with
                 the grid velocity as above and φ from a map of the stored φ, FAR elsewhere
                 (``band_trace``); the union with the particles' cells; the 6-neighbour
                 erosions on an int8 depth map, a launch each (``band_erode``); the air rings
                 (``band_rings``); the deep particles dropped and the band cells' particles
                 counted (``band_particles``); the refill's φ and grid velocity from the new φ's
                 map and the bricks (``band_sample_points``, ``band_sample_faces``). Was sorts,
                 ``unique`` and ``searchsorted`` over cell keys (six a level of the erosion,
                 eight for each φ sample) and a host sync for each compaction.
    topology     the substep's bricks with deep cells: the particles' from the device
                 pipeline (``sparse_topology_gpu.full_keys``), joined with the deep cells'
                 stand-ins' (``NarrowBand.topology_cells``; ``SparseFlipGrid.update(keys=)``);
                 was ``topology_keys`` of every particle and every deep cell on the array path.

``VOXFX_SPARSE_BAND=kernels|arrays`` chooses (``band_mode``; default kernels). The kernels
serve a CuPy grid with brick tables and no obstacles (cells or bodies: the array code checks
those) whose frame box fits (``map_fits``: at most ``MAP_LIMIT`` cells, and ``MAP_CELLS`` a
liquid cell); otherwise the array code runs. ``VOXFX_SPARSE_BAND_REDUCE=kernels`` (``reduce_mode``,
the default: it measured faster, 8 ms of band pieces a substep at 8M against 22–26) also takes
the update's bounds in one kernel an array and the deep cells' bricks from a dense brick map.

Measured (H100 80GB HBM3, ``bench/flip_sparse_band.py --row 8m --frames 3 --narrow-band 4
--ways arrays kernels --off``, both ways in one process, the same bits every frame): the 8M
band frame 1,239–1,305 → 237–246 ms (a substep 155–163 → 29.6–30.8 ms; the band's pieces
110–115 → 22–23 ms, its topology 39–42 → 1.4–1.6 ms); the frame without a band 65–66 ms. 65M:
785 → 203 ms a substep. ``sparse_band.py``'s module text has the table and what is left.
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
MAP_CELLS = 32  # box cells a liquid cell (map_fits): the maps, 8 B a box cell in sparse_memory's estimate
MAP_FLOOR = 1 << 25  # box cells that always fit (~256 MiB of maps)
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


def map_fits(frame, band=None, sim=None) -> bool:
    """The frame box's maps (~8 bytes a box cell at the peak) fit: at most ``MAP_LIMIT`` cells
    and, with *band* and *sim*, at most ``MAP_CELLS`` box cells for each cell the band stores,
    holds deep or its particles fill (a splash that stretches the box keeps the array code's
    memory, which follows the liquid's cells)."""
    cells = float(np.prod(frame.span.astype(np.float64)))
    if band is not None and sim is not None:
        liquid = len(band.lattice) + len(band.deep) + len(sim.pos) // max(1, int(sim.settings.particles_per_cell))
        if cells > max(float(MAP_FLOOR), MAP_CELLS * float(liquid)):
            return False
    return cells <= MAP_LIMIT


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


CAND, TAKEN, WAS_DEEP = 1, 2, 4  # flip_sparse_band.cu's flag bits


def update(band, sim, dt: float, reach: int, frame) -> None:
    """``NarrowBand.update`` after its frame, on dense maps over the frame box (module notes):
    the candidates marked and dilated, the trace, the union with the particles' cells, the
    depths, the air rings, the deep particles dropped and the band cells counted for the
    refill, each list compacted from a map in key order (the array code's sorted keys)."""
    from .sparse_band import RINGS, SHRINK, _mark

    cp, g = band.xp, sim.grid
    size = int(np.prod(frame.span))
    box = _box_args(frame)
    walls = (_I32(g.closed), *(_I32(n) for n in g.shape))
    flags = cp.zeros(size, cp.uint8)
    n = int(sim.pos.shape[0])
    pkeys = cp.empty(n, cp.int64)
    KERNELS.launch("band_mark_rows", len(band.lattice), (_rows(cp, band.lattice, cp.int64), _I64(len(band.lattice)),
                                                         *box, np.uint8(CAND), flags))
    KERNELS.launch("band_mark_rows", len(band.deep), (_rows(cp, band.deep, cp.int64), _I64(len(band.deep)), *box,
                                                      np.uint8(WAS_DEEP), flags))
    h = _F(sim.spec.voxel_size)
    pos = _rows(cp, sim.pos, cp.float32)
    KERNELS.launch("band_mark_particles", n, (pos, _I64(n), *(_F(o) for o in sim.spec.origin), h, *box, flags, pkeys))
    del pos
    radius = max(0, reach - RINGS)  # a trace longer than the rings: look farther
    if radius:
        other = cp.empty_like(flags)
        for axis in range(3):
            KERNELS.launch("band_dilate", size, (flags, _I64(size), _I32(axis), _I32(radius), *box, other))
            flags, other = other, flags
        del other
    cand = cp.flatnonzero(flags & CAND)  # sorted keys: the map's order
    cells = frame.cells(cand)
    open_ = ~band._solid(sim, cells)
    cand, cells = cand[open_], cells[open_]
    del open_
    _mark("kernels: candidates")
    phi = phi_map(frame, band.lattice, band.phi)
    advected = trace(g, cells, dt, phi, frame)  # φ̃(x) = φ(x − Δt·u(x)) (§4.2)
    # φ = min(φ̃ + 1, φ_particles): the surface layer the particles', the grid's liquid below it (§4.2)
    wet = ((flags[cand] & TAKEN) != 0) | (advected + _F(SHRINK) < 0)
    liquid, lkeys = cells[wet], cand[wet]
    was_deep = (flags[lkeys] & WAS_DEEP) != 0
    del cand, cells, advected, wet, flags
    _mark("kernels: trace and union")
    depth_map = cp.full(size, -1, cp.int8)
    depth_map[lkeys] = 0
    depth = cp.zeros(len(lkeys), cp.int64)
    for level in range(1, int(band.cells) + 1):  # erosions: 6-neighbour steps to the air
        KERNELS.launch("band_erode", len(lkeys), (lkeys, _I64(len(lkeys)), _I32(level), depth_map, *box, *walls, depth))
    _mark("kernels: depths")
    ring_map = cp.zeros(size, cp.uint8)  # φ on the liquid and RINGS air rings (NarrowBand._store)
    stored, values = [liquid], [-(depth.astype(cp.float32) + _F(0.5))]
    for ring in range(1, RINGS + 1):
        KERNELS.launch("band_rings", size, (depth_map, _I64(size), _I32(ring), *box, *walls, ring_map))
        new = frame.cells(cp.flatnonzero(ring_map == ring))
        stored.append(new)
        values.append(cp.full(len(new), _F(ring - 0.5), cp.float32))
    del ring_map
    band.lattice, band.phi = cp.concatenate(stored), cp.concatenate(values)
    del stored, values
    _mark("kernels: store φ")
    cells_n = int(band.cells)
    is_deep = depth >= cells_n
    deep = liquid[is_deep]
    count = phi.view(cp.int32)  # the old φ's map, reused for the band cells' particle counts
    count.fill(0)
    keep = cp.empty(n, cp.uint8)
    KERNELS.launch("band_particles", n, (pkeys, _I64(n), depth_map, _I32(cells_n), keep, count))
    if len(deep):  # particles under the band: the deep cell stands for them (a full cell)
        sim._keep(keep.view(cp.bool_))
    del keep, pkeys, depth_map
    inner = (depth >= 1) & (depth < cells_n)  # band cells under the surface layer
    refill, rkeys, was = liquid[inner], lkeys[inner], was_deep[inner]
    have = count[rkeys].astype(cp.float64)
    del liquid, lkeys, depth, is_deep, inner, count, phi, was_deep
    ppc = float(sim.settings.particles_per_cell)
    band.deep, band.mass = deep, cp.full(len(deep), ppc, cp.float64)
    band._map = (phi_map(frame, band.lattice, band.phi), frame)  # the new φ, for the refill's samples
    _mark("kernels: deep particles and counts")
    if len(refill):
        want = cp.where(was | (have == 0), cp.maximum(ppc - have, 0.0), 0.0)
        pick = want > 0
        if bool(pick.any()):
            band._resample(sim, refill[pick], want[pick])
    band._map = None
    _mark("kernels: resample")


def topology_keys(band, grid, pos, margin: int, reach=None):
    """The substep's brick keys with deep cells (``SparseFlipGrid.topology_keys(pos, margin,
    band.deep, reach)``, the same keys) without the array path over every particle: the
    particles' bricks from the device pipeline (``sparse_topology_gpu.full_keys``: per-brick
    margins, no per-particle sort of cells), joined with the bricks of the deep cells'
    stand-ins (``NarrowBand.topology_cells``, a few thousand boxes). None where the device
    pipeline does not serve (the caller then takes the array path)."""
    from . import sparse_topology_gpu as topology_gpu

    cp, margin = grid.xp, int(margin)
    if band_mode() != "kernels" or len(band.deep) == 0 or int(pos.shape[0]) == 0:
        return None
    if not topology_gpu.can_build(grid, pos) or topology_gpu.topology_mode() != "device":
        return None
    if not 0 <= margin <= topology_gpu.MAX_MARGIN or not topology_gpu._serves(reach):
        return None
    if reach is not None and int(reach.vel.shape[0]) != int(pos.shape[0]):
        return None
    keys = topology_gpu.full_keys(grid, pos, margin, reach)
    if keys is None:
        return None
    deep = deep_brick_keys(band, grid, margin) if reduce_mode() == "kernels" else None
    if deep is None:
        deep = grid.topology_keys(pos[:0], margin, band.topology_cells(margin))  # the stand-ins' boxes, ± margin
    return cp.unique(cp.concatenate([keys, deep]))


# ------------------------------------------------------------------ VOXFX_SPARSE_BAND_REDUCE=kernels (default)
# Measured (H100 80GB HBM3, session 10 call B, `bench/flip_sparse_band.py --row 8m --frames 3 --narrow-band 4
# --ways kernels` once a way in turn, frames 1–2): the band's pieces 26.1 / 22.0 → 8.2 / 8.1 ms a substep
# (band keys 10.2 / 9.5 → 1.9 / 1.9, the update's reach and frame 6.5 / 6.4 → 0.27 / 0.26), the frames
# 306 / 230 → 134 / 118 ms; tests/gpu/test_flip_sparse_band_kernels_gpu.py passed (the same bits).
REDUCES = ("kernels", "arrays")
_LL = np.iinfo(np.int64)


def reduce_mode(mode=None) -> str:
    """``VOXFX_SPARSE_BAND_REDUCE``: ``kernels`` takes the update's bounds in one kernel an array
    (``band_bounds``: CuPy's ``min(axis=0)`` of an (n, 3) array runs one block a column, ~6 ms a
    substep at 8M particles, 85 at 65M on the H100) and the deep cells' bricks from a dense brick
    map (``band_deep_bricks``) instead of ``topology_keys`` of their stand-ins (the default, measured
    faster: the notes above ``REDUCES``); ``arrays`` the code the module notes measured first. The
    same numbers either way."""
    mode = mode or os.environ.get("VOXFX_SPARSE_BAND_REDUCE", "").strip().lower() or REDUCES[0]
    if mode not in REDUCES:
        raise ValueError(f"VOXFX_SPARSE_BAND_REDUCE must be one of {', '.join(REDUCES)}, not {mode!r}")
    return mode


def bounds(cp, out, rows=None, pos=None, origin=(0.0, 0.0, 0.0), h=1.0) -> None:
    """*out* (6 int64: low x y z, high x y z; the int64 extremes for none) ← the corners of the
    int64 (m, 3) *rows*, or of the cells of the float32 (n, 3) positions *pos* (``band_bounds``)."""
    out[:3], out[3:] = _LL.max, _LL.min
    data = _rows(cp, rows if rows is not None else pos, cp.int64 if rows is not None else cp.float32)
    m = int(data.shape[0])
    if m == 0:
        return
    grid = (min(1024, -(-m // 256)),)
    use = rows is not None
    KERNELS.launch_grid("band_bounds", grid, (256,), (data if use else out, out if use else data, _I64(m), _I32(use),
                                                      *(_F(o) for o in origin), _F(h), out))


def reach_and_frame(band, sim, dt: float):
    """``NarrowBand._reach_and_frame`` with its bounds from ``band_bounds`` (one host read)."""
    from .sparse_band import RINGS
    from .sparse_band_frame import _Frame
    from .transfer import max_speed

    cp, g = band.xp, sim.grid
    corners = cp.empty(18, cp.int64)
    bounds(cp, corners[:6], pos=sim.pos, origin=sim.spec.origin, h=sim.spec.voxel_size)
    bounds(cp, corners[6:12], rows=band.lattice)
    bounds(cp, corners[12:], rows=band.deep)
    host = cp.concatenate([max_speed(sim.vel).astype(cp.float64).reshape(1), corners.astype(cp.float64)]).get()
    reach = int(np.ceil(float(np.float32(host[0])) * dt / g.h))
    pad = max(0, reach - RINGS) + RINGS + 1
    lo, hi = [], []
    for k, n in enumerate((len(sim.pos), len(band.lattice), len(band.deep))):
        if n:  # int64 bounds within ±2²³: exact in float64
            lo.append(host[1 + 6 * k:4 + 6 * k].astype(np.int64))
            hi.append(host[4 + 6 * k:7 + 6 * k].astype(np.int64))
    return reach, _Frame.of_bounds(lo, hi, pad, cp)


def deep_brick_keys(band, grid, margin: int):
    """Sorted brick keys of the deep cells' boxes (``grid.topology_keys`` of them alone, ± *margin*),
    from a dense map over their bricks (one host read for their bounds), or None past 64 cells."""
    from ..grid.sparse import BITS, OFFSET

    cp, margin = grid.xp, int(margin)
    if margin > 64:
        return None
    corners = cp.empty(6, cp.int64)
    bounds(cp, corners, rows=band.deep)
    lo, hi = np.split(corners.get(), 2)
    if grid.closed:  # the cells clamped into the box (a monotonic map: the bounds' clamps bound them)
        top = np.asarray(grid.shape, np.int64) - 1
        lo, hi = np.clip(lo, 0, top), np.clip(hi, 0, top)
    blo, bhi = (lo - margin) >> 3, (hi + margin) >> 3  # clipping to the wall ring only shrinks the boxes
    span = bhi - blo + 1
    bmap = cp.zeros(int(np.prod(span)), cp.uint8)
    d = _rows(cp, band.deep, cp.int64)
    KERNELS.launch("band_deep_bricks", len(d), (d, _I64(len(d)), _I32(margin), _I32(grid.closed),
                                                *(_I32(n) for n in grid.shape), *(_I64(v) for v in blo),
                                                *(_I64(v) for v in span), bmap))
    at = cp.flatnonzero(bmap)  # x fastest: the keys' order (z, y, x)
    sx, sy = int(span[0]), int(span[1])
    x, y, z = at % sx + int(blo[0]), (at // sx) % sy + int(blo[1]), at // (sx * sy) + int(blo[2])
    return ((z + OFFSET) << (2 * BITS)) | ((y + OFFSET) << BITS) | (x + OFFSET)
