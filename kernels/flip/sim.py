"""The FLIP liquid step (seed 003 Alg. 1, on a dense grid), reading as the method:

    particles → grid      weighted transfer of particle velocities to the MAC faces (§7)
    classify              FLUID where particles are, SOLID from obstacles and walls
    save old velocity     for the FLIP update
    gravity               body force on the faces
    boundaries            solid faces take the obstacles' velocity
    pressure              matrix-free PCG on the 7-point Laplacian (§8, Alg. 2)
    project               subtract the pressure gradient: divergence-free in the fluid
    extrapolate           valid velocities into the air band around the liquid
    grid → particles      FLIP/PIC blend of the change (or APIC)
    advect                RK2 through the grid velocity (time-centred: through the velocity
                          linear in time from the last substep's); push out of solids

Substeps per frame follow the CFL number from the fastest particle (one host sync per
frame step). State stays on the backend's device. ``step`` and ``substep`` take a
``progress(fraction, message) -> bool``: it hears between stages (no sync: a Python
call) and between the pressure solver's blocks of iterations; False raises
``Cancelled`` there, leaving the state half-stepped (a bake drops it: its cache holds
complete frames only).
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..checkpoint import HostRing, check_state, gather
from ..errors import InputError, VoxFXError
from ..grid import GridSpec
from ..progress import report, scaled
from . import air_band, bodies, density, density_positions, particle_count, pressure, transfer
from .grid import FLUID, DenseGrid, FlipSettings
from .memory import flip_memory  # noqa: F401  (imported from here by the add-on, benches and tests)
from .particles import seed_particles
from .source import keep_inside, source_cells


class SimulationError(VoxFXError):
    """The simulation became invalid (NaN): the bake stops and keeps the last good frame."""


def obstacle_speed(cells_ijk, cell_velocity) -> float:
    """The fastest obstacle cell's speed (m/s) of *cell_velocity* (nz, ny, nx, 3) at the
    listed cells (M, 3): a moving obstacle sizes the substeps as the liquid does."""
    if cell_velocity is None or len(cells_ijk) == 0:
        return 0.0
    xp = backend.array_module(cell_velocity)
    ijk = xp.asarray(cells_ijk).astype(xp.int64)
    v = cell_velocity[ijk[:, 2], ijk[:, 1], ijk[:, 0]].astype(xp.float64)
    return float(xp.sqrt((v * v).sum(axis=1)).max())


def phi_out(phi, on_device=False, pinned=True):
    """A level set as ``level_set`` returns it: float32 NumPy, or as it is with *on_device*.
    A device array comes through pinned memory with *pinned* (13× the pageable copy's speed
    for the 8M dam break's 262³ grid, H200): for grids of one shape frame after frame, as
    CuPy's pinned pool reuses only blocks of the same size."""
    if on_device and backend.array_module(phi) is not np:
        return phi
    return np.asarray(backend.to_host(phi) if pinned else backend.to_numpy(phi), dtype=np.float32)


def dense_mask(ijk, spec: GridSpec, xp):
    """uint8 [k, j, i] mask of the listed cells (M, 3) (host or device), on *xp*."""
    mask = xp.zeros(spec.array_shape, dtype=xp.uint8)
    if len(ijk):
        ijk = xp.asarray(ijk)
        mask[ijk[:, 2], ijk[:, 1], ijk[:, 0]] = 1
    return mask


class FlipSimulation:
    def __new__(cls, *args, sparse: bool = False, **kwargs):
        """``sparse=True`` (or ``settings.sparse``): the solver on bricks
        (``sparse_sim.SparseFlipSimulation``, same interface; its extra keywords:
        ``boundary``, ``kill_distance``, ``preconditioner``)."""
        settings = args[1] if len(args) > 1 else kwargs.get("settings")
        if (sparse or getattr(settings, "sparse", False)) and cls is FlipSimulation:
            from .sparse_sim import SparseFlipSimulation

            cls = SparseFlipSimulation
        return super().__new__(cls)

    def __init__(self, spec: GridSpec, settings: FlipSettings, liquid_vertices, liquid_triangles,
                 obstacle_vertices=None, obstacle_triangles=None, xp=None, initial_velocity=(0.0, 0.0, 0.0),
                 progress=None, sparse=False):
        if settings.narrow_band or settings.boundary != "closed":
            raise VoxFXError("Open boundaries and the narrow band need the sparse solver (Sparse on)")
        self.spec, self.settings = spec, settings
        self.xp = xp = xp or backend.xp()
        density.stiffness(settings)  # the density correction's α, checked
        density_positions.refuse(xp, settings.sparse)  # its position-only prototype: dense NumPy only
        air_band.refuse(xp, False)  # the divergence-free air band prototype: dense NumPy only (sparse: both)
        self.grid = DenseGrid(spec, xp)
        static = None if obstacle_vertices is None else bodies.Body(obstacle_vertices, obstacle_triangles, np.eye(4))
        obstacle = bodies.cells(static, spec, xp, progress=scaled(progress, 0, 0.4))
        self.grid.solid[...] = dense_mask(obstacle, spec, xp)
        liquid, crossed = source_cells(liquid_vertices, liquid_triangles, spec, xp, progress=scaled(progress, 0.4, 0.9))
        if len(obstacle) and len(liquid):  # no liquid inside obstacles
            solid_host = backend.to_numpy(self.grid.solid)
            free = solid_host[liquid[:, 2], liquid[:, 1], liquid[:, 0]] == 0
            liquid, crossed = liquid[free], crossed[free]
        self._seed(liquid, crossed, liquid_vertices, liquid_triangles, initial_velocity)

    def _seed(self, liquid, crossed, liquid_vertices, liquid_triangles, initial_velocity, spec=None) -> None:
        """The liquid's particles in its free *liquid* cells (those its surface *crossed*
        keep only what lies inside it) and the state of time zero: dense and sparse alike.
        *spec*: the grid of *liquid*'s cells when not the simulation's (a window of the
        lattice in a large sparse box, ``sparse_grid.source_window``)."""
        spec, settings, xp = spec or self.spec, self.settings, self.xp
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

    # ------------------------------------------------------------------ boundaries that change
    def set_obstacles(self, cells_ijk, cell_velocity=None) -> None:
        """Obstacle cells (M, 3) for the coming frame, with an optional velocity per grid
        cell (nz, ny, nx, 3) for moving obstacles: a face next to a solid cell takes the
        mean velocity of the solid cells it touches (its normal component is enforced
        by ``transfer.enforce_boundaries``)."""
        xp, g = self.xp, self.grid
        g.solid[...] = dense_mask(cells_ijk, self.spec, xp)
        for arr in (g.solid_u, g.solid_v, g.solid_w):
            arr[...] = 0
        self.obstacle_speed = 0.0
        if cell_velocity is None:
            return
        cv = xp.asarray(cell_velocity, dtype=xp.float32)
        self.obstacle_speed = obstacle_speed(cells_ijk, cv)
        solid = g.solid.astype(xp.float32)
        for axis, face in ((2, g.solid_u), (1, g.solid_v), (0, g.solid_w)):
            comp = cv[..., 2 - axis] * solid  # x uses the last array axis, z the first
            pad = [(0, 0)] * 3
            pad[axis] = (1, 1)
            vsum = xp.pad(comp, pad)
            nsum = xp.pad(solid, pad)
            lo = [slice(None)] * 3
            hi = [slice(None)] * 3
            lo[axis], hi[axis] = slice(None, -1), slice(1, None)
            total = vsum[tuple(lo)] + vsum[tuple(hi)]
            count = nsum[tuple(lo)] + nsum[tuple(hi)]
            face[...] = xp.where(count > 0, total / xp.maximum(count, 1), 0)

    def _cell_of_particles(self, pos=None):
        """Flat index (int64) of each particle's cell, clamped into the box (*pos*: these
        positions instead of the particles')."""
        xp = self.xp
        nx, ny, nz = self.spec.shape
        pos = self.pos if pos is None else pos
        ijk = xp.floor((pos - xp.asarray(self.spec.origin, dtype=xp.float32)) / np.float32(self.spec.voxel_size))
        ijk = xp.clip(ijk.astype(xp.int64), 0, xp.asarray([nx - 1, ny - 1, nz - 1]))
        return (ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0]

    def emit(self, cells_ijk, velocity) -> int:
        """Inflow: fill every listed cell that holds no particle with a fresh cell's worth
        of particles moving at *velocity*. Returns the number of particles added."""
        xp = self.xp
        cells = backend.to_numpy(cells_ijk).astype(np.int64, copy=False)  # seeding lists cells on the host
        if len(cells) == 0:
            return 0
        nx, ny, nz = self.spec.shape
        occupied = xp.zeros(nx * ny * nz, dtype=bool)  # a scatter, not a histogram of C bins (surface.py)
        occupied[self._cell_of_particles()] = True
        linear = (cells[:, 2] * ny + cells[:, 1]) * nx + cells[:, 0]
        at = xp.asarray(linear)  # only the listed cells come back to the host, not the grids
        free = cells[backend.to_numpy(~occupied[at] & (self.grid.solid.ravel()[at] == 0))]
        if len(free) == 0:
            return 0
        self.emitted = getattr(self, "emitted", 0) + 1  # a new seed per emission: no repeated jitter
        pos, vel = seed_particles(free, self.spec, per_cell=self.settings.particles_per_cell,
                                  seed=self.settings.seed + 7919 * self.emitted, xp=xp, velocity=velocity)
        self.pos = xp.concatenate([self.pos, pos])
        self.vel = xp.concatenate([self.vel, vel])
        if self.c is not None:
            self.c = xp.concatenate([self.c, xp.zeros((len(pos), 3, 3), dtype=xp.float32)])
        return int(len(pos))

    def drain(self, cells_ijk) -> int:
        """Outflow: delete the particles inside the listed cells. Returns how many."""
        xp = self.xp
        if len(cells_ijk) == 0 or len(self.pos) == 0:
            return 0
        cells = xp.asarray(cells_ijk).astype(xp.int64)
        nx, ny, nz = self.spec.shape
        mask = xp.zeros(nx * ny * nz, dtype=bool)
        mask[(cells[:, 2] * ny + cells[:, 1]) * nx + cells[:, 0]] = True
        keep = ~mask[self._cell_of_particles()]
        removed = int(len(self.pos) - int(keep.sum()))
        if removed:
            self.pos, self.vel = self.pos[keep], self.vel[keep]
            if self.c is not None:
                self.c = self.c[keep]
        return removed

    # ------------------------------------------------------------------ the method
    def substep(self, dt: float, progress=None) -> dict:
        g, s = self.grid, self.settings
        split, handled = air_band.split_substep(self, dt, progress)  # opt-in prototype: cut where the
        if handled:  # liquid would meet a wall within the substep (air_band.py)
            return split
        report(progress, 0.0, "particles to grid")
        transfer.particles_to_grid(g, self.pos, self.vel, self.c)  # particles → grid (§7)
        transfer.classify(g, self.pos)  # FLUID / AIR / SOLID
        transfer.extrapolate(g)
        report(progress, 0.2, "pressure")
        old = (g.u.copy(), g.v.copy(), g.w.copy())  # save old velocity for FLIP
        gx, gy, gz = (np.float32(a * dt) for a in s.gravity)  # gravity
        g.u += gx
        g.v += gy
        g.w += gz
        transfer.enforce_boundaries(g)  # solid faces take the obstacles' velocity
        alpha = density.stiffness(s)  # crowded cells a source of volume (density.py)
        source = None if not alpha else density.Crowding(density.dense_counts(g, self.pos), s.particles_per_cell,
                                                         alpha, dt)
        p, stats = pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,  # PCG (§8, Alg. 2)
                                           max_iterations=s.pressure_max_iterations,
                                           progress=scaled(progress, 0.2, 0.8), source=source)
        pressure.project(g, p, dt)  # divergence-free in the fluid
        report(progress, 0.8, "grid to particles")
        transfer.extrapolate(g, valid=transfer.fluid_faces(g))  # into the air band around the liquid
        ratio = 0.0 if s.apic else s.flip_ratio  # APIC carries the affine part itself
        before = None
        if air_band.enabled():  # opt-in prototype: FLIP/PIC or APIC, then sub-cycled RK2 through a
            fluid = air_band.g2p_and_advect(self, old, ratio, dt)  # divergence-free air band (air_band.py)
        else:
            if s.time_centred_advection:  # u_n: the last substep's faces (RK2 in time too)
                fluid = transfer.fluid_faces(g)
                before = transfer.start_velocity(g.faces(), fluid, getattr(self, "_kept", None))
            transfer.grid_to_particles_and_advect(g, *old, self.pos, self.vel, ratio, dt, self.c,  # FLIP/PIC or
                                                  before=before)  # APIC; RK2
        if s.time_centred_advection:
            self._kept = (tuple(f.copy() for f in g.faces()), fluid)
        beta = density_positions.stiffness()
        if beta:  # opt-in prototype: crowded particles moved apart, their velocities kept (density_positions.py)
            density_positions.correct_positions(self, beta)
        self.t += dt
        return stats

    def _substep_speed(self) -> float:
        """The fastest particle's speed (the one host sync a substep's size needs)."""
        return float(transfer.max_speed(self.vel))

    def step(self, frame_dt: float, progress=None) -> dict:
        """Advance one frame with adaptive CFL substeps (Mantaflow's policy): before each
        substep, Δt = cfl·h / (u_max + √(2gh)) from the fastest particle or obstacle, at most
        ``max_time_step`` seconds (0: no such cap), never below frame_dt / ``max_substeps``;
        near the frame's end the rest is taken in one substep when it is within 5% of Δt,
        else in two equal ones (no sliver substep).
        Raises SimulationError on NaN and ``Cancelled`` when *progress* answers False.

        Returns the frame's stats: ``substeps`` taken and why (``limit``: "frame", one
        substep covered it; "liquid" or "obstacle", the CFL of the fastest particle or of a
        moving obstacle; "time step", ``max_time_step`` asked for more substeps than the
        CFL; "cap", ``max_substeps`` limited the CFL, each particle then
        travelling more than ``cfl`` cells a substep), ``cfl_substeps`` the count the CFL
        asks for (capped: at the frame's fastest speed), ``capped`` (``capped_frames`` counts such
        frames; ``substep_log`` keeps each frame's count and limit for the bake's summary)."""
        s, h = self.settings, self.spec.voxel_size
        gravity_reach = math.sqrt(2 * 9.81 * h)  # a particle at rest may start to fall
        obstacle = float(getattr(self, "obstacle_speed", 0.0))
        shortest = frame_dt / max(1, int(s.max_substeps))
        longest = float(s.max_time_step)
        done, n, iterations, residual = 0.0, 0, 0, 0.0
        fastest, by_obstacle, capped, timed = 0.0, False, False, False
        while frame_dt - done > 1e-9 * frame_dt:
            liquid = self._substep_speed()
            if not math.isfinite(liquid):
                raise SimulationError(f"NaN velocity appeared before frame step {self.frames + 1}")
            speed = max(liquid, obstacle)
            if speed >= fastest:
                fastest, by_obstacle = speed, obstacle > liquid
            cfl_dt = s.cfl * h / (speed + gravity_reach)  # CFL: at most cfl cells a substep
            by_time_step = 0.0 < longest < cfl_dt
            dt = longest if by_time_step else cfl_dt  # Max Time Step: slow waves keep their period
            if dt < shortest * (1 - 1e-9):
                dt, capped = shortest, capped or cfl_dt < shortest * (1 - 1e-9)
            left = frame_dt - done
            timed = timed or (by_time_step and left > dt * 1.05)  # the frame goes on: the time step's doing
            if left <= dt * 1.05 or n + 1 >= s.max_substeps:
                capped = capped or left > cfl_dt * 1.05
                dt = left  # the frame's last substep
            elif left < 2 * dt:
                dt = left / 2  # two equal ones, not a sliver
            stats = self.substep(dt, scaled(progress, done / frame_dt, (done + dt) / frame_dt) if progress else None)
            done += dt
            n += 1
            iterations += int(stats["iterations"])
            residual = max(residual, float(stats["residual"]))
        wanted = max(n, math.ceil((fastest + gravity_reach) * frame_dt / (s.cfl * h))) if capped else n
        limit = ("cap" if capped else "frame" if n == 1 else "time step" if timed else "obstacle" if by_obstacle
                 else "liquid")
        limited = self._limit_count()  # particle count control (particle_count.py), once a frame
        self.frames += 1
        self.capped_frames = getattr(self, "capped_frames", 0) + capped
        self.substep_log = getattr(self, "substep_log", []) + [(n, limit)]
        self.last = {"substeps": n, "iterations": iterations, "residual": residual, "limit": limit,
                     "particles": int(self.pos.shape[0]), "cfl_substeps": int(wanted), "capped": capped,
                     "limited": limited}
        return self.last

    def _particle_cells(self, lo: int, hi: int):
        """int64 cell of the particles *lo* … *hi* − 1 (−1 for none), the cells whose particles
        ``_limit_count`` counts: the box's lattice cells, clamped into it."""
        return self._cell_of_particles(self.pos[lo:hi])

    def _cell_count(self) -> int:
        """How many cells ``_particle_cells`` numbers."""
        nx, ny, nz = self.spec.shape
        return nx * ny * nz

    def _keep(self, keep):
        """Keep the particles where *keep* (bool per particle) holds."""
        self.pos, self.vel = self.pos[keep], self.vel[keep]
        if self.c is not None:
            self.c = self.c[keep]

    def _limit_count(self) -> int:
        """Particle count control (``particle_count``): a cell holding more than the limit keeps
        about the limit. Returns how many were deleted (one host read a frame; ``limited``
        counts them all)."""
        most = particle_count.limit_of(self.settings)
        if not most or len(self.pos) == 0:
            return 0
        keep = particle_count.thin(self._particle_cells, len(self.pos), self._cell_count(), most, self.frames, self.xp,
                                   seed=self.settings.seed)
        removed = int(len(self.pos) - int(keep.sum()))
        if removed:
            self._keep(keep)
            self.limited = getattr(self, "limited", 0) + removed
        return removed

    def substep_summary(self) -> str:
        """One line on the substeps of the frames stepped so far (a bake's summary)."""
        log = getattr(self, "substep_log", [])
        if not log:
            return "no frame stepped"
        counts = [n for n, _ in log]
        why = {}
        for _, limit in log:
            why[limit] = why.get(limit, 0) + 1
        names = {"frame": "one substep sufficed", "liquid": "the liquid's speed (CFL)",
                 "obstacle": "an obstacle's speed (CFL)", "time step": "Max Time Step",
                 "cap": "Max Substeps limited the CFL"}
        reasons = ", ".join(f"{why[k]} by {names[k]}" for k in names if k in why)
        return (f"substeps per frame {min(counts)}–{max(counts)} (mean {sum(counts) / len(counts):.1f}) "
                f"over {len(log)} frames: {reasons}")

    # ------------------------------------------------------------------ outputs
    def particles_host(self) -> dict:
        return {"position": backend.to_numpy(self.pos).astype(np.float32),
                "velocity": backend.to_numpy(self.vel).astype(np.float32)}

    @property
    def surface_spec(self) -> GridSpec:
        """The grid of ``level_set()``: the simulation grid grown beyond every wall."""
        from .surface import surface_grid

        return surface_grid(self.spec)

    def level_set(self, progress=None, on_device=False):
        """The liquid's level set (NumPy, negative inside) over ``surface_spec``: the
        Zhu–Bridson particle level set (r = the particle spacing, R = 4r) closed against the
        walls (``surface.closed_level_set``), so that any contouring of it gives a closed
        surface that meets the walls where the liquid touches them. On a GPU it comes back
        through pinned memory (``backend.to_host``); *on_device*: the CuPy array itself, no
        copy (for a caller that works on the device)."""
        from .surface import closed_level_set, surface_radii

        r, R = surface_radii(self.spec.voxel_size, self.settings.particles_per_cell)
        phi = closed_level_set(self.pos, self.spec, radius=r, kernel_radius=R, xp=self.xp, progress=progress)
        return phi_out(phi, on_device)

    def cell_velocity(self, padding: int = 0):
        """Grid velocity at cell centres (nz, ny, nx, 3), averaged from the faces (NumPy);
        *padding* cells beyond every wall repeat the cell inside it (``surface_spec``'s
        layout with padding = ``surface.WALL_CELLS``)."""
        xp = self.xp
        u, v, w = self._restored_velocity() or self.grid.faces()
        cu = 0.5 * (u[:, :, :-1] + u[:, :, 1:])
        cv = 0.5 * (v[:, :-1, :] + v[:, 1:, :])
        cw = 0.5 * (w[:-1, :, :] + w[1:, :, :])
        cells = np.ascontiguousarray(backend.to_numpy(xp.stack([cu, cv, cw], axis=-1)), dtype=np.float32)
        if padding:
            cells = np.pad(cells, ((padding, padding),) * 3 + ((0, 0),), mode="edge")
        return cells

    def fluid_cell_count(self) -> int:
        return int((self.grid.cell == FLUID).sum())

    def kinetic_energy(self) -> float:
        return 0.5 * float((self.vel.astype(self.xp.float64) ** 2).sum())

    def centre_of_mass(self):
        return backend.to_numpy(self.pos.astype(self.xp.float64).mean(axis=0))

    def check_finite(self) -> None:
        xp = self.xp
        bad = int((~xp.isfinite(self.pos)).any(axis=1).sum() + (~xp.isfinite(self.vel)).any(axis=1).sum())
        if bad:
            raise SimulationError(f"{bad} particles became NaN/inf at frame {self.frames}")

    def checkpoint(self) -> dict:
        """The state after the last step as NumPy copies: what the next step reads
        (particles, time, inflow seeds) and what this frame's outputs read besides the
        particles, the grid velocity (``cell_velocity``: the VDB's velocity), so a bake
        can write the frame's files again from its checkpoint alone. A ``HostState``: on a
        GPU one page-locked block of this simulation's ring (``kernels.checkpoint.gather``),
        handed back by ``release()`` once written."""
        if getattr(self, "_host_ring", None) is None:
            self._host_ring = HostRing()
        return gather(self._state_arrays(), self._host_ring)

    def _state_arrays(self) -> dict:
        """``checkpoint``'s arrays where they are (NumPy or CuPy; copied by ``gather``)."""
        state = {"pos": self.pos, "vel": self.vel, "t": np.float64(self.t), "frames": np.int64(self.frames),
                 "emitted": np.int64(getattr(self, "emitted", 0))}
        if self.c is not None:
            state["c"] = self.c
        state.update(self._velocity_state())
        state.update(self._kept_state())
        return state

    # ------------------------------------------------------------------ the time-centred advection's kept faces
    KEPT_KEYS = ("kept_u", "kept_v", "kept_w", "kept_fluid_u", "kept_fluid_v", "kept_fluid_w")

    def _kept_state(self) -> dict:
        """The last substep's faces and fluid-face masks the time-centred advection keeps
        for the next substep's u_n (15 bytes a face), so a resumed bake goes on as it
        would have; none when nothing is kept (the setting off)."""
        kept = getattr(self, "_kept", None)
        return {} if kept is None else dict(zip(self.KEPT_KEYS, (*kept[0], *kept[1])))

    def _restore_kept(self, state: dict):
        """*state*'s kept faces and masks (checked, on the device), or None: the setting
        off, or a checkpoint without them (older ones: the next substep advects as today's)."""
        if not self.settings.time_centred_advection or not any(k in state for k in self.KEPT_KEYS):
            return None
        faces = self.grid.faces()
        shapes = [tuple(f.shape) for f in faces] * 2
        check_state(state, {k: (shape, "f" if i < 3 else "u")
                            for i, (k, shape) in enumerate(zip(self.KEPT_KEYS, shapes))})
        xp = self.xp
        return (tuple(xp.array(state[k], dtype=xp.float32) for k in self.KEPT_KEYS[:3]),
                tuple(xp.array(state[k], dtype=xp.uint8) for k in self.KEPT_KEYS[3:]))

    # ------------------------------------------------------------------ the frame's grid velocity in checkpoints
    VELOCITY_KEYS = ("grid_u", "grid_v", "grid_w")

    def _velocity_state(self) -> dict:
        """The grid velocity the frame's outputs read: the MAC faces (12 bytes a cell)."""
        return dict(zip(self.VELOCITY_KEYS, self._restored_velocity() or self.grid.faces()))

    def _restore_velocity(self, state: dict):
        """The faces of *state* (checked, on the device), or None when it has none."""
        if not all(k in state for k in self.VELOCITY_KEYS):
            return None
        faces = self.grid.faces()
        check_state(state, {k: (tuple(f.shape), "f") for k, f in zip(self.VELOCITY_KEYS, faces)})
        return tuple(self.xp.array(state[k], dtype=self.xp.float32) for k in self.VELOCITY_KEYS)

    def _restored_velocity(self):
        """The restored checkpoint's grid velocity while no substep has run since (the
        simulation's own grid is rebuilt by the next substep and never reads it)."""
        restored = getattr(self, "_restored", None)
        return restored[1] if restored is not None and restored[0] == self.t else None

    def restore(self, state: dict) -> None:
        """Continue from ``checkpoint()``'s arrays. A state read back from a file is
        untrusted: wrong keys, shapes or types raise ``ValueError`` before anything changes."""
        xp = self.xp
        n = np.shape(state["pos"])[0] if np.ndim(state["pos"]) == 2 else -1
        want = {"pos": ((n, 3), "f"), "vel": ((n, 3), "f"), "t": ((), "f"), "frames": ((), "i")}
        if self.c is not None:
            want["c"] = ((n, 3, 3), "f")
        check_state(state, want)
        velocity = self._restore_velocity(state)
        kept = self._restore_kept(state)
        self.pos = xp.array(state["pos"], dtype=xp.float32)
        self.vel = xp.array(state["vel"], dtype=xp.float32)
        if self.c is not None:
            self.c = xp.array(state["c"], dtype=xp.float32)
        self.t = float(state["t"])
        self._kept = kept  # the time-centred advection's u_n (None: it starts again from this frame)
        self.frames = int(state["frames"])
        self.emitted = int(state.get("emitted", 0))  # inflow seeds continue where they were
        # the outputs are the checkpointed frame's only with its grid velocity (older
        # checkpoints lack it: the bake resumes from them but cannot rewrite their frame)
        self.restored_outputs = velocity is not None
        self._restored = (self.t, velocity) if velocity is not None else None
