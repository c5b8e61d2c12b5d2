"""The sparse FLIP solver's G2P + advection launches (``sparse_transfer.g2p_advect`` on
the GPU): one thread per particle, mirroring the NumPy reference term by term
(``--fmad=false``), every kernel the same bits. P2G, the bins whose order G2P may take,
and the brick index are ``sparse_gpu.py``'s.

G2P + advection (``flip_sparse_g2p.cu``) runs over the particles in P2G's sorted order
when the bins are still those of the positions (``VOXFX_SPARSE_G2P=cell``, the default;
``input``: in the particles' own order): neighbouring threads read neighbouring faces.
Two kernels, the same bits (``VOXFX_SPARSE_G2P_KERNEL``): ``bricks`` (the default before
``block``, below) takes each sample's corners from the home brick's table, 1–8 distinct
bricks a sample, in 32-bit index arithmetic, the home brick from the brick index; ``walk`` is the earlier kernel
(7 table-read steps a sample from the bin's brick). 8M particles, H200: 0.93 → 0.87 ms
at the fourth substep, 1.52 → 1.26 ms at the 120th (the liquid spread over 8.8k bricks);
in the particles' own order the bricks kernel is faster early (0.79 ms) and slower once
the liquid mixes (1.65 ms), so cell stays the default. A staged kernel (a brick's faces in
shared memory) and fewer registers for ``bricks`` were measured no faster (bench/RESULTS.md).

``lean`` (``flip_sparse_g2p_lean.cu``, helper i24p; its notes give the H100 figures): the same
bits, slower at the end of the substep and with APIC, faster time-centred (1.35 against 1.67 ms
at 8M).

``block`` (``flip_sparse_g2p_block.cu``, helpers i24g and i24s2; ``VOXFX_SPARSE_G2P_KERNEL=auto``,
the default, runs it, one entry a variant: ``G2P_BLOCK_ENTRIES``): a sample's corners for all
three components from one block of 1–8 bricks read once, no walk test where the block's bricks
are active; the same bits. H100, 8M: 0.890 → 0.498 ms at the end of the substep, 1.669 → 0.591
time-centred, 1.439 → 1.056 with APIC (bricks → block; its notes and bench/RESULTS.md). Its
corners (``VOXFX_SPARSE_G2P_CORNERS``, helper i24g3): ``select`` picks each corner's brick,
``pairs`` loads a component's corners as two cells and their neighbours where the warp's samples
cross no brick along y and z; the same bits; ``auto`` (the default) takes pairs with APIC at the
end of the substep (1.055 → 1.002 ms), select elsewhere (no gain: ``block_corners``); ``table`` (helper
h21g) takes every corner's brick from the particle's 2 × 2 × 2 bricks kept in shared memory, read once a
particle for both samples: 0.502 → 0.451 ms at the end of the substep and 0.595 → 0.551 time-centred (H100,
8M, 4 × 256; 0.479 → 0.432 and 0.576 → 0.537 at 8 × 128); auto's with APIC at the end of the substep;
time-centred APIC takes pairs (helper h21i, ``G2P_CORNERS``' notes). ``tablew`` (helper s22c): the same table
with each corner's code split (an OR, a shared load and an add a corner), auto's without APIC: 0.4256 → 0.4225
ms at the end of the substep, 0.5374 → 0.5312 time-centred (H100, 8M, 8 × 128). Its launch shape
(``VOXFX_SPARSE_G2P_BLOCK_SHAPE``, helper h21d): 8 blocks of 128 (the default since helper h21i) or 4 of 256,
the same registers and bits; with auto's corners 8 × 128 is 2–6% faster in every variant (H100, 8M;
``G2P_BLOCK_SHAPES``' notes).
"""

from __future__ import annotations

from ..grid import mac
from ..grid.launch import Kernels
from ..settings import env_choice
from .particles import PUSH_EPSILON
from .sparse_gpu import _I32, _I64, _dims, _frame, _keep, _topo, brick_index

G2P_ORDERS = ("cell", "input")
# VOXFX_SPARSE_G2P_KERNEL (all the same bits): "auto" (the default: block, as measured; module
# notes), "block" (flip_sparse_g2p_block.cu),
# "lean" (flip_sparse_g2p_lean.cu), "bricks" and "walk" (flip_sparse_g2p.cu's g2p_advect_bricks and
# g2p_advect_sparse)
G2P_KERNELS = ("auto", "block", "lean", "bricks", "walk")
G2P_THREADS = 512  # a block of G2P: 2–4% faster than 256 at 8M (H200, bench/flip_sparse_g2p.py), the same bits
G2P = Kernels("flip_sparse_g2p.cu", ("--fmad=false",), G2P_THREADS,
              defines={**mac.CELL_TYPES, "PUSH_EPSILON": PUSH_EPSILON})
