"""Sparse FLIP G2P + advection and the topology stage split into their parts (issue 24: G2P
+ advection ≤ 0.4 ms and the topology update at 8M), on the GPU, in one process:

    python3 bench/flip_sparse_g2p.py [--res 256] [--particles 8e6] [--substeps 4] [--steps 12] [--repeat 5]
                                     [--frames N]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s, then:

1. G2P + advection alone, at the state before a G2P: every kernel (``sparse_g2p_gpu.G2P_KERNELS``)
   × particle order (``G2P_ORDERS``) × block size (128, 256, 512 threads) on copies of the
   particles, timed with CUDA events (median of *repeat*), beside the bandwidth floor
   (positions and velocities read and written, 48 B a particle, + 4 B of order in the bins'
   order, + the new and old faces, 24 B a cell, at 3.35 TB/s); every variant's positions
   and velocities compared bit for bit with the first's (the earlier walk in cell order).
2. *steps* whole substeps (``flip_sparse.timed_sparse_substep``) alternating between the
   new code and the earlier one (``MODES``: the G2P kernel, ``VOXFX_SPARSE_G2P_KERNEL``, and
   the topology update, ``VOXFX_SPARSE_TOPOLOGY_UPDATE``; the particles and bricks follow
   the same bits either way): the stages' medians per mode, and the topology stage split
   by CUDA events around its calls (margin, ``incremental_keys`` with the device update
   inside it, ``Topology.update``, ``retopologize``, the tables, the marks), apart for
   substeps whose bricks changed and those whose did not. The old mode also fills the flow
   channels at each update (``update(scratch=False)``).
3. With ``--frames N``, N user frames (``step(1/24)``) alternating between the modes, the old
   one measuring the fastest particle again for the margin: ms a substep.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_topology_gpu, sparse_transfer, transfer  # noqa: E402
from voxfx.kernels.flip import sparse_grid as sparse_grid_module  # noqa: E402
from voxfx.kernels.grid import sparse as sparse_module  # noqa: E402
from voxfx.kernels.grid import sparse_mac  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _cuda_events import timed  # noqa: E402 (flip_sparse_g2p_block imports it from here)
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from flip_sparse import STAGES, timed_sparse_substep  # noqa: E402

BANDWIDTH = 3.35e12


class Spans:
    """CUDA events around wrapped calls: ms per name, read after the substep's sync."""

    def __init__(self, cp):
        self.cp, self.open, self.done = cp, [], []

    def wrap(self, owner, attr, name):
        original = getattr(owner, attr)
        spans = self

        def wrapped(*args, **kwargs):
            a, b = spans.cp.cuda.Event(), spans.cp.cuda.Event()
            a.record()
            try:
                return original(*args, **kwargs)
            finally:
                b.record()
                spans.open.append((name, a, b))

        setattr(owner, attr, wrapped)

    def collect(self):
        out = defaultdict(float)
        for name, a, b in self.open:
            b.synchronize()
            out[name] += self.cp.cuda.get_elapsed_time(a, b)
        self.open = []
        return dict(out)


def state_before_project(sim, dt):
    """One substep of *sim* up to its projection (topology, P2G, cell types, extrapolation and
    boundaries, pressure): the old faces and the pressure."""
    from voxfx.kernels.flip import sparse_pressure

    g, s = sim.grid, sim.settings
    margin = sparse_grid_module.substep_margin(float(transfer.max_speed(sim.vel)), dt,
                                               sim.spec.voxel_size, float(np.linalg.norm(s.gravity)))
    g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, bodies=sim.obstacle_bodies)
    sparse_transfer.particles_to_grid(g, sim.pos, sim.vel, sim.c, ring=True)
    sparse_transfer.classify(g, sim.pos)
    old = sparse_transfer.extrapolate_and_boundaries(g, add=[np.float32(a * dt) for a in s.gravity])  # as the sim
    p, _ = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,
                                          max_iterations=s.pressure_max_iterations, preconditioner=sim.preconditioner)
    return old, p


def state_before_g2p(sim, dt):
    """One substep of *sim* up to its G2P (``state_before_project``, the projection and the
    extrapolation): the old faces and P2G's bins of the positions (``grid.bins``)."""
    from voxfx.kernels.flip import sparse_pressure

    g = sim.grid
    old, p = state_before_project(sim, dt)
    sparse_pressure.project(g, p, dt)
    sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
    return old, g.bins


def g2p_variants(cp, sim, dt, repeat):
    """Part 1 (module notes): one substep up to its G2P, then every variant on copies."""
    g, s = sim.grid, sim.settings
    old, bins = state_before_g2p(sim, dt)
    n, cells = int(sim.pos.shape[0]), g.size
    f32 = np.float32
    flip = f32(s.flip_ratio)
    scalars = (flip, f32(1) - flip, f32(dt), f32(0.5) * f32(dt))
    print(f"G2P + advection at 8M: {n:,} particles, {g.brick_count()} bricks ({cells:,} pool cells)")
    print("kernel | order | threads | ms | floor ms | ratio | same bits as walk/cell/256")
    print("--- | --- | --- | --- | --- | --- | ---")
    first = None
    state = {}
    for kernel in sparse_g2p_gpu.G2P_KERNELS[::-1]:  # walk (the earlier kernel) first: the reference
        for order in sparse_g2p_gpu.G2P_ORDERS:
            for threads in (256, 128, 512):
                if kernel == "walk" and threads != 256:
                    continue

                def prepare(order=order):
                    state["pos"], state["vel"] = sim.pos.copy(), sim.vel.copy()
                    g.bins = (state["pos"], *bins[1:]) if order == "cell" else None

                def run(kernel=kernel, order=order, threads=threads):
                    module = sparse_g2p_gpu.G2P
                    saved = module.threads
                    module.threads = threads
                    try:
                        sparse_g2p_gpu.g2p_advect(g, old, state["pos"], state["vel"], *scalars, sim.c, order=order,
                                              kernel=kernel)
                    finally:
                        module.threads = saved

                prepare()
                run()  # warm (compiles)
                ms = timed(cp, run, repeat, prepare)
                out = (cp.asnumpy(state["pos"]), cp.asnumpy(state["vel"]))
                if first is None:
                    first = out
                same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(out, first))
                floor = ((48 + 4 * (order == "cell")) * n + 24 * cells) / BANDWIDTH * 1e3
                print(f"{kernel} | {order} | {threads} | {ms:.3f} | {floor:.3f} | {ms / floor:.1f}× | {same}",
                      flush=True)
    g.bins = None


