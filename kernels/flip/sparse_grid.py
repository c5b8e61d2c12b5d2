"""The sparse FLIP grid: MAC channels on the bricks the liquid needs (seed 003 §5), and
its topology per substep.

Topology (§5.1–5.2). The active bricks are those of the particles' influence boxes —
each particle's cell ± ``margin`` cells — taken over the particles' unique cells (the
same bricks as per-particle boxes, fewer boxes), plus any extra cells (inflows). The
margin covers what a substep reads around the liquid: the transfer stencil (1 cell),
the velocity extrapolation rings (2) and the distance a particle travels in the substep
(its RK2 samples), so no FLUID cell and no sample of a moving particle reaches a missing
brick. The first substep builds the topology from nothing; each later one is
``Topology.update``: kept bricks keep their slots, freed slots are reused first.

Margins per brick (``BrickReach``). One fast splash particle must not dilate the whole
liquid: a particle's box is its cell ± the margin of its brick b,
1 + EXTRAPOLATION_LAYERS + ⌈(s_b + |g|·Δt)·Δt/h⌉ + 1, with s_b the largest particle speed
in the 27 bricks around b (b among them). The neighbours count because a particle of b
samples the grid velocity (G2P, RK2) at faces that the transfer and the extrapolation fill
from particles up to 1 + EXTRAPOLATION_LAYERS = 3 < 8 cells away, so from b's neighbour
bricks at most: what moves it this substep is bounded by the speeds there (plus gravity's
Δv), not by the fastest particle anywhere. The reach is computed in float64 from the
float32 speed (|v|² summed (vx·vx + vy·vy) + vz·vz in float32, its root rounded to
float32), as ``substep_margin`` does, so both backends ceil the same number; a brick's
margin is ``substep_margin`` of its neighbourhood's fastest particle, and the fastest
brick's is the global margin (``VOXFX_SPARSE_MARGIN=global`` gives every particle that,
the A/B baseline). Extra cells (inflows, the narrow band's deep cells) keep the scalar
margin the caller gives.

Per substep, not per frame: the margin then covers one substep's reach (5 cells at the
CFL the solver keeps), not a frame's (up to 8 substeps' worth), so the pool — and every
stage that sweeps it, pressure first — stays about a brick ring smaller; on CuPy the
update costs a few small kernels and host syncs (``sparse_topology_gpu.incremental_keys``:
the particles mark their cells and their bricks' speeds in the current topology, each
brick turns its marked cells into the bricks their boxes reach — the same bricks as
``topology_keys``, no particle sort; for margins up to 64 cells (256 over a closed box's brick
index: ``sparse_topology_gpu``'s reach by classes), and the first substep's
build from the particles' bricks; the new slots in a few kernels, closed: ``update_topology_fused``
(queued before the pipeline's one host read, then only slices) or ``update_topology_table``
(after it, no read of its own), open: ``update_topology`` (one more read), the same as
``Topology.update``), and a substep that changes no brick keeps the neighbour tables.

Boundaries. A closed domain (``GridSpec`` box with walls, as the dense solver) clips the
influence boxes to the box plus one ring of cells: the cells of that ring (beyond the
walls) are SOLID with velocity 0, and the faces outside the dense face lattices do not
exist (``exists_u/v/w`` = 0; they stay 0). An open domain has no walls: bricks follow the
liquid anywhere on the lattice. Obstacles are cells (``set_obstacles``) or bricks of
bits (``sparse_bodies``), marked SOLID where their bricks are active — the only cells
the solve reads.

Channels (flat, ``SparseMacGrid``): u, v, w and solid_u/v/w float32; cell, solid and
exists_u/v/w uint8.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..grid import GridSpec
from ..grid.sparse import BITS, OFFSET, brick_coords, brick_keys, keys_of_boxes
from ..grid.sparse_mac import CELLS, SparseMacGrid, check_lattice, face_boxes
from ..settings import env_choice
from . import sparse_bodies, sparse_gpu
from . import sparse_topology_gpu as topology_gpu
from . import sparse_topology_tables as topology_tables

EXTRAPOLATION_LAYERS = 2
MARGIN_MODES = ("brick", "global")  # VOXFX_SPARSE_MARGIN: per-brick margins (default) or the fastest particle's


def margin_mode() -> str:
    """``VOXFX_SPARSE_MARGIN``: ``brick`` (default: ``BrickReach``, module notes) or
    ``global`` (every particle takes the fastest particle's margin: the A/B baseline)."""
    return env_choice("VOXFX_SPARSE_MARGIN", MARGIN_MODES)


class BrickReach(NamedTuple):
    """What per-brick margins need (module notes): the particles' velocities ((n, 3)
    float32, the positions' rows), the substep *dt*, |g| and the cell size *h* (metres)."""
    vel: object
    dt: float
    gravity: float
    h: float

    @property
    def gdt(self) -> float:
        return abs(float(self.gravity)) * float(self.dt)

    @property
    def base(self) -> int:
        return 1 + EXTRAPOLATION_LAYERS + 1  # transfer stencil, extrapolation rings, one spare

    def margins(self, speed2, xp):
        """int64 margins of float32 squared speeds *speed2* (``substep_margin`` of their
        roots, elementwise: the same float64 arithmetic)."""
        speed = xp.sqrt(xp.asarray(speed2, dtype=xp.float32)).astype(xp.float64)
        reach = (speed + self.gdt) * float(self.dt) / float(self.h)
        return self.base + xp.ceil(reach).astype(xp.int64)


def speed_squared(vel, xp):
    """float32 |v|² per row of (n, 3) *vel*, summed (vx·vx + vy·vy) + vz·vz as the kernels do."""
    v = xp.asarray(vel, dtype=xp.float32)
    return v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2]


