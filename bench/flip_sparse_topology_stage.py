"""Where the sparse FLIP topology stage's time goes at 8M (issue 24): the dam break of
``bench/flip_sparse.py`` on the GPU, substeps as that bench times them (the device idle when the
stage starts, as after ``step``'s CFL read), the stage (``SparseFlipGrid.update``) split into

- the host's time line (``perf_counter``) at its marks: start, the pipeline queued
  (``launch_fused_update`` returned), the flags read (``update_topology_fused`` entered, or
  ``incremental_keys`` returned), ``retopologize`` and ``fused_tables`` in and out, the end;
- the GPU's (a CUDA event at each mark): the stage's device time from start to end, and
  (every other substep, ``--kernels``) a CUDA event pair around every kernel launch with the host
  time of the launch call itself, so the kernels' sum beside the stage's time is the device's
  idle time (the host's launches and Python after the read);
- the memory pool's allocations in the stage (a CuPy memory hook: pool mallocs, and the
  ``cudaMalloc`` calls beneath them with their host time and bytes);
- the pool's growth: the capacity before and after, and the bytes ``retopologize`` allocates
  then.

    python3 bench/flip_sparse_topology_stage.py [--row 8m] [--steps 16] [--warm 3] [--ab NAME=VALUE ...]
                                                [--profile N] [--kept-channels]

``--ab NAME=VALUE ...`` (repeatable; '' for the defaults): the substeps alternate between the ways,
each way's table apart. ``--profile N``: after the timed substeps, N more (the first way's) with the
stage's host code under ``cProfile`` (its own overhead inflates every Python call: the shares, not
the times, are the point), the functions and CuPy calls with the most own time printed.
``--kept-channels``: the grid also holds the six channels a time-centred substep keeps across the
update (``KeptBricks.KEPT``; the Fast and Balanced timings' ``time_centred_advection``), so
``retopologize`` carries seven kept channels (with the warm start's) as the product's substeps do.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_topology_gpu as topo_gpu  # noqa: E402
from voxfx.kernels.flip import sparse_topology_tables as topo_tables  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid  # noqa: E402
from voxfx.kernels.grid.launch import Kernels  # noqa: E402
from voxfx.kernels.grid.sparse_mac import SparseMacGrid  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import scene  # noqa: E402
from flip_sparse import ROWS, timed_sparse_substep  # noqa: E402


class Timeline:
    """Host times and CUDA events at named marks of one stage; kernel launches when tracing."""

    def __init__(self, cp):
        self.cp = cp
        self.active = False
        self.tracing = False
        self.marks = []  # (name, host s, event)
        self.launches = []  # (name, host µs of the call, start event, end event)
        self.in_stage = False  # between the marks start and end (the memory hook counts then)
        self.profiler = None  # a cProfile.Profile enabled between start and end (--profile)

    def mark(self, name):
        if name in ("start", "end"):
            self.in_stage = name == "start" and self.active
            if self.profiler is not None:
                (self.profiler.enable if name == "start" else self.profiler.disable)()
        if self.active:
            e = self.cp.cuda.Event()
            e.record()
            self.marks.append((name, time.perf_counter(), e))

    def reset(self, tracing):
        self.marks, self.launches, self.tracing = [], [], tracing


def instrument(cp, tl, fine=False):
    """Wrap the stage's calls and the launches (*fine*: more marks); returns the undo."""
    saved = []

    def wrap(owner, attr, before=None, after=None):
        original = getattr(owner, attr)
        saved.append((owner, attr, original))

        def wrapped(*a, **k):
            if before:
                tl.mark(before)
            try:
                return original(*a, **k)
            finally:
                if after:
                    tl.mark(after)

        setattr(owner, attr, wrapped)

    wrap(SparseFlipGrid, "update", "start", "end")
    wrap(topo_gpu, "launch_fused_update", None, "queued")
    wrap(topo_gpu, "update_topology_fused", "read", None)
    wrap(topo_gpu, "incremental_keys", None, "keys")
    wrap(SparseMacGrid, "retopologize", "retopologize in", "retopologize out")
    wrap(topo_tables, "fused_tables", "tables in", "tables out")
    if fine:  # --fine: the pieces between (host gaps, ``report``'s mark-to-mark table)
        from voxfx.kernels.flip import sparse_reach
        from voxfx.kernels.flip import sparse_topology_ahead as topo_ahead
        from voxfx.kernels.flip import sparse_topology_tables_ahead as tables_ahead

        wrap(topo_gpu, "brick_index", None, "index")
        wrap(topo_ahead, "take", None, "ahead taken")
        wrap(topo_gpu, "_reach_work", None, "work")
        wrap(topo_ahead, "mark_occupied", None, "marked")
        wrap(sparse_reach, "launch_slots", None, "slots")
        wrap(tables_ahead, "read", "read in", "read out")
        wrap(tables_ahead, "_queue", "queue in", "queue out")
        wrap(topo_gpu, "update_topology_fused", None, "sliced")
        wrap(tables_ahead, "take", None, "taken")
    launch0, grid0 = Kernels.launch, Kernels.launch_grid

    def traced(call, name, *a, **k):
        if not (tl.in_stage and tl.tracing):  # the stage's launches only (none in a graph capture)
            return call(*a, **k)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        h = time.perf_counter()
        out = call(*a, **k)
        h = (time.perf_counter() - h) * 1e6
        e1.record()
        tl.launches.append((name, h, e0, e1))
        return out

    def launch(self, name, n, args):
        return traced(launch0, name, self, name, n, args)

    def launch_grid(self, name, grid, block, args, shared_mem=0):
        return traced(grid0, name, self, name, grid, block, args, shared_mem)

    Kernels.launch, Kernels.launch_grid = launch, launch_grid

    def undo():
        for owner, attr, original in reversed(saved):  # a twice-wrapped call back to its original
            setattr(owner, attr, original)
        Kernels.launch, Kernels.launch_grid = launch0, grid0
    return undo


