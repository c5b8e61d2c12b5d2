"""What a liquid checkpoint costs now that it holds the frame's grid velocity (issue 21 §1:
with Write While Simulating on, a kill loses at most the frame being simulated, because a
frame whose files were cut short is rewritten from its checkpoint).

The benches' dam break (``sim_scenes.liquid_scene``: a res³ unit box, NumPy path, or CuPy
with ``--gpu``) after a few frames, on the dense and the sparse solver. Per checkpoint:
the particles' bytes (position, velocity), the grid velocity's bytes (dense: a float32
per MAC face; sparse: the bricks that hold any, 8 + 6 KiB each), and the time of
``BakeCache.write_state`` (the durable write and the manifest record the bake's thread now
does before the next frame steps: temp file, fsync, rename, folder fsync).

    python bench/checkpoint_size.py                   # resolutions 48 and 64, 4 frames
    python bench/checkpoint_size.py --res 96 --frames 6
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from tools.package import load  # noqa: E402

load()

from sim_scenes import liquid_scene  # noqa: E402

GRID_KEYS = ("grid_bricks", "grid_u", "grid_v", "grid_w")


def measure(res: int, frames: int, sparse: bool, xp, repeats: int = 3) -> dict:
    from voxfx.addon.cache import BakeCache
    from voxfx.kernels.flip.sim import FlipSimulation

    spec, settings, (v, t) = liquid_scene(res)
    sim = FlipSimulation(spec, settings, v, t, xp=xp, sparse=sparse)
    for _ in range(frames):
        sim.step(1 / 24)
    t0 = time.perf_counter()
    state = sim.checkpoint()
    copy_s = time.perf_counter() - t0
    grid = sum(state[k].nbytes for k in GRID_KEYS if k in state)
    total = sum(np.asarray(a).nbytes for a in state.values())
    writes = []
    with tempfile.TemporaryDirectory() as folder:
        cache = BakeCache(folder, "liquid", kind="flip", checkpoint_every=0)
        cache.begin({"bench": res}, 1, 1 + repeats)
        for k in range(repeats):
            t0 = time.perf_counter()
            cache.write_state(1 + k, state)
            writes.append(time.perf_counter() - t0)
    liquid_cells = len(sim.pos) / settings.particles_per_cell
    return {"res": res, "solver": "sparse" if sparse else "dense", "particles": len(sim.pos),
            "state_MB": total / 1e6, "grid_MB": grid / 1e6, "grid_share": grid / max(1, total - grid),
            "grid_B_per_liquid_cell": grid / max(1.0, liquid_cells), "grid_B_per_box_cell": grid / spec.voxel_count,
            "checkpoint_copy_ms": 1e3 * copy_s, "write_state_ms": 1e3 * statistics.median(writes)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--res", type=int, nargs="+", default=[48, 64])
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--gpu", action="store_true", help="simulate with CuPy (the checkpoint comes to the host)")
    args = parser.parse_args(argv)
    xp = np
    if args.gpu:
        import cupy as xp
    print("| res | solver | particles | state MB | grid velocity MB | grid / particles | grid B per liquid cell "
          "| grid B per box cell | checkpoint() ms | write_state ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in args.res:
        for sparse in (False, True):
            r = measure(res, args.frames, sparse, xp)
            print(f"| {r['res']} | {r['solver']} | {r['particles']:,} | {r['state_MB']:.2f} | {r['grid_MB']:.2f} | "
                  f"{100 * r['grid_share']:.0f} % | {r['grid_B_per_liquid_cell']:.1f} | "
                  f"{r['grid_B_per_box_cell']:.2f} | {r['checkpoint_copy_ms']:.1f} | {r['write_state_ms']:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
