"""The whole P2G stage of a sparse FLIP substep accounted launch by launch (issue 24, helper
i24p8): where the row's P2G (``bench/flip_sparse.py``: bin+gather, classify, extrapolate, the
old faces, gravity and boundaries) spends its time, and ways of running it (environment
variables, e.g. the cell types by the division, ``VOXFX_SPARSE_P2G_CELLS``) against each other:

    python3 bench/flip_sparse_p2g_stage.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 9]
                                           [--way 'NAME=VALUE ...' ...]

The dam break runs *substeps* substeps; then the stage (``flip_sparse.timed_sparse_substep``'s
P2G calls, on the same positions) is timed two ways, each ``--way`` in turn (a variable another
way sets is unset unless this one sets it; '' the defaults), *repeat* rounds:

``idle``    as in the row: the device idle when the stage's Python starts (the topology ends
            with a host read), so the time includes the device waiting for the host;
``queued``  a spin kernel (~3 ms) launched first and the start event after it: the host has
            queued the whole stage before the device reaches it, so the time is the
            device's alone.

Per launch (CUDA events around every ``Kernels.launch``/``launch_grid``, queued, the first
way and the last): its device ms; the rest (memsets, copies, allocations' waits) is the
stage less their sum. The host's ms to issue the stage (idle) are printed beside it.

H100 80GB HBM3 (driver 580.159.04), 8M after 4 substeps, 3,198 bricks (two calls): queued 0.81 ms
(count 0.124, scan 0.008 + 0.013, place 0.050, brick scatter 0.412, division 0.037, classify
0.012, extrapolation 0.036 + 0.037, boundaries 0.031, the rest 0.074), idle 0.88–0.97 ms, the
host 0.3–0.67 ms; the numbers and what they decided: ``sparse_gpu``'s notes."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_transfer  # noqa: E402
from voxfx.kernels.grid import launch as launch_module  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402

SPIN = r"""
extern "C" __global__ void spin(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
"""


def p2g_stage(sim, dt):
    """``flip_sparse.timed_sparse_substep``'s P2G stage (its calls, in its order)."""
    g, s = sim.grid, sim.settings
    sparse_transfer.particles_to_grid(g, sim.pos, sim.vel, sim.c, ring=True)
    sparse_transfer.classify(g, sim.pos)
    old = sparse_transfer.extrapolate_and_boundaries(g, add=[np.float32(a * dt) for a in s.gravity])  # as the sim
    return old


class LaunchEvents:
    """While on, an event pair around every ``Kernels`` launch: [(name, start, end)]."""

    def __init__(self, cp):
        self.cp, self.rows, self.on = cp, [], False
        self._launch, self._grid = launch_module.Kernels.launch, launch_module.Kernels.launch_grid
        events = self

        def launch(kernels, name, n, args):
            if not events.on:
                return events._launch(kernels, name, n, args)
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            events._launch(kernels, name, n, args)
            b.record()
            events.rows.append((name, a, b))

        def launch_grid(kernels, name, grid, block, args, shared_mem=0):
            if not events.on:
                return events._grid(kernels, name, grid, block, args, shared_mem)
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            events._grid(kernels, name, grid, block, args, shared_mem)
            b.record()
            events.rows.append((name, a, b))

        launch_module.Kernels.launch, launch_module.Kernels.launch_grid = launch, launch_grid


def timed_stage(cp, sim, dt, spin, queued, events=None):
    """(device ms of the stage, host ms to issue it, [(launch, ms)])."""
    cp.cuda.Device().synchronize()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    if queued:
        spin((1,), (1,), (np.int64(6_000_000),))  # ~3 ms at ~2 GHz
    a.record()
    if events is not None:
        events.rows, events.on = [], True
    t0 = time.perf_counter()
    p2g_stage(sim, dt)
    host = (time.perf_counter() - t0) * 1e3
    if events is not None:
        events.on = False
    b.record()
    b.synchronize()
    rows = [(name, cp.cuda.get_elapsed_time(x, y)) for name, x, y in (events.rows if events else [])]
    return cp.cuda.get_elapsed_time(a, b), host, rows


WAYS = ["", "VOXFX_SPARSE_P2G_CELLS=apart"]


def set_way(ways, way):
    """The environment of *way* (a string of NAME=VALUE), the other *ways*' variables unset."""
    for other in ways:
        for item in other.split():
            os.environ.pop(item.partition("=")[0], None)
    for item in way.split():
        name, _, value = item.partition("=")
        os.environ[name] = value


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--way", action="append", default=None, help="NAME=VALUE ... ('' the defaults); repeat it")
    args = ap.parse_args()
    ways = args.way or WAYS
    import cupy as cp

    _, sim, dt = stepped_dam_break(args)
    print(f"{args.res}³, {int(sim.pos.shape[0]):,} particles, {sim.grid.brick_count()} bricks "
          f"({sim.grid.size:,} pool cells)")
    spin = cp.RawKernel(SPIN, "spin")
    events = LaunchEvents(cp)
    saved = dict(os.environ)
    times = {(w, q): [] for w in ways for q in (False, True)}
    hosts = {w: [] for w in ways}
    for way in ways:  # warm: compiles
        set_way(ways, way)
        timed_stage(cp, sim, dt, spin, True)
    for r in range(args.repeat):
        for way in (ways if r % 2 == 0 else ways[::-1]):
            set_way(ways, way)
            for queued in (False, True):
                ms, host, _ = timed_stage(cp, sim, dt, spin, queued)
                times[(way, queued)].append(ms)
                if not queued:
                    hosts[way].append(host)
    print(f"P2G stage (medians of {args.repeat}, ways alternating) | idle ms | queued ms (device alone) | host ms")
    for way in ways:
        print(f"{way or '(defaults)'} | {np.median(times[(way, False)]):.3f} | "
              f"{np.median(times[(way, True)]):.3f} | {np.median(hosts[way]):.3f}")
    for way in dict.fromkeys([ways[0], ways[-1]]):
        set_way(ways, way)
        per = []
        for _ in range(args.repeat):
            ms, _, rows = timed_stage(cp, sim, dt, spin, True, events)
            per.append((ms, rows))
        names = [n for n, _ in per[0][1]]
        med = [float(np.median([rows[i][1] for _, rows in per])) for i in range(len(names))]
        total = float(np.median([ms for ms, _ in per]))
        print(f"launches, {way or '(defaults)'}, queued (events around each; medians of {args.repeat}):")
        for name, ms in zip(names, med):
            print(f"  {name} | {ms:.3f}")
        print(f"  (launches {sum(med):.3f}; memsets, copies and the rest {total - sum(med):.3f}; stage {total:.3f})")
    set_way(ways, "")
    os.environ.update({k: v for k, v in saved.items() if k.startswith("VOXFX_")})


if __name__ == "__main__":
    main()
