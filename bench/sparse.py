"""Sparse brick core benchmark (issue 11): topology build from particles (full, seed 003
§5.1) and incremental update (§5.2), and brick lookups, on the GPU (CuPy) and the CPU.

    python3 bench/sparse.py [--quick]

Scene: P particles in a liquid block 0.5 × 0.9 × 0.45 of a unit box at resolution N
(8 per cell, as FLIP seeds them), influence radius 1.5 cells; the update moves every
particle by 0.3 cells (a substep's motion). Prints per case: bricks, time of the full
build, of the update, per million particles, lookups per second, the topology's bytes
against a dense index of the same box, and the floor of the build at 4 TB/s (one read
of the positions and a sort's passes over 8-byte keys).
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
from voxfx.kernels.grid.sparse import BRICK, Topology  # noqa: E402

BANDWIDTH = 4.0e12


def particles(res, xp, seed=0):
    n_cells = int(0.5 * res) * int(0.9 * res) * int(0.45 * res)
    rs = np.random.default_rng(seed)
    p = rs.random((8 * n_cells, 3)).astype(np.float32) * np.array([0.5, 0.9, 0.45], np.float32) + np.float32(0.05)
    return xp.asarray(p)


def timed(fn, xp, repeat=5):
    if xp is np:
        t0 = time.perf_counter()
        for _ in range(repeat):
            out = fn()
        return out, (time.perf_counter() - t0) / repeat * 1e3
    import cupy as cp

    fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeat):
        out = fn()
    stop.record()
    stop.synchronize()
    return out, cp.cuda.get_elapsed_time(start, stop) / repeat


def run(res, xp, label):
    h = 1.0 / res
    pos = particles(res, xp)
    P = int(pos.shape[0])
    topo, t_build = timed(lambda: Topology.from_points(pos, (0, 0, 0), h, 1.5 * h, xp=xp), xp)
    moved = pos + xp.float32(0.3 * h)
    keys2, t_keys = timed(lambda: Topology.from_points(moved, (0, 0, 0), h, 1.5 * h, xp=xp).keys, xp)
    (t2, added, freed), t_update = timed(lambda: topo.update(keys2), xp)
    q = topo.keys[xp.asarray(np.random.default_rng(1).integers(0, topo.count, 1 << 20))]
    _, t_lookup = timed(lambda: topo.lookup(q), xp)
    dense_index = (res // BRICK) ** 3 * 4
    floor_ms = (12 * P + 4 * 8 * 2 * topo.count * 8) / BANDWIDTH * 1e3
    print(f"{label} | {res}³ | {P / 1e6:.2f}M | {topo.count:,} | {t_build:.2f} | {t_build / (P / 1e6):.3f} | "
          f"{t_keys + t_update:.2f} (keys {t_keys:.2f} + slots {t_update:.2f}) | {len(added):,} / {len(freed):,} | "
          f"{(1 << 20) / (t_lookup / 1e3) / 1e9:.2f} | {topo.keys.nbytes + topo.slots.nbytes:,} vs {dense_index:,} | "
          f"{floor_ms:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print("backend | grid | particles | bricks | build ms | ms per M particles | update ms | added / freed | "
          "G lookups/s | index bytes vs dense | floor ms")
    print("---|---|---|---|---|---|---|---|---|---|---")
    try:
        import cupy as cp

        for res in (128, 256) if args.quick else (128, 256, 512):
            run(res, cp, "GPU")
    except ImportError:
        print("(no CuPy: GPU rows skipped)")
    for res in (64, 128) if args.quick else (128, 256):
        run(res, np, "CPU")


if __name__ == "__main__":
    main()