G2P_LEAN_MIN_BLOCKS = 2  # flip_sparse_g2p_lean.cu's __launch_bounds__: blocks of G2P_THREADS an SM
G2P_LEAN = Kernels("flip_sparse_g2p_lean.cu", ("--fmad=false",), G2P_THREADS,
                   defines={**mac.CELL_TYPES, "PUSH_EPSILON": PUSH_EPSILON, "LEAN_THREADS": G2P_THREADS,
                            "LEAN_MIN_BLOCKS": G2P_LEAN_MIN_BLOCKS})
# flip_sparse_g2p_block.cu's __launch_bounds__: G2P_BLOCK_MIN_BLOCKS blocks of G2P_BLOCK_THREADS an SM. 4 of 256
# (64 registers, 92 B of spills, one entry then): 0.606 ms at 8M; 2 of 512: 0.651; 1 of 512 (96 registers, no
# spills): 0.961 (H100, one call, the same bits; its notes). 8 of 128 (the same 64 registers and spills as 4 of
# 256) since helper h21i: faster in every variant (G2P_BLOCK_SHAPES' notes)
G2P_BLOCK_MIN_BLOCKS = 8
G2P_BLOCK_THREADS = 128
# VOXFX_SPARSE_G2P_CORNERS (the block kernel's corners, the same bits; helper i24g3): "pairs" where no lane
# of a warp crosses a brick along y and z, each component's 8 corners as two cells and their neighbours at
# constant offsets (2 brick picks and 2 addresses a field instead of 8), and the home brick's index entry in
# 32-bit integers; "select": every corner's brick picked (the kernel before); "auto" (the default): pairs
# with APIC at the end of the substep, select otherwise. H100, 8M after 4 substeps, kernel alone (select →
# pairs): end of substep 0.501 → 0.499 ms (ncu: 364.3M → 344.0M warp instructions, 598 → 577 µs at ncu's
# clocks), time-centred 0.593 → 0.597, APIC 1.055 → 1.002; whole substeps alternating: G2P + advection
# 0.543 → 0.554 and 0.522 → 0.528 ms (two processes): no gain where the 8M row runs (block_corners). "table"
# (helper h21g): the 2 × 2 × 2 bricks around the particle's home cell kept in shared memory (a word a thread a
# brick, read once for both samples), each corner's pool index one shared load and two adds (its notes); the same
# bits. H100 80GB HBM3, 8M after 4 substeps, kernel alone, the ways in turn, select → table: end of substep 0.502 →
# 0.451 ms (4x256), 0.479 → 0.432 (8x128); time-centred 0.595 → 0.551, 0.576 → 0.537
# (bench/flip_sparse_g2p_project.py; SASS ~1,500 → ~1,280 instructions a particle). With APIC (helper h21i, the
# same bench with --apic, one process, medians of 7, H100 80GB HBM3), select / pairs / table, ms, at 8x128 (4x256):
# end of substep 1.020 / 0.949 / **0.937** (1.057 / 1.002 / **0.996**), time-centred 1.064 / **1.001** / 1.064
# (1.099 / **1.021** / 1.102): auto is table but for time-centred APIC, which takes pairs.
# "tablew" (helper s22c; kernels/cuda/include/voxfx_g2p_block_wtable.cuh): the table (32 B a thread, its layout) with
# the bricks' bases slot · 512 and each corner's code split in a brick part (the entry's address: one three-input OR
# a corner) and a local part (the pool index: one three-input add a corner, the (y, z) parts paired), and the closed
# lattices' upper-corner flag once a launch (voxfx_g2p_block_corners.cuh's BLOCK_UP_UNIFORM); the same cells, so the
# same bits. SASS (nvcc 13.0, sm_90, 8x128; a closed domain's fast path, instructions a particle, table → tablew):
# end of substep 1,196 → 1,160, time-centred 1,469 → 1,395, APIC 1,268 → 1,238, time-centred APIC 1,544 → 1,479;
# spills 0 / 24 / 24 / 40 B → 0 / 8 / 32 / 48 B (end / centred / APIC / centred APIC). H100 80GB HBM3 (driver
# 580.159.04), the 8M dam break after 4 substeps, the kernel alone (bench/flip_sparse_g2p_project.py --apic, 8x128,
# medians of 9, the same bits), table (the default's, h21g's code time-centred) → tablew: end of substep 0.4256 →
# 0.4225 ms, time-centred 0.5374 → 0.5312, APIC 0.9371 → 0.9582, time-centred APIC 1.0656 → 1.0603 (pairs, auto's
# there, 1.001 in h21i's call); ncu (one launch each, end of substep): 300.5M → 291.5M warp instructions, issue
# active 74.4 → 72.8%, L1 hit 80.6 → 80.4%. An x-pair table (one 64-bit shared load for a component's two corners
# along x, 12 pairs, 96 B a thread; 1,124 instructions at the end of the substep) measured slower (0.4291 / 0.5536
# / 0.9790 / 1.0428 ms in the same call): its 96 KiB of shared memory an SM raise the carve-out 102 → 135 KiB, the
# L1 hit rate 80.6 → 78.3%, long-scoreboard stalls +13% (ncu); removed (branch s22c's first commit). auto takes
# tablew without APIC since s22c (the 8M row, the ways alternating in one process, both orders: G2P + advection
# 0.526 → 0.524 and 0.539 → 0.534 ms), table with APIC at the end of the substep (tablew +2.3% there).
G2P_CORNERS = ("auto", "pairs", "select", "table", "tablew")


