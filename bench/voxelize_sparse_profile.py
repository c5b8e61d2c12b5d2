"""A/B of the device sparse voxelizer's variants (``gpu_sparse``'s module settings) on the
bunny, in one process: per grid size, mode and variant the best wall time of *repeat* runs
(synchronised, compiles excluded), the device pool's peak (as bench/voxelize_sparse.py: the
pool's bytes after a run from an empty pool) and the peak of live allocations with the
stage it fell in, then one instrumented run: the time of each stage (CUDA events at
``gpu_sparse._stage``) and of each kernel launch (events around ``Kernels.launch``). Every
variant's bricks and runs are compared with the first variant's (bit for bit).

    python3 bench/voxelize_sparse_profile.py [--sizes 2048,4096] [--modes surface,solid,solid+surface]
        [--variants "old:SURFACE_KERNEL=tiles,SOLID_KEYS=64,CANDIDATE_KEYS=64;new:SURFACE_KERNEL=auto"]
        [--repeat 3]

Settings that are compile-time defines (TILE3_BLOCKS, TILE3_SHARED_SETUP, ...) recompile
the kernels (``gpu_sparse.kernels()``).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from tests.meshes import bunny  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402
from voxfx.kernels.voxelize import gpu_sparse  # noqa: E402
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse  # noqa: E402

# The launches before issue 11's device speed work (tiles, 64-bit candidates and crossing keys) against today's.
DEFAULT_VARIANTS = "old:SURFACE_KERNEL=tiles,SOLID_KEYS=64,CANDIDATE_KEYS=64;new:SURFACE_KERNEL=auto"


def spec_for(v, res):
    lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)
    return GridSpec(spec.origin, spec.voxel_size, tuple(-(-s // 64) * 64 for s in spec.shape))


def parse_variants(text):
    out = []
    for part in text.split(";"):
        name, _, settings = part.partition(":")
        values = {}
        for item in filter(None, settings.split(",")):
            key, _, value = item.partition("=")
            values[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
        out.append((name.strip(), values))
    return out


def apply(values):
    """Set the variant's module settings; its kernels compiled with them."""
    for key, value in values.items():
        setattr(gpu_sparse, key, value)
    gpu_sparse._K = gpu_sparse.kernels()


class PeakHook:
    """Live device allocations: their peak, and the stage and line where it was reached."""

    def __init__(self, cp):
        base = cp.cuda.MemoryHook

        class Hook(base):
            name = "voxfx_peak"

            def __init__(hook):
                super().__init__()
                hook.live, hook.now, hook.peak, hook.where = {}, 0, 0, ""

            def malloc_postprocess(hook, device_id, size, mem_size, mem_ptr, pmem_id):
                hook.live[mem_ptr] = mem_size
                hook.now += mem_size
                if hook.now > hook.peak:
                    hook.peak = hook.now
                    stage = gpu_sparse.STAGES[-1][0] if gpu_sparse.STAGES else "start"
                    frames = [f for f in traceback.extract_stack() if "voxfx" in f.filename or "kernels" in f.filename]
                    line = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
                    hook.where = f"after '{stage}', at {line}"

            def free_postprocess(hook, device_id, mem_size, mem_ptr, pmem_id):
                hook.now -= hook.live.pop(mem_ptr, 0)

        self.hook = Hook()


def run_once(v, t, spec, mode, cp):
    return voxelize_sparse(v, t, spec, mode, tile=64, xp=cp, tiles=True)


def timed(v, t, spec, mode, cp, repeat):
    pool = cp.get_default_memory_pool()
    best, grid, peak = float("inf"), None, 0
    for _ in range(repeat):
        grid = None
        pool.free_all_blocks()
        before = pool.total_bytes()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        grid = run_once(v, t, spec, mode, cp)
        cp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
        peak = pool.total_bytes() - before
    return grid, best, peak


