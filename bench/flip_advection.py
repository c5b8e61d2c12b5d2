"""Why the Martin–Moyce front leads more at CFL 3–5, and what a larger CFL would need
(issue 24, the substep policy; CPU reference, dense NumPy solver).

Today each substep moves the particles by RK2 (midpoint in space) through the *projected*
velocity u_{n+1}, the end of the substep's velocity, for the whole Δt. Where the liquid
accelerates (a), that is x + Δt·(v + aΔt) instead of x + Δt·(v + aΔt/2): aΔt²/2 too far
each substep, an error of first order in Δt that makes the surge front lead more the
larger the substep. This bench swaps the advection (``transfer.grid_to_particles_and_advect``
of ``FlipSimulation.substep``; the G2P velocity update stays as it is) for:

* ``end``      today's: RK2 (midpoint) through u_{n+1};
* ``split2``   2 RK2 sub-steps of Δt/2 through the same u_{n+1} (the spatial error: each
               moves at most half the cells);
* ``rk3``      Ralston's RK3 through u_{n+1} (k1 at x, k2 at x + ½Δt·k1, k3 at x + ¾Δt·k2,
               x' = x + Δt(2k1 + 3k2 + 4k3)/9);
* ``centred``  RK2 in time and space through the velocity linear in time over the substep:
               x_m = x + ½Δt·u_n(x), x' = x + Δt·½(u_n + u_{n+1})(x_m), with u_n the
               particles' velocity on the grid before gravity and pressure (P2G, the
               FLIP update's "old" faces);
* ``prev``     the same with u_n the previous substep's projected, extrapolated faces (the
               first substep: P2G's);
* ``prevfluid`` ``prev`` where the face touches FLUID in both substeps, u_{n+1} elsewhere
               (the air band and the faces the liquid entered or left);
* ``setting``  the solver's own ``FlipSettings.time_centred_advection``: ``prevfluid``, but
               the first substep (nothing kept yet) advects as ``end``.

Scenes (``bench/flip_cfl.py``'s, the accuracy tests' bounds): ``front`` (Martin–Moyce,
8 cells, 60 fps), ``front24``, ``front16`` (16 cells), ``slosh`` (h = 4 cm, 60 fps),
``slosh24``, ``still``, ``volume``, ``front16_24`` (16 cells, 24 fps: with
``--max-time-step 0.0333 --max-substeps 2`` capped as the 8M dam break's frames are), and
``dambreak``: the substeps a 24 fps frame takes on ``bench/flip.py``'s dam break (its
block, *--res*³ here, 8 particles a cell) over its first six frames, and the counts the
fastest particle of each frame asks for at 256³
(the 8M scene: u_max·Δt_frame·256/cfl and the gravity term, before Max Substeps' cap of 8).

    python3 bench/flip_advection.py [--advection end centred prev] [--cfl 2 3 4 5]
                                    [--scenes front front16 slosh still volume dambreak]
                                    [--max-time-step S --max-substeps N]

The sloshing period is not monotonic in the substep (today's advection, 60 fps,
``--scenes slosh --max-time-step``): one or two substeps a frame +7.1%, three (1/180 s)
+20.6%, four (1/240 s) +22.9% (time-centred, prev: +3.5% at two, +11.3% at three): the
4 cm scene (A = 3 cm, under a cell) is a coarse check of the period, not a convergence test.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import flip_cfl  # noqa: E402  (loads the package)
from tests import flip_accuracy as scenes  # noqa: E402
from voxfx.kernels.flip import transfer  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid.sample import sample_faces  # noqa: E402

_F = np.float32
FUSED = transfer.grid_to_particles_and_advect
STATE = {"advection": "end", "prev": None}


def _points(grid, x):
    ox, oy, oz, _, inv_h = transfer._frame(grid)
    return [(x[a] - o) * inv_h for a, o in enumerate((ox, oy, oz))]


def _move(grid, pos, x0, x1):
    for a, p in enumerate(transfer.push_out(grid, x1, x0)):
        pos[:, a] = p


def rk3(grid, pos, dt):
    faces = grid.faces()
    x0 = [pos[:, a].copy() for a in range(3)]
    k1 = sample_faces(faces, *_points(grid, x0))
    k2 = sample_faces(faces, *_points(grid, [x0[a] + _F(0.5 * dt) * k1[a] for a in range(3)]))
    k3 = sample_faces(faces, *_points(grid, [x0[a] + _F(0.75 * dt) * k2[a] for a in range(3)]))
    _move(grid, pos, x0, [x0[a] + _F(dt / 9) * (2 * k1[a] + 3 * k2[a] + 4 * k3[a]) for a in range(3)])


def centred(grid, before, pos, dt):
    """x_m = x + ½Δt·u_n(x), x' = x + Δt·½(u_n + u_{n+1})(x_m); *before*: u_n's faces."""
    x0 = [pos[:, a].copy() for a in range(3)]
    k1 = sample_faces(before, *_points(grid, x0))
    xm = _points(grid, [x0[a] + _F(0.5 * dt) * k1[a] for a in range(3)])
    new, old = sample_faces(grid.faces(), *xm), sample_faces(before, *xm)
    _move(grid, pos, x0, [x0[a] + _F(dt) * (_F(0.5) * (new[a] + old[a])) for a in range(3)])


def advect(grid, old_u, old_v, old_w, pos, vel, flip_ratio, dt, c=None, before=None):
    """``transfer.grid_to_particles_and_advect`` with STATE's advection."""
    how = STATE["advection"]
    if how in ("end", "setting"):  # ("setting": the simulation passes *before* itself)
        return FUSED(grid, old_u, old_v, old_w, pos, vel, flip_ratio, dt, c, before=before)
    transfer.grid_to_particles(grid, old_u, old_v, old_w, pos, vel, flip_ratio, c)
    if how == "split2":
        for _ in range(2):
            transfer.advect(grid, pos, dt / 2)
    elif how == "rk3":
        rk3(grid, pos, dt)
    elif how == "centred":
        centred(grid, (old_u, old_v, old_w), pos, dt)
    else:
        prev = STATE["prev"]
        before = prev[0] if prev is not None else (old_u, old_v, old_w)
        fluid = transfer.fluid_faces(grid)
        if how == "prevfluid" and prev is not None:  # u_n only on faces fluid then and now
            before = tuple(np.where((a != 0) & (b != 0), f, g) for a, b, f, g in zip(prev[1], fluid, before,
                                                                                    grid.faces()))
        centred(grid, before, pos, dt)
        STATE["prev"] = (tuple(f.copy() for f in grid.faces()), fluid)
    return pos, vel


