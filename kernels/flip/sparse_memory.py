"""Memory of a sparse liquid bake (issue 12), estimated before baking from the liquid's
volume, not the box: what the Domain panel shows and the bake's guard checks.

Bricks. The grid holds the bricks of the particles' influence boxes (``sparse_grid``):
the liquid's cells grown by the substep margin (``MARGIN`` cells at rest, ~5). Before
baking only the liquid's volume is known (C = particles / particles per cell). At the
start the liquid is taken as a cube of side s = ∛C cells grown by the margin on every
side, in bricks: ((s + 2·MARGIN)/8 + 1)³ (the +1: a box rarely starts on a brick border).
A liquid spreads as it moves: a dam break flattens over the floor, a river's wave runs
down its channel (the start's count ×1.5 held the 8M dam break over its first steps,
1.28×, but the 100M river passed it by frame 5, 0.86×, and on an H200 the dam break's
bricks grew 3,247 → 13,893 by frame 21 as it splashed up the far wall). So in a closed box
the bricks it can reach are the start's and those of its volume spread as a sheet over the
box floor (gravity along −z) and up its four walls as high as it can climb (``climb_cells``:
its top plus v²/2g, ×``SPLASH`` for the jets a wave throws up a wall), ``layer_bricks``:
each sheet as thick as the volume allows (at least ``MIN_DEPTH`` cells; a liquid too small
to cover the floor so thinly covers a patch of it), grown by the margin inside and the wall
ring outside. The column and the sheet coexist while it collapses, so the two are added; a
closed domain never holds more than its box and wall ring (the cap). Measured: the 8M dam
break's most bricks 13,893 against 14,895 estimated, the river's 90,733 by frame 31 (still
spreading) against 130,538. An open domain's liquid may leave: it keeps the cube ×``SPREAD``.

During the bake ``frame_check.FrameCheck`` looks again before every frame, from the
bricks and particles the simulation holds now and a frame ago, with the same bytes per brick
and particle (``memory_at``; ``frame_check``'s module text says how the next frame's
counts are grown).

Bytes, fitted to measured peaks (``bench/flip_sparse.py --memory``: tracemalloc on the
NumPy path, dam breaks, a blob and a pool at 6k–50k particles) and rounded up:

* a substep on the CPU: ~120 B per pool cell (the channels, neighbour index, the
  compacted pressure unknowns and multigrid levels, transfer temporaries) and ~720 B
  per particle (the gather's sorted pairs and weights, RK2 samples), +80 with APIC;
* the frame's level set (as ``memory._flip_memory_cpu``): 90 B per particle seen and 48 B
  per node of the surface grid (the box's in a closed domain up to
  ``sparse_output.BOX_NODES``, else the liquid's region) and its batch of (particle,
  node) pairs at 42 B; closed, the particles seen include their wall mirrors
  (``CLOSED_IMAGES``: a narrow tank's liquid touches 4 walls);
* on the GPU, fitted to the pool's bytes in use per frame (a CuPy memory hook;
  ``bench/memory_liquid.py`` on an H100, after the solvers stopped sitting in reference
  cycles — ``GraphLoop`` — so a dropped solver no longer stays allocated until Python's
  cyclic collection: the 8M dam break at 256³ over 60 frames, bricks 3,247 → 12,317, in
  use at the peak 0.83 → 1.31 GiB; the 65M dam break at 512³ over 40 frames, 20,763 →
  52,622 bricks, 5.98 → 8.07 GiB; the 100M river over 179 frames, 36,400 → 108,098 bricks,
  9.7 → 16.2 GiB): a frame peaks at ~154 B per pool cell and 55–87 B per particle, taken
  as ``GPU_CELL`` 170 and ``GPU_PARTICLE`` 90; the state (the channels, at the grid's
  capacity: it keeps the most bricks it held; the cached solver; the particles) as 80 B
  per cell and 32 per particle; the level set ``surface_gpu.estimate_gpu_bytes`` beside
  the state. Replayed on those runs' counts (``--replay``), the estimate before the bake
  is 1.18–1.43× of the run's peak and the check before each frame 1.05–1.51× of that
  frame's. (Fitted before on an H200 with the leaked solvers: 200, 120, 120 and 48.)
* the narrow band's update after advection and its topology (``sparse_band.NarrowBand.update``,
  when the band is on), with the particles a band keeps: ``sparse_memory_band``'s terms
  (``band_kept``, ``band_ways``, ``band_arrays``, ``band_kernels``, ``band_map_cells``,
  ``band_topology`` and their bytes), fitted and replayed as its module text says. Moved there
  with no change (issue 24's module guide, session 21, helper h21b: this file had grown to 527
  lines); its names are re-exported here, where ``memory_at``, the tests and the benches read them.
* the time-centred advection (``FlipSettings.time_centred_advection``): the kept faces
  and fluid masks, three float32 and three uint8 channels over the pool (``KEPT_CELL``
  15 B per pool cell, in the state and the GPU's substep). The kept faces are the grid's own
  face arrays, no copy, and u_n is written into them (``sparse_kept``, helper h18d): between
  substeps they cost only the masks (the state's 15 B an upper bound), in a substep the 12 B
  of the faces P2G replaced. On the NumPy path the substep's peak is P2G's, which replaces the
  faces a component at a time (the setting off lets each go as it goes): at most two
  components and the masks more (``KEPT_P2G_CPU`` 11 B per pool cell; tracemalloc from the
  start, a 48×24×32 dam break, two frames at CFL 4: 7.0 B, and 14.8 while the keep copied the
  faces). On the GPU, not yet measured, u_n, masks and copies at the advection are still
  counted (``KEPT_ADVECTION`` 15 B per pool cell: an upper bound since u_n and the keep make no
  arrays).
* the pressure set-up's workspace (``sparse_pressure_workspace``, the default; GPU only):
  the coarse multigrid tables at their capacities and level 1's candidates, kept from
  substep to substep, ``WORKSPACE_CELL`` 24 B per pool cell in the state and the substep.
  With the coarse levels replayed as a graph (``sparse_pressure_setup_graph``,
  ``VOXFX_SPARSE_SETUP_GRAPH=1``, off by default) or levels ≥ 2 held across set-ups
  (``sparse_multigrid_kept``, ``VOXFX_SPARSE_MG_KEEP``, off by default) their scratch is kept too, with the tables:
  ``GRAPH_SCRATCH_CELL`` 14 B per pool cell more, a bound — ~86 B per level-1 entry over all
  levels (``Workspace.tables``' scratch arrays), level 1 at most 1.25 × an eighth of the pool
  cells + 64 — where the 8M dam break measured ~9 (H100, session 15: its pool 916 → 931 MiB; without
  the term tests/gpu/test_liquid_memory_check_gpu.py's spreading liquid peaked 1.6 MiB above the
  estimate at frame 11); 1.5× that (``graph_scratch_cell``) where the first capacities are those of
  a first growth (``sparse_pressure_buffers.FIRST`` "grown", the default: level 1 at 1.875 × an
  eighth). ``WORKSPACE_CELL`` is a fit, not a bound: "grown" holds 1.5× the coarse tables of
  "fresh" until the liquid's set has spread 1.5× (the 8M dam break: frames 0–9, 73.1 → 109.6 MiB
  kept, its pool ~1.1–1.9 GiB), the same from there on, where the run's peak lies.
  Measured (H200, ``bench/workspace_memory_call.sh``, the 8M dam break over 60 frames beside
  a fresh-set-up run of the same bits): the workspace held 20.4 B per pool cell at the
  largest grid (48 on the start's small one, where the solver's own tables are most of it),
  and its in-use peak lay 10–25 B per pool cell above the fresh run's frame by frame (11.4
  at the peak, 1.379 against 1.310 GiB); counted, the estimate before the bake is 1.49× of
  the peak and the check before each frame 1.22–2.39× (frame 1: the estimate's bricks).
  Every row above was measured with the solver holding level 0's nbr rows (six int32 an
  unknown of its stride, 1.25× the unknowns + 64: ``LEVEL0_NBR`` 30 B a liquid cell, ~30 MB at
  8M). A workspace solver whose level-0 passes find their neighbours from the bricks holds
  none (``sparse_pressure_vcycle.NBR`` "bricks" with ``NBR_TABLE`` "skip", the defaults; issue
  24, i24n2), so there those bytes come off the state and the substep (``level0_nbr_held``;
  the liquid's cells P / ppc stand for the unknowns: a band's deep cells are unknowns too).
  Measured (H100, the 8M row in separate processes, rows filled / not): the pool's total 945 →
  916 MiB, the estimate 2147 → 2119 MiB; ``tests/gpu/test_liquid_memory_check_gpu.py`` passed
  with it (every frame's peak covered, the check within 2×).
  The rows were also measured with level 0's red-black sweeps. A workspace solver smoothing
  level 0 brick by brick (``sparse_multigrid_bricks.SMOOTHER`` "brick", the default since issue
  24's h20d; ``brick_smooth_held``) holds level 0's x before the post-smoothing (``brick_x``, 4 B
  an entry of level 0's stride, 1.25× the unknowns + 64) with its r·z partials and the span table
  (256 B a pool slot, grown to 1.25× the slots): ``BRICK_SMOOTH_LIQUID`` 6 B a liquid cell and
  ``BRICK_SMOOTH_POOL`` 1 B a pool cell more in the state and the substep (the 8M row's pool peak
  902 → 907 MiB, H100, bench/RESULTS.md h20a; counted here 6 + 1.6 MB).
* the particle count control (Max Particles per Cell, ``particle_count``; *count_control*,
  ``particle_count.limit_of(settings) > 0``): its frame-end pass, a stage of its own beside
  the state (``FlipSimulation.step`` runs it after the frame's last substep has returned and
  before the frame's output, so it coexists with neither), ``particle_count.frame_end_bytes``
  over the pool's cells and the particles held: the counts and a pass's ``bincount`` (16 B
  per pool cell), the keep mask (1 B per particle), a pass's temporaries (NumPy, tracemalloc:
  107–115 B per particle of a ``CHUNK`` pass, the pool cell's lookup through the brick index,
  taken as 120; CuPy the same per particle of ``CHUNK_GPU``, not measured on a device), or
  the kept particles' copy (32.0 B each, 68.0 with APIC, tracemalloc).
* the particle sort (``VOXFX_SPARSE_PARTICLE_SORT``, off by default; *sort*, *sort_path*), only
  where it is on: on the GPU its gather path holds a second pos, vel and C from sort to sort
  (``particle_sort.spare_bytes``: 24 B a particle held, 60 with APIC), in the state and so in
  every stage; its frame-end work is a stage beside the state (``particle_sort.frame_end_bytes``:
  48 B a particle, 52 with APIC on the argsort path, 76 on the gather path), below the substep's
  peak. Bounds read from the code (particle_sort's module text), not measured on a device.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..grid import GridSpec
from ..grid.sparse import BRICK
from ..grid.sparse_mac import CELLS
from . import particle_count, particle_sort, sparse_pressure_workspace
from . import sparse_multigrid_kept
from . import sparse_pressure_setup_graph as setup_graph
from .sparse_memory_band import (  # noqa: F401  (re-exported: memory_at, the tests and benches read them here)
    BAND_DEPTH, BAND_KEPT, BAND_LIST, BAND_MAP, BAND_SNAPSHOT, CPU_BAND_CELL, CPU_BAND_PARTICLE, GPU_BAND_CELL,
    GPU_BAND_DEEP, MAP_PAD, TOPOLOGY_CELL, TOPOLOGY_PAIR, TOPOLOGY_PAIRS, TOPOLOGY_PARTICLE, band_arrays, band_kept,
    band_kernels, band_map_cells, band_topology, band_ways)
from .sparse_output import box_outputs

MARGIN = 5  # cells around the liquid at rest (``sparse_grid.substep_margin``: 1 + 2 + reach + 1)
SPREAD = 1.5  # an open domain: bricks of the moving liquid over those of its start (module text)
MIN_DEPTH = 2.0  # cells: the thinnest sheet a spreading liquid is counted as (8 particles a cell)
SPLASH = 1.5  # how far above its energy's height a wave's jets climb a wall (module text)
CPU_CELL, CPU_PARTICLE, CPU_APIC = 120, 720, 80
GPU_CELL, GPU_PARTICLE, GPU_APIC = 170, 90, 36
GPU_STATE_CELL, GPU_STATE_PARTICLE = 80, 32  # what stays in use between frames (channels, solver, particles)
KEPT_CELL, KEPT_ADVECTION = 15, 15  # the time-centred advection's channels; its advection on the GPU (module text)
KEPT_P2G_CPU = 11  # the time-centred advection at the NumPy substep's peak, P2G (module text)
WORKSPACE_CELL = 24  # B per pool cell the pressure set-up's workspace keeps on the GPU (module text)
GRAPH_SCRATCH_CELL = 14  # B per pool cell more where the coarse levels' graph keeps their scratch (module text)
LEVEL0_NBR = 30  # B a liquid cell: the solver's level-0 nbr rows, in the fitted rows, not held on the brick path
# the brick smoother's (``sparse_multigrid_bricks.SMOOTHER`` "brick", the default; module text): B a liquid cell
# (brick_x at level 0's stride, 1.25× the unknowns + 64, and its partials) and a pool cell (the span table)
BRICK_SMOOTH_LIQUID, BRICK_SMOOTH_POOL = 6, 1
CLOSED_IMAGES = 4  # a closed level set's particles with their mirrors (a tank's liquid touches 3–5 walls)


def graph_scratch_cell() -> int:
    """B per pool cell the coarse levels' kept scratch takes (module text): ``GRAPH_SCRATCH_CELL``
    for the first capacities of ``sparse_pressure_buffers.FIRST`` "fresh", 1.5× it for "grown"."""
    from .sparse_pressure_buffers import first_caps

    return GRAPH_SCRATCH_CELL * 3 // 2 if first_caps() == "grown" else GRAPH_SCRATCH_CELL


def _bricks_across(n: float) -> float:
    """Bricks along an axis of *n* cells with the wall ring (+1: rarely on a brick border)."""
    return -(-(int(math.ceil(n)) + 2) // BRICK) + 1


def box_bricks(spec: GridSpec) -> int:
    """A closed box's bricks with its wall ring: the most a closed liquid can hold."""
    return int(math.prod(_bricks_across(n) for n in spec.shape))


