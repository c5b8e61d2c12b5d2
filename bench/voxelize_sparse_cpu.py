"""The sparse voxelizer's host memory on the CPU (issue 11, ``sparse_guard``): each case in
a fresh process, its RSS high-water mark above the start against the guard's model
(``sparse_guard.sparse_bytes`` from the result's own surface and inside bricks), and the
fit of the cost of a brick inside: (measured − the model without it) / inside bricks.

    python3 bench/voxelize_sparse_cpu.py [--sizes 256,512,768] [--shapes box,sphere] [--modes solid]
        [--volume 256,512 --volume-shapes cube,suzanne] [--points 256]

A second table (``--volume``) runs the operator's Volume-alone job dense (Sparse: never)
and sparse (always) in a fresh Blender (``bench/memory.py``'s child): time, RSS peak and
the guard's estimate of each, for the auto rule and the coverage's model. ``--sizes ""``
skips the first table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from tools.package import load
load()
import numpy as np
from tests.meshes import box, uv_sphere
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize

case = json.loads(sys.argv[1])
if case["shape"] == "box":
    v, t = box((0.013, 0.021, 0.017), (0.987, 0.979, 0.991))
else:
    v, t = uv_sphere(0.49, 96, 48, center=(0.5, 0.5, 0.5))
spec = GridSpec.around(v.min(0), v.max(0), float((v.max(0) - v.min(0)).max()) / case["res"])

def status():
    out = {{}}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, val = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(val.split()[0]) * 1024
    return out

before = status()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
t0 = time.perf_counter()
r = voxelize(v, t, spec, case["mode"], xp=np, sparse=True)
seconds = time.perf_counter() - t0
after = status()
print("RESULT", json.dumps({{"measured": after["VmHWM"] - before["VmRSS"], "seconds": seconds,
                            "surface": r.stored_bricks, "inside": r.full_bricks, "nv": len(v), "nt": len(t)}}))
"""


def run(case):
    r = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), json.dumps(case)], capture_output=True,
                       text=True, timeout=3600, cwd=ROOT)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**case, **json.loads(line[7:])}
    raise RuntimeError(r.stderr[-3000:])


def main(argv=None):
    sys.path.insert(0, str(ROOT))
    from tools.package import load

    load()
    from voxfx.kernels.voxelize import sparse_guard as g

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,512,768")
    ap.add_argument("--shapes", default="box,sphere")
    ap.add_argument("--modes", default="solid")
    ap.add_argument("--volume", default="", help="resolutions of the Volume-alone dense/sparse table, e.g. 256,512")
    ap.add_argument("--volume-shapes", default="cube", help="bench/memory.py shapes: cube, suzanne")
    ap.add_argument("--points", default="", help="resolutions of the point-list table (sphere solid), e.g. 256")
    args = ap.parse_args(argv)
    print("| shape | mode | res | surface bricks | inside bricks | s | measured MiB | model MiB | model/meas "
          "| B per inside brick |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        for mode in args.modes.split(","):
            for res in (int(x) for x in args.sizes.split(",") if x):
                r = run({"shape": shape, "mode": mode, "res": res})
                model = g.sparse_bytes(r["surface"], r["inside"], r["nv"], r["nt"])
                without = model - g.BYTES_PER_INSIDE_BRICK * r["inside"]
                per = (r["measured"] - without) / r["inside"] if r["inside"] else float("nan")
                print(f"| {shape} | {mode} | {res} | {r['surface']:,} | {r['inside']:,} | {r['seconds']:.1f} | "
                      f"{r['measured'] / 2**20:.0f} | {model / 2**20:.0f} | {model / r['measured']:.2f} | {per:.0f} |",
                      flush=True)
    if args.points:
        points_table([int(x) for x in args.points.split(",")])
    if args.volume:
        sys.path.insert(0, str(ROOT / "bench"))
        import memory as bench

        print("\n| shape | mode | res | sparse | s | measured MiB | estimate MiB | est/meas |")
        print("|---|---|---|---|---|---|---|---|")
        for res in (int(x) for x in args.volume.split(",")):
            for shape in args.volume_shapes.split(","):
                for mode in args.modes.split(","):
                    for how in ("never", "always"):
                        t0 = time.perf_counter()
                        r = bench.run_case({"shape": shape, "outputs": ["volume"], "mode": mode, "res": res,
                                            "sparse": how}, timeout=3600)
                        s = time.perf_counter() - t0
                        est = r.get("estimate") or 0
                        print(f"| {shape} | {mode} | {res} | {how} | {s:.0f} | {r['measured'] / 2**20:.0f} | "
                              f"{est / 2**20:.0f} | {est / max(r['measured'], 1):.2f} |", flush=True)


def points_table(sizes):
    """The operator's point lists of a solid sphere, chunk by chunk: runs expanded to bit
    rows with owners voxel by voxel (before) against ``sparse_points.chunk_points``: time
    and traced peak (tracemalloc) of each, same voxels and owners."""
    import tracemalloc

    import numpy as np

    from tests.meshes import uv_sphere
    from voxfx.kernels.grid import GridSpec
    from voxfx.kernels.voxelize import voxelize
    from voxfx.kernels.voxelize.sparse_attributes import OwnerMesh, row_chunks
    from voxfx.kernels.voxelize.sparse_points import chunk_points

    print("\n| res | voxels | path | s | traced peak MiB |")
    print("|---|---|---|---|---|")
    for res in sizes:
        v, t = uv_sphere(0.49, 96, 48, center=(0.5, 0.5, 0.5))
        spec = GridSpec.around(v.min(0), v.max(0), 1.0 / res)
        r = voxelize(v, t, spec, "solid", xp=np, sparse=True)
        om = OwnerMesh(v, t, spec)
        out = {}
        for name in ("expanded", "chunk_points"):
            tracemalloc.start()
            t0 = time.perf_counter()
            got = []
            for a, b in row_chunks(r):
                if name == "expanded":
                    ijk = np.asarray(r.coordinates_of(a, b))
                    got.append((ijk, om.owners(ijk.astype(np.int64))))
                else:
                    got.append(chunk_points(r, om, a, b))
            dt = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            out[name] = got
            print(f"| {res} | {sum(len(g[0]) for g in got):,} | {name} | {dt:.1f} | {peak / 2**20:.0f} |", flush=True)
        same = all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
                   for x, y in zip(out["expanded"], out["chunk_points"]))
        print(f"  same points and owners: {same}")


if __name__ == "__main__":
    main()
