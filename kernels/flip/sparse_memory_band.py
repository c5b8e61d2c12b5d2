"""Memory of a sparse liquid bake's narrow band (issue 12; ``sparse_memory``'s estimate, the band's
terms): the particles a band keeps (``band_kept``), the band's update after advection on the CPU
(``CPU_BAND_*``) and on the GPU by the array way (``band_arrays``) or the kernel way
(``band_kernels``, ``band_map_cells``), which of them runs (``band_ways``) and the array way's
topology (``band_topology``). Moved out of ``sparse_memory.py`` with no change (issue 24's module
guide, session 21, helper h21b: that file had grown to 527 lines); ``sparse_memory`` re-exports
every name here, and ``sparse_memory.memory_at`` adds these terms to its stages. The fits and
their replays, as they stood in ``sparse_memory``'s module text:

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
"""

from __future__ import annotations

import math

from ..grid import GridSpec
from ..grid.sparse import BUILD_CHUNK

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


def band_kept(particles: int, particles_per_cell: int, narrow_band: int, spec: GridSpec, closed: bool = True,
              climb: float | None = None) -> int:
    """Particles a narrow band of *narrow_band* cells keeps at most of a liquid of
    *particles* (module text): those within the band of the surface of the sheet that
    ``layer_bricks`` spreads it into (``layer_depth`` × ``BAND_DEPTH``), all of them
    without a band, in an open domain or where the band reaches the sheet's floor."""
    from .sparse_memory import layer_depth

    particles = int(particles)
    if int(narrow_band) <= 0 or not closed:
        return particles
    depth = BAND_DEPTH * layer_depth(particles / max(1, int(particles_per_cell)), spec, climb)
    return int(math.ceil(particles * min(1.0, int(narrow_band) / depth)))


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
