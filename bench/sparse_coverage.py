"""The Volume density of a solid (seed 004 §5.5: 4×4×4 supersampled coverage) dense and
sparse on the CPU (issue 11): time and host peak of each path, and that both give the same
density.

Each case runs in a fresh Python process on the Stanford bunny (99,785 triangles, open:
solid rows run on to the grid's end as the dense fill does): *dense* is
``coverage.coverage`` then ``coverage.density`` (one float32 grid, the fine grid in slabs),
*sparse* is ``voxelize(..., sparse=True)`` then ``sparse_coverage.coverage_grid`` (a sparse
solid 4× finer, its interior as runs of 1.0); *peak MiB* = VmHWM − VmRSS before the call.

    /work/envs/v50/bin/python bench/sparse_coverage.py [--res 128 256 512] [--mode solid]
    python bench/sparse_coverage.py --gpu --res 256 512 1024      # both paths on CuPy
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bunny_child import run_case  # noqa: E402

# The child's own imports, then its body after _bunny_child.SETUP (the bunny, spec, xp, status()).
IMPORTS = """
    import hashlib
    from voxfx.kernels import backend
    from voxfx.kernels.voxelize.coverage import coverage, density
    from voxfx.kernels.voxelize.sparse_coverage import coverage_grid
"""
BODY = """
    before = status()["VmRSS"]
    open("/proc/self/clear_refs", "w").write("5")
    t0 = time.perf_counter()
    if case["sparse"]:
        r = voxelize(v, t, spec, case["mode"], xp=xp, sparse=True, keep_on_device=True)
        g = coverage_grid(v, t, r)
        if xp is not np:
            xp.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
        peak = status()["VmHWM"] - before
        stored, runs = g.topology.count, g.tiles["density"].bricks if "density" in g.tiles else 0
        d = backend.to_numpy(g.to_dense("density", (0, 0, 0), spec.shape)) if case["check"] else None
    else:
        bits = voxelize(v, t, spec, case["mode"], xp=xp).bits
        d = density(bits, spec, coverage(v, t, spec, xp=xp))
        dt = time.perf_counter() - t0
        peak = status()["VmHWM"] - before
        stored = runs = None
    digest = hashlib.sha1(np.ascontiguousarray(d).tobytes()).hexdigest()[:12] if d is not None else None
    print(json.dumps({{"time": dt, "peak": peak, "stored": stored, "runs": runs, "digest": digest,
                      "shape": spec.shape}}))
"""


def run(case):
    return run_case(IMPORTS, BODY, case)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--mode", default="solid")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--no-check", action="store_true", help="skip the dense copy that checks the sparse density")
    args = ap.parse_args()
    print("res | path | time s | peak MiB | density bricks | in runs of 1.0 | same density")
    print("--- | --- | --- | --- | --- | --- | ---")
    for res in args.res:
        got = {}
        for sparse in (False, True):
            r = run({"res": res, "mode": args.mode, "sparse": sparse, "gpu": args.gpu,
                     "check": not args.no_check})
            got[sparse] = r
            path = "sparse" if sparse else "dense"
            if "error" in r:
                print(f"{res} | {path} | {r['error']}", flush=True)
                continue
            same = "-" if not sparse or r["digest"] is None else str(r["digest"] == got[False].get("digest"))
            print(f"{res} | {path} | {r['time']:.2f} | {r['peak'] / 2**20:.0f} | "
                  f"{r['stored'] if sparse else '-'} | {r['runs'] if sparse else '-'} | {same}", flush=True)


if __name__ == "__main__":
    main()
