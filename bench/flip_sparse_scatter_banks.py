"""The lean P2G scatter's slot order (``VOXFX_SPARSE_SCATTER_BANKS`` flip / flat,
``kernels/cuda/flip_sparse_scatter.cu``'s SCATTER_FLIP; issue 24, helper i24q4) on the 8M dam
break, in one process:

    python3 bench/flip_sparse_scatter_banks.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 9]
    python3 bench/flip_sparse_scatter_banks.py --ncu   # under ncu --profile-from-start off

After *substeps* substeps: the flip order's faces, masks and integer sums against the flat
order's, bit for bit (FLIP and APIC with a random C); then with CUDA events (medians of
*repeat*, the rows in turn) the P2G launches on one order binning (the grouped count, scan,
place, sums zeroed, the brick scatter in either order, flip also at spreads 4 and 16, the
division) and whole ``particles_to_grid`` in either order. ``--ncu``: one brick scatter of
each between ``cudaProfilerStart`` and ``Stop`` (one launch each for ``ncu``: the shared
atomics' wavefronts and bank conflicts)."""

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
from voxfx.kernels.flip import sparse_scatter  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from _p2g_order import mode_bits, time_rows, whole_p2g  # noqa: E402

MODES = sparse_scatter.BANK_MODES
VAR = "VOXFX_SPARSE_SCATTER_BANKS"


def bits(cp, g, pos, vel):
    """The flip order's faces and masks (order binning) and sums (sorted binning) against flat's, FLIP and APIC."""
    for apic, out in mode_bits(cp, g, pos, vel, VAR, MODES):
        same = {m: all(np.array_equal(a, b) for a, b in zip(out[m], out["flat"])) for m in MODES if m != "flat"}
        print(f"bits ({'APIC' if apic else 'FLIP'}): the same as flat: {same}; valid faces "
              f"{sum(int(np.count_nonzero(m)) for m in out['flat'][3:6]):,}")
    os.environ.pop(VAR, None)


def scatters(run):
    """(name, launch) of the brick scatter in either order (flip also at spreads 4 and 16)."""
    rows = [(f"p2g_scatter_brick {mode}", run.scatter(sparse_scatter._build(4, 1, 1, int(mode == "flip"))))
            for mode in ("flat", "flip")]
    return rows + [(f"p2g_scatter_brick flip, spread {spread}", run.scatter(sparse_scatter._build(4, 1, 1, 1), spread))
                   for spread in (4, 16)]


def launches(cp, g, pos, vel, repeat):
    """The P2G launches one by one on the same binning (FLIP), the scatter's orders in turn."""
    from _p2g_order import OrderLaunches
    from voxfx.kernels.flip.sparse_gpu import _I64

    run = OrderLaunches(cp, g, pos, vel)
    cells, acc, bounds = run.cells, run.acc, run.bounds
    faces = tuple(cp.empty(cells, cp.float32) for _ in range(3))
    masks = tuple(cp.empty(cells, cp.uint8) for _ in range(3))

    def finish():
        sparse_scatter.SCATTER.launch("p2g_scatter_finish", cells, (acc, _I64(cells), bounds, *faces, *masks))

    rows = [("count_particles_grouped", run.count_pass("count_particles_grouped")),
            ("bin_scan_sums + bin_scan", run.scan), ("place_particles", run.place),
            ("scatter sums zeroed", lambda: acc.fill(0)), *scatters(run), ("p2g_scatter_finish", finish)]
    for _, fn in rows:
        fn()  # warm (compiles)
    sums = {}
    for name, fn in scatters(run):
        acc.fill(0)
        fn()
        sums[name] = cp.asnumpy(acc)
    first = next(iter(sums.values()))
    print(f"launch sums the same in either order: {all(np.array_equal(s, first) for s in sums.values())}")
    time_rows(cp, rows, repeat)


def whole(cp, g, pos, vel, repeat):
    """Whole P2G in either order (in turn)."""
    whole_p2g(cp, g, pos, vel, VAR, MODES, repeat)
    os.environ.pop(VAR, None)


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--ncu", action="store_true", help="one brick scatter an order under the profiler")
    args = ap.parse_args()
    import cupy as cp

    _, sim, _ = stepped_dam_break(args)
    g, pos, vel = sim.grid, sim.pos, sim.vel
    print(f"{args.res}³, {int(pos.shape[0]):,} particles, {g.brick_count()} bricks")
    if args.ncu:
        from _p2g_order import OrderLaunches

        run = OrderLaunches(cp, g, pos, vel)
        run.count_pass("count_particles_grouped")()
        run.scan()
        run.place()
        pieces = scatters(run)
        for _, fn in pieces:  # compiled outside the profiled range
            fn()
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.start()
        for _, fn in pieces:
            fn()
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.stop()
        print("profiled, in order:", ", ".join(name for name, _ in pieces))
        return
    bits(cp, g, pos, vel)
    launches(cp, g, pos, vel, args.repeat)
    whole(cp, g, pos, vel, args.repeat)


if __name__ == "__main__":
    main()
