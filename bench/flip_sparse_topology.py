"""The sparse FLIP topology update, A/B on the same states (issue 24): the 8M dam break
(``bench/flip_sparse.py``'s scene) on the GPU; before each substep the grid is snapshotted and
``SparseFlipGrid.update`` runs once per ``VOXFX_SPARSE_TOPOLOGY_UPDATE`` way (``--modes``,
alternating which goes first), each timed with CUDA events around the call (the topology
stage's update sub-stage, its one host read included), and every way's grid must equal the
first's to the bit: keys, slots, free list, capacity, used slots, brick tables, neighbour
index, brick index and every channel. The substep then goes on with the last way's grid.

    python3 bench/flip_sparse_topology.py [--row 8m|65m] [--steps 8] [--warm 2]
                                          [--modes table fused] [--profile]

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
          (SparseMacGrid, "_neighbours"), (topo_gpu, "mark_walls"), (SparseFlipGrid, "_solid_faces")]  # noqa: E501


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", choices=sorted(ROWS), default="8m")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--modes", nargs="+", choices=topo_gpu.TOPOLOGY_UPDATES, default=["table", "fused"])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    n, particles = ROWS[args.row]
    spec, v, t = scene(n, particles, "dam")
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    g, s, dt = sim.grid, sim.settings, 1 / 120
    gravity = float(np.linalg.norm(s.gravity))
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    ms = {m: [] for m in args.modes}
    pieces = {m: {} for m in args.modes}
    changed, grown, unequal = 0, 0, []
    for i in range(args.warm + args.steps):
        margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, spec.voxel_size, gravity)
        reach = BrickReach(sim.vel, dt, gravity, spec.voxel_size) if margin_mode() == "brick" else None
        call = dict(bodies=sim.obstacle_bodies, scratch=sim.band is None, reach=reach)
        before = snapshot(g, copy=True)
        old_capacity = g.capacity
        order = args.modes if i % 2 == 0 else args.modes[::-1]
        states = {}
        for mode in order:
            os.environ["VOXFX_SPARSE_TOPOLOGY_UPDATE"] = mode
            if args.profile and i >= args.warm:
                restore(g, before)
                undo = profiled(cp, pieces[mode])
                try:
                    g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, **call)
                finally:
                    undo()
            restore(g, before)
            cp.cuda.Device().synchronize()
            e0.record()
            result = g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, **call)
            e1.record()
            e1.synchronize()
            if i >= args.warm:
                ms[mode].append(cp.cuda.get_elapsed_time(e0, e1))
            states[mode] = (state(g, result), snapshot(g), result)
        first = states[args.modes[0]][0]
        for mode in args.modes[1:]:
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
    print("way | update ms (median) | mean | min | max | per substep")
    print("--- | --- | --- | --- | --- | ---")
    for mode in args.modes:
        a = np.array(ms[mode])
        print(f"{mode} | {np.median(a):.3f} | {a.mean():.3f} | {a.min():.3f} | {a.max():.3f} | "
              + ", ".join(f"{x:.2f}" for x in a))
    if args.profile:
        names = [name for _, name in PIECES]
        print("pieces (median wall ms, synced; count) | " + " | ".join(args.modes))
        for name in names:
            cells = [f"{np.median(pieces[m][name]):.3f} ({len(pieces[m][name])})" if pieces[m].get(name) else "-"
                     for m in args.modes]
            print(f"{name} | " + " | ".join(cells))
    print("bit-identical to " + args.modes[0] + ": " + ("yes, every substep" if not unequal else f"NO: {unequal}"))
    return 1 if unequal else 0


if __name__ == "__main__":
    sys.exit(main())