def memory_hook(cp, tl):
    """A CuPy memory hook counting the stage's pool mallocs and the cudaMallocs beneath (host µs,
    bytes): those while *tl* is in the stage."""
    from cupy.cuda import memory_hook

    class Hook(memory_hook.MemoryHook):
        name = "TopologyStageHook"

        def __init__(self):
            self.reset()

        def reset(self):
            self.mallocs, self.allocs, self.alloc_us, self.alloc_bytes, self._t = 0, 0, 0.0, 0, 0.0

        def malloc_preprocess(self, **kw):
            self.mallocs += int(tl.in_stage)

        def alloc_preprocess(self, **kw):
            self._t = time.perf_counter()

        def alloc_postprocess(self, **kw):
            if not tl.in_stage:
                return
            self.allocs += 1
            self.alloc_us += (time.perf_counter() - self._t) * 1e6
            self.alloc_bytes += int(kw.get("mem_size", 0))

    return Hook()


def analyse(cp, tl, hook, cap0, cap1, changed):
    """One substep's row (a dict of µs and counts)."""
    marks = tl.marks
    first = {}
    last = {}
    for name, h, e in marks:
        first.setdefault(name, (h, e))
        last[name] = (h, e)
    h0, e0 = first["start"]
    h1, e1 = last["end"]
    e1.synchronize()
    row = {"changed": changed, "grown": cap1 > cap0, "cap": cap1, "gpu": cp.cuda.get_elapsed_time(e0, e1) * 1e3,
           "host": (h1 - h0) * 1e6, "mallocs": hook.mallocs, "cudaMalloc": hook.allocs, "cudaMalloc µs": hook.alloc_us,
           "cudaMalloc MB": hook.alloc_bytes / 2 ** 20}
    if "queued" in first:
        row["host pre-read"] = (first["queued"][0] - h0) * 1e6
        read = first.get("read", last.get("keys"))
        if read is not None:
            row["read wait"] = (read[0] - first["queued"][0]) * 1e6
            row["host post-read"] = (h1 - read[0]) * 1e6
            row["gpu pre-read"] = cp.cuda.get_elapsed_time(e0, first["queued"][1]) * 1e3
            row["gpu post-read"] = cp.cuda.get_elapsed_time(read[1], e1) * 1e3
    if "retopologize in" in first:
        row["retopologize host"] = (last["retopologize out"][0] - first["retopologize in"][0]) * 1e6
    if "tables in" in first:
        row["tables host"] = (last["tables out"][0] - first["tables in"][0]) * 1e6
    seq = [(name, h) for name, h, _ in marks]
    row["gaps"] = [(a[0] + " > " + b[0], (b[1] - a[1]) * 1e6) for a, b in zip(seq, seq[1:])]
    if tl.tracing:
        ks = [(n, h, cp.cuda.get_elapsed_time(a, b) * 1e3) for n, h, a, b in tl.launches]
        row["kernels"] = ks
        row["kernel sum"] = sum(k[2] for k in ks)
        row["launches"] = len(ks)
        row["launch host"] = sum(k[1] for k in ks)
    return row


