"""The particle level set on the GPU (``cuda/flip_surface.cu``; "lean"'s kernels in
``cuda/flip_surface_lean.cu``): the device half of
``surface.particle_level_set`` and ``surface.closed_level_set``, whose module text states
the method, the three ways (``LEVEL_SET_MODES``: "lean", the default, "bricks" and
"legacy") and why all give the CPU reference's particles per node and the same φ to the bit
as each other. ``estimate_gpu_bytes`` is the level set's device memory for the guards;
``PROFILE`` lets a bench time the stages (``bench/flip_level_set.py``, ``bench/flip_sparse.py
--level-set-modes``).

"lean" is "bricks" with its gather branch-free (``particle_level_set_lean``: a miss adds a
zero weight; d2/R2 by the compiler's own quotient step with 1/R2 made once a thread, exact
for every d2, flip_surface_lean.cu), each particle's own point counted and placed by warp groups,
32-bit tags (below ``COMBOS``·n ≤ 2³²; else bricks' binning) and the sparse solver's
two-launch scan (``sparse_gpu.scan_counts``, which gives the fullest cell too), and an open or
large liquid's region from one pass over the particles (``particle_bounds``, bench/RESULTS.md, i24s:
the 65M count 4.13 → 1.27 ms, 17.7 → 14.8 ms in all; ``VOXFX_LEVEL_SET_BOUNDS=0`` the six
reductions for A/B; on since its GPU test passed on an H100). Off: the gather built for three
blocks an SM (``LEAN_BLOCKS``: no faster,
18.1 / 2.55 ms; kept as an A/B build only). "lean"'s binning places the tags alone and makes the points
in the ordering (``surface_place``, ``VOXFX_LEVEL_SET_PLACE``, "tags-plain" by default since session 17:
the 8M Fast frames 6–11's binning stages 11.85 → 9.16 ms on an H100, bench/RESULTS.md h17e and the
seventeenth session; "lean", points and tags placed together, the A/B way). Measured on an
NVIDIA H100 80GB HBM3 (``bench/flip_level_set.py``, the dam break after 24 substeps at 8M
and 4 at 65M, the two ways alternating in one process, φ the same bits), ms on the device:

| | 8M (256³, 262³ nodes) | 65M (512³, the liquid's 10.6M nodes) |
|---|---|---|
| bricks | 3.11 (gather 1.75, place 0.40, count 0.29, scan + read 0.30) | 20.1 (gather 12.4, count 4.2, place 2.2) |
| lean | 2.55 (gather 1.40, place 0.34, count 0.25, scan + read 0.17) | 17.7 (gather 10.5, count 4.2, place 1.7) |

(65M's "count" there holds the region's six reductions and host reads.) The interior skip
(``surface_interior``, on by default) marks its cells from the binning's counts
(``_interior_cells``) and the gathers give those nodes −band. The
floor, the positions read and φ written once, is 0.05 ms at 8M and 0.25 at 65M: the gather
is bound by its instructions (~650 particles tested a node, ~27 instructions a test, every
test taking the weight path for some lane of the warp), not by memory.

Late frames (issue 24; H100 80GB HBM3, ``bench/flip_sparse.py --row 65m --frames 12 --timing
fast --level-set --trim --level-set-modes lean``, ``STATS``' numbers): the "level set" of frames
10 and 11 (99 and 113 ms in the session's first H100 run) was 53.1 and 55.2 ms on the device — gather 31.3 / 32.0,
place 14.5 / 15.7, order cells 3.7, count 2.3, the rest 1.3 — plus **38.7 and 41.8 ms** copying
φ (135 and 162 MB) to pageable memory, now 2.6 and 3.0 through a pinned block
(``surface_host_copy.host_copy``).
The sums' products (``level_set_sums``, ``VOXFX_LEVEL_SET_SUMS``; h18e): "plain" (the A/B) rounds each
w·dx, w·dy, w·dz, w·r and adds it; "fused" (the default) adds each as one ``fmaf`` and takes "lean"'s weight
as max(t³, 0) for its select (``_K_FUSED``, ``_K_LEAN_FUSED``: the files built with
LEVEL_SET_SUMS_FUSED=1, only the gather kernels differ), 5 of the ~26 instructions a (node,
point) pair fewer in the PTX. The offsets, d2 and the test d2 < R² stay unfused, so a node sums
the CPU's particles either way; every way gives the others' bits in either mode; the modes' φ
differ by the sums' float32 rounding (≤ 2e-7·R on the host harness's scene, ≤ 4.2e-6·R in the 8M
Fast frames), and the 8M gather after the splash is 10–12% shorter (H100, bench/RESULTS.md h18e).
From frame 0 to 11 the points grew 68.8M → 91.0M (the walls' images 3.2M → 25.5M), the region
11.0M → 40.5M nodes, the fullest cell 97 → 4,757 (690 cells over ``SORT_CELL_MAX``); the gather
4.6 → 32.0 ms and the place 1.9 → 15.7 ms. Tried in that call and not kept (the same φ bits,
slower): the nodes that would test over 2,048 points gathered apart in full warps by a flat
row loop (0.9M such nodes at frame 10): gather 31.3 → 52.1 ms; cells over 256 points (not 1,024)
sorted apart: order cells 3.7 → 5.2 ms.

Session 23 (s23c; H100 80GB HBM3, the 65M Fast frames 0–11 in one process, ``gather_work``'s counters): the
gather's tests grow 0.94G → 7.0G a frame, its warps' lane slots 3.9G → 25.9G (27% of them testing a point at
frame 11: a warp's row costs its fullest lane, beside crowded cells up to 7,068 points), 2.0M of the 14.5M
gathered nodes test ≥ 1,023 points, one 52,215; the gather issues ~1 lane slot a cycle a lane, so the lever left
is the lanes' balance. Each node tile over 4 blocks (``gather_split``, the default since): gather 28.8 → 26.4 ms
at frame 11, the same bits. The tags placed with a particle's images' atomics together: no faster (removed).
φ copied while made (``surface_overlap``, ``VOXFX_LEVEL_SET_COPY=overlap``): no faster, opt-in.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..grid.launch import Kernels
from ..settings import env_choice
from . import sparse_gpu
from .surface import FLAT_GRADIENT, SMOOTH_STEP, _non_finite
from .surface_interior import interior_skip

_CU = "flip_surface.cu"
_CU_LEAN = "flip_surface_lean.cu"  # "lean"'s kernels and particle_bounds
_OPTIONS = ("--fmad=false",)  # node positions and offsets round as NumPy's: same particles per node
_THREADS = 256
CELLS_PER_RADIUS = 2  # GPU binning cells per kernel radius: finer cells test fewer particles per node
LEVEL_SET_MODES = ("lean", "bricks", "legacy")  # GPU level set (module text); VOXFX_LEVEL_SET picks, default the first
TILE = (32, 4, 4)  # "bricks": nodes of a node tile along x, y, z (a block; a warp is a row of 32 along x)
# "bricks": a binning cell with more points than this is ordered by a sort of its points (sort_cell_max). 8192
# since i24f (H100, 8M Fast frames 6–11, 1024 / 4096 / 8192 alternating in one process, φ the same bits): the
# splash's fullest cell 1,249–2,843 points, 6–35 cells over 1,024: order cells 2.1–2.7 → 0.15–0.26 ms, the level
# set 7.1–10.2 → 3.9–8.0 (4096) / 4.5–7.4 ms (8192)
SORT_CELL_MAX = 8192
SORT_CELL_LIMITS = ("default", "1024", "2048", "4096", "8192")  # VOXFX_LEVEL_SET_SORT_CELL_MAX (sort_cell_max)
# The node sums' products (voxfx_surface.cuh's add_terms, VOXFX_LEVEL_SET_SUMS): "fused" (default since h18e) each
# product and its add one fmaf, and "lean"'s weight max(t³, 0) for its select (5 instructions of ~26 a (node, point)
# pair fewer; H100, 8M Fast frames 6–11: the gather 41.59 → 36.88 ms over two processes, bench/RESULTS.md h18e);
# "plain" each rounded, then added (the A/B). The same particles a node in both (the offsets, d2 and d2 < R2
# unfused); every way the same φ bits as the others in either mode; the modes' φ differ by float32 rounding of the
# sums (8M: ≤ 4.2e-6·R)
LEVEL_SET_SUMS = ("fused", "plain")
# VOXFX_LEVEL_SET_GATHER_SPLIT (gather_split; s23c, issue 24): the lean gather's node tile over this many blocks
# (particle_level_set_lean_split, TILE's 512 threads / split a block; "1": one block a tile, the kernel before, the
# A/B). A block frees its SM slots only when its slowest warp ends; after the 65M splash a tile's few warps beside
# crowded cells held the other warps' slots (gather_work at frame 11: the tiles' block slots 40.4G, a quarter
# block's 31.3G, the warps' own 25.9G lane slots for 7.0G tests). Every node gathers as before: the same φ bits.
# "4" the default since s23c: H100 80GB HBM3, 65M Fast frames 6–11 in one process (--level-set-modes), gather
# 138.9 → 128.8 ms, level_set() to the host 235.8 → 230.6 ms (frame 11: 28.8 → 26.4, 52.9 → 50.3); 8M frames
# 6–11 gather 18.9 → 17.4 ms; φ the same bits every frame
GATHER_SPLITS = ("4", "1", "2", "8")
# VOXFX_LEVEL_SET_GATHER_WORK=1 (benches, with STATS): the gather's work counters (flip_surface_lean.cu
# gather_work) into STATS, launched after the gather's mark (they land in the next stage's time)
LEAN_BLOCKS = 2  # "lean" gather: 2 (no launch bounds, 48 registers) or 3 blocks a tile an SM (_3; no faster)
# VOXFX_LEVEL_SET_BOUNDS=1 (default): an open or large liquid's region from particle_bounds (one pass, one host read);
# 0: six reductions and reads of the cell coordinates (sparse_output.liquid_region), the A/B baseline. The same region
REGION_BOUNDS = os.environ.get("VOXFX_LEVEL_SET_BOUNDS", "1").strip() != "0"
COMBOS = 27  # a particle and its images (voxfx_surface.cuh's COMBOS): tags combo·n + p below COMBOS·n
PROFILE = None  # a list: the GPU level set appends (stage, CUDA event) as each stage is queued (benches)
STATS = None  # a dict: the "bricks"/"lean" level set puts its points, fullest cell, cells and nodes there (benches)


def _mark(stage):
    """Note the end of *stage* of a GPU level set in ``PROFILE`` (when it is a list)."""
    if PROFILE is not None:
        import cupy as cp

        event = cp.cuda.Event()
        event.record()
        PROFILE.append((stage, event))


def sort_cell_max(given=None) -> int:
    """The most points a binning cell may hold for ``surface_order_cells`` to rank them in place
    (each point counts its cell's smaller tags: m² tests for m points); a fuller cell is sorted
    apart (``_order_crowded``: ~16 CuPy launches and a host read). *given*, else
    ``VOXFX_LEVEL_SET_SORT_CELL_MAX`` (a bench's A/B), else ``SORT_CELL_MAX``. Either way every
    cell's points end in tag order: the same list, the same φ (tests/gpu/test_flip_surface_bricks_gpu.py)."""
    chosen = env_choice("VOXFX_LEVEL_SET_SORT_CELL_MAX", SORT_CELL_LIMITS, given and str(given), "default")
    return SORT_CELL_MAX if chosen == "default" else int(chosen)


def level_set_sums(mode=None) -> str:
    """How the gathers add a particle's terms to a node's sums (voxfx_surface.cuh's add_terms,
    ``LEVEL_SET_SUMS``): *mode*, else ``VOXFX_LEVEL_SET_SUMS``, else fused."""
    return env_choice("VOXFX_LEVEL_SET_SUMS", LEVEL_SET_SUMS, mode)


def gather_split(given=None) -> int:
    """Blocks a node tile of the lean gather (``GATHER_SPLITS``): *given*, else
    ``VOXFX_LEVEL_SET_GATHER_SPLIT``, else 4."""
    return int(env_choice("VOXFX_LEVEL_SET_GATHER_SPLIT", GATHER_SPLITS, given and str(given)))


def level_set_mode(mode=None) -> str:
    """The GPU level set's way (module text): *mode*, else ``VOXFX_LEVEL_SET``, else lean."""
    return env_choice("VOXFX_LEVEL_SET", LEVEL_SET_MODES, mode)


_TILE_DEFINES = {"TILE_X": TILE[0], "TILE_Y": TILE[1], "TILE_Z": TILE[2]}
_K = Kernels(_CU, _OPTIONS, _THREADS, defines=_TILE_DEFINES)
_K_LEAN = Kernels(_CU_LEAN, _OPTIONS, _THREADS, defines=_TILE_DEFINES)
# the gathers with fused sums (level_set_sums "fused"): the same files, only the gather kernels differ
_K_FUSED = Kernels(_CU, _OPTIONS, _THREADS, defines={**_TILE_DEFINES, "LEVEL_SET_SUMS_FUSED": 1})
_K_LEAN_FUSED = Kernels(_CU_LEAN, _OPTIONS, _THREADS, defines={**_TILE_DEFINES, "LEVEL_SET_SUMS_FUSED": 1})
_K_INTERIOR = Kernels("flip_surface_interior.cu", (), _THREADS)


def _interior_cells(counts, cells, rule):
    """(uint8 flags over the binning cells *cells* = (cx, cy, cz), skip): the cells whose
    cube of *rule* = (full, reach) is full of points by their *counts* (int32, at least
    cx·cy·cz), ``surface_interior``'s rule, and 1; without a *rule* a 1-entry stand-in and 0
    (the gathers read it only with skip = 1)."""
    import cupy as cp

    if rule is None:
        return cp.zeros(1, cp.uint8), np.int32(0)
    full, reach = (int(v) for v in rule)
    cx, cy, cz = (int(c) for c in cells)
    n = cx * cy * cz
    flags, other = cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)
    _K_INTERIOR.launch("interior_cells_x", n, (counts, np.int32(full), np.int32(cx), np.int32(cy), np.int32(cz),
                                               np.int32(reach), flags))
    for axis in (1, 2):
        _K_INTERIOR.launch("interior_cells_erode", n, (flags, np.int32(cx), np.int32(cy), np.int32(cz),
                                                       np.int32(axis), np.int32(reach), other))
        flags, other = other, flags
    return flags, np.int32(1)


def estimate_gpu_bytes(n_particles: int, spec: GridSpec, kernel_radius: float) -> int:
    """Peak device memory of ``particle_level_set`` on the GPU beyond its inputs."""
    cells = _cell_grid(spec, kernel_radius)[2]
    n = int(n_particles)
    per_particle = 4 + 16 + 8 + 16 + 8 + 4  # key, argsort copies + scratch, order, float4, checks, sorted key
    per_cell = 4 + 8 + 4  # the searched cell ids (int32), their int64 positions, starts (int32)
    if interior_skip():
        per_cell += 2  # the interior skip's cell flags, two buffers (_interior_cells)
    return n * per_particle + (int(np.prod(cells)) + 2) * per_cell + 2 * 4 * spec.voxel_count


def particle_bounds(pos) -> np.ndarray:
    """(2, 3) float32 on the host: per axis the least and the greatest coordinate of the
    device particles *pos* (N ≥ 1, 3), NaN skipped as ``nanmin``/``nanmax`` skip it (NaN
    where an axis has none else): one pass and one host read (``particle_bounds``)."""
    import cupy as cp

    pos = cp.ascontiguousarray(pos, dtype=cp.float32)
    n = int(pos.shape[0])
    keys = cp.array([0xFFFFFFFF] * 3 + [0] * 3, dtype=cp.uint32)
    blocks = max(1, min(-(-n // _THREADS), 1024))  # a grid-stride loop: ~2 blocks a thread slot of an H100
    _K_LEAN.launch_grid("particle_bounds", (blocks,), (_THREADS,), (pos, np.int64(n), keys))
    return bounds_from_keys(keys.get())


def bounds_from_keys(keys) -> np.ndarray:
    """``particle_bounds``' six order keys (flip_surface_lean.cu's ordered_key) as (2, 3) float32."""
    k = np.asarray(keys, dtype=np.uint32)
    bits = np.where(k & np.uint32(0x80000000), k & np.uint32(0x7FFFFFFF), ~k).astype(np.uint32)
    return bits.view(np.float32).reshape(2, 3)


def _cell_grid(spec, R):
    """(origin, edge, (cx, cy, cz)) of the binning cells: edge max(R / CELLS_PER_RADIUS,
    voxel) (no more cells than voxels), covering the grid plus R and one spare cell on
    every side (so float rounding at the fringe never drops a particle the node test
    would take)."""
    edge = max(float(R) / CELLS_PER_RADIUS, spec.voxel_size)
    origin = tuple(o - R - edge for o in spec.origin)
    counts = tuple(int(math.ceil((n * spec.voxel_size + 2.0 * (R + edge)) / edge)) for n in spec.shape)
    return origin, edge, counts


def _level_set_gpu(pos, radii, spec, R, band, smooth_iterations, interior=None):
    import cupy as cp

    nx, ny, nz = spec.shape
    n = int(pos.shape[0])
    backend.ensure_fits(estimate_gpu_bytes(n, spec, R), "the liquid surface level set", xp=cp)
    phi = cp.empty(spec.array_shape, dtype=cp.float32)
    (cox, coy, coz), edge, (cx, cy, cz) = _cell_grid(spec, R)
    n_cells = cx * cy * cz
    if n_cells >= 2 ** 31 - 1:
        raise InputError("the surfacing grid is too large for its kernel radius (over 2³¹ binning cells); "
                         "use a larger kernel radius or a smaller grid")
    f32 = np.float32
    # 1. Bin: one key per particle (n_cells = outside every cell), then sort by key.
    keys = cp.empty(n, dtype=cp.int32)
    if n:
        _K.launch("bin_particles", n, (
            pos, np.int64(n), f32(cox), f32(coy), f32(coz), f32(1.0 / edge), np.int32(cx), np.int32(cy),
            np.int32(cz), keys))
    order = cp.argsort(keys)
    _mark("bin + argsort")
    # 2. Cell start offsets: an exclusive scan of the per-cell counts.
    starts = cp.zeros(n_cells + 1, dtype=cp.int32)
    if n:  # keys below cell c, by binary search in the sorted keys: no histogram of n_cells
        # bins (CuPy's bincount takes a CUB histogram there, whose per-block copies of the
        # bins cost 250 MiB at 64³ on an H100 — measured, bench/memory_gpu.py).
        starts[1:] = cp.searchsorted(keys[order], cp.arange(1, n_cells + 1, dtype=cp.int32), side="left")
    interior_flags, skip = _interior_cells(starts[1:] - starts[:-1] if interior else None, (cx, cy, cz), interior)
    _mark("cell starts")
    # 3. Particles as float4 (x, y, z, r) in cell order.
    packed = cp.empty((n, 4), dtype=cp.float32)
    if n:
        scalar = isinstance(radii, np.floating)
        radii = cp.full(1, radii, dtype=cp.float32) if scalar else radii
        _K.launch("pack_particles", n, (
            pos, radii, np.int32(0 if scalar else 1), order, np.int64(n), packed))
    _mark("pack")
    # 4. Gather per node: one fused kernel, no atomics.
    ox, oy, oz = spec.origin
    (_K_FUSED if level_set_sums() == "fused" else _K).launch("particle_level_set", spec.voxel_count, (
        packed, starts, interior_flags, skip, np.int32(nx), np.int32(ny), np.int32(nz), f32(ox), f32(oy), f32(oz),
        f32(spec.voxel_size), f32(cox), f32(coy), f32(coz), f32(1.0 / edge), np.int32(cx), np.int32(cy),
        np.int32(cz), f32(R), f32(band), phi))
    _mark("gather")
    # 5. Smoothing, double-buffered.
    if smooth_iterations:
        other = cp.empty_like(phi)
        for _ in range(smooth_iterations):
            _K.launch("smooth_level_set", spec.voxel_count, (
                phi, np.int32(nx), np.int32(ny), np.int32(nz), SMOOTH_STEP, f32(FLAT_GRADIENT * spec.voxel_size) ** 2,
                f32(band), other))
            phi, other = other, phi
    _mark("smooth")
    return phi


def _gather_kernel(R) -> tuple:
    """(kernels, name) of the node gather of the bricks ways: "lean"'s
    (``particle_level_set_lean``, the same φ bit for bit) where its quotient step holds, R² in
    [2⁻⁶⁰, 2⁶⁰] (flip_surface_lean.cu), else "bricks"' own; built with the sums of
    ``level_set_sums()``."""
    R2 = float(np.float32(R) * np.float32(R))
    fused = level_set_sums() == "fused"
    if not (level_set_mode() == "lean" and 2.0 ** -60 <= R2 <= 2.0 ** 60):
        return _K_FUSED if fused else _K, "particle_level_set_bricks"
    return _K_LEAN_FUSED if fused else _K_LEAN, "particle_level_set_lean_3" if LEAN_BLOCKS == 3 else \
        "particle_level_set_lean"


def _gather_launch(name) -> tuple:
    """(kernel, blocks a tile) of the gather *name* (``_gather_kernel``'s): lean's over ``gather_split()`` blocks
    (``particle_level_set_lean_split`` where more than one); any other gather a block a tile. Each the same φ
    bits. (s23h's gather with its lanes balanced was slower on the GPU and was removed in
    session 25: bench/RESULTS.md.)"""
    if name != "particle_level_set_lean":
        return name, 1
    split = gather_split()
    return ("particle_level_set_lean_split" if split > 1 else name), split


def _gather_work(active, starts, interior_flags, skip, nb, grid_args, cell_args, R, cp) -> None:
    """``VOXFX_LEVEL_SET_GATHER_WORK``: the gather's work (flip_surface_lean.cu ``gather_work``'s counters) into
    ``STATS`` (benches; after the gather's own launch, so its events time the gather alone)."""
    out = cp.zeros(32, cp.uint64)
    _K_LEAN.launch_grid("gather_work", (active.size,), (int(np.prod(TILE)),), (
        starts, active, interior_flags, skip, np.int32(nb[0]), np.int32(nb[1]), *grid_args, *cell_args,
        np.float32(R), out))
    o = [int(v) for v in out.get()]
    STATS.update(tests=o[0], lane_slots=o[1], gathered=o[2], interior=o[3], tile_slots=o[4], quarter_slots=o[5],
                 most_tests=o[6], tests_255=sum(o[16:32]), tests_1023=sum(o[18:32]),
                 tests_4095=sum(o[20:32]))


def _near_bricks(active, nb, smooth_iterations, cp):
    """The tiles step 5 of ``_bricks_gpu`` smooths (uint8 over the tiles): those of the 3 × 3 × 3 around
    an active one (the others stay +band), or every tile past min(TILE) steps; None without smoothing."""
    if not smooth_iterations:
        return None
    near = cp.empty_like(active)
    if smooth_iterations > min(TILE):  # changes may spread past the next tile: smooth every tile
        near.fill(1)
    else:
        _K.launch("dilate_bricks", active.size, (active, *(np.int32(b) for b in nb), near))
    return near


def _bricks_gpu(pos, radii, spec, R, band, smooth_iterations, walls=None, reach=0.0, interior=None, host=None):
    """The "bricks" GPU level set (module text) of the particles *pos* (float32 (N, 3) on
    the device) over *spec*'s nodes: with *walls* (the box's GridSpec) closed as
    ``closed_level_set`` — mirror images of the particles within *reach* of a wall, the
    level set, smoothing, the box cut; without, ``particle_level_set``'s. *interior*:
    (full, reach) of ``surface_interior``'s skip, from the binning's counts, or None. *host*: a
    ``surface_overlap.HostSink`` — with the lean gather and one smoothing step, φ is copied into its
    array chunk by chunk while the rest is made (``surface_overlap``), and the sink marked filled."""
    import cupy as cp

    nx, ny, nz = spec.shape
    n = int(pos.shape[0])
    scalar = isinstance(radii, (float, np.floating))
    backend.ensure_fits(estimate_gpu_bytes(n, spec, R), "the liquid surface level set", xp=cp)
    (cox, coy, coz), edge, (cx, cy, cz) = _cell_grid(spec, R)
    n_cells = cx * cy * cz
    if n_cells >= 2 ** 31 - 1:
        raise InputError("the surfacing grid is too large for its kernel radius (over 2³¹ binning cells); "
                         "use a larger kernel radius or a smaller grid")
    f32, i32 = np.float32, np.int32
    if walls is not None:
        lo = [f32(o) for o in walls.origin]
        hi = [f32(o + c * walls.voxel_size) for o, c in zip(walls.origin, walls.shape)]
    else:
        lo, hi = [f32(0)] * 3, [f32(0)] * 3
    wall_args = (i32(walls is not None), *lo, *hi, f32(reach))
    cell_args = (f32(cox), f32(coy), f32(coz), f32(1.0 / edge), i32(cx), i32(cy), i32(cz))
    lean = level_set_mode() == "lean" and COMBOS * n <= 2 ** 32  # 32-bit tags (module text)
    way = _place_way(lean)  # "lean": this module's kernels; else surface_place's (the tags placed alone)
    _compile_crowded_order(cp, cp.uint32 if lean else cp.int64)  # its kernels now, not at a later frame
    _mark("set-up")
    # 1. Count the particles and their images per binning cell; the non-finite ones.
    counts = cp.zeros(n_cells + lean, cp.int32)  # lean: one more, the scan's total
    bad = cp.zeros(1, cp.int32)
    binning = _K_LEAN if lean else _K
    _count(way, binning, pos, n, wall_args, cell_args, counts, bad)
    _mark("count")
    # 2. Cell starts: an exclusive scan; the one host read (points, non-finite, fullest cell).
    if lean:  # the sparse solver's two-launch scan, which gives the fullest cell too
        bounds = cp.zeros(2, cp.uint32)
        starts = sparse_gpu.scan_counts(cp, counts, n_cells, bounds)
        fullest = bounds[1:].view(cp.int32)
    else:
        starts = cp.empty(n_cells + 1, cp.int32)
        starts[0] = 0
        starts[1:] = cp.cumsum(counts, dtype=cp.int32)
        fullest = counts.max(keepdims=True)
    # the interior flags from the counts (before they become fill), queued before the read: the device
    # runs them while the host waits (h17e: ~0–0.06 ms a frame)
    interior_flags, skip = _interior_cells(counts, (cx, cy, cz), interior)
    points, bad, fullest = (int(v) for v in cp.concatenate([starts[-1:], bad, fullest]).get())
    _mark("scan + read")
    if STATS is not None:
        STATS.update(points=points, fullest=fullest, cells=n_cells, nodes=spec.voxel_count)
    if bad:
        raise _non_finite(bad)
    # 3. Place them in their cells (any order within a cell), then each cell in tag order.
    counts.fill(0)
    radii = cp.full(1, radii, cp.float32) if scalar else cp.ascontiguousarray(radii, dtype=cp.float32)
    packed, tags = _place(way, binning, pos, radii, scalar, n, wall_args, cell_args, starts, counts, points, cp)
    del counts
    _mark("place")
    packed = _order_cells(way, binning, packed, tags, pos, radii, scalar, n, wall_args, cell_args, starts, points,
                          fullest, cp)
    del tags
    _mark("order cells")
    # 4. The node bricks some point may reach; the gather there, +band elsewhere.
    nb = tuple(-(-a // t) for a, t in zip((nx, ny, nz), TILE))
    active = cp.empty(int(np.prod(nb)), cp.uint8)
    grid_args = (i32(nx), i32(ny), i32(nz), *(f32(o) for o in spec.origin), f32(spec.voxel_size))
    _K.launch("mark_level_set_bricks", active.size, (starts, *(i32(b) for b in nb), *grid_args, *cell_args, f32(R),
                                                     active))
    _mark("mark bricks")
    phi = cp.empty(spec.array_shape, dtype=cp.float32)
    near = _near_bricks(active, nb, smooth_iterations, cp)

    def smooth_args(cut):  # smooth_level_set_bricks' arguments between (phi, near) and its output
        return (i32(nb[0]), i32(nb[1]), i32(nx), i32(ny), i32(nz), SMOOTH_STEP,
                f32(FLAT_GRADIENT * spec.voxel_size) ** 2, f32(band), i32(cut), *grid_args[3:], *lo, *hi)

    if phi.size:
        gather, name = _gather_kernel(R)
        args = (packed, starts, active, interior_flags, skip, i32(nb[0]), i32(nb[1]), *grid_args, *cell_args, f32(R),
                f32(band), phi)
        kernel, split = _gather_launch(name)
        if host is not None and name == "particle_level_set_lean" and smooth_iterations == 1:
            from .surface_overlap import gather_smooth_copy  # φ to the host chunk by chunk as it is made

            phi = gather_smooth_copy(host, phi, gather, args, split, near, nb, smooth_args(walls is not None), _K,
                                     cp, kernel if kernel != name else "particle_level_set_lean_split")
            _mark("gather + smooth + copy")
            return phi
        if kernel != name:  # a tile over *split* blocks: the same nodes, the same bits
            args = (*args, i32(split), np.int64(0))
        gather.launch_grid(kernel, (active.size * split,), (int(np.prod(TILE)) // split,), args)
    _mark("gather")
    if phi.size and STATS is not None and os.environ.get("VOXFX_LEVEL_SET_GATHER_WORK", "0") == "1":
        _gather_work(active, starts, interior_flags, skip, nb, grid_args, cell_args, R, cp)  # benches
    del packed, starts, interior_flags
    args = None  # it held the packed points through the smoothing (+9.2 MiB at the 1M spreading liquid's frames 0-3)
    # 5. Smoothing, double-buffered, over the bricks near the active ones (the others stay
    # +band); the walls' cut fused into its last step (or alone without smoothing).
    if smooth_iterations:
        other = cp.empty_like(phi)
        for step in range(smooth_iterations):
            cut = walls is not None and step == smooth_iterations - 1
            _K.launch_grid("smooth_level_set_bricks", (active.size,), (int(np.prod(TILE)),), (
                phi, near, *smooth_args(cut), other))
            phi, other = other, phi
    elif walls is not None:
        _K.launch("cut_by_box", spec.voxel_count, (phi, *grid_args, *lo, *hi, f32(band)))
    _mark("smooth + box cut")
    return phi


# The binning's steps (surface_binning, moved out in session 23), under their names here too
from .surface_binning import (CROWDED_LAYOUTS, _compile_crowded_order, _count, _order_cells,  # noqa: E402, F401
                              _order_crowded, _place, _place_way)