def start_bricks(liquid_cells: float) -> float:
    """The liquid at rest as a cube of ∛C cells grown by the margin, in bricks."""
    s = max(float(liquid_cells), 1.0) ** (1.0 / 3.0)
    return ((s + 2 * MARGIN) / BRICK + 1) ** 3


def climb_cells(top: float, speed: float, spec: GridSpec, gravity: float = 9.81) -> float:
    """How high (cells above the box floor) the liquid can reach: its top plus what its
    speed can lift it (v²/2g), ×``SPLASH`` for the jets a wave throws up a wall, capped
    by the box; without gravity, the box's height."""
    h = spec.voxel_size
    if gravity <= 0:
        return float(spec.shape[2])
    lift = float(speed) ** 2 / (2.0 * float(gravity)) / h
    return min(float(spec.shape[2]), SPLASH * (max(float(top), 0.0) + lift))


def layer_depth(liquid_cells: float, spec: GridSpec, climb: float | None = None) -> float:
    """Cells deep the sheet of ``layer_bricks`` is: the volume over the floor and the
    walls up to *climb* cells, at least ``MIN_DEPTH``, at most the box's height."""
    nx, ny, nz = spec.shape
    climb = float(nz) if climb is None else min(float(nz), max(float(climb), 0.0))
    floor, perimeter = float(nx) * float(ny), 2.0 * (float(nx) + float(ny))
    return min(float(nz), max(max(float(liquid_cells), 1.0) / (floor + perimeter * climb), MIN_DEPTH))


