"""Where ``voxelize(..., sparse="auto")`` should turn sparse on the CPU, and how close the
sparse guard's estimate is to the real peak (issue 11).

Each case runs in a fresh Python process: load the Stanford bunny (99,785 triangles),
note VmRSS, reset the high-water mark (``/proc/self/clear_refs`` ← 5), voxelize dense or
sparse on NumPy (sparse: the guard's coarse pass included), read VmHWM. *peak MiB* =
VmHWM − VmRSS before; *estimate* (sparse rows) = ``sparse_guard.check_sparse``.

    /work/envs/v50/bin/python bench/voxelize_sparse_auto.py [--res 128 256 512 1024] [--modes surface solid+surface]
    python bench/voxelize_sparse_auto.py --gpu --res 512 1024 2048 4096   # the GPU crossover

With ``--gpu`` both paths run on CuPy (one warm-up call first, synchronized timing) and
*peak MiB* is CuPy's pool high-water mark (``total_bytes`` after the call, the pool
emptied before); a dense case whose estimate does not fit the device is skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bunny_child import run_case  # noqa: E402

# The child's own imports, then its body after _bunny_child.SETUP (the bunny, spec, xp, status()).
IMPORTS = """
    from voxfx.kernels.voxelize import sparse_guard
"""
BODY = """
    est = None
    if case["sparse"]:  # the guard's estimate; the measured run below runs the guard again
        est = sparse_guard.check_sparse(v, t, spec, case["mode"], False, xp, usable=1 << 50)

    if xp is not np:
        from voxfx.kernels import backend
        from voxfx.kernels.voxelize import estimate_bytes
        if not case["sparse"] and estimate_bytes(spec, case["mode"], len(v), len(t), xp=xp) > backend.usable_bytes(xp):
            print(json.dumps({{"error": "dense does not fit on the device"}}))
            sys.exit(0)
        small = GridSpec(spec.origin, spec.voxel_size * 8, tuple(max(8, n // 8) for n in spec.shape))
        voxelize(v, t, small, case["mode"], xp=xp, sparse=case["sparse"], keep_on_device=True)  # compile, warm up
        xp.cuda.Device().synchronize()
        xp.get_default_memory_pool().free_all_blocks()
        t0 = time.perf_counter()
        r = voxelize(v, t, spec, case["mode"], xp=xp, sparse=case["sparse"], keep_on_device=True)
        xp.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
        peak = xp.get_default_memory_pool().total_bytes()
    else:
        before = status()["VmRSS"]
        open("/proc/self/clear_refs", "w").write("5")
        t0 = time.perf_counter()
        r = voxelize(v, t, spec, case["mode"], xp=np, sparse=case["sparse"])
        dt = time.perf_counter() - t0
        peak = status()["VmHWM"] - before
    bricks = r.active_bricks if case["sparse"] else None
    print(json.dumps({{"time": dt, "peak": peak, "count": r.count(), "bricks": bricks, "estimate": est,
                      "shape": spec.shape}}))
"""


def run(case):
    return run_case(IMPORTS, BODY, case)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--modes", nargs="+", default=["surface", "solid+surface"])
    ap.add_argument("--json")
    ap.add_argument("--gpu", action="store_true", help="both paths on CuPy")
    args = ap.parse_args()
    rows = []
    print("res | mode | path | time s | peak MiB | voxels | bricks | estimate MiB | estimate / peak")
    print("--- | --- | --- | --- | --- | --- | --- | --- | ---")
    for res in args.res:
        for mode in args.modes:
            for sparse in (False, True):
                r = run({"res": res, "mode": mode, "sparse": sparse, "gpu": args.gpu})
                rows.append({"res": res, "mode": mode, "sparse": sparse, **r})
                if "error" in r:
                    print(f"{res} | {mode} | {'sparse' if sparse else 'dense'} | {r['error']}")
                    continue
                est = r["estimate"]
                path = "sparse" if sparse else "dense"
                bricks = r["bricks"] if r["bricks"] is not None else "-"
                tail = f"{est / 2**20:.0f} | {est / max(r['peak'], 1):.2f}" if est else "- | -"
                print(f"{res} | {mode} | {path} | {r['time']:.2f} | {r['peak'] / 2**20:.0f} | {r['count']:,} | "
                      f"{bricks} | {tail}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
