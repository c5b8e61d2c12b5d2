"""Each pressure set-up kernel's own device time at 8M (issue 24, item 1): the dam break of
``bench/flip_sparse.py`` stepped as its row does (``timed_sparse_substep``), and in the
measured substeps every RawKernel launch of ``solve_pressure`` outside a graph capture
preceded by a one-thread spin kernel (``--spin-us`` of the device's global timer), so that the
host has queued the event pair and the launch before the device reaches them: the pair
spans the kernel alone (its launch latency on the device included, the host's not). Between
two launches a third event closes what ran in between (CuPy array code: fills, casts,
copies, and any idle the host left). Each launch is filed under the innermost piece running
(``cells stage``, ``ws unknowns``, ``coarse levels``, ``solve ahead``, else ``other``: the
rest of ``solve_pressure``; launches outside it are not timed); graph replays (the PCG loop)
are not launches and not timed.

    python3 bench/flip_sparse_setup_kernels.py [--n 256] [--particles 8e6] [--warm 2] [--substeps 4]
        [--set module.NAME=VALUE ... --set '']

Per way (``--set``: module attributes patched for that way's substeps, the ways in turn each
substep on one simulation; ``sparse_pressure_setup.TAIL_BOUND=0`` e.g., or environment
variables read at each solve: ``VOXFX_SPARSE_SETUP_WIDEN=thread``) and piece: per kernel
the launches a substep, the blocks of its launches, the bytes of the device arrays it is
passed (capacities, an upper bound of what a launch may touch), its device ms a substep
(median over the substeps) and those bytes over that time; then the piece's kernels' sum
and its in-between time. The spin kernels lengthen the stage; the pieces' own spans without
them are ``bench/flip_sparse_pressure_timeline.py``'s.
"""

from __future__ import annotations

import argparse
import importlib
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
from voxfx.kernels.flip import (sparse_pressure, sparse_pressure_cells, sparse_pressure_solve_ahead,  # noqa: E402
                                sparse_pressure_workspace)
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid import launch  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import timed_sparse_substep  # noqa: E402

_SPIN = r"""
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void spin(long long ns) {
    const unsigned long long t0 = now_ns();
    while ((long long)(now_ns() - t0) < ns) { }
}
"""
_on = [False]
_stack = []  # the pieces running (innermost last)
_records = []  # (piece, name, blocks, arg bytes, start, end, between start, between end)
_state = {"spin": None, "ns": 0, "last": None}


def _piece(owner, attr, label):
    plain = getattr(owner, attr)

    def wrapped(*args, **kw):
        _stack.append(label)
        try:
            return plain(*args, **kw)
        finally:
            _stack.pop()
    setattr(owner, attr, wrapped)


def _arg_bytes(args) -> int:
    import cupy as cp

    return int(sum(a.nbytes for a in args if isinstance(a, cp.ndarray)))


def _timed(plain, grid_of):
    def wrapped(self, name, *rest, **kw):
        import cupy as cp

        if not _on[0] or not _stack or cp.cuda.get_current_stream().is_capturing():
            return plain(self, name, *rest, **kw)
        blocks = grid_of(self, rest)
        if blocks == 0:
            return plain(self, name, *rest, **kw)
        gap = cp.cuda.Event()
        gap.record()  # closes what ran since the last timed launch
        _state["spin"]((1,), (1,), (np.int64(_state["ns"]),))
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        plain(self, name, *rest, **kw)
        b.record()
        args = rest[1] if len(rest) == 2 else rest[2]
        _records.append((_stack[-1], name, blocks, _arg_bytes(args), a, b,
                         _state["last"], gap))
        _state["last"] = b
        return None
    return wrapped


def instrument():
    plain_launch, plain_grid = launch.Kernels.launch, launch.Kernels.launch_grid
    launch.Kernels.launch = _timed(plain_launch, lambda k, rest: k.blocks(rest[0])[0] if int(rest[0]) > 0 else 0)
    launch.Kernels.launch_grid = _timed(plain_grid, lambda k, rest: int(np.prod(rest[0])))
    _piece(sparse_pressure, "solve_pressure", "other (solve_pressure)")
    _piece(sparse_pressure_cells, "stage", "cells stage")
    _piece(sparse_pressure_workspace, "unknowns", "ws unknowns")
    _piece(sparse_pressure_workspace, "_launch_levels", "coarse levels")
    _piece(sparse_pressure_solve_ahead.Ahead, "_launch", "solve ahead")


def patch(way):
    """Set *way*'s module attributes ({"module.NAME": value}) and environment variables
    ({"VOXFX_NAME": value}: switches read at each solve); the values they had."""
    old = {}
    for key, value in way.items():
        if key.startswith("VOXFX_"):
            old[key] = os.environ.get(key)
            os.environ[key] = value
            continue
        mod, attr = key.rsplit(".", 1)
        module = importlib.import_module("voxfx.kernels.flip." + mod)
        old[key] = getattr(module, attr)
        setattr(module, attr, type(old[key])(value) if not isinstance(old[key], bool) else value not in ("0", "False"))
    return old


