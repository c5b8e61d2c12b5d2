"""Narrow-band FLIP on bricks (issue 12; seed 003's named next step, as Mantaflow does it;
Ferstl et al. 2016, "Narrow Band FLIP for Liquid Simulations"): particles are kept only
within ``N`` cells under the liquid's surface; the deep interior is carried by the grid.

    deep cells       liquid cells more than N cells from the air (6-neighbour steps;
                     solids count as liquid: a floor is not a surface). They hold no
                     particles; their lattice cells are kept (``deep``) and their bricks
                     stay in the topology (extra cells of ``SparseFlipGrid.update``).
    carry            at P2G, a face of a deep cell that no particle reaches takes the
                     grid velocity it had at the end of the last substep, advected along
                     itself (semi-Lagrangian: u(x − Δt·u(x))), Ferstl §4; deep cells
                     classify as FLUID, so the solve sees the whole liquid.
    after advection  a level set φ of the liquid (cells, negative inside) is kept on the
                     grid (Ferstl §4.2): advected semi-Lagrangian along the grid velocity
                     (trilinear), shrunk by a cell and joined with the particles' cells, so
                     the surface layer is the particles' and the liquid below it the grid's;
                     then redistanced (6-neighbour depths, solids count as liquid: a floor
                     is no surface). Deep cells (depth ≥ N) hold no particles: those in them
                     are deleted. Band cells under the surface layer that the grid calls
                     liquid and that were deep or hold no particle are refilled up to a
                     cell's worth, only at seeding points where φ < 0 (the cell's fill), at
                     the grid's velocity.

Status: on the Liquid panel (**Narrow Band**, cells, default off; ``FlipSettings.narrow_band``).
Still water stays still with 3.5× fewer particles, and a resumed run continues it. Dam
break (CPU, CFL 2, 1 s at 24 fps, 24 × 10 × 16 cells, h = 5 cm, an 8 × 10 × 12 column),
meshed volume at ¼/½/¾/1 s against the full-particle run's −3.9/−6.5/−6.3/−9.6%:
before the level set (cells that left the deep region filled to a whole cell's count,
the deep region traced cell to nearest cell, particles that flowed into deep cells kept
and counted twice: +7% count) −5.3/−9.1/−10.0/−11.0%; with it (N = 3) −4.5/−7.7/−7.4/
−3.9%, N = 2 −3.7/−5.3/−4.0/−3.7% (count −2 to −5.5%: deep cells stand for a full cell
whatever flowed into them). 30 × 10 × 15 cells, h = 4 cm, 100 frames at 60 fps: full
−5.4/−7.2/+2.3/−1.6% every 25 frames, N = 2 −4.9/−3.4/+0.5/+4.1% (was −7.8/−10.1/−4.1/
−4.9%), N = 3 −5.8/−6.1/+3.4/+3.1% (was −6.9/−11.0/+2.9/−4.0%). The centre of mass
(0.4 × 0.5 × 0.5 m column, 24 × 10 × 16 cells, 60 fps, seeds 1, 4, 9) after 1 s is
within the sparse/dense tolerance of 1 cm: 0.5–0.7 cm at N = 3, 0.4 cm at N = 4, 0.4–0.5
cm at N = 6 (full runs of different seeds: 0.4 cm; before the level set 1.7–2.3 cm). At
½ s it is not: 1.5–2 cm (N = 3), 0.8–1 cm (N = 4), 0.3 cm (N = 6); the kinetic energy
at 1 s runs +8 to +22% (N = 3, 4), ±2% at N = 6. Giving the band's bottom cell layer the grid's velocity (Mantaflow's
combine band) made it worse (4 cm at ½ s, energy −10%), and so did topping up every band
cell under half (or three quarters) of a cell's count, not only empty ones and those that
left the deep region (count +8 to +24%, energy +40 to +100%). The count's drift (−2 to
−5.5%) is particles that flow into cells already deep (deleted: the deep cell is full
already), ~1,100 in ¼ s.

The level set sees deep cells as cells full of particles (``virtual_particles``); mass
and energy count each deep cell as a full cell (``mass`` = particles per cell) at its
centre moving with the grid.

On the GPU (issue 24) the carry, the update after its frame and the deep cells' bricks run
in kernels (``sparse_band_gpu``, ``kernels/cuda/flip_sparse_band.cu``; ``VOXFX_SPARSE_BAND=
kernels``, the default, or ``arrays``, this module's array code, the reference): the same
deep cells, level set, mass, particles and bricks to the bit. The topology takes the deep
cells' stand-ins (``topology_cells``: the same bricks from ~(2/8)³ of the boxes) and, on the
device, the particles' bricks from the device pipeline joined with theirs (``topology``).
H100 80GB HBM3, 8M dam break at 256³, band 4 cells, both ways stepped frame by frame in one
process (``bench/flip_sparse_band.py --row 8m --frames 3 --narrow-band 4 --ways arrays kernels
--off``), frames 1 and 2 (8 substeps each, ~0.8M particles kept of 7.96M, 0.9M deep cells):

    way       frame ms     ms a substep  band pieces a substep               topology a substep
    arrays    1239, 1305   155, 163      110, 115 (carry 46–48, update 64–67)  39–42
    kernels   237, 246     29.6, 30.8    22.1, 23.0 (update 12.1–12.5, carry   1.4–1.6
                                         0.42, the band's topology keys 9.6–10.0)
    no band   65, 66       8.1, 8.2      —                                   —

At 65M particles (512³, frame 0, 6 substeps): 785 → 203 ms a substep (band 540 → 164,
topology 193 → 3.4 + 61 of band keys), the same bits. What is left on the kernel way: the
update's bounds (6.2 ms a substep at 8M, 85 at 65M: CuPy's ``min(axis=0)`` of (n, 3) arrays)
and the band's topology keys (the stand-ins' ``unique_rows``): ``VOXFX_SPARSE_BAND_REDUCE=
kernels`` (the default) does both in kernels, the same bits: the band's pieces 22–26 → 8.1–8.2 ms
a substep at 8M, the band frame 118–134 ms (H100, ``sparse_band_gpu`` notes); then the update's
~6 ms of candidates, compactions and refill.

The update's frame box and key helpers (``_Frame``, the particles' keys and bounds, membership)
are in ``sparse_band_frame.py``.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid.sparse_mac import DIRECTIONS
from . import sparse_band_gpu, sparse_bodies, sparse_gpu, transfer
from .grid import FLUID, SOLID
from .particles import seed_particles
from .sparse_band_frame import _Frame, _member, _particle_cell_bounds, _particle_keys

_F = np.float32
FAR = 2.0  # φ of a cell the level set does not store: air, beyond its rings (cells)
RINGS = 2  # air rings stored around the liquid: a trace of up to 2 cells finds its value
SHRINK = 1.0  # the grid's φ shrunk by a cell before the particles' surface layer joins it (§4.2)
CORNERS = tuple((a, b, c) for c in (0, 1) for b in (0, 1) for a in (0, 1))
PROFILE = None  # a list: the band appends (piece, CUDA event) as each piece is queued (bench/flip_sparse_band.py)


def _mark(piece):
    """Note the end of *piece* of the band's work in ``PROFILE`` (when it is a list; CuPy only)."""
    if PROFILE is not None:
        import cupy as cp

        event = cp.cuda.Event()
        event.record()
        PROFILE.append((piece, event))


