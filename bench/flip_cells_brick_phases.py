"""Where cells_rhs_brick's time goes at 8M (issue 24, helper s22e): the dam break of
``bench/flip_sparse.py`` stepped a few substeps, then on its grid each launch of the cells stage
alone (CUDA events around it, median of --repeat), in one process: the five launches of
``VOXFX_SPARSE_CELLS_BRICK=apart``; cells_rhs_brick ("fused", and "inner" with cells_hook_faces) at
128, 256 and 512 threads a block (session 22's call 2 also timed a twin staging the brick's values in
shared memory, since dropped); and builds that leave phases out (``CELLS_BRICK_SKIP``: 1 b's face sums, 2 the
links inside the brick, 4 those across its faces; their outputs are wrong, their times are the
phases' share).

    python3 bench/flip_cells_brick_phases.py [--n 256] [--particles 8e6] [--substeps 3] [--repeat 15]
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
from voxfx.kernels.flip import sparse_pressure_cells as spc  # noqa: E402
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID, FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid.launch import THREADS, Kernels  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402
from flip_sparse import timed_sparse_substep  # noqa: E402


def timed(launches, repeat):
    """Each launch's device ms (median over *repeat* runs of the sequence *launches*)."""
    import cupy as cp

    ms = []
    for _ in range(repeat):
        events = [cp.cuda.Event() for _ in range(len(launches) + 1)]
        events[0].record()
        for go, e in zip(launches, events[1:]):
            go()
            e.record()
        events[-1].synchronize()
        ms.append([cp.cuda.get_elapsed_time(a, e) for a, e in zip(events, events[1:])])
    return np.median(np.array(ms), axis=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--substeps", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    spec, v, t = dam_break(args.n, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    ev, sub = [cp.cuda.Event() for _ in range(6)], [cp.cuda.Event() for _ in range(6)]
    for _ in range(args.substeps):
        timed_sparse_substep(sim, 1 / 120, ev, sub)
    g = sim.grid
    n, slots = g.size, g.size // 512
    cell = g["cell"].astype(cp.uint8, copy=False)
    fluid_bricks = int((cell.reshape(slots, 512) == FLUID).any(axis=1).sum())
    print(f"{len(sim.pos):,} particles, pool {n:,} cells, {slots} slots, {fluid_bricks} with FLUID cells, "
          f"{int((cell == FLUID).sum()):,} FLUID cells", flush=True)
    solid = g["solid"].astype(cp.uint8, copy=False)
    exists = [g[name].astype(cp.uint8, copy=False) for name in g.EXISTS]
    faces = [g[name] for name in g.FACES] + [g["solid_" + name] for name in g.FACES]
    nbr, nbr27 = cp.ascontiguousarray(g.nbr), g.brick_nbr
    b, touch, parent = cp.empty(n, cp.float32), cp.empty(n, cp.uint8), cp.empty(n, cp.int32)
    label, reach, kind = cp.empty(n, cp.int32), cp.empty(n + 1, cp.uint8), cp.empty(n, cp.uint8)
    count = cp.empty(1, cp.int32)
    scale, crowd = np.float32(-g.h * 120.0), spc.crowd_args(g, None)
    tickets = cp.zeros(3 * slots, cp.int32)
    epoch = [0]
    defines = {"CELL_AIR": AIR, "CELL_FLUID": FLUID, "CELL_SOLID": SOLID}
    builds = {m: Kernels("flip_sparse_pressure_cells_brick.cu", ("--fmad=false", f"-DCELLS_BRICK_SKIP={m}"), THREADS,
                         defines=defines) for m in (0, 1, 2, 4, 6, 7)}

    def brick(entry, threads, skip=0, join=1):
        def go():
            epoch[0] += 1
            builds[skip].launch_grid(entry, (slots,), (threads,),
                                     (cell, solid, *faces, *exists, nbr27, np.int32(n), scale, b, touch, parent, *crowd,
                                      reach, count, tickets, np.int32(epoch[0]), np.int32(join)))
        return go

    K = spc._K
    label_sealed = [lambda: K.launch("cells_label", n, (cell, touch, np.int32(n), parent, label, reach)),
                    lambda: K.launch("cells_sealed", n, (cell, label, np.int32(n), reach, count, kind))]
    faces_apart = lambda: K.launch("cells_hook_faces", slots * 192, (cell, nbr, np.int32(n), parent))  # noqa: E731
    rows = [("apart: cells_rhs, hook_bricks_local, hook_faces, label, sealed", [
        lambda: K.launch("cells_rhs", n, (cell, solid, *faces, *exists, nbr, np.int32(n), scale, np.int32(1), b, touch,
                                          parent, *crowd, reach, count)),
        lambda: K.launch_grid("cells_hook_bricks_local", (slots,), (128,), (cell, nbr, np.int32(n), parent)),
        faces_apart, *label_sealed])]
    for threads in (128, 256, 512):
        rows.append((f"fused {threads}: cells_rhs_brick, label, sealed", [brick("cells_rhs_brick", threads),
                                                                          *label_sealed]))
        rows.append((f"inner {threads}: cells_rhs_brick (faces apart), hook_faces",
                     [brick("cells_rhs_brick", threads, join=0), faces_apart]))
    for threads in (128, 512):
        for skip, what in ((1, "no face sums"), (2, "no inner links"), (4, "no face links"),
                           (6, "no links"), (7, "cells, b = 0, parents only")):
            rows.append((f"skip {skip} {threads} ({what})", [brick("cells_rhs_brick", threads, skip)]))
    for _, launches in rows:  # compile and warm each
        for go in launches:
            go()
    cp.cuda.Device().synchronize()
    print(f"each launch alone in its sequence, device ms (median of {args.repeat}); the rows in turn, twice:")
    for round_ in range(2):
        for name, launches in rows:
            ms = timed(launches, args.repeat)
            print(f"  [{round_}] {name:64s} " + " + ".join(f"{x:.4f}" for x in ms) + f" = {ms.sum():.4f}", flush=True)

if __name__ == "__main__":
    main()
