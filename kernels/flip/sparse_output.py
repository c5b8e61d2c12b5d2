"""The sparse liquid's frame outputs (issue 12): the level set and the cell velocity on a
box around the liquid wherever it is, not on the simulation box.

Closed domain: the box, as the dense solver (``closed_level_set``, meeting the walls),
while its surface grid has at most ``BOX_NODES`` nodes; a larger box (up to 2048 cells
along its longest side, where a box-sized level set would not fit) the liquid's region
below clipped to the box and its wall cells, φ still cut by the walls. Open domain: the
liquid may have left the box, so the outputs cover the *liquid's region* — the bounding
box of the particles' cells grown by the surface kernel's reach (⌈R/h⌉ + 1 cells), on the
simulation lattice — grown again by ``WALL_CELLS`` like the closed surface grid
(``surface_grid``). Memory follows the liquid's extent, not the box or its kill distance;
no walls cut the level set (``particle_level_set``).

The cell velocity (``cell_velocity``) is padded on the device's indices (a padding cell
is its nearest region cell's own average: ``np.pad(mode="edge")``'s values) and each
chunk is copied straight into one host block, page-locked for the closed box (one shape
frame after frame, so CuPy's pinned pool hands the block back). Before, each chunk went
through a pageable copy into a zeroed array and the host padded the whole grid again
(``legacy_cell_velocity``, ``VOXFX_CELL_VELOCITY=legacy``). The 8M dam break's
262³ × 3 float32 grid (216 MB) in the real bake loop (``bench/bake_frames.py``, H100 80GB
HBM3, one call, medians of frames 3–5): 318 → 42 ms a frame, the same bits
(tests/gpu/test_liquid_frame_outputs_gpu.py against the NumPy reference).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import backend
from ..grid import GridSpec
from .surface import KERNEL_PER_RADIUS, surface_grid, surface_radii

CHUNK_CELLS = 1 << 22  # cell velocities averaged at once
BOX_NODES = 384 ** 3  # a closed box's surface grid up to this many nodes is the level set's grid


def box_outputs(spec: GridSpec) -> bool:
    """Whether a closed domain's outputs cover its whole box (module text)."""
    return surface_grid(spec).voxel_count <= BOX_NODES


def liquid_region(sim) -> GridSpec:
    """The liquid's region (module text) as a grid on *sim*'s lattice: the box itself when
    it holds no particle, or is closed and small enough (``box_outputs``); clipped to the
    box when closed. On the GPU (``surface_gpu.REGION_BOUNDS``, ``VOXFX_LEVEL_SET_BOUNDS=0`` for
    A/B) the particles' bounds come from one pass and one host read (``surface_gpu.particle_bounds``;
    at 65M particles the six reductions and reads of the cell coordinates were ~3 ms of the
    frame's level set; measured 4.13 → 1.27 ms, bench/RESULTS.md)."""
    from . import surface_gpu

    spec, xp = sim.spec, sim.xp
    closed = sim.boundary == "closed"
    if len(sim.pos) == 0 or (closed and box_outputs(spec)):
        return spec
    r, _ = surface_radii(spec.voxel_size, sim.settings.particles_per_cell)
    pad = int(math.ceil(KERNEL_PER_RADIUS * r / spec.voxel_size)) + 1
    if xp is not np and surface_gpu.REGION_BOUNDS:  # the particles' bounds in one pass and one host read;
        ends = sim.grid.cell_coords(surface_gpu.particle_bounds(sim.pos))  # cell units are monotone: the same cells
        bounds = [(float(a[0]), float(a[1])) for a in ends]
    else:
        bounds = [(float(xp.nanmin(a)), float(xp.nanmax(a))) for a in sim.grid.cell_coords(sim.pos)]
    lo = [int(math.floor(a)) - pad for a, _ in bounds]
    hi = [int(math.floor(b)) + pad for _, b in bounds]
    band = getattr(sim, "band", None)
    if band is not None and len(band.deep):  # a narrow band's deep cells are liquid too
        lo = [min(a, int(b) - pad) for a, b in zip(lo, band.deep.min(axis=0).tolist())]
        hi = [max(a, int(b) + pad) for a, b in zip(hi, band.deep.max(axis=0).tolist())]
    if closed:  # the walls bound it: no node beyond the box's own surface grid
        lo = [max(0, a) for a in lo]
        hi = [min(n - 1, b) for n, b in zip(spec.shape, hi)]
    h = spec.voxel_size
    return GridSpec(tuple(float(o) + n * h if n else float(o) for o, n in zip(spec.origin, lo)), h,
                    tuple(b - a + 1 for a, b in zip(lo, hi)))