def brick_margins(bricks, speed2, reach: BrickReach, xp):
    """(keys, margins): the sorted unique brick keys of the rows of *bricks* ((n, 3) brick
    coordinates, one per particle, the particles' float32 |v|² *speed2*) and each one's
    margin: ``reach.margins`` of the largest |v|² over the 27 bricks around it."""
    keys, inverse = xp.unique(brick_keys(bricks, xp), return_inverse=True)
    bits = speed2.view(xp.uint32).astype(xp.int64)  # |v|² ≥ 0: the bits' order is the values' (NaN: past +inf)
    runs = xp.sort((inverse.reshape(-1).astype(xp.int64) << 32) | bits)
    last = xp.ones(runs.shape[0], bool)
    last[:-1] = (runs[1:] >> 32) != (runs[:-1] >> 32)
    own = runs[last] & 0xFFFFFFFF  # each brick's largest |v|² bits, in key order
    coords = brick_coords(keys, xp)
    most = own.copy()
    for dz in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                nb = coords + xp.asarray([dx, dy, dz], dtype=xp.int64)
                inside = ((nb >= -OFFSET) & (nb < OFFSET)).all(axis=1)
                nk = brick_keys(xp.where(inside[:, None], nb, coords), xp)
                at = xp.minimum(xp.searchsorted(keys, nk), keys.shape[0] - 1)
                hit = inside & (keys[at] == nk)
                most = xp.where(hit, xp.maximum(most, own[at]), most)
    speed2_most = most.astype(xp.uint32).view(xp.float32)
    if not bool(xp.isfinite(speed2_most).all()):
        raise ValueError("a liquid particle's velocity is not finite")
    return keys, reach.margins(speed2_most, xp)


