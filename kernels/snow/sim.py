"""The snowfall simulation: one ``step`` reads as the method (seed 002 §3.3).

    wind    stable-fluids step of the wind over terrain, objects and snow  (§2.4.2, §3.3.3)
    flakes  drag + spiral lift + gravity, collide with the height field,
            deposit into the 3×3 nearest vertices, respawn                 (§2.4.1, §3.3.1)
    settle  fold this step's deposit into snow depth (snowfall rate · area · dt)
    slide   redistribution towards the angle of repose                   (§3.3.2)
    drift   saltation lifts snow where the near-surface wind is strong, the wind
            carries it, it settles where the wind slows (drift.py; Pomeroy & Gray 1990)
    every N steps: obstacles re-derived from terrain + snow on the device (§3.3.3 did it on the CPU)

All state stays on the backend's device; a step makes no host sync except those the
pressure solver's residual checks need. ``step`` takes a ``progress(fraction, message)
-> bool`` that hears between stages and between the wind solver's blocks of sweeps;
False raises ``Cancelled`` there, leaving the state half-stepped (a bake drops it: its
cache holds complete frames only).
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..checkpoint import check_state
from ..grid import GridSpec
from ..progress import report, scaled
from ..voxelize import voxelize
from . import drift, ground
from .domain import NO_GROUND, SnowDomain, SnowSettings
from .flakes import Flakes, init_flakes, parameters_of, step_flakes
from .wind import WindField


def object_cells(vertices, triangles, spec: GridSpec, xp, solid: bool, progress=None):
    """Wind cells an object's mesh occupies (uint8 [k, j, i]): its surface, plus its
    inside for closed obstacles (3-axis vote, so small holes do not leak)."""
    if vertices is None or len(triangles) == 0:
        return xp.zeros(spec.array_shape, dtype=xp.uint8)
    mode = "solid+surface" if solid else "surface"
    grid = voxelize(vertices, triangles, spec, mode, vote=solid, xp=xp, keep_on_device=True, progress=progress)
    from ..grid import bitgrid

    return bitgrid.unpack(grid.bits, spec.shape[0]).view(xp.uint8).copy()


class SnowSimulation:
    def __init__(self, domain: SnowDomain, settings: SnowSettings, receiver_vertices, receiver_triangles,
                 obstacle_vertices=None, obstacle_triangles=None, xp=None, progress=None):
        settings.check()
        self.domain, self.settings = domain, settings
        self.xp = xp = xp or backend.xp()
        self.terrain = ground.terrain_from_triangles(receiver_vertices, receiver_triangles, domain, xp=xp,
                                                     progress=scaled(progress, 0.0, 0.6))
        gy, gx = self.terrain.shape
        # Snow already lying at the start (a winter scene), on the receivers only.
        self.snow = xp.where(self.terrain != NO_GROUND, xp.float32(settings.initial_depth),
                             xp.float32(0)).astype(xp.float32)
        self.deposit = xp.zeros((gy, gx), dtype=xp.uint32)
        self.landed = xp.zeros(1, dtype=xp.uint64)
        # Receivers block the wind with the cells they fill, those whose centre lies below
        # terrain + snow (added on every obstacle update); their conservative surface would
        # also fill the air layer a ground plane passes through, where snow drifts (issue 22
        # §5). Closed obstacles block with their volume and surface.
        self.object_solid = xp.zeros(domain.wind.array_shape, dtype=xp.uint8)
        if obstacle_vertices is not None:
            report(progress, 0.6, "obstacles")
            self.object_solid |= object_cells(obstacle_vertices, obstacle_triangles, domain.wind, xp, solid=True,
                                              progress=scaled(progress, 0.6, 0.9))
        self.wind = WindField(domain, settings, xp=xp)
        self.airborne = xp.zeros(domain.wind.array_shape, dtype=xp.float32)  # drifting snow, m³ per wind cell
        self.drift_outflow = xp.zeros((), dtype=xp.float64)  # m³ of drifting snow the wind carried out
        self._columns = tuple(xp.asarray(a) for a in drift.vertex_columns(domain))
        self.flakes = init_flakes(settings.flake_count, domain, settings, xp=xp, terrain=self.terrain, snow=self.snow)
        # Snowfall lands on the receivers only: their true horizontal area (issue 18).
        self.area = ground.receiving_area(self.terrain, domain.ground_cell)
        self._vertex_areas = ground.vertex_areas(self.terrain.shape, domain.ground_cell, xp)
        self.t = 0.0
        self.steps = 0
        self.last_wind = {}
        self.update_obstacles()

    # ------------------------------------------------------------------ the method
    def step(self, dt: float, progress=None) -> None:
        s, d = self.settings, self.domain
        self.last_wind = self.wind.step(dt, self.t, scaled(progress, 0.0, 0.6))  # wind
        report(progress, 0.6, "flakes")
        step_flakes(self.flakes, self.wind.u, self.wind.v, self.wind.w, d, self.terrain, self.snow,
                    self.deposit, self.landed, dt, self.t, s)  # flakes
        volume = s.snowfall_rate_m_per_s * s.time_scale * self.area * dt  # time_scale: accelerated accumulation
        ground.apply_deposit(self.snow, self.deposit, None, volume, d.ground_cell)  # settle (units summed on device)
        ground.redistribute(self.terrain, self.snow, s, d.ground_cell)  # slide
        if s.drift:
            report(progress, 0.8, "drift")
            self.drift_snow(dt)  # drift
        self.t += dt
        self.steps += 1
        if self.steps % max(1, s.obstacle_update_every) == 0:
            self.update_obstacles()

    def update_obstacles(self) -> None:
        """Terrain + snow + objects → the wind's solid cells (§3.3.3), on the device."""
        solid = ground.solid_from_ground(self.terrain, self.snow, self.domain, out=self.object_solid.copy())
        self.wind.set_obstacles(solid)

    def drift_snow(self, dt: float) -> None:
        """Wind drift (drift.py): air cells above the snow, bed ↔ air exchange, transport."""
        k = drift.air_cells(self.terrain, self.snow, self.wind.solid, self._columns, self.domain)
        wind_xy = self._wind_at(k)
        drift.exchange(self.terrain, self.snow, self.airborne, wind_xy, k, self._columns, dt, self.settings,
                       self.domain)
        self.drift_outflow += drift.transport(self.airborne, self.wind.u, self.wind.v, self.wind.w, self.wind.solid,
                                              dt, self.settings, self.domain)

    def surface_wind(self):
        """Near-surface wind (gy, gx, 2): the wind at the centre of the lowest air cell whose
        centre lies at or above terrain + snow, where the drift reads it — never blended
        with the zero faces of the solid cells below the surface."""
        return self._wind_at(drift.air_cells(self.terrain, self.snow, self.wind.solid, self._columns, self.domain))

    def _wind_at(self, k):
        xp = self.xp
        gy, gx = self.terrain.shape
        if not hasattr(self, "_lattice_xy"):
            c = self.domain.ground_cell
            x0, y0 = self.domain.ground_origin
            jj, ii = xp.meshgrid(xp.arange(gy, dtype=xp.float32), xp.arange(gx, dtype=xp.float32), indexing="ij")
            self._lattice_xy = (x0 + ii * c, y0 + jj * c)
        pts = drift.surface_points(k, self.domain, self._lattice_xy)
        return self.wind.sample(pts)[:, :2].reshape(gy, gx, 2).astype(xp.float32)

    # ------------------------------------------------------------------ outputs
    def flakes_host(self) -> dict:
        """Per-flake arrays for the flakes point cloud (NumPy)."""
        return self.flakes_arrays(on_device=False)

    def flakes_arrays(self, on_device: bool = False) -> dict:
        """``flakes_host``; with *on_device* on a GPU, the arrays where the simulation keeps
        them (position and velocity its own: use them before the next step)."""
        f = self.flakes
        vmax, radius, omega = parameters_of(f, self.settings, self.domain)
        xp = self.xp if on_device else np
        to = (lambda a: a) if on_device else backend.to_numpy
        size = (0.002 + 0.002 * (to(vmax) - 0.5)).astype(xp.float32)  # faster flakes are larger
        return {"position": to(f.pos).astype(xp.float32, copy=not on_device),
                "velocity": to(f.vel).astype(xp.float32, copy=not on_device),
                "size": size,
                "spin": to(omega).astype(xp.float32)}

    def snow_host(self):
        return backend.to_numpy(self.snow).astype(np.float32)

    def terrain_host(self):
        return backend.to_numpy(self.terrain)

    def snow_volume(self) -> float:
        """Snow volume (m³): depth × each vertex's area (``ground.vertex_areas``)."""
        return float((self.snow.astype(self.xp.float64) * self._vertex_areas).sum())

    def airborne_volume(self) -> float:
        """Drifting snow in the air (m³); with snow_volume and drift_outflow it makes up the snowfall."""
        return float(self.airborne.sum(dtype=self.xp.float64))

    def summary(self) -> str:
        mean_cm = 100.0 * self.snow_volume() / self.area if self.area > 0 else 0.0  # volume over true area
        it = self.last_wind.get("iterations", "?")
        res = self.last_wind.get("residual", float("nan"))
        water_mm = 10.0 * mean_cm * self.settings.snow_density / 1000.0  # depth × density / water
        return f"mean snow {mean_cm:.2f} cm ({water_mm:.2f} mm water), pressure {it} it, residual {res:.1e}"

    # ------------------------------------------------------------------ resume
    def checkpoint(self) -> dict:
        """Everything a resumed bake needs, as NumPy arrays (copies, never views of the
        live state: on the CPU backend ``to_numpy`` would return the arrays themselves)."""
        f = self.flakes

        def to(a):
            return np.array(backend.to_numpy(a), copy=True)

        return {"pos": to(f.pos), "vel": to(f.vel), "phase": to(f.phase), "spawn": to(f.spawn),
                "snow": to(self.snow), "airborne": to(self.airborne), "drift_outflow": to(self.drift_outflow),
                "u": to(self.wind.u), "v": to(self.wind.v), "w": to(self.wind.w), "p": to(self.wind.p),
                "t": np.float64(self.t), "steps": np.int64(self.steps)}

    def restore(self, state: dict) -> None:
        """Continue from ``checkpoint()``'s arrays. A state read back from a file is
        untrusted: wrong keys, shapes or types raise ``ValueError`` before anything changes."""
        xp = self.xp
        n = np.shape(state["pos"])[0] if np.ndim(state["pos"]) == 2 else -1
        want = {"pos": ((n, 3), "f"), "vel": ((n, 3), "f"), "phase": ((n,), "f"), "spawn": ((n,), "ui"),
                "snow": (tuple(self.snow.shape), "f"), "airborne": (tuple(self.airborne.shape), "f"),
                "drift_outflow": ((), "f"), "t": ((), "f"), "steps": ((), "i")}
        want.update({k: (tuple(getattr(self.wind, k).shape), "f") for k in ("u", "v", "w", "p")})
        check_state(state, want)
        self.flakes = Flakes(xp.array(state["pos"], dtype=xp.float32), xp.array(state["vel"], dtype=xp.float32),
                             xp.array(state["phase"], dtype=xp.float32), xp.array(state["spawn"], dtype=xp.uint32))
        self.snow[...] = xp.asarray(state["snow"])
        self.airborne[...] = xp.asarray(state["airborne"])
        self.drift_outflow[...] = xp.asarray(state["drift_outflow"])
        for name in ("u", "v", "w", "p"):  # p warm-starts the pressure solve
            getattr(self.wind, name)[...] = xp.asarray(state[name])
        self.t = float(state["t"])
        self.steps = int(state["steps"])
        self.update_obstacles()

