"""Sparse FLIP benchmark (issue 12): ``bench/flip.py``'s dam break on the brick solver
(``FlipSimulation(..., sparse=True)``) on the GPU: ms per substep split by stage, active
bricks, CG iterations (Jacobi PCG to 1e-4), the grid's and the pool's device memory;
``--dense`` adds the dense solver's row for the same scene, measured in the same run;
the last columns are ``sparse_memory.sparse_flip_memory``'s bricks and bytes (estimated
from the particle count before baking) beside the measured ones.

    python3 bench/flip_sparse.py [--quick] [--dense] [--steps N] [--res N ...] [--particles P ...]
                                 [--max-cg N] [--gather brick cell] [--g2p cell input]

Stages are timed with CUDA events around the calls ``SparseFlipSimulation.substep``
makes: topology (margin, incremental update, walls/obstacles), P2G (+ classify,
extrapolate, gravity, boundaries), pressure, projection (+ extrapolation into the air),
G2P + advection. Topology, P2G and G2P are the kernels of ``sparse_gpu.py`` (issue 12,
second increment). ``--res 256 --particles 8e6`` is issue 24's 8M-particle row;
``--max-cg`` caps the CG iterations (transfer timings of a large row without waiting
for a slow solve; the row then says so). ``--gather brick cell`` runs each row once per
P2G gather kernel (``sparse_gpu.gather_mode``: one block per brick with its halo in shared
memory, or one thread per cell), in the same process: an A/B of the two; every row names
the gather it ran (default: ``VOXFX_SPARSE_GATHER``, else brick). ``--g2p cell input``
likewise runs G2P + advection over the particles in P2G's sorted order or in their own
(``sparse_gpu.g2p_order``); with both options, every pair.

Each row is followed by the stages' bandwidth floors (H100 HBM3, 3.35 TB/s) and the
measured/floor ratios: the bytes a stage must at least move — topology: positions read
(12 B/particle) and a byte per active cell; P2G: positions and velocities read (24, APIC
+36 B/particle), three faces, three masks and the cell type written (16 B/cell); pressure:
per CG iteration ten float32 streams over the fluid cells (``bench/flip.py``'s model);
project: pressure, cell and faces read, faces written (29 B/cell); G2P + advection:
positions and velocities read and written (48, APIC +72 B/particle; in the bins' order +8
for the order and the bins' cells), new and old faces read (24 B/cell). Cells are the
active bricks' (bricks · 512). A last line splits the topology, P2G and projection stages
into their calls (``SUBSTAGES``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_gpu, sparse_pressure, sparse_transfer, transfer  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_grid import substep_margin  # noqa: E402
from voxfx.kernels.flip.sparse_memory import sparse_flip_memory  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break, timed_substep  # noqa: E402

STAGES = ["topology", "p2g", "pressure", "project", "g2p+advect"]
BANDWIDTH = 3.35e12  # bytes/s, H100 SXM HBM3


def floors(particles, cells, fluid_cells, iterations, apic=False, binned=False):
    """ms per stage at the bandwidth floor (module notes)."""
    per = {"topology": 12 * particles + cells, "p2g": (24 + 36 * apic) * particles + 16 * cells,
           "pressure": iterations * 10 * fluid_cells * 4, "project": 29 * cells,
           "g2p+advect": (48 + 72 * apic + 8 * binned) * particles + 24 * cells}
    return {k: v / BANDWIDTH * 1e3 for k, v in per.items()}


SUBSTAGES = ["margin", "update", "bin+gather", "classify", "extrapolate", "old", "gravity+boundaries", "project",
             "fluid faces+extrapolate"]


def timed_sparse_substep(sim, dt, ev, sub):
    """ms per stage (``STAGES``), CG iterations and ms per sub-stage (``SUBSTAGES``)."""
    g, s = sim.grid, sim.settings
    ev[0].record()
    margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, sim.spec.voxel_size,
                            float(np.linalg.norm(s.gravity)))
    sub[0].record()
    added, freed = g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, bodies=sim.obstacle_bodies)
    ev[1].record()
    sparse_transfer.particles_to_grid(g, sim.pos, sim.vel, sim.c)
    sub[1].record()
    sparse_transfer.classify(g, sim.pos)
    sub[2].record()
    sparse_transfer.extrapolate(g)
    sub[3].record()
    old = tuple(f.copy() for f in g.faces())
    sub[4].record()
    sparse_transfer.enforce_boundaries(g, add=[np.float32(a * dt) for a in s.gravity])  # as SparseFlipSimulation
    ev[2].record()
    p, stats = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,
                                              max_iterations=s.pressure_max_iterations,
                                              preconditioner=sim.preconditioner)
    ev[3].record()
    sparse_pressure.project(g, p, dt)
    sub[5].record()
    sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
    ev[4].record()
    sparse_transfer.g2p_advect(g, old, sim.pos, sim.vel, s.flip_ratio, dt, sim.c)
    ev[5].record()
    ev[5].synchronize()
    import cupy as cp

    t = cp.cuda.get_elapsed_time
    order = [ev[0], sub[0], ev[1], sub[1], sub[2], sub[3], sub[4], ev[2]]
    parts = [t(a, b) for a, b in zip(order, order[1:])] + [t(ev[3], sub[5]), t(sub[5], ev[4])]
    parts.append(float(len(added) + len(freed) > 0))  # the bricks changed
    return [t(ev[i], ev[i + 1]) for i in range(5)], stats["iterations"], parts


def run(n, particles, steps, warm, sparse, max_cg=None):
    import cupy as cp

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    spec, v, t = dam_break(n, particles)
    settings = FlipSettings() if max_cg is None else FlipSettings(pressure_max_iterations=int(max_cg))
    sim = FlipSimulation(spec, settings, v, t, xp=cp, sparse=sparse)
    dt = 1 / 120
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows, its, parts = [], [], []
    for i in range(warm + steps):
        if sparse:
            ms, it, part = timed_sparse_substep(sim, dt, ev, sub)
        else:
            ms, it = timed_substep(sim, dt, ev[:5])
            ms, part = [0.0] + ms, None
        if i >= warm:
            rows.append(ms)
            its.append(it)
            parts.append(part)
    med = list(np.median(np.array(rows), axis=0))
    extra = {"bricks": sim.grid.brick_count(), "grid MiB": sim.grid.nbytes / 2 ** 20,
             "estimate": sparse_flip_memory(spec, len(sim.pos), xp=cp, parts=True),
             "fluid": sim.fluid_cell_count(), "parts": list(np.median(np.array(parts), axis=0)),
             "changed": int(sum(p[-1] for p in parts)), "topology max": max(r[0] for r in rows)} if sparse else {}
    return len(sim.pos), med, int(np.median(its)), pool.total_bytes(), extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="64³ with 1M particles only")
    ap.add_argument("--dense", action="store_true", help="also the dense solver on the same scenes")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--res", type=int, nargs="+", help="grid sizes (with --particles: the rows to run)")
    ap.add_argument("--particles", type=float, nargs="+", help="particles per row (e.g. 8e6), one per --res")
    ap.add_argument("--max-cg", type=int, default=None, help="cap on CG iterations per solve")
    ap.add_argument("--gather", nargs="+", choices=sparse_gpu.GATHERS, default=None,
                    help="P2G gather kernels to run each row with (A/B in one process)")
    ap.add_argument("--g2p", nargs="+", choices=sparse_gpu.G2P_ORDERS, default=None,
                    help="G2P particle orders to run each row with (A/B in one process)")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    configs = [(64, 1_000_000)] if args.quick else [(64, 1_000_000), (128, 4_000_000), (256, 8_000_000)]
    if args.res:
        counts = args.particles or [8 * n ** 3 / 16 for n in args.res]
        configs = [(int(n), int(p)) for n, p in zip(args.res, counts)]
    gathers = args.gather or [sparse_gpu.gather_mode()]
    orders = args.g2p or [sparse_gpu.g2p_order()]
    header = ["solver", "gather", "g2p order", "grid", "particles"] + [f"{s} ms" for s in STAGES] + [
        "CG it", "substep ms", "bricks", "grid MiB", "pool peak MiB", "estimate: bricks", "estimate MiB"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    runs = [(True, g, o) for g in gathers for o in orders] + ([(False, "-", "-")] if args.dense else [])
    for n, particles in configs:
        for sparse, gather, order in runs:
            if sparse:
                os.environ["VOXFX_SPARSE_GATHER"] = gather  # read at each P2G
                os.environ["VOXFX_SPARSE_G2P"] = order  # and at each G2P
            count, med, it, peak, extra = run(n, particles, args.steps, args.warm, sparse, args.max_cg)
            row = ["sparse" if sparse else "dense", gather, order, f"{n}³", f"{count:,}"]
            row += [f"{m:.2f}" for m in med] + [
                str(it) + (f" (cap {args.max_cg})" if args.max_cg else ""), f"{sum(med):.1f}",
                str(extra.get("bricks", "")), f"{extra['grid MiB']:.0f}" if extra else "", f"{peak / 2 ** 20:.0f}",
                str(extra["estimate"]["bricks"]) if extra else "",
                f"{extra['estimate']['total'] / 2 ** 20:.0f}" if extra else ""]
            print(" | ".join(row), flush=True)
            if sparse:
                fl = floors(count, extra["bricks"] * 512, extra["fluid"], it, binned=order == "cell")
                print("   floors (ms): " + ", ".join(f"{k} {v:.3f} ({m / v:.0f}×)" for (k, v), m in
                                                     zip(fl.items(), med)), flush=True)
                print("   sub-stages (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in zip(SUBSTAGES, extra["parts"]))
                      + f"; bricks changed in {extra['changed']} of {args.steps} substeps, topology max "
                      f"{extra['topology max']:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
