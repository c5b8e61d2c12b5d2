"""Where one sparse FLIP substep's pressure stage spends its time (issue 24): the dam break
of ``bench/flip_sparse.py`` on the GPU, the pressure stage cut into its set-up pieces and
the PCG loop, each piece timed three ways: wall-clock with a sync on each side (what the
host waits for), CUDA events around it (the device's span, idle gaps included), and the
sum of CUDA events around each RawKernel launch inside it (the kernels' own time; the rest
is CuPy array code and launch gaps). Then one PCG iteration launched kernel by kernel (no
graph) with an event pair per launch, and the other stages of the substep.

    python3 bench/flip_sparse_pressure_profile.py [--n 256] [--particles 8e6] [--substeps 3]
        [--setups reference fused]

``--setups``: the pressure set-up (``sparse_pressure.SETUP_KERNELS``): "reference", the
array code, or "fused", one kernel over the cells and the union-find on flat cells; each
on the same simulation state, in turn, per substep (A/B in one run).
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
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.flip.sparse_multigrid import VCycle  # noqa: E402
from voxfx.kernels.grid import launch  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import timed_sparse_substep  # noqa: E402
from flip_sparse_pressure import after_pressure, before_pressure  # noqa: E402

_kernel_ms = defaultdict(list)  # name → [(start event, end event)] while recording
_recording = [False]
_plain = (launch.Kernels.launch, launch.Kernels.launch_grid)


def _timed(plain):
    def wrapped(self, name, *args):
        if not _recording[0]:
            return plain(self, name, *args)
        import cupy as cp

        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        plain(self, name, *args)
        b.record()
        _kernel_ms[name].append((a, b))
    return wrapped


launch.Kernels.launch, launch.Kernels.launch_grid = (_timed(f) for f in _plain)


def _kernel_sum():
    import cupy as cp

    total = sum(cp.cuda.get_elapsed_time(a, b) for pairs in _kernel_ms.values() for a, b in pairs)
    count = sum(len(p) for p in _kernel_ms.values())
    _kernel_ms.clear()
    return total, count


def piece(rows, name, fn):
    """Run *fn* timed three ways (module notes); its result."""
    import cupy as cp

    cp.cuda.Device().synchronize()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    _recording[0] = True
    t0 = time.perf_counter()
    a.record()
    out = fn()
    b.record()
    b.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    _recording[0] = False
    kernels, launches = _kernel_sum()
    rows[name].append((wall, cp.cuda.get_elapsed_time(a, b), kernels, launches))
    return out


def pressure_pieces(sim, dt, rows):
    """The pieces of ``sparse_pressure.solve_pressure`` (its order), each timed; p."""
    g, s = sim.grid, sim.settings
    xp = g.xp
    setup = piece(rows, "cells+labels+rhs", lambda: sparse_pressure.pressure_rhs(g, dt))
    b, kind, enclosed, labels = setup
    level = piece(rows, "unknowns", lambda: sparse_pressure.compact_unknowns(g, kind))
    M = piece(rows, "mg tables", lambda: VCycle(g, kind, level))
    bc = piece(rows, "gather b", lambda: level.gather(b))
    x, its, _, _ = piece(rows, "PCG loop", lambda: sparse_pressure_gpu.solve_unknowns(
        level, M, bc, s.pressure_tolerance, s.pressure_max_iterations, "mg"))
    rows["iterations"].append((its, its, its, its))

    def finish():
        p = level.scatter(x, g.size)
        if enclosed is not None:
            p = sparse_pressure._region_mean_removed(p, enclosed, labels, xp)
        return xp.where(g["cell"] == 1, p, np.float32(0)).astype(xp.float32)
    p = piece(rows, "scatter p", finish)
    piece(rows, "solve_pressure (whole)", lambda: sparse_pressure.solve_pressure(
        g, dt, tolerance=s.pressure_tolerance, max_iterations=s.pressure_max_iterations))
    return p


def reference_pieces(sim, dt, rows):
    """The reference set-up's own pieces (sparse_pressure.solver_cells / pressure_rhs)."""
    g = sim.grid
    xp = g.xp
    fluid = piece(rows, "  ref: fluid mask", lambda: g["cell"] == 1)
    labels = piece(rows, "  ref: label_components", lambda: sparse_pressure.label_components(g, fluid))

    def reach():
        cell, nb = g["cell"], g.nbr
        touches = fluid & ((nb < 0) | (cell[xp.maximum(nb, 0)] == 0)).any(axis=0)
        reaches = xp.zeros(g.size + 1, bool)
        reaches[labels[touches]] = True
        return bool((fluid & ~reaches[labels]).any())
    piece(rows, "  ref: touches+enclosed (sync)", reach)
    faces = piece(rows, "  ref: boundary_faces", lambda: sparse_pressure.boundary_faces(g))
    piece(rows, "  ref: face_sum+b", lambda: xp.where(g["cell"] == 1, sparse_pressure.face_sum(g, *faces)
                                                      * np.float32(-g.h / dt), np.float32(0)))


