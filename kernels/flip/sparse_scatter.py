"""The sparse FLIP solver's P2G scatter (``kernels/cuda/flip_sparse_scatter.cu``; the
default of ``sparse_gpu.gather_mode``, whose module text gives the measurements): after
``sparse_gpu.bin_particles``, a bound on |q| and on particles a cell fixes the 64-bit
fixed-point scales on the device, one block per brick adds each particle's 24 (component,
face) terms with shared-memory integer atomics and then into the owning bricks' global
sums, and a pass per cell divides. Integer sums: the same bits in any particle order.

The shared atomics' order (``VOXFX_SPARSE_SCATTER_ATOMICS``, ``atomics_mode``): ``paired`` (the
default) adds a term's Σw·q and Σw low words before either high word (two atomics in flight
before a carry is waited on), ``serial`` the earlier order; the same sums. H100 80GB HBM3, 8M
dam break after 4 substeps (helper i24p, ``bench/flip_sparse_transfers_ab.py``, one process
alternating, medians of 7): the whole P2G 0.789 → 0.776 ms; ncu, one launch each: the scatter
562 / 559 → 552 µs. Its profile: 302M warp instructions (~1,200 a warp of particles), IPC
2.67, the XU pipe 34% busy (the 64-bit float → integer conversions), 79M shared-atomic
wavefronts with 55M bank conflicts, 47% occupancy (64 registers, 43 KB of shared memory a
block): issue-bound, as G2P (``flip_sparse_g2p_lean.cu``'s notes).

The per-particle code (``VOXFX_SPARSE_SCATTER_KERNEL``, ``kernel_mode``; helper i24q2): ``lean``
(the default; ``scatter_particle_lean``) or ``classic`` (``scatter_particle``), the same integer
sums, so the same faces and masks bit for bit (tests/unit/test_cuda_sparse_scatter_host.py,
tests/gpu/test_flip_sparse_scatter_lean_gpu.py: sums, bounds, faces, masks and 12-substep dam
breaks). Lean takes a term's node index from three per-axis parts, shares the weight's first
product between two terms, scales a FLIP term as w·(q·2^k_q) (one product; the same bits: the
kernel's notes), takes the carries by add.cc / addc, adds weight-0 terms (they add 0) and tests
the window and face lattice once a particle. H100 80GB HBM3 (driver 580.159.04), 8M dam break
after 4 substeps, 3,198 bricks (``bench/flip_sparse_scatter_lean.py``, call 1): SASS 2,792 →
3,112 static instructions (the checked and unchecked terms both unrolled), no spills at 64
registers; ncu, one launch each: 304M → 206M warp instructions, IPC 2.68 → 1.95, 567 → 533 µs,
L1/TEX (the shared atomics) 86 → 95% of peak: now bound by the shared-memory atomics, not issue;
events (medians of 9): the brick scatter 0.502 → 0.470 ms (lean at spread 4: 0.490, 16: 0.493,
3 blocks an SM: 0.474), whole P2G 0.832 → 0.813 ms; ``bench/flip_sparse.py --row 8m --ab
VOXFX_SPARSE_SCATTER_KERNEL=lean --ab ''`` (classic then the default): bin+gather 0.852 → 0.839,
the P2G stage 1.016 → 1.007 ms. Call 2 (same card): the brick scatter 0.485 → 0.464 ms, whole P2G
0.776 → 0.757; the row, classic against the default: bin+gather 0.829 → 0.804, P2G 0.993 → 0.969
ms (lean against the default, the noise: 0.784 / 0.773, 0.952 / 0.935); ncu: 80.2M → 83.2M
shared-atomic wavefronts (55.5M → 56.0M bank conflicts; 24.7M → 27.1M atomic instructions:
warps with checked and unchecked particles run both paths), 55M global-load sectors for 2.2M
requests (the particles read through the order: 4 of a sector's 32 bytes used). The other P2G
launches in call 1: the grouped count 0.167, the scan 0.074, place 0.063, sums zeroed 0.036, the
division 0.054, classify 0.030, extrapolate 0.118 ms (two launches of 36 µs under ncu; the count
122 µs at IPC 1.68, place 52 µs at 68% of memory).

The lean code's slot order (``VOXFX_SPARSE_SCATTER_BANKS``, ``banks_mode``; helper i24q4):
``flip`` (the default; SCATTER_FLIP) takes, on each half-shifted axis, the particle's own cell's
node in the first slot and the other node in the second; ``flat`` the lower node first. With a
spread of 8 and ~8 particles a cell a warp's lanes lie in ~32 different cells; in the flat order a
lane's node is its cell or the one below, at random with its position in the cell, so lanes of
neighbouring cells meet on one address (serialised) or one bank; flipped, every lane's first slot
is its own cell's node (the same offset from each lane's cell). Each node's term is the same
operations whatever its slot: the same integer sums, faces and masks bit for bit (FLIP and APIC;
tests/unit/test_cuda_sparse_scatter_host.py, tests/gpu/test_flip_sparse_scatter_banks_gpu.py).
H100 80GB HBM3 (driver 580.159.04), 8M dam break (``bench/flip_sparse_scatter_banks.py``, call 2,
flat → flip, medians of 9 in turn): after 4 substeps (3,198 bricks) the brick scatter 0.468 →
0.431 ms, whole P2G 0.764 → 0.738 ms; after 16 (3,685 bricks) 0.476 → 0.442, whole P2G 0.780 →
0.751 ms; flip at spread 4: 0.448, 16: 0.476 (8 kept). ncu, one launch each: 83.2M → 75.1M
shared-atomic wavefronts for the same 27.1M atomic instructions, bank conflicts 56.0M → 48.0M,
209.9M → 216.1M warp instructions (3,112 → 3,320 SASS: the slots' selects), 545 → 509 µs.
``bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab VOXFX_SPARSE_SCATTER_BANKS=flat --ab ''``,
three processes: bin+gather 0.830 / 0.823 / 0.840 → 0.810 / 0.818 / 0.846 ms, the P2G stage
1.001 / 0.993 / 1.007 → 0.982 / 0.983 / 1.008 ms (the row's noise is ~0.02 ms).
Measured and not kept (call 1, same card): the flip order with the accumulators in rows whose
banks start 8y apart (word x + 10·(z mod 4) + 40·y + 400·⌊z/4⌋, 3,489 nodes, 55.8 KB of dynamic
shared memory: an 8 × 4 patch of cells on 32 banks): 68.8M wavefronts, 41.7M conflicts, but the
brick scatter 0.445 ms at four blocks an SM (the L1 squeezed out) and 0.432 at three, against
flip's 0.435 and flat's 0.472; whole P2G 0.757 against 0.750 and 0.783; in the row no faster
than flat (P2G 1.229 against 1.227 ms). A bank-conflict model of a full brick (8 jittered
particles a cell: the flat order ~3.2 wavefronts an atomic, flip ~2.8–3.0, measured 3.06 and
2.77) says the rest comes from the second slot (the node above or below the lane's cell, again
at random); only particles sorted by their octant within the brick would reach ~1.

The crowded warps (``VOXFX_SPARSE_SCATTER_CROWD``, helper h17d; measured slower and removed in
session 17's review, bench/RESULTS.md "h17d"): the lanes of a row of 32 particles reaching the same
nodes summed each term by shuffles and one lane a group added it (the same integer sums); after the
splash the brick scatter alone 1.264 → 1.386 ms (groups from 4 lanes), the P2G stage 2.419 → 2.558:
same-address passes are not what slows the scatter after the splash.

The split bricks (``VOXFX_SPARSE_SCATTER_SPLIT``, ``split_mode``; helper h17d; "on" the default since
session 17): the brick scatter's grid (slots, ``SPLIT_BLOCKS``), a brick of m particles over
min(``SPLIT_BLOCKS``, ⌈m / ``SPLIT_PARTICLES``⌉) blocks, each adding its part's shared sums into the
global ones (the same integer sums; flip_sparse_scatter.cu's SCATTER_SPLIT). After the splash the
scatter is 3.2× slower for the same particles and a few bricks may hold tens of thousands of them,
one block each: the lever the crowded warps were not (bench/RESULTS.md "h17d"). Measured (H100 80GB
HBM3, session 17 call 3, 8M dam break; the heaviest brick 28,663 particles after 12 Fast frames): the
brick scatter alone 0.401 → 0.410 ms at frame 0, **1.195 → 0.903** after the splash (≥ 2048 a block
0.945, ≥ 8192 over ≤ 32 blocks 1.085, ≥ 1024 1.195); the stage 2.39 → 2.04 ms of device; 8M Fast
frames 6–11 in separate processes (off, on, off, on): P2G device 29.7 / 24.5 / 30.5 / 24.2 ms, the
user frames 200 / 184 / 210 / 181 ms; the same sums (GPU tests).

The sums re-zeroed by their reader (``VOXFX_SPARSE_SCATTER_REZERO``, ``rezero_mode``; helper h21n;
no faster on an H100, session 22's 8M row A/B: P2G 0.995 → 1.032 ms): "1" builds the division
(p2g_scatter_finish, _cells, _live; SCATTER_REZERO) to
zero each sum it read with Σw ≠ 0, so the sums are all zero after it and ``sparse_gpu.particles_to_grid``
keeps them on the grid between P2Gs (``KeptSums``): the zeroing launch (the memset, or
p2g_zero_live_sums with the idle bricks' flags) goes. Why all zero: the brick scatter adds only to an
occupied brick's faces and its one-face halo — live bricks, all of which every division reads (the
live one skips only idle bricks, which no term reaches) —, and a sum with Σw = 0 had no term (w > 0
adds ≥ 1), so Σw·q is 0 too. A new pool size (growth) takes a new buffer, zeroed once; a division that
does not zero (the first ring's, which reads its neighbours' sums: p2g_scatter_finish_ring keeps its
read-only sums) or a scatter never divided (an exception between the two) leaves the buffer marked
dirty, and the next P2G zeroes it whole. The same faces, masks and types as "0" (host harness
tests/unit/test_cuda_sparse_scatter_rezero_host.py, the GPU file test_flip_sparse_scatter_rezero_gpu.py).
H100 8M (h21c's profile, bench/RESULTS.md "h21c"): the zeroing launch is 0.026–0.027 ms of a 0.81 ms
stage; the division now writes 16 B a face with a term. The buffer stays allocated between P2Gs (48 B
a pool cell, ~79 MB at 1.64M cells: the pool's peak may grow, as h21c's kept sums did, +33 MiB).

``launch`` is ``launch_sums`` (the sums zeroed, the bounds unless given, the brick scatter) then
``launch_finish`` (the division, with the cell types where asked: p2g_scatter_finish_cells);
``sparse_gpu.particles_to_grid`` allocates P2G's outputs between the two, while the scatter runs
(helper i24p8; ``sparse_gpu``'s notes have the stage's launches and times)."""