MODES = {"new": {"VOXFX_SPARSE_G2P_KERNEL": "bricks", "VOXFX_SPARSE_TOPOLOGY_UPDATE": "device"},
         "old": {"VOXFX_SPARSE_G2P_KERNEL": "walk", "VOXFX_SPARSE_TOPOLOGY_UPDATE": "array"}}
SCRATCH = {"new": True, "old": False}  # update(scratch=): the old mode fills the flow channels
_UPDATE = sparse_grid_module.SparseFlipGrid.update


def use_mode(mode, sim=None):
    """The environment and the update's scratch of *mode*; with *sim*, its margin measured
    again in the old mode (``step``'s CFL speed not reused)."""
    os.environ.update(MODES[mode])

    def update(self, *args, **kwargs):
        kwargs["scratch"] = kwargs.get("scratch", False) and SCRATCH[mode]
        return _UPDATE(self, *args, **kwargs)

    sparse_grid_module.SparseFlipGrid.update = update
    if sim is not None:
        if mode == "old":
            sim._margin_speed = lambda: float(transfer.max_speed(sim.vel))
        else:
            sim.__dict__.pop("_margin_speed", None)


def substeps(cp, sim, dt, steps):
    """Part 2 (module notes): the substeps alternate between MODES."""
    spans = Spans(cp)
    spans.wrap(sparse_topology_gpu, "incremental_keys", "incremental_keys (device update inside)")
    spans.wrap(sparse_topology_gpu, "update_topology", "update_topology (device)")
    spans.wrap(sparse_module.Topology, "update", "Topology.update (array)")
    spans.wrap(sparse_mac.SparseMacGrid, "retopologize", "retopologize (all)")
    spans.wrap(sparse_mac.SparseMacGrid, "_neighbours", "tables (_neighbours)")
    spans.wrap(sparse_topology_gpu, "mark_walls", "mark_walls")
    spans.wrap(sparse_grid_module.SparseFlipGrid, "_solid_faces", "_solid_faces")
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = defaultdict(list)
    parts = defaultdict(lambda: defaultdict(list))
    names = list(MODES)
    for i in range(steps):
        mode = names[i % 2]
        use_mode(mode)
        ms, it, part = timed_sparse_substep(sim, dt, ev, sub)
        changed = bool(part[-1])
        rows[mode].append(ms + [sum(ms), it, changed])
        got = spans.collect()
        got["margin (max speed, sync)"] = part[0]
        got["topology stage"] = ms[0]
        for k, v in got.items():
            parts[(mode, changed)][k].append(v)
    print("mode | substeps | " + " | ".join(f"{s} ms" for s in STAGES) + " | substep ms | CG it | bricks changed")
    print("--- | " * (len(STAGES) + 4) + "---")
    for mode, r in rows.items():
        a = np.array(r, dtype=np.float64)
        med = np.median(a[:, :len(STAGES) + 2], axis=0)
        print(f"{mode} {MODES[mode]} | {len(r)} | " + " | ".join(f"{m:.3f}" for m in med[:len(STAGES)])
              + f" | {med[len(STAGES)]:.2f} | {med[len(STAGES) + 1]:.0f} | {int(a[:, -1].sum())} of {len(r)}")
    for (mode, changed), got in sorted(parts.items()):
        count = len(got["topology stage"])
        print(f"topology, {mode}, substeps whose bricks {'changed' if changed else 'did not change'} ({count}), "
              "median ms (a call's sum per substep): " + ", ".join(f"{k} {np.median(v):.3f}"
                                                                   for k, v in sorted(got.items())))


def frames(cp, sim, count):
    """Part 3: user frames (``step(1/24)``: the CFL's speed reused by the margin in the new
    mode), alternating between MODES: ms a substep per mode."""
    import time

    out = defaultdict(list)
    for i in range(count):
        mode = list(MODES)[i % 2]
        use_mode(mode, sim)
        cp.cuda.Device().synchronize()
        a = time.perf_counter()
        stats = sim.step(1 / 24)
        cp.cuda.Device().synchronize()
        out[mode].append((time.perf_counter() - a) * 1e3 / stats["substeps"])
        print(f"frame {i} ({mode}): {stats['substeps']} substeps, {out[mode][-1]:.2f} ms a substep", flush=True)
    print("frames, ms a substep (median): " + ", ".join(f"{m} {np.median(v):.2f}" for m, v in out.items()))


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--frames", type=int, default=0, help="part 3: user frames, alternating old and new")
    args = ap.parse_args()
    import cupy as cp

    _, sim, dt = stepped_dam_break(args)
    g2p_variants(cp, sim, dt, args.repeat)
    substeps(cp, sim, dt, args.steps)
    if args.frames:
        frames(cp, sim, args.frames)
    use_mode("new", sim)
    for name in MODES["new"]:
        os.environ.pop(name, None)
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB")


if __name__ == "__main__":
    main()
