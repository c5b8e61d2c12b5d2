"""The FLIP liquid step on bricks (seed 003 Alg. 1 with §5–8 on a sparse grid):
``FlipSimulation(..., sparse=True)`` builds this class. Same constructor, ``step``,
``emit``/``drain``/``set_obstacles``, checkpoints and outputs as the dense solver; memory
follows the liquid (the bricks within a margin of its particles), not the box.

    topology              bricks of the particles' influence boxes (§5.1 full build on
                          the first substep, §5.2 incremental update after), walls and
                          obstacles marked on them
    particles → grid      gather, no float atomics (§6–7): of sorted (face, weight) pairs on
                          the CPU, over particles sorted by cell on the GPU (``sparse_gpu``)
    classify              FLUID where particles are, SOLID from obstacles and walls
    save old velocity     for the FLIP update
    gravity               body force on the faces
    boundaries            solid faces take the obstacles' velocity
    pressure              matrix-free PCG on the bricks' 7-point Laplacian (§8, Alg. 2),
                          multigrid over coarsened bricks as preconditioner
    project               subtract the pressure gradient
    extrapolate           valid velocities into the air band around the liquid
    grid → particles      FLIP/PIC blend of the change (or APIC), RK2, push out of solids
                          (one kernel on the GPU)
    open domain           particles beyond the kill distance are deleted

Obstacles, inflows and outflows (``sparse_bodies``): bodies voxelized into bricks on the
lattice (no dense box), so in an open domain they may lie outside the box:
``set_obstacle_bodies`` (moving obstacles, rigid step per frame), ``body_cells`` for
``emit``/``drain`` (lattice cells). ``set_obstacles`` still takes box cells.

Outputs (``sparse_output``): closed, the box's level set and cell velocity as the dense
solver's; open, over the liquid's region wherever it is. ``settings.narrow_band`` > 0
(experimental, ``sparse_band``): particles only near the surface, the deep interior on
the grid. ``settings.time_centred_advection``: the last substep's faces kept on the bricks
(``sparse_kept.KeptBricks``). ``VOXFX_AIR_BAND_PROJECTION`` / ``VOXFX_AIR_BAND_WALL_PIECES``
(opt-in prototypes, NumPy and CuPy: ``sparse_air_band.py``, ``sparse_air_band_gpu.py``): the G2P and advection through a
divergence-free air band, and the substep cut where the liquid would meet a wall.

``boundary``: "closed" (default; the box has walls, as the dense solver: the same scene
gives the same motion up to float rounding) or "open" (no walls: liquid leaves the box
and is deleted ``kill_distance`` metres beyond it, ``settings.kill_distance`` unless given).
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..checkpoint import check_state
from ..errors import InputError
from ..grid import GridSpec
from ..grid.sparse_mac import CELLS
from ..progress import report, scaled
from ..settings import env_scope
from . import bodies, density, density_positions, sparse_bodies, sparse_output, sparse_pressure, sparse_transfer
from . import air_band, particle_sort, sparse_air_band, transfer
from . import sparse_g2p_marks as g2p_marks
from . import sparse_topology_ahead as topology_ahead
from . import sparse_topology_gpu as topology_gpu
from .grid import FLUID, FlipSettings
from .particles import seed_particles
from .sim import FlipSimulation, obstacle_speed, source_cells
from .sparse_band import NarrowBand
from .sparse_grid import BrickReach, SparseFlipGrid, margin_mode, source_window, substep_margin
from .sparse_kept import KeptBricks
from .sparse_multigrid_kept import frame_started

BOUNDARIES = ("closed", "open")


class SparseFlipSimulation(KeptBricks, FlipSimulation):
    def __init__(self, spec: GridSpec, settings: FlipSettings, liquid_vertices, liquid_triangles,
                 obstacle_vertices=None, obstacle_triangles=None, xp=None, initial_velocity=(0.0, 0.0, 0.0),
                 progress=None, sparse=True, boundary=None, kill_distance=None,
                 preconditioner="mg"):
        boundary = settings.boundary if boundary is None else boundary
        if boundary not in BOUNDARIES:
            raise InputError(f"FLIP boundary must be one of {', '.join(BOUNDARIES)}, not {boundary!r}")
        if preconditioner not in sparse_pressure.PRECONDITIONERS:
            raise InputError(f"Unknown sparse pressure preconditioner {preconditioner!r}")
        self.spec, self.settings = spec, settings
        self.xp = xp = xp or backend.xp()
        density.stiffness(settings)  # the density correction's α, checked
        density_positions.refuse(xp, True)  # its position-only prototype: dense NumPy only
        air_band.refuse(xp, True)  # the divergence-free air band prototype: NumPy and CuPy (sparse_air_band)
        if settings.narrow_band and air_band.enabled():
            raise NotImplementedError(f"{air_band.SWITCH} is not built for the narrow band (sparse_band.py)")
        self.boundary, self.preconditioner = boundary, preconditioner
        self.kill_distance = float(settings.kill_distance if kill_distance is None else kill_distance)
        if not np.isfinite(self.kill_distance) or self.kill_distance < 0:
            raise InputError(f"The kill distance must be a distance ≥ 0 in metres, not {kill_distance!r}")
        self.grid = SparseFlipGrid(spec, xp, closed=boundary == "closed")
        self.band = NarrowBand(settings.narrow_band, xp) if settings.narrow_band else None
        static = None if obstacle_vertices is None else bodies.Body(obstacle_vertices, obstacle_triangles, np.eye(4))
        self.obstacle = xp.zeros((0, 3), xp.int64)  # cells of ``set_obstacles``
        self.obstacle_velocity = None
        self.obstacle_bodies = [sparse_bodies.voxel_bricks(static, spec, xp, progress=scaled(progress, 0, 0.4))]
        window, offset = source_window(liquid_vertices, spec)  # a large box: around the source only
        liquid, crossed = source_cells(liquid_vertices, liquid_triangles, window, xp,
                                       progress=scaled(progress, 0.4, 0.9))
        if self.obstacle_bodies[0].count and len(liquid):  # no liquid inside obstacles
            at = xp.asarray(liquid + offset.astype(liquid.dtype))
            free = ~backend.to_numpy(sparse_bodies.contains(self.obstacle_bodies[0], at, xp))
            liquid, crossed = liquid[free], crossed[free]
        self._seed(liquid, crossed, liquid_vertices, liquid_triangles, initial_velocity, spec=window)
        self.killed = 0

    # ------------------------------------------------------------------ boundaries that change
    def set_obstacles(self, cells_ijk, cell_velocity=None) -> None:
        """Obstacle cells (M, 3) for the coming frame, with an optional velocity per grid
        cell (nz, ny, nx, 3) (``FlipSimulation.set_obstacles``, cells of the box); marked on
        the bricks at each substep. Replaces the obstacles (bodies too)."""
        xp = self.xp
        cells = xp.asarray(cells_ijk).astype(xp.int64).reshape(-1, 3)
        self.obstacle = cells
        self.obstacle_velocity = None
        self.obstacle_bodies = []
        if cell_velocity is not None and len(cells):
            cv = xp.asarray(cell_velocity, dtype=xp.float32)
            self.obstacle_velocity = cv[cells[:, 2], cells[:, 1], cells[:, 0]]
        self.obstacle_speed = obstacle_speed(cells, None if cell_velocity is None else cv)

    def set_obstacle_bodies(self, now, next_matrices, fps: float) -> None:
        """Obstacles for the coming frame from their bodies (``bodies.Body`` at this frame
        and their world matrices at the next: ``bodies.obstacle_state``'s arguments),
        voxelized into bricks anywhere on the lattice (``sparse_bodies``), each moving
        with its rigid step over the frame. Replaces the obstacles (cells too)."""
        self.obstacle = self.xp.zeros((0, 3), self.xp.int64)
        self.obstacle_velocity = None
        self.obstacle_bodies = sparse_bodies.moving(now, next_matrices, self.spec, fps, self.xp)
        self.obstacle_speed = max([sparse_bodies.speed(b, self.spec, self.xp) for b in self.obstacle_bodies],
                                  default=0.0)

    def body_cells(self, body, progress=None):
        """(M, 3) int64 lattice cells a body (``bodies.Body``) fills, for ``emit`` and
        ``drain``: anywhere on the lattice (outside the box too) in an open domain, the
        box's cells in a closed one."""
        ijk = sparse_bodies.cells(sparse_bodies.voxel_bricks(body, self.spec, self.xp, progress), self.xp)
        return ijk[self._in_box(ijk)] if self.boundary == "closed" else ijk

    def _in_box(self, ijk):
        xp = backend.array_module(ijk)
        return ((ijk >= 0) & (ijk < xp.asarray(self.spec.shape))).all(axis=1)

    def _lattice_cells_of_particles(self, pos=None):
        """(N, 3) int64 lattice cell of each particle (*pos*: these positions instead)."""
        xp = self.xp
        pos = self.pos if pos is None else pos
        return xp.floor((pos - xp.asarray(self.spec.origin, dtype=xp.float32))
                        / np.float32(self.spec.voxel_size)).astype(xp.int64)

    def _blocked(self, ijk):
        """bool per lattice cell (M, 3): inside an obstacle (cells or bodies)."""
        xp = self.xp
        out = xp.zeros(len(ijk), bool)
        if len(self.obstacle):
            a, b = sparse_bodies.lattice_keys(ijk, self.obstacle, xp)
            out |= xp.isin(a, b)
        for body in self.obstacle_bodies:
            out |= sparse_bodies.contains(body, ijk, xp)
        return out

    def emit(self, cells_ijk, velocity) -> int:
        """Inflow: fill every listed lattice cell that holds no particle and no obstacle
        with a fresh cell's worth of particles moving at *velocity* (cells outside the box
        only in an open domain). Returns how many."""
        xp = self.xp
        cells = backend.to_numpy(cells_ijk).astype(np.int64, copy=False).reshape(-1, 3)
        if self.boundary == "closed":
            cells = cells[backend.to_numpy(self._in_box(cells))]
        if len(cells) == 0:
            return 0
        listed, taken = sparse_bodies.lattice_keys(xp.asarray(cells), self._lattice_cells_of_particles(), xp)
        free = ~xp.isin(listed, taken) & ~self._blocked(xp.asarray(cells))
        free = cells[backend.to_numpy(free)]
        if len(free) == 0:
            return 0
        self.emitted = getattr(self, "emitted", 0) + 1
        spec, offset = sparse_bodies.seeding_spec(self.spec, free)
        pos, vel = seed_particles(free - offset, spec, per_cell=self.settings.particles_per_cell,
                                  seed=self.settings.seed + 7919 * self.emitted, xp=xp, velocity=velocity)
        self._append(pos, vel)
        return int(len(pos))

    def _append(self, pos, vel):
        xp = self.xp
        self.pos = xp.concatenate([self.pos, pos])
        self.vel = xp.concatenate([self.vel, vel])
        if self.c is not None:
            self.c = xp.concatenate([self.c, xp.zeros((len(pos), 3, 3), dtype=xp.float32)])

    def _particle_cells(self, lo: int, hi: int):
        """``FlipSimulation._particle_cells`` on the bricks: the pool cell of the particles *lo*
        … *hi* − 1 (the lattice cell, clamped into a closed box), −1 outside the bricks or not
        finite."""
        xp, g = self.xp, self.grid
        pos = self.pos[lo:hi]
        ok = xp.isfinite(pos).all(axis=1)
        ijk = self._lattice_cells_of_particles(xp.where(ok[:, None], pos, 0))
        if self.boundary == "closed":
            ijk = xp.clip(ijk, 0, xp.asarray([n - 1 for n in self.spec.shape], dtype=xp.int64))
        return xp.where(ok, g.locate(ijk[:, 0], ijk[:, 1], ijk[:, 2]), -1)

    def _cell_count(self) -> int:
        return self.grid.size

    def drain(self, cells_ijk) -> int:
        """Outflow: delete the particles inside the listed lattice cells. Returns how many."""
        xp = self.xp
        if len(cells_ijk) == 0 or len(self.pos) == 0:
            return 0
        mine, listed = sparse_bodies.lattice_keys(self._lattice_cells_of_particles(), xp.asarray(cells_ijk), xp)
        keep = ~xp.isin(mine, listed)
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
        if self.band is not None and len(self.band.deep):
            c = self.band.centres(self.spec)
            inside = ((c >= lo) & (c <= hi)).all(axis=1)
            self.band.deep, self.band.mass = self.band.deep[inside], self.band.mass[inside]
        if self.band is not None:
            self.band.crop(self.spec, lo, hi)
        removed = int(len(self.pos) - int(keep.sum()))
        if removed:
            self._keep(keep)
            self.killed += removed
        return removed

    # ------------------------------------------------------------------ the method
    def _substep_speed(self) -> float:
        """``FlipSimulation._substep_speed``, kept for the substep that follows (its margin
        needs the same speed: one host read a substep instead of two)."""
        speed = g2p_marks.speed_read(self)  # VOXFX_SPARSE_G2P_MARKS: the last G2P's maximum (its module notes)
        speed = topology_ahead.speed_read(self) if speed is None else speed  # VOXFX_SPARSE_OCCUPIED_AHEAD: the
        speed = super()._substep_speed() if speed is None else speed  # topology's first kernel queued behind the
        # speed's copy (its module notes)
        self._speed = (self.vel, speed)
        return speed

    def _margin_speed(self) -> float:
        """The fastest particle's speed: ``_substep_speed``'s when it was taken of these very
        velocities just before this substep (``step``), else measured (one host read)."""
        known, self._speed = getattr(self, "_speed", None), None
        return known[1] if known is not None and known[0] is self.vel else float(transfer.max_speed(self.vel))

    def _device_margin(self, reach) -> bool:
        """The margin is left to the device topology (``sparse_topology_gpu.device_margin``: no
        read of its own): on CuPy, per-brick margins, no narrow band, the speed not known."""
        known = getattr(self, "_speed", None)
        if known is not None and known[0] is self.vel or self.xp is np or reach is None or self.band is not None:
            return False
        self._speed = None
        return topology_gpu.device_margin()

    def step(self, frame_dt: float, progress=None) -> dict:
        """``FlipSimulation.step``, then the particles put in brick order on the frames
        ``VOXFX_SPARSE_PARTICLE_SORT`` asks for (``particle_sort``: off by default), before the
        frame's outputs and checkpoint read them. The V-cycle's levels ≥ 2 held across set-ups
        (``VOXFX_SPARSE_MG_KEEP``) are rebuilt at the frame's first set-up
        (``sparse_multigrid_kept.frame_started``): a bake resumed at a frame goes on bit for bit.
        The A/B switches are read once a frame (``settings.env_scope``)."""
        with env_scope():
            frame_started(self.grid)
            stats = super().step(frame_dt, progress)
            stats["sorted"] = particle_sort.after_frame(self)
        return stats

    def substep(self, dt: float, progress=None) -> dict:
        g, s = self.grid, self.settings
        split, handled = air_band.split_substep(self, dt, progress)  # opt-in prototype: cut where the
        if handled:  # liquid would meet a wall within the substep (air_band.py; closed domains)
            return split
        g2p_marks.start(g)  # VOXFX_SPARSE_G2P_MARKS "0" now: the last G2P's marks dropped
        report(progress, 0.0, "topology")
        gravity = float(np.linalg.norm(s.gravity))
        reach = BrickReach(self.vel, dt, gravity, self.spec.voxel_size) if margin_mode() == "brick" else None
        band = self.band
        margin = None if self._device_margin(reach) else substep_margin(  # the fastest brick's
            self._margin_speed(), dt, self.spec.voxel_size, gravity)
        extra, keys = band.topology(g, self.pos, margin, reach) if band else (None, None)  # + the deep cells' bricks
        g.update(self.pos, margin, self.obstacle, self.obstacle_velocity, bodies=self.obstacle_bodies,  # §5.1 / §5.2
                 extra_cells=extra, scratch=band is None, reach=reach, keys=keys)  # margins per brick
        self._restore_carried_pressure()
        self._restore_kept_velocity()
        report(progress, 0.05, "particles to grid")
        carried = band.snapshot(g) if band else None  # narrow band: the deep cells' grid velocity
        sparse_transfer.particles_to_grid(g, self.pos, self.vel, self.c, ring=band is None)  # §6–7
        sparse_transfer.classify(g, self.pos)  # FLUID / AIR / SOLID
        if band:
            band.carry(g, carried, dt)  # deep faces keep their (advected) velocity, deep cells FLUID
        report(progress, 0.2, "pressure")
        old = sparse_transfer.extrapolate_and_boundaries(  # extrapolate, save old velocity for FLIP, then
            g, add=[np.float32(a * dt) for a in s.gravity])  # gravity and boundaries (one kernel on the GPU)
        alpha = density.stiffness(s)  # crowded cells a source of volume (density.py)
        source = None if not alpha else density.Crowding(density.sparse_counts(g, self.pos), s.particles_per_cell,
                                                         alpha, dt)
        p, stats = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,  # PCG (§8, Alg. 2)
                                                  max_iterations=s.pressure_max_iterations,
                                                  preconditioner=self.preconditioner,
                                                  progress=scaled(progress, 0.2, 0.8),
                                                  warm_start=s.warm_start_pressure,  # from the last p
                                                  source=source)
        sparse_pressure.project(g, p, dt)
        report(progress, 0.8, "grid to particles")
        fluid = sparse_transfer.fluid_faces(g)  # the cell types stand until the next classify: one set of
        sparse_transfer.extrapolate(g, valid=fluid)  # fluid-face masks serves the extrapolation, u_n and the keep
        ratio = 0.0 if s.apic else s.flip_ratio
        banded = air_band.enabled()
        if banded:  # opt-in prototype: FLIP/PIC or APIC, then sub-cycled RK2 through a
            stats = {**stats, **sparse_air_band.g2p_and_advect(self, old, ratio, dt)}  # divergence-free band
        else:
            before = self._start_velocity(fluid) if s.time_centred_advection else None  # u_n (RK2 in time too)
            marks = g2p_marks.prepare(self)  # VOXFX_SPARSE_G2P_MARKS: the next topology's marks written too
            sparse_transfer.g2p_advect(g, old, self.pos, self.vel, ratio, dt, self.c, before=before,  # FLIP/PIC
                                       marks=marks)
            g2p_marks.hold(self, marks)
        if s.time_centred_advection:
            self._keep_velocity(None if banded else fluid)
        if band:
            band.update(self, dt)  # deep region moves; particles only in the band
        if self.boundary == "open":
            self._kill_far()
        self.t += dt
        g2p_marks.keep_end(g)  # an ahead lives until the substep after its speed read (none here: dropped)
        return {**stats, "bricks": g.brick_count(), "deep_cells": len(band.deep) if band else 0}

    # ------------------------------------------------------------------ outputs
    @property
    def surface_spec(self) -> GridSpec:
        """The grid of ``level_set()``: closed, the box grown beyond its walls (as dense);
        open, the liquid's region grown so (``sparse_output``), wherever the liquid is."""
        from .surface import surface_grid

        return surface_grid(sparse_output.liquid_region(self))

    def level_set(self, progress=None, on_device=False):
        """The liquid's level set over ``surface_spec`` (NumPy, negative inside): closed
        against the walls in a closed box (``FlipSimulation.level_set``), the particles'
        own in an open domain. A narrow band's deep cells count as cells full of
        particles (``NarrowBand.virtual_particles``), so the band meets the deep liquid
        without a seam. The A/B switches are read once (``settings.env_scope``)."""
        pos = self.pos
        with env_scope():
            if self.band is not None and len(self.band.deep):
                self.pos = self.xp.concatenate([pos, self.band.virtual_particles(self.spec,
                                                                                 self.settings.particles_per_cell)])
            try:
                if self.boundary == "closed" and sparse_output.box_outputs(self.spec):
                    return super().level_set(progress, on_device)
                return sparse_output.level_set(self, progress, on_device)
            finally:
                self.pos = pos

    def cell_velocity(self, padding: int = 0):
        """Grid velocity at cell centres (nz, ny, nx, 3) float32 (NumPy), averaged from the
        faces, missing bricks 0: over the box (closed) or the liquid's region (open,
        ``sparse_output``), grown by *padding* cells: with ``surface.WALL_CELLS`` the
        layout of ``surface_spec``. Closed, the padding repeats the cell inside the wall
        (``FlipSimulation.cell_velocity``)."""
        from .surface import surface_grid

        region = sparse_output.liquid_region(self)
        restored = self._restored_velocity()  # a checkpoint's bricks until the next substep
        grid = self.grid if restored is None else restored
        if region is not self.spec and padding:  # the liquid's region: its own cells beyond it
            return sparse_output.cell_velocity(grid, surface_grid(region, padding), self.spec)
        if sparse_output.cell_velocity_mode() == "legacy":  # the A/B's old way: pad on the host
            cells = sparse_output.legacy_cell_velocity(grid, region, self.spec)
            if padding:
                cells = np.pad(cells, ((padding, padding),) * 3 + ((0, 0),), mode="edge")
            return cells
        # the box: one shape frame after frame, so a pinned block of CuPy's pool is reused
        return sparse_output.cell_velocity(grid, region, self.spec, padding=padding, pinned=region is self.spec)

    # ------------------------------------------------------------------ the whole liquid (narrow band: + deep cells)
    def liquid_particles(self) -> int:
        """Particles, with the particles a narrow band's deep cells hold (``mass``)."""
        deep = float(self.band.mass.sum()) if self.band is not None else 0.0
        return int(len(self.pos)) + int(round(deep))

    def kinetic_energy(self) -> float:
        e = super().kinetic_energy()
        if self.band is not None and len(self.band.deep):
            u = self.band.velocities(self.grid)
            e += 0.5 * float((self.band.mass[:, None] * u ** 2).sum())
        return e

    def centre_of_mass(self):
        if self.band is None or len(self.band.deep) == 0:
            return super().centre_of_mass()
        xp, m = self.xp, self.band.mass
        total = self.pos.astype(xp.float64).sum(axis=0) + (m[:, None] * self.band.centres(self.spec)).sum(axis=0)
        return backend.to_numpy(total / (len(self.pos) + float(m.sum())))

    def _state_arrays(self) -> dict:
        """``FlipSimulation.checkpoint``'s; a narrow band's state; the pressure carried for
        the next solve's warm start ("pressure_cells" (k, 3) int32 lattice cells,
        "pressure_values" (k,), 16 bytes a FLUID cell: optional, absent means a cold
        start), so a resumed bake goes on as it would have. Where they are (NumPy or
        CuPy, packed on the device: ``checkpoint`` copies them once)."""
        state = super()._state_arrays()
        g, xp = self.grid, self.xp
        pending = getattr(self, "carried_pressure", None)  # restored, no substep since
        if pending is not None:
            state["pressure_cells"], state["pressure_values"] = pending[0].astype(np.int32), pending[1]
        elif sparse_pressure.CARRIED in g.channels:
            at = xp.flatnonzero(xp.isfinite(g[sparse_pressure.CARRIED]))
            i, j, k = g.lattice()
            state["pressure_cells"] = xp.stack([i[at], j[at], k[at]], axis=1).astype(xp.int32)  # the lattice: ±2²³
            state["pressure_values"] = g[sparse_pressure.CARRIED][at]
        if self.band is not None:
            restored = self._restored_velocity()  # a restored frame's faces until its next substep
            grid = self.grid if restored is None else restored
            band = self.band
            state.update(deep=band.deep.astype(xp.int64, copy=False),
                         deep_faces=band.low_faces(grid).astype(xp.float32, copy=False),
                         deep_mass=band.mass.astype(xp.float64, copy=False),
                         band_cells=band.lattice.astype(xp.int64, copy=False),
                         band_phi=band.phi.astype(xp.float32, copy=False))
        return state

    # the grid velocity on its bricks: their keys (ascending) and each brick's 512 u, v, w
    VELOCITY_KEYS = ("grid_bricks", "grid_u", "grid_v", "grid_w")

    def _velocity_state(self) -> dict:
        """The grid velocity the frame's outputs read, on the active bricks that hold any
        (``SparseFlipGrid.velocity_bricks``: 8 bytes of key and 6 KiB of faces a brick)."""
        restored = self._restored_velocity()
        keys, faces = (self.grid if restored is None else restored).velocity_bricks()
        return dict(zip(self.VELOCITY_KEYS, (keys, *faces)))

    def _restore_velocity(self, state: dict):
        """A grid of *state*'s bricks and faces (checked) for the outputs, or None."""
        if not all(k in state for k in self.VELOCITY_KEYS):
            return None
        n = np.shape(state["grid_bricks"])[0] if np.ndim(state["grid_bricks"]) == 1 else -1
        check_state(state, {"grid_bricks": ((n,), "i"), **{k: ((n, CELLS), "f") for k in self.VELOCITY_KEYS[1:]}})
        return SparseFlipGrid.of_velocity_bricks(self.spec, self.xp, self.boundary == "closed", state["grid_bricks"],
                                                 [state[k] for k in self.VELOCITY_KEYS[1:]])

    def restore(self, state: dict) -> None:
        """``FlipSimulation.restore``; a narrow band's deep cells and their faces too; the
        carried pressure (optional: without it the next solve starts cold)."""
        if self.band is not None:
            n = np.shape(state.get("deep", np.zeros((0, 3))))[0]
            m = np.shape(state.get("band_cells", np.zeros((0, 3))))[0]
            check_state(state, {"deep": ((n, 3), "i"), "deep_faces": ((n, 3), "f"), "deep_mass": ((n,), "f"),
                                "band_cells": ((m, 3), "i"), "band_phi": ((m,), "f")})
        carried = None
        if "pressure_cells" in state or "pressure_values" in state:
            k = np.shape(state.get("pressure_cells", np.zeros((0, 3))))[0]
            check_state(state, {"pressure_cells": ((k, 3), "i"), "pressure_values": ((k,), "f")})
            carried = (np.asarray(state["pressure_cells"], np.int64), np.asarray(state["pressure_values"], np.float32))
        super().restore(state)
        self.grid.channels.pop(sparse_pressure.CARRIED, None)  # the old liquid's pressure goes
        self._drop_kept_velocity()  # and its faces (the checkpoint's, if any: after the next topology update)
        self.carried_pressure = carried  # written into the grid after the next topology update
        if self.band is not None:
            self.band.deep = self.xp.asarray(state["deep"], dtype=self.xp.int64)
            self.band.pending = self.xp.asarray(state["deep_faces"], dtype=self.xp.float32)
            self.band.mass = self.xp.asarray(state["deep_mass"], dtype=self.xp.float64)
            self.band.lattice = self.xp.asarray(state["band_cells"], dtype=self.xp.int64)
            self.band.phi = self.xp.asarray(state["band_phi"], dtype=self.xp.float32)

    def _restore_carried_pressure(self) -> None:
        """After a restore, the saved carried pressure onto the cells of the new topology
        (the same bricks an uninterrupted run keeps: its values there are these)."""
        carried, self.carried_pressure = getattr(self, "carried_pressure", None), None
        if carried is None:
            return
        xp, g = self.xp, self.grid
        cells, values = (xp.asarray(a) for a in carried)
        channel = g.add(sparse_pressure.CARRIED, xp.float32, np.nan)
        at = g.locate(cells[:, 0], cells[:, 1], cells[:, 2])
        channel[at[at >= 0]] = values[at >= 0]

    def fluid_cell_count(self) -> int:
        return int((self.grid["cell"] == FLUID).sum())

    def memory_bytes(self) -> int:
        """Device bytes of the grid (channels, neighbour index, topology) and the particles."""
        parts = [self.pos, self.vel] + ([self.c] if self.c is not None else [])
        return int(self.grid.nbytes + sum(a.nbytes for a in parts))
