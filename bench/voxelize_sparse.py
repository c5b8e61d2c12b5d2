"""The sparse voxelizer (issue 11, ``kernels/voxelize/sparse.py``) on grids no dense bit
grid could hold: the bunny's surface at 1024³ (beside the dense voxelizer, for the same
voxels) up to 16384³ (a dense bit grid would be 512 GB). Prints a table: grid, mode,
tile, set voxels, bricks, time, peak memory of the device pool (GPU) or traced host
memory (CPU), and the dense bit grid the same grid would need.

    python3 bench/voxelize_sparse.py [--cpu] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests.meshes import bunny  # noqa: E402
from voxfx.kernels.grid import GridSpec, bitgrid  # noqa: E402
from voxfx.kernels.voxelize import voxelize  # noqa: E402
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse  # noqa: E402


def spec_for(v, res):
    lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
    return GridSpec.around(lo, hi, float((hi - lo).max()) / res)


def run(v, t, res, mode, tile, xp):
    spec = spec_for(v, res)
    if xp is np:
        tracemalloc.start()
    else:
        xp.get_default_memory_pool().free_all_blocks()
        xp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    grid = voxelize_sparse(v, t, spec, mode, tile=tile, xp=xp)
    if xp is not np:
        xp.cuda.Device().synchronize()
    seconds = time.perf_counter() - t0  # the count below is the bench's, not the user's wait
    popcount = xp.asarray(np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(1).astype(np.uint8))
    voxels = int(popcount[grid.channels[CHANNEL]].sum(dtype=xp.int64))  # a uint8 temporary as big as the bits
    if xp is np:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        peak = xp.get_default_memory_pool().total_bytes()
    return spec, grid, voxels, seconds, peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.cpu:
        xp = np
    else:
        import cupy as xp
    mesh, why = bunny()
    if mesh is None:
        print(f"no bunny: {why}")
        return 1
    v, t = mesh
    sizes = (256, 1024) if args.quick else (1024, 4096, 16384)
    tile = 64 if xp is np else 256
    print("grid | mode | tile | voxels set | bricks | time s | peak MiB | dense bit grid | same voxels as dense")
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    for res in sizes:
        for mode in ("surface", "solid+surface") if res <= 4096 else ("surface",):
            spec, grid, n, sec, peak = run(v, t, res, mode, tile, xp)
            dense = bitgrid.nbytes(spec.shape)
            same = "-"
            if res <= 1024:
                big = GridSpec(spec.origin, spec.voxel_size, tuple(-(-s // tile) * tile for s in spec.shape))
                same = str(n == int(voxelize(v, t, big, mode, xp=xp).count()))
            print(f"{res}³ | {mode} | {tile} | {n:,} | {grid.topology.count:,} | {sec:.2f} | {peak / 2**20:.0f} | "
                  f"{dense / 2**30:.1f} GiB | {same}", flush=True)
            del grid
    return 0


if __name__ == "__main__":
    sys.exit(main())