class SparseFlipGrid(SparseMacGrid):
    FACES = ("u", "v", "w")
    EXISTS = ("exists_u", "exists_v", "exists_w")
    MARKS = (*EXISTS, "wall", "solid", "solid_u", "solid_v", "solid_w")  # update replaces them (new arrays)
    FLOW = ("u", "v", "w", "cell")  # a substep's P2G and classify write them whole (``update(scratch=True)``)

    def __init__(self, spec: GridSpec, xp=np, closed: bool = True):
        super().__init__(spec.origin, spec.voxel_size, xp)
        self.spec = spec
        self.shape = tuple(int(n) for n in spec.shape)
        self.closed = bool(closed)
        self.boxes = face_boxes(self.shape)
        for name in ("u", "v", "w", "solid_u", "solid_v", "solid_w"):
            self.add(name, xp.float32, 0.0)
        for name in ("cell", "solid", *self.EXISTS, "wall"):
            self.add(name, xp.uint8, 0)
        self.valid = None
        self.bins = None  # sparse_gpu: P2G's (positions, count per pool cell), for classify
        self.plain_marks = False  # the marks are the walls alone (no obstacle): kept while no brick changes

    def faces(self):
        return tuple(self[n] for n in self.FACES)

    # ------------------------------------------------------------------ topology
    def topology_keys(self, pos, margin: int, extra_cells=None, reach: BrickReach | None = None):
        """Brick keys of the particles' influence boxes (cell ± *margin*, or with *reach*
        cell ± its brick's margin, module notes) and *extra_cells* ((M, 3) lattice cells, ±
        *margin*), clipped to the box and its wall ring when closed."""
        xp = self.xp
        g = self.cell_coords(pos)
        ok = xp.isfinite(g[0]) & xp.isfinite(g[1]) & xp.isfinite(g[2])
        cells = xp.stack([xp.floor(a[ok]).astype(xp.int64) for a in g], axis=1)
        extra = xp.zeros((0, 3), xp.int64)
        if extra_cells is not None and len(extra_cells):
            extra = xp.asarray(extra_cells, dtype=xp.int64).reshape(-1, 3)
        if reach is None:
            cells, extra = xp.concatenate([cells, extra]), extra[:0]
        cells, extra = self._clamped(cells), self._clamped(extra)
        check_lattice(*(xp.concatenate([cells, extra])[:, a] for a in range(3)), xp)
        if reach is None or cells.shape[0] == 0:
            cells = unique_rows(cells, xp)
            lo, hi = cells - margin, cells + margin
        else:
            speed2 = speed_squared(xp.asarray(reach.vel)[ok], xp)
            keys, margins = brick_margins(cells >> 3, speed2, reach, xp)
            cells = unique_rows(cells, xp)
            m = margins[xp.searchsorted(keys, brick_keys(cells >> 3, xp))][:, None]
            lo, hi = cells - m, cells + m
        extra = unique_rows(extra, xp)
        lo, hi = xp.concatenate([lo, extra - margin]), xp.concatenate([hi, extra + margin])
        if self.closed:
            lo = xp.maximum(lo, -1)
            hi = xp.minimum(hi, xp.asarray(self.shape, dtype=xp.int64))
        return keys_of_boxes(lo, hi, xp)

    def _clamped(self, cells):
        """*cells* clamped into the box when closed."""
        xp = self.xp
        if self.closed:
            top = xp.asarray([n - 1 for n in self.shape], dtype=xp.int64)
            cells = xp.minimum(xp.maximum(cells, 0), top)
        return cells

    def update(self, pos, margin: int, obstacle=None, obstacle_velocity=None, extra_cells=None, bodies=(),
               scratch=False, reach: BrickReach | None = None, keys=None):
        """Retopologize to the particles (+ *extra_cells*; margins: ``topology_keys``'
        *margin* and *reach*, *margin* at least the bricks' largest, or None with *reach*: found on
        the device, ``sparse_topology_gpu.incremental_keys``), then mark walls and obstacles
        (*obstacle*: (M, 3) lattice cells, *obstacle_velocity*: (M, 3) or None; *bodies*:
        ``sparse_bodies.BrickBody`` obstacles) and the faces that exist. Returns (added,
        freed) slots. *scratch*: the flow channels (``FLOW``) are the caller's to write whole
        before it reads them (a substep's P2G and classify), so fresh and freed bricks are not
        filled, nor their data copied when the pool grows. *keys*: those bricks, when the caller has
        them (the narrow band's, ``sparse_band_gpu.topology_keys``)."""
        xp = self.xp
        self.bins = None  # the bricks (and the particles) may change
        found = None if keys is None else (keys, False)
        device = topology_gpu.can_build(self, pos) and (extra_cells is None or len(extra_cells) == 0)
        if margin is None and (reach is None or not device):  # no device margin here: the fastest particle's
            if reach is None:
                raise ValueError("SparseFlipGrid.update needs a margin, or reach to find it")
            margin = topology_gpu.host_margin(reach)
        plain = (obstacle is None or len(obstacle) == 0) and all(b.count == 0 for b in bodies)
        if found is None and device:
            self._ahead_marks = topology_tables.ahead_marks(self, plain)  # the tables queued ahead of the read
            try:
                found = topology_gpu.incremental_keys(self, pos, margin, prebuilt=True, reach=reach)  # first build too
            finally:
                self._ahead_marks = None
        if found is None and margin is None:  # the array path after a device margin: per brick (*reach*), the
            margin = getattr(self, "last_margin", None) or topology_gpu.host_margin(reach)  # scalar for no cell
        if found is not None and found[1]:  # the same bricks: same slots, tables and marks
            added = freed = getattr(self, "_no_slots", None)
            if added is None:  # one empty slot list kept (no allocation a substep whose bricks stay)
                added = freed = self._no_slots = xp.zeros(0, xp.int32)
            if plain and self.plain_marks:
                return added, freed
        else:
            rewritten = self.FLOW if scratch else ()
            self._tables_marks = plain and sparse_gpu.available(self)  # fused_tables may mark too
            self._marked = False
            try:
                if found is not None and isinstance(found[0], tuple):  # the update made on the device
                    update = found[0]  # the fused update's also has the used slots: a lean retopologize
                    lean = len(update) > 3
                    if lean and topology_gpu.scratch_mode() == "kept":
                        lean = "classed"  # the growth's allocation at its size class
                    added, freed = self.retopologize(None, rewritten=rewritten, update=update[:3],
                                                     used=update[3] if lean else None, lean=lean, replaced=self.MARKS,
                                                     refill=update[4] if len(update) > 4
                                                     and not topology_tables.ahead_bound(self) else None)
                else:
                    keys = self.topology_keys(pos, margin, extra_cells, reach) if found is None else found[0]
                    added, freed = self.retopologize(keys, rewritten=rewritten, replaced=self.MARKS)
            finally:
                self._tables_marks = False
            if self._marked:  # fused_tables wrote the marks with the tables: walls, solid = wall, faces 0
                self.plain_marks = plain
                return added, freed
        self.plain_marks = plain
        if sparse_gpu.available(self):
            topology_gpu.mark_walls(self)  # exists, wall, solid = wall
            if plain:
                self._solid_faces(None, None, None)
                return added, freed
            wall = self["wall"] != 0
        else:
            wall = self._mark_walls()
        solid = wall.copy()
        cell_vel = None
        if obstacle is not None and len(obstacle):
            ob = xp.asarray(obstacle, dtype=xp.int64)
            at = self.locate(ob[:, 0], ob[:, 1], ob[:, 2])
            hit = at >= 0
            solid[at[hit]] = True
            if obstacle_velocity is not None:
                cell_vel = xp.zeros((self.size, 3), xp.float32)
                cell_vel[at[hit]] = xp.asarray(obstacle_velocity, dtype=xp.float32)[hit]
        cell_vel = sparse_bodies.mark(self, bodies, solid, cell_vel)
        self["wall"] = wall.astype(xp.uint8)
        self["solid"] = solid.astype(xp.uint8)
        self._solid_faces(solid & ~wall, wall, cell_vel)
        return added, freed

    def _fills_with_tables(self, count: int, capacity: int) -> bool:
        """``topology_tables.fills_with_tables``: the kept channels' fills by the fused tables."""
        return topology_tables.fills_with_tables(self, count, capacity)

    def _brick_tables(self):
        """``SparseMacGrid._brick_tables``, or ``topology_tables.fused_tables`` (the default,
        ``VOXFX_SPARSE_TOPOLOGY_TABLES``; during ``update`` of a grid without obstacles with the
        marks: ``_marked``)."""
        if topology_tables.tables_mode() != "fused":
            super()._brick_tables()
            return
        marks = bool(getattr(self, "_tables_marks", False))
        topology_tables.fused_tables(self, marks)
        self._marked = marks

    def _mark_walls(self):
        """exists_u/v/w: the faces that exist (closed: the box's face lattices; open: every
        active face); returns the wall cells (closed: active cells beyond the box)."""
        xp = self.xp
        active = self.active()
        i, j, k = self.lattice()
        nx, ny, nz = self.shape
        if not self.closed:
            for name in self.EXISTS:
                self[name] = active.astype(xp.uint8)
            return xp.zeros(self.size, bool)
        for name, (sx, sy, sz) in zip(self.EXISTS, self.boxes):
            self[name] = (active & (i >= 0) & (i < sx) & (j >= 0) & (j < sy) & (k >= 0) & (k < sz)).astype(xp.uint8)
        return active & ~((i >= 0) & (i < nx) & (j >= 0) & (j < ny) & (k >= 0) & (k < nz))

    def _solid_faces(self, obstacle, wall, cell_vel):
        """solid_u/v/w: a face next to obstacle cells takes the mean velocity of those it
        touches (``FlipSimulation.set_obstacles``); faces touching a wall 0."""
        xp = self.xp
        for comp, name in enumerate(self.FACES):
            if cell_vel is None:
                self["solid_" + name] = xp.zeros(self.size, xp.float32)
                continue
            s = obstacle.astype(xp.float32)
            v = cell_vel[:, comp] * s
            total = v + self.neighbour(v, 2 * comp)
            count = s + self.neighbour(s, 2 * comp)
            face = xp.where(count > 0, total / xp.maximum(count, 1), xp.float32(0)).astype(xp.float32)
            touch_wall = wall | (self.neighbour(wall.astype(xp.uint8), 2 * comp) != 0)
            self["solid_" + name] = xp.where(touch_wall, xp.float32(0), face)

    def brick_count(self) -> int:
        return int(self.topology.count)

    # ------------------------------------------------------------------ the velocity in checkpoints
    def velocity_bricks(self):
        """(keys, (u, v, w)): the keys (ascending, int64) of the active bricks whose faces
        are not all +0 and those faces, (bricks, 512) float32 each in key order: the grid
        velocity without the pool's slots. The bricks left out (the margin beyond the
        extrapolated band, the wall ring) read the same +0 when missing."""
        xp = self.xp
        slots = self.topology.slots.astype(xp.int64)
        faces = [self[n].reshape(-1, CELLS)[slots] for n in self.FACES]
        moving = xp.zeros(len(slots), bool)
        for f in faces:  # by bit pattern: a −0 is kept as it is
            moving |= (f.view(xp.uint32) != 0).any(axis=1)
        return self.topology.keys[moving], tuple(f[moving] for f in faces)

    @classmethod
    def of_velocity_bricks(cls, spec: GridSpec, xp, closed: bool, keys, faces) -> "SparseFlipGrid":
        """A grid holding ``velocity_bricks()``'s bricks and faces (the other channels at
        their background): for reading that velocity back, not for stepping. *keys* are
        untrusted (a checkpoint): ascending and on the lattice, else ``ValueError``."""
        keys = np.asarray(keys, np.int64)
        if len(keys) and (keys.min() < 0 or keys.max() >= 1 << (3 * BITS) or (np.diff(keys) <= 0).any()):
            raise ValueError("'grid_bricks' are not ascending brick keys of the lattice")
        grid = cls(spec, xp, closed)
        grid.retopologize(xp.asarray(keys))  # from no brick: brick i in slot i
        for name, values in zip(cls.FACES, faces):
            grid[name] = xp.array(values, dtype=xp.float32).reshape(-1)
        return grid