def check(cells: int) -> int:
    cells = int(cells)
    if cells != 0 and cells < 2:
        raise InputError(f"The narrow band must be 0 (off) or at least 2 cells deep, not {cells}")
    return cells


class NarrowBand:
    def __init__(self, cells: int, xp):
        self.cells = check(cells)
        self.xp = xp
        self.deep = xp.zeros((0, 3), xp.int64)
        self.lattice = xp.zeros((0, 3), xp.int64)  # cells where the level set φ is stored
        self.phi = xp.zeros(0, xp.float32)  # φ there (cells, negative in the liquid)
        self.mass = xp.zeros(0, xp.float64)  # particles each deep cell stands for (a full cell)
        self.pending = None  # restored low faces of the deep cells (D, 3), written at the next P2G
        self.resampled = 0
        self._map = None  # the update's new φ on a dense map (kernels), for its refill

    # ------------------------------------------------------------------ inside a substep
    def snapshot(self, grid):
        """The faces at the end of the last substep (kept bricks keep them), before P2G."""
        if self.pending is not None and len(self.deep):
            xp = self.xp
            at = grid.locate(*(self.deep[:, a] for a in range(3)))
            ok = at >= 0
            for comp, name in enumerate(grid.FACES):
                grid[name][at[ok]] = self.xp.asarray(self.pending, xp.float32)[ok, comp]
        self.pending = None
        return tuple(f.copy() for f in grid.faces())

    def carry(self, grid, carried, dt: float):
        """Faces of deep cells that no particle reached: the carried velocity advected
        along itself (module text); marked valid. Then deep cells classify as FLUID."""
        xp = self.xp
        if len(self.deep) == 0:
            return
        if sparse_band_gpu.band_mode() == "kernels" and sparse_gpu.available(grid) and grid.valid is not None:
            sparse_band_gpu.carry(grid, self.deep, carried, dt)  # the same, in two launches
            return
        boxes = grid.boxes if grid.closed else None
        d = self.deep
        valid = list(grid.valid)
        for comp, name in enumerate(grid.FACES):
            step = np.zeros(3, np.int64)
            step[comp] = 1
            ijk = xp.concatenate([d, d + xp.asarray(step)])  # low and high face of each deep cell
            at = grid.locate(*(ijk[:, a] for a in range(3)))
            free = (at >= 0) & (valid[comp][xp.maximum(at, 0)] == 0)
            ijk, at = ijk[free], at[free]
            if len(at) == 0:
                continue
            x = [ijk[:, a].astype(xp.float32) + (_F(0) if a == comp else _F(0.5)) for a in range(3)]
            u = grid.sample_faces(carried, *x, boxes=boxes)
            back = [x[a] - u[a] * _F(dt / grid.h) for a in range(3)]
            value = grid.sample_faces(carried, *back, boxes=boxes)[comp]
            grid[name][at] = value.astype(xp.float32)
            v = valid[comp].copy()
            v[at] = 1
            valid[comp] = v
        grid.valid = tuple(valid)
        at = grid.locate(*(d[:, a] for a in range(3)))
        at = at[at >= 0]
        cell = grid["cell"]
        cell[at[cell[at] != SOLID]] = FLUID

    # ------------------------------------------------------------------ after advection
    def update(self, sim, dt: float) -> None:
        """The deep-region level set (Ferstl et al. 2016 §4.2) after advection: the grid's
        φ advected along the grid, the top cell layer taken from the particles, depths
        anew; particles in deep cells deleted, band cells the grid calls liquid refilled.
        Cells are int64 keys of one frame (``_Frame``) and the particles' cells are made
        unique first, so its memory follows the liquid's cells, not its particles × 3."""
        xp, g = self.xp, sim.grid
        reach, frame = self._reach_and_frame(sim, dt)
        _mark("update: reach and frame")
        if frame is None:  # no liquid anywhere
            self.lattice, self.phi = xp.zeros((0, 3), xp.int64), xp.zeros(0, xp.float32)
            self.deep, self.mass = xp.zeros((0, 3), xp.int64), xp.zeros(0, xp.float64)
            return
        if sparse_band_gpu.usable(sim) and sparse_band_gpu.map_fits(frame, self, sim):  # the same, on the box's maps
            sparse_band_gpu.update(self, sim, dt, reach, frame)
            _mark("update: kernels")
            return
        pkeys = _particle_keys(sim, frame)  # one int64 per particle
        taken = xp.unique(pkeys)  # the particles' cells (~particles per cell fewer rows)
        cand = xp.unique(xp.concatenate([frame.key(self.lattice), taken]))  # liquid + two air rings + particles
        for _ in range(max(0, reach - RINGS)):  # a trace longer than the rings: look farther
            for a in range(3):  # the 27-neighbourhood, one axis at a time
                step = frame.stride[a]
                cand = xp.unique(xp.concatenate([cand - step, cand, cand + step]))
        cells = frame.cells(cand)
        open_ = ~self._solid(sim, cells)
        cand, cells = cand[open_], cells[open_]
        del open_
        _mark("update: candidates")
        # φ̃(x) = φ(x − Δt·u(x)), semi-Lagrangian, trilinear over the stored cells (§4.2)
        x = [cells[:, a].astype(xp.float32) + _F(0.5) for a in range(3)]
        u = g.sample_faces(g.faces(), *x, boxes=g.boxes if g.closed else None)
        back = xp.stack([x[a] - u[a] * _F(dt / g.h) for a in range(3)], axis=1)
        del x, u
        _mark("update: trace (grid velocity)")
        advected = self.sample(sim, back)
        del back
        _mark("update: sample φ")
        # φ = min(φ̃ + 1, φ_particles): the grid shrunk by a cell, so the surface layer is the
        # particles' own and the grid's liquid below it (§4.2, as Mantaflow's narrow band)
        wet = _member(cand, taken, xp) | (advected + _F(SHRINK) < 0)
        liquid, lkeys = cells[wet], cand[wet]  # sorted by key, as ``unique_rows``
        del cand, cells, advected, wet, taken
        _mark("update: union")
        depth = self._depths(sim, liquid, lkeys, frame)
        _mark("update: depths")
        self._store(sim, liquid, lkeys, depth, frame)
        _mark("update: store φ")
        is_deep = depth >= self.cells
        deep, dkeys = liquid[is_deep], lkeys[is_deep]
        if len(deep):  # particles under the band: the deep cell stands for them (a full cell)
            keep = ~_member(pkeys, dkeys, xp)
            sim._keep(keep)
            pkeys = pkeys[keep]
            del keep
        _mark("update: delete deep particles")
        inner = (depth >= 1) & (depth < self.cells)  # band cells under the surface layer
        refill, rkeys = liquid[inner], lkeys[inner]
        del liquid, lkeys, depth, is_deep, inner
        was = _member(rkeys, xp.sort(frame.key(self.deep)), xp) if len(self.deep) else xp.zeros(len(refill), bool)
        ppc = float(sim.settings.particles_per_cell)
        self.deep, self.mass = deep, xp.full(len(deep), ppc, xp.float64)
        if len(refill):
            at = xp.minimum(xp.searchsorted(rkeys, pkeys), len(rkeys) - 1)
            at = at[rkeys[at] == pkeys]
            have = xp.bincount(at, minlength=len(refill)).astype(xp.float64)
            want = xp.where(was | (have == 0), xp.maximum(ppc - have, 0.0), 0.0)
            pick = want > 0
            _mark("update: refill counts")
            if bool(pick.any()):
                self._resample(sim, refill[pick], want[pick])
        _mark("update: resample")

    def _reach_and_frame(self, sim, dt: float):
        """(cells the fastest particle moves in *dt*, rounded up; the update's ``_Frame``: the
        stored cells, the deep cells and the particles' cells, grown by the dilation, the air
        rings and a neighbour step). The kernel way reads the speed and every bound at once
        (one host sync, not seven); the same numbers."""
        xp, g = self.xp, sim.grid
        if xp is not np and sparse_band_gpu.band_mode() == "kernels" and sparse_band_gpu.reduce_mode() == "kernels":
            return sparse_band_gpu.reach_and_frame(self, sim, dt)  # the bounds in kernels (not yet measured)
        if xp is np or sparse_band_gpu.band_mode() != "kernels":
            reach = int(np.ceil(float(transfer.max_speed(sim.vel)) * dt / g.h))
            pad = max(0, reach - RINGS) + RINGS + 1
            return reach, _Frame.around([self.lattice, self.deep], _particle_cell_bounds(sim), pad, xp)
        parts = [transfer.max_speed(sim.vel).astype(xp.float64).reshape(1)]
        if len(sim.pos):
            origin = xp.asarray(sim.spec.origin, dtype=xp.float32)
            h = np.float32(sim.spec.voxel_size)
            parts += [xp.floor((p - origin) / h).astype(xp.int64).astype(xp.float64)
                      for p in (sim.pos.min(axis=0), sim.pos.max(axis=0))]
        parts += [b.astype(xp.float64) for r in (self.lattice, self.deep) if len(r) for b in (r.min(axis=0),
                                                                                               r.max(axis=0))]
        host = backend.to_numpy(xp.concatenate(parts))  # int64 bounds within ±2²³: exact in float64
        reach = int(np.ceil(float(np.float32(host[0])) * dt / g.h))
        pad = max(0, reach - RINGS) + RINGS + 1  # dilation, air rings and a neighbour step
        corners = host[1:].reshape(-1, 3).astype(np.int64)
        return reach, _Frame.of_bounds(list(corners[0::2]), list(corners[1::2]), pad, xp)

    def topology(self, grid, pos, margin: int, reach=None):
        """(extra cells, keys) for ``SparseFlipGrid.update``: the deep cells' stand-ins
        (``topology_cells``) and, where the device pipeline serves, the substep's brick keys
        already joined (``sparse_band_gpu.topology_keys``; else None: the array path)."""
        keys = sparse_band_gpu.topology_keys(self, grid, pos, margin, reach) if self.xp is not np else None
        return self.topology_cells(margin), keys

    def topology_cells(self, margin: int):
        """Cells standing for the deep cells in the topology (``SparseFlipGrid.update``'s extra
        cells, boxes of ± *margin*): per axis each deep cell moved down to the first cell of its
        run with the same low and high brick of its box, c − min((c − m) mod 8, (c + m) mod 8),
        so the boxes reach the same bricks (clamped or not: the bricks are a function of that
        pair) from ~(2/8)³ as many distinct cells, which ``topology_keys`` makes unique before it
        expands their boxes."""
        xp, d = self.xp, self.deep
        if len(d) == 0 or sparse_band_gpu.band_mode() != "kernels":
            return d
        m = int(margin)
        return d - xp.minimum((d - m) % 8, (d + m) % 8)

    def sample(self, sim, x):
        """φ (cells) at points *x* (M, 3) in cell units: trilinear over the stored cells,
        unknown cells air (``FAR``); solid and outside-the-walls corners are left out and
        the weights renormalised, so a wall or an obstacle is neither liquid nor air.
        One corner at a time, so its memory is a few arrays of M."""
        xp = self.xp
        m = int(x.shape[0])
        if m == 0 or len(self.lattice) == 0:
            return xp.full(m, _F(FAR), xp.float32)
        t = x - _F(0.5)
        base = xp.floor(t)
        frac = (t - base).astype(xp.float32)
        del t
        base = base.astype(xp.int64)
        frame = _Frame.around([self.lattice], None, 0, xp)
        stored = frame.key(self.lattice)
        order = xp.argsort(stored)
        stored = stored[order]
        total = xp.zeros(m, xp.float32)
        weights = xp.zeros(m, xp.float32)
        for o in CORNERS:
            corner = base + xp.asarray(o, xp.int64)
            inside = frame.inside(corner)
            key = xp.where(inside, frame.key(corner), 0)
            at = xp.minimum(xp.searchsorted(stored, key), len(stored) - 1)
            found = inside & (stored[at] == key)
            value = xp.where(found, self.phi[order[at]], _F(FAR))
            del key, at, found, inside
            w = xp.ones(m, xp.float32)
            for a in range(3):
                w = w * (frac[:, a] if o[a] else _F(1) - frac[:, a])
            w = xp.where(~self._solid(sim, corner), w, _F(0))
            total += w * value
            weights += w
        return xp.where(weights > 0, total / xp.maximum(weights, _F(1e-12)), _F(FAR)).astype(xp.float32)

    def _depths(self, sim, liquid, keys, frame):
        """6-neighbour steps from each liquid cell (*keys*: their sorted keys in *frame*) to
        the air, up to the band's depth (solids count as liquid: a floor is no surface)."""
        xp = self.xp
        depth = xp.zeros(len(liquid), xp.int64)
        level, lkeys = liquid, keys
        for k in range(1, self.cells + 1):  # erosion: cells whose 6 neighbours are all liquid (or solid)
            if len(level) == 0:
                break
            keep = xp.ones(len(level), bool)
            for o in DIRECTIONS:
                wet = _member(lkeys + frame.offset(o), lkeys, xp)
                dry = xp.nonzero(~wet)[0]
                if len(dry):  # only cells with a non-liquid neighbour ask whether it is solid
                    wet[dry] = self._solid(sim, level[dry] + xp.asarray(o, xp.int64))
                keep &= wet
            level, lkeys = level[keep], lkeys[keep]
            depth[_member(keys, lkeys, xp)] = k
        return depth

    def _store(self, sim, liquid, keys, depth, frame):
        """φ after the redistancing, kept on the liquid and ``RINGS`` air rings: −(depth + ½)
        inside, +(ring − ½) outside, in cells."""
        xp = self.xp
        cells, phi = [liquid], [-(depth.astype(xp.float32) + _F(0.5))]
        known = keys  # sorted
        for ring in range(1, RINGS + 1):
            if len(known):
                grown = xp.unique(xp.concatenate([known + frame.offset(o) for o in DIRECTIONS]))
                grown = grown[~_member(grown, known, xp)]
            else:
                grown = known
            new = frame.cells(grown)
            new = new[~self._solid(sim, new)]
            cells.append(new)
            phi.append(xp.full(len(new), _F(ring - 0.5), xp.float32))
            known = xp.sort(xp.concatenate([known, frame.key(new)]))
        self.lattice, self.phi = xp.concatenate(cells), xp.concatenate(phi)

    def _solid(self, sim, ijk):
        out = sim._blocked(ijk)
        if sim.boundary == "closed":
            out |= ~sim._in_box(ijk)
        return out

    def _resample(self, sim, cells, want):
        """Particles for band cells the grid calls liquid: up to round(want) of the cell's
        seeding (at most ``particles_per_cell``), only where φ says liquid (§4.2: sampled
        to the cell's fill), at the grid's velocity."""
        xp, g = self.xp, sim.grid
        ppc = int(sim.settings.particles_per_cell)
        host = backend.to_numpy(cells)
        spec, offset = sparse_bodies.seeding_spec(sim.spec, host)
        self.resampled += 1
        pos, _ = seed_particles(host - offset, spec, per_cell=ppc,
                                seed=sim.settings.seed + 104729 * self.resampled, xp=xp)
        count = xp.minimum(xp.rint(want), ppc).astype(xp.int64)
        pos = pos[xp.arange(len(pos)) % ppc < xp.repeat(count, ppc)]  # particle m·ppc + s is in cell m
        if len(pos) == 0:
            return
        x = g.cell_coords(pos)
        kept = getattr(self, "_map", None)  # the new φ's dense map (kernels) or None
        phi = self.sample(sim, xp.stack(x, axis=1)) if kept is None else \
            sparse_band_gpu.sample_points(g, xp.stack(x, axis=1), *kept)
        pos = pos[phi < 0]
        if len(pos) == 0:
            return
        x = g.cell_coords(pos)
        if kept is None:
            vel = xp.stack(g.sample_faces(g.faces(), *x, boxes=g.boxes if g.closed else None), axis=1)
        else:
            vel = sparse_band_gpu.sample_faces(g, xp.stack(x, axis=1))
        sim._append(pos, vel.astype(xp.float32))

    # ------------------------------------------------------------------ outputs and state
    def crop(self, spec, lo, hi):
        """Open domain: forget the level set beyond the kill distance (world *lo*–*hi*)."""
        xp = self.xp
        c = xp.asarray(spec.origin, xp.float64) + (self.lattice.astype(xp.float64) + 0.5) * spec.voxel_size
        inside = ((c >= lo) & (c <= hi)).all(axis=1)
        self.lattice, self.phi = self.lattice[inside], self.phi[inside]


    def centres(self, spec):
        """World centres (D, 3) float64 of the deep cells."""
        xp = self.xp
        return xp.asarray(spec.origin, xp.float64) + (self.deep.astype(xp.float64) + 0.5) * spec.voxel_size

    def velocities(self, grid):
        """Grid velocities (D, 3) float64 at the deep cells' centres."""
        xp = self.xp
        x = [self.deep[:, a].astype(xp.float32) + _F(0.5) for a in range(3)]
        return xp.stack(grid.sample_faces(grid.faces(), *x, boxes=grid.boxes if grid.closed else None),
                        axis=1).astype(xp.float64)

    def low_faces(self, grid):
        """(D, 3) float32: u, v, w on each deep cell's low faces (its own, for checkpoints)."""
        xp = self.xp
        at = grid.locate(*(self.deep[:, a] for a in range(3)))
        return xp.stack([xp.where(at >= 0, grid[n][xp.maximum(at, 0)], _F(0)) for n in grid.FACES], axis=1)

    def virtual_particles(self, spec, particles_per_cell: int):
        """(D·k³, 3) float32 positions standing for the deep cells' liquid in the level
        set: a regular k × k × k lattice per cell, k = round(∛particles per cell)."""
        xp = self.xp
        k = max(1, int(round(float(particles_per_cell) ** (1.0 / 3.0))))
        t = (xp.arange(k, dtype=xp.float64) + 0.5) / k
        sub = xp.stack(xp.meshgrid(t, t, t, indexing="ij"), axis=-1).reshape(-1, 3)
        cells = self.deep.astype(xp.float64)[:, None, :] + sub[None, :, :]
        pos = xp.asarray(spec.origin, xp.float64) + cells.reshape(-1, 3) * spec.voxel_size
        return pos.astype(xp.float32)