from __future__ import annotations

import numpy as np

from ..grid import mac
from ..grid.launch import THREADS, Kernels
from ..settings import env_choice

# the cell types' defines: p2g_scatter_finish_cells writes them (sparse_gpu.p2g_cells_mode)
SCATTER = Kernels("flip_sparse_scatter.cu", ("--fmad=false",), THREADS, defines=mac.CELL_TYPES)
CELLS = 512
SCATTER_THREADS = 256  # threads a brick (flip_sparse_scatter.cu's SCATTER_THREADS at most)
SCATTER_SPREAD = 8  # a warp's lanes take particles this far apart (flip_sparse_scatter.cu)
SCATTER_MIN_BLOCKS = 4  # blocks an SM should hold (flip_sparse_scatter.cu's __launch_bounds__)
BOUND_BLOCKS = 1024  # scatter_bounds: blocks of its grid-stride loop
# VOXFX_SPARSE_SCATTER_ATOMICS: "paired" (the default; scatter_add_pair: the Σw·q and Σw low
# words first) or "serial" (scatter_add: a sum's high word right after its low word); the same sums
ATOMICS = ("paired", "serial")
# VOXFX_SPARSE_SCATTER_KERNEL: "lean" (the default; scatter_particle_lean: fewer instructions a
# term, the same integer sums; SCATTER_LEAN, paired atomics) or "classic" (scatter_particle)
KERNEL_MODES = ("lean", "classic")
# VOXFX_SPARSE_SCATTER_BANKS, the lean code's slot order (flip_sparse_scatter.cu's SCATTER_FLIP; helper
# i24q4): "flip" (the default: a half lattice's node in the particle's own cell first, fewer lanes of a
# warp on one shared bank) or "flat" (the nodes in order); the same sums
BANK_MODES = ("flip", "flat")
# VOXFX_SPARSE_SCATTER_SPLIT (helper h17d): "on" (the default since session 17; SCATTER_SPLIT: a brick's
# particles over up to SPLIT_BLOCKS blocks of at least SPLIT_PARTICLES each; the same sums) or "off"
SPLIT_MODES = ("on", "off")
SPLIT_PARTICLES = 4096  # the fewest particles a block of a split brick takes (frame 0 at 8M: ~2,500 a brick)
SPLIT_BLOCKS = 16  # the most blocks a brick takes (the grid's second dimension)
# VOXFX_SPARSE_SCATTER_REZERO (helper h21n; no faster on an H100, session 22): "0" (the default: the sums zeroed
# before each scatter) or "1" (the division zeroes what it read, SCATTER_REZERO; the sums kept zero
# between P2Gs, ``KeptSums``); the same faces, masks and types
REZERO_MODES = ("0", "1")
_BUILDS: dict = {}
_I64, _I32 = np.int64, np.int32


