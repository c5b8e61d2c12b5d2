"""The liquid bake on arrays (no ``bpy``): what the Bake Liquid operator runs between
reading the scene and writing the files.

``FlipBake`` takes the arrays the add-on extracted (liquid and obstacle triangles, the
inflow and outflow bodies at the first frame) and the settings, and runs the liquid frame
by frame:

* ``new_simulation(progress)`` — a ``FlipSimulation`` in its initial state;
* ``step(sim, frame, poses, velocities, progress)`` — frame − 1 → frame: the inflows emit
  (their cells voxelized on the backend in use, ``bodies.py``), moving obstacles get their
  cells and velocities, the FLIP step (seed 003 Alg. 1) runs, the outflows drain; returns
  the progress line;
* ``outputs(sim, progress)`` — the frame's arrays (``frame_arrays``);
* ``frames(start, end)`` — all of it as a generator of (frame, simulation), for scripts.

The add-on's ``sim_bake.run`` drives the same methods through its cache (resume,
checkpoints, cancel); it only adds the bodies of moving objects, read from the scene per
frame (``poses``: the bodies at frame − 1 and frame, by name).
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from . import bodies, sparse_bodies
from .sim import FlipSimulation, SimulationError
from .surface import WALL_CELLS


def frame_arrays(sim, spec, progress=None, particles_on_device=False) -> dict:
    """The arrays of one liquid frame: particles (position, velocity, display size), the
    level set closed against the walls over ``surface_spec`` (WALL_CELLS beyond the
    domain) and the cell velocity on the same grid; all NumPy, but with
    *particles_on_device* on a GPU the particles stay the simulation's own CuPy arrays
    (a compact frame is encoded there and only its bytes come back: write them before
    the next step moves the particles)."""
    xp = backend.array_module(sim.pos)
    if particles_on_device and xp is not np:
        parts = {"position": sim.pos, "velocity": sim.vel}
    else:
        parts, xp = sim.particles_host(), np
    phi = sim.level_set(progress)
    vel = sim.cell_velocity(padding=WALL_CELLS)
    size = xp.full(len(parts["position"]), 0.25 * spec.voxel_size, xp.float32)
    return {"position": parts["position"], "velocity": parts["velocity"], "size": size, "surface": phi,
            "cell_velocity": vel, "surface_spec": sim.surface_spec}


class FlipBake:
    """The liquid of one bake: arrays and settings in, frames out (see the module)."""

    first_frame_is_initial = True  # the first frame shows the liquid as it starts

    def __init__(self, spec, settings, liquid, obstacle=None, *, xp, fps: float, initial_velocity=(0.0, 0.0, 0.0),
                 obstacle_names=(), inflows=(), outflows=(), obstacles_move=False, ports_move=False,
                 frame_end=None, kept_in=None, particles_on_device=False):
        """*liquid*, *obstacle*: (vertices, triangles) or None; *inflows*: (name, body at
        the first frame) pairs, *outflows* likewise; *obstacles_move* / *ports_move*: the
        obstacles / the inflows and outflows get their bodies per frame (``step``'s
        poses); *frame_end* and *kept_in* (the cache folder) only word the messages;
        *particles_on_device*: ``outputs`` leaves the particles on the GPU (``frame_arrays``)."""
        self.spec, self.settings, self.xp, self.fps = spec, settings, xp, float(fps)
        self.liquid, self.obstacle = liquid, obstacle
        self.initial_velocity = tuple(initial_velocity)
        self.obstacle_names = list(obstacle_names)
        self.inflow_names = [name for name, _ in inflows]
        self.outflow_names = [name for name, _ in outflows]
        self.obstacles_move, self.ports_move = bool(obstacles_move), bool(ports_move)
        self.frame_end, self.kept_in = frame_end, kept_in
        self.particles_on_device = bool(particles_on_device)
        self.sparse = bool(getattr(settings, "sparse", False))
        self.static_inflow = [(name, self.cells(body)) for name, body in inflows]
        self.static_outflow = self.cells_of_all([body for _, body in outflows])

    def cells(self, body):
        """An inflow's or outflow's cells: with the sparse solver on the whole lattice (in
        an open domain outside the box too, ``sparse_bodies``), else the box's."""
        if self.sparse:
            return sparse_bodies.cells(sparse_bodies.voxel_bricks(body, self.spec, self.xp), self.xp)
        return bodies.cells(body, self.spec, self.xp)

    def cells_of_all(self, bodies_):
        xp = self.xp
        return xp.concatenate([self.cells(b).astype(xp.int64) for b in bodies_] or [xp.zeros((0, 3), xp.int64)])

    def inflow_emission(self, velocities=None) -> tuple[float, int]:
        """About how many particles the inflows add: (per frame in steady flow, at their
        first fill), from their cells at the first frame and *velocities* (m/s, by name)
        — for the disk estimate (``bodies.emission_per_frame``)."""
        velocities, s = velocities or {}, self.settings
        rate, fill = 0.0, 0
        for name, cells in self.static_inflow:
            count, seen = bodies.footprint(backend.to_numpy(cells))
            rate += bodies.emission_per_frame(count, seen, velocities.get(name, (0.0, 0.0, 0.0)), s.gravity,
                                              self.fps, self.spec.voxel_size, s.particles_per_cell)
            fill += count * s.particles_per_cell
        return rate, fill

    @property
    def moving(self) -> list:
        """Names of the bodies ``step`` needs per frame (their poses)."""
        return (self.obstacle_names if self.obstacles_move else []) + \
            (self.inflow_names + self.outflow_names if self.ports_move else [])

    def new_simulation(self, progress=None) -> FlipSimulation:
        ov, ot = self.obstacle if self.obstacle else (None, None)
        return FlipSimulation(self.spec, self.settings, *self.liquid, ov, ot, xp=self.xp,
                              initial_velocity=self.initial_velocity, progress=progress)

    def step(self, sim, frame: int, poses=None, velocities=None, progress=None) -> str:
        """Frame − 1 → *frame*. *poses*: (bodies at frame − 1, bodies at frame) by name, for
        ``moving``; *velocities*: inflow velocity by name (m/s)."""
        spec, xp = self.spec, self.xp
        velocities = velocities or {}
        emitters, drains = self.static_inflow, self.static_outflow
        if self.obstacles_move:
            before, after = poses
            now, nxt = [before[n] for n in self.obstacle_names], [after[n].matrix for n in self.obstacle_names]
            if self.sparse:  # bricks on the lattice: outside the box too (open domain)
                sim.set_obstacle_bodies(now, nxt, self.fps)
            else:
                sim.set_obstacles(*bodies.obstacle_state(now, nxt, spec, self.fps, xp))
        if self.ports_move:
            before = poses[0]
            emitters = [(n, self.cells(before[n])) for n in self.inflow_names]
            drains = self.cells_of_all([before[n] for n in self.outflow_names])
        for name, cells in emitters:
            sim.emit(cells, velocities[name])
        try:
            stats = sim.step(1.0 / self.fps, progress=progress)
            sim.check_finite()
        except SimulationError as e:
            where = f" in '{self.kept_in}'" if self.kept_in else ""
            raise InputError(f"{e}; frames up to {frame - 1} are kept{where}") from e
        sim.drain(drains)
        why = {"frame": "one covers the frame", "liquid": "CFL of the liquid's speed",
               "obstacle": "CFL of an obstacle's speed", "time step": "Max Time Step"}.get(stats.get("limit"), "")
        return (f"frame {frame}/{self.frame_end}: {stats['substeps']} substeps"
                + (f" ({why})" if why else "") + f", {stats['iterations']} CG "
                f"iterations, residual {stats['residual']:.1e}"
                + (f"; the CFL wanted {stats['cfl_substeps']}: Max Substeps limits it" if stats["capped"] else ""))

    @staticmethod
    def summary(sim) -> str:
        """The bake's substeps in one line (``FlipSimulation.substep_summary``)."""
        return sim.substep_summary()

    def outputs(self, sim, progress=None) -> dict:
        return frame_arrays(sim, self.spec, progress, self.particles_on_device)

    def frames(self, start: int, end: int, poses=None, velocities=None, progress=None):
        """(frame, simulation) for frames start..end, the first the initial state;
        *poses(frame)*: ``step``'s poses for that frame."""
        sim = self.new_simulation(progress)
        yield start, sim
        for frame in range(start + 1, end + 1):
            self.step(sim, frame, poses(frame) if poses else None, velocities, progress)
            yield frame, sim
