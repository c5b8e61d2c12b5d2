"""Where the 8M substep's pressure stage spends its time outside the PCG loop (issue 24): the
dam break of ``bench/flip_sparse.py`` stepped as that bench's row does (``timed_sparse_substep``,
no sync inside the stage), with marks inside ``solve_pressure`` — per mark the host's clock and
a CUDA event — so that each piece shows both what the host spent queueing it and where the
device was when the host got there. A piece whose device span follows its host span is
host-bound (the device waits on the launches); a sync (a host read) brings the two clocks
together.

    python3 bench/flip_sparse_pressure_timeline.py [--n 256] [--particles 8e6] [--warm 2] [--substeps 4] [--keys]
        [--ab NAME=VALUE ... --ab '']

Marks: enter / exit of ``staged_setup``, ``sparse_pressure_cells.stage``, the workspace's
``unknowns`` and its coarse levels (``_launch_levels``: the host read follows), the warm
start's ``initial_guess``, ``solver_tables``, the solver lookup, ``_load_persist``, the start's
graph asked for (``start_graph``: just before it is queued), the PCG's
checks (``read_control``: each a host read) and ``run_blocks``, the carry; the solve queued
before the set-up's read (``sparse_pressure_solve_ahead``, ``VOXFX_SPARSE_SOLVE_AHEAD=1``). Per substep the
marks in order: host ms and device ms since the stage's first mark, and per piece (mark to
mark) host Δ and device Δ, and the RawKernel launches (``Kernels.launch`` / ``launch_grid``) and graph
replays queued in it (CuPy's own array kernels are not counted); then each piece's median over the
substeps. The printed substeps add the device's lag behind the host at each mark less its least
(~0 where the device waited for the host). ``--ab``: environment
settings the substeps alternate between (the same simulation; each module reads its switch
at import, so only switches read at each solve, or listed in ``_RELOAD``, take effect).
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
from voxfx.kernels.flip import (sparse_pressure, sparse_pressure_cells, sparse_pressure_gpu,  # noqa: E402
                                sparse_pressure_setup, sparse_pressure_solve_ahead, sparse_pressure_workspace)
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import timed_sparse_substep  # noqa: E402

_marks = []  # (label, host s, event, launches so far, graph replays so far) while on
_on = [False]
_count = {"launches": 0, "graphs": 0}  # RawKernel launches (``Kernels``) and graph replays queued, outside captures


def mark(label):
    import cupy as cp

    if _on[0] and not cp.cuda.get_current_stream().is_capturing():
        e = cp.cuda.Event()
        e.record()
        _marks.append((label, time.perf_counter(), e, _count["launches"], _count["graphs"]))


def count_launches():
    """Count ``Kernels.launch`` / ``launch_grid`` calls and ``GraphLoop`` replays queued outside a
    capture (CuPy's own array kernels — fills, casts, copies — are not counted)."""
    import cupy as cp

    from voxfx.kernels.grid import launch

    def counted(plain, key):
        def wrapped(*args, **kw):
            if not cp.cuda.get_current_stream().is_capturing():
                _count[key] += 1
            return plain(*args, **kw)
        return wrapped
    launch.Kernels.launch = counted(launch.Kernels.launch, "launches")
    launch.Kernels.launch_grid = counted(launch.Kernels.launch_grid, "launches")
    plain_run = launch.GraphLoop.run

    def run(self):
        if self.capture() is not None and not cp.cuda.get_current_stream().is_capturing():
            _count["graphs"] += 1
        return plain_run(self)
    launch.GraphLoop.run = run


def _wrap(owner, name, label):
    plain = getattr(owner, name)

    def wrapped(*args, **kw):
        mark(label + " >")
        out = plain(*args, **kw)
        mark(label + " <")
        return out
    setattr(owner, name, wrapped)


_level1_keys = []  # per set-up: what a graph of level 1 (by bricks) would be keyed on (``--keys``)


def watch_level1():
    """``--keys``: per set-up the arguments of level 1's launches that a graph would bake in
    (``sparse_pressure_workspace_levels._level1``: pointers, the brick count, the key base), to
    count how often each changes from one set-up to the next."""
    from voxfx.kernels.flip import sparse_pressure_workspace_levels as levels

    plain = levels._level1

    def wrapped(grid, kind, base, ws, position0):
        topo = grid.topology
        _level1_keys.append({
            "kind": kind.data.ptr, "brick_slot": grid.brick_slot.data.ptr, "topo.keys": topo.keys.data.ptr,
            "topo.slots": topo.slots.data.ptr, "slot_coords": grid.slot_coords.data.ptr,
            "brick_nbr": grid.brick_nbr.data.ptr, "position0": position0.data.ptr,
            "bricks": int(topo.keys.shape[0]), "slots": int(grid.brick_slot.shape[0]), "base": tuple(base),
            "generation": ws.generation})
        return plain(grid, kind, base, ws, position0)
    levels._level1 = wrapped


def report_level1_keys():
    keys = _level1_keys
    if len(keys) < 2:
        return
    same = sum(a == b for a, b in zip(keys, keys[1:]))
    seen, repeats = [], 0
    for k in keys:
        repeats += k in seen[-4:]
        seen.append(k)
    changed = {name: sum(a[name] != b[name] for a, b in zip(keys, keys[1:])) for name in keys[0]}
    print(f"level 1 keys: {len(keys)} set-ups, the same as the last one's {same}, as one of the last four {repeats}; "
          f"changed from the last: {changed}")


def instrument():
    _wrap(sparse_pressure, "solve_pressure", "solve_pressure")
    _wrap(sparse_pressure_setup, "staged_setup", "staged_setup")
    _wrap(sparse_pressure_cells, "stage", "cells stage")
    _wrap(sparse_pressure_workspace, "unknowns", "ws unknowns")
    _wrap(sparse_pressure_workspace, "_launch_levels", "coarse levels")
    _wrap(sparse_pressure_workspace, "build", "ws build")
    _wrap(sparse_pressure, "initial_guess", "initial_guess")
    _wrap(sparse_pressure, "solver_tables", "solver_tables")
    _wrap(sparse_pressure, "_region_mean_removed", "region mean")
    _wrap(sparse_pressure, "carry", "carry")
    _wrap(sparse_pressure_gpu, "_solver", "solver lookup")
    _wrap(sparse_pressure_gpu, "run_blocks", "run_blocks")
    _wrap(sparse_pressure_solve_ahead.Ahead, "_launch", "solve ahead")
    cls = sparse_pressure_gpu.SparsePressureSolverGPU
    _wrap(cls, "_load_persist", "load_persist")
    _wrap(cls, "read_control", "check read")
    _wrap(cls, "solve", "solver.solve")
    _wrap(cls, "start_graph", "start graph")  # the host asks for the start's graph: the lag as it queues it


def substep(sim, dt, ev, sub):
    """One timed substep with marks on; [(label, host ms, device ms)] from the first mark, and
    the stage ms."""
    import cupy as cp

    _marks.clear()
    _on[0] = True
    ms, its, _ = timed_sparse_substep(sim, dt, ev, sub)
    _on[0] = False
    cp.cuda.Device().synchronize()
    label0, h0, e0, n0, g0 = _marks[0]
    rows = [(label, (h - h0) * 1e3, cp.cuda.get_elapsed_time(e0, e), n - n0, g - g0) for label, h, e, n, g in _marks]
    return rows, ms, its


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--substeps", type=int, default=4)
    ap.add_argument("--ab", nargs="*", action="append", default=None, metavar="NAME=VALUE")
    ap.add_argument("--show", type=int, default=1, help="substeps (per way) whose every mark is printed")
    ap.add_argument("--keys", action="store_true", help="count how often level 1's graph key would change")
    args = ap.parse_args()
    import cupy as cp

    ways = [dict(kv.split("=", 1) for kv in way if kv) for way in (args.ab or [[]])]
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    instrument()
    count_launches()
    if args.keys:
        watch_level1()
    plain_env = dict(os.environ)

    def use(way):
        for k in [k for k in os.environ if k.startswith("VOXFX_") and k not in plain_env]:
            del os.environ[k]
        os.environ.update(way)
    for i in range(args.warm * len(ways)):
        use(ways[i % len(ways)])
        timed_sparse_substep(sim, dt, ev, sub)
    pieces = [defaultdict(list) for _ in ways]
    lags = [defaultdict(list) for _ in ways]  # per mark (its first in a substep): the device's lag − its least
    stages = [[] for _ in ways]
    for step in range(args.substeps):
        for w, way in enumerate(ways):
            use(way)
            rows, ms, its = substep(sim, dt, ev, sub)
            stages[w].append((ms, its))
            lag0 = min(d - h for _, h, d, _, _ in rows)
            for label, h, d, _, _ in rows:
                if len(lags[w][label]) <= step:
                    lags[w][label].append(d - h - lag0)
            if step < args.show:
                print(f"\nway {w} {way}, substep {step}: stages {' '.join(f'{m:.2f}' for m in ms)} ms, {its} CG it; "
                      "mark | host ms | device ms | device − host | lag (− its least: ~0 where the device waits) "
                      "| launches, graph replays so far")
                for label, h, d, n, g in rows:
                    print(f"  {label:24s} | {h:7.3f} | {d:7.3f} | {d - h:+7.3f} | {d - h - lag0:7.3f} | {n:3d} {g:3d}")
            seen = defaultdict(int)
            for (a, ha, da, na, ga), (b, hb, db, nb, gb) in zip(rows, rows[1:]):
                key = f"{a} .. {b}"
                seen[key] += 1
                key = key if seen[key] == 1 else f"{key} #{seen[key]}"
                pieces[w][key].append((hb - ha, db - da, nb - na, gb - ga))
            pieces[w]["(whole: first to last mark)"].append((rows[-1][1], rows[-1][2], rows[-1][3], rows[-1][4]))
    for w, way in enumerate(ways):
        med = np.median(np.array([m for m, _ in stages[w]]), axis=0)
        print(f"\nway {w} {way}: stage medians topology {med[0]:.2f} p2g {med[1]:.2f} pressure {med[2]:.2f} "
              f"project {med[3]:.2f} g2p {med[4]:.2f} substep {med.sum():.2f}; CG it {[i for _, i in stages[w]]}")
        print("  piece (mark .. mark) | host Δ ms | device Δ ms (medians) | launches, graph replays (medians) "
              "| substeps")
        for key, vals in pieces[w].items():
            a = np.median(np.array(vals), axis=0)
            print(f"  {key:52s} | {a[0]:7.3f} | {a[1]:7.3f} | {a[2]:5.1f} {a[3]:4.1f} | {len(vals)}")
        print("  the device's lag at each mark's first (− its least; ~0 where the device waited), medians: "
              + ", ".join(f"{label} {np.median(v):.3f}" for label, v in lags[w].items() if "check read" not in label))
    print(f"solve ahead (launched, taken, missed): {sparse_pressure_solve_ahead.counts}")
    print(f"coarse levels' graphs: {sparse_pressure_workspace.workspace().graphs.counts}")
    report_level1_keys()
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB")


if __name__ == "__main__":
    main()