def dambreak(cfl, res, frames=6, fps=24.0):
    """Substeps of the first *frames* 24 fps frames of bench/flip.py's dam break at *res*³,
    and the counts the frame's fastest particle asks for at 256³ (before the cap)."""
    import flip

    spec, v, t = flip.dam_break(res, 8 * 2 * (0.31 * res) ** 3)
    sim = FlipSimulation(spec, flip_cfl.FlipSettings(cfl=float(cfl)), v, t, xp=np)
    counts, wanted, fastest = [], [], [0.0]
    h256 = 1.0 / 256
    speed = sim._substep_speed

    def watch():
        s = speed()
        fastest[0] = max(fastest[0], s)
        return s

    sim._substep_speed = watch
    for _ in range(frames):
        fastest[0] = 0.0
        counts.append(sim.step(1.0 / fps)["substeps"])
        wanted.append(math.ceil((fastest[0] + math.sqrt(2 * 9.81 * h256)) / fps / (cfl * h256)))
    text = (f"{res}³: {', '.join(map(str, counts))}; 256³ asks for {', '.join(map(str, wanted))} "
            f"(capped at 8: {', '.join(str(min(8, w)) for w in wanted)})")
    return text, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--advection", nargs="+", default=["end", "centred", "prev"],
                    choices=["end", "split2", "rk3", "centred", "prev", "prevfluid", "setting"])
    ap.add_argument("--cfl", type=float, nargs="+", default=[2.0, 3.0, 4.0, 5.0])
    ap.add_argument("--scenes", nargs="+", default=["front", "front16", "slosh", "still", "volume"],
                    choices=["front", "front24", "front16", "front16_24", "slosh", "slosh24", "still", "volume",
                             "dambreak"])
    ap.add_argument("--res", type=int, default=48, help="the dam break's grid (cells a side)")
    ap.add_argument("--max-time-step", type=float, help="Max Time Step (s) instead of the default's")
    ap.add_argument("--max-substeps", type=int, default=16, help="Max Substeps with --max-time-step")
    args = ap.parse_args()
    transfer.grid_to_particles_and_advect = advect  # FlipSimulation.substep calls it through the module
    print("dense solver on the CPU (NumPy)")
    print("advection | scene | CFL | result | within the test's bounds | substeps a frame (mean, max) | s")
    print("--- | --- | --- | --- | --- | --- | ---")
    for scene in args.scenes:
        for how in args.advection if scene != "dambreak" else ["end"]:
            for cfl in args.cfl:
                STATE.update(advection=how, prev=None)
                flip_cfl.with_cfl(cfl)
                more = {"time_centred_advection": how == "setting"}
                if args.max_time_step is not None:
                    more.update(max_time_step=args.max_time_step, max_substeps=args.max_substeps)
                flip_cfl.FlipSettings = functools.partial(FlipSettings, **more)
                scenes.settings = functools.partial(scenes.settings, **more)
                flip_cfl.SUBSTEPS.clear()
                start = time.perf_counter()
                if scene == "dambreak":
                    text, counts = dambreak(cfl, args.res)
                    ok = "—"
                else:
                    if scene.startswith("front"):
                        text, ok = flip_cfl.front(np, False, 24.0 if scene.endswith("24") else 60.0,
                                                  16 if "16" in scene else 8)
                    elif scene.startswith("slosh"):
                        text, ok = flip_cfl.slosh(np, False, 24.0 if scene.endswith("24") else 60.0)
                    else:
                        text, ok = getattr(flip_cfl, scene)(np, False, cfl)
                    ok = "yes" if ok else "NO"
                log = flip_cfl.SUBSTEPS
                print(f"{how} | {scene} | {cfl:g} | {text} | {ok} | {np.mean(log):.2f}, {max(log)} | "
                      f"{time.perf_counter() - start:.0f}", flush=True)


if __name__ == "__main__":
    main()
