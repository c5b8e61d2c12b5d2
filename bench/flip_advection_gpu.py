"""What the time-centred advection (``FlipSettings.time_centred_advection``, issue 24) costs
on the GPU: ``bench/flip.py``'s dam break (8M particles at 256³ by default), dense or sparse,
stepped with the setting off and on: per substep the G2P + advection kernel (two more
trilinear samples a particle: u_n at x and at the midpoint) and the whole substep (the
start velocity's select and the kept faces' copy besides), medians over the timed substeps.

    python3 bench/flip_advection_gpu.py [--sparse] [--res 256] [--particles 8000000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import flip  # noqa: E402  (loads the package)
from voxfx.kernels.flip import sparse_transfer, transfer  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402


def timed(module, name, log):
    """Wrap *module*.*name* so that each call's GPU time (ms) goes to *log*."""
    import cupy as cp

    call = getattr(module, name)

    def wrapper(*args, **kwargs):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        out = call(*args, **kwargs)
        b.record()
        b.synchronize()
        log.append(cp.cuda.get_elapsed_time(a, b))
        return out

    setattr(module, name, wrapper)
    return call


def run(sparse, res, particles, centred, warm=4, steps=8, dt=1 / 120):
    import cupy as cp

    spec, v, t = flip.dam_break(res, particles)
    sim = FlipSimulation(spec, FlipSettings(time_centred_advection=centred), v, t, xp=cp, sparse=sparse)
    module, name = (sparse_transfer, "g2p_advect") if sparse else (transfer, "grid_to_particles_and_advect")
    kernel = []
    call = timed(module, name, kernel)
    try:
        for _ in range(warm):
            sim.substep(dt)
        kernel.clear()
        whole = []
        for _ in range(steps):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            sim.substep(dt)
            b.record()
            b.synchronize()
            whole.append(cp.cuda.get_elapsed_time(a, b))
    finally:
        setattr(module, name, call)
    return len(sim.pos), float(np.median(kernel)), float(np.median(whole))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--res", type=int, default=256)
    ap.add_argument("--particles", type=int, default=8_000_000)
    args = ap.parse_args()
    print(f"{'sparse' if args.sparse else 'dense'} dam break, {args.res}³")
    print("advection | particles | G2P + advection ms | substep ms")
    print("--- | --- | --- | ---")
    for centred in (False, True):
        n, g2p, substep = run(args.sparse, args.res, args.particles, centred)
        print(f"{'time-centred' if centred else 'end (today)'} | {n:,} | {g2p:.3f} | {substep:.2f}", flush=True)


if __name__ == "__main__":
    main()
