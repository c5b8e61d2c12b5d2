"""The sparse FLIP topology's reach by classes (seed 003 §5.2, issue 24): the bricks the
particles' boxes reach over a closed domain's brick index, for ``sparse_topology_gpu._reach``
(whose module notes hold the marking pipeline; the kernels are ``flip_sparse_reach.cu``'s, the
NumPy reference ``SparseFlipGrid.topology_keys``).

Along an axis a margin m = 8q + r takes every cell of a brick to the brick offsets [−q, q],
the cells at local l < r also to −q − 1 and those at l ≥ 8 − r to q + 1, so a brick's reach
is the union of the products of the classes {core, low, high}³ its occupied cells have: 27
bits a slot in place of ``brick_reach``'s masks of (2R + 1)³ bits (154 words a slot at R = 8,
the 64 cells they stop at). ``reach_classes`` ORs each row's class products into its slot's
word, ``reach_compare_classes`` walks each slot's own (2q + 3)³ offsets (clipped to the box)
into the index: the same kept marks, claimed entries and flags as ``brick_reach`` +
``reach_compare_table``, at margins up to ``CLASS_MAX_MARGIN`` = 256 cells (any margin in a closed
box whose brick index a walk at 256 covers: ``class_limit``), with no mask memory and no global
radius.

``reach_slots`` (``launch_slots``, the merged pipeline of ``sparse_topology_gpu``'s module notes, the
default) does the slots' margins (``slot_margins``') and both steps in one launch: the same words,
kept marks, claimed entries and flags.

``VOXFX_SPARSE_REACH=classes`` (the default) takes them for every update over a brick index
(every incremental update of a closed box); ``masks`` keeps ``brick_reach``'s (past
``MAX_MARGIN`` the array path) for A/B. Without an index (open domains, the full build from
the particles' bricks) the masks serve.

Measured (H100 80GB HBM3, one call): the 65M dam break with Fast timing, whose spray moves
50–90 cells a substep from its fifth frame (CFL 54–90 asked, three substeps), went from 5–10 s
a frame on the array path to 158–184 ms of stepping; the 8M substep's topology 0.964 → 0.927
ms (``bench/flip_sparse.py --row 8m --ab VOXFX_SPARSE_REACH=classes --ab ''``, substeps
alternating, update 0.937 → 0.902 ms).
"""

from __future__ import annotations

import numpy as np

from ..grid.launch import Kernels
from ..settings import env_choice
from . import sparse_topology_args as args
from .particles import THREADS
from .sparse_gpu import _I32, _I64, _dims

# cells: the classes serve per-brick margins up to this (a slot walks its own (2q + 3)³ offsets, q = m div 8: 67³ at
# 256); past it the array path builds
CLASS_MAX_MARGIN = 256
# The classes past CLASS_MAX_MARGIN (issue 24, helper h20g): in a closed domain a slot's walk is clipped to the
# box's brick index ([−1, n/8] a side), so where the index has at most the walk's (2·32 + 3)³ = 67³ entries at
# CLASS_MAX_MARGIN (a box of up to ~520 cells a side: the 65M dam break's 512³) no margin walks more than 256
# does, and ``class_limit`` serves every margin up to CLASS_ANY_MARGIN — below the 2^30 of a NaN or runaway
# speed (voxfx_slot_margin.cuh), which still counts as beyond. Why (session 20): the 65M Fast frames 10–11
# with the brick smoother asked 179 / 173 CFL substeps at a cap of 3 (spray ~300 cells a substep), past 256,
# and the array path built their bricks: 30.8 s of the frame's topology stage (bench/RESULTS.md, h20g).
CLASS_ANY_MARGIN = (1 << 30) - 1
# --fmad=false: reach_slots' margins round as slot_margins' (flip_sparse_topology.cu's options); the other
# kernels are integer work only
REACH = Kernels("flip_sparse_reach.cu", ("--fmad=false",), THREADS)
REACH_LANES = 128  # flip_sparse_reach.cu's: reach_compare_classes' (and reach_slots') threads a slot
REACH_MODES = ("classes", "masks")  # VOXFX_SPARSE_REACH (module notes): the same bricks every way


def reach_mode() -> str:
    """``VOXFX_SPARSE_REACH`` (``REACH_MODES``; default classes)."""
    return env_choice("VOXFX_SPARSE_REACH", REACH_MODES)


