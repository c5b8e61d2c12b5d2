"""FLIP benchmark (issue 5): the seed's dam break (a fluid block in one corner of a closed
box) on the GPU, ms per step split by stage, CG iterations, peak device memory.

    python3 bench/flip.py [--quick]

Stages are timed with CUDA events around the same calls ``FlipSimulation.substep``
makes: P2G (+ classify, extrapolate, gravity, boundaries), pressure (MGPCG to 1e-4),
projection, G2P + advection, and the surface (particle level set closed against the walls,
on the grid grown 3 cells past them, once per frame). Seed 003 Table 3 (Quadro GP100):
dam break 8M particles at 256³ in 258 ms per frame, 4M at 128³ (water drop) 179 ms.
Floors: bytes each stage must move at 4 TB/s.
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
from tests.meshes import box  # noqa: E402
from voxfx.kernels.flip import pressure, transfer  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402

BANDWIDTH = 4.0e12
STAGES = ["p2g", "pressure", "project", "g2p+advect", "surface"]


def dam_break(n, particles):
    """n³ box of 1 m; a fluid block in one corner holding about *particles* particles."""
    h = 1.0 / n
    cells = particles / 8
    side = (cells / 2) ** (1 / 3) * h  # block twice as tall as wide
    v, t = box((0.0, 0.0, 0.0), (side, side, min(0.95, 2 * side)))
    return GridSpec((0.0, 0.0, 0.0), h, (n, n, n)), v, t


def spreading_liquid(xp, n=128, particles=1_000_000, time_centred=False):
    """The memory checks' spreading dam break (tests/gpu/test_liquid_memory_check_gpu.py,
    test_flip_centred_advection_gpu.py, bench/_memory_check_probe.py), set up as a bake does:
    (the sparse simulation on *xp*, its estimate before the bake with the parts, the bake's
    ``FrameCheck`` before each frame); *time_centred*: the advection and both estimates so."""
    from voxfx.kernels.flip import sparse_memory as M
    from voxfx.kernels.flip.frame_check import FrameCheck

    spec, v, t = dam_break(n, particles)
    sim = FlipSimulation(spec, FlipSettings(time_centred_advection=time_centred), v, t, xp=xp, sparse=True)
    top = (float(np.asarray(v)[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    estimate = M.sparse_flip_memory(spec, len(sim.pos), xp=xp, climb=M.climb_cells(top, 0.0, spec), parts=True,
                                    time_centred=time_centred)
    check = FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=xp,
                                                             time_centred=time_centred),
                       True, M.box_bricks(spec), xp=xp, first=estimate["bricks"])
    return sim, estimate, check


def timed_substep(sim, dt, ev):
    import cupy as cp

    g, s = sim.grid, sim.settings
    ev[0].record()
    transfer.particles_to_grid(g, sim.pos, sim.vel, sim.c)
    transfer.classify(g, sim.pos)
    transfer.extrapolate(g)
    old = (g.u.copy(), g.v.copy(), g.w.copy())
    g.w += np.float32(s.gravity[2] * dt)
    transfer.enforce_boundaries(g)
    ev[1].record()
    p, stats = pressure.solve_pressure(g, dt, tolerance=s.pressure_tolerance, max_iterations=s.pressure_max_iterations)
    ev[2].record()
    pressure.project(g, p, dt)
    transfer.extrapolate(g, valid=transfer.fluid_faces(g))
    ev[3].record()
    transfer.grid_to_particles_and_advect(g, *old, sim.pos, sim.vel, s.flip_ratio, dt, sim.c)
    ev[4].record()
    ev[4].synchronize()
    return [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) for i in range(4)], stats["iterations"]


def run(n, particles, steps=10, warm=5):
    import cupy as cp

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    spec, v, t = dam_break(n, particles)
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp)
    ev = [cp.cuda.Event() for _ in range(5)]
    dt = 1 / 120
    for _ in range(warm):
        timed_substep(sim, dt, ev)
    rows, its = [], []
    for _ in range(steps):
        ms, it = timed_substep(sim, dt, ev)
        rows.append(ms)
        its.append(it)
    sim.level_set()  # warm: the first call compiles the surface kernels (seconds on a cold cache)
    s0, s1 = cp.cuda.Event(), cp.cuda.Event()
    s0.record()
    sim.level_set()
    s1.record()
    s1.synchronize()
    surface_ms = cp.cuda.get_elapsed_time(s0, s1)
    med = list(np.median(np.array(rows), axis=0)) + [surface_ms]
    return spec, len(sim.pos), med, int(np.median(its)), pool.total_bytes()


def floors(n, particles):
    cells = n ** 3
    return {"p2g": (particles * 24 + 3 * cells * 4) / BANDWIDTH * 1e3,
            "cg iteration": 10 * cells * 4 / BANDWIDTH * 1e3,
            "g2p+advect": (particles * 48 + 6 * cells * 4) / BANDWIDTH * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    configs = [(128, 4_000_000), (192, 6_000_000), (256, 8_000_000)]
    if args.quick:
        configs = configs[:1]
    header = ["grid", "particles"] + [f"{s} ms" for s in STAGES] + ["CG it", "step ms", "peak MiB", "vs seed"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for n, particles in configs:
        spec, count, med, it, peak = run(n, particles)
        step = sum(med[:4])
        seed = {128: 179.0, 256: 258.0}.get(n)
        row = [f"{n}³", f"{count:,}"] + [f"{m:.2f}" for m in med] + [str(it), f"{step:.1f}", f"{peak / 2**20:.0f}",
                                                                      f"{seed / step:.1f}× (seed {seed:.0f} ms/frame)"
                                                                      if seed else ""]
        print(" | ".join(row), flush=True)
        print("   floors (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in floors(n, count).items()), flush=True)


if __name__ == "__main__":
    main()
