"""What the time-centred advection (``FlipSettings.time_centred_advection``, issue 24) costs
on the GPU: ``bench/flip.py``'s dam break (8M particles at 256³ by default), dense or sparse,
stepped with the setting off and on: per substep the G2P + advection kernel (two more
trilinear samples a particle: u_n at x and at the midpoint) and the whole substep (the
start velocity's select and the kept faces' copy besides), medians over the timed substeps.

    python3 bench/flip_advection_gpu.py [--sparse] [--res 256] [--particles 8000000]
    python3 bench/flip_advection_gpu.py --frames 6 [--sparse]

``--frames N``: the same dam break stepped N frames at 24 fps as a bake steps them, today's
default (CFL 2, Max Substeps 8) against CFL 4 with Max Substeps 5, the setting off and on:
ms per frame (CUDA events around ``step``), substeps per frame, and the surge front (the
99.5th percentile of the particles' x, m; the default's is the reference: the CPU's
accuracy scenes say CFL 4 leads it with the setting off and holds it with it on).

The device call that checks the branch (one run, ≤ 200 s on an H100; nothing of it has run
on a device yet): ``bash bench/flip_advection_gpu_call.sh``, which runs

    tests/gpu/test_flip_centred_advection_gpu.py      (90 s) the kernels against NumPy, the
                                                      accuracy scenes at CFL 4, resume with the
                                                      kept faces, the memory estimates' coverage;
      test_flip_transfer_gpu.py::test_gpu_grid_to_particles_matches_cpu and
      ::test_gpu_advect_and_fused_step_match_cpu, test_flip_sparse_g2p_gpu.py (the g2p_advect
      kernels with the flag off), test_flip_checkpoint_outputs_gpu.py,
      test_flip_sim_gpu.py::test_gpu_resume_from_checkpoint_matches_an_uninterrupted_run,
      test_liquid_memory_check_gpu.py (the setting off: unchanged)
    bench/flip_advection_gpu.py, then --sparse         (25 s each) the cost per substep, 8M
    bench/flip_advection_gpu.py --frames 6            (50 s) the 8M frame at CFL 4 / Max Substeps 5
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


FRAME_CASES = (("today's default", 2.0, 8, False), ("CFL 4, Max Substeps 5", 4.0, 5, False),
               ("CFL 4, Max Substeps 5, time-centred", 4.0, 5, True))


def frames(sparse, res, particles, count, cfl, max_substeps, centred, fps=24.0):
    """*count* frames of the dam break: (ms per frame, substeps per frame, front x (m))."""
    import cupy as cp

    spec, v, t = flip.dam_break(res, particles)
    settings = FlipSettings(cfl=cfl, max_substeps=max_substeps, time_centred_advection=centred)
    sim = FlipSimulation(spec, settings, v, t, xp=cp, sparse=sparse)
    ms, substeps, front = [], [], []
    for _ in range(count):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        sim.step(1 / fps)
        b.record()
        b.synchronize()
        ms.append(cp.cuda.get_elapsed_time(a, b))
        substeps.append(sim.substep_log[-1][0])
        front.append(float(cp.percentile(sim.pos[:, 0], 99.5)))
    return ms, substeps, front


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--res", type=int, default=256)
    ap.add_argument("--particles", type=int, default=8_000_000)
    ap.add_argument("--frames", type=int, default=0, help="step this many 24 fps frames per case instead")
    ap.add_argument("--cases", nargs="+", metavar="CFL:MAX_SUBSTEPS:CENTRED",
                    help="with --frames: these cases (e.g. 5:3:1) instead of FRAME_CASES")
    args = ap.parse_args()
    cases = FRAME_CASES if not args.cases else [
        (f"CFL {c}, Max Substeps {m}{', time-centred' if int(k) else ''}", float(c), int(m), bool(int(k)))
        for c, m, k in (case.split(":") for case in args.cases)]
    if args.frames:
        print(f"{'sparse' if args.sparse else 'dense'} dam break, {args.res}³, {args.frames} frames at 24 fps")
        print("case | ms per frame | substeps per frame | front x (m) per frame")
        print("--- | --- | --- | ---")
        for name, cfl, cap, centred in cases:
            ms, n, x = frames(args.sparse, args.res, args.particles, args.frames, cfl, cap, centred)
            print(f"{name} | {' '.join(f'{m:.0f}' for m in ms)} | {' '.join(map(str, n))} | "
                  f"{' '.join(f'{f:.3f}' for f in x)}", flush=True)
        return
    print(f"{'sparse' if args.sparse else 'dense'} dam break, {args.res}³")
    print("advection | particles | G2P + advection ms | substep ms")
    print("--- | --- | --- | ---")
    for centred in (False, True):
        n, g2p, substep = run(args.sparse, args.res, args.particles, centred)
        print(f"{'time-centred' if centred else 'end (today)'} | {n:,} | {g2p:.3f} | {substep:.2f}", flush=True)


if __name__ == "__main__":
    main()
