"""The sparse voxelizer (issue 11, ``kernels/voxelize/sparse.py``; on the GPU
``gpu_sparse.py``) on grids no dense bit grid could hold: the Stanford bunny from 1024³
(beside the dense voxelizer: same bricks bit for bit, and the time and memory ratio) up
to 16384³ (a dense bit grid would be 393 GiB). Prints a table: grid, mode, voxels set,
bricks stored, bricks in full runs (``SparseGrid.tiles``), best time of *repeat* runs
after a warm-up (compiles excluded), ``nbytes`` of the grid, peak of the device pool (GPU)
or traced host memory (CPU), the guard's estimate of that peak (``sparse_guard``), and the
dense voxelizer's time and bit grid where it runs. ``--surface-kernel auto,tiles,tiles3,columns``
runs the surface modes with each of ``gpu_sparse``'s surface launches (warp tiles with
shared brick windows; tiles3: the same with a warp owner search and tight column depths;
one thread per column; auto: tiles3 where triangles are large enough), in the same process.

    python3 bench/voxelize_sparse.py [--cpu] [--quick] [--sizes 1024,4096] [--repeat 3]
                                     [--surface-kernel auto,tiles,tiles3,columns]
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests.meshes import bunny  # noqa: E402
from voxfx.kernels.grid import GridSpec, bitgrid  # noqa: E402
from voxfx.kernels.grid.sparse import brick_keys  # noqa: E402
from voxfx.kernels.voxelize import gpu_sparse, sparse_guard, voxelize  # noqa: E402
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse  # noqa: E402

TILE = 64
MODES = {1024: ("surface", "solid", "solid+surface"), 2048: ("surface", "solid", "solid+surface"),
         4096: ("surface", "solid", "solid+surface"), 8192: ("surface", "solid"), 16384: ("surface", "solid")}
DENSE_CHECK = 2048  # compared with the dense voxelizer up to this size


def spec_for(v, res):
    lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)
    return GridSpec(spec.origin, spec.voxel_size, tuple(-(-s // TILE) * TILE for s in spec.shape))


def sync(xp):
    if xp is not np:
        xp.cuda.Device().synchronize()


def timed(fn, xp, repeat):
    """(result of the last call, best seconds, peak bytes of the last call)."""
    best, out, peak = float("inf"), None, 0
    for _ in range(repeat):
        out = None
        if xp is np:
            tracemalloc.start()
        else:
            xp.get_default_memory_pool().free_all_blocks()
        sync(xp)
        t0 = time.perf_counter()
        out = fn()
        sync(xp)
        best = min(best, time.perf_counter() - t0)
        if xp is np:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        else:
            peak = xp.get_default_memory_pool().total_bytes()
    return out, best, peak


def voxels_of(grid, xp):
    popcount = xp.asarray(np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(1).astype(np.uint8))
    n = int(popcount[grid.channels[CHANNEL]].sum(dtype=xp.int64))
    tiles = grid.tiles.get(CHANNEL)
    return n + (tiles.bricks * 512 if tiles is not None else 0)


def dense_bricks(words, shape, xp):
    """(keys, rows) of the non-empty bricks of a dense packed bit grid."""
    nx, ny, nz = shape
    b = xp.ascontiguousarray(words).view(xp.uint8).reshape(nz // 8, 8, ny // 8, 8, nx // 8)
    b = b.transpose(0, 2, 4, 1, 3).reshape(-1, 8, 8)
    keep = xp.flatnonzero(b.reshape(b.shape[0], -1).any(axis=1))
    nbx, nby = nx // 8, ny // 8
    ijk = xp.stack([keep % nbx, (keep // nbx) % nby, keep // (nbx * nby)], axis=1)
    return brick_keys(ijk, xp), b[keep]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--quick", action="store_true", help="256³ and 512³ only")
    ap.add_argument("--sizes", default="", help="comma-separated grid sizes (default 1024 … 16384)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--surface-kernel", default=gpu_sparse.SURFACE_KERNEL,
                    help="comma-separated surface launches of the GPU path: auto, tiles, tiles3, columns")
    args = ap.parse_args(argv)
    kernels = [k.strip() for k in args.surface_kernel.split(",") if k.strip()]
    if args.cpu:
        xp = np
    else:
        import cupy as xp
    mesh, why = bunny()
    if mesh is None:
        print(f"no bunny: {why}")
        return 1
    v, t = mesh
    sizes = [256, 512] if args.quick else [int(s) for s in args.sizes.split(",")] if args.sizes else sorted(MODES)
    if xp is not np:  # compile every kernel first
        for mode in ("surface", "solid+surface"):
            for kernel in kernels:
                gpu_sparse.SURFACE_KERNEL = kernel
                voxelize_sparse(v, t, spec_for(v, 64), mode, tile=TILE, xp=xp, tiles=True)
            voxelize(v, t, spec_for(v, 64), mode, xp=xp)
        print(f"device: {xp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {xp.__version__}")
    print("grid | mode | kernel | voxels set | bricks | in full runs | time ms | nbytes MiB | peak MiB | "
          "estimate MiB | dense ms | dense bit grid | same bricks as dense")
    print("--- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | ---")
    runs = [(res, mode, kernel) for res in sizes for mode in MODES.get(res, ("surface", "solid", "solid+surface"))
            for kernel in (kernels if mode != "solid" and xp is not np else ["-"])]
    for res, mode, kernel in runs:
        spec = spec_for(v, res)
        if kernel != "-":
            gpu_sparse.SURFACE_KERNEL = kernel
        repeat = args.repeat if res <= 4096 else 1
        surface, inside = sparse_guard.brick_counts(v, t, spec, mode, xp=xp)
        estimate = sparse_guard.sparse_bytes(surface, inside, len(v), len(t), xp=xp, mode=mode, shape=spec.shape)
        try:
            grid, sec, peak = timed(partial(voxelize_sparse, v, t, spec, mode, tile=TILE, xp=xp, tiles=True),
                                    xp, repeat)
        except Exception as e:  # noqa: BLE001 - report what does not fit and go on
            print(f"{res}³ | {mode} | {kernel} | {type(e).__name__}: {str(e).splitlines()[0][:80]}", flush=True)
            continue
        n = voxels_of(grid, xp)
        tiles = grid.tiles.get(CHANNEL)
        in_runs = tiles.bricks if tiles is not None else 0
        dense_ms, same = "-", "-"
        if res <= DENSE_CHECK:
            dense, dsec, _ = timed(partial(voxelize, v, t, spec, mode, xp=xp), xp, repeat)
            dense_ms = f"{1e3 * dsec:.1f}"
            keys, rows = dense_bricks(xp.asarray(dense.bits), spec.shape, xp)
            del dense
            full = grid.expanded(CHANNEL)
            same = str(bool(keys.shape == full.topology.keys.shape and (keys == full.topology.keys).all()
                            and (rows == full.channels[CHANNEL]).all()))
            del keys, rows, full
        print(f"{res}³ | {mode} | {kernel} | {n:,} | {grid.topology.count:,} | {in_runs:,} | {1e3 * sec:.1f} | "
              f"{grid.nbytes / 2**20:.1f} | {peak / 2**20:.0f} | {estimate / 2**20:.0f} | {dense_ms} | "
              f"{bitgrid.nbytes(spec.shape) / 2**30:.2f} GiB | {same}", flush=True)
        del grid
    return 0


if __name__ == "__main__":
    sys.exit(main())
