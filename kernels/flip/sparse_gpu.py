"""The sparse FLIP solver's CuPy launches (``kernels/cuda/flip_sparse_transfer.cu``): the
stages of ``sparse_transfer.py`` as one kernel per stage over the brick pool or the
particles, mirroring the NumPy reference term by term (``--fmad=false``). Results:
integer work (neighbours, masks, cell types) and G2P/advection bit-identical to the NumPy
path; P2G to float32 rounding (float64 sums in another order).

The kernels read ``SparseMacGrid``'s brick tables (a point finds its brick by binary search,
or from a closed domain's brick index: ``sparse_gpu_base.py``, which holds this file's
``KERNELS``, ``available``, the launches' shared arguments and ``brick_index``, re-exported
here), and G2P takes each particle's brick from its P2G bin.

The topology (§5.1–5.2, per substep, incremental, with per-brick margins) is
``sparse_topology_gpu.py``'s.

P2G (§6–7): particles binned by pool cell (counting sort: ``count_particles_sparse`` +
``flip_transfer.cu``'s ``place_particles``/``sort_cell_segments``/``copy_sorted_particles``,
the dense solver's; 24 + 12 B per particle for the sorted copy and the sort, 8 B per cell
for start and count), then one of four kernels, ``VOXFX_SPARSE_GATHER=scatter|staged|brick|cell``
(or ``particles_to_grid(..., gather=)``), so all can be timed in one run:

``scatter`` (default, FLIP and APIC; ``sparse_scatter.py``, ``flip_sparse_scatter.cu``) does only
the 24 (component, face) terms each particle has: one block per brick adds them as 64-bit
fixed-point integers (scales from a device-side bound on |q| and on particles a cell) with
shared-memory integer atomics into its faces and a one-face halo, then into the owning
bricks' global sums (48 B a pool cell while P2G runs), and a pass per cell divides. Integer
sums are the same bits in any order (a GPU bake stays deterministic), within the .cu's
stated bound of the gathers' float64 sums (far below float32 rounding wherever Σw ≳ 1e-4),
and the gathers' valid masks exactly. On an H200 at 8M particles (``bench/flip_sparse_p2g.py``):
0.69 ms built for four blocks an SM (0.81 for three, of which the bounds 0.18 — one thread
an item then; a grid-stride loop since, not yet timed —, the sums 0.51, zeroing and the
division 0.06) against the staged gather's 1.83; with APIC 1.31 against the brick gather's 3.55; the
whole P2G with binning 1.21 ms against 2.31, the 8M substep 11.8 against 15.7 ms, the 65M
P2G 9.3 against 17.1 ms.

The gathers (``kernels/cuda/flip_sparse_gather.cu``; the staged one in
``flip_sparse_gather_staged.cu``), one thread per face summing the
particles of the 27 cells around it in a fixed order, the same sums bit for bit (no float
atomics): ``staged``, one block per brick that copies the particles of a slab of four cell
layers (and their halo) into shared memory with coalesced loads (the weights' floors and
fractions computed once a particle), then one thread per (component, face) sums from
there, skipping the particles its cells' masks say do not reach it (a slab that does not
fit halves; a layer that still does not fit is gathered from global memory); ``brick``,
one thread block per brick with its 10³ halo's particle spans in shared memory; ``cell``,
one thread per pool cell looking its 27 cells up in global memory. On an H200 at 8M
particles: staged 1.83 ms, brick 2.33, cell 2.60; each particle is visited by 54 (face,
component) walks that test its weights, of which 24 reach (staged without the masks:
2.48 ms); with APIC the staged gather's slab does not fit (23 ms).

The scatter bins otherwise (``VOXFX_SPARSE_BINNING=order``, the default; ``sorted``: the
gathers' binning above, for A/B): its integer sums take the particles in any order, and
G2P's results are per particle, so the per-cell sort (which only makes the float gathers
reproducible) is skipped, and the scatter reads the particles through ``order`` instead of
sorted copies (24 B a particle written and read again, and 2 × 12 B a particle of live
memory while P2G runs); the bound on |q| is fused into the count (``count_particles_bounds``)
and the exclusive scan is two launches that also give the max particles a cell
(``bin_scan_sums``, ``bin_scan``) instead of ``cupy.cumsum`` and a subtraction. The same
scales, the same sums, the same particle state bit for bit (tests/gpu/test_flip_sparse_binning_gpu.py).
Nothing keeps the binned order: the state stays in the particles' own order (below).
H200, 8M particles (``bench/flip_sparse_p2g.py``, one call): binning 0.485 → 0.234 ms (the
scan 0.049 → 0.031, no sort 0.075, no copies 0.174; the fused count 0.162 against the
count's 0.103 + scatter_bounds' 0.040), the scatter through the order 0.483 against 0.466
on the copies, the whole P2G 1.067 → 0.777 ms, its live peak 355 → 172 MiB;
``bench/flip_sparse.py --row 8m``: P2G 1.25 → 0.98 ms, substep 9.8 → 9.6 ms, pool peak
1,195 → 840 MiB.

The count groups its atomics by warp (``VOXFX_SPARSE_BIN_COUNT=grouped``, the default;
``atomic``: one a particle, for A/B; helper i24y): the particles keep their seeding order (cell
by cell) and move less than a cell a substep, so a warp's 32 particles lie in a few cells; the
lanes of one cell (``__match_any_sync``) take one atomicAdd and consecutive ranks
(``voxfx_reduce.cuh``'s ``warp_grouped_rank``). The same counts, starts, cells and bounds; the
order within a cell is another (the atomics' order before, the lanes' now), which nothing
reads (tests/gpu/test_flip_sparse_grouped_count_gpu.py). H100 80GB HBM3, 8M dam break after
4 substeps (``bench/flip_sparse_p2g.py --ab``, two calls): the count 0.185 / 0.171 → 0.146 /
0.136 ms, the whole P2G 0.819 / 0.818 → 0.788 / 0.790 ms; ``bench/flip_sparse.py --row 8m``
(separate processes, one call): bin+gather 0.952 → 0.894 ms, the P2G stage 1.11 → 1.06 ms.

The scatter's shared atomics: ``sparse_scatter.atomics_mode`` (paired by default; its notes).

The P2G stage launch by launch (helper i24p8, ``bench/flip_sparse_p2g_stage.py``; H100 80GB HBM3,
driver 580.159.04, 8M dam break after 4 substeps, 3,198 bricks, 1.64M pool cells; events around
each launch with the host's queue ahead of the device): the grouped count 0.124, bin_scan_sums
0.008, bin_scan 0.013, place 0.050, the brick scatter 0.412, the division 0.037, classify 0.012,
two extrapolation rings 0.036 + 0.037, boundaries with gravity 0.031 ms; memsets and the old
faces' copies 0.074: 0.83 ms of device work. As the row runs it (the device idle when the
stage's Python starts, after the topology's host read) 0.88–0.97 ms: the device waits
0.06–0.16 ms for the host, which takes 0.3–0.67 ms to issue the stage (the spread is between
processes and machines). So the scatter's host work comes in the order that keeps the device
waiting least: the binning's launches (count and bounds one zeroed buffer), the sums zeroed and
the brick scatter, and only then, while the scatter runs, P2G's outputs allocated and the
division launched (``sparse_scatter.launch_sums`` / ``launch_finish``); the same device work.
The 8M row, one process each (call 2): P2G 0.99 → 0.88 ms (bin+gather 0.836 → 0.716); the
stage bench as the row runs it, one process each: 0.877 / 0.889 → 0.933 ms, its host time 0.31 /
0.35 → 0.57 ms (host noise between processes larger than the change: not resolved).

The cell types come from the division's pass (``p2g_cells_mode``, ``VOXFX_SPARSE_P2G_CELLS=finish``,
the default): p2g_scatter_finish_cells writes classify_counts_sparse's types too (one
``voxfx_cell_type.cuh`` function for both), kept as ``grid.p2g_cells`` with the bins and the solid
array they came from; ``classify`` takes them once while those are the same objects. The same
bytes (tests/gpu/test_flip_sparse_p2g_cells_gpu.py). H100, the stage's device time 0.809 → 0.802
and 0.808 → 0.802 ms (two calls; the division 0.037 → 0.042–0.043, classify's 0.012 gone); as the
row runs it 0.967 → 0.935 and 0.933 → 0.931; the row's classify 0.014–0.016 → 0.001–0.002 ms.

Measured and not kept (i24p8, call 1): the grouped count with bin_scan_sums folded in (each
warp's particles added to their tile's sum by a grouped atomicAdd, the max particles a cell as
the largest count a group's add leaves) — the count 0.125 → 0.323 ms, the stage 0.809 → 0.976
(the warps in flight hold neighbouring particles, so their tile atomics meet on a few words);
the scatter's sums zeroed by the count's threads instead of a memset, 0.809 → 0.800 (noise);
the count's warp max by one redux and its match on 32 bits (inside those kernels: no gain seen).

The cell types (classify, §6), the boundaries, the fluid faces and the extrapolation rings between
P2G and the pressure solve are ``sparse_cells_gpu.py``'s (moved there with no change in session 21,
helper h21b: this file had grown to 517 lines; re-exported here). They read P2G's bins, cell types
and idle-brick flags that ``particles_to_grid`` keeps on the grid.

G2P + advection (``flip_sparse_g2p*.cu``: its kernels, orders and timings) is
``sparse_g2p_gpu.py``'s; it reads P2G's bins and the brick index from here.

Particle order: the state is not kept sorted between substeps. Cache frames write the
particles in the simulation's order, and that order is each particle's identity from
frame to frame (emitters append, the kill pass compacts stably); sorting the state by
cell would renumber the particles every substep. The counting sort gives sorted copies
for the gather only. ``VOXFX_SPARSE_PARTICLE_SORT`` (``particle_sort.py``, off by default) puts
the state in brick order at the end of every K-th frame instead, before its outputs and
checkpoint: a stable sort by lattice brick and cell, the same on NumPy and CuPy.
"""