def g2p_corners(corners=None) -> str:
    """The block kernel's corners: *corners*, else ``VOXFX_SPARSE_G2P_CORNERS``, else auto."""
    return env_choice("VOXFX_SPARSE_G2P_CORNERS", G2P_CORNERS, corners)


def block_corners(centred: bool, apic: bool, corners=None) -> str:
    """The block kernel's corners for the variant: ``g2p_corners(corners)``, auto being the fastest measured
    (``G2P_CORNERS``' notes): tablew without APIC (helper s22c), table with APIC at the end of the substep
    (helpers h21g, h21i), pairs for time-centred APIC."""
    way = g2p_corners(corners)
    if way == "auto":
        way = ("pairs" if centred else "table") if apic else "tablew"
    return way


# VOXFX_SPARSE_G2P_TABLE_CODE (helper h21n; "centred" the default since session 22): the table corners' per-axis
# code (voxfx_g2p_block_table.cuh's table_axis_code) — "shift" (h21i's k << 3d + (k & 8)·c in every
# entry) or "centred" (h21g's earlier ((k & 8) << (6 + d)) | ((k & 7) << 3d) in the time-centred entries,
# FLIP and APIC: flip_sparse_g2p_block.cu's BLOCK_TABLE_OR bits 4 and 8). The same values (48 cases,
# tests/unit/test_cuda_g2p_table_host.py), so the same bits. h21i, H100 80GB HBM3, the kernel alone, 8 × 128:
# h21i's code 0.4314 → 0.4251 ms at the end of the substep but 0.5369 → 0.5399 time-centred (+0.6%),
# 1.0644 → 1.0638 time-centred APIC: "centred" would keep h21i's gain where it was measured and h21g's form
# where it was faster. Session 22, H100 80GB HBM3, 8 × 128, the kernel alone (medians of 7), shift → centred: end
# of substep 0.4267 → 0.4259 ms, time-centred 0.5408 → 0.5375, APIC end 0.9372 both, the same bits each. Since s22c
# auto takes tablew (no per-axis code) without APIC, so this switch acts where the corners are table by name.
G2P_TABLE_CODES = ("shift", "centred")
G2P_TABLE_OR = {"shift": 0, "centred": 4 | 8}  # BLOCK_TABLE_OR: 1 end, 2 end APIC, 4 centred, 8 centred APIC


def g2p_table_code(code=None) -> str:
    """The table corners' per-axis code: *code*, else ``VOXFX_SPARSE_G2P_TABLE_CODE``, else "centred"."""
    return env_choice("VOXFX_SPARSE_G2P_TABLE_CODE", G2P_TABLE_CODES, code, default="centred")


def g2p_block_module(min_blocks=None, threads=None, corners=None, table_or=0, marks=False) -> Kernels:
    """flip_sparse_g2p_block.cu built for *min_blocks* blocks of *threads* an SM (defaults
    ``G2P_BLOCK_MIN_BLOCKS``, ``G2P_BLOCK_THREADS``; the bench builds others to time them) with
    the corners *corners* (pairs, table or tablew, else select); with table corners *table_or* the entries
    taking h21g's per-axis code (BLOCK_TABLE_OR, ``G2P_TABLE_OR``; 0: none, no define); with *marks* the
    next substep's topology marks written too (G2P_MARKS=1, ``sparse_g2p_marks``; else no define)."""
    m = G2P_BLOCK_MIN_BLOCKS if min_blocks is None else int(min_blocks)
    t = G2P_BLOCK_THREADS if threads is None else int(threads)
    pairs, table = int(corners == "pairs"), {"table": 1, "tablew": 2}.get(corners, 0)
    table_or = int(table_or) if table == 1 else 0
    key = (m, t, pairs, table, table_or, bool(marks))
    if key not in _G2P_BLOCK:
        defines = {**mac.CELL_TYPES, "PUSH_EPSILON": PUSH_EPSILON, "BLOCK_THREADS": t, "BLOCK_MIN_BLOCKS": m,
                   "BLOCK_PAIRS": pairs, "BLOCK_TABLE": table}
        if table_or:
            defines["BLOCK_TABLE_OR"] = table_or
        if marks:
            defines["G2P_MARKS"] = 1
        _G2P_BLOCK[key] = Kernels("flip_sparse_g2p_block.cu", ("--fmad=false",), t, defines=defines)
    return _G2P_BLOCK[key]


