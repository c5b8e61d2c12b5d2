"""What the CFL number does to the liquid's accuracy tests (issue 24, the substep policy):
each accuracy scene of the test suite run at CFL 2 (the default), 3 and 4, everything else
at its defaults (Max Substeps 8, Max Time Step 1/30 s), on the CPU reference (NumPy) or the
GPU (``--gpu``):

* Martin–Moyce surge front (``tests/flip_accuracy.dam_break_front``, 8 cells across the
  column, 60 fps as the test, and 24 fps; ``front16``: 16 cells, the slow test): the
  front's deviation from the experiment over T ∈ [0.4, 2.5] (the test allows ±12%);
* sloshing period (``tests/flip_accuracy.sloshing``, 60 fps as the test, and 24 fps;
  ``slosh2cm``: h = 2 cm, the slow test, allowed −3%…+5%): the period against linear
  theory (the test allows −3%…+10%) and the decay rate β (< 2 /s);
* still water (``test_flip_sim.test_still_water_stays_still``: 12³ tank half full, 100
  frames at 60 fps): the fastest particle (the test allows < 0.05 m/s);
* dam break volume (``test_flip_sim.test_dam_break_keeps_its_volume``: 30 × 10 × 15 cells,
  100 frames at 60 fps): the meshed volume against the water's (the test allows ±5%).

Each row also gives the substeps the scene took (mean a frame) and the wall time.

    python3 bench/flip_cfl.py [--cfl 2 3 4] [--scenes front slosh still volume] [--sparse] [--gpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests import flip_accuracy as scenes  # noqa: E402
from tests.meshes import box  # noqa: E402
from voxfx.kernels import backend  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.surface import liquid_volume  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402

SUBSTEPS = []  # substeps of every frame stepped since the last reset


def with_cfl(cfl):
    """Make the scenes' settings (and every FlipSimulation's step) use CFL *cfl* and log
    the substeps of each frame."""

    def settings(gravity, **overrides):
        return FlipSettings(gravity=(0.0, 0.0, -gravity), cfl=float(cfl), **overrides)

    scenes.settings = settings
    step = FlipSimulation.step

    def logged(self, frame_dt, progress=None):
        stats = step(self, frame_dt, progress)
        SUBSTEPS.append(stats["substeps"])
        return stats

    if not hasattr(FlipSimulation, "_unlogged_step"):
        FlipSimulation._unlogged_step = step
        FlipSimulation.step = logged


def front(xp, sparse, fps, cells_per_a=8):
    T, Z = scenes.dam_break_front(xp=xp, sparse=sparse, fps=fps, cells_per_a=cells_per_a)
    reference = np.interp(T, scenes.MARTIN_MOYCE[:, 0], scenes.MARTIN_MOYCE[:, 1])
    window = (T >= 0.4) & (T <= 2.5)
    d = Z[window] / reference[window] - 1
    ok = np.abs(d).max() <= 0.12 and (Z <= 1 + 2 * T + 1e-9).all()
    return f"front {d.min():+.1%} … {d.max():+.1%}", ok


def slosh(xp, sparse, fps, h=0.04):
    expected = scenes.linear_sloshing_period(0.8, 0.32)
    period, beta = scenes.sloshing(xp=xp, sparse=sparse, fps=fps, h=h)
    ok = 0.97 * expected <= period <= (1.10 if h >= 0.04 else 1.05) * expected and beta < 2.0
    return f"period {period / expected - 1:+.1%}, β {beta:.2f} /s", ok


def tank(shape, fill, h, xp, sparse, cfl):
    spec = GridSpec((0.0, 0.0, 0.0), h, shape)
    x0, y0, z0, x1, y1, z1 = (c * h for c in fill)
    return FlipSimulation(spec, FlipSettings(cfl=float(cfl)), *box((x0, y0, z0), (x1, y1, z1)), xp=xp, sparse=sparse)


def still(xp, sparse, cfl):
    sim = tank((12, 12, 12), (0, 0, 0, 12, 12, 6), 0.1, xp, sparse, cfl)
    for _ in range(100):
        sim.step(1 / 60)
    speed = float(np.linalg.norm(sim.particles_host()["velocity"], axis=1).max())
    return f"fastest {speed:.4f} m/s", speed < 0.05


def volume(xp, sparse, cfl):
    sim = tank((30, 10, 15), (0, 0, 0, 10, 10, 10), 0.04, xp, sparse, cfl)
    water = len(sim.pos) * 0.04 ** 3 / 8
    v0 = liquid_volume(backend.to_numpy(sim.level_set()), sim.surface_spec)
    for _ in range(100):
        sim.step(1 / 60)
    v1 = liquid_volume(backend.to_numpy(sim.level_set()), sim.surface_spec)
    ok = abs(v0 / water - 1) < 0.05 and abs(v1 / water - 1) < 0.05 and sim.centre_of_mass()[0] > 0.3
    return f"volume {v0 / water - 1:+.1%} → {v1 / water - 1:+.1%}", ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cfl", type=float, nargs="+", default=[2.0, 3.0, 4.0])
    ap.add_argument("--scenes", nargs="+", default=["front", "front24", "slosh", "slosh24", "still", "volume"],
                    choices=["front", "front24", "front16", "slosh", "slosh24", "slosh2cm", "still", "volume"])
    ap.add_argument("--sparse", action="store_true", help="the sparse solver (closed box) instead of dense")
    ap.add_argument("--gpu", action="store_true", help="CuPy instead of NumPy")
    args = ap.parse_args()
    if args.gpu:
        import cupy as xp
    else:
        xp = np
    print(f"{'sparse' if args.sparse else 'dense'} solver on {'the GPU' if args.gpu else 'the CPU (NumPy)'}")
    print("scene | CFL | result | within the test's bounds | substeps a frame (mean, max) | s")
    print("--- | --- | --- | --- | --- | ---")
    for scene in args.scenes:
        for cfl in args.cfl:
            with_cfl(cfl)
            SUBSTEPS.clear()
            start = time.perf_counter()
            if scene.startswith("front"):
                text, ok = front(xp, args.sparse, 24.0 if scene.endswith("24") else 60.0,
                                 16 if scene.endswith("16") else 8)
            elif scene.startswith("slosh"):
                text, ok = slosh(xp, args.sparse, 24.0 if scene.endswith("24") else 60.0,
                                 0.02 if scene.endswith("2cm") else 0.04)
            elif scene == "still":
                text, ok = still(xp, args.sparse, cfl)
            else:
                text, ok = volume(xp, args.sparse, cfl)
            mean = float(np.mean(SUBSTEPS)) if SUBSTEPS else 0.0
            print(f"{scene} | {cfl:g} | {text} | {'yes' if ok else 'NO'} | {mean:.2f}, "
                  f"{max(SUBSTEPS, default=0)} | {time.perf_counter() - start:.0f}", flush=True)


if __name__ == "__main__":
    main()
