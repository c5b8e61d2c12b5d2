"""How fast this process's host is, core by core (issue 24: the same 8M row reads 5.0 ms in one process and
6.3–6.9 in another; every host-paced piece follows the host). One process moves its main thread to each CPU
in turn (``os.sched_setaffinity``) and on each times, best of three runs, the host µs of: a tiny RawKernel
launch of 25 arguments (as ``bench/cupy_host_ops.py``), a CuPy elementwise op on 4,000 floats (``a + b``
into a kept output), a pure-Python loop (no CuPy: the interpreter's speed on that core), and NumPy's
cumsum and add of 20,000 float64 (a chain of dependent adds, which a busy SMT sibling barely slows while a
lower clock slows it in full, against independent vectorised adds). The process's own affinity ("start")
is timed first and last. Each row names the CPU, its MHz (/proc/cpuinfo) and the steal jiffies the run saw
(/proc/stat); the first lines name the process: PID, Python, the CPUs it may use, its migrations and
context switches.

    python3 bench/host_pace.py [--cpus 0 1 ...] [--calls 500] [--hold S] [--after SCRIPT ARGS...]

``--after`` runs SCRIPT (e.g. ``bench/flip_sparse.py --row 8m ...``) in this process first, then times
this process's host as above (``--cpus`` with no CPU: only as it runs): a row's numbers and its process's
host speed side by side.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.package import load  # noqa: E402

load()
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _host_probe import on_cpu, probe  # noqa: E402
from _host_probe import work as python_loop  # noqa: E402  (the fixed piece of interpreter work)
from cupy_host_ops import SOURCE, best_us, nothing_arguments  # noqa: E402  (the launch timed: mark_occupied's shape; its timer)


def steal() -> int:
    """The machine's steal jiffies so far (/proc/stat's 'cpu' line, 8th number)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def mhz() -> dict[int, float]:
    """Each CPU's MHz as /proc/cpuinfo reads now."""
    out, cpu = {}, None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("processor"):
                cpu = int(line.split(":")[1])
            elif line.startswith("cpu MHz") and cpu is not None:
                out[cpu] = float(line.split(":")[1])
    return out


def sched() -> str:
    """This process's migrations and context switches (/proc/self/sched, /proc/self/status)."""
    keys = {}
    try:
        with open("/proc/self/sched") as f:
            for line in f:
                if "nr_migrations" in line or "nr_involuntary" in line or "nr_voluntary" in line:
                    name, value = line.split(":")
                    keys[name.strip().split(".")[-1]] = value.strip()
    except OSError:
        pass
    return ", ".join(f"{k} {v}" for k, v in keys.items()) or "no /proc/self/sched"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpus", type=int, nargs="*", default=None, help="the CPUs to visit (default: all allowed)")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--hold", type=float, default=0, help="then S seconds of every CPU's probe (hold())")
    ap.add_argument("--after", nargs=argparse.REMAINDER, default=None, help="a script and its arguments run first")
    args = ap.parse_args()
    if args.after:
        sys.argv = list(args.after)
        runpy.run_path(args.after[0], run_name="__main__")
        print(f"after {' '.join(args.after)}: on CPU {on_cpu()}; " + sched(), flush=True)
    import cupy as cp

    start = os.sched_getaffinity(0)
    cpus = sorted(start) if args.cpus is None else args.cpus
    print(f"pid {os.getpid()}, Python {sys.version.split()[0]} {sys.executable} flags {sys.flags.optimize}"
          f"/{sys.flags.dev_mode}, hash seed {os.environ.get('PYTHONHASHSEED', 'random')}, CuPy {cp.__version__}, "
          f"allowed CPUs {min(start)}-{max(start)} ({len(start)}), on CPU {on_cpu()}")
    stream = cp.cuda.get_current_stream()
    raw = cp.RawModule(code=SOURCE).get_function("nothing")
    buf = cp.zeros(1 << 16, cp.uint8)
    small = cp.arange(4000, dtype=cp.int32)
    flags = cp.zeros(5, cp.uint64)
    launch_args = nothing_arguments((buf, small, small, flags, buf.view(cp.float32), buf.view(cp.uint32)))
    a = cp.ones(4000, cp.float32)
    b = cp.ones(4000, cp.float32)
    c = cp.empty_like(a)

    x, y, z = np.ones(20_000), np.ones(20_000), np.empty(20_000)
    rows = [("launch", lambda: raw((1,), (32,), launch_args), args.calls),
            ("a + b", lambda: cp.add(a, b, out=c), args.calls),
            ("Python loop", python_loop, args.calls // 5),
            ("NumPy cumsum 20k", lambda: np.cumsum(x, out=z), args.calls // 10),  # a chain of dependent adds
            ("NumPy add 20k", lambda: np.add(x, y, out=z), args.calls // 10)]  # independent adds, vectorised
    print("cpu | MHz | " + " | ".join(f"{name} µs" for name, _, _ in rows) + " | steal jiffies | ran on")
    for cpu in ["start"] + cpus + ["start"]:
        os.sched_setaffinity(0, start if cpu == "start" else {cpu})
        s0 = steal()
        times = [best_us(fn, n, stream, runs=3) for _, fn, n in rows]
        where = on_cpu()
        print(f"{cpu} | {mhz().get(where, 0):.0f} | " + " | ".join(f"{t:.2f}" for t in times)
              + f" | {steal() - s0} | {where}", flush=True)
    print("sched: " + sched())
    if args.hold:
        hold(args.hold)


def hold(seconds: float, every: float = 0.5):
    """Every *every* s for *seconds*: each allowed CPU's probe (``_host_probe.probe``), a line of q
    (within 30% of the quickest) or s a CPU: how long a quick CPU stays quick."""
    start = os.sched_getaffinity(0)
    cpus = sorted(start)
    print(f"hold: CPUs {cpus[0]}-{cpus[-1]} probed every {every} s (q: within 30% of the quickest, s: slower)")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        times = {cpu: probe(cpu) for cpu in cpus}
        best = min(times.values())
        print(f"{time.perf_counter() - t0:5.1f} s | {''.join('q' if times[c] < 1.3 * best else 's' for c in cpus)} | "
              f"quickest {best:.1f} µs, slowest {max(times.values()):.1f}", flush=True)
        os.sched_setaffinity(0, start)
        time.sleep(every)


if __name__ == "__main__":
    main()