def unique_rows(cells, xp):
    """The distinct rows of (n, 3) int64 *cells* (sorted by a key over their bounding box)."""
    if cells.shape[0] == 0:
        return cells
    lo = cells.min(axis=0)
    rel = cells - lo
    span = rel.max(axis=0) + 1
    key = (rel[:, 2] * span[1] + rel[:, 1]) * span[0] + rel[:, 0]
    key = xp.unique(key)
    return xp.stack([key % span[0], (key // span[0]) % span[1], key // (span[0] * span[1])], axis=1) + lo


def substep_margin(max_speed: float, dt: float, h: float, gravity=9.81) -> int:
    """Cells of margin around the particles for a substep of *dt*: transfer stencil (1),
    extrapolation rings, the RK2 reach (speed + g·dt)·dt/h rounded up, and one spare."""
    reach = (float(max_speed) + abs(float(gravity)) * dt) * dt / h
    return int(1 + EXTRAPOLATION_LAYERS + math.ceil(reach) + 1)


def source_window(vertices, spec: GridSpec):
    """(grid, offset): where a liquid source is voxelized for seeding. *spec* itself
    (offset 0) while its box's outputs are box-sized (``sparse_output.box_outputs``: the
    dense solver's seeding, cell for cell); in a larger box the lattice cells around the
    source's bounds, clipped to the box (a 2048³ box would not fit voxelized whole),
    and the lattice cell of its cell (0, 0, 0)."""
    from .sparse_output import box_outputs

    if vertices is None or len(vertices) == 0 or box_outputs(spec):
        return spec, np.zeros(3, np.int64)
    v = np.asarray(vertices, np.float64).reshape(-1, 3)
    h = spec.voxel_size
    lo = np.floor((v.min(axis=0) - np.asarray(spec.origin)) / h).astype(np.int64) - 1
    hi = np.floor((v.max(axis=0) - np.asarray(spec.origin)) / h).astype(np.int64) + 2
    lo = np.clip(lo, 0, np.asarray(spec.shape) - 1)
    hi = np.clip(hi, lo + 1, np.asarray(spec.shape))
    origin = tuple(float(o) + int(n) * h for o, n in zip(spec.origin, lo))
    return GridSpec(origin, h, tuple(int(n) for n in hi - lo)), lo