_G2P_BLOCK: dict = {}
G2P_BLOCK = g2p_block_module(corners="select")
G2P_BLOCK_PAIRS = g2p_block_module(corners="pairs")
G2P_BLOCK_TABLE = g2p_block_module(corners="table")
G2P_BLOCK_TABLE_CENTRED = g2p_block_module(corners="table", table_or=G2P_TABLE_OR["centred"])  # the default's
G2P_BLOCK_TABLEW = g2p_block_module(corners="tablew")  # helper s22c's split codes (G2P_CORNERS' notes)
G2P_BLOCK_TABLEW_MARKS = g2p_block_module(corners="tablew", marks=True)  # auto's with VOXFX_SPARSE_G2P_MARKS=1
# flip_sparse_g2p_block.cu's entries, one a variant (the same arguments), keyed by (time-centred, APIC): each compiled
# for its own registers (sm_90, 4 blocks of 256: 64 registers with 0, 0, 8, 36 B of spills against one entry's 92 B).
# H100, 8M, one call, one entry → per variant: 0.604 → 0.498 ms (end of substep), 0.716 → 0.591 (time-centred),
# 1.157 → 1.056 (APIC), the same bits (helper i24s2; its notes)
G2P_BLOCK_ENTRIES = {(False, False): "g2p_advect_block_end", (False, True): "g2p_advect_block_end_apic",
                     (True, False): "g2p_advect_block_centred", (True, True): "g2p_advect_block_centred_apic"}


# VOXFX_SPARSE_G2P_BLOCK_SHAPE (helper h21d; read at each G2P): the block kernel's (blocks an SM, threads) for its
# __launch_bounds__ and its launch — "8x128" (the default since helper h21i: G2P_BLOCK_MIN_BLOCKS of
# G2P_BLOCK_THREADS, which the benches set), "4x256", "16x64", "32x32": 1,024 threads an SM each way, 64 registers
# (sm_90, nvcc 13.0 ptxas: the same spills, 0 / 0 / 8 / 36 B for end / end APIC / centred / centred APIC), the
# same code and bits; a block's
# registers go back when its last warp ends, so smaller blocks wait less on the warps of a slow path. H100 80GB
# HBM3 (driver 580.159.04), 8M after 4 substeps (3,258 bricks), the kernel alone, the shapes in turn
# (bench/flip_sparse_g2p_project.py; two calls, medians of 9 and 7), end of substep / time-centred, ms:
# 4x256 0.502 / 0.594, 8x128 **0.480 / 0.575**, 16x64 0.484 / 0.583, 32x32 0.489 / 0.595; 7x128 (72 registers)
# 0.498 / 0.574, 6x128 (80) 0.510 / 0.588, 3x256 (80) 0.552 / 0.625, 5x256 (48, 132 B of spills) 0.548 / 0.679.
# The 8M row (separate processes alternating, with VOXFX_SPARSE_PROJECT_FLUID=1): G2P + advection 0.53 / 0.53
# (4x256) against 0.52 / 0.50 (8x128). ≤ 0.4 ms needs fewer instructions a particle, not another shape
# (flip_sparse_g2p_block.cu's notes). With the table corners and APIC (helper h21i, one process, medians of 7, H100
# 80GB HBM3), auto's corners, 4x256 → 8x128: end of substep 0.443 → 0.425 ms, time-centred 0.555 → 0.540, APIC
# 0.996 → 0.937, time-centred APIC (pairs) 1.021 → 1.001; select and table faster at 8x128 in all four, pairs
# with APIC (without it 0.500 → 0.501 and 0.599 → 0.603, not auto's there): 8x128 the default since.
G2P_BLOCK_SHAPES = ("8x128", "4x256", "16x64", "32x32")