def atomics_mode(mode=None) -> str:
    """The scatter's shared-atomic order: *mode*, else ``VOXFX_SPARSE_SCATTER_ATOMICS``, else ``ATOMICS[0]``."""
    return env_choice("VOXFX_SPARSE_SCATTER_ATOMICS", ATOMICS, mode)


def kernel_mode(mode=None) -> str:
    """The scatter's per-particle code: *mode*, else ``VOXFX_SPARSE_SCATTER_KERNEL``, else ``KERNEL_MODES[0]``."""
    return env_choice("VOXFX_SPARSE_SCATTER_KERNEL", KERNEL_MODES, mode)


def banks_mode(mode=None) -> str:
    """The lean scatter's slot order: *mode*, else ``VOXFX_SPARSE_SCATTER_BANKS``, else ``BANK_MODES[0]``."""
    return env_choice("VOXFX_SPARSE_SCATTER_BANKS", BANK_MODES, mode)


def split_mode(mode=None) -> str:
    """Whether a brick's particles are split over blocks: *mode*, else ``VOXFX_SPARSE_SCATTER_SPLIT``,
    else ``SPLIT_MODES[0]``."""
    return env_choice("VOXFX_SPARSE_SCATTER_SPLIT", SPLIT_MODES, mode)


def rezero_mode(mode=None) -> str:
    """Whether the division re-zeroes the sums: *mode*, else ``VOXFX_SPARSE_SCATTER_REZERO``, else
    ``REZERO_MODES[0]``."""
    return env_choice("VOXFX_SPARSE_SCATTER_REZERO", REZERO_MODES, mode)