from __future__ import annotations

from ..grid.launch import Kernels
from ..settings import env_choice
from . import sparse_scatter
from .particles import KERNELS as DENSE
from .particles import THREADS
from .sparse_cells_gpu import (  # noqa: F401  (re-exported: the tests use them here)
    LIVE_RINGS, classify, enforce_boundaries, extrapolate, fluid_faces, fluid_live)
from .sparse_gpu_base import (  # noqa: F401  (re-exported: the other launch modules, tests and benches use them here)
    _I32, _I64, _NO_INDEX, CELLS, KERNELS, _dims, _frame, _keep, _topo, available, brick_index)

GATHER = Kernels("flip_sparse_gather.cu", ("--fmad=false",), THREADS)
STAGED = Kernels("flip_sparse_gather_staged.cu", ("--fmad=false",), THREADS)  # p2g_gather_staged
GATHERS = ("brick", "cell", "staged", "scatter")
GATHER_THREADS = 256  # brick gather: threads per brick (each takes 512 / 256 = 2 cells)
STAGED_SLAB = 4  # staged gather: cell layers a slab (192 threads a layer: 3 components × 64 faces), 1–4
STAGED_SHARED = None  # staged gather: shared bytes a block (None: all a block may have)
STAGED_FILTER = True  # staged gather: skip the particles the cells' masks say a face does not reach
# flip_sparse_gather_staged.cu's shared words: first, pre (GATHER_HALO, + 1), part (STAGE_PARTS);
# per staged particle STAGE_WORDS (+ STAGE_APIC_WORDS with C)
_STAGE_FIXED, _STAGE_WORDS, _STAGE_APIC_WORDS = 1000 + 1001 + 256, 10, 12
# VOXFX_SPARSE_BINNING, the scatter's binning (bin_particles_order, module notes): "order" (no per-cell sort, no
# sorted copies, the bound fused into the count, a two-launch scan) or "sorted" (bin_particles, the gathers' binning)
BINNINGS = ("order", "sorted")
BIN_SCAN_TILES = 8192  # bin_scan: at most this many tiles (a block sums the earlier tiles' sums)
# VOXFX_SPARSE_BIN_COUNT, the order binning's count: "grouped" (count_particles_grouped: one atomic a warp's run
# of particles in one cell) or "atomic" (count_particles_bounds, one a particle); the same counts (module notes)
BIN_COUNTS = ("grouped", "atomic")
# VOXFX_SPARSE_P2G_CELLS, where the scatter's P2G types the cells (helper i24p8; module notes): "finish" (the
# default; p2g_scatter_finish_cells: the division's pass writes them too, kept on the grid for classify while P2G's
# bins, the positions and the solid array are the same objects) or "apart" (classify's own classify_counts_sparse
# launch); the same bytes
P2G_CELLS = ("finish", "apart")


