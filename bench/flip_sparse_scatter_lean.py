"""The P2G scatter's two per-particle codes (``VOXFX_SPARSE_SCATTER_KERNEL`` classic / lean,
``kernels/cuda/flip_sparse_scatter.cu``; issue 24, helper i24q2) on the 8M dam break, in
one process:

    python3 bench/flip_sparse_scatter_lean.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 9]
    python3 bench/flip_sparse_scatter_lean.py --ncu   # under ncu --profile-from-start off

After *substeps* substeps: both codes' faces, masks and integer sums compared bit for bit
(FLIP and APIC with a random C), then with CUDA events (medians of *repeat*, the codes
alternating) the P2G launches (the grouped count, scan, place, sums zeroed, the brick
scatter in either code, the division), whole ``particles_to_grid`` in either code, classify
and extrapolate. ``--ncu``: only one P2G in either code, classify and extrapolate between
``cudaProfilerStart`` and ``Stop`` (one launch of each kernel for ``ncu``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_scatter, sparse_transfer  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from _cuda_events import timed  # noqa: E402
from _p2g_order import mode_bits, time_rows, whole_p2g  # noqa: E402
from _p2g_order import p2g as order_p2g  # noqa: E402

MODES = sparse_scatter.KERNEL_MODES
VAR = "VOXFX_SPARSE_SCATTER_KERNEL"


def p2g(g, pos, vel, c, mode):
    return order_p2g(g, pos, vel, c, VAR, mode)


def bits(cp, g, pos, vel):
    """Both codes' faces and masks (order binning) and sums (sorted binning), FLIP and APIC."""
    for apic, out in mode_bits(cp, g, pos, vel, VAR, MODES):
        same = all(np.array_equal(a, b) for a, b in zip(out["lean"], out["classic"]))
        print(f"bits ({'APIC' if apic else 'FLIP'}): lean == classic: {same}; valid faces "
              f"{sum(int(np.count_nonzero(m)) for m in out['classic'][3:6]):,}")


def launches(cp, g, pos, vel, repeat):
    """The P2G launches one by one on the same binning (FLIP), the scatter in both codes alternating."""
    from _p2g_order import OrderLaunches
    from voxfx.kernels.flip.sparse_gpu import _I64

    run = OrderLaunches(cp, g, pos, vel)
    cells, acc, bounds = run.cells, run.acc, run.bounds

    def scatter(lean, spread=sparse_scatter.SCATTER_SPREAD, blocks=4):
        return run.scatter(sparse_scatter._build(blocks, 1, lean), spread)

    faces = tuple(cp.empty(cells, cp.float32) for _ in range(3))
    masks = tuple(cp.empty(cells, cp.uint8) for _ in range(3))

    def finish():
        sparse_scatter.SCATTER.launch("p2g_scatter_finish", cells, (acc, _I64(cells), bounds, *faces, *masks))

    rows = [("count_particles_grouped", run.count_pass("count_particles_grouped")),
            ("bin_scan_sums + bin_scan", run.scan), ("place_particles", run.place),
            ("scatter sums zeroed", lambda: acc.fill(0)),
            ("p2g_scatter_brick classic", scatter(0)), ("p2g_scatter_brick lean", scatter(1)),
            ("p2g_scatter_brick lean, spread 4", scatter(1, 4)), ("p2g_scatter_brick lean, spread 16", scatter(1, 16)),
            ("p2g_scatter_brick lean, 3 blocks an SM", scatter(1, blocks=3)),
            ("p2g_scatter_finish", finish)]
    for _, fn in rows:
        fn()  # warm (compiles)
    sums = {}
    for lean in (0, 1):
        acc.fill(0)
        scatter(lean)()
        sums[lean] = cp.asnumpy(acc)
    print(f"launch sums lean == classic: {np.array_equal(sums[0], sums[1])}")
    time_rows(cp, rows, repeat)


def whole(cp, g, pos, vel, repeat):
    """Whole P2G in either code (alternating), classify and extrapolate after it."""
    whole_p2g(cp, g, pos, vel, VAR, MODES, repeat)
    saved = p2g(g, pos, vel, None, "classic")
    print(f"classify | {timed(cp, lambda: sparse_transfer.classify(g, pos), repeat):.4f}")

    def ext():
        g.valid = saved
        sparse_transfer.extrapolate(g)
    print(f"extrapolate | {timed(cp, ext, repeat):.4f}")


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--ncu", action="store_true", help="one P2G a code, classify, extrapolate under the profiler")
    args = ap.parse_args()
    import cupy as cp

    _, sim, _ = stepped_dam_break(args)
    g, pos, vel = sim.grid, sim.pos, sim.vel
    print(f"{args.res}³, {int(pos.shape[0]):,} particles, {g.brick_count()} bricks")
    if args.ncu:
        for mode in MODES:  # compiled outside the profiled range
            p2g(g, pos, vel, None, mode)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.start()
        for mode in MODES:
            g.valid = p2g(g, pos, vel, None, mode)
        sparse_transfer.classify(g, pos)
        sparse_transfer.extrapolate(g)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.stop()
        return
    bits(cp, g, pos, vel)
    launches(cp, g, pos, vel, args.repeat)
    whole(cp, g, pos, vel, args.repeat)


if __name__ == "__main__":
    main()
