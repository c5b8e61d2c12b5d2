"""Sparse FLIP pressure benchmark (issues 12 and 24): ``bench/flip_sparse.py``'s dam break on
the GPU, the pressure stage alone, split into its set-up and the PCG loop, per
preconditioner. Each substep runs the stages before the pressure (topology, P2G, classify,
extrapolate, gravity, boundaries), then times with CUDA events: ``pressure_rhs`` (cell
types, sealed-region labels, the right-hand side: ``sparse_pressure.SETUP_KERNELS``), the
compacted unknowns, the multigrid tables, the PCG loop (``sparse_pressure_gpu.solve_unknowns``: copies into the kept
buffers, the graph replays, one host read per ``check_every`` iterations), and the whole
``solve_pressure`` call as the simulation makes it; then finishes the substep. Medians
over the substeps after the first (which compiles and captures).

    python3 bench/flip_sparse_pressure.py [--n 64] [--particles 1000000] [--substeps 6]
        [--preconditioners mg jacobi] [--vcycles fused split] [--setups host device]

``--vcycles``: the multigrid's launch sequences (``sparse_pressure_gpu.VCYCLE``);
``--setups``: its tables with host-read sizes or sizes on the device
(``sparse_pressure_setup.SETUP``); each mg combination on a fresh simulation and solver, so
one run times them all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import (sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup,  # noqa: E402
                               sparse_transfer, transfer)
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_grid import substep_margin  # noqa: E402
from voxfx.kernels.flip.sparse_multigrid import VCycle  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402

PARTS = ["cells+labels+rhs", "unknowns", "mg tables", "PCG loop", "solve_pressure"]


def before_pressure(sim, dt):
    """The substep's stages up to the pressure solve (``SparseFlipSimulation.substep``)."""
    g, s = sim.grid, sim.settings
    margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, sim.spec.voxel_size,
                            float(np.linalg.norm(s.gravity)))
    g.update(sim.pos, margin, sim.obstacle, sim.obstacle_velocity, bodies=sim.obstacle_bodies)
    sparse_transfer.particles_to_grid(g, sim.pos, sim.vel, sim.c)
    sparse_transfer.classify(g, sim.pos)
    sparse_transfer.extrapolate(g)
    old = tuple(f.copy() for f in g.faces())
    for name, a in zip(g.FACES, s.gravity):
        g[name] = g[name] + np.float32(a * dt)
    sparse_transfer.enforce_boundaries(g)
    return old


def after_pressure(sim, dt, old, p):
    g, s = sim.grid, sim.settings
    sparse_pressure.project(g, p, dt)
    sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
    sparse_transfer.g2p_advect(g, old, sim.pos, sim.vel, s.flip_ratio, dt, sim.c)


def timed_pressure(sim, dt, preconditioner, ev):
    """ms of each part (PARTS), the iterations and the unknowns of one pressure solve."""
    import cupy as cp

    g, s = sim.grid, sim.settings
    ev[0].record()
    b, kind, _, _ = sparse_pressure.pressure_rhs(g, dt)  # cell types, sealed regions, b
    ev[1].record()
    level = sparse_pressure.compact_unknowns(g, kind)
    ev[2].record()
    M = VCycle(g, kind, level) if preconditioner == "mg" else None
    ev[3].record()
    _, its, _, _ = sparse_pressure_gpu.solve_unknowns(level, M, level.gather(b), s.pressure_tolerance,
                                                      s.pressure_max_iterations, preconditioner)
    ev[4].record()
    p, stats = sparse_pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance,
                                              max_iterations=s.pressure_max_iterations, preconditioner=preconditioner)
    ev[5].record()
    ev[5].synchronize()
    ms = [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) for i in range(5)]
    return ms, stats["iterations"], level.m, len(M.levels) if M else 1, p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--particles", type=int, default=1_000_000)
    ap.add_argument("--substeps", type=int, default=6)
    ap.add_argument("--preconditioners", nargs="+", default=["mg", "jacobi"])
    ap.add_argument("--vcycles", nargs="+", default=["fused", "split"], choices=["fused", "split"],
                    help="sparse_pressure_gpu.VCYCLE variants timed for mg (A/B in one run)")
    ap.add_argument("--setups", nargs="+", default=["host", "device"], choices=["host", "device"],
                    help="sparse_pressure_setup.SETUP variants (the multigrid tables) timed for mg")
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    header = ["preconditioner", "V-cycle", "set-up", "grid", "particles", "unknowns", "levels"]
    header += [f"{p} ms" for p in PARTS] + ["CG it", "loop ms/it"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    runs = [(pre, vc, su) for pre in args.preconditioners for vc in (args.vcycles if pre == "mg" else ["-"])
            for su in (args.setups if pre == "mg" else ["-"])]
    for preconditioner, vcycle, setup in runs:
        if vcycle != "-":
            sparse_pressure_gpu.VCYCLE = vcycle
            sparse_pressure_setup.SETUP = setup
            sparse_pressure_gpu.release_gpu_solvers()
        spec, v, t = dam_break(args.n, args.particles)
        sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True, preconditioner=preconditioner)
        dt = 1 / 120
        ev = [cp.cuda.Event() for _ in range(6)]
        rows = []
        for step in range(args.substeps):
            old = before_pressure(sim, dt)
            ms, its, m, levels, p = timed_pressure(sim, dt, preconditioner, ev)
            after_pressure(sim, dt, old, p)
            if step:
                rows.append(ms + [its, m, levels])
        med = np.median(np.array(rows, dtype=float), axis=0)
        its = med[5]
        row = [preconditioner, vcycle, setup, f"{args.n}³", f"{len(sim.pos):,}", f"{int(med[6]):,}", str(int(med[7]))]
        row += [f"{x:.2f}" for x in med[:5]] + [f"{its:.0f}", f"{med[3] / max(its, 1):.3f}"]
        print(" | ".join(row), flush=True)
        graphs = [s.loop.graph is not None for s in sparse_pressure_gpu._solvers.values()]
        print(f"  solvers kept: {len(graphs)}, graphs captured: {sum(graphs)}", flush=True)


if __name__ == "__main__":
    main()