def report(rows, label):
    print(f"\n== {label}: {len(rows)} substeps")
    cols = ["changed", "grown", "cap", "gpu", "host", "host pre-read", "read wait", "host post-read", "gpu pre-read",
            "gpu post-read", "retopologize host", "tables host", "kernel sum", "launches", "launch host", "mallocs",
            "cudaMalloc", "cudaMalloc µs", "cudaMalloc MB"]
    print("substep | " + " | ".join(cols))
    for i, r in enumerate(rows):
        print(f"{i} | " + " | ".join(f"{r[c]:.0f}" if isinstance(r.get(c), float) else str(r.get(c, "-"))
                                     for c in cols))
    for title, sel in (("bricks changed", lambda r: r["changed"]), ("no brick changed", lambda r: not r["changed"]),
                       ("pool grew", lambda r: r["grown"]), ("changed, pool kept", lambda r: r["changed"]
                                                             and not r["grown"])):
        part = [r for r in rows if sel(r)]
        if not part:
            continue
        med = {c: float(np.median([r[c] for r in part if c in r])) for c in cols[3:] if any(c in r for r in part)}
        print(f"median µs, {title} ({len(part)}): " + ", ".join(f"{c} {v:.0f}" for c, v in med.items()))
    gaps = defaultdict(list)
    changed = [r for r in rows if r["changed"] and not r["grown"] and "kernels" not in r]  # untraced
    for r in changed:
        for k, (name, us) in enumerate(r["gaps"]):
            gaps[(k, name)].append(us)
    if changed:
        print(f"host gaps mark to mark, changed substeps, pool kept ({len(changed)}): median µs (count)")
        print("; ".join(f"{name} {np.median(v):.1f} ({len(v)})" for (_, name), v in sorted(gaps.items())))
    per = defaultdict(list)
    host = defaultdict(list)
    count = defaultdict(int)
    traced = [r for r in rows if "kernels" in r]
    for r in traced:
        for n, h, g in r["kernels"]:
            per[n].append(g)
            host[n].append(h)
            count[n] += 1
    if traced:
        print("kernel | median GPU µs | median host µs of the launch call | launches a traced substep")
        for n in sorted(per, key=lambda n: -np.median(per[n]) * count[n]):
            print(f"{n} | {np.median(per[n]):.1f} | {np.median(host[n]):.1f} | {count[n] / len(traced):.2f}")


