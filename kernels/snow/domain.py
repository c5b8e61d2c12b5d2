"""Shared state layout of the snow simulation (seed 002 §2.4, §3.3) — the contract
between flakes, wind and ground. All lengths in metres, times in seconds, z up.

Wind: a MAC grid (staggered) over the domain box, cell size ``h``:
  ``u`` (nz, ny, nx+1) x-velocity on x-faces, ``v`` (nz, ny+1, nx), ``w`` (nz+1, ny, nx);
  ``solid`` (nz, ny, nx) uint8, 1 = obstacle cell (objects ∪ terrain ∪ snow);
  cell (i, j, k) centre = origin + (i + ½, j + ½, k + ½)·h; the u-face (i, j, k) sits at
  x = origin_x + i·h (likewise v, w). The thesis stores velocity at cell centres with
  central differences (Eq. 2.33–2.34); a staggered grid is used instead because the
  collocated stencil has a checkerboard null space and cannot bring the discrete
  divergence near zero after projection (issue 4's test).

Ground: a vertex lattice over the domain's xy extent, spacing ``cell``:
  vertex (i, j) at (origin_x + i·cell, origin_y + j·cell); arrays (gy, gx) float32:
  ``terrain`` — top surface of the receivers (world z), ``NO_GROUND`` where none;
  ``snow``    — snow depth in metres (≥ 0).
  A flake at (x, y) collides when z < terrain + snow at the nearest vertex (§3.3.1).

Flakes: structure of arrays, float32, N flakes:
  ``pos`` (N, 3), ``vel`` (N, 3), ``phase`` (N,) angle ωt of the spiral (Eq. 2.24),
  ``spawn`` (N,) uint32 how many times each flake has respawned (feeds the RNG).
  Per-flake constants (R, ω, V_max,z) are not stored: they are a counter-based hash of
  (seed, flake id, spawn), identical on CPU and GPU (``rng.py``).

Deposit: landed flakes add integer units to ``deposit`` (gy, gx) uint32, 16 units per
flake split 1-2-1 × 1-2-1 over the 3×3 nearest vertices (centre heaviest, §3.3.2);
weights of vertices outside the lattice fold onto the nearest inside vertex, so every
flake deposits exactly 16 units. Each step the snowfall of that step
(rate · area · dt, as snow volume) is shared over the units landed:
  snow += deposit · volume_per_unit / cell², volume_per_unit = rate·area·dt / units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..grid import GridSpec
from ..settings import setting

NO_GROUND = np.float32(-3.0e38)  # no receiver in this column: flakes fall through
UNITS_PER_FLAKE = 16
DEPOSIT_WEIGHTS = np.outer([1, 2, 1], [1, 2, 1]).astype(np.uint32)  # sums to 16

# Table 2.2 (seed 002): terminal fall speed V_max,z [m/s] by snow type.
PRESETS = {"wet": (0.5, 1.5), "dry": (1.0, 2.0)}
SPIRAL_RADIUS = (0.0, 2.0)  # R in (0, 2) — in the thesis's units; scaled by spiral_scale
SPIN_RANGE = (np.pi / 4, np.pi / 3)  # |ω| in [π/4, π/3], either sign
GRAVITY = 9.81


@dataclass
class SnowSettings:
    """One definition of the snow settings (``kernels/settings.py``): the fields made with
    ``setting`` are the Snow panel's properties, same names, defaults and units (SI;
    angles in radians; the snowfall rate in cm/h as artists quote it)."""

    snowfall_rate: float = setting(5.0, "Snowfall (cm/h)", "Fresh snow depth per hour over open ground, in cm/h",
                                   min=0.0, soft_max=50.0)
    time_scale: float = setting(
        1.0, "Time Scale", "Seconds of snowfall laid down per second of animation: 360 turns 5 cm/h into 5 cm in "
        "10 s. Flakes still fall at their real speed", min=1e-3, soft_max=10000.0, max=1e7)
    initial_depth: float = setting(0.05, "Starting Depth", "Snow already lying on the receivers at the first "
                                   "frame (m)", min=0.0, soft_max=1.0, unit="LENGTH", subtype="DISTANCE")
    snow_density: float = setting(100.0, "Snow Density", "Density of fresh snow in kg/m³ (for the "
                                  "water-equivalent report: water = depth · density / 1000)", min=10.0, max=917.0)
    flake_count: int = setting(50_000, "Flakes", "Number of flakes in the air (for looks: the snowfall rate sets "
                               "the amount of snow)", min=1, soft_max=10_000_000)
    preset: str = setting("dry", "Snow Type", "Flake type (Table 2.2)",
                          items=[("dry", "Dry", "Terminal fall speed 1–2 m/s"),
                                 ("wet", "Wet", "Terminal fall speed 0.5–1.5 m/s")])
    wind_speed: float = setting(2.0, "Wind Speed", "Wind speed at the inflow in m/s", min=0.0, soft_max=30.0,
                                unit="VELOCITY")
    wind_direction: float = setting(0.0, "Wind Direction", "Direction the wind blows towards (0° = +X, "
                                    "counter-clockwise; radians)", subtype="ANGLE", unit="ROTATION")
    gust_strength: float = setting(0.3, "Gusts", "Gust strength as a fraction of the wind speed", min=0.0, max=2.0,
                                   subtype="FACTOR")
    repose_angle: float = setting(math.radians(38.0), "Angle of Repose", "Steepest slope snow keeps; steeper "
                                  "snow slides down (threshold t of §3.3.2; radians)", min=0.02, max=1.55,
                                  subtype="ANGLE", unit="ROTATION")
    drift: bool = setting(True, "Wind Drift", "Strong near-ground wind erodes fallen snow and deposits it in lee "
                          "areas")
    drift_threshold: float = setting(5.0, "Drift Threshold", "Near-ground wind speed (half a wind cell up) above "
                                     "which snow erodes (m/s)", min=0.0, unit="VELOCITY")
    seed: int = setting(0, "Seed", "Random seed (same seed, same snowfall)", min=0)
    pressure_solver: str = setting(
        "converge", "Pressure", "How the wind's pressure is solved",
        items=[("converge", "Converged", "Iterate until the residual is below tolerance"),
               ("thesis", "5 SOR sweeps", "The thesis's fixed five sweeps (fast, approximate)")])
    # Kernel-only: constants of the model, not on the panel.
    spiral_scale: float = 0.05  # metres per unit of the thesis's R (its scenes are not in metres)
    gust_period: float = 4.0  # seconds
    redistribute_min_depth: float = 0.002  # m: threshold m of §3.3.2
    redistribute_fraction: float = 0.25  # k of §3.3.2, per step
    drift_roughness: float = 1.0e-3  # m: aerodynamic roughness z0 of a snow surface (log law, drift.py)
    drift_settling_speed: float = 0.5  # m/s: fall speed of blowing-snow grains (drift.py)
    pressure_tolerance: float = 1e-4
    obstacle_update_every: int = 10  # steps between re-deriving obstacles from terrain + snow

    def check(self) -> None:
        bad = [name for name in ("snowfall_rate", "snow_density", "wind_speed", "gust_strength",
                                 "gust_period", "repose_angle", "wind_direction", "spiral_scale",
                                 "drift_threshold", "drift_roughness", "drift_settling_speed",
                                 "pressure_tolerance")
               if not np.isfinite(getattr(self, name))]
        if bad:
            raise InputError(f"Snow settings must be finite numbers: {', '.join(bad)}")
        if self.snowfall_rate <= 0:
            raise InputError(f"Snowfall rate must be positive, not {self.snowfall_rate} cm/h")
        if self.snow_density <= 0:
            raise InputError(f"Snow density must be positive, not {self.snow_density} kg/m³")
        if self.flake_count < 1:
            raise InputError(f"Flake count must be at least 1, not {self.flake_count}")
        if self.preset not in PRESETS:
            raise InputError(f"Flake preset must be one of {', '.join(PRESETS)}, not {self.preset!r}")
        if not 0 < self.repose_angle < math.pi / 2:
            raise InputError(f"Angle of repose must be between 0° and 90°, not {math.degrees(self.repose_angle):g}°")
        if self.wind_speed < 0 or self.gust_strength < 0 or self.gust_period <= 0:
            raise InputError("Wind speed and gust strength must be ≥ 0 and the gust period > 0")
        if not 0 <= self.redistribute_fraction <= 1 or self.redistribute_min_depth < 0:
            raise InputError("Redistribution fraction must be in [0, 1] and its minimum depth ≥ 0")
        if self.drift_threshold < 0 or self.drift_roughness <= 0 or self.drift_settling_speed <= 0:
            raise InputError("Drift threshold speed must be ≥ 0, roughness and settling speed > 0")
        if not (np.isfinite(self.time_scale) and self.time_scale > 0):
            raise InputError(f"Time scale must be a positive number, not {self.time_scale}")
        if not (np.isfinite(self.initial_depth) and self.initial_depth >= 0):
            raise InputError(f"Starting depth must be 0 m or more, not {self.initial_depth} m")
        if self.pressure_solver not in ("converge", "thesis"):
            raise InputError(f"Pressure solver must be 'converge' or 'thesis', not {self.pressure_solver!r}")

    @property
    def snowfall_rate_m_per_s(self) -> float:
        """Metres of snow per second."""
        return self.snowfall_rate / 100.0 / 3600.0


@dataclass
class SnowDomain:
    """Geometry of one simulation: the wind grid and the ground lattice."""

    wind: GridSpec  # cells of the wind grid (cubic cells of size h)
    ground_origin: tuple  # (x, y) of vertex (0, 0)
    ground_cell: float  # vertex spacing
    ground_shape: tuple  # (gx, gy) vertices
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_box(cls, lo, hi, wind_cells_xy: int, ground_vertices_xy: int,
                 lowest_receiver: float | None = None) -> "SnowDomain":
        """Domain over the box lo..hi: wind with ``wind_cells_xy`` cells along the longer
        horizontal side (cubic cells), ground with ``ground_vertices_xy`` vertices.

        With *lowest_receiver* (the z of the lowest receiver surface) the wind grid reaches
        at least one cell below it: a ground plane on the grid's bottom face would fill
        the whole first cell layer with solid, and the wind that drifts snow blows in that
        layer (issue 22 §5). The ground lattice does not change."""
        lo, hi = np.array(lo, np.float64), np.asarray(hi, np.float64)
        ext = hi - lo
        if not np.all(np.isfinite(ext)) or np.any(ext <= 0):
            raise InputError(f"The snow domain must have a positive size, not {tuple(ext)}")
        if wind_cells_xy < 4 or ground_vertices_xy < 4:
            raise InputError("Wind and ground resolutions must be at least 4")
        h = float(max(ext[0], ext[1])) / wind_cells_xy
        if lowest_receiver is not None:
            lo[2] = min(lo[2], float(lowest_receiver) - h)  # h depends on x and y only
        shape = tuple(max(4, int(np.ceil(e / h))) for e in hi - lo)
        wind = GridSpec(tuple(lo), h, shape)
        cell = float(max(ext[0], ext[1])) / (ground_vertices_xy - 1)
        gshape = tuple(int(np.floor(e / cell)) + 1 for e in ext[:2])
        return cls(wind, (float(lo[0]), float(lo[1])), cell, gshape)

    @property
    def area(self) -> float:
        """Horizontal area covered by the ground lattice (m²)."""
        gx, gy = self.ground_shape
        return (gx - 1) * self.ground_cell * (gy - 1) * self.ground_cell

    @property
    def top(self) -> float:
        return self.wind.upper[2]

    # GPU peak bytes per unit: a least-squares fit of the measured peaks of four bakes on
    # an H100 (construct, three steps with drift, frame outputs; 100k–10M flakes, wind
    # 32²×12–256²×90, ground 129²–2049²: bench/memory_gpu.py) gave 39 B per wind cell
    # (u, v, w and back buffers, pressure, airborne snow, solid masks), 35 B per ground
    # vertex and 61 B per flake (state and the RNG temporaries of respawn); rounded up.
    BYTES_PER_CELL = 48
    BYTES_PER_VERTEX = 40
    BYTES_PER_FLAKE = 64
    # A flake's state alive between steps, when a Compact frame is encoded on the device
    # (``SnowBake(particles_on_device=True)``): position, velocity, phase and spawn time
    # (32 B, ``Flakes``) and the frame's size and spin (float32) with the parameters they
    # come from (16 B); the grids as in a step (their temporaries included: an upper bound).
    GPU_STATE_BYTES_PER_FLAKE = 48
    # CPU (NumPy) peaks, measured with tracemalloc stage by stage (bench/memory_sim.py):
    # a step holds each flake's state and its NumPy temporaries (~208 B per flake) next to
    # the grids; building the terrain rasterizes (triangle, lattice vertex) pairs in
    # batches of ``ground.CHUNK_ITEMS`` at ~200 B per pair, plus ~100 B per triangle.
    CPU_BYTES_PER_FLAKE = 240
    CPU_BYTES_PER_CELL = 110
    CPU_BYTES_PER_VERTEX = 100
    CPU_BYTES_PER_TERRAIN_ITEM = 200
    CPU_BYTES_PER_TRIANGLE = 100

    def nbytes(self, flakes: int, xp=None, terrain_items: int = 0, triangles: int = 0, parts: bool = False):
        """Peak memory of a simulation of this size (checked before allocating), on the
        device of *xp* (default: the current backend's). On the CPU, building the terrain
        is a peak of its own: *terrain_items* (``ground.terrain_items``) (triangle,
        lattice vertex) pairs of *triangles* receiver triangles, batched. *parts* (GPU):
        ``{"state", "total"}``, the state alive between steps beside the peak, for a
        device encoder of the frames (``addon.compact_points.with_device_encoder``)."""
        from .. import backend

        xp = xp or backend.xp()
        nx, ny, nz = self.wind.shape
        gx, gy = self.ground_shape
        cells, verts, flakes = nx * ny * nz, gx * gy, int(flakes)
        if xp is not np:
            grids = self.BYTES_PER_CELL * cells + self.BYTES_PER_VERTEX * verts
            total = int(grids + self.BYTES_PER_FLAKE * flakes)
            if parts:
                return {"state": int(grids + self.GPU_STATE_BYTES_PER_FLAKE * flakes), "total": total}
            return total
        from .ground import CHUNK_ITEMS

        state = 36 * cells + 16 * verts + 32 * flakes
        step = self.CPU_BYTES_PER_FLAKE * flakes + self.CPU_BYTES_PER_CELL * cells + self.CPU_BYTES_PER_VERTEX * verts
        build = state + self.CPU_BYTES_PER_TERRAIN_ITEM * min(int(terrain_items), CHUNK_ITEMS) \
            + self.CPU_BYTES_PER_TRIANGLE * int(triangles)
        return int(max(step, build))
