"""Memory of a sparse liquid bake (issue 12), estimated before baking from the liquid's
volume, not the box: what the Domain panel shows and the bake's guard checks.

Bricks. The grid holds the bricks of the particles' influence boxes (``sparse_grid``):
the liquid's cells grown by the substep margin (``MARGIN`` cells at rest, ~5). Before
baking only the liquid's volume is known (C = particles / particles per cell), so the
liquid is taken as a cube of side s = ∛C cells grown by the margin on every side, in
bricks: ((s + 2·MARGIN)/8 + 1)³ (the +1: a box rarely starts on a brick border), times
``SPREAD`` for the liquid spreading out as it moves (a dam break flattening on the floor
has ~1.3× the bricks of its start in the measured cases). A closed domain never holds
more than its box and wall ring.

Bytes, fitted to measured peaks (``bench/flip_sparse.py --memory``: tracemalloc on the
NumPy path, dam breaks, a blob and a pool at 6k–50k particles) and rounded up:

* a substep on the CPU: ~120 B per pool cell (the channels, neighbour index, the
  compacted pressure unknowns and multigrid levels, transfer temporaries) and ~720 B
  per particle (the gather's sorted pairs and weights, RK2 samples), +80 with APIC;
* the frame's level set (as ``sim._flip_memory_cpu``): 90 B per particle seen and 48 B
  per node of the surface grid (the box's in a closed domain up to
  ``sparse_output.BOX_NODES``, else the liquid's region) and its batch of (particle,
  node) pairs at 42 B; closed, the particles seen include their wall mirrors
  (``CLOSED_IMAGES``: a narrow tank's liquid touches 4 walls);
* on the GPU (not yet measured on a device): 64 B per pool cell of state and solver
  vectors, 100 B per particle, and ``surface_gpu.estimate_gpu_bytes`` for the level set;
* the narrow band's update after advection (``sparse_band.NarrowBand.update``, when the
  band is on), beside the state: a key per particle and its sort (~24 B), and per liquid
  cell its candidates, their dilation one axis at a time, φ's samples and the air rings.
  Measured on the NumPy path (tracemalloc, dam breaks of 0.34M and 1.1M particles, band of
  4 cells, capped substeps so the candidates are dilated): 46–55 B per particle at 8 per
  cell (370–440 B per liquid cell), taken as 24 B a particle and 400 B a liquid cell. On
  an H100 (``bench/flip_sparse.py --row 65m --frames 2 --narrow-band 4``: 65.5M particles,
  3.4M kept) the pool peaked at 10.04 GiB, the deep cells' grid work included; taken as
  40 B a particle and 960 B a liquid cell beside the state (11.7 GiB estimated: 1.17×).
  (Before the keys, (n, 3) rows per particle and 27 shifted copies: 255–571 B per
  particle on the CPU and a 70.1 GiB pool on that row.)
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..grid import GridSpec
from ..grid.sparse import BRICK
from ..grid.sparse_mac import CELLS
from .sparse_output import box_outputs

MARGIN = 5  # cells around the liquid at rest (``sparse_grid.substep_margin``: 1 + 2 + reach + 1)
SPREAD = 1.5  # bricks of the moving liquid over those of its start (module text)
CPU_CELL, CPU_PARTICLE, CPU_APIC = 120, 720, 80
GPU_CELL, GPU_PARTICLE, GPU_APIC = 64, 100, 36
CPU_BAND_PARTICLE, CPU_BAND_CELL = 24, 400
GPU_BAND_PARTICLE, GPU_BAND_CELL = 40, 960
CLOSED_IMAGES = 4  # a closed level set's particles with their mirrors (a tank's liquid touches 3–5 walls)


def estimate_bricks(liquid_cells: float, spec: GridSpec, closed: bool = True) -> int:
    """Bricks a sparse bake of *liquid_cells* cells of liquid needs at its peak."""
    s = max(float(liquid_cells), 1.0) ** (1.0 / 3.0)
    bricks = SPREAD * ((s + 2 * MARGIN) / BRICK + 1) ** 3
    if closed:
        bricks = min(bricks, math.prod(-(-(n + 2) // BRICK) + 1 for n in spec.shape))
    return int(math.ceil(bricks))


def liquid_region_cells(liquid_cells: float, spec: GridSpec, ppc: int) -> GridSpec:
    """The surface grid of an open domain's liquid (``sparse_output``) for a liquid cube
    of *liquid_cells* spread by ``SPREAD``: its estimate, on *spec*'s cell size."""
    from .surface import KERNEL_PER_RADIUS, WALL_CELLS, surface_radii

    r, _ = surface_radii(spec.voxel_size, ppc)
    pad = int(math.ceil(KERNEL_PER_RADIUS * r / spec.voxel_size)) + 1 + WALL_CELLS
    side = int(math.ceil((SPREAD * max(float(liquid_cells), 1.0)) ** (1.0 / 3.0))) + 2 * pad
    return GridSpec(spec.origin, spec.voxel_size, (side, side, side))


def sparse_flip_memory(spec: GridSpec, particles: int, particles_per_cell: int = 8, apic: bool = False,
                       closed: bool = True, parts: bool = False, xp=None, narrow_band: int = 0):
    """Peak bytes of a sparse FLIP bake (``FlipSimulation(..., sparse=True)``) of
    *particles* particles on the device of *xp* (default the backend's), estimated from the
    liquid's volume (module text); *narrow_band* > 0: with the band's update (its cells);
    ``parts=True``: the dict of stages with ``bricks``."""
    from .surface_gpu import estimate_gpu_bytes
    from .surface import (CHUNK_PAIRS, KERNEL_PER_RADIUS, _reachable_offsets, surface_grid,
                          surface_radii)

    P = int(particles)
    ppc = max(1, int(particles_per_cell))
    bricks = estimate_bricks(P / ppc, spec, closed)
    cells = bricks * CELLS
    surface = surface_grid(spec) if closed and box_outputs(spec) else liquid_region_cells(P / ppc, spec, ppc)
    cpu = (xp or backend.xp()) is np
    if cpu:
        state = 60 * cells + (24 + (36 if apic else 0)) * P
        substep = CPU_CELL * cells + (CPU_PARTICLE + (CPU_APIC if apic else 0)) * P
        r, R = surface_radii(spec.voxel_size, ppc)
        seen = (CLOSED_IMAGES if closed else 1) * P  # particles and their wall mirrors
        pairs = min(CHUNK_PAIRS, seen * len(_reachable_offsets(R, spec.voxel_size)[1]))
        output = state + 90 * seen + 48 * surface.voxel_count + 42 * pairs
    else:
        state = 32 * cells + (24 + (36 if apic else 0)) * P
        substep = GPU_CELL * cells + (GPU_PARTICLE + (GPU_APIC if apic else 0)) * P
        r, _ = surface_radii(spec.voxel_size, ppc)
        output = state + max(estimate_gpu_bytes(P, surface, KERNEL_PER_RADIUS * r) + 4 * surface.voxel_count,
                             12 * surface.voxel_count)
    stages = {"substep": int(substep), "frame output": int(output)}
    if int(narrow_band) > 0:
        per_particle, per_cell = (CPU_BAND_PARTICLE, CPU_BAND_CELL) if cpu else (GPU_BAND_PARTICLE, GPU_BAND_CELL)
        stages["narrow band"] = int(state + per_particle * P + per_cell * P / ppc)
    if parts:
        return {"bricks": bricks, "state": int(state), **stages, "total": max(stages.values())}
    return int(max(stages.values()))