def layer_bricks(liquid_cells: float, spec: GridSpec, climb: float | None = None) -> float:
    """The liquid spread as a sheet over the closed box's floor (z) and up its four
    walls to *climb* cells (``climb_cells``; None: the box's height), in bricks: each
    sheet as thick as the volume allows (at least ``MIN_DEPTH``), grown by the margin
    inside and the wall ring outside. A liquid too small to cover the floor so thinly
    covers a patch of it (as square as the floor lets it be) and no wall."""
    nx, ny, nz = spec.shape
    cells = max(float(liquid_cells), 1.0)
    climb = float(nz) if climb is None else min(float(nz), max(float(climb), 0.0))
    floor, perimeter = float(nx) * float(ny), 2.0 * (float(nx) + float(ny))
    depth = layer_depth(liquid_cells, spec, climb)
    thick = (depth + MARGIN + 1) / BRICK + 1  # a sheet's bricks across it
    area = cells / depth
    if area < floor:  # a patch of the floor
        narrow, wide = sorted((float(nx), float(ny)))
        a = min(narrow, math.sqrt(area))
        return (a / BRICK + 1) * (min(wide, area / a) / BRICK + 1) * thick
    bx, by = _bricks_across(nx), _bricks_across(ny)
    height = min(climb, (area - floor) / perimeter)  # the walls' sheet, as high as the volume reaches
    return bx * by * thick + 2 * (bx + by) * ((height + MARGIN) / BRICK + 1) * thick


