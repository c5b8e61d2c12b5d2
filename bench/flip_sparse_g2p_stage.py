"""The G2P + advection stage of a sparse FLIP substep against its kernel alone (issue 24,
helper i24a): how much of the row's G2P + advection (``bench/flip_sparse.py``) is the device
waiting for the host:

    python3 bench/flip_sparse_g2p_stage.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 9]

The dam break runs *substeps* substeps, then one substep up to its G2P
(``flip_sparse_g2p.state_before_g2p``); the stage (``sparse_transfer.g2p_advect``, one kernel)
is timed *repeat* times on copies of the particles (the bins restored), four ways:

``queued``  a spin kernel (~3 ms) first and the start event after it: the device's time alone;
``idle``    the device idle when the stage's Python starts;
``row``     as in the row: the projection's tail (``extrapolate(valid=fluid_faces)``: three
            launches, idempotent on these faces) queued first, then the start event, so the
            stage's time includes any wait for the host behind that tail;
``host``    the host's ms to issue the stage (``idle``'s call), and the tail's device ms.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_transfer  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from flip_sparse_g2p import state_before_g2p  # noqa: E402
from flip_sparse_p2g_stage import SPIN  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    import cupy as cp

    _, sim, dt = stepped_dam_break(args)
    g, s = sim.grid, sim.settings
    old, bins = state_before_g2p(sim, dt)
    print(f"{args.res}³, {int(sim.pos.shape[0]):,} particles, {g.brick_count()} bricks ({g.size:,} pool cells)")
    spin = cp.RawKernel(SPIN, "spin")
    state = {}

    def prepare():
        state["pos"], state["vel"] = sim.pos.copy(), sim.vel.copy()
        state["c"] = None if sim.c is None else sim.c.copy()
        g.bins = (state["pos"], *bins[1:])
        cp.cuda.Device().synchronize()

    def stage():
        sparse_transfer.g2p_advect(g, old, state["pos"], state["vel"], s.flip_ratio, dt, state["c"])

    rows = {k: [] for k in ("queued", "idle", "row", "host", "tail")}
    ev = [cp.cuda.Event() for _ in range(3)]
    for r in range(args.repeat + 1):
        prepare()
        spin((1,), (1,), (np.int64(6_000_000),))
        ev[0].record()
        stage()
        ev[1].record()
        ev[1].synchronize()
        queued = cp.cuda.get_elapsed_time(ev[0], ev[1])
        prepare()
        ev[0].record()
        t0 = time.perf_counter()
        stage()
        host = (time.perf_counter() - t0) * 1e3
        ev[1].record()
        ev[1].synchronize()
        idle = cp.cuda.get_elapsed_time(ev[0], ev[1])
        prepare()
        ev[2].record()
        sparse_transfer.extrapolate(g, valid=sparse_transfer.fluid_faces(g))
        ev[0].record()
        stage()
        ev[1].record()
        ev[1].synchronize()
        if r:  # the first round compiles
            for k, v in (("queued", queued), ("idle", idle), ("host", host),
                         ("row", cp.cuda.get_elapsed_time(ev[0], ev[1])),
                         ("tail", cp.cuda.get_elapsed_time(ev[2], ev[0]))):
                rows[k].append(v)
    g.bins = None
    print(f"G2P + advection stage (medians of {args.repeat}, ms) | queued (device alone) | idle | as the row | "
          "host to issue | the projection's tail before it")
    print(" | ".join(f"{np.median(rows[k]):.3f}" for k in ("queued", "idle", "row", "host", "tail")))


if __name__ == "__main__":
    main()
