"""Host memory of the snow and liquid simulations on the CPU path, measured against the
guards' formulas (issue 21 §6): ``SnowDomain.nbytes`` and ``kernels.flip.sim.flip_memory``.

Each case runs in a fresh Python subprocess (NumPy backend, no Blender): build the input
meshes, run a tiny simulation of the same kind first (so imports and first-call caches,
about 60–90 MiB once per Blender session, are outside the measurement), note VmRSS,
reset the RSS high-water mark (``/proc/self/clear_refs`` ← 5), then
construct the simulation, run a few steps and the frame outputs a bake writes (snow:
flakes and depth; liquid: particles, the closed level set, cell velocities) and read VmHWM.
*measured* = VmHWM − VmRSS before.

    python bench/memory_sim.py [--quick] [--json out.json]

Exits non-zero if any estimate/measured ratio of a case whose peak is at least 32 MiB
falls outside [0.67, 1.5].
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOW, HIGH = 0.67, 1.5
MIN_JUDGED = 32 << 20

CHILD = textwrap.dedent("""
    import json, os, sys, gc
    sys.path.insert(0, {root!r})
    os.environ["VOXFX_BACKEND"] = "cpu"
    from tools.package import load
    load()
    import numpy as np
    case = json.loads(sys.argv[1])

    def status():
        out = {{}}
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
        return out

    if case["effect"] == "snow":
        from voxfx.kernels.snow.sim import SnowSimulation
        from bench.sim_scenes import snow_scene
        domain, settings, (v, t), (ov, ot) = snow_scene(case["flakes"], case["wind"], case["ground"])
        from voxfx.kernels.snow.ground import terrain_items
        estimate = domain.nbytes(case["flakes"], xp=np, terrain_items=terrain_items(v, t, domain), triangles=len(t))
        warm = snow_scene(1000, 8, 17)  # imports and first-call caches outside the measurement
        w = SnowSimulation(warm[0], warm[1], *warm[2], *warm[3], xp=np)
        w.step(1 / 48), w.flakes_host(), w.snow_host()
        del w, warm
        gc.collect()
        before = status()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        sim = SnowSimulation(domain, settings, v, t, ov, ot, xp=np)
        for _ in range(case.get("steps", 3)):
            sim.step(1 / 48)
        out = sim.flakes_host(), sim.snow_host()
        shape = list(domain.wind.shape) + list(domain.ground_shape)
    else:
        from voxfx.kernels.flip.sim import FlipSimulation, flip_memory
        from voxfx.kernels.flip.surface import WALL_CELLS
        from bench.sim_scenes import liquid_scene
        res = case["res"]
        spec, settings, (v, t) = liquid_scene(res)
        ws, wset, (wv, wt) = liquid_scene(12)  # imports and first-call caches outside the measurement
        w = FlipSimulation(ws, wset, wv, wt, xp=np)
        w.step(1 / 24), w.particles_host(), w.level_set(), w.cell_velocity(padding=WALL_CELLS)
        del w
        gc.collect()
        before = status()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        sim = FlipSimulation(spec, settings, v, t, xp=np)
        for _ in range(case.get("frames", 2)):
            sim.step(1 / 24)
            out = sim.particles_host(), sim.level_set(), sim.cell_velocity(padding=WALL_CELLS)
            del out
        estimate = flip_memory(spec, int(sim.pos.shape[0]), xp=np)
        shape = [res] * 3 + [int(sim.pos.shape[0])]
    after = status()
    print("RESULT", json.dumps({{"measured": after["VmHWM"] - before["VmRSS"], "estimate": int(estimate),
                                "shape": shape}}))
""")


def run_case(case: dict, timeout: float = 1800) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), json.dumps(case)], capture_output=True,
                       text=True, timeout=timeout, cwd=ROOT)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**case, **json.loads(line[7:])}
    raise RuntimeError(f"case {case} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


def cases(quick: bool):
    for flakes, wind, ground in ((100_000, 32, 129), (400_000, 64, 257)) + (() if quick else ((1_000_000, 96, 513),)):
        yield {"effect": "snow", "flakes": flakes, "wind": wind, "ground": ground}
    for res in (32, 48) if quick else (32, 48, 64, 96):
        yield {"effect": "liquid", "res": res}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows, bad = [], 0
    print("effect | size | estimate MiB | measured MiB | est/meas")
    print("--- | --- | --- | --- | ---")
    for case in cases(args.quick):
        r = run_case(case)
        rows.append(r)
        ratio = r["estimate"] / r["measured"] if r["measured"] > 0 else float("nan")
        ok = LOW <= ratio <= HIGH or r["measured"] < MIN_JUDGED
        bad += not ok
        if r["effect"] == "snow":
            nx, ny, nz, gx, gy = r["shape"]
            size = f"{r['flakes']:,} flakes, wind {nx}×{ny}×{nz}, ground {gx}×{gy}"
        else:
            size = f"{r['res']}³, {r['shape'][3]:,} particles"
        print(f"{r['effect']} | {size} | {r['estimate'] / 2**20:.0f} | {r['measured'] / 2**20:.0f} | "
              f"{ratio:.2f}{'' if ok else ' !'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"{len(rows) - bad}/{len(rows)} within [{LOW}, {HIGH}]")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
