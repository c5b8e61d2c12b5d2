"""Snow benchmark (issue 4): time per step split by stage, on the GPU.

    python3 bench/snow.py [--quick]

Scene: a 1 km-scale hilly terrain (a height-field mesh) with a few boxes as houses,
snowing in a 4 m/s gusty crosswind. Per configuration: flakes, wind grid, ground
lattice; stages timed with CUDA events (median over steps after warm-up steps):
wind advect (+ outflow balance + right-hand side), pressure, projection, flakes
(wind sampling, motion, collision, deposit, respawn), settle (deposit → depth),
redistribution, drift (air cells, near-surface wind, bed ↔ air exchange, transport
of the drifting snow in the wind grid). Floors: bytes each stage must move
at 4 TB/s. Thesis reference: 512K flakes + 256×256×32 wind in real time (> 25 FPS,
i.e. < 40 ms per frame) on a GTX 280.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests.meshes import box, merge  # noqa: E402
from voxfx.kernels.snow import ground  # noqa: E402
from voxfx.kernels.snow.domain import SnowDomain, SnowSettings  # noqa: E402
from voxfx.kernels.snow.flakes import step_flakes  # noqa: E402
from voxfx.kernels.snow.sim import SnowSimulation  # noqa: E402

BANDWIDTH = 4.0e12
THESIS_MS = 40.0


def terrain_mesh(size=200.0, n=256, height=12.0, seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, size, n)
    X, Y = np.meshgrid(x, x)
    Z = np.zeros_like(X)
    for _ in range(6):  # a few smooth hills
        cx, cy, r, h = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(20, 60), rng.uniform(2, height)
        Z += h * np.exp(-((X - cx) ** 2 + (Y - cy) ** 2) / (2 * r * r))
    v = np.stack([X, Y, Z], -1).reshape(-1, 3).astype(np.float32)
    idx = np.arange(n * n).reshape(n, n)[:-1, :-1].ravel()
    t = np.concatenate([np.stack([idx, idx + 1, idx + n + 1], 1), np.stack([idx, idx + n + 1, idx + n], 1)])
    meshes = [(v, t.astype(np.int32))]
    for k in range(5):  # houses
        x0, y0 = 40 + 25 * k, 60 + 15 * k
        z0 = float(Z[int(y0 / size * (n - 1)), int(x0 / size * (n - 1))])
        meshes.append(box((x0, y0, z0), (x0 + 10, y0 + 8, z0 + 6)))
    return merge(*meshes)


def timed_step(sim, dt, events):
    """One SnowSimulation step with an event after each stage (same order as sim.step)."""
    import cupy as cp

    w, s, d = sim.wind, sim.settings, sim.domain
    events[0].record()
    inflow = w.inflow_velocity(sim.t + dt)
    w.advect(dt, inflow)
    w.balance_outflow(inflow)
    w.build_rhs(dt)
    events[1].record()
    it, res, ok = w.solve_pressure(dt, inflow)
    events[2].record()
    w.project(dt)
    events[3].record()
    step_flakes(sim.flakes, w.u, w.v, w.w, d, sim.terrain, sim.snow, sim.deposit, sim.landed, dt, sim.t, s)
    events[4].record()
    ground.apply_deposit(sim.snow, sim.deposit, None, s.snowfall_rate_m_per_s * sim.area * dt, d.ground_cell)
    events[5].record()
    ground.redistribute(sim.terrain, sim.snow, s, d.ground_cell)
    events[6].record()
    if s.drift:
        sim.drift_snow(dt)
    events[7].record()
    sim.t += dt
    sim.steps += 1
    if sim.steps % max(1, s.obstacle_update_every) == 0:
        sim.update_obstacles()
    events[8].record()
    events[8].synchronize()
    return [cp.cuda.get_elapsed_time(events[i], events[i + 1]) for i in range(8)], it


STAGES = ["advect", "pressure", "project", "flakes", "settle", "redistribute", "drift", "obstacles"]


def floors_ms(domain, flakes):
    nx, ny, nz = domain.wind.shape
    cells = nx * ny * nz
    gx, gy = domain.ground_shape
    verts = gx * gy
    return {
        "advect": 3 * 4 * 2 * cells / BANDWIDTH * 1e3,  # read + write three components
        "pressure(1 sweep)": (4 * 2 + 2) * cells / BANDWIDTH * 1e3,
        "project": (3 * 4 * 2 + 4) * cells / BANDWIDTH * 1e3,
        "flakes": 32 * 2 * flakes / BANDWIDTH * 1e3,
        "ground": 4 * 6 * verts / BANDWIDTH * 1e3,
    }


def run(flakes, wind_xy, wind_z_extent, ground_xy, solver, steps, warm):
    import cupy as cp

    v, t = terrain_mesh()
    lo = np.array([0.0, 0.0, 0.0])
    hi = np.array([200.0, 200.0, 200.0 * wind_z_extent / wind_xy])
    domain = SnowDomain.from_box(lo, hi, wind_cells_xy=wind_xy, ground_vertices_xy=ground_xy)
    settings = SnowSettings(
        initial_depth=0.0, flake_count=flakes, wind_speed=4.0, gust_strength=0.3, pressure_solver=solver,
                            snowfall_rate=5.0, drift=True)
    sim = SnowSimulation(domain, settings, v, t, xp=cp)
    events = [cp.cuda.Event() for _ in range(9)]
    for _ in range(warm):
        timed_step(sim, 1 / 48, events)
    rows, iters = [], []
    for _ in range(steps):
        ms, it = timed_step(sim, 1 / 48, events)
        rows.append(ms)
        iters.append(it)
    med = np.median(np.array(rows), axis=0)
    return domain, med, statistics.median(iters), sim


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    configs = [  # flakes, wind cells along x (= y), wind cells along z, ground vertices
        (512_000, 256, 32, 512, "thesis"),
        (1_000_000, 128, 32, 1024, "thesis"),
        (1_000_000, 128, 32, 1024, "converge"),
        (10_000_000, 256, 64, 1024, "thesis"),
        (10_000_000, 256, 64, 1024, "converge"),
    ]
    if args.quick:
        configs = configs[:2]
    header = ["flakes", "wind", "ground", "pressure", "sweeps"] + [f"{s} ms" for s in STAGES] + ["step ms", "vs thesis"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for flakes, wxy, wz, gxy, solver in configs:
        domain, med, it, sim = run(flakes, wxy, wz, gxy, solver, steps=20, warm=10)
        total = float(med.sum())
        shape = "×".join(map(str, domain.wind.shape))
        row = [f"{flakes:,}", shape, f"{gxy}²", solver, f"{it}"] + [f"{m:.3f}" for m in med] + \
              [f"{total:.2f}", f"{THESIS_MS / total:.1f}× faster" if wxy == 256 and wz == 32 else ""]
        print(" | ".join(row), flush=True)
        fl = floors_ms(domain, flakes)
        print("   floors (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in fl.items()), flush=True)
        print(f"   snow after {sim.steps} steps: {sim.summary()}", flush=True)
        del sim


if __name__ == "__main__":
    main()
