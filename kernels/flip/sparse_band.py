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
    after advection  the deep region moves with the grid (a cell is deep-liquid if its
                     centre traced back by Δt·u lies in a deep cell), liquid = particle
                     cells ∪ that; depth by N erosions; particles in cells now deep are
                     deleted, cells that left the deep region (entering the band) are
                     resampled: a cell's worth of particles at the grid's velocity.

Status (experimental, kernel-only: ``FlipSettings.narrow_band`` is not on the panel).
Still water stays still with 3.5× fewer particles, and a resumed run continues it. On a
dam break the band's meshed volume (``liquid_volume`` of the level set, deep cells as
full cells) runs below the full-particle run's while its particle count (particles +
deep cells' mass) runs above it. Measured (CPU, CFL 2, 1 s at 24 fps) on 24 × 10 × 16
cells, h = 5 cm, N = 3, at 0.25/0.5/0.75/1 s: volume −5.4/−9.2/−10.0/−11.0% vs the full
run's −3.9/−6.5/−6.4/−9.6% (seeds 0–2 within ±0.5 pt, ±1 pt at 1 s); count +5.9/+6.6/
+6.9/+7.7%; kinetic energy +18% at ¼ s. On the 3 s test scene (48 × 12 × 24, slow test
bound −8%) −9.0% at ½ s and −10.2% at 1 s vs the full run's −6.0/−6.3%. What it is not:
the carried faces' self-advection (off: the same numbers), enclosed air holes (≤ 2
cells at a time), deep cells lost by the trace (≤ 7 in 1 s), the trace's one-cell
reach at CFL 2 (a reach of ⌈u·Δt/h⌉ cells: the same numbers), the CFL (at CFL 1:
−4.6/−9.1/−11.2/−11.8%) or the band's depth (N = 2: −5.7/−8.2/−7.0/−9.7%; N = 5, whose
deep region is gone by ½ s, −4.6/−8.0/−9.2/−11.3%). So the loss is made while the
deep region dissolves into resampled particles: cells entering the band are filled up
to a cell's worth counting the band particles already there, which creates particles
(+1600 resampled against 1769 deleted into 78 new deep cells in ¼ s) yet meshes
smaller. Resampling instead to the mass each deep cell carried, split over the cells its
nearest-cell trace reaches, is far worse (−32.6% at ½ s, −30.6% at 1 s: the trace
dilutes a cell's liquid where the flow spreads and drops it where it converges). Next:
trace the deep region as a level set combined with the particles' (Ferstl §4.2) and
resample band cells to that level set's fill, not to a count.

The level set sees deep cells as cells full of particles (``virtual_particles``); mass and energy count each
deep cell as a full cell (``mass`` = particles per cell) at its centre moving with the
grid; a cell entering the band is filled up to a cell's worth.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..grid.sparse_mac import DIRECTIONS
from . import sparse_bodies
from .grid import FLUID, SOLID
from .particles import seed_particles
from .sparse_grid import unique_rows

_F = np.float32


def check(cells: int) -> int:
    cells = int(cells)
    if cells != 0 and cells < 2:
        raise InputError(f"The narrow band must be 0 (off) or at least 2 cells deep, not {cells}")
    return cells


def _isin(a, b, xp):
    ka, kb = sparse_bodies.lattice_keys(a, b, xp)
    return xp.isin(ka, kb)


def _find(a, b, xp):
    """Row of *b* (unique lattice cells) holding each cell of *a*, −1 where none."""
    if len(b) == 0:
        return xp.full(len(a), -1, xp.int64)
    ka, kb = sparse_bodies.lattice_keys(a, b, xp)
    order = xp.argsort(kb)
    at = xp.minimum(xp.searchsorted(kb[order], ka), len(kb) - 1)
    return xp.where(kb[order][at] == ka, order[at], -1)


class NarrowBand:
    def __init__(self, cells: int, xp):
        self.cells = check(cells)
        self.xp = xp
        self.deep = xp.zeros((0, 3), xp.int64)
        self.mass = xp.zeros(0, xp.float64)  # particles each deep cell stands for (a full cell)
        self.pending = None  # restored low faces of the deep cells (D, 3), written at the next P2G
        self.resampled = 0

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
        """Move the deep region with the grid, find the new one, delete the particles in
        it and resample the cells that left it (module text)."""
        xp, g = self.xp, sim.grid
        boxes = g.boxes if g.closed else None
        moved = xp.zeros((0, 3), xp.int64)
        if len(self.deep):
            cand = unique_rows(xp.concatenate([self.deep] + [self.deep + xp.asarray(o, xp.int64)
                                                             for o in DIRECTIONS]), xp)
            x = [cand[:, a].astype(xp.float32) + _F(0.5) for a in range(3)]
            u = g.sample_faces(g.faces(), *x, boxes=boxes)
            back = xp.stack([xp.floor(x[a] - u[a] * _F(dt / g.h)) for a in range(3)], axis=1).astype(xp.int64)
            moved = cand[_isin(back, self.deep, xp) & ~self._solid(sim, cand)]
        pcells = sim._lattice_cells_of_particles()
        liquid = unique_rows(xp.concatenate([pcells, moved]), xp)
        deep = liquid
        for _ in range(self.cells):  # erosion: deep ← cells whose 6 neighbours are all liquid (or solid)
            if len(deep) == 0:
                break
            keep = xp.ones(len(deep), bool)
            for o in DIRECTIONS:
                nb = deep + xp.asarray(o, xp.int64)
                keep &= _isin(nb, deep, xp) | self._solid(sim, nb)
            deep = deep[keep]
        ppc = float(sim.settings.particles_per_cell)
        if len(deep):  # particles in cells that became deep: the cell holds a full cell's worth instead
            fresh = deep[~_isin(deep, moved, xp)] if len(moved) else deep
            sim._keep(~_isin(pcells, fresh, xp))
            pcells = sim._lattice_cells_of_particles()
        entered = moved[~_isin(moved, deep, xp)] if len(deep) else moved
        self.deep, self.mass = deep, xp.full(len(deep), ppc, xp.float64)
        if len(entered):  # filled up to a cell's worth, with the particles already there
            at = _find(pcells, entered, xp)
            have = xp.bincount(at[at >= 0], minlength=len(entered)).astype(xp.float64)
            self._resample(sim, entered, xp.maximum(ppc - have, 0.0))

    def _solid(self, sim, ijk):
        out = sim._blocked(ijk)
        if sim.boundary == "closed":
            out |= ~sim._in_box(ijk)
        return out

    def _resample(self, sim, cells, mass):
        """Particles for cells entering the band: round(mass) of a cell's seeding each
        (at most ``particles_per_cell``), at the grid's velocity."""
        from .. import backend

        xp, g = self.xp, sim.grid
        ppc = int(sim.settings.particles_per_cell)
        host = backend.to_numpy(cells)
        spec, offset = sparse_bodies.seeding_spec(sim.spec, host)
        self.resampled += 1
        pos, _ = seed_particles(host - offset, spec, per_cell=ppc,
                                seed=sim.settings.seed + 104729 * self.resampled, xp=xp)
        count = xp.minimum(xp.rint(mass), ppc).astype(xp.int64)
        pos = pos[xp.arange(len(pos)) % ppc < xp.repeat(count, ppc)]  # particle m·ppc + s is in cell m
        if len(pos) == 0:
            return
        x = g.cell_coords(pos)
        vel = xp.stack(g.sample_faces(g.faces(), *x, boxes=g.boxes if g.closed else None), axis=1)
        sim._append(pos, vel.astype(xp.float32))

    # ------------------------------------------------------------------ outputs and state
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
