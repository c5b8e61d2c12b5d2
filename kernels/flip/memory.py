"""Memory of a dense FLIP bake (``sim.FlipSimulation``), stage by stage, before baking:
what the Domain panel shows and the bake's guard checks (issue 21 §6). The sparse
solver's is ``sparse_memory``."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid import GridSpec
from . import particle_count, pressure

def flip_memory(spec: GridSpec, particles: int, apic: bool = False, parts: bool = False, xp=None,
                time_centred: bool = False, count_control: bool = False):
    """Peak bytes of a FLIP bake (``FlipSimulation``) on the device of *xp* (default: the
    current backend's), stage by stage; the largest stage is the peak (``parts=True``: the
    dict of stages). On the CPU see ``_flip_memory_cpu``. On the GPU, with C cells, F faces
    (≈ 3C), P particles:

    * state, alive throughout: u, v, w and solid_u/v/w float32 (8 B/face), cell and
      solid (2 B/cell), the valid-face masks the grid keeps (1 B/face), pos and vel
      (24 B/particle, +36 with APIC) and the cached pressure solver
      (``pressure_memory_bytes``: it stays between substeps);
    * particles → grid: new valid masks (1 B/face; the old ones until replaced), the
      counting sort's per-cell count, start and scan (12 B/cell) and per particle cell,
      rank, order and sorted pos, vel (, C) (36 B, +36);
    * pressure: the old velocities saved for FLIP (4 B/face), the density correction's
      particle counts (4 B/cell, ``density.dense_counts``) and ``pressure_stage_bytes``
      beyond the solver;
    * velocity extrapolation into the air: the old velocities, a fluid mask, per
      component a padded mask, two shifted takes and their union (5 B/cell) and the
      double buffers of the largest component (5 B/face / 3);
    * frame output: the particle level set (``surface_gpu.estimate_gpu_bytes``), then the
      cell-centred velocity (three averages and their stack, 24 B/cell);
    * *time_centred* (``FlipSettings.time_centred_advection``): the kept faces and their
      fluid masks in the state (5 B/face), and at the advection the old velocities, this
      substep's fluid masks, u_n (the kept faces' select), the new kept copies and the
      select's masks (14 B/face beyond the state). Counted, not yet measured on a GPU;
    * *count_control* (``particle_count.limit_of(settings) > 0``, Max Particles per Cell): the
      frame-end pass of ``particle_count`` beside the state, a stage of its own (it runs after
      the last substep has returned and before the frame's output: ``FlipSimulation.step``),
      ``particle_count.frame_end_bytes``: the counts and a pass's ``bincount`` (16 B/cell),
      the keep mask (1 B/particle) and a pass's temporaries (~100 B a particle of
      ``CHUNK_GPU``, at most P), or the kept particles' copy (32 B/particle, +36 with APIC).
      Counted, not measured on a GPU.
    """
    from .surface import KERNEL_PER_RADIUS
    from .surface_gpu import estimate_gpu_bytes

    if (xp or backend.xp()) is np:
        return _flip_memory_cpu(spec, particles, apic, parts, time_centred, count_control)
    nx, ny, nz = spec.shape
    C = spec.voxel_count
    F = (nx + 1) * ny * nz + nx * (ny + 1) * nz + nx * ny * (nz + 1)
    P = int(particles)
    per_p = 24 + (36 if apic else 0)
    solver = pressure.pressure_memory_bytes(spec.shape)
    state = 8 * F + 2 * C + F + per_p * P + solver + (5 * F if time_centred else 0)
    stages = {
        "particles to grid": state + F + 12 * C + (36 + (36 if apic else 0)) * P,
        "pressure": state + 4 * F + 4 * C + pressure.pressure_stage_bytes(spec.shape) - solver,  # + the counts
        "extrapolate": state + 4 * F + C + 5 * C + (5 * F) // 3 + F,
        "frame output": state + max(estimate_gpu_bytes(P, spec, KERNEL_PER_RADIUS * 0.5 * spec.voxel_size), 24 * C),
    }
    if time_centred:
        stages["advection"] = state + 14 * F
    if count_control:
        stages["count control"] = state + particle_count.frame_end_bytes(C, P, apic, gpu=True)
    if parts:
        return {"state": state, **stages, "total": max(stages.values())}
    return int(max(stages.values()))


def _flip_memory_cpu(spec: GridSpec, particles: int, apic: bool, parts: bool, time_centred: bool = False,
                     count_control: bool = False):
    """Peak host bytes of a FLIP bake on the NumPy path, fitted to tracemalloc and RSS
    measurements stage by stage (``bench/memory_sim.py``, 32³–96³, two fill heights) and
    rounded up:

    * a substep: ~272 B per particle and ~46 B per cell (state and NumPy temporaries of
      the transfers, the counting sort and the solve), +72 B per particle with APIC;
    * the frame's closed level set: the state, ~76 B per particle and its wall mirrors,
      48 B per node of the grown grid, and its batches of (particle, node) pairs
      (``surface.CHUNK_PAIRS`` at ~42 B per pair, fewer when the particles make fewer);
    * *time_centred*: the kept faces and masks, 15 B per cell in the state, and the substep
      55 B per cell more (tracemalloc from the start, a 48×24×32 dam break, two frames at
      CFL 4: the peak 51.0 B per cell above the setting off's, at the advection: the kept
      faces, u_n, this substep's masks and the new kept copies);
    * *count_control*: the count control's frame-end pass beside the state (after the last
      substep, before the level set), ``particle_count.frame_end_bytes`` (tracemalloc on the
      pass: 16 B per cell, the keep mask's 1 B per particle and 60.5–68.5 B per particle of a
      ``CHUNK`` pass, taken as 70; or the kept particles' copy, 32.0 B each, 68.0 with APIC).
    """
    from .surface import CHUNK_PAIRS, _reachable_offsets, surface_grid, surface_radii

    C = spec.voxel_count
    P = int(particles)
    extra = 80 if apic else 0
    state = 24 * P + 24 * C + (36 * P if apic else 0) + (15 * C if time_centred else 0)
    r, R = surface_radii(spec.voxel_size, 8)
    pairs = min(CHUNK_PAIRS, 2 * P * len(_reachable_offsets(R, spec.voxel_size)[1]))
    stages = {
        "substep": (300 + extra) * P + (115 if time_centred else 60) * C,
        "frame output": state + 90 * P + 48 * surface_grid(spec).voxel_count + 42 * pairs,
    }
    if count_control:
        stages["count control"] = state + particle_count.frame_end_bytes(C, P, apic)
    if parts:
        return {"state": state, **stages, "total": max(stages.values())}
    return int(max(stages.values()))