def one_iteration(rows):
    """One PCG iteration of the kept solver, launch by launch (no graph): per kernel ms."""
    import cupy as cp

    solver = next(reversed(sparse_pressure_gpu._solvers.values()))
    solver.state[1] = 0  # not stopped
    solver.state[3] = 10 ** 6  # iteration limit
    solver.scalars[1] = -1.0  # tol²‖b‖² < 0: the ‖r‖² test never stops it
    cp.cuda.Device().synchronize()
    _recording[0] = True
    solver._iteration()
    cp.cuda.Device().synchronize()
    _recording[0] = False
    for name, pairs in _kernel_ms.items():
        rows["it: " + name].append(tuple(sum(cp.cuda.get_elapsed_time(a, b) for a, b in pairs) for _ in range(3))
                                   + (len(pairs),))
    _kernel_ms.clear()
    solver.state[1] = 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--substeps", type=int, default=3)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--setups", nargs="+", default=[sparse_pressure.SETUP_KERNELS],
                    choices=["reference", "fused"])
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    for _ in range(args.warm):
        old = before_pressure(sim, dt)
        for setup in args.setups:  # compile every variant's kernels
            sparse_pressure.SETUP_KERNELS = setup
            p, _ = sparse_pressure.solve_pressure(sim.grid, dt)
        after_pressure(sim, dt, old, p)
    rows = {setup: defaultdict(list) for setup in args.setups}
    stages = []
    ev, sub = [cp.cuda.Event() for _ in range(6)], [cp.cuda.Event() for _ in range(6)]
    for _step in range(args.substeps):
        old = before_pressure(sim, dt)
        for setup in args.setups:
            sparse_pressure.SETUP_KERNELS = setup
            p = pressure_pieces(sim, dt, rows[setup])
            if setup == "reference":
                reference_pieces(sim, dt, rows[setup])
        one_iteration(rows[args.setups[-1]])
        after_pressure(sim, dt, old, p)
    for setup in args.setups:  # the whole substep as the bench times it, per set-up
        sparse_pressure.SETUP_KERNELS = setup
        for _ in range(2):
            ms, its, _ = timed_sparse_substep(sim, dt, ev, sub)
            stages.append((setup, ms, its))
    print(f"{args.n}³, {len(sim.pos):,} particles, {sim.grid.brick_count()} bricks, "
          f"{sim.fluid_cell_count():,} fluid cells; medians of {args.substeps} substeps")
    for setup in args.setups:
        print(f"\nset-up {setup!r}: piece | wall ms | device span ms | RawKernel ms | RawKernel launches")
        for name, vals in rows[setup].items():
            med = np.median(np.array(vals, dtype=float), axis=0)
            print(f"  {name} | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | {med[3]:.0f}")
    print("\nsubstep stages (ms): setup | topology | p2g+classify+extrapolate+boundaries | pressure | project | "
          "g2p+advect | CG it")
    for setup, ms, its in stages:
        print(f"  {setup} | " + " | ".join(f"{m:.2f}" for m in ms) + f" | {its}")
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB; "
          f"VOXFX env: {({k: v for k, v in os.environ.items() if k.startswith('VOXFX')})}")


if __name__ == "__main__":
    main()
