"""The sparse multigrid's tables on the device with one host sync for the whole hierarchy
(issue 24: the pressure set-up is host-overhead bound). ``sparse_multigrid.TableBuilder``
(NumPy) is the reference; ``sparse_pressure_gpu.TableKernels`` builds the same integers
level by level, reading each compaction's size on the host (a few syncs per level). Here
every size stays in device memory (``cuda/flip_sparse_pressure_setup.cu``; level 0's
unknowns ``cuda/flip_sparse_pressure_unknowns.cu``): each level's arrays are allocated for a
host bound (a coarse cell needs all 8 children in the finer set, so a level holds at most an
eighth of the cells of the one below), compactions are a
scan, and the kernels read their counts from the device. The levels are built while the
bound allows (the last one empty), then one read brings every level's sizes and unknown
extent back, and the V-cycle keeps the levels ``sparse_multigrid.VCycle`` would build (the
same ``MG_MIN_SIDE`` and ``MAX_LEVELS`` test), as views of the wider tables.

Level 0's unknowns (``unknowns``: ``sparse_pressure.Unknowns``) likewise: one kernel
classifies every flat cell (diagonal, red / black unknown), a scan orders them, one read
brings m back to size the tables.

Compactions scan their 0/1 flags with ``inclusive_scan``: one launch of scan_lookback, a
single pass with decoupled look-back (``SCAN`` "lookback", the default,
``VOXFX_SPARSE_PRESSURE_SCAN``), two launches of scan_tile_sums and scan_tiles whatever the
size ("kernel"), or ``cupy.cumsum`` ("cupy": along an axis one launch per doubling of the
distance, ~20 at a million cells, and the set-up scans once for level 0 and twice a coarse
level); the same integers. 8M dam break on an H100 (the two alternating each substep in one
process, 14 CG iterations each, max |Δp| = 0): the set-up's 7 scans 14 → 7 launches (49 → 42
a solve), their kernels 0.252 → 0.186 ms a solve (3,606 bricks; another call, 4,411 bricks:
0.266 → 0.182), the pressure stage 5.54 → 5.43 ms, the substep 9.41 → 9.17 ms (medians of
6; the other call: 5.96 → 5.92 and 10.30 → 10.27 ms, medians of 8, within one substep's noise).

Level 1 and its tables to and from level 0 by brick look-ups (``BRICKS``,
``VOXFX_SPARSE_MG_BRICKS``, "1" the default; ``cuda/flip_sparse_pressure_bricks.cu``): a
level-1 cell's 8 children lie in one 8³ brick and its prolongation and restriction stencils
in that brick or a neighbour, so they are read through the grid's brick table
(``slot_coords``, ``brick_nbr``) in O(1) — no sort of level 0's million cells, no binary
search into them, no whole-grid lattice; level 1's cells (an eighth as many) come in key
order so that the unknowns keep their order — by ranks from brick-row segments (``RANKS``,
``VOXFX_SPARSE_MG_RANKS``, "1" the default: each brick's (qz, qy) row of 4 candidates holds
consecutive ranks, placed by the topology's sorted brick keys; no sort) or, "0", by
cupy.argsort of their keys — and its own neighbour table and the coarser levels come from
the sorted-key kernels. (H200, 8M dam break, 6,227 bricks: tables 2.11 → 1.75 ms by the
ranks; the one read of ``staged_setup``: cells + unknowns 1.18 → 1.02 ms; with the labels'
link start of sparse_pressure_cells the whole solve 8.68 → 7.65 ms, the same bits.)
BRICKS "0": level 0's set sorted by key and every level by the sorted-key kernels. The same
integers (H200, 8M-particle dam break, 3,848 bricks: unknowns 0.85 → 0.37 ms, tables 2.19 →
1.88 ms, the whole solve 9.20 → 7.76 ms).

``sparse_pressure_workspace`` (``VOXFX_SPARSE_SETUP=workspace``): ``unknowns`` and ``build``
with their scratch and tables in buffers kept from solve to solve (the same launches and
integers; no allocations, no table copies into the solver).

``SETUP`` (``VOXFX_SPARSE_PRESSURE_SETUP``): "host" — ``Unknowns`` and ``TableKernels``,
"device" — this module; both give the same integers (tests/unit/test_cuda_sparse_pressure_setup_host.py).
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import InputError
from ..grid.launch import THREADS, Kernels, blocks
from ..grid.sparse import BITS as BRICK_BITS
from ..grid.sparse import BRICK
from ..settings import env_choice
from .grid import AIR, FLUID, SOLID
from .pressure import MG_MIN_SIDE
from .sparse_pressure import Unknowns
from .sparse_multigrid import _MARGIN, KEY_BITS, MAX_LEVELS, _CellSet, _Level, _level0_cells, _pack, level0_set

SETUP = os.environ.get("VOXFX_SPARSE_PRESSURE_SETUP", "device")  # H200: 64³ pressure 6.9 ms (device) vs 9.0 ms (host)
# staged_setup: the set-up kernels' sealed count read with the unknowns' sizes ("1"), or a
# read each (sparse_pressure_cells.pressure_rhs, then unknowns: "0"); the same values.
ONE_READ = os.environ.get("VOXFX_SPARSE_PRESSURE_ONE_READ", "1") != "0"
_DEFINES = {"KEY_BITS": KEY_BITS, "CELL_AIR": AIR, "CELL_FLUID": FLUID, "CELL_SOLID": SOLID}
_B_DEFINES = {**_DEFINES, "BRICK_BITS": BRICK_BITS}
_K = Kernels("flip_sparse_pressure_setup.cu", (), THREADS, defines=_DEFINES)
_U = Kernels("flip_sparse_pressure_unknowns.cu", (), THREADS, defines=_DEFINES)  # level 0's unknowns (unk_*)
_B = Kernels("flip_sparse_pressure_bricks.cu", (), THREADS, defines=_B_DEFINES)
from .sparse_pressure_scan import (  # noqa: E402,F401  (split out; re-exported: callers and tests use them here)
    _LOOKBACK_WORDS, _S, _SCAN_TILES, SCAN_TILE_WIDTHS, _lookback, inclusive_scan, lookback_state, scan_tile,
    scan_tile_floor)
BRICKS = os.environ.get("VOXFX_SPARSE_MG_BRICKS", "1") != "0"  # level 1 by brick look-ups (module notes)
RANKS = os.environ.get("VOXFX_SPARSE_MG_RANKS", "1") != "0"  # level 1's key order by ranks, not a sort
assert BRICK == 8  # unk_classify reads a cell's parity from its brick-local coordinates
# inclusive_scan (sparse_pressure_scan, which reads it here at each call): "lookback" (default;
# scan_lookback: one launch, a single pass with decoupled look-back), "kernel" (scan_tile_sums +
# scan_tiles: two launches) or "cupy"; the same integers.
SCAN = os.environ.get("VOXFX_SPARSE_PRESSURE_SCAN", "lookback")
# Coarse levels from the first whose finer level's bound is at most this many cells: all in
# one block (mgs_tail_levels), the rest launch by launch; 0: every level launch by launch.
TAIL_BOUND = int(os.environ.get("VOXFX_SPARSE_MG_SETUP_TAIL", "16384"))
_TAIL_THREADS = 1024
# The workspace's coarse levels from 2 on (``sparse_pressure_workspace_levels``): the
# restriction table as the prolongation's transpose ("scatter", the default: down filled with
# the sentinel with the level's tables, then each fine unknown writes itself where its up
# column names a coarse unknown: mgs_level_tables_down, mgs_prolong_restrict,
# mgs_tail_levels_scatter; 8 writes a fine unknown instead of 64 key searches a coarse one, one
# launch fewer a level) or by the searches ("search": mgs_restrict_table, in the tail
# restrict_column). The same integers (host harness against the NumPy VCycle, GPU test). 8M
# dam break on an H100 (4,411 bricks, alternating each substep in one process, 14 CG
# iterations, max |Δp| = 0): the tables' kernels (restriction, prolongation, level tables,
# tail) 0.392 → 0.219 ms a solve, 42 → 40 launches, the pressure stage 5.92 → 5.58 ms and the
# substep 10.27 → 9.91 ms (medians of 8). ``build``'s fresh arrays keep the searches.
RESTRICT = os.environ.get("VOXFX_SPARSE_MG_RESTRICT", "scatter")
_NO_SPAN = -(2 ** 31 - 1)
_WIDEN_BLOCKS = 264  # grid of the kernels that widen a span or box (grid-stride: 6 atomics a thread)
# Level 0's unk_classify (the widest of them: every pool cell, a gather of its fluid cells'
# neighbours): "block" (unk_classify_block on up to _CLASSIFY_BLOCKS blocks, the box reduced
# in each block, 6 atomics a block) or "thread" (unk_classify on _WIDEN_BLOCKS blocks, 6 a
# thread: two blocks an H100 SM, a quarter of its threads); the same integers (host harness,
# GPU tests). 8M dam break, 1.88M pool cells, H100 (bench/flip_sparse_setup_kernels.py, each
# kernel alone, ways in turn): 0.047 → 0.023 ms a substep. Read at each set-up
# (``VOXFX_SPARSE_SETUP_WIDEN``): an A/B in one process.
WIDEN = ("block", "thread")
_CLASSIFY_BLOCKS = 2048


def _widening(kernels, name, n, args):
    """*name* of *kernels* over *n* items on at most _WIDEN_BLOCKS blocks (nothing for n = 0)."""
    if int(n) > 0:
        kernels.launch_grid(name, (min(_WIDEN_BLOCKS, blocks(n)[0]),), (THREADS,), args)


def classify(grid, kind, size, diag8, flags, box):
    """Level 0's unk_classify over the *size* pool cells of *grid* (``WIDEN``)."""
    import cupy as cp

    kind8, active = kind.astype(cp.uint8, copy=False), grid.brick_slot.astype(cp.bool_, copy=False)
    if env_choice("VOXFX_SPARSE_SETUP_WIDEN", WIDEN) == "thread":
        _widening(_U, "unk_classify", size, (kind8, grid.nbr, np.int32(size), active, grid.slot_coords, diag8, flags,
                                             box))
    elif int(size) > 0:
        _U.launch_grid("unk_classify_block", (min(_CLASSIFY_BLOCKS, blocks(size)[0]),), (THREADS,),
                       (kind8, grid.nbr, np.int32(size), active, grid.slot_coords, diag8, flags, box))


