"""Scenes shared by the simulation memory benches (``memory_sim.py`` on the CPU,
``memory_gpu.py`` on the device), so both measure the same work."""

from __future__ import annotations

import numpy as np


def box(lo, hi):
    """A closed box mesh: (8, 3) float32 vertices, (12, 3) int32 outward triangles."""
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])], np.float32)
    t = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                  [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], np.int32)
    return v, t


def snow_scene(flakes: int, wind: int, ground: int):
    """A 40 m rolling terrain with a 5 × 7 × 4 m house, snowing in an 8 m/s wind with
    drift: (domain, settings, receiver (v, t), obstacle (v, t))."""
    from voxfx.kernels.snow.domain import SnowDomain, SnowSettings

    size, n = 40.0, 129
    x = np.linspace(0, size, n, dtype=np.float32)
    X, Y = np.meshgrid(x, x)
    Z = (1.5 * np.sin(X / 7.0) * np.cos(Y / 5.0)).astype(np.float32)
    v = np.stack([X, Y, Z], -1).reshape(-1, 3)
    idx = np.arange(n * n).reshape(n, n)[:-1, :-1].ravel()
    t = np.concatenate([np.stack([idx, idx + 1, idx + n + 1], 1),
                        np.stack([idx, idx + n + 1, idx + n], 1)]).astype(np.int32)
    domain = SnowDomain.from_box((0, 0, -2), (size, size, 12), wind, ground, lowest_receiver=-1.5)
    settings = SnowSettings(flake_count=int(flakes), wind_speed=8.0, drift=True)
    return domain, settings, (v, t), box((15, 15, 0), (20, 22, 4))


def liquid_scene(res: int, depth: float = 0.45):
    """A res³ unit box with a 0.5 × 0.9 × *depth* m block of water (a dam break):
    (spec, settings, liquid (v, t))."""
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.grid import GridSpec

    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / res, (res, res, res))
    liquid = box((0.05, 0.05, 0.05), (0.55, 0.95, 0.05 + depth))
    return spec, FlipSettings(max_substeps=2, pressure_max_iterations=60), liquid
