"""The sparse voxelizer's 3-axis vote on the device (issue 11, ``gpu_sparse_vote.py``):
the bunny's solid and solid+surface with ``vote=True`` from 1024³ up, beside the same
mode without the vote (the device solid alone) and, up to ``--dense-check``, the dense
device vote (same voxels, checked). Prints grid, mode, voxels, bricks stored, bricks in
runs, best time of *repeat* runs after a warm-up, ``nbytes``, the pool's peak and the
guard's estimate (``sparse_guard.sparse_bytes(vote=True)``).

    python3 bench/voxelize_sparse_vote.py [--sizes 1024,2048,4096] [--repeat 3] [--dense-check 1024]
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
from tests.meshes import bunny  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402
from voxfx.kernels.voxelize import sparse_guard, voxelize  # noqa: E402
from voxfx.kernels.voxelize.sparse import voxelize_sparse  # noqa: E402
from voxfx.kernels.voxelize.sparse_result import SparseVoxels, clip_to_shape  # noqa: E402


def main():
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dense-check", type=int, default=1024)
    args = ap.parse_args()
    mesh, why = bunny()
    if mesh is None:
        sys.exit(why)
    v, t = mesh
    pool = cp.get_default_memory_pool()
    print("| grid | mode | vote | voxels | stored | in runs | ms | nbytes MiB | peak MiB | estimate MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in (int(s) for s in args.sizes.split(",")):
        lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
        spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)
        for mode in ("solid", "solid+surface"):
            for vote in (False, True):
                surface, inside = sparse_guard.brick_counts(v, t, spec, mode, vote=vote, xp=cp)
                estimate = sparse_guard.sparse_bytes(surface, inside, len(v), len(t), xp=cp, vote=vote, mode=mode,
                                                      shape=spec.shape)
                voxelize_sparse(v, t, spec, mode, vote=vote, xp=cp, tiles=True)  # warm-up (compiles)
                best, peak = float("inf"), 0
                for _ in range(args.repeat):
                    grid = None
                    pool.free_all_blocks()
                    base = pool.total_bytes()
                    cp.cuda.Device().synchronize()
                    t0 = time.perf_counter()
                    grid = voxelize_sparse(v, t, spec, mode, vote=vote, xp=cp, tiles=True)
                    cp.cuda.Device().synchronize()
                    best = min(best, time.perf_counter() - t0)
                    peak = max(peak, pool.total_bytes() - base)
                result = SparseVoxels(spec, clip_to_shape(grid, spec.shape))
                print(f"| {res}³ | {mode} | {vote} | {result.count():,} | {result.stored_bricks:,} | "
                      f"{result.full_bricks:,} | {1e3 * best:.1f} | {result.nbytes / 2**20:.1f} | "
                      f"{peak / 2**20:.0f} | {estimate / 2**20:.0f} |", flush=True)
                if vote and res <= args.dense_check:
                    dense = voxelize(v, t, spec, mode, vote=True, xp=cp)
                    same = np.array_equal(result.to_dense().bits if result.xp is np else
                                          cp.asnumpy(result.to_dense().bits), np.asarray(dense.bits))
                    print(f"  dense device vote at {res}³: same voxels: {same}", flush=True)
                del grid, result


if __name__ == "__main__":
    main()