def class_limit(shape, closed) -> int:
    """The largest margin the classes serve on a grid of *shape* cells (*closed*: its box clips the
    walks): ``CLASS_ANY_MARGIN`` where the closed box's brick index has no more entries than a walk
    at ``CLASS_MAX_MARGIN`` takes, else ``CLASS_MAX_MARGIN`` (module notes)."""
    side = 2 * (CLASS_MAX_MARGIN >> 3) + 3
    entries = 1
    for n in shape:
        entries *= (int(n) >> 3) + 2
    return CLASS_ANY_MARGIN if closed and entries <= side ** 3 else CLASS_MAX_MARGIN


def grid_limit(grid) -> int:
    """``class_limit`` of *grid* (its shape and whether it is closed)."""
    return class_limit(grid.shape, bool(grid.closed))


def by_classes(margin: int, table: bool, limit: int = CLASS_MAX_MARGIN) -> bool:
    """Whether the classes serve the largest margin *margin*: over a brick index (*table*),
    up to *limit* (``grid_limit``'s), unless the masks are asked for."""
    return bool(table) and reach_mode() == "classes" and int(margin) <= int(limit)


def launch(grid, occupied, used, coords, margins, index, claimed, flags, work=None, slices=None):
    """Steps 2 and 4 of ``sparse_topology_gpu._reach`` by classes over the brick *index*: each
    slot's class word from its *occupied* cells (``reach_classes``; a margin past the limit adds
    to flags[1], beyond), then its own offsets walked (``reach_compare_classes``: kept, *claimed*,
    flags[2] added, flags[1] beyond). *work*: ``_reach_work``'s zeroed scratch (its one-word
    "mask" a slot and "kept"), else allocated here; *slices*: flags[i:i + 1] for each i, where
    the caller has them. Returns (the class words, kept)."""
    cp = grid.xp
    cap = int(used.shape[0])
    f = slices or (None, flags[1:2], flags[2:3])
    words = work["mask"] if work else cp.zeros(cap, cp.uint32)
    REACH.launch("reach_classes", 64 * cap, (occupied, used, _I64(cap), margins, _I32(grid_limit(grid)), words,
                                            f[1]))
    kept = work["kept"] if work else cp.zeros(cap, cp.uint8)
    REACH.launch("reach_compare_classes", REACH_LANES * cap, (words, used, coords, _I64(cap), margins,
                                                            _I32(grid.closed), *_dims(grid), *index, kept, claimed,
                                                            f[2], f[1]))
    return words, kept


def launch_slots(grid, occupied, used, coords, nbr, margin, reach, speed2, index, claimed, flags, work=None,
                 slices=None, made=None):
    """``sparse_topology_gpu._margins`` and ``launch`` in one launch (``reach_slots``, the merged
    pipeline, ``VOXFX_SPARSE_TOPOLOGY_PIPELINE``): each slot's margin (*margin* for every brick
    without *reach*, else per brick from *speed2* over its 27 neighbours *nbr*, the largest |v|²
    bits into flags[4]), its class word and its walk over the brick *index*: the same margins,
    words, kept, claimed and flags. Returns (the class words, kept). *made*: (on, ``grid_args``) of
    ``sparse_topology_args`` where the caller has them (with on, *index* its ``index_args``): the scalars
    made once."""
    cp = grid.xp
    cap = int(used.shape[0])
    f = slices or (None, flags[1:2], flags[2:3], None, flags[4:5])
    words = work["mask"] if work else cp.zeros(cap, cp.uint32)
    kept = work["kept"] if work else cp.zeros(cap, cp.uint8)
    margins = work["margins"] if work else cp.empty(cap, cp.int32)
    on, (_, dims, closed, limit) = made or (False, (None, _dims(grid), _I32(grid.closed), None))
    if reach is None:
        per_brick = (args.i32(margin, on), np.float64(0), np.float64(0), np.float64(1), args.i32(0, on))
    else:
        per_brick = (args.i32(-1, on), np.float64(reach.dt), np.float64(reach.gdt), np.float64(reach.h),
                     args.i32(reach.base, on))
    limit = _I32(grid_limit(grid)) if limit is None else limit
    REACH.launch("reach_slots", REACH_LANES * cap, (occupied, used, coords, args.i64(cap, on), speed2, nbr, *per_brick,
                                                  limit, closed, *dims, *index, margins, words, kept, claimed, f[2],
                                                  f[1], f[4]))
    return words, kept
