"""The spreading 1M liquid of tests/gpu/test_liquid_memory_check_gpu.py frame by frame (issue 24,
session 15, i24b2: with ``VOXFX_SPARSE_PCG_BLOCK=singles`` and ``VOXFX_SPARSE_SETUP_CAPS=together``
its frame-11 peak went 10.4 MiB over the estimate): per frame the pool's in-use peak, the
estimate before the bake and the frame check's need (MiB), the set-up workspace's generation and
coarse capacities, the cached solvers' strides. The switches as the environment sets them; run it
once per way, in processes of their own. ``python3 bench/_memory_check_probe.py [--frames 12] [--where]``;
``--where`` (session 25): each frame's peak also names the checkout's calls that made it (innermost last)."""

import argparse
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tools.package import load  # noqa: E402

load()


def main():
    import cupy as cp

    from flip import spreading_liquid
    from tests.gpu.pool_peak import pool_peak
    from voxfx.kernels.flip import sparse_pressure_solvers, sparse_pressure_workspace

    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--where", action="store_true", help="print the calls that made each frame's peak")
    args = parser.parse_args()
    ways = {k: v for k, v in os.environ.items() if k.startswith("VOXFX_SPARSE_")}
    print("way", ways or "main")
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    sim, estimate, check = spreading_liquid(cp)
    mib = 2 ** 20
    print("estimate (MiB, bricks)", {k: round(v / mib, 2) if k != "bricks" else v for k, v in estimate.items()
                                     if isinstance(v, (int, float))})
    for frame in range(args.frames):
        cp.cuda.Device().synchronize()
        need, _ = check.need(sim)
        with (where_peak(pool) if args.where else pool_peak()) as hook:
            sim.step(1 / 24)
            sim.level_set()
            cp.cuda.Device().synchronize()
        check.seen(sim)
        if args.where:
            print(f"   peak at {' < '.join(reversed(hook.calls))} (the last allocation {hook.size / mib:.2f} MiB)")
        ws = sparse_pressure_workspace._workspaces.get(cp.cuda.Device().id)
        strides = [s.strides for s in sparse_pressure_solvers._solvers.values()]
        dense = [round(0 if s.dense is None else (s.dense.nbytes + (0 if s.dense_shared else s.dense_work.nbytes))
                       / mib, 2) for s in sparse_pressure_solvers._solvers.values()]  # G and its scratch (i24b3)
        print(f"frame {frame} bricks {sim.grid.brick_count()} peak {hook.peak / mib:.2f} estimate "
              f"{estimate['total'] / mib:.2f} need {need / mib:.2f} in use after {pool.used_bytes() / mib:.2f} "
              f"ws gen {None if ws is None else ws.generation} caps {None if ws is None else ws.caps} "
              f"ws held {sparse_pressure_workspace.held_bytes() / mib:.2f} solvers {strides} dense MiB {dense}")


def where_peak(pool):
    """``pool_peak``'s measure that also keeps, at each new peak, the checkout's frames of the
    allocating call (file:line function) and the allocation's size."""
    from cupy.cuda import memory_hook

    class Where(memory_hook.MemoryHook):
        name = "VoxFXProbeWhere"

        def __enter__(self):
            self.peak, self.calls, self.size = pool.used_bytes(), ["(before the frame)"], 0
            return super().__enter__()

        def malloc_postprocess(self, **kwargs):
            used = pool.used_bytes()
            if used > self.peak:
                self.peak, self.size = used, int(kwargs.get("size", 0))
                self.calls = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in traceback.extract_stack()
                              if str(ROOT) in f.filename and "_memory_check_probe" not in f.filename][-6:]

    return Where()


if __name__ == "__main__":
    main()
