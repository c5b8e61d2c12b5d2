"""How far a falling blob runs ahead of g·t²/2 (issue 22 §3), and what a second-order
(time-centred) advection would change, on the CPU reference.

    python3 bench/flip_free_fall.py

Today a substep adds gravity to the grid, projects, and moves particles by RK2 (midpoint
in space) through the *new* grid velocity: for free fall that is semi-implicit Euler in
time, x += (v + g·δt)·δt, so after n substeps of δt the drop is g·δt²·n(n+1)/2, ahead of
g·t²/2 by the factor (n+1)/n. The prototype here (not in the solver) advects through
½(u_old + u_new), the trapezoid rule in time with the same RK2 in space: exact for free
fall. It costs one more trilinear sample of the old faces per RK stage.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests.meshes import box  # noqa: E402
from voxfx.kernels.flip import transfer  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402
from voxfx.kernels.grid.sample import sample_faces  # noqa: E402

FIRST_ORDER = transfer._g2p_advect


def time_centred(grid, old, pos, vel, flip_ratio, dt, c):
    """Prototype: FLIP/PIC velocities as today, then RK2 (midpoint) through ½(u_old + u_new)."""
    if old is None or dt is None:
        return FIRST_ORDER(grid, old, pos, vel, flip_ratio, dt, c)
    x0 = [pos[:, a].copy() for a in range(3)]
    FIRST_ORDER(grid, old, pos, vel, flip_ratio, None, c)  # velocities only
    f = np.float32
    dt32 = f(dt)
    ox, oy, oz, _, inv_h = transfer._frame(grid)

    def mean_velocity(x):
        g = [(x[0] - ox) * inv_h, (x[1] - oy) * inv_h, (x[2] - oz) * inv_h]
        new, prev = sample_faces(grid.faces(), *g), sample_faces(old, *g)
        return [f(0.5) * (prev[a] + new[a]) for a in range(3)]

    v1 = mean_velocity(x0)
    v2 = mean_velocity([x0[a] + (f(0.5) * dt32) * v1[a] for a in range(3)])
    for a, p in enumerate(transfer.push_out(grid, [x0[a] + dt32 * v2[a] for a in range(3)], x0)):
        pos[:, a] = p


def drops(h, fps, frames=4):
    spec = GridSpec((0.0, 0.0, 0.0), h, (16, 16, int(round(4.0 / h))))
    sim = FlipSimulation(spec, FlipSettings(), *box((6 * h, 6 * h, 3.0), (10 * h, 10 * h, 3.0 + 4 * h)), xp=np)
    z0, t, out = sim.centre_of_mass()[2], 0.0, []
    for frame in range(1, frames + 1):
        n = sim.step(1 / fps)["substeps"]
        t += 1 / fps
        out.append(f"frame {frame} ({n} substep{'s' if n > 1 else ''}) "
                   f"{(z0 - sim.centre_of_mass()[2]) / (0.5 * 9.81 * t * t) - 1:+.1%}")
    return "; ".join(out)


def g2p_seconds(n_particles=400_000, repeats=3):
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 64, (64, 64, 64))
    rng = np.random.default_rng(0)
    sim = FlipSimulation(spec, FlipSettings(), *box((0, 0, 0), (1, 1, 0.125)), xp=np)
    g = sim.grid
    for a in g.faces():
        a[...] = rng.normal(size=a.shape).astype(np.float32)
    old = tuple(a * np.float32(0.9) for a in g.faces())
    pos = rng.uniform(0.05, 0.95, (n_particles, 3)).astype(np.float32)
    vel = np.zeros_like(pos)
    best = {}
    for name, fn in (("first order", FIRST_ORDER), ("time-centred", time_centred)):
        times = []
        for _ in range(repeats):
            p, v = pos.copy(), vel.copy()
            tic = time.perf_counter()
            fn(g, old, p, v, 0.97, 1 / 240, None)
            times.append(time.perf_counter() - tic)
        best[name] = min(times)
    return best


def main():
    for name, fn in (("first order (the solver)", FIRST_ORDER), ("time-centred (prototype)", time_centred)):
        transfer._g2p_advect = fn
        for h in (0.1, 0.5 / 24):
            print(f"{name}, 24 fps, cell {h * 100:.1f} cm: {drops(h, 24)}")
    transfer._g2p_advect = FIRST_ORDER
    cost = g2p_seconds()
    print(f"G2P + advection of 400k particles (CPU): first order {cost['first order'] * 1e3:.0f} ms, "
          f"time-centred {cost['time-centred'] * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