def offset(region: GridSpec, spec: GridSpec):
    """Lattice cell of *region*'s cell (0, 0, 0) on *spec*'s lattice."""
    return tuple(int(round((a - b) / spec.voxel_size)) for a, b in zip(region.origin, spec.origin))


def level_set(sim, progress=None, on_device=False):
    """φ (NumPy float32; *on_device*: as computed) over ``surface_grid(liquid_region(sim))``:
    an open domain's, or a large closed box's, there still closed against its walls
    (``closed_level_set``)."""
    from .sim import phi_out
    from .surface import closed_level_set, particle_level_set

    from .surface_host_copy import copy_way, host_block, host_copy
    from .surface_overlap import HostSink

    r, R = surface_radii(sim.spec.voxel_size, sim.settings.particles_per_cell)
    grown = surface_grid(liquid_region(sim))
    most = 4 * surface_grid(sim.spec).voxel_count if sim.boundary == "closed" else 0  # the box's largest φ
    # VOXFX_LEVEL_SET_COPY=overlap: φ into a pinned block while the device makes it (surface_overlap)
    sink = HostSink(host_block(grown.array_shape, most)) if not on_device and sim.xp is not np and \
        copy_way() == "overlap" else None
    if sim.boundary == "closed":
        phi = closed_level_set(sim.pos, sim.spec, radius=r, kernel_radius=R, xp=sim.xp, progress=progress,
                               grid=grown, host=sink)
    else:
        phi = particle_level_set(sim.pos, grown, radius=r, kernel_radius=R, xp=sim.xp, progress=progress, host=sink)
    if on_device or sim.xp is np:
        return phi_out(phi, on_device, pinned=False)
    if sink is not None:  # overlap: φ is in the sink's pinned block, or goes there now (one block either way)
        if not sink.filled:
            sim.xp.ascontiguousarray(phi, dtype=sim.xp.float32).get(out=sink.array)
        return sink.array
    return host_copy(phi, most=most)  # pinned (or pageable: .get())


