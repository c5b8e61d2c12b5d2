"""The set-up's look-back scans alone on the device (issue 24, helper s22a): each way of
``VOXFX_SPARSE_SCAN_WAY`` — "0" (scan_lookback / scan_lookback_pair at the default tile floor)
and "1" (scan_lookback_wide / scan_lookback_pair_wide) with its compile-time variants (``-D``
SCAN_VECS, SCAN_WINDOW, SCAN_WIDE_BLOCKS of cuda/flip_sparse_pressure_scan.cu) — over the 8M
row's shapes: level 0's flags (3 rows of the pool's cells) and the coarse levels' pairs and
single scans. Each variant's integers are checked against cupy.cumsum first. Timing: CUDA
events behind a one-thread spin kernel (the host queues the events and launches before the
device reaches them), the variants alternating; per shape and variant the median over
``--batches`` of one launch alone ("one") and of ``--launches`` launches back to back ("run",
a launch's share: what a stream of set-up launches sees), and the bytes read and written
(4 + 4 a item) over the "one" time.

    python3 bench/flip_scan_ways.py [--batches 25] [--launches 10] [--variants "0" "1" ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_pressure_scan as S  # noqa: E402
from voxfx.kernels.grid.launch import THREADS, Kernels  # noqa: E402

_SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
}
"""

# name → -D options ("0": the module's own kernels)
VARIANTS = {"0": None, "1": (), "1:vecs2": ("-DSCAN_VECS=2",), "1:vecs8": ("-DSCAN_VECS=8",),
            "1:window1": ("-DSCAN_WINDOW=1",), "1:blocks5": ("-DSCAN_WIDE_BLOCKS=5",),
            "1:w1+b5": ("-DSCAN_WINDOW=1", "-DSCAN_WIDE_BLOCKS=5"),
            "1:v8+w1+b5": ("-DSCAN_VECS=8", "-DSCAN_WINDOW=1", "-DSCAN_WIDE_BLOCKS=5")}

# name → (A's rows, n_a, n_b or 0 for a single scan): the 8M row (session 22's call 1)
SHAPES = {"level 0 (3 x 1,743,360)": (3, 1_743_360, 0), "level 0 (3 x 1,884,160)": (3, 1_884_160, 0),
          "level 1 segments (57,000)": (1, 57_000, 0), "pair: level 1 flags + level 2 take": (2, 210_000, 210_000),
          "pair: level 2 flags + level 3 take": (2, 26_000, 26_000), "level 3 flags (2 x 4,100)": (2, 4_100, 0)}


def launcher(cp, variant, rows, n_a, n_b, a, b, out_a, out_b):
    """A function launching *variant*'s kernel once on the shape (its own status state)."""
    status, ctrl = S.lookback_state(cp)
    i32 = np.int32
    if VARIANTS[variant] is None:
        k, floor = S._S, 8
        tile_a, tile_b = S.scan_tile(n_a, floor), S.scan_tile(max(n_b, 1), floor)
        tiles_a, tiles_b = -(-n_a // tile_a), -(-n_b // tile_b)
        if n_b == 0:
            args = (a, i32(n_a), i32(tile_a), i32(tiles_a), status, ctrl, out_a)
            return lambda: k.launch_grid("scan_lookback", (rows * tiles_a,), (THREADS,), args)
        args = (a, i32(n_a), i32(tile_a), i32(tiles_a), i32(rows), out_a, b, i32(n_b), i32(tile_b), i32(tiles_b),
                out_b, status, ctrl)
        return lambda: k.launch_grid("scan_lookback_pair", (rows * tiles_a + tiles_b,), (THREADS,), args)
    options = VARIANTS[variant]
    vecs = next((int(o.split("=")[1]) for o in options if o.startswith("-DSCAN_VECS=")), 4)
    k, tile = Kernels("flip_sparse_pressure_scan.cu", options, THREADS), vecs * 4 * THREADS
    tiles_a, tiles_b = -(-n_a // tile), -(-n_b // tile)
    name = "scan_lookback_wide" if n_b == 0 else "scan_lookback_pair_wide"
    args = (a, i32(n_a), i32(tile), i32(tiles_a), i32(rows), out_a, b if n_b else a, i32(max(n_b, 1)), i32(tile),
            i32(tiles_b), out_b if n_b else out_a, status, ctrl)
    return lambda: k.launch_grid(name, (rows * tiles_a + tiles_b,), (THREADS,), args)


def main():
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=25)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--spin-us", type=float, default=600.0)
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    args = ap.parse_args()
    spin = cp.RawKernel(_SPIN, "spin")
    ns = np.int64(args.spin_us * 1000)
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "| cuda", cp.cuda.runtime.runtimeGetVersion())
    rng = np.random.default_rng(7)
    for shape, (rows, n_a, n_b) in SHAPES.items():
        a = cp.asarray(rng.integers(0, 2, (rows, n_a)).astype(np.int32))
        b = cp.asarray(rng.integers(0, 2, max(n_b, 1)).astype(np.int32))
        want_a, want_b = cp.cumsum(a, axis=1, dtype=cp.int32), cp.cumsum(b, dtype=cp.int32)
        runs, same = {}, {}
        for v in args.variants:
            out_a, out_b = cp.full(a.shape, -7, cp.int32), cp.full(b.shape, -7, cp.int32)
            runs[v] = launcher(cp, v, rows, n_a, n_b, a, b, out_a, out_b)
            for _ in range(2):  # compiled, and the state readied, before the check
                out_a.fill(-7)
                out_b.fill(-7)
                runs[v]()
            same[v] = bool(cp.array_equal(out_a, want_a)) and (n_b == 0 or bool(cp.array_equal(out_b, want_b)))
        cp.cuda.Device().synchronize()
        e = [cp.cuda.Event() for _ in range(4)]
        one, run = {v: [] for v in runs}, {v: [] for v in runs}
        for batch in range(args.batches):
            order = list(runs) if batch % 2 == 0 else list(runs)[::-1]
            for v in order:
                spin((1,), (1,), (ns,))
                e[0].record()
                runs[v]()
                e[1].record()
                spin((1,), (1,), (ns,))
                e[2].record()
                for _ in range(args.launches):
                    runs[v]()
                e[3].record()
                e[3].synchronize()
                one[v].append(cp.cuda.get_elapsed_time(e[0], e[1]))
                run[v].append(cp.cuda.get_elapsed_time(e[2], e[3]) / args.launches)
        items = rows * n_a + n_b
        print(f"\n{shape}: {items:,} items, {8 * items / 1e6:.1f} MB read + written")
        for v in runs:
            t1, tr = float(np.median(one[v])), float(np.median(run[v]))
            print(f"  way {v:11s} one {t1 * 1e3:7.2f} us ({8 * items / t1 / 1e6:6.0f} GB/s)  run {tr * 1e3:7.2f} us"
                  f"  same as cumsum: {same[v]}")


if __name__ == "__main__":
    main()