def estimate_bricks(liquid_cells: float, spec: GridSpec, closed: bool = True, climb: float | None = None) -> int:
    """Bricks a sparse bake of *liquid_cells* cells of liquid needs at its peak (module
    text): closed, its start and its volume spread over the floor and up the walls to
    *climb* cells (``layer_bricks``), capped by the box; open, its start ×SPREAD."""
    if not closed:
        return int(math.ceil(SPREAD * start_bricks(liquid_cells)))
    bricks = start_bricks(liquid_cells) + layer_bricks(liquid_cells, spec, climb)
    return int(math.ceil(min(bricks, box_bricks(spec))))


def liquid_region_cells(liquid_cells: float, spec: GridSpec, ppc: int) -> GridSpec:
    """The surface grid of an open domain's liquid (``sparse_output``) for a liquid cube
    of *liquid_cells* spread by ``SPREAD``: its estimate, on *spec*'s cell size."""
    from .surface import KERNEL_PER_RADIUS, WALL_CELLS, surface_radii

    r, _ = surface_radii(spec.voxel_size, ppc)
    pad = int(math.ceil(KERNEL_PER_RADIUS * r / spec.voxel_size)) + 1 + WALL_CELLS
    side = int(math.ceil((SPREAD * max(float(liquid_cells), 1.0)) ** (1.0 / 3.0))) + 2 * pad
    return GridSpec(spec.origin, spec.voxel_size, (side, side, side))