def g2p_block_shape(shape=None) -> str:
    """The block kernel's launch shape: *shape*, else ``VOXFX_SPARSE_G2P_BLOCK_SHAPE``, else 8x128."""
    return env_choice("VOXFX_SPARSE_G2P_BLOCK_SHAPE", G2P_BLOCK_SHAPES, shape)


def g2p_block_entry(centred: bool, apic: bool, shape=None, marks=False) -> tuple:
    """(module, entry) of the block G2P kernel for the variant (its corners: ``block_corners``), built
    for ``g2p_block_shape(shape)`` (the first, 8x128: ``G2P_BLOCK_MIN_BLOCKS`` and ``G2P_BLOCK_THREADS``);
    *marks*: the module writing the topology marks too (``sparse_g2p_marks``)."""
    corners = block_corners(bool(centred), bool(apic))
    way = g2p_block_shape(shape)
    blocks, threads = (None, None) if way == G2P_BLOCK_SHAPES[0] else map(int, way.split("x"))
    table_or = G2P_TABLE_OR[g2p_table_code()] if corners == "table" else 0
    return (g2p_block_module(blocks, threads, corners, table_or, marks),
            G2P_BLOCK_ENTRIES[(bool(centred), bool(apic))])

def _dummy(grid):
    """A 1-element float32 device array for the kernels' unused pointers, kept on the grid (a
    ``zeros(1)`` each call was an allocation and a memset in the stage)."""
    kept = getattr(grid, "_g2p_dummy", None)
    if kept is None:
        kept = grid.xp.zeros(1, grid.xp.float32)
        _keep(grid, "_g2p_dummy", kept)
    return kept


def g2p_order(order=None) -> str:
    """The particle order of G2P: *order*, else ``VOXFX_SPARSE_G2P``, else cell (sorted)."""
    return env_choice("VOXFX_SPARSE_G2P", G2P_ORDERS, order)


def g2p_kernel(kernel=None) -> str:
    """The G2P kernel: *kernel*, else ``VOXFX_SPARSE_G2P_KERNEL``, else auto (all the same bits)."""
    return env_choice("VOXFX_SPARSE_G2P_KERNEL", G2P_KERNELS, kernel)


def g2p_advect(grid, old, pos, vel, flip, pic, dt, half_dt, c, order=None, kernel=None, before=None,
               marks=None) -> None:
    """``sparse_transfer.g2p_advect`` in one kernel (float32 scalars given; ``g2p_kernel``),
    in the bins' order where ``g2p_order(order)`` says cell and the bins are *pos*'s;
    *before*: u_n's faces (the time-centred advection); *marks*: a ``sparse_g2p_marks.Marks`` whose ``args``
    (occupied, missed word, speed2, speed code, most) the block kernel also writes (the next substep's
    mark_occupied), its ``written`` set once launched."""
    bins, grid.bins = grid.bins, None  # the particles move: the bins are stale
    sorted_ = g2p_order(order) == "cell" and bins is not None and bins[0] is pos and bins[2].shape[0] == pos.shape[0]
    n = int(pos.shape[0])
    keys, slots, nk = _topo(grid)
    apic = c is not None
    dummy = c if apic else _dummy(grid)
    centred = (_I32(before is not None), *(before if before is not None else (dummy, dummy, dummy)))
    name = g2p_kernel(kernel)
    if name == "auto" or marks is not None:  # the faster kernel (module notes): block; the marks are its
        name = "block"
    if name != "walk":  # the same arguments
        module, entry = (g2p_block_entry(before is not None, apic, marks=marks is not None) if name == "block" else
                         (G2P_LEAN, "g2p_advect_lean") if name == "lean" else (G2P, "g2p_advect_bricks"))
        module.launch(entry, n, (pos, vel, dummy, _I64(n), _I32(apic), *grid.faces(), *old, grid["solid"], keys,
                                 slots, nk, grid.brick_nbr, *brick_index(grid), _I32(grid.closed), *_dims(grid),
                                 *_frame(grid), flip, pic, dt, half_dt, bins[2] if sorted_ else dummy, _I32(sorted_),
                                 *centred, *(marks.args if marks is not None else ())))
        if marks is not None:
            marks.written = True
        return
    order_cells = bins[2:4] if sorted_ else (dummy, dummy)
    G2P.launch("g2p_advect_sparse", n, (pos, vel, dummy, _I64(n), _I32(apic), *grid.faces(), *old, grid["solid"],
                                        keys, slots, nk, grid.brick_nbr, _I32(grid.closed), *_dims(grid),
                                        *_frame(grid), flip, pic, dt, half_dt, *order_cells, _I64(grid.size),
                                        _I32(sorted_), *centred))