def gather_mode(gather=None, apic: bool = False) -> str:
    """The P2G kernel to run: *gather*, else ``VOXFX_SPARSE_GATHER``, else the scatter,
    with APIC too (H200, 8M particles: 0.69 ms against the staged gather's 1.83; APIC 1.31
    against the brick gather's 3.55). *apic* is kept for callers: every kernel takes C."""
    return env_choice("VOXFX_SPARSE_GATHER", GATHERS, gather, default="scatter")


def binning_mode(mode=None) -> str:
    """The scatter's binning: *mode*, else ``VOXFX_SPARSE_BINNING``, else ``BINNINGS[0]``
    (H200, 8M: the whole P2G 0.78 against 1.07 ms sorted, the same faces; the gathers
    always bin sorted: their float sums need the order)."""
    return env_choice("VOXFX_SPARSE_BINNING", BINNINGS, mode)


def bin_count_mode(mode=None) -> str:
    """The order binning's count kernel: *mode*, else ``VOXFX_SPARSE_BIN_COUNT``, else ``BIN_COUNTS[0]``."""
    return env_choice("VOXFX_SPARSE_BIN_COUNT", BIN_COUNTS, mode)


def p2g_cells_mode(mode=None) -> str:
    """Where the scatter's P2G types the cells (``P2G_CELLS``): *mode*, else
    ``VOXFX_SPARSE_P2G_CELLS``, else ``P2G_CELLS[0]``."""
    return env_choice("VOXFX_SPARSE_P2G_CELLS", P2G_CELLS, mode)