def sparse_flip_memory(spec: GridSpec, particles: int, particles_per_cell: int = 8, apic: bool = False,
                       closed: bool = True, parts: bool = False, xp=None, narrow_band: int = 0,
                       climb: float | None = None, time_centred: bool = False, workspace: bool | None = None,
                       count_control: bool = False, sort=None, sort_path=None):
    """Peak bytes of a sparse FLIP bake (``FlipSimulation(..., sparse=True)``) of
    *particles* particles on the device of *xp* (default the backend's), estimated from the
    liquid's volume (module text); *narrow_band* > 0: with the band's update (its cells);
    *climb*: cells above the floor the liquid can reach (``climb_cells``; None: the box's
    height); *time_centred*: with the time-centred advection's kept faces; *workspace*: with
    the pressure set-up's workspace (``memory_at``); *count_control*: with the particle count
    control's frame-end pass (Max Particles per Cell on); *sort*, *sort_path*: the particle
    sort's way and path (``memory_at``); ``parts=True``: the dict of stages with ``bricks``."""
    ppc = max(1, int(particles_per_cell))
    bricks = estimate_bricks(int(particles) / ppc, spec, closed, climb)
    kept = band_kept(int(particles), ppc, narrow_band, spec, closed, climb)
    return memory_at(spec, bricks, particles, ppc, apic, closed, parts, xp, narrow_band, time_centred, workspace,
                     kept, count_control, sort, sort_path)


