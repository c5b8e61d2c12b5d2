"""The sparse FLIP benches' scenes (``flip_sparse.ROWS``: ``bench/flip.py``'s dam break, a
long river box, a still tank), and the dam break stepped a few substeps on the GPU (the
particles spread, the bricks moved) that ``flip_sparse_g2p.py`` and ``flip_sparse_p2g.py``
time their stages' launches on."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402

from tests.meshes import box  # noqa: E402
from voxfx.kernels.grid import GridSpec  # noqa: E402


def river(n, particles):
    """A long closed box n × n/2 × n/4 cells (h = 4 m / n: 4 × 2 × 1 m at any n) with a
    block of water the full width at one end, 3/128 of the length deep (48.5 cells at
    2048), holding about *particles* particles: the dam-break wave runs down the box's
    length. The block reaches a cell past the walls it touches and its free faces lie
    mid-cell, so only one layer of cells under those two faces needs the seeding's inside
    test on the host (~2.5M points at 2048), not the walls' too."""
    h = 4.0 / n
    wide, deep = n // 2, 3 * n // 128
    long = max(1, round(particles / 8 / (wide * deep)))
    v, t = box((-h, -h, -h), ((long + 0.5) * h, (wide + 1) * h, (deep + 0.5) * h))
    return GridSpec((0.0, 0.0, 0.0), h, (n, wide, n // 4)), v, t


def still_tank(n, particles):
    """An n³ box of 1 m with still water over its whole floor holding about *particles*
    particles (the warm start's case, issue 24: liquid whose pressure changes little); its
    surface mid-cell and its sides a cell past the walls, as ``river``'s block."""
    h = 1.0 / n
    deep = max(1, round(particles / 8 / n ** 2))
    v, t = box((-h, -h, -h), ((n + 1) * h, (n + 1) * h, (deep + 0.5) * h))
    return GridSpec((0.0, 0.0, 0.0), h, (n, n, n)), v, t


def scene(n, particles, kind):
    return {"river": river, "still": still_tank}.get(kind, dam_break)(n, particles)


def add_scene_arguments(ap):
    """The stepped dam break's options: its grid, particles and substeps before timing."""
    ap.add_argument("--res", type=int, default=256)
    ap.add_argument("--particles", type=float, default=8e6)
    ap.add_argument("--substeps", type=int, default=4)


def stepped_dam_break(args, dt=1 / 120):
    """(spec, sim, dt): the dam break of ``args.res`` cells and ``args.particles`` on the
    sparse solver on the GPU, ``args.substeps`` substeps of *dt* on, the device idle (the
    device's name printed first)."""
    import cupy as cp

    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    spec, v, t = dam_break(args.res, int(args.particles))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    for _ in range(args.substeps):
        sim.substep(dt)
    cp.cuda.Device().synchronize()
    return spec, sim, dt
