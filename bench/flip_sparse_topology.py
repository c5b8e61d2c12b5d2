"""The sparse FLIP topology update, A/B on the same states (issue 24): the 8M dam break
(``bench/flip_sparse.py``'s scene) on the GPU; before each substep the grid is snapshotted and
``SparseFlipGrid.update`` runs once per ``VOXFX_SPARSE_TOPOLOGY_UPDATE`` way (``--modes``,
alternating which goes first), each timed with CUDA events around the call (the topology
stage's update sub-stage, its one host read included), and every way's grid must equal the
first's to the bit: keys, slots, free list, capacity, used slots, brick tables, neighbour
index, brick index and every channel. The substep then goes on with the last way's grid.

    python3 bench/flip_sparse_topology.py [--row 8m|65m] [--steps 8] [--warm 2]
                                          [--modes table fused] [--tables separate fused]
                                          [--speed-max warp uniform]
                                          [--profile] [--kernels]

``--tables``: each way is also run per ``VOXFX_SPARSE_TOPOLOGY_TABLES`` way (the slot tables,
neighbours and marks after an update: ``sparse_topology_tables.fused_tables`` or the separate
launches), ``--speed-max`` per ``VOXFX_SPARSE_SPEED_MAX`` way (``mark_occupied``'s per-slot
maxima); the ways are then "update/tables/speed" triples ("-": as set), every one against the
first to the bit.

``--kernels``: CUDA events around every kernel launch of the timed updates (no sync), printed
as median GPU µs a launch and launches an update per kernel and way, with the update's
kernels' sum beside its event time (the rest: allocations, memsets, the host read and the
host's launch gaps).

``--profile``: one more run a way a substep (not timed above) with the device synchronized
around each piece (the marking pipeline, the update's own launches, retopologize and its
neighbour tables, the walls, the solid faces), printed as median wall ms a piece; each piece
holds the host's launch time and its kernels, the sum exceeds the timed update by the syncs.
"""

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
from voxfx.kernels import backend  # noqa: E402
from voxfx.kernels.flip import sparse_topology_gpu as topo_gpu  # noqa: E402
from voxfx.kernels.flip import sparse_topology_tables as topo_tables  # noqa: E402
from voxfx.kernels.flip import transfer  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid, margin_mode, substep_margin  # noqa: E402
from voxfx.kernels.grid.sparse_mac import SparseMacGrid  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import scene  # noqa: E402

ROWS = {"8m": (256, 8_000_000), "65m": (512, 65_536_000)}
WRITTEN = SparseFlipGrid.MARKS + SparseFlipGrid.FLOW  # replaced whole by an update with scratch: not copied


def snapshot(g, copy=False):
    """The grid's topology state (references; with *copy* the channels an update fills in
    place are copied)."""
    return {"topology": g.topology, "nbr": g.nbr, "brick_slot": g.brick_slot, "slot_coords": g.slot_coords,
            "brick_nbr": g.brick_nbr, "index": getattr(g, "_brick_index", None), "plain": g.plain_marks,
            "channels": {k: [v[0].copy() if copy and k not in WRITTEN else v[0], v[1]] for k, v in g.channels.items()}}


def restore(g, s):
    g.topology, g.nbr, g.brick_slot = s["topology"], s["nbr"], s["brick_slot"]
    g.slot_coords, g.brick_nbr, g._brick_index, g.plain_marks = s["slot_coords"], s["brick_nbr"], s["index"], s["plain"]
    g.channels = {k: [v[0].copy() if k not in WRITTEN else v[0], v[1]] for k, v in s["channels"].items()}


def state(g, result):
    """Everything the update decides, on the host."""
    h = backend.to_numpy
    t = g.topology
    out = {"keys": h(t.keys), "slots": h(t.slots), "free": h(t.free), "capacity": np.array([t.capacity]),
           "added": h(result[0]), "freed": np.sort(h(result[1])), "brick_slot": h(g.brick_slot),
           "slot_coords": h(g.slot_coords), "brick_nbr": h(g.brick_nbr), "nbr": h(g.nbr),
           "brick_index": h(topo_gpu.brick_index(g)[0])}
    out.update({"channel " + k: h(v[0]) for k, v in g.channels.items()})
    return out