def level0_nbr_held(workspace: bool = True) -> bool:
    """Whether the pressure solver holds level 0's nbr rows (module text): always without the
    set-up's *workspace* (its solvers find no neighbours from the bricks), else unless
    ``sparse_pressure_vcycle.NBR`` is "bricks" and ``NBR_TABLE`` "skip" (the defaults)."""
    from .sparse_pressure_vcycle import nbr_choice, nbr_table_choice

    return not workspace or nbr_choice() != "bricks" or nbr_table_choice() != "skip"


def brick_smooth_held(workspace: bool = True) -> bool:
    """Whether the pressure solver holds the brick smoother's buffers (module text): a workspace
    solver's, where ``sparse_multigrid_bricks.SMOOTHER`` is "brick" (the default)."""
    from .sparse_multigrid_bricks import smoother

    return bool(workspace) and smoother() == "brick"


def memory_at(spec: GridSpec, bricks: int, particles: int, particles_per_cell: int = 8, apic: bool = False,
              closed: bool = True, parts: bool = False, xp=None, narrow_band: int = 0, time_centred: bool = False,
              workspace: bool | None = None, kept: int | None = None, count_control: bool = False, sort=None,
              sort_path=None):
    """``sparse_flip_memory``'s bytes with *bricks* bricks (estimated before the bake,
    or held during it: ``FrameCheck``); *workspace*: with the pressure set-up's workspace
    (GPU only; None: as ``VOXFX_SPARSE_SETUP`` says, ``sparse_pressure_workspace.enabled``; with it, less
    the solver's level-0 nbr rows where it holds none: ``level0_nbr_held``); *kept*: with a
    narrow band, the particles the simulation holds of the liquid's *particles*
    (``band_kept`` before the bake, ``len(sim.pos)`` during it; None: all of them; GPU only:
    the CPU's band bytes were measured per liquid particle); *count_control*: with the particle
    count control's frame-end pass over the pool and the particles held (module text); *sort*,
    *sort_path*: the particle sort's way and path (None: as ``VOXFX_SPARSE_PARTICLE_SORT`` and
    ``VOXFX_SPARSE_PARTICLE_SORT_PATH`` say), its spare in the state and its frame-end work
    beside it where it is on (module text)."""
    from .surface import CHUNK_PAIRS, KERNEL_PER_RADIUS, _reachable_offsets, surface_grid, surface_radii
    from .surface_gpu import estimate_gpu_bytes

    P = int(particles)
    band_on = int(narrow_band) > 0
    Pk = P if kept is None or not band_on else min(P, int(kept))  # the particles held (a band keeps fewer)
    ppc = max(1, int(particles_per_cell))
    bricks = int(bricks)
    cells = bricks * CELLS
    surface = surface_grid(spec) if closed and box_outputs(spec) else liquid_region_cells(P / ppc, spec, ppc)
    cpu = (xp or backend.xp()) is np
    # the particle sort where it is on: the gather path's spare arrays of the particles held, from sort to sort
    spare = particle_sort.spare_bytes(Pk, apic, sort, sort_path, gpu=not cpu)
    kept_faces = KEPT_CELL * cells if time_centred else 0
    if cpu:
        state = 60 * cells + (24 + (36 if apic else 0)) * P + kept_faces
        substep = CPU_CELL * cells + (CPU_PARTICLE + (CPU_APIC if apic else 0)) * P
        r, R = surface_radii(spec.voxel_size, ppc)
        seen = (CLOSED_IMAGES if closed else 1) * P  # particles and their wall mirrors
        pairs = min(CHUNK_PAIRS, seen * len(_reachable_offsets(R, spec.voxel_size)[1]))
        output = state + 90 * seen + 48 * surface.voxel_count + 42 * pairs
    else:
        # the set-up's workspace, held from substep to substep: in the state and every substep
        on = sparse_pressure_workspace.enabled() if workspace is None else workspace
        kept_scratch = setup_graph.enabled() or sparse_multigrid_kept.keep_every() > 0  # the coarse scratch held
        held = (WORKSPACE_CELL + (graph_scratch_cell() if kept_scratch else 0)) * cells if on else 0
        # the fitted rows held the solver's level-0 nbr rows; a solver on the brick path holds none
        held -= 0 if level0_nbr_held(on) else int(LEVEL0_NBR * P / ppc)
        # the fitted rows were measured with the red-black sweeps; the brick smoother holds brick_x and its table
        held += int(BRICK_SMOOTH_LIQUID * P / ppc) + BRICK_SMOOTH_POOL * cells if brick_smooth_held(on) else 0
        state = GPU_STATE_CELL * cells + (GPU_STATE_PARTICLE + (36 if apic else 0)) * Pk + kept_faces + held + spare
        substep = GPU_CELL * cells + (GPU_PARTICLE + (GPU_APIC if apic else 0)) * Pk + held + spare
        r, _ = surface_radii(spec.voxel_size, ppc)
        # the level set sees every liquid particle: a band's deep cells as particles (``virtual_particles``)
        seen = state + (GPU_STATE_PARTICLE + (36 if apic else 0)) * (P - Pk)
        output = seen + max(estimate_gpu_bytes(P, surface, KERNEL_PER_RADIUS * r) + 4 * surface.voxel_count,
                            12 * surface.voxel_count)
    if time_centred:
        substep += KEPT_P2G_CPU * cells if cpu else kept_faces + KEPT_ADVECTION * cells
    stages = {"substep": int(substep), "frame output": int(output)}
    if count_control:  # after the last substep, before the output: beside the state alone
        stages["count control"] = int(state + particle_count.frame_end_bytes(cells, P if cpu else Pk, apic,
                                                                             gpu=not cpu, sparse=True))
    if particle_sort.every(sort):  # at the frame's end, after the count control: beside the state alone
        stages["particle sort"] = int(state + particle_sort.frame_end_bytes(P if cpu else Pk, apic, sort, sort_path,
                                                                            gpu=not cpu))
    if band_on:
        if cpu:  # the update after advection, beside the state
            stages["narrow band"] = int(state + CPU_BAND_PARTICLE * P + CPU_BAND_CELL * P / ppc)
        else:  # on the device: the way that runs (``band_ways``), the array way's fit where it may run
            update, topology = band_ways()
            arrays = band_arrays(substep, int(narrow_band), P / ppc, Pk)
            if update == "kernels":
                maps, sure = band_map_cells(spec, P / ppc, closed)
                kernels = band_kernels(substep, cells, maps, P / ppc, Pk)
                stages["narrow band"] = kernels if sure else max(kernels, arrays)
            else:
                stages["narrow band"] = arrays
            if topology == "arrays":  # the kernel way's topology is the substep's pipeline (module text)
                stages["band topology"] = band_topology(state, P / ppc, Pk)
    if parts:
        return {"bricks": bricks, "state": int(state), **stages, "total": max(stages.values())}
    return int(max(stages.values()))
