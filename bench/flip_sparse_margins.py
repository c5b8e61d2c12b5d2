"""Per-brick topology margins (issue 21 §6) against the global margin on the 65M dam break.

The 65M row of ``bench/flip_sparse.py`` (512³, 65,536,000 particles) frame by frame
(``step(1/24)``): per frame the time, substeps (and the CFL's ask), the bricks at its end,
the largest margin, the topology's paths (``same``: no brick changed, ``update``: the
device update, ``keys``: device keys, ``array``: the array fall-back) and its time (the
``SparseFlipGrid.update`` calls, synchronized), and the high-water mark of the pool's bytes
in use during the frame (``memory_liquid.InUse``). At the end, the in-use peak against
``sparse_memory``'s estimate of the row (``memory_liquid.estimates``; the frames' level
sets are not run, so the peak is the steps' — the estimate's "substep" part is its
counterpart).

    OUT=/tmp/out python3 bench/flip_sparse_margins.py --mode brick --frames 10 --cap 60
    OUT=/tmp/out python3 bench/flip_sparse_margins.py --mode global --frames 6 --cap 40

``--mode`` sets ``VOXFX_SPARSE_MARGIN`` (brick: per-brick margins, the default; global:
the fastest particle's margin everywhere, the earlier behaviour). ``--row 8m`` runs the 8M
dam break instead. Writes ``$OUT/flip_sparse_margins_<mode>.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
sys.path.insert(0, str(ROOT / "bench"))
from flip_sparse import ROWS, scene  # noqa: E402
from memory_liquid import InUse, estimates  # noqa: E402

from voxfx.kernels.flip import sparse_grid, sparse_sim, sparse_topology_gpu  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

GIB = 2 ** 30


def instrument(sync, log):
    """Wraps the topology's entry points: each substep's margin, path and update time in *log*."""
    incremental = sparse_topology_gpu.incremental_keys

    def keys(grid, pos, margin, prebuilt=False, reach=None):
        out = incremental(grid, pos, margin, prebuilt, reach)
        kind = "same" if out and out[1] else "update" if out and isinstance(out[0], tuple) else "keys"
        log["path"] = "array" if out is None else kind
        return out

    sparse_topology_gpu.incremental_keys = keys
    update = sparse_grid.SparseFlipGrid.update

    def timed(self, *args, **kwargs):
        sync()
        start = time.perf_counter()
        log["path"] = "array"  # unless incremental_keys says otherwise (extra cells, the CPU)
        log["margin"] = max(log.get("margin", 0), int(args[1]))
        out = update(self, *args, **kwargs)
        sync()
        log["topology ms"] += (time.perf_counter() - start) * 1e3
        log["paths"][log["path"]] += 1
        return out

    sparse_grid.SparseFlipGrid.update = timed
    substep = sparse_sim.SparseFlipSimulation.substep

    def counted(self, dt, progress=None):
        log["substeps"] += 1
        return substep(self, dt, progress)

    sparse_sim.SparseFlipSimulation.substep = counted


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=sparse_grid.MARGIN_MODES, default="brick")
    ap.add_argument("--row", choices=("65m", "8m"), default="65m")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--cap", type=float, default=60.0, help="seconds of frames (set-up apart)")
    ap.add_argument("--smoke", action="store_true", help="NumPy, the row at 1/1000 of its particles: the paths")
    args = ap.parse_args()
    os.environ["VOXFX_SPARSE_MARGIN"] = args.mode
    if args.smoke:
        import numpy as cp

        name, sync, watch = "NumPy (smoke)", lambda: None, InUse(None)
        n, particles = (48, 65_536) if args.row == "65m" else (32, 8_000)
    else:
        import cupy as cp

        name, watch = cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), InUse(cp)
        sync = cp.cuda.Device().synchronize
        n, particles = ROWS[args.row]
    print(f"device: {name}; margins: {args.mode}; row {args.row}", flush=True)
    log = {"paths": collections.Counter(), "topology ms": 0.0, "substeps": 0}
    instrument(sync, log)
    spec, v, t = scene(n, particles, "dam")
    start = time.perf_counter()
    watch.start()
    frames = []
    with watch.hook:
        sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
        sync()
        print(f"set-up {time.perf_counter() - start:.1f} s, {len(sim.pos):,} particles", flush=True)
        begin = time.perf_counter()
        for f in range(args.frames):
            log.update(paths=collections.Counter(), margin=0, substeps=0)
            log["topology ms"] = 0.0
            watch.reset()
            a = time.perf_counter()
            stats = sim.step(1 / 24)
            sync()
            ms = (time.perf_counter() - a) * 1e3
            row = {"frame": f, "ms": ms, "substeps": stats.get("substeps"), "cfl asks": stats.get("cfl_substeps"),
                   "bricks": sim.grid.brick_count(), "margin max": log["margin"], "paths": dict(log["paths"]),
                   "topology ms": log["topology ms"], "peak GiB": watch.peak / GIB}
            frames.append(row)
            print(f"frame {f}: {ms:.0f} ms, substeps {row['substeps']} (CFL asks {row['cfl asks']}), bricks "
                  f"{row['bricks']}, margin max {row['margin max']}, topology {row['topology ms']:.1f} ms "
                  f"{row['paths']}, in-use peak {row['peak GiB']:.2f} GiB", flush=True)
            if time.perf_counter() - begin > args.cap:
                print("(cap)", flush=True)
                break
    new, _ = estimates(spec, v, len(sim.pos), 8, 0, cp)
    peak = max(max(r["peak GiB"] for r in frames) * GIB, 1)
    print(f"{args.mode}: {len(frames)} frames in {sum(r['ms'] for r in frames) / 1e3:.1f} s; bricks max "
          f"{max(r['bricks'] for r in frames)}; in-use peak {peak / GIB:.2f} GiB; estimate {new['total'] / GIB:.2f} "
          f"GiB ({new['total'] / peak:.2f}x; substep part {new['substep'] / GIB:.2f} GiB, "
          f"{new['substep'] / peak:.2f}x)", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, f"flip_sparse_margins_{args.mode}.json").write_text(json.dumps(
            {"device": name, "mode": args.mode, "row": args.row, "frames": frames, "peak": peak,
             "estimate": new}, indent=1, default=float))


if __name__ == "__main__":
    main()
