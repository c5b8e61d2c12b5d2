"""Disk use of a bake, estimated before it starts, and the free space on the cache's drive.

A bake that fills the disk at frame 180 of 240 has cost hours; the cache's durability
keeps every whole frame, but the user still has to free space and press Bake again. So
the bake operators (and the CLI, which runs them) refuse up front when the estimate does
not fit, naming the frame count that would; the panels show the same numbers.

The estimate is per frame from the bake's size (particles, cells, flakes, ground cells)
times bytes per item measured on real frames (bench/cache_formats.py, README "Caches and
disk"), rounded up, plus the checkpoints the cache keeps (every K-th frame and the newest,
``cache.BakeCache``) and one frame of temporaries. A liquid's inflows add particles every
frame (``kernels.flip.bodies.emission_per_frame``: what the emitter refills), up to a
domain full of liquid: its frames and checkpoints grow frame by frame.

``free_bytes`` asks the operating system (``shutil.disk_usage`` of the nearest existing
folder); the environment variable ``VOXFX_FREE_BYTES`` replaces the answer (a test hook,
as ``VOXFX_FAULT_AT`` is for write failures: tests inject a small disk, never fill one).

No ``bpy`` here.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .cache_folder import CacheError

FREE_ENV = "VOXFX_FREE_BYTES"
MARGIN = 1.15  # estimates are rounded up by this much: better to refuse a bake that just fits
RESERVE = 256 * 2 ** 20  # bytes always left free on the drive (the OS, the .blend's own saves)

# Bytes per item per frame, measured (bench/cache_formats.py), a little rounded up.
LIQUID_PARTICLE = {"COMPACT": 8.0, "PLY_VDB": 28.0}
PARTICLE_FILE = 1024  # header, column table, the compressor's own framing
# The liquid's VDB: a file's fixed part, the velocity inside the liquid (per liquid cell)
# and the level set's band and the velocity extrapolated around it (per cell^(2/3), the
# surface); fitted above two dam breaks (20³ and 32³ grids) and rounded up.
LIQUID_VDB = {"COMPACT": (24e3, 16.0, 400.0), "PLY_VDB": (34e3, 23.0, 580.0)}
LIQUID_STATE_PARTICLE = 24.0  # checkpoint: float32 position and velocity
# checkpoint: the grid velocity the frame's VDB is written from (issue 21 §1): dense, a float32
# per MAC face; sparse, the bricks that hold any, per liquid cell (measured 27–42 on dam breaks
# of 32–96 cells, bench/checkpoint_size.py)
LIQUID_STATE_FACE = 4.0
LIQUID_STATE_SPARSE_CELL = 48.0
# checkpoint, with the time-centred advection: its kept faces and fluid masks (a float32 and a
# byte per face, dense); sparse, the bricks the liquid touched, per liquid cell (measured 35–113
# on dam breaks of 32 and 48 cells over 12 frames at 24 fps, growing as the liquid spreads)
LIQUID_KEPT_FACE = 5.0
LIQUID_KEPT_SPARSE_CELL = 120.0
SNOW_FLAKE = {"COMPACT": 12.0, "PLY_VDB": 32.0}
SNOW_GROUND_CELL = {"COMPACT": 17.0, "PLY_VDB": 18.0}  # the depth VDB and the EXR
SNOW_STATE_FLAKE = 32.0
SNOW_STATE_GROUND_CELL = 4.0
SNOW_STATE_WIND_CELL = 24.0  # airborne snow, u, v, w, p (measured 20.6)


@dataclass
class DiskPlan:
    """What a bake of *frames* frames will write: *per_frame* bytes each and
    *per_checkpoint* bytes for each of the checkpoints it keeps; where frames grow
    (inflows), *frame_sizes* and *checkpoint_sizes* give them frame by frame (then
    *per_frame* is the first frame's)."""

    frames: int
    per_frame: float
    per_checkpoint: float
    checkpoint_every: int
    cache_format: str = "COMPACT"
    frame_sizes: Optional[Sequence[float]] = None
    checkpoint_sizes: Optional[Sequence[float]] = None

    def checkpoints(self, frames: int) -> int:
        """States kept for *frames* frames: every K-th (K = 0: none), the newest, one being written."""
        every = frames // self.checkpoint_every if self.checkpoint_every > 0 else 0
        return min(frames, every + 2)

    def bytes_for(self, frames: int) -> int:
        if frames <= 0:
            return 0
        if self.frame_sizes is None:
            total = (frames + 1) * self.per_frame + self.checkpoints(frames) * self.per_checkpoint
        else:  # the frames so far, the largest once more (temporaries), checkpoints as large as the last
            sizes = self.frame_sizes[:frames]
            total = sum(sizes) + max(sizes) + self.checkpoints(frames) * self.checkpoint_sizes[frames - 1]
        return int(math.ceil(total * MARGIN))

    @property
    def last_frame(self) -> float:
        """Bytes of the bake's largest (last) frame."""
        return max(self.frame_sizes) if self.frame_sizes is not None else self.per_frame

    @property
    def total(self) -> int:
        return self.bytes_for(self.frames)

    def frames_that_fit(self, free: int) -> int:
        """The most frames whose estimate fits in *free* bytes (above the reserve)."""
        lo, hi = 0, self.frames
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.bytes_for(mid) + RESERVE <= free:
                lo = mid
            else:
                hi = mid - 1
        return lo


def liquid_plan(frames: int, particles: int, cache_format: str, checkpoint_every: int,
                particles_per_cell: float = 8.0, inflow: tuple = (0.0, 0.0), after: int = 0,
                most: Optional[float] = None, grid_faces: Optional[int] = None,
                time_centred: bool = False) -> DiskPlan:
    """A liquid bake: *particles* (its start), about particles / *particles_per_cell* liquid
    cells. *inflow*: (particles the inflows add each frame, particles of their first
    fill) — the first frame shows the liquid as it starts, the second adds the fill, each
    later one the rate (FlipBake.inflow_emission); *after*: frames of the bake already
    done before these *frames* (a resumed bake has grown); *most*: particles of a
    domain full of liquid, where growth stops; *grid_faces*: the dense solver's MAC faces
    (its grid velocity is in every checkpoint), None for the sparse solver (its bricks
    follow the liquid); *time_centred*: its kept faces are in every checkpoint too."""
    rate, fill = inflow
    fixed, per_cell, per_surface = LIQUID_VDB[cache_format]

    def state_bytes(count):
        face, cell = ((LIQUID_STATE_FACE + LIQUID_KEPT_FACE, LIQUID_STATE_SPARSE_CELL + LIQUID_KEPT_SPARSE_CELL)
                      if time_centred else (LIQUID_STATE_FACE, LIQUID_STATE_SPARSE_CELL))
        grid = grid_faces * face if grid_faces is not None else count / max(particles_per_cell, 1e-6) * cell
        return count * LIQUID_STATE_PARTICLE + grid

    def frame_bytes(count):
        cells = count / max(particles_per_cell, 1e-6)
        return PARTICLE_FILE + count * LIQUID_PARTICLE[cache_format] + fixed + cells * per_cell + \
            cells ** (2 / 3) * per_surface

    if frames <= 0 or not (rate or fill):
        return DiskPlan(frames, frame_bytes(particles), state_bytes(particles), checkpoint_every, cache_format)
    k = np.arange(after, after + frames, dtype=np.float64)  # frames since the first
    count = particles + np.minimum(k, 1.0) * fill + np.maximum(k - 1.0, 0.0) * rate
    if most is not None:
        count = np.minimum(count, max(float(most), float(particles)))
    sizes, states = frame_bytes(count), state_bytes(count)
    return DiskPlan(frames, float(sizes[0]), float(states[0]), checkpoint_every, cache_format,
                    sizes.tolist(), states.tolist())


def snow_plan(frames: int, flakes: int, ground_cells: int, wind_cells: int, cache_format: str,
              checkpoint_every: int) -> DiskPlan:
    per_frame = PARTICLE_FILE + flakes * SNOW_FLAKE[cache_format] + ground_cells * SNOW_GROUND_CELL[cache_format]
    state = flakes * SNOW_STATE_FLAKE + ground_cells * SNOW_STATE_GROUND_CELL + wind_cells * SNOW_STATE_WIND_CELL
    return DiskPlan(frames, per_frame, state, checkpoint_every, cache_format)


def free_bytes(folder) -> int:
    """Free bytes on the drive that holds (or will hold) *folder*."""
    override = os.environ.get(FREE_ENV)
    if override:
        return int(override)
    path = Path(folder)
    while not path.exists() and path.parent != path:
        path = path.parent
    return int(shutil.disk_usage(path).free)


def format_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} bytes"