class KeptSums:
    """P2G's fixed-point sums kept between P2Gs (``rezero_mode`` "1"): ``take(size)`` gives a buffer of
    6·*size* words that is all zero — the kept one where its size is *size* and the last division
    re-zeroed it (``clean``), else the kept one zeroed (dirty) or a new zeroed one (another size: the
    pool grew) — and marks it dirty until ``launch_finish`` divides with re-zeroing kernels."""

    def __init__(self, xp):
        self.xp, self.acc, self.clean = xp, None, False

    def take(self, size: int):
        if self.acc is None or self.acc.size != 6 * size:
            self.acc = None  # the old buffer let go before the new one is allocated
            self.acc = self.xp.zeros(6 * size, self.xp.uint64)
        elif not self.clean:
            self.acc.fill(0)
        self.clean = False
        return self.acc


def kept_sums(holder, xp):
    """*holder*'s ``KeptSums`` (``_p2g_sums``, made on first use); a new one each time where *holder*
    takes no attributes (then every buffer is new and zeroed)."""
    kept = getattr(holder, "_p2g_sums", None)
    if kept is None or kept.xp is not xp:
        kept = KeptSums(xp)
        try:
            holder._p2g_sums = kept
        except AttributeError:
            pass
    return kept


def _build(min_blocks: int, paired: int, lean: int = 0, flip: int = 0, split: int = 0, rezero: int = 0):
    """The scatter's kernels built for *min_blocks* blocks an SM and the *paired* atomics
    (flip_sparse_scatter.cu's SCATTER_MIN_BLOCKS, SCATTER_PAIRED), with *lean*
    (SCATTER_LEAN) the lean per-particle code, *flip* its slot order (SCATTER_FLIP,
    ``banks_mode``), *split* (0: off) a brick's particles over blocks of at least that many
    (SCATTER_SPLIT, ``split_mode``) and *rezero* the division zeroing the sums it read
    (SCATTER_REZERO, ``rezero_mode``), one ``Kernels`` each (compiled on first use)."""
    key = (int(min_blocks), int(paired), int(lean), int(flip), int(split), int(rezero))
    if key[3] and not key[2]:
        raise ValueError("the scatter's flipped slot order (SCATTER_FLIP) is the lean code's")
    defines = {**mac.CELL_TYPES, "SCATTER_MIN_BLOCKS": key[0], "SCATTER_PAIRED": key[1]}
    if key[2]:
        defines["SCATTER_LEAN"] = 1
    if key[3]:
        defines["SCATTER_FLIP"] = 1
    if key[4]:  # the fewest particles a block of a split brick takes
        defines["SCATTER_SPLIT"] = key[4]
    if key[5]:
        defines["SCATTER_REZERO"] = 1
    return _BUILDS.get(key) or _BUILDS.setdefault(key, Kernels(
        "flip_sparse_scatter.cu", ("--fmad=false",), THREADS, defines=defines))


