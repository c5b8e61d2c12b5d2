"""The FLIP liquid step on bricks (seed 003 Alg. 1 with §5–8 on a sparse grid):
``FlipSimulation(..., sparse=True)`` builds this class. Same constructor, ``step``,
``emit``/``drain``/``set_obstacles``, checkpoints and outputs as the dense solver; memory
follows the liquid (the bricks within a margin of its particles), not the box.

    topology              bricks of the particles' influence boxes (§5.1 full build on
                          the first substep, §5.2 incremental update after), walls and
                          obstacles marked on them
    particles → grid      gather of sorted (face, weight) pairs (§6–7), no float atomics
    classify              FLUID where particles are, SOLID from obstacles and walls
    save old velocity     for the FLIP update
    gravity               body force on the faces
    boundaries            solid faces take the obstacles' velocity
    pressure              matrix-free PCG on the bricks' 7-point Laplacian (§8, Alg. 2),
                          multigrid over coarsened bricks as preconditioner
    project               subtract the pressure gradient
    extrapolate           valid velocities into the air band around the liquid
    grid → particles      FLIP/PIC blend of the change (or APIC), RK2, push out of solids
    open domain           particles beyond the kill distance are deleted

``boundary``: "closed" (default; the box has walls, as the dense solver: the same scene
gives the same motion up to float rounding) or "open" (no walls: liquid leaves the box
and is deleted ``kill_distance`` metres beyond it, default one box length).
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..progress import report, scaled
from . import bodies, sparse_pressure, sparse_transfer, transfer
from .grid import FLUID, FlipSettings
from .particles import seed_particles
from .sim import FlipSimulation, keep_inside, source_cells
from .sparse_grid import SparseFlipGrid, substep_margin

BOUNDARIES = ("closed", "open")


def _linear(cells, shape, xp):
    nx, ny, _ = shape
    return (cells[:, 2] * ny + cells[:, 1]) * nx + cells[:, 0]


class SparseFlipSimulation(FlipSimulation):
    def __init__(self, spec: GridSpec, settings: FlipSettings, liquid_vertices, liquid_triangles,
                 obstacle_vertices=None, obstacle_triangles=None, xp=None, initial_velocity=(0.0, 0.0, 0.0),
                 progress=None, sparse=True, boundary="closed", kill_distance=None,
                 preconditioner="mg"):
        if boundary not in BOUNDARIES:
            raise InputError(f"FLIP boundary must be one of {', '.join(BOUNDARIES)}, not {boundary!r}")
        if preconditioner not in sparse_pressure.PRECONDITIONERS:
            raise InputError(f"Unknown sparse pressure preconditioner {preconditioner!r}")
        self.spec, self.settings = spec, settings
        self.xp = xp = xp or backend.xp()
        self.boundary, self.preconditioner = boundary, preconditioner
        extent = max(spec.upper[a] - spec.origin[a] for a in range(3))
        self.kill_distance = float(extent if kill_distance is None else kill_distance)
        if not np.isfinite(self.kill_distance) or self.kill_distance < 0:
            raise InputError(f"The kill distance must be a distance ≥ 0 in metres, not {kill_distance!r}")
        self.grid = SparseFlipGrid(spec, xp, closed=boundary == "closed")
        static = None if obstacle_vertices is None else bodies.Body(obstacle_vertices, obstacle_triangles, np.eye(4))
        self.obstacle = bodies.cells(static, spec, xp, progress=scaled(progress, 0, 0.4)).astype(xp.int64)
        self.obstacle_velocity = None
        liquid, crossed = source_cells(liquid_vertices, liquid_triangles, spec, xp, progress=scaled(progress, 0.4, 0.9))
        if len(self.obstacle) and len(liquid):  # no liquid inside obstacles
            blocked = backend.to_numpy(_linear(self.obstacle, spec.shape, xp))
            free = ~np.isin(_linear(np.asarray(liquid, np.int64), spec.shape, np), blocked)
            liquid, crossed = liquid[free], crossed[free]
        pos, vel = seed_particles(liquid, spec, per_cell=settings.particles_per_cell, seed=settings.seed,
                                  xp=xp, velocity=initial_velocity)
        self.pos, self.vel = keep_inside(pos, vel, crossed, settings.particles_per_cell, liquid_vertices,
                                         liquid_triangles, spec)
        if len(self.pos) == 0:
            raise InputError("The liquid source covers no free grid cell: it is empty (no volume), outside the "
                             "domain, inside an obstacle or smaller than one cell")
        self.c = xp.zeros((len(self.pos), 3, 3), dtype=xp.float32) if settings.apic else None
        self.t = 0.0
        self.frames = 0
        self.last = {}
        self.killed = 0

    # ------------------------------------------------------------------ boundaries that change
    def set_obstacles(self, cells_ijk, cell_velocity=None) -> None:
        """Obstacle cells (M, 3) for the coming frame, with an optional velocity per grid
        cell (nz, ny, nx, 3) (``FlipSimulation.set_obstacles``); marked on the bricks at
        each substep."""
        xp = self.xp
        cells = xp.asarray(cells_ijk).astype(xp.int64).reshape(-1, 3)
        self.obstacle = cells
        self.obstacle_velocity = None
        if cell_velocity is not None and len(cells):
            cv = xp.asarray(cell_velocity, dtype=xp.float32)
            self.obstacle_velocity = cv[cells[:, 2], cells[:, 1], cells[:, 0]]

    def _box_cells_of_particles(self):
        """Linear box index of each particle's cell, −1 outside the box."""
        xp = self.xp
        ijk = xp.floor((self.pos - xp.asarray(self.spec.origin, dtype=xp.float32))
                       / np.float32(self.spec.voxel_size)).astype(xp.int64)
        inside = ((ijk >= 0) & (ijk < xp.asarray(self.spec.shape))).all(axis=1)
        return xp.where(inside, _linear(ijk, self.spec.shape, xp), -1)

    def emit(self, cells_ijk, velocity) -> int:
        """Inflow: fill every listed box cell that holds no particle and no obstacle with a
        fresh cell's worth of particles moving at *velocity*. Returns how many."""
        xp = self.xp
        cells = backend.to_numpy(cells_ijk).astype(np.int64, copy=False).reshape(-1, 3)
        if len(cells) == 0:
            return 0
        linear = xp.asarray(_linear(cells, self.spec.shape, np))
        taken = self._box_cells_of_particles()
        if len(self.obstacle):
            taken = xp.concatenate([taken, _linear(self.obstacle, self.spec.shape, xp)])
        free = cells[backend.to_numpy(~xp.isin(linear, taken))]
        if len(free) == 0:
            return 0
        self.emitted = getattr(self, "emitted", 0) + 1
        pos, vel = seed_particles(free, self.spec, per_cell=self.settings.particles_per_cell,
                                  seed=self.settings.seed + 7919 * self.emitted, xp=xp, velocity=velocity)
        self._append(pos, vel)
        return int(len(pos))

    def _append(self, pos, vel):
        xp = self.xp
        self.pos = xp.concatenate([self.pos, pos])
        self.vel = xp.concatenate([self.vel, vel])
        if self.c is not None:
            self.c = xp.concatenate([self.c, xp.zeros((len(pos), 3, 3), dtype=xp.float32)])

    def _keep(self, keep):
        self.pos, self.vel = self.pos[keep], self.vel[keep]
        if self.c is not None:
            self.c = self.c[keep]

    def drain(self, cells_ijk) -> int:
        """Outflow: delete the particles inside the listed box cells. Returns how many."""
        xp = self.xp
        if len(cells_ijk) == 0 or len(self.pos) == 0:
            return 0
        cells = xp.asarray(cells_ijk).astype(xp.int64).reshape(-1, 3)
        keep = ~xp.isin(self._box_cells_of_particles(), _linear(cells, self.spec.shape, xp))
        removed = int(len(self.pos) - int(keep.sum()))
        if removed:
            self._keep(keep)
        return removed

    def _kill_far(self) -> int:
        """Open domain: delete particles more than ``kill_distance`` beyond the box."""
        xp = self.xp
        lo = xp.asarray(self.spec.origin, dtype=xp.float32) - np.float32(self.kill_distance)
        hi = xp.asarray(self.spec.upper, dtype=xp.float32) + np.float32(self.kill_distance)
        keep = ((self.pos >= lo) & (self.pos <= hi)).all(axis=1)
        removed = int(len(self.pos) - int(keep.sum()))
        if removed:
            self._keep(keep)
            self.killed += removed
        return removed

    # ------------------------------------------------------------------ the method
    def substep(self, dt: float, progress=None) -> dict:
        g, s = self.grid, self.settings
        report(progress, 0.0, "topology")
        margin = substep_margin(float(transfer.max_speed(self.vel)), dt, self.spec.voxel_size,
                                float(np.linalg.norm(s.gravity)))
        g.update(self.pos, margin, self.obstacle, self.obstacle_velocity)  # §5.1 / §5.2
        report(progress, 0.05, "particles to grid")
        sparse_transfer.particles_to_grid(g, self.pos, self.vel, self.c)  # gather (§6–7)
        sparse_transfer.classify(g, self.pos)  # FLUID / AIR / SOLID
        sparse_transfer.extrapolate(g)
        report(progress, 0.2, "pressure")
        old = tuple(f.copy() for f in g.faces())  # save old velocity for FLIP
        for name, a in zip(g.FACES, s.gravity):  # gravity
            g[name] = g[name] + np.float32(a * dt)
        sparse_transfer.enforce_boundaries(g)
        p, stats = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,  # PCG (§8, Alg. 2)
                                                  max_iterations=s.pressure_max_iterations,
                                                  preconditioner=self.preconditioner,
                                                  progress=scaled(progress, 0.2, 0.8))
        sparse_pressure.project(g, p, dt)
        report(progress, 0.8, "grid to particles")
        sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
        ratio = 0.0 if s.apic else s.flip_ratio
        sparse_transfer.g2p_advect(g, old, self.pos, self.vel, ratio, dt, self.c)  # FLIP/PIC or APIC; RK2
        if self.boundary == "open":
            self._kill_far()
        self.t += dt
        return {**stats, "bricks": g.brick_count()}

    # ------------------------------------------------------------------ outputs
    def cell_velocity(self, padding: int = 0):
        """Grid velocity at the box's cell centres (nz, ny, nx, 3) float32 (NumPy), averaged
        from the faces; missing bricks read 0; *padding* as ``FlipSimulation.cell_velocity``."""
        g, xp = self.grid, self.xp
        nx, ny, nz = self.spec.shape
        k, j, i = (a.ravel().astype(xp.int64) for a in xp.indices((nz, ny, nx)))
        out = []
        for comp, name in enumerate(g.FACES):
            f = g[name]
            lo = g.locate(i, j, k)
            hi = g.locate(i + (comp == 0), j + (comp == 1), k + (comp == 2))
            a = xp.where(lo >= 0, f[xp.maximum(lo, 0)], np.float32(0))
            b = xp.where(hi >= 0, f[xp.maximum(hi, 0)], np.float32(0))
            out.append((np.float32(0.5) * (a + b)).reshape(nz, ny, nx))
        cells = np.ascontiguousarray(backend.to_numpy(xp.stack(out, axis=-1)), dtype=np.float32)
        if padding:
            cells = np.pad(cells, ((padding, padding),) * 3 + ((0, 0),), mode="edge")
        return cells

    def fluid_cell_count(self) -> int:
        return int((self.grid["cell"] == FLUID).sum())

    def memory_bytes(self) -> int:
        """Device bytes of the grid (channels, neighbour index, topology) and the particles."""
        parts = [self.pos, self.vel] + ([self.c] if self.c is not None else [])
        return int(self.grid.nbytes + sum(a.nbytes for a in parts))