def profile(sim, tl, ev, sub, way, steps):
    """*steps* substeps of *way* with the stage under cProfile; the top of its own-time table."""
    import cProfile
    import io
    import pstats

    for item in way:
        name, _, value = item.partition("=")
        os.environ[name] = value
    tl.profiler = cProfile.Profile()
    tl.reset(tracing=False)
    tl.active = False
    for _ in range(steps):
        timed_sparse_substep(sim, 1 / 120, ev, sub)
    tl.profiler, profiler = None, tl.profiler
    stats = pstats.Stats(profiler, stream=io.StringIO()).stats
    rows = sorted(((tt, nc, f"{Path(file).name}:{line}({name})" if line else name)
                   for (file, line, name), (_, nc, tt, _, _) in stats.items()), reverse=True)
    print(f"\n== cProfile of the stage, {steps} substeps ({' '.join(way) or '(defaults)'}), by own time "
          f"(total {sum(r[0] for r in rows) / steps * 1e6:.0f} µs a substep)")
    print("own µs a substep | calls a substep | own µs a call | function")
    for tt, nc, name in rows[:45]:
        print(f"{tt / steps * 1e6:.1f} | {nc / steps:.1f} | {tt / nc * 1e6:.2f} | {name}")
    cum = sorted(((ct, nc, f"{Path(file).name}:{line}({name})")
                  for (file, line, name), (_, nc, _, ct, _) in stats.items() if line), reverse=True)
    print("cumulative µs a substep | calls a substep | function (Python functions)")
    for ct, nc, name in cum[:40]:
        print(f"{ct / steps * 1e6:.1f} | {nc / steps:.1f} | {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", choices=sorted(ROWS), default="8m")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--ab", nargs="+", action="append", default=None, metavar="NAME=VALUE")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--fine", action="store_true", help="more marks inside the stage (the host's pieces)")
    ap.add_argument("--kept-channels", action="store_true", help="the time-centred substep's six kept channels")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    ways = [[x for x in w if x] for w in (args.ab or [[""]])]
    n, particles = ROWS[args.row]
    spec, v, t = scene(n, particles, "dam")
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    if args.kept_channels:  # as KeptBricks._keep_velocity adds them (the step replaces them; here kept)
        for name in sim.KEPT:
            sim.grid.add(name, cp.uint8 if "fluid" in name else cp.float32, 0)
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    tl = Timeline(cp)
    hook = memory_hook(cp, tl)
    undo = instrument(cp, tl, args.fine)
    rows = {w: [] for w in range(len(ways))}
    try:
        for i in range(args.warm + args.steps):
            for w in (range(len(ways)) if i % 2 == 0 else reversed(range(len(ways)))):
                for way in ways:
                    for item in way:
                        os.environ.pop(item.partition("=")[0], None)
                for item in ways[w]:
                    name, _, value = item.partition("=")
                    os.environ[name] = value
                cap0 = sim.grid.capacity
                timed = i >= args.warm
                tl.reset(tracing=timed and (i // 2) % 2 == 1)
                tl.active = timed
                hook.reset()
                if timed:
                    with hook:
                        ms, _, part = timed_sparse_substep(sim, 1 / 120, ev, sub)
                else:
                    ms, _, part = timed_sparse_substep(sim, 1 / 120, ev, sub)
                tl.active = False
                if timed:
                    r = analyse(cp, tl, hook, cap0, sim.grid.capacity, bool(part[-1]))
                    r["stage ms (bench)"] = ms[0]
                    rows[w].append(r)
        if args.profile:
            profile(sim, tl, ev, sub, ways[0], args.profile)
    finally:
        undo()
    print(f"{n}³, {len(sim.pos):,} particles, {sim.grid.brick_count():,} bricks, capacity {sim.grid.capacity:,}")
    for w, way in enumerate(ways):
        report(rows[w], " ".join(way) or "(defaults)")
        print("stage ms (bench's events), median: "
              f"{np.median([r['stage ms (bench)'] for r in rows[w]]):.3f}")


if __name__ == "__main__":
    main()