# The default build (4 blocks, paired) declared at import, as SCATTER is, so that the compile
# check (tests/unit/test_cuda_sources.py) and tools/compare_ptx.py build the scatter that runs.
_build(SCATTER_MIN_BLOCKS, 1)
_build(SCATTER_MIN_BLOCKS, 1, 1)
_build(SCATTER_MIN_BLOCKS, 1, 1, 1)
_build(SCATTER_MIN_BLOCKS, 1, 1, 1, SPLIT_PARTICLES)
_build(SCATTER_MIN_BLOCKS, 1, 1, 1, SPLIT_PARTICLES, 1)  # VOXFX_SPARSE_SCATTER_REZERO=1's


def launch(size: int, args, spread=None, min_blocks=None, order=None, bounds=None, cells=None):
    """The scatter (``kernels/cuda/flip_sparse_scatter.cu``) over the pool of *size* cells
    with ``sparse_gpu.launch_gather``'s *args*: the bounds that fix its scales, one block per brick
    adding 64-bit fixed-point terms, then the faces and masks (``launch_sums``, then
    ``launch_finish``). Returns (acc, bounds): the fixed-point sums (``acc[(comp·size + cell)·2
    + {0: Σw·q, 1: Σw}]``) and [Q's float bits, max particles a cell] (``scales``). *spread*:
    ``SCATTER_SPREAD`` unless given; *min_blocks*: the kernel built for that many blocks an SM
    (``SCATTER_MIN_BLOCKS`` unless given; the A/B of ``bench/flip_sparse_p2g.py``). *order*:
    the particles (args' first three arrays: their own, unsorted) are read through it (binned
    position → particle; ``sparse_gpu.bin_particles_order``); *bounds*: already computed (its
    fused count), so ``scatter_bounds`` is not launched; *cells*: ``launch_finish``'s."""
    sums = launch_sums(size, args[:19], spread, min_blocks, order, bounds)
    launch_finish(size, sums, args[19:], cells)
    return sums[0], sums[1]


