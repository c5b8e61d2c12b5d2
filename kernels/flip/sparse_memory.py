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
* the narrow band's update after advection (``sparse_band.NarrowBand.update``, when the
  band is on): a key per particle and its sort, and per liquid cell its candidates, their
  dilation one axis at a time, φ's samples and the air rings. On the NumPy path, beside
  the state (tracemalloc, dam breaks of 0.34M and 1.1M particles, band of 4 cells, capped
  substeps so the candidates are dilated): 46–55 B per particle at 8 per cell (370–440 B
  per liquid cell), taken as 24 B a particle and 400 B a liquid cell (the CPU's estimate
  counts every liquid particle in its substep: not measured with a band).
  On the GPU a band holds only the particles within its cells of the surface (the deep
  cells stand for the rest), so its state and substep count the particles kept, the
  level set every liquid particle (it sees the deep cells as particles), and the band's
  update is added to the substep: ``GPU_BAND_CELL`` 736 B per liquid cell (92 B a liquid
  particle at 8 a cell: the candidates, φ's samples and the depths over the whole
  liquid's cells) and ``GPU_BAND_DEEP`` 300 B per particle kept × (N − 2)/N for a band of
  N cells. Fitted to whole runs (8M dam break at 256³ on an H100, ``bench/memory_liquid.py
  --rows band --band-frames 30``, past the dam's most bricks at frame 23, the set-up's
  workspace on): bands of 2 / 4 / 8 cells peaked at 1.554 / 2.870 / 3.124 GiB in use
  (10,208 / 17,319 / 16,335 bricks at most, more than the dam's 12,317 without a band)
  keeping at most 2.28M / 5.36M / 7.11M of the 8M particles. Beyond the substep at the
  particles kept, each frame's peak held ~80–100 B per liquid particle while the liquid
  is a block (the first frames: few particles kept, the update's cells the whole
  liquid's) and per particle kept about nothing more with 2 cells, ~130 B with 4 and
  ~205 B with 8 (the (N − 2)/N: a fit to the three widths, not derived). Before the
  bake the particles kept are estimated (``band_kept``) as the band's cells of a sheet
  ``BAND_DEPTH`` (2) times as deep as the layer ``layer_bricks`` spreads the liquid into
  (3.2 cells for the 8M dam: 2.48M / 4.95M / 8M, against the runs' 2.28M / 5.36M /
  7.11M; the runs' liquid lay ~5–6 cells deep per cell of surface), at most all of them
  (an open domain: all). During the bake ``FrameCheck`` gives the memory the particles
  held (``len(sim.pos)``) beside the liquid's, each grown as a frame ago within the
  liquid's. Replayed on those runs (``--replay``): the estimate before the bake 1.46× /
  1.10× / 1.41× of the peaks, the check before each frame (from the second) 1.03–1.33× /
  1.06–1.25× / 1.04–1.31× (counting every liquid particle as held, with 36 B per particle
  per cell of band: 1.69× / 1.09× / 1.34×, the check 1.18–1.59× / 1.03–1.81× / 1.20–2.65×).
  On the earlier rows of the fresh set-up (11–14 frames) the check is 1.13–1.18× /
  1.09–1.20× / 1.01–1.23×. The 65M dam break at 512³ with a 4-cell band is estimated at
  16.9 GiB (19.9M particles kept; its pool over its first frames, cached blocks included,
  held 10.04 GiB: a partial run, not a peak).
  (Before the keys, (n, 3) rows per particle and 27 shifted copies: 255–571 B per
  particle on the CPU and a 70.1 GiB pool on the 65M row.)
  The band's topology update is a stage of its own (``band_topology``): with deep cells
  ``SparseFlipGrid.update`` leaves the device's incremental build for ``topology_keys``,
  whose ``keys_of_boxes`` expands every liquid cell's box (the particles' cells and the deep
  cells, ±margin) into (cell, brick) pairs ``BUILD_CHUNK`` (4.19M) at a time, ~116 B a pair
  (the pair, item, local, extents and stacked coordinates, the keys' int64 copies) beside
  ~200 B a box (its corners, brick corners, extents, counts and ends). Traced by stage on an
  H100 (``bench/memory_liquid.py --rows band-sizes --stages``: a memory hook naming each
  allocation by the stage running and its source line), it held every frame's peak of the
  1M dam break at 128³ (bands 2 / 4 / 8: 287–402 MiB in use, ~1.02–1.05 boxes a liquid cell,
  14–20 pairs a box: 1.8–2.6M pairs), of the 2M one at 160³ (562–684 MiB, 3.6M to one full
  chunk) and of the 8M one's first 8 frames at 256³ (4 cells: 1.02–1.09 GiB, a full chunk).
  A full chunk is ~0.5 GiB whatever the liquid's size, so at 8M the band's other terms
  covered it, but at 1M (a chunk of 1.9M pairs against 1/8 of the liquid) the check missed
  it by ~110–130 MiB. Counted: ``TOPOLOGY_CELL`` 240 B a liquid cell, ``TOPOLOGY_PAIR`` 132
  B a pair and ``TOPOLOGY_PARTICLE`` 32 B a particle kept (least squares over the 36 traced
  frames gave 199 B a box, 116 a pair, 22 a particle above the bytes in use before the
  frame; rounded up to the frames' envelope: at 2M a frame's pressure set-up grew its
  workspace before the topology), the pairs at most ``TOPOLOGY_PAIRS`` (27) a liquid cell
  (a box of ±8 cells spans at most 3 bricks an axis; a substep's margin is 1 + 2 + reach + 1,
  reach ≤ 4 cells within the CFL), at most one chunk. The pool also held more than the
  state's estimate: another simulation's cached blocks (a test's or row's before: 27–61 MiB
  at 1M–2M) and at 8M ~150–170 MiB more pressure solver and band state than ``state``
  counts; so with a band ``FrameCheck`` adds the pool's bytes in use beyond the state's
  estimate to its need (without a band it is as before). Replayed on the traced rows (their
  bytes in use before each frame), the check covers every frame: 1.28–1.78× (1M) and
  1.04–1.26× (2M) from the second frame (the traced 8M frames 1.41–1.47×), where it had
  been 0.52–0.84× and 0.56–0.81×; the estimate before the bake 1.67–2.21× (1M), 1.54–2.14×
  (2M) of the rows' peaks (their first 3–7 frames, not the runs' peaks). The 30-frame 8M
  rows replay as before (the band's update stage is larger there). Confirmed on an H100 by
  fresh untraced rows (1M and 2M, 5–6 frames: the check 1.09–1.74× from the second frame,
  0.58–0.84× before) and ``tests/gpu/test_liquid_memory_check_gpu.py`` (12 frames at 1M,
  bands 2 / 4 / 8), which failed before at its second frame (292 MiB in use against 183).
  The above is the array way's (``VOXFX_SPARSE_BAND=arrays``; its topology also with
  ``VOXFX_SPARSE_BAND_REDUCE=arrays`` or ``VOXFX_SPARSE_TOPOLOGY=legacy``: ``band_ways``). The
  kernel way (``sparse_band_gpu``, the default) allocates far less: its update works on dense
  maps over the frame box (~8 B a box cell at the peak: flags, φ, depths, rings), lists of the
  candidates and liquid cells (int64 keys, (m, 3) cells, the trace's samples, the stored φ) and
  per particle held its key, keep mask and the refill's appended copies; its topology is the
  substep's device pipeline (the particles' brick keys) joined with the deep cells' brick map, no
  box of every liquid cell. Traced by stage on an H100 80GB HBM3 (``bench/memory_liquid.py
  --stages``, i21p's call 1: 1M/128³ bands 4 and 8, 2M/160³ band 2, 12 frames; 8M/256³ bands 2, 4,
  8, 14 frames) no frame peaked in the band's work: the level set, then pressure and P2G as the
  grid grew; the band's update rose at most ~60 MiB above the pressure's rise over the pool's
  bytes in use before the frame (8M, 4 cells, frame 13), its topology always below it. So the
  kernel way counts its update beside the substep's peak (``band_kernels``): ``BAND_SNAPSHOT``
  12 B a pool cell (the band's snapshot of the three face channels, held through the substep),
  ``BAND_MAP`` 8 B a cell of the frame box (at most a closed box grown by ``MAP_PAD`` 10 cells a
  side; where that may pass ``map_fits``' bound, or an open domain's ``MAP_LIMIT``, the array way
  may run and the larger of the two is taken), ``BAND_LIST`` 256 B a liquid cell and
  ``BAND_KEPT`` 64 B a particle kept (keys 8, mask 1, the refill's copies 24 and the
  compaction's), with no topology stage of its own (the substep's). The array way's stages had
  asked 2.2–4.3× of the 1M frames from the second (the topology's chunk of pairs:
  ``tests/gpu/test_liquid_memory_check_gpu.py``'s band tests failed their 2× bound, 512 / 545 / 586
  MiB against 122 / 152 / 186 MiB). Replayed on the traced rows the check is now 1.18–1.68× /
  1.12–1.24× (1M, 4 / 8 cells), 1.14–1.60× (2M, 2 cells), 1.42–1.73× / 1.21–1.54× / 1.15–1.39× (8M, 2 /
  4 / 8 cells) from the second frame, the estimate before the bake 1.73–2.13×; on fresh 30-frame
  8M rows (call 2, untraced, past the most bricks: 17,568 / 15,571 / 10,309 with 4 / 8 / 2 cells,
  peaks 1.906 / 1.999 / 1.387 GiB) the check 1.33–1.76× / 1.26–1.54× / 1.13–1.51× (the array way's
  fit there: 1.48–2.05× / 1.69–2.28× / 1.12–1.51×) and the estimate before the bake 1.35× / 1.50× /
  1.60×; 2M with 4 / 8 / 2 cells 1.37–1.74× / 1.34–1.47× / 1.25–1.49×. The GPU test's band cases
  passed (call 2). The 65M row with 4 cells is estimated at 13.5 GiB (the array way 17.3).
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
from ..grid.sparse import BRICK, BUILD_CHUNK
from ..grid.sparse_mac import CELLS
from . import particle_count, particle_sort, sparse_pressure_workspace
from . import sparse_multigrid_kept
from . import sparse_pressure_setup_graph as setup_graph
from .sparse_output import box_outputs

MARGIN = 5  # cells around the liquid at rest (``sparse_grid.substep_margin``: 1 + 2 + reach + 1)
SPREAD = 1.5  # an open domain: bricks of the moving liquid over those of its start (module text)
MIN_DEPTH = 2.0  # cells: the thinnest sheet a spreading liquid is counted as (8 particles a cell)
SPLASH = 1.5  # how far above its energy's height a wave's jets climb a wall (module text)
CPU_CELL, CPU_PARTICLE, CPU_APIC = 120, 720, 80
GPU_CELL, GPU_PARTICLE, GPU_APIC = 170, 90, 36
GPU_STATE_CELL, GPU_STATE_PARTICLE = 80, 32  # what stays in use between frames (channels, solver, particles)
CPU_BAND_PARTICLE, CPU_BAND_CELL = 24, 400
GPU_BAND_CELL = 736  # B per liquid cell (its particles and deep cells'), beyond the substep's (module text)
GPU_BAND_DEEP = 300  # B per particle kept × (N − 2)/N for a band of N cells, beyond the substep's (module text)
BAND_DEPTH = 2.0  # a band's kept share: N cells of a sheet this many times ``layer_depth`` deep (module text)
# the band's topology (``SparseFlipGrid.topology_keys`` over the liquid's cells: ``keys_of_boxes``), GPU (module text)
TOPOLOGY_CELL, TOPOLOGY_PAIR, TOPOLOGY_PARTICLE = 240, 132, 32  # B a liquid cell, (cell, brick) pair, particle kept
TOPOLOGY_PAIRS = 27  # (cell, brick) pairs a liquid cell's box makes at most: 3 bricks an axis (margin ≤ 8 cells)
# the kernel way (``sparse_band_gpu``, the default; module text), beside the substep: B a pool cell of the band's
# snapshot of the faces, a frame-box cell of the update's maps, a liquid cell of its lists, a particle kept of its
# keys and the refill's copies
BAND_SNAPSHOT, BAND_MAP, BAND_LIST, BAND_KEPT = 12, 8, 256, 64
MAP_PAD = 10  # cells a side the update's frame box reaches past a closed box (reach ≤ CFL, rings, a step)
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


def band_kept(particles: int, particles_per_cell: int, narrow_band: int, spec: GridSpec, closed: bool = True,
              climb: float | None = None) -> int:
    """Particles a narrow band of *narrow_band* cells keeps at most of a liquid of
    *particles* (module text): those within the band of the surface of the sheet that
    ``layer_bricks`` spreads it into (``layer_depth`` × ``BAND_DEPTH``), all of them
    without a band, in an open domain or where the band reaches the sheet's floor."""
    particles = int(particles)
    if int(narrow_band) <= 0 or not closed:
        return particles
    depth = BAND_DEPTH * layer_depth(particles / max(1, int(particles_per_cell)), spec, climb)
    return int(math.ceil(particles * min(1.0, int(narrow_band) / depth)))


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


def band_ways() -> tuple[str, str]:
    """(update, topology): the ways a band's work runs on the GPU now, ``kernels`` or ``arrays``.
    The update as ``VOXFX_SPARSE_BAND`` (``sparse_band_gpu.band_mode``; the kernels where their
    maps fit: ``band_map_cells``); the topology in kernels (``sparse_band_gpu.topology_keys``: the
    device pipeline's brick keys of the particles held and the deep cells' brick map) where the
    band's kernels, ``VOXFX_SPARSE_BAND_REDUCE=kernels`` and ``VOXFX_SPARSE_TOPOLOGY=device`` are
    on, else the array way's ``keys_of_boxes`` of the liquid's cells (its fit: ``band_topology``)."""
    from . import sparse_band_gpu, sparse_topology_gpu

    update = sparse_band_gpu.band_mode()
    keys = update == "kernels" and sparse_band_gpu.reduce_mode() == "kernels" \
        and sparse_topology_gpu.topology_mode() == "device"
    return update, "kernels" if keys else "arrays"


def band_map_cells(spec: GridSpec, liquid_cells: float, closed: bool = True) -> tuple[float, bool]:
    """(frame-box cells of the kernel way's dense maps at most, whether the kernels surely
    serve the update): in a closed box its cells grown by ``MAP_PAD`` a side (the update's
    frame: the particles', stored and deep cells' bounds grown by its reach and rings), else
    ``sparse_band_gpu.MAP_LIMIT``; sure where that is within ``map_fits``' bound for the
    liquid's cells (``MAP_FLOOR``, ``MAP_CELLS`` a liquid cell), else the array way may run."""
    from .sparse_band_gpu import MAP_CELLS, MAP_FLOOR, MAP_LIMIT

    box = math.prod(float(n) + 2 * MAP_PAD for n in spec.shape) if closed else float(MAP_LIMIT)
    cells = min(box, float(MAP_LIMIT))
    return cells, cells <= max(float(MAP_FLOOR), MAP_CELLS * float(liquid_cells))


def band_arrays(substep: int, narrow_band: int, liquid_cells: float, kept: int) -> int:
    """The array way's update (``VOXFX_SPARSE_BAND=arrays``; module text): beside the substep's
    peak, ``GPU_BAND_CELL`` a liquid cell and ``GPU_BAND_DEEP`` × (N − 2)/N a particle kept."""
    wide = (int(narrow_band) - 2) / int(narrow_band)
    return int(substep + GPU_BAND_CELL * float(liquid_cells) + GPU_BAND_DEEP * wide * int(kept))


def band_kernels(substep: int, cells: int, maps: float, liquid_cells: float, kept: int) -> int:
    """The kernel way's substep with its band (``sparse_band_gpu.update``; module text): beside
    the *substep*'s peak, the band's snapshot of the faces (``BAND_SNAPSHOT`` a pool cell), the
    update's dense maps (``BAND_MAP`` a frame-box cell), its lists (``BAND_LIST`` a liquid cell)
    and its per-particle keys and the refill's copies (``BAND_KEPT`` a particle kept)."""
    return int(substep + BAND_SNAPSHOT * int(cells) + BAND_MAP * float(maps) + BAND_LIST * float(liquid_cells)
               + BAND_KEPT * int(kept))


def band_topology(state: int, liquid_cells: float, kept: int) -> int:
    """A band's topology update on the GPU (module text): beside the *state*, the boxes of
    the liquid's cells (its particles' and its deep cells', ±margin) and their (cell, brick)
    pairs, expanded ``BUILD_CHUNK`` at a time (``grid.sparse.keys_of_boxes``)."""
    pairs = min(float(BUILD_CHUNK), TOPOLOGY_PAIRS * float(liquid_cells))
    return int(state + TOPOLOGY_CELL * float(liquid_cells) + TOPOLOGY_PAIR * pairs + TOPOLOGY_PARTICLE * int(kept))