def instrumented(v, t, spec, mode, cp):
    """(stages [(name, ms)], launches {name: (ms, count)}, live peak bytes, where)."""
    launches = []
    modules = list(gpu_sparse._K.values())  # one Kernels per kernel file
    plain = [k.launch for k in modules]

    def with_events(plain_launch):
        def launch(name, n, args):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            plain_launch(name, n, args)
            b.record()
            launches.append((name, a, b))

        return launch

    for k, plain_launch in zip(modules, plain):
        k.launch = with_events(plain_launch)
    gpu_sparse.STAGES = []
    cp.get_default_memory_pool().free_all_blocks()
    peak = PeakHook(cp)
    start = cp.cuda.Event()
    start.record()
    try:
        with peak.hook:
            grid = run_once(v, t, spec, mode, cp)
        end = cp.cuda.Event()
        end.record()
        end.synchronize()
    finally:
        for k, plain_launch in zip(modules, plain):
            k.launch = plain_launch
        stages_raw, gpu_sparse.STAGES = gpu_sparse.STAGES, None
    stages, last = [], start
    for name, ev in stages_raw:
        stages.append((name, cp.cuda.get_elapsed_time(last, ev)))
        last = ev
    stages.append(("end", cp.cuda.get_elapsed_time(last, end)))
    per = defaultdict(lambda: [0.0, 0])
    for name, a, b in launches:
        per[name][0] += cp.cuda.get_elapsed_time(a, b)
        per[name][1] += 1
    del grid
    return stages, dict(per), peak.hook.peak, peak.hook.where, cp.cuda.get_elapsed_time(start, end)


def same(a, b):
    if a.topology.count != b.topology.count:
        return False
    if not bool((a.topology.keys == b.topology.keys).all()):
        return False
    if not bool((a.channels[CHANNEL] == b.channels[CHANNEL]).all()):
        return False
    ta, tb = a.tiles.get(CHANNEL), b.tiles.get(CHANNEL)
    if (ta is None) != (tb is None):
        return False
    return ta is None or (ta.runs.shape == tb.runs.shape and bool((ta.runs == tb.runs).all()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2048,4096")
    ap.add_argument("--modes", default="surface,solid,solid+surface")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-events", action="store_true", help="skip the instrumented run")
    args = ap.parse_args(argv)
    import cupy as cp

    mesh, why = bunny()
    if mesh is None:
        print(f"no bunny: {why}")
        return 1
    v, t = mesh
    variants = parse_variants(args.variants)
    defaults = {key: getattr(gpu_sparse, key) for _, values in variants for key in values if hasattr(gpu_sparse, key)}
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {cp.__version__}")
    for _, values in variants:  # compile every kernel first
        apply({**defaults, **values})
        for mode in args.modes.split(","):
            run_once(v, t, spec_for(v, 64), mode, cp)
    rows = []
    for res in [int(s) for s in args.sizes.split(",")]:
        spec = spec_for(v, res)
        for mode in args.modes.split(","):
            first = None
            for name, values in variants:
                apply({**defaults, **values})
                grid, sec, peak = timed(v, t, spec, mode, cp, args.repeat)
                identical = "-" if first is None else str(same(first, grid))
                if first is None:
                    first = grid
                del grid
                line = (f"{res}³ | {mode} | {name} | {1e3 * sec:.2f} ms | pool peak {peak / 2**20:.0f} MiB | "
                        f"same as {variants[0][0]}: {identical}")
                print(line, flush=True)
                rows.append(line)
                if args.no_events:
                    continue
                stages, per, live, where, span = instrumented(v, t, spec, mode, cp)
                print(f"    events: gpu span {span:.2f} ms; live peak {live / 2**20:.0f} MiB {where}")
                print("    stages: " + ", ".join(f"{n} {ms:.2f}" for n, ms in stages))
                for kname, (ms, count) in sorted(per.items(), key=lambda x: -x[1][0]):
                    print(f"      {kname:28s} {ms:8.3f} ms  launches {count}")
            del first
            apply(defaults)
    print("\nsummary")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
