"""How much device memory only Python's cyclic collector would free (issue 21 §6).

Runs a sparse dam break frame by frame (``step(1/24)`` and, with ``--level-set``, the
particle level set) with the cyclic collector off, and after each frame prints the pool's
bytes in use before and after ``gc.collect()``: the difference is device memory held by
objects in reference cycles, which a bake frees only whenever Python happens to collect.
It should be 0: the solvers' CUDA-graph loops hold their owners weakly (``GraphLoop``).

    python bench/memory_cycles.py [--row 8m|65m] [--frames N] [--level-set]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
sys.path.insert(0, str(ROOT / "bench"))
from flip_sparse import ROWS, scene  # noqa: E402

from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--row", choices=("8m", "65m"), default="8m")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--level-set", action="store_true")
    args = ap.parse_args()
    import cupy as cp

    pool = cp.get_default_memory_pool()
    n, particles = ROWS[args.row]
    spec, v, t = scene(n, particles, "dam")
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; {args.row} dam break, "
          f"{len(sim.pos):,} particles; cyclic collector off")
    print("frame | s | in use GiB | after gc.collect() GiB | held by cycles MiB | objects collected")
    print("--- | --- | --- | --- | --- | ---")
    gc.collect()
    gc.disable()
    worst = 0
    for frame in range(args.frames):
        start = time.perf_counter()
        sim.step(1 / 24)
        if args.level_set:
            phi = sim.level_set(on_device=True)
            del phi
        cp.cuda.Device().synchronize()
        seconds = time.perf_counter() - start
        before = pool.used_bytes()
        found = gc.collect()
        after = pool.used_bytes()
        worst = max(worst, before - after)
        print(f"{frame} | {seconds:.2f} | {before / 2 ** 30:.3f} | {after / 2 ** 30:.3f} | "
              f"{(before - after) / 2 ** 20:.1f} | {found}", flush=True)
    print(f"== most device memory held by reference cycles after a frame: {worst / 2 ** 20:.1f} MiB")


if __name__ == "__main__":
    main()