def summary(plan: DiskPlan, free: int) -> str:
    """One line for a panel or the CLI: the estimate and the free space."""
    growing = (f", growing to {format_bytes(plan.last_frame)} with the inflows"
               if plan.last_frame > 1.05 * plan.per_frame else "")
    return (f"Disk: about {format_bytes(plan.total)} for {plan.frames} frames "
            f"({format_bytes(plan.per_frame)} a frame{growing}); {format_bytes(free)} free")


def check(plan: DiskPlan, folder) -> int:
    """Refuse (``CacheError``) when the bake will not fit on the cache's drive, naming the
    frame count that would; the free bytes when it fits."""
    free = free_bytes(folder)
    if plan.total + RESERVE <= free:
        return free
    fit = plan.frames_that_fit(free)
    advice = f"{fit} frames would fit: shorten the frame range, " if fit else "not even one frame fits: "
    other = " or the Compact cache format" if plan.cache_format != "COMPACT" else ""
    more = " and more" if plan.last_frame > 1.05 * plan.per_frame else ""
    raise CacheError(f"This bake needs about {format_bytes(plan.total)} ({plan.frames} frames of "
                     f"{format_bytes(plan.per_frame)}{more}) but the drive of '{folder}' has "
                     f"{format_bytes(free)} free; "
                     f"{advice}free space or choose another Cache Folder{other}")