# ------------------------------------------------------------------ particles → grid


def bin_particles(grid, pos, vel, c):
    """Particles sorted by pool cell (module notes): sorted pos, vel, C (a 1-element dummy
    without C), per-cell start and count (cells + 1: the last holds the particles without
    an active cell), the order (sorted position → particle) and each particle's cell."""
    cp = grid.xp
    n = int(pos.shape[0])
    cells = grid.size
    keys, slots, nk = _topo(grid)
    ox, oy, oz, _, inv_h = _frame(grid)
    count = cp.zeros(cells + 1, cp.int32)
    cell_of = cp.empty(n, cp.int32)
    rank = cp.empty(n, cp.int32)
    KERNELS.launch("count_particles_sparse", n, (pos, _I64(n), ox, oy, oz, inv_h, keys, slots, nk, *brick_index(grid),
                                                 _I64(cells), count, cell_of, rank))
    start = cp.cumsum(count, dtype=cp.int32)
    start -= count  # exclusive scan
    order = cp.empty(n, cp.int32)
    DENSE.launch("place_particles", n, (cell_of, rank, start, _I64(n), order))
    del rank
    DENSE.launch("sort_cell_segments", cells + 1, (order, start, count, _I64(cells + 1)))
    spos = cp.empty_like(pos)
    svel = cp.empty_like(vel)
    apic = c is not None
    sc = cp.empty_like(c) if apic else cp.zeros(1, cp.float32)
    DENSE.launch("copy_sorted_particles", n, (order, _I64(n), pos, vel, c if apic else sc, _I32(apic), spos, svel, sc))
    return spos, svel, sc, start, count, order, cell_of


