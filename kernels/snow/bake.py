"""The snow bake on arrays (no ``bpy``): what the Bake Snow operator runs between reading
the scene and writing the files.

``SnowBake`` takes the arrays the add-on extracted (receiver and obstacle triangles), the
planned domain and the settings, and runs the snowfall frame by frame:

* ``new_simulation(progress)`` — a ``SnowSimulation`` in its initial state (the first
  frame is already one frame of snowfall);
* ``step(sim, frame, progress)`` — frame − 1 → frame: ``substeps`` steps of
  δt = 1/fps/substeps (seed 002 §3.3); returns the progress line;
* ``outputs(sim)`` — the frame's arrays: the flakes and the snow depth on the ground lattice;
* ``frames(start, end)`` — all of it as a generator of (frame, simulation), for scripts.

The add-on's ``sim_bake.run`` drives the same methods through its cache (resume,
checkpoints, cancel).
"""

from __future__ import annotations

import numpy as np

from ..progress import scaled
from .sim import SnowSimulation


class SnowBake:
    """The snowfall of one bake: arrays and settings in, frames out (see the module)."""

    first_frame_is_initial = False  # the first frame is one frame of snowfall already

    def __init__(self, domain, settings, receivers, obstacles=None, *, xp, fps: float, substeps: int,
                 frame_end=None, particles_on_device=False):
        """*receivers*, *obstacles*: (vertices, triangles) or None; *frame_end* only words
        the progress line; *particles_on_device*: on a GPU, ``outputs`` leaves the flakes
        there (a compact frame is encoded on the device; write it before the next step)."""
        self.domain, self.settings, self.xp = domain, settings, xp
        self.particles_on_device = bool(particles_on_device) and xp is not np
        self.receivers, self.obstacles = receivers, obstacles
        self.substeps = int(substeps)
        self.dt = 1.0 / fps / substeps
        self.frame_end = frame_end

    def new_simulation(self, progress=None) -> SnowSimulation:
        ov, ot = self.obstacles if self.obstacles else (None, None)
        return SnowSimulation(self.domain, self.settings, *self.receivers, ov, ot, xp=self.xp, progress=progress)

    def step(self, sim, frame: int, progress=None) -> str:
        substeps = self.substeps
        for i in range(substeps):
            sim.step(self.dt, progress=scaled(progress, i / substeps, (i + 1) / substeps))
        return f"frame {frame}/{self.frame_end}: {sim.summary()}"

    def outputs(self, sim, progress=None) -> dict:
        return {"flakes": sim.flakes_arrays(on_device=self.particles_on_device), "depth": sim.snow_host()}

    def frames(self, start: int, end: int, progress=None):
        """(frame, simulation) for frames start..end, each one frame of snowfall."""
        sim = self.new_simulation(progress)
        for frame in range(start, end + 1):
            self.step(sim, frame, progress)
            yield frame, sim