def unpatch(old):
    for key, value in old.items():
        if key.startswith("VOXFX_"):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
            continue
        mod, attr = key.rsplit(".", 1)
        setattr(importlib.import_module("voxfx.kernels.flip." + mod), attr, value)


def substep(sim, dt, ev, sub):
    """One substep with every launch timed; {(piece, name): [launches, blocks, bytes, ms]},
    {piece: in-between ms}, the stage ms and CG iterations."""
    import cupy as cp

    _records.clear()
    _state["last"] = None
    _on[0] = True
    ms, its, _ = timed_sparse_substep(sim, dt, ev, sub)
    _on[0] = False
    cp.cuda.Device().synchronize()
    kernels, between = {}, defaultdict(float)
    for piece, name, blocks, nbytes, a, b, last, gap in _records:
        row = kernels.setdefault((piece, name), [0, [], 0, 0.0])
        row[0] += 1
        row[1].append(blocks)
        row[2] = max(row[2], nbytes)
        row[3] += cp.cuda.get_elapsed_time(a, b)
        if last is not None:
            between[piece] += cp.cuda.get_elapsed_time(last, gap)
    return kernels, between, ms, its


def report(way, runs):
    print(f"\nway {way}: per piece and kernel | launches a substep | blocks | arg MB | device ms a substep "
          f"(median of {len(runs)}) | arg GB/s")
    names = []
    for kernels, _, _, _ in runs:
        names += [k for k in kernels if k not in names]
    pieces = []
    for piece, _ in names:
        if piece not in pieces:
            pieces.append(piece)
    for piece in pieces:
        total = []
        for kernels, between, _, _ in runs:
            total.append((sum(r[3] for (p, _), r in kernels.items() if p == piece), between.get(piece, 0.0),
                          sum(r[0] for (p, _), r in kernels.items() if p == piece)))
        med = np.median(np.array(total), axis=0)
        print(f"  [{piece}] kernels {med[0]:.3f} ms in {med[2]:.0f} launches; in between (CuPy array code, idle) "
              f"{med[1]:.3f} ms")
        rows = []
        for key in [k for k in names if k[0] == piece]:
            vals = [kernels[key] for kernels, _, _, _ in runs if key in kernels]
            ms = float(np.median([v[3] for v in vals]))
            last = vals[-1]
            rows.append((ms, key[1], last[0], last[1], last[2]))
        for ms, name, count, blocks, nbytes in sorted(rows, reverse=True):
            shown = ",".join(str(b) for b in blocks[:8]) + ("…" if len(blocks) > 8 else "")
            rate = nbytes * count / (ms * 1e-3) / 1e9 if ms > 0 else 0.0
            print(f"    {name:28s} | {count:3d} | {shown:36s} | {nbytes / 2 ** 20:8.2f} | {ms:7.4f} | {rate:7.0f}")
    med = np.median(np.array([ms for _, _, ms, _ in runs]), axis=0)
    print(f"  stages (spun, not the bench's) topology {med[0]:.2f} p2g {med[1]:.2f} pressure {med[2]:.2f}; "
          f"CG it {[its for _, _, _, its in runs]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--substeps", type=int, default=4)
    ap.add_argument("--spin-us", type=float, default=60.0)
    ap.add_argument("--set", nargs="*", action="append", default=None, metavar="module.NAME=VALUE")
    args = ap.parse_args()
    import cupy as cp

    ways = [dict(kv.split("=", 1) for kv in way if kv) for way in (args.set or [[]])]
    props = cp.cuda.runtime.getDeviceProperties(0)
    print(f"device: {props['name'].decode()}", flush=True)
    _state["spin"] = cp.RawKernel(_SPIN, "spin")
    _state["ns"] = int(args.spin_us * 1e3)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    ev, sub = [cp.cuda.Event() for _ in range(6)], [cp.cuda.Event() for _ in range(6)]
    instrument()
    t0 = time.perf_counter()
    for i in range(args.warm * len(ways)):
        old = patch(ways[i % len(ways)])
        timed_sparse_substep(sim, dt, ev, sub)
        unpatch(old)
    runs = [[] for _ in ways]
    for _ in range(args.substeps):
        for w, way in enumerate(ways):
            old = patch(way)
            runs[w].append(substep(sim, dt, ev, sub))
            unpatch(old)
    print(f"{args.n}³, {len(sim.pos):,} particles, {sim.grid.brick_count()} bricks, pool {sim.grid.size:,} cells; "
          f"spin {args.spin_us:.0f} µs before each launch; {time.perf_counter() - t0:.0f} s")
    for w, way in enumerate(ways):
        report(way, runs[w])
    print(f"solve ahead (launched, taken, missed): {sparse_pressure_solve_ahead.counts}")


if __name__ == "__main__":
    main()