def launch_sums(size: int, head, spread=None, min_blocks=None, order=None, bounds=None, live=None,
                kept=None) -> tuple:
    """``launch``'s first part: the sums zeroed, the bounds (unless given) and the brick scatter,
    from *head* (``launch``'s args before the outputs: 19). Returns (acc, bounds, kernels), for
    ``launch_finish`` (sparse_gpu allocates P2G's outputs between the two, while the scatter runs).
    *live* (``sparse_gpu.brick_live``'s flags, for ``launch_finish(live=)``): only the live bricks'
    sums zeroed (p2g_zero_live_sums; the scatter adds only there — an occupied brick's faces and
    halo —, and the live division reads only there). *kept* (a ``KeptSums``, with ``rezero_mode``
    "1"): the sums are its buffer, already zero, and the division re-zeroes them (no zeroing launch)."""
    spread = int(SCATTER_SPREAD if spread is None else spread)
    if spread < 1:
        raise ValueError(f"the scatter's spread must be at least 1, not {spread}")
    import cupy as cp

    spos, svel, sc, apic, _, count = head[:6]
    h, n = head[17], int(spos.shape[0])
    min_blocks = int(SCATTER_MIN_BLOCKS if min_blocks is None else min_blocks)
    lean = int(kernel_mode() == "lean")
    paired = int(lean or atomics_mode() == "paired")
    flip = int(lean and banks_mode() == "flip")
    split = SPLIT_PARTICLES if split_mode() == "on" else 0
    rezero = int(kept is not None and rezero_mode() == "1")
    kernels = (SCATTER if min_blocks == 4 and not paired and not lean and not split and not rezero  # (4, serial)
               else _build(min_blocks, paired, lean, flip, split, rezero))
    if rezero:
        acc = kept.take(size)  # zero: the last division re-zeroed it, or zeroed here
    elif live is None:
        acc = cp.zeros(6 * size, cp.uint64)
    else:
        acc = cp.empty(6 * size, cp.uint64)
        kernels.launch("p2g_zero_live_sums", 3 * size, (live, _I64(size), acc))
    if bounds is None:
        bounds = cp.zeros(2, cp.uint32)
        blocks = min(BOUND_BLOCKS, -(-max(n, size, 1) // THREADS))
        kernels.launch_grid("scatter_bounds", (blocks,), (THREADS,), (svel, sc, apic, _I64(n), count, _I64(size), h,
                                                                      bounds))
    use_order = order is not None
    kernels.launch_grid("p2g_scatter_brick", (size // CELLS, SPLIT_BLOCKS) if split else (size // CELLS,),
                        (SCATTER_THREADS,),
                        (*head[:19], bounds, _I32(spread), order if use_order else count, _I32(use_order), acc))
    return acc, bounds, kernels, kept if rezero else None


def launch_finish(size: int, sums, outputs, cells=None, ring=False, live=None) -> None:
    """``launch``'s division into *outputs* (u, v, w, valid_u, valid_v, valid_w) from *sums*
    (``launch_sums``'); with *cells* (count, solid, coords, closed, nx, ny, nz, cell) the cell
    types too (p2g_scatter_finish_cells: ``sparse_gpu.p2g_cells_mode``); with *ring* (*cells*
    then followed by exists_u, exists_v, exists_w and the brick table) the first ring of
    extrapolation too (p2g_scatter_finish_ring: ``sparse_transfer.P2G_TAILS``); with *live* (a
    byte per pool slot, ``sparse_gpu.brick_live``; *cells* given) the idle bricks' sums left
    unread (p2g_scatter_finish_live: ``sparse_transfer.P2G_TAILS`` "live"). Where *sums* were a
    ``KeptSums``' (``launch_sums(kept=)``) the division re-zeroes them and marks them clean, but for
    *ring* (its pass reads the neighbours' sums: they stay, dirty, for the next P2G to zero)."""
    acc, bounds, kernels, kept = sums
    if live is not None:
        kernels.launch("p2g_scatter_finish_live", size, (acc, _I64(size), bounds, *outputs, *cells, live))
    elif ring:
        kernels.launch("p2g_scatter_finish_ring", size, (acc, _I64(size), bounds, *outputs, *cells))
    elif cells is None:
        kernels.launch("p2g_scatter_finish", size, (acc, _I64(size), bounds, *outputs))
    else:
        kernels.launch("p2g_scatter_finish_cells", size, (acc, _I64(size), bounds, *outputs, *cells))
    if kept is not None and not ring:
        kept.clean = True  # the division zeroes every sum the scatter can have added to (module notes)


def scales(bounds) -> tuple:
    """(k_q, k_w) of ``flip_sparse_scatter.cu``'s scatter_scales from its two bounds: w·q
    is scaled by 2^k_q and w by 2^k_w (for the error bound in the tests)."""
    q = np.uint32(bounds[0]).view(np.float32)
    e_r = (18 * max(1, int(bounds[1])) - 1).bit_length()  # ⌈log2⌉
    e_q = int(np.frexp(q)[1]) if q > 0 else 0
    e_q = min(max(e_q, -60), 60)
    return 61 - e_r - e_q, 61 - e_r
