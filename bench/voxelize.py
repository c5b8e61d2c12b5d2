"""Voxelizer benchmark (seed 004 Table 1/2): bunny and its subdivisions, every mode,
256³–2048³. Prints a table; run on the GPU machine:

    python3 bench/voxelize.py [--quick] [--cpu]

Kernel time: CUDA events around the whole GPU pipeline (setup, scan, columns, prefix),
after warm-up, median of repeats; the bit grid stays on the device. End to end: from
host float32 arrays to the bit grid back in host memory (NumPy), median.
Floor: bytes that must move (clear the bit grid, read vertices/indices, write the grid;
solid reads+writes it once more for the prefix pass) at 4 TB/s copy bandwidth.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests.meshes import bunny  # noqa: E402
from voxfx.kernels.grid import GridSpec, bitgrid  # noqa: E402
from voxfx.kernels.voxelize import voxelize  # noqa: E402

BANDWIDTH = 4.0e12  # bytes/s, device copy bandwidth measured on the H200 (brief)
SEED = {  # seed 004 Table 1/2 (GTX 285) and cuda_voxelizer (GTX 1050 Ti), all at 1024³
    ("surface", 70_000): ("004 T1 bunny 20.7 ms", 20.7),
    ("surface", 871_000): ("004 T1 dragon 23.0 ms", 23.0),
    ("solid", 871_000): ("004 T2 dragon 16.4 ms", 16.4),
}
CUDA_VOXELIZER_MS = 8.6  # bunny 70k tris, 1024³, GTX 1050 Ti


def subdivide(v, t):
    """Split every triangle into four at its edge midpoints, welded like a real mesh
    (each edge's midpoint is one shared vertex), so vertex counts stay realistic."""
    t = t.astype(np.int64)
    edges = np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1)
    uniq, inverse = np.unique(edges, axis=0, return_inverse=True)
    mids = ((v[uniq[:, 0]].astype(np.float64) + v[uniq[:, 1]]) / 2).astype(np.float32)
    m = len(v) + inverse.reshape(3, -1).T  # midpoint vertex of edges ab, bc, ca per triangle
    a, b, c = t[:, 0], t[:, 1], t[:, 2]
    ab, bc, ca = m[:, 0], m[:, 1], m[:, 2]
    tris = np.stack([np.stack(x, axis=1) for x in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))], axis=1)
    return np.concatenate([v, mids]), tris.reshape(-1, 3).astype(np.int32)


def floor_ms(spec, mode, n_vertices, n_triangles):
    grid = bitgrid.nbytes(spec.shape)
    passes = {"surface": 2, "thin": 2, "solid": 4, "solid+surface": 6}[mode]  # clear+write (+prefix r/w)
    geometry = 12 * n_vertices + 24 * n_vertices + 12 * n_triangles  # host f32 in, f64 in voxel units, indices
    return 1e3 * (passes * grid + geometry) / BANDWIDTH


def gpu_times(v, t, spec, mode, repeats):
    import cupy as cp

    vd, td = cp.asarray(v), cp.asarray(t)
    for _ in range(2):
        voxelize(vd, td, spec, mode, xp=cp, keep_on_device=True)
    cp.cuda.Device().synchronize()
    kernel, e2e = [], []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(repeats):
        start.record()
        g = voxelize(vd, td, spec, mode, xp=cp, keep_on_device=True)
        stop.record()
        stop.synchronize()
        kernel.append(cp.cuda.get_elapsed_time(start, stop))
    count = g.count()
    del g
    for _ in range(max(3, repeats // 3)):
        t0 = time.perf_counter()
        voxelize(v, t, spec, mode, xp=cp)  # host arrays in, NumPy bits out
        e2e.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(kernel), statistics.median(e2e), count


def cpu_time(v, t, spec, mode):
    t0 = time.perf_counter()
    g = voxelize(v, t, spec, mode, xp=np)
    return 1e3 * (time.perf_counter() - t0), g.count()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    ap.add_argument("--cpu", action="store_true", help="NumPy path only (CPU machine)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    mesh, why = bunny()
    if mesh is None:
        sys.exit(f"no bunny: {why}")
    meshes = [("bunny", *mesh)]
    if not args.cpu:
        v1, t1 = subdivide(*mesh)
        meshes.append(("bunny/4", v1, t1))
        if not args.quick:
            meshes.append(("bunny/16", *subdivide(v1, t1)))
    resolutions = [128, 256] if args.cpu else ([256, 1024] if args.quick else [256, 512, 1024, 2048])
    modes = ["surface", "thin", "solid", "solid+surface"]
    rows = []
    header = ("mesh", "tris", "res", "mode", "voxels set", "kernel ms", "e2e ms", "floor ms", "x floor", "vs seed")
    if args.cpu:
        header = ("mesh", "tris", "res", "mode", "voxels set", "numpy ms")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, v, t in meshes:
        lo, hi = v.min(axis=0), v.max(axis=0)
        for res in resolutions:
            vs = float((hi - lo).max()) / (res - 2)
            spec = GridSpec.around(lo, hi, vs)
            spec = GridSpec(spec.origin, vs, tuple(min(n, res) for n in spec.shape))
            for mode in modes:
                if args.cpu:
                    ms, count = cpu_time(v, t, spec, mode)
                    row = (name, f"{len(t):,}", f"{res}³", mode, f"{count:,}", f"{ms:.0f}")
                else:
                    reps = args.repeats if res <= 1024 else 5
                    kms, ems, count = gpu_times(v, t, spec, mode, reps)
                    fl = floor_ms(spec, mode, len(v), len(t))
                    seed = ""
                    if res == 1024 and name == "bunny" and mode == "surface":
                        seed = f"{20.7 / kms:.0f}× 004-T1 bunny; {CUDA_VOXELIZER_MS / kms:.0f}× cuda_voxelizer"
                    if res == 1024 and name == "bunny/16" and mode in ("surface", "solid"):
                        ref = 23.0 if mode == "surface" else 16.4
                        seed = f"{ref / kms:.0f}× 004 dragon ({'T1' if mode == 'surface' else 'T2'})"
                    row = (name, f"{len(t):,}", f"{res}³", mode, f"{count:,}", f"{kms:.2f}", f"{ems:.1f}",
                           f"{fl:.3f}", f"{kms / fl:.1f}", seed)
                rows.append(row)
                print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