def level_bounds(n0) -> list:
    """Host bounds of each level's set size: n0, then an eighth of the previous one, while
    the previous one is not 0 (so the last level may be empty), at most MAX_LEVELS."""
    bounds = [int(n0)]
    while len(bounds) < MAX_LEVELS and bounds[-1] > 0:
        bounds.append(bounds[-1] // 8)
    return bounds


def level_extents(cnt_h, span_h, count) -> list:
    """Per level its unknowns' widest span + 1 (0 where it has none) from the set-up's host read
    (*cnt_h*: 4 counts a level, m at 2; *span_h*: 6 entries a level, an axis's span entries a and
    a + 3 added): ``levels_kept``' extents (``sparse_pressure_solve_ahead.ahead_depth_reference``
    writes the same out)."""
    return [0 if cnt_h[level, 2] == 0 else int(max(span_h[level, a] + span_h[level, a + 3] for a in range(3))) + 1
            for level in range(count)]


def levels_kept(extents, count) -> int:
    """How many of the *count* built levels the V-cycle keeps: as VCycle's loop, one more
    while the last kept level's unknowns span at least MG_MIN_SIDE cells."""
    kept = 1
    while kept < count and extents[kept - 1] >= MG_MIN_SIDE:
        kept += 1
    return kept


def _ints(values):
    return tuple(np.int32(v) for v in values)


def build(grid, kind, level0):
    """(levels, up, down) of ``VCycle`` for *level0* (``sparse_pressure.Unknowns`` on
    CuPy, m > 0): level 0's set on the host sizes it has, the coarser levels by the kernels
    of flip_sparse_pressure_setup.cu (level 1 by flip_sparse_pressure_bricks.cu where
    ``unknowns`` took the brick path), one host read at the end."""
    import cupy as cp

    if getattr(level0, "ws_serial", None) is not None:  # unknowns() into the workspace: build there too
        from . import sparse_pressure_workspace

        return sparse_pressure_workspace.build(grid, kind, level0)
    box = getattr(level0, "level0_box", None)  # by unknowns() on the brick path: (lo, hi, set size)
    found = getattr(level0, "level0_set", None)  # by unknowns(), read with its sizes
    if box is not None:
        lo, hi, n0 = box
        base = _level0_base(lo, hi)
    elif found is not None:
        level0.level0_set = None
        cells = level0_set(kind, level0, *found, cp)
    else:
        cells = _level0_cells(grid, kind, level0, cp)
    if box is None:
        n0, base = int(cells.keys.shape[0]), cells.base
    bounds = level_bounds(n0)
    count = len(bounds)
    init = np.concatenate([np.zeros(4 * count, np.int32), np.full(6 * count, _NO_SPAN, np.int32)])
    init[:3] = (n0, level0.m_red, level0.m)
    sizes = cp.asarray(init)  # per level the counts cnt (4 each), then the spans (6 each): one read at the end
    cnt, span = sizes[:4 * count].reshape(count, 4), sizes[4 * count:].reshape(count, 6)
    stride = level0.m + 1  # the finer level's table rows
    built = []  # per coarse level: nbr, diag, up (onto the finer level), down (into it)
    first = 1
    if box is not None:
        _widening(_B, "mgb_unknown_span", level0.m, (level0.cells, cnt[0], grid.slot_coords, span[0]))
        if count > 1:
            fine, ukeys, tables = _level1_by_bricks(grid, kind, level0, base, bounds[1], cnt, span)
            built.append(tables)
            stride, first = bounds[1] + 1, 2
    else:
        ukeys = _pack(*level0.lattice, base)  # level 0's unknowns, in order
        _widening(_K, "mgs_key_span", level0.m, (ukeys, cnt[0], span[0]))
        fine = _CellSet(cells.keys, cells.fluid.astype(cp.uint8), base)
        fine.position = cells.position
    for level in range(first, count):
        fb, nb = bounds[level - 1], bounds[level]
        if TAIL_BOUND and fb <= TAIL_BOUND:  # this level and the coarser ones: one launch in one block
            built += _tail_levels(level, fine, ukeys, stride, bounds, cnt, span)
            break
        coarse = _CellSet(cp.empty(nb, cp.int64), cp.empty(nb, cp.uint8), fine.coarser_base())
        flag, take = cp.empty(fb, cp.uint8), cp.empty(fb, cp.int32)
        _K.launch("mgs_coarsen", fb, (fine.keys, fine.fluid, cnt[level - 1], np.int32(fb), *_ints(fine.base), flag,
                                      take))
        scan = inclusive_scan(take)
        _K.launch("mgs_parents", max(fb, 1), (fine.keys, flag, scan, cnt[level - 1], np.int32(fb), *_ints(fine.base),
                                              *_ints(coarse.base), np.int32(nb), coarse.keys, coarse.fluid,
                                              cnt[level]))
        nbr, diag, cukeys, _ = _level_tables(coarse, cnt[level], nb)
        up = cp.empty((8, stride), cp.int32)
        _K.launch("mgs_prolong_table", stride, (ukeys, cnt[level - 1], np.int32(stride), *_ints(fine.base),
                                                coarse.keys, cnt[level], coarse.position, *_ints(coarse.base), up))
        down = cp.empty((64, nb + 1), cp.int32)
        _K.launch("mgs_restrict_table", nb + 1, (cukeys, cnt[level], np.int32(nb + 1), *_ints(coarse.base), fine.keys,
                                                 cnt[level - 1], fine.position, *_ints(fine.base), down))
        _widening(_K, "mgs_key_span", nb, (cukeys, cnt[level], span[level]))
        built.append((nbr, diag, up, down))
        fine, ukeys, stride = coarse, cukeys, nb + 1
    sizes = sizes.get()  # the one host sync
    cnt_h, span_h = sizes[:4 * count].reshape(count, 4), sizes[4 * count:].reshape(count, 6)
    extents = level_extents(cnt_h, span_h, count)
    kept = levels_kept(extents, count)
    levels, up, down = [level0], [], []
    for level in range(1, kept):
        nbr, diag, up_l, down_l = built[level - 1]() if callable(built[level - 1]) else built[level - 1]
        m, m_red = int(cnt_h[level, 2]), int(cnt_h[level, 1])
        levels.append(_Level(m, m_red, nbr[:, :m + 1], diag[:m + 1], None))
        up.append(up_l[:, :levels[level - 1].m + 1])
        down.append(down_l[:, :m + 1])
    return levels, up, down


def _level0_base(lo, hi):
    """Level 0's key base from its set's lattice box (sparse_multigrid.level0_set's check)."""
    if max(h - lo_ for lo_, h in zip(lo, hi)) + 2 * _MARGIN >= 1 << KEY_BITS:
        raise InputError(f"the sparse liquid spans more than {(1 << KEY_BITS) - 2 * _MARGIN:,} cells along an axis")
    return tuple(int(v) - _MARGIN for v in lo)


def _level_tables(cells, cnt, nb):
    """(nbr, diag, unknown keys, unknown → set index) of a level's set *cells* (cnt: its
    sizes on the device, nb its bound) by mgs_level_cells, scans, mgs_order and
    mgs_level_tables; sets ``cells.position``."""
    import cupy as cp

    around, diag8 = cp.empty((6, nb), cp.int32), cp.empty(nb, cp.uint8)
    cls, flags = cp.empty(nb, cp.uint8), cp.empty((2, nb), cp.int32)
    _K.launch("mgs_level_cells", nb, (cells.keys, cells.fluid, cnt, np.int32(nb), *_ints(cells.base), around, diag8,
                                      cls, flags))
    scans = inclusive_scan(flags)
    cells.position, order = cp.empty(nb, cp.int32), cp.empty(nb, cp.int32)
    _K.launch("mgs_order", max(nb, 1), (cls, scans, cnt, np.int32(nb), cells.position, order))
    nbr, diag = cp.empty((6, nb + 1), cp.int32), cp.empty(nb + 1, cp.float32)
    ukeys = cp.empty(nb, cp.int64)
    _K.launch("mgs_level_tables", nb + 1, (order, cnt, np.int32(nb), around, cells.position, diag8, cells.keys, nbr,
                                           diag, ukeys))
    return nbr, diag, ukeys, order


def _level1_by_bricks(grid, kind, level0, base, nb, cnt, span):
    """Level 1 (bound *nb* cells) from the grid's bricks (module notes): (its set with
    ``position``, its unknowns' keys, (nbr, diag, up onto level 0, down into it))."""
    import cupy as cp

    cand_count = int(grid.brick_slot.shape[0]) * 64  # a 4³ block of level-1 candidates per pool slot
    coords, nbr27 = grid.slot_coords, grid.brick_nbr
    flag, take, map1 = cp.empty(cand_count, cp.uint8), cp.empty(cand_count, cp.int32), cp.empty(cand_count, cp.int32)
    active = grid.brick_slot.astype(cp.bool_, copy=False)
    _B.launch("mgb_coarsen", cand_count, (kind.astype(cp.uint8, copy=False), active, np.int32(cand_count), flag, take,
                                          map1))
    room = max(nb, 1)
    coarse = _CellSet(cp.empty(room, cp.int64), cp.empty(room, cp.uint8), _CellSet(None, None, base).coarser_base())
    scand = cp.empty(room, cp.int32)
    topo = grid.topology
    if RANKS:  # in key order by brick-row segments: no sort
        bkeys = cp.ascontiguousarray(topo.keys, dtype=cp.int64)  # sorted: (bz, by, bx) order
        bslots = cp.ascontiguousarray(topo.slots, dtype=cp.int32)
        bricks = int(bkeys.shape[0])
        seg = cp.empty(max(16 * bricks, 1), cp.int32)
        _B.launch("mgb_segment_counts", 16 * bricks, (bkeys, bslots, np.int32(bricks), flag, seg))
        _B.launch("mgb_ranked", max(16 * bricks, 1), (bkeys, bslots, np.int32(bricks), flag, seg,
                                                      inclusive_scan(seg[:16 * bricks]), coords, *_ints(coarse.base),
                                                      np.int32(room), coarse.keys, coarse.fluid, scand, map1, cnt[1]))
    else:
        scan = inclusive_scan(take)
        keys, fluid, cand = cp.empty(room, cp.int64), cp.empty(room, cp.uint8), cp.empty(room, cp.int32)
        _B.launch("mgb_parents", max(cand_count, room), (flag, scan, np.int32(cand_count), coords,
                                                         *_ints(coarse.base), np.int32(room), keys, fluid, cand,
                                                         cnt[1]))
        order = cp.argsort(keys)  # the padding (the largest key) last: the first cnt[1][0] are the set in key order
        _B.launch("mgb_sorted", nb, (order, keys, fluid, cand, cnt[1], np.int32(nb), coarse.keys, coarse.fluid, scand,
                                     map1))
    nbr, diag, ukeys, uorder = _level_tables(coarse, cnt[1], nb)
    up = cp.empty((8, level0.m + 1), cp.int32)
    _B.launch("mgb_prolong", level0.m + 1, (level0.cells, cnt[0], np.int32(level0.m + 1), nbr27, map1, coarse.position,
                                            cnt[1], up))
    down = cp.empty((64, nb + 1), cp.int32)
    _B.launch("mgb_restrict", nb + 1, (scand, uorder, cnt[1], np.int32(nb + 1), nbr27, level0.position, cnt[0], down))
    _widening(_K, "mgs_key_span", nb, (ukeys, cnt[1], span[1]))
    return coarse, ukeys, (nbr, diag, up, down)


# mgs_tail_levels' record: its pointers in order, then bound, base x, y, z, table stride.
_TAIL_ARRAYS = ("keys", "fluid", "position", "ukeys", "flag", "take", "scan", "around", "diag8", "cls", "flags",
                "scans", "order", "nbr", "diag", "up", "down")
_TAIL_REC = len(_TAIL_ARRAYS) + 5


def _tail_levels(first, fine, ukeys, stride, bounds, cnt, span):
    """Levels first … len(bounds) − 1 by mgs_tail_levels (one block; the launches of
    build's loop in its order, the same integers), their arrays carved out of four
    allocations: per level (nbr, diag, up, down) as ``build`` keeps them, each a callable
    that makes the views (only the levels kept need them)."""
    import cupy as cp

    count = len(bounds)
    used = {"i64": 0, "u8": 0, "i32": 0, "f32": 0}
    layout, fstride = [], stride
    for level in range(first, count):
        fb, nb = bounds[level - 1], bounds[level]
        lengths = {"keys": ("i64", nb), "fluid": ("u8", nb), "position": ("i32", nb), "ukeys": ("i64", nb),
                   "flag": ("u8", fb), "take": ("i32", fb), "scan": ("i32", fb), "around": ("i32", 6 * nb),
                   "diag8": ("u8", nb), "cls": ("u8", nb), "flags": ("i32", 2 * nb), "scans": ("i32", 2 * nb),
                   "order": ("i32", nb), "nbr": ("i32", 6 * (nb + 1)), "diag": ("f32", nb + 1),
                   "up": ("i32", 8 * fstride), "down": ("i32", 64 * (nb + 1))}
        spots = {}
        for name in _TAIL_ARRAYS:
            arena, length = lengths[name]
            spots[name] = (arena, used[arena], length)
            used[arena] += length
        layout.append((nb, fstride, spots))
        fstride = nb + 1
    types = {"i64": cp.int64, "u8": cp.uint8, "i32": cp.int32, "f32": cp.float32}
    arenas = {name: cp.empty(max(n, 1), types[name]) for name, n in used.items()}
    rec = np.zeros((count, _TAIL_REC), np.int64)
    rec[first - 1, :4] = [a.data.ptr for a in (fine.keys, fine.fluid, fine.position, ukeys)]
    rec[first - 1, -5:] = [bounds[first - 1], *fine.base, stride]
    base = fine.base
    for level, (nb, _, spots) in zip(range(first, count), layout):
        base = _CellSet(None, None, base).coarser_base()
        rec[level, :len(_TAIL_ARRAYS)] = [arenas[a].data.ptr + at * arenas[a].itemsize
                                          for a, at, _ in (spots[name] for name in _TAIL_ARRAYS)]
        rec[level, -5:] = [nb, *base, nb + 1]
    table = cp.asarray(rec)
    _K.launch_grid("mgs_tail_levels", (1,), (_TAIL_THREADS,), (table, np.int32(first), np.int32(count), cnt, span))

    def views(nb, fstride, spots):
        def make():
            out = []
            for name, shape in (("nbr", (6, nb + 1)), ("diag", (nb + 1,)), ("up", (8, fstride)),
                                ("down", (64, nb + 1))):
                arena, at, length = spots[name]
                out.append(arenas[arena][at:at + length].reshape(shape))
            return tuple(out)
        return make
    return [views(*entry) for entry in layout]


def _device_tables(grid) -> bool:
    """Whether the grid's tables are the kernels' (32-bit indices, pool slots' coordinates)."""
    import cupy as cp

    return (grid.nbr.dtype == cp.int32 and grid.nbr.shape == (6, grid.size) and grid.size > 0
            and getattr(grid, "slot_coords", None) is not None)


def unknowns(grid, kind, extra=(), ahead=False, before_read=None):
    """``sparse_pressure.Unknowns(grid, kind)`` on CuPy by unk_classify, a scan, unk_order
    and unk_tables: the same cells, position, nbr, diag and lattice; one host read (m),
    which brings *extra* (device int32 arrays of one value each) back too, as
    ``level.extra`` (host ints). *ahead*: the multigrid tables follow (the workspace may
    launch them before that read: ``sparse_pressure_workspace.AHEAD``); *before_read* there
    (``sparse_pressure_solve_ahead.Ahead``) queues the solve before it too."""
    import cupy as cp

    size = grid.size
    if not _device_tables(grid):  # 64-bit indices: the host's path
        level = Unknowns(grid, kind)
        level.extra = tuple(int(e.get()[0]) for e in extra)
        return level
    from . import sparse_pressure_workspace

    if sparse_pressure_workspace.enabled() and BRICKS and RANKS and getattr(grid, "brick_nbr", None) is not None:
        return sparse_pressure_workspace.unknowns(grid, kind, extra, ahead, before_read)  # its buffers, the solver's
    diag8, flags = cp.empty(size, cp.uint8), cp.empty((3, size), cp.int32)
    read = cp.asarray(np.array([0] * 3 + [2 ** 31 - 1] * 3 + [-(2 ** 31)] * 3 + [0] * len(extra), np.int32))
    sizes, box = read[:3], read[3:9]  # sizes, the box, then the extra values
    for at, value in enumerate(extra):
        read[9 + at:10 + at] = value
    classify(grid, kind, size, diag8, flags, box)
    scans = inclusive_scan(flags)
    position = cp.empty(size, cp.int32)
    cells, in_set = cp.empty(size, cp.int64), cp.empty(size, cp.int64)
    _U.launch("unk_order", size, (flags, scans, np.int32(size), sizes, position, cells, in_set))
    read = read.get()  # the one host sync: m sizes the tables
    m_red, m, n_set = (int(v) for v in read[:3])
    lo, hi = [int(v) for v in read[3:6]], [int(v) for v in read[6:9]]
    bricks = BRICKS and getattr(grid, "brick_nbr", None) is not None
    level = Unknowns.__new__(_BrickUnknowns if bricks else Unknowns)
    level.extra = tuple(int(v) for v in read[9:])
    level.xp, level.m, level.m_red, level.position = cp, m, m_red, position
    level.cells = cells[:m]
    if bricks:  # build() reads the brick tables: no whole-grid lattice
        level.slot_coords, level.level0_box = grid.slot_coords, (lo, hi, n_set)
    else:
        lattice = grid.lattice()
        level.lattice = tuple(a[level.cells] for a in lattice)
        level.level0_set = (lattice, in_set[:n_set], lo, hi)
    level.nbr, level.diag = cp.empty((6, m + 1), cp.int32), cp.empty(m + 1, cp.float32)
    _U.launch("unk_tables", m + 1, (level.cells, sizes, grid.nbr, np.int32(size), position, diag8, level.nbr,
                                    level.diag))
    return level


class _BrickUnknowns(Unknowns):
    """``Unknowns`` of the brick path: ``lattice`` made from the brick coordinates when read
    (the set-up itself does not need it)."""

    @property
    def lattice(self):
        import cupy as cp

        slot, local = self.cells >> 9, self.cells & 511
        at = self.slot_coords[slot].astype(cp.int64) * BRICK
        return at[:, 0] + (local & 7), at[:, 1] + ((local >> 3) & 7), at[:, 2] + (local >> 6)


def staged_setup(grid, dt, preconditioner, crowding=None, solve=None):
    """``sparse_pressure.pressure_rhs`` and the unknowns with one host read between them
    (``ONE_READ``): the four set-up kernels (``sparse_pressure_cells.stage``, the solver's
    cell types pinned on the device), then ``unknowns``, whose read brings back the sealed
    count and, where the grid's topology is the last solve's, whether the cell types are
    too (``sparse_pressure.solver_tables``' reuse test). Where the last solve's tables were
    kept (still liquid: a likely reuse), the count and that test are read alone and the
    unknowns left to ``solver_tables`` (None). (b, kind, enclosed, labels, level or None,
    same) — the values of the separate calls — or None where the grid's tables are not the
    kernels' (the separate calls then). *crowding*: the density correction's
    (``sparse_pressure_cells.stage``). *solve*: the solve's (tolerance, max_iterations,
    check_every, warm), for ``sparse_pressure_solve_ahead`` (its switch on: the solve queued
    before the unknowns' read)."""
    import cupy as cp

    from . import sparse_pressure, sparse_pressure_cells, sparse_pressure_solve_ahead

    if not (ONE_READ and SETUP == "device" and sparse_pressure.SETUP_KERNELS == "fused" and _device_tables(grid)):
        return None
    staged = sparse_pressure_cells.stage(grid, dt, crowding)
    if staged is None:
        return None
    b, kind, label, reach, count = staged
    memo = getattr(grid, "_pressure_memo", None)  # solver_tables' (nbr, kind, key, tables or None)
    extra = [count]
    if (sparse_pressure.REUSE_TABLES and memo is not None and memo[0] is grid.nbr
            and memo[2] == sparse_pressure.tables_key(preconditioner, False) and memo[1].shape == kind.shape):
        extra.append((memo[1] == kind).all().astype(cp.int32).reshape(1))
    if len(extra) > 1 and memo[3] is not None and sparse_pressure.tables_hold(memo[3]):
        # the tables were kept: the unknowns only if the types changed
        level, values = None, tuple(int(v) for v in cp.concatenate(extra).get())  # the one host read
    else:
        before_read = sparse_pressure_solve_ahead.plan(grid, b, preconditioner, solve)
        level = unknowns(grid, kind, extra, ahead=preconditioner == "mg", before_read=before_read)
        values = level.extra
        if before_read is not None:
            before_read.read(level, values[0])
    same = len(values) > 1 and bool(values[1])
    if values[0] == 0:  # no sealed region (the usual substep): assemble would copy the types and drop them
        return b, kind, None, None, level, same
    b, _, enclosed, labels = sparse_pressure_cells.assemble(grid, b, label, reach, values[0], cp)
    return b, kind, enclosed, labels, level, same