def cell_velocity(grid, region: GridSpec, spec: GridSpec, padding: int = 0, pinned: bool = False):
    """Grid velocity at the cell centres of *region* (nz, ny, nx, 3) float32 (NumPy),
    averaged from the faces; missing bricks read 0. Chunked along z. *padding* cells
    beyond every side of *region* repeat its nearest cell (``np.pad(mode="edge")``'s
    values: each is that cell's own average, the same arithmetic); *pinned*: on a GPU
    the chunks are copied straight into one page-locked block (CuPy's pinned pool: for
    a grid of one shape frame after frame), else into pageable memory."""
    xp = grid.xp
    nx, ny, nz = region.shape
    p = int(padding)
    oi, oj, ok = offset(region, spec)
    shape = (nz + 2 * p, ny + 2 * p, nx + 2 * p, 3)
    if grid.size == 0:  # before the first step: no bricks yet, the liquid's initial velocity is on its particles
        return np.zeros(shape, np.float32)
    out = _host_block(shape, pinned and xp is not np)
    mz, my, mx = shape[:3]
    # padded index → the region's cell (clamped) → the lattice's (int64, as xp.indices gave)
    i_of = xp.clip(xp.arange(mx, dtype=xp.int64) - p, 0, nx - 1) + oi
    j_of = xp.clip(xp.arange(my, dtype=xp.int64) - p, 0, ny - 1) + oj
    step = max(1, CHUNK_CELLS // max(1, mx * my))
    for z0 in range(0, mz, step):
        z1 = min(mz, z0 + step)
        k_of = xp.clip(xp.arange(z0, z1, dtype=xp.int64) - p, 0, nz - 1) + ok
        chunk = (z1 - z0, my, mx)
        k = xp.broadcast_to(k_of[:, None, None], chunk).ravel()
        j = xp.broadcast_to(j_of[None, :, None], chunk).ravel()
        i = xp.broadcast_to(i_of[None, None, :], chunk).ravel()
        lo = grid.locate(i, j, k)
        comps = []
        for comp, name in enumerate(grid.FACES):
            f = grid[name]
            hi = grid.locate(i + (comp == 0), j + (comp == 1), k + (comp == 2))
            a = xp.where(lo >= 0, f[xp.maximum(lo, 0)], np.float32(0))
            b = xp.where(hi >= 0, f[xp.maximum(hi, 0)], np.float32(0))
            comps.append((np.float32(0.5) * (a + b)).reshape(chunk))
        block = xp.stack(comps, axis=-1)
        if xp is np:
            out[z0:z1] = block
        else:
            block.get(out=out[z0:z1])
    return out


def _host_block(shape, pinned: bool):
    """An uninitialised float32 host array of *shape*: page-locked (CuPy's pinned pool,
    the block kept alive by the array) or an ordinary NumPy one."""
    if not pinned:
        return np.empty(shape, np.float32)
    import cupy as cp

    count = int(np.prod(shape))
    return np.frombuffer(cp.cuda.alloc_pinned_memory(4 * count), np.float32, count).reshape(shape)


def legacy_cell_velocity(grid, region: GridSpec, spec: GridSpec):
    """``cell_velocity`` as it was before the direct copies (each chunk through a
    pageable copy into a zeroed array, ``lo`` located per component; the caller pads
    on the host): ``VOXFX_CELL_VELOCITY=legacy``, for the A/B (``bench/bake_frames.py``)
    and the tests that compare the two bit for bit."""
    xp = grid.xp
    nx, ny, nz = region.shape
    oi, oj, ok = offset(region, spec)
    out = np.zeros((nz, ny, nx, 3), np.float32)
    if grid.size == 0:
        return out
    step = max(1, CHUNK_CELLS // max(1, nx * ny))
    for z0 in range(0, nz, step):
        z1 = min(nz, z0 + step)
        k, j, i = (a.ravel().astype(xp.int64) for a in xp.indices((z1 - z0, ny, nx)))
        i, j, k = i + oi, j + oj, k + ok + z0
        comps = []
        for comp, name in enumerate(grid.FACES):
            f = grid[name]
            lo = grid.locate(i, j, k)
            hi = grid.locate(i + (comp == 0), j + (comp == 1), k + (comp == 2))
            a = xp.where(lo >= 0, f[xp.maximum(lo, 0)], np.float32(0))
            b = xp.where(hi >= 0, f[xp.maximum(hi, 0)], np.float32(0))
            comps.append((np.float32(0.5) * (a + b)).reshape(z1 - z0, ny, nx))
        out[z0:z1] = backend.to_numpy(xp.stack(comps, axis=-1))
    return out


def cell_velocity_mode() -> str:
    """``VOXFX_CELL_VELOCITY``: ``direct`` (the default: padded on the device's indices,
    copied straight into a pinned block) or ``legacy`` (``legacy_cell_velocity`` and a
    host ``np.pad``); read per call, so one process can A/B both."""
    mode = os.environ.get("VOXFX_CELL_VELOCITY", "direct").strip().lower() or "direct"
    if mode not in ("direct", "legacy"):
        raise ValueError(f"VOXFX_CELL_VELOCITY is 'direct' or 'legacy', not {mode!r}")
    return mode