def scan_counts(cp, count, cells: int, bounds):
    """The exclusive scan of *count* (int32, cells + 1 entries) by ``bin_scan_sums`` and
    ``bin_scan`` (two launches); bounds[1] ← max(bounds[1], the max count over the pool's
    *cells*). Not ``sparse_pressure_setup.inclusive_scan`` (scan_tile_sums + scan_tiles): it
    would need a subtraction and a max after its two launches (H200, 8M particles, 1.64M
    pool cells: 0.076 ms against these two launches' 0.031, the same starts and max)."""
    n = int(count.shape[0])
    start = cp.empty(n, cp.int32)
    tile = max(8 * THREADS, -(-n // (BIN_SCAN_TILES * THREADS)) * THREADS)
    tiles = -(-n // tile)
    sums = cp.empty(tiles, cp.int32)
    KERNELS.launch_grid("bin_scan_sums", (tiles,), (THREADS,), (count, _I32(n), _I32(tile), _I32(cells), sums, bounds))
    KERNELS.launch_grid("bin_scan", (tiles,), (THREADS,), (count, _I32(n), _I32(tile), sums, start))
    return start


def bin_particles_order(grid, pos, vel, c):
    """The scatter's binning (``VOXFX_SPARSE_BINNING=order``): per pool cell start and count
    (cells + 1, as ``bin_particles``), the order (binned position → particle), each
    particle's cell and the scatter's bounds (``sparse_scatter.launch``), from
    ``count_particles_bounds`` (the bound on |q| fused in), ``scan_counts`` and
    ``place_particles``. The order within a cell is the atomics' (not reproducible): the
    scatter's integer sums and G2P's per-particle results do not depend on it, so there is
    no per-cell sort, and no sorted copies (the scatter reads through the order)."""
    cp = grid.xp
    n = int(pos.shape[0])
    cells = grid.size
    keys, slots, nk = _topo(grid)
    ox, oy, oz, h, inv_h = _frame(grid)
    name = "count_particles_grouped" if bin_count_mode() == "grouped" else "count_particles_bounds"
    words = cp.zeros(cells + 3, cp.int32)  # count (cells + 1) and bounds: one allocation, one memset
    count, bounds = words[:cells + 1], words[cells + 1:].view(cp.uint32)
    cell_of = cp.empty(n, cp.int32)
    rank = cp.empty(n, cp.int32)
    apic = c is not None
    KERNELS.launch(name, n, (pos, vel, c if apic else count, _I32(apic), _I64(n), ox, oy, oz, inv_h, h, keys, slots,
                             nk, *brick_index(grid), _I64(cells), count, cell_of, rank, bounds))
    start = scan_counts(cp, count, cells, bounds)
    order = cp.empty(n, cp.int32)
    DENSE.launch("place_particles", n, (cell_of, rank, start, _I64(n), order))
    return start, count, order, cell_of, bounds


_SHARED_LIMIT: dict = {}


def shared_limit() -> int:
    """Bytes of dynamic shared memory a block may opt in to on this device (48 KiB where
    the device does not say)."""
    import cupy as cp

    dev = cp.cuda.Device()
    if dev.id not in _SHARED_LIMIT:
        limit = cp.cuda.runtime.getDeviceProperties(dev.id).get("sharedMemPerBlockOptin", 0)
        limit = limit or dev.attributes.get("MaxSharedMemoryPerBlockOptin", 0)
        _SHARED_LIMIT[dev.id] = int(limit or 48 * 1024)
    return _SHARED_LIMIT[dev.id]


def staged_capacity(apic: bool, shared_bytes=None) -> tuple:
    """(particles a slab may stage, dynamic shared bytes) of the staged gather: all the
    shared memory a block may have (one block per SM), or *shared_bytes*."""
    limit = shared_limit() if shared_bytes is None else min(int(shared_bytes), shared_limit())
    words = _STAGE_WORDS + (_STAGE_APIC_WORDS if apic else 0)
    capacity = max(0, (limit // 4 - _STAGE_FIXED) // words)
    return capacity, 4 * (_STAGE_FIXED + capacity * words)


def launch_gather(mode: str, size: int, args, apic: bool, slab=None, shared_bytes=None, filter=None) -> None:
    """One gather kernel (*mode*, ``GATHERS``) over the pool of *size* cells; *args* as
    ``particles_to_grid`` passes them; *slab*, *shared_bytes* and *filter*: the staged
    gather's layers a slab, shared memory and masks (default ``STAGED_SLAB``,
    ``STAGED_SHARED``, ``STAGED_FILTER``)."""
    if size == 0:  # an empty pool: no blocks to launch
        return
    slab = int(STAGED_SLAB if slab is None else slab)
    shared_bytes = STAGED_SHARED if shared_bytes is None else shared_bytes
    filter = STAGED_FILTER if filter is None else filter
    if not 1 <= slab <= 4:
        raise ValueError(f"the staged gather's slab must be 1 to 4 cell layers, not {slab}")
    if mode == "scatter":
        sparse_scatter.launch(size, args)
    elif mode == "cell":
        GATHER.launch("p2g_gather_sparse", size, args)
    elif mode == "brick":
        GATHER.launch_grid("p2g_gather_brick", (size // CELLS,), (GATHER_THREADS,), args)
    else:
        capacity, nbytes = staged_capacity(apic, shared_bytes)
        kernel = STAGED.get("p2g_gather_staged")
        if kernel.max_dynamic_shared_size_bytes < nbytes:
            kernel.max_dynamic_shared_size_bytes = nbytes
        kernel((size // CELLS,), (192 * slab,), (*args, _I32(slab), _I32(capacity), _I32(bool(filter))),
               shared_mem=nbytes)


def _brick_args(grid):
    """The scatter's and gathers' arguments after the particles' six: the brick tables, the pool's
    size, the domain and its frame."""
    return (grid.brick_slot, grid.slot_coords, grid.brick_nbr, _I64(grid.size), _I32(grid.closed), *_dims(grid),
            *_frame(grid))


def _outputs(size, cp):
    """P2G's valid masks and faces (fresh)."""
    return tuple(cp.empty(size, cp.uint8) for _ in range(3)), tuple(cp.empty(size, cp.float32) for _ in range(3))


def p2g_ring_done(grid) -> int:
    """1 where ``particles_to_grid(ring=True)`` ran the first extrapolation ring into the grid's
    present faces (p2g_scatter_finish_ring), else 0; read once (the faces it kept let go)."""
    kept = getattr(grid, "_p2g_ring", None)
    if kept is None:
        return 0
    _keep(grid, "_p2g_ring", None)
    return int(all(a is b for a, b in zip(kept, (grid[n] for n in grid.FACES))))


def brick_live(grid, count):
    """A byte per pool slot: 1 where the slot's brick or one of its 26 neighbours holds a
    particle (*count*, the binning's per-cell counts), else 0 (an idle brick: no valid face
    within 7 cells, flip_sparse_transfer.cu's notes); two launches (helper h18f)."""
    cp = grid.xp
    slots = grid.capacity
    occupied = cp.zeros(slots, cp.uint8)
    live = cp.empty(slots, cp.uint8)
    KERNELS.launch("brick_occupied_sparse", grid.size, (count, _I64(grid.size), occupied))
    KERNELS.launch("brick_live_sparse", slots, (occupied, grid.brick_nbr, _I64(slots), live))
    return live


def p2g_live(grid):
    """The idle-brick flags (``brick_live``) ``particles_to_grid(live=True)`` made, where the grid's
    faces are still its P2G's, else None; read once (``p2g_ring_done``'s pattern)."""
    kept = getattr(grid, "_p2g_live", None)
    if kept is None:
        return None
    _keep(grid, "_p2g_live", None)
    faces, live = kept
    return live if all(a is b for a, b in zip(faces, (grid[n] for n in grid.FACES))) else None


def particles_to_grid(grid, pos, vel, c, gather=None, ring=False, live=False):
    """``sparse_transfer.particles_to_grid`` (gather: ``gather_mode``); returns the valid
    masks. Keeps the bins' counts for ``classify`` (``grid.bins``), and with
    ``p2g_cells_mode`` "finish" the cell types for it (``grid.p2g_cells``). *ring* (the scatter
    with the cell types by the division): the division's pass runs the first ring of
    extrapolation too (p2g_scatter_finish_ring; ``p2g_ring_done``); *live* (the same P2G) the idle
    bricks' flags made and the division skipping their sums (p2g_scatter_finish_live; ``p2g_live``
    hands the flags to the tail). The scatter's
    host work comes in the order that keeps the device waiting least (helper i24p8): the
    binning's launches first, the brick scatter next, and only then (while it runs) the
    outputs' allocations and the division."""
    cp = grid.xp
    size = grid.size
    mode = gather_mode(gather, c is not None)
    kept = done = flags = None
    if mode == "scatter" and binning_mode() == "order":
        start, count, order, cell_of, bounds = bin_particles_order(grid, pos, vel, c)
        if live and size and p2g_cells_mode() == "finish":
            flags = brick_live(grid, count)
        head = (pos, vel, c if c is not None else count, _I32(c is not None), start, count, *_brick_args(grid))
        zeroed = sparse_scatter.kept_sums(grid, cp) if sparse_scatter.rezero_mode() == "1" else None  # h21n
        sums = sparse_scatter.launch_sums(size, head, order=order, bounds=bounds, live=flags,
                                          kept=zeroed) if size else None
        valid, faces = _outputs(size, cp)
        if size:
            cells = None
            if p2g_cells_mode() == "finish":  # the cell types by the division's pass (classify takes them)
                solid, cell = grid["solid"], cp.empty(size, cp.uint8)
                kept = (cell, solid)
                cells = (count, solid, grid.slot_coords, _I32(grid.closed), *_dims(grid), cell)
                if ring and flags is None:
                    cells, done = (*cells, *(grid[n] for n in grid.EXISTS), grid.brick_nbr), faces
            sparse_scatter.launch_finish(size, sums, (*faces, *valid), cells, ring=done is not None, live=flags)
    else:
        valid, faces = _outputs(size, cp)
        spos, svel, sc, start, count, order, cell_of = bin_particles(grid, pos, vel, c)
        args = (spos, svel, sc, _I32(c is not None), start, count, *_brick_args(grid), *faces, *valid)
        launch_gather(mode, size, args, c is not None)
        del spos, svel, sc
    grid.bins = bins = (pos, count, order, cell_of)
    _keep(grid, "p2g_cells", None if kept is None else (bins, *kept))  # classify's while these bins stand
    _keep(grid, "_p2g_ring", done)
    _keep(grid, "_p2g_live", None if flags is None else (faces, flags))
    _keep(grid, "_live_cells", None if flags is None else (kept[0], flags))  # fluid_faces' while the types stand
    for name, f in zip(grid.FACES, faces):
        grid[name] = f
    return valid