def bitwise_equal(a, b) -> bool:
    """The same dtype, shape and bytes (NaN backgrounds compare equal)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


PIECES = [(topo_gpu, "_reach"), (topo_gpu, "launch_fused_update"), (topo_gpu, "update_topology_table"),
          (topo_gpu, "update_topology_fused"), (topo_gpu, "incremental_keys"), (SparseMacGrid, "retopologize"),
          (SparseMacGrid, "_neighbours"), (topo_tables, "fused_tables"), (topo_gpu, "mark_walls"),
          (SparseFlipGrid, "_solid_faces")]


def profiled(cp, times):
    """Wrap ``PIECES`` with device syncs; returns the undo."""
    saved = []
    for owner, name in PIECES:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        def wrapped(*a, _f=original, _n=name, **k):
            cp.cuda.Device().synchronize()
            start = time.perf_counter()
            out = _f(*a, **k)
            cp.cuda.Device().synchronize()
            times.setdefault(_n, []).append((time.perf_counter() - start) * 1e3)
            return out

        setattr(owner, name, wrapped)

    def undo():
        for owner, name, original in saved:
            setattr(owner, name, original)
    return undo


def traced(cp, launches):
    """Record a CUDA event pair around every ``Kernels`` launch into *launches* (name, start,
    end); returns the undo."""
    from voxfx.kernels.grid.launch import Kernels

    saved = (Kernels.launch, Kernels.launch_grid)

    def launch(self, name, n, args):
        if int(n) <= 0:
            return
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        saved[0](self, name, n, args)
        b.record()
        launches.append((name, a, b))

    def launch_grid(self, name, grid, block, args, shared_mem=0):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        saved[1](self, name, grid, block, args, shared_mem)
        b.record()
        launches.append((name, a, b))

    Kernels.launch, Kernels.launch_grid = launch, launch_grid

    def undo():
        Kernels.launch, Kernels.launch_grid = saved
    return undo


def set_way(way):
    """The environment of *way* ("update", "update/tables" or "update/tables/speed maxima";
    a part "-" leaves its variable as it is)."""
    for name, value in zip(("VOXFX_SPARSE_TOPOLOGY_UPDATE", "VOXFX_SPARSE_TOPOLOGY_TABLES",
                            "VOXFX_SPARSE_SPEED_MAX"), way.split("/")):
        if value != "-":
            os.environ[name] = value


def traced_update(cp, g, before, update, rec):
    """One untimed update from *before* with every launch traced into *rec* (name → µs list,
    plus "(sum ms)" and "(launches)")."""
    restore(g, before)
    cp.cuda.Device().synchronize()
    launches = []
    undo = traced(cp, launches)
    try:
        update()
    finally:
        undo()
    cp.cuda.Device().synchronize()
    for name, a, b in launches:
        rec.setdefault(name, []).append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    rec.setdefault("(sum ms)", []).append(sum(cp.cuda.get_elapsed_time(a, b) for _, a, b in launches))
    rec.setdefault("(launches)", []).append(len(launches))


def print_tables(ways, ms, pieces, kernels, args):
    print("way | update ms (median) | mean | min | max | per substep")
    print("--- | --- | --- | --- | --- | ---")
    for mode in ways:
        a = np.array(ms[mode])
        print(f"{mode} | {np.median(a):.3f} | {a.mean():.3f} | {a.min():.3f} | {a.max():.3f} | "
              + ", ".join(f"{x:.2f}" for x in a))
    if args.profile:
        print("pieces (median wall ms, synced; count) | " + " | ".join(ways))
        for _, name in PIECES:
            cells = [f"{np.median(pieces[m][name]):.3f} ({len(pieces[m][name])})" if pieces[m].get(name) else "-"
                     for m in ways]
            print(f"{name} | " + " | ".join(cells))
    if args.kernels:
        print("kernels (median GPU µs a launch; launches an update) | " + " | ".join(ways))
        for name in sorted({n for m in ways for n in kernels[m]}):
            cells = [f"{np.median(kernels[m][name]):.1f} ({len(kernels[m][name]) / max(1, len(ms[m])):.2f})"
                     if kernels[m].get(name) else "-" for m in ways]
            print(f"{name} | " + " | ".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", choices=sorted(ROWS), default="8m")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--modes", nargs="+", choices=topo_gpu.TOPOLOGY_UPDATES, default=["table", "fused"])
    ap.add_argument("--tables", nargs="+", choices=topo_tables.TABLES, default=None)
    ap.add_argument("--speed-max", nargs="+", choices=topo_gpu.SPEED_MAXIMA, default=None)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--kernels", action="store_true")
    args = ap.parse_args()
    ways = args.modes if args.tables is None and args.speed_max is None else [
        f"{m}/{t}/{v}" for m in args.modes for t in args.tables or ["-"] for v in args.speed_max or ["-"]]
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    n, particles = ROWS[args.row]
    spec, v, t = scene(n, particles, "dam")
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    g, s, dt = sim.grid, sim.settings, 1 / 120
    gravity = float(np.linalg.norm(s.gravity))
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    ms = {m: [] for m in ways}
    pieces = {m: {} for m in ways}
    kernels = {m: {} for m in ways}
    changed, grown, unequal = 0, 0, []
    for i in range(args.warm + args.steps):
        margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, spec.voxel_size, gravity)
        reach = BrickReach(sim.vel, dt, gravity, spec.voxel_size) if margin_mode() == "brick" else None
        call = dict(bodies=sim.obstacle_bodies, scratch=sim.band is None, reach=reach)

        def update(_m=margin, _c=call):
            return g.update(sim.pos, _m, sim.obstacle, sim.obstacle_velocity, **_c)

        before = snapshot(g, copy=True)
        old_capacity = g.capacity
        order = ways if i % 2 == 0 else ways[::-1]
        states = {}
        for mode in order:
            set_way(mode)
            if args.profile and i >= args.warm:
                restore(g, before)
                undo = profiled(cp, pieces[mode])
                try:
                    update()
                finally:
                    undo()
            if args.kernels and i >= args.warm:
                traced_update(cp, g, before, update, kernels[mode])
            restore(g, before)
            cp.cuda.Device().synchronize()
            e0.record()
            result = update()
            e1.record()
            e1.synchronize()
            if i >= args.warm:
                ms[mode].append(cp.cuda.get_elapsed_time(e0, e1))
            states[mode] = (state(g, result), snapshot(g), result)
        first = states[ways[0]][0]
        for mode in ways[1:]:
            other = states[mode][0]
            bad = [k for k in first if k not in other or not bitwise_equal(first[k], other[k])]
            bad += [k for k in other if k not in first]
            if bad:
                unequal.append((i, mode, bad))
        last = order[-1]
        restore(g, states[last][1])
        result = states[last][2]
        if i >= args.warm:
            changed += int(len(result[0]) + len(result[1]) > 0)
            grown += int(g.capacity > old_capacity)
        g.update = lambda *a, _r=result, **k: _r  # the substep goes on with this topology
        try:
            sim.substep(dt)
        finally:
            del g.update
    steps = len(next(iter(ms.values())))
    print(f"{args.row}: {len(sim.pos):,} particles, {g.brick_count():,} bricks, capacity {g.capacity:,}; "
          f"bricks changed in {changed} of {steps} timed substeps, the pool grew in {grown}")
    print_tables(ways, ms, pieces, kernels, args)
    print("bit-identical to " + ways[0] + ": " + ("yes, every substep" if not unequal else f"NO: {unequal}"))
    return 1 if unequal else 0

if __name__ == "__main__":
    sys.exit(main())
