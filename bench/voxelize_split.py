"""Voxelize → Volume split into z-slabs under a real memory limit (issue 21 §6).

Each case runs in a fresh headless-Blender (bpy) subprocess: a 1 m cube (or Suzanne),
the operator's job (``voxelize_job``) with the Volume output, under ``RLIMIT_AS`` =
*limit* (absolute, bytes) or VmSize + *headroom*, set just before the job. Optionally the
same job first runs without a limit (*unsplit*), for the test that compares the two VDB
files. Prints the state, the report lines (the split's), the peak RSS (VmHWM) and the
VDB path(s).

    /work/envs/v50/bin/python bench/voxelize_split.py --res 1024 --limit-gib 16 [--mode surface]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from memory import CHILD_SETUP  # noqa: E402 - the shared start of a bench child

CHILD = textwrap.dedent(CHILD_SETUP + """
    import resource, shutil, time

    def run(tag):
        request = op.Request(mode=case["mode"], resolution=case["res"], fill_holes=case.get("fill_holes", False),
                             include_edges=False, outputs={{"volume"}}, cache_dir=tmp + "/")
        warnings = []
        t0 = time.perf_counter()
        runner = JobRunner(op.voxelize_job(bpy.context, [obj], request, warnings))
        state = runner.run()
        files = [f for r in (runner.result or []) for f in r.files]
        kept = []
        for f in files:  # a later run deletes earlier files of the same result: keep a copy
            kept.append(os.path.join(tmp, tag + ".vdb"))
            shutil.copyfile(f, kept[-1])
        return {{"state": state, "error": runner.error, "warnings": warnings, "files": kept,
                 "count": sum(r.count for r in (runner.result or [])), "seconds": time.perf_counter() - t0,
                 "estimate": dict(op.LAST_ESTIMATE)}}

    out = {{}}
    if case.get("unsplit"):
        out["unsplit"] = run("unsplit")
    import gc
    gc.collect()
    before = status()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    limit = case.get("limit") or before["VmSize"] + case["headroom"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    out["limited"] = run("limited")
    after = status()
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    out["limited"].update({{"limit": limit, "rss_before": before["VmRSS"], "peak_rss": after["VmHWM"],
                            "measured": after["VmHWM"] - before["VmRSS"]}})
    print("RESULT", json.dumps(out))
""")


def run_case(case: dict, timeout: float = 1800) -> dict:
    code = CHILD.format(root=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code, json.dumps(case)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"case {case} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--res", type=int, default=1024)
    ap.add_argument("--limit-gib", type=float, default=16.0)
    ap.add_argument("--mode", default="surface")
    ap.add_argument("--shape", default="cube")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = run_case({"shape": args.shape, "mode": args.mode, "res": args.res, "limit": int(args.limit_gib * 2 ** 30)})
    r = out["limited"]
    print(json.dumps(r, indent=1))
    print(f"{args.shape} {args.mode} res {args.res} under RLIMIT_AS {args.limit_gib} GiB: {r['state']}, "
          f"{r['count']:,} voxels, peak RSS {r['peak_rss'] / 2**30:.2f} GiB (job +{r['measured'] / 2**30:.2f} GiB), "
          f"estimate {r['estimate'].get('total', 0) / 2**30:.2f} GiB, job {r['seconds']:.0f} s "
          f"(wall {time.perf_counter() - t0:.0f} s)")
    return 0 if r["state"] == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main())
