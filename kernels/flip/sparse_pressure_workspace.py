"""The sparse pressure set-up's tables built straight into capacity-sized buffers that the
PCG solver owns (issue 24: the set-up's allocations and copies). ``sparse_pressure_setup``'s
``unknowns`` and ``build`` allocate every scratch array and table afresh each solve (~80 pool
allocations) and the solver then copies the tables into its own buffers (~20 copies a solve,
``sparse_pressure_buffers.BufferLoads._load_persist``); here one ``Workspace`` per device keeps
them from solve to solve:

* level 0's arrays of ``grid.size`` entries are made each set-up, not kept: one allocation
  for what its unknowns keep (cells, position, diag8: 13 B a pool cell, freed with them) and
  one for the scratch (flags, scans, the set: 32 B, freed before any new tables are taken);
  kept here before (45 B a pool cell, grown 1.5×) they stood at every stage's peak;
* level 1's candidates and brick-row segments (~1 B a pool cell), grown geometrically;
* per coarse level l the tables of ``build`` (nbr, diag, up, down, the set's positions) at a
  capacity C_l (``grown_strides`` of its host bound + 1: a coarse set is at most an eighth
  of the one below), its kernels launched with bound C_l − 1 so that every row is C_l long,
  the solver's stride (``sparse_pressure_workspace_levels``: the coarse levels' launches).
  Their scratch (keys, classes, scans, orders: ~19% of a level's bytes) is one
  allocation a set-up (``Workspace.scratch``; ``SCRATCH`` "kept": one a generation);
* a solver for these capacities (``sparse_pressure_gpu``, ``PERSIST``) takes them as its own
  buffers: no copies. Capacities that grow make a new generation (new buffers, a new
  solver and capture); the solvers bound to the older one go first
  (``sparse_pressure_gpu.drop_workspace_solvers``), the next growing from their strides.

What stays between set-ups (``held_bytes``) is counted by ``sparse_memory``
(``WORKSPACE_CELL`` per pool cell, state and substep) when this mode is on. Tables that
``sparse_pressure.solver_tables`` keeps are reused only while no later set-up rebuilt the
workspace (``current``: each set-up has its own ``serial``). Level 0 by the brick path only
(``sparse_pressure_setup.BRICKS`` and ``RANKS``, the defaults); the same host reads as
``build``, or one for the whole set-up where the coarse levels go ahead of the unknowns'
read (``AHEAD``, ``sparse_pressure_ahead``).

``MODE`` (``VOXFX_SPARSE_SETUP``): "workspace" (default, with ``sparse_pressure_gpu.PERSIST``)
or "fresh" (``build``'s arrays, copied into the solver): the same pressure and iterations bit
for bit (tests/gpu/test_flip_sparse_pressure_workspace_gpu.py). 8M dam break, the two
alternating each substep in one process on an H100: pressure 6.71 → 5.92 ms, substep 10.18 →
9.39 ms; in-use peak +5% (8M over 60 frames, H200: 1.310 → 1.379 GiB; 65M over 40, H100: 8.07
→ 8.46 GiB; bench/RESULTS.md). Two ``unknowns`` before one ``build`` are refused ("rebuilt
since these unknowns were found"): its buffers hold one set-up at a time.
"""

from __future__ import annotations

import itertools
import os
from functools import partial

import numpy as np

from .. import backend
from ..settings import env_choice
from ..grid.sparse_mac import CARVE_ALIGN, carve
from . import sparse_pressure_setup as setup
from . import sparse_pressure_workspace_kept as held_levels
from .sparse_multigrid_kept import keep_every
from .sparse_multigrid import _Level
from .sparse_pressure_ahead import guessed_base, tables_stand
from .sparse_pressure_buffers import table_caps
from .sparse_pressure_setup_graph import Graphs, enabled as graph_enabled
from .sparse_pressure_workspace_levels import _launch_levels
from .sparse_pressure_workspace_views import _CoarseLevel, _Up, _Views, _rows, Level0, fill_tables  # noqa: F401

# The set-up's tables: "workspace" (the default) built into the kept buffers above, "fresh" allocated
# each solve and copied into the solver's (the way before; the same pressure to the bit).
MODE = os.environ.get("VOXFX_SPARSE_SETUP", "workspace")
# The coarse levels' scratch: "set-up" (default) one allocation a set-up, freed at its end;
# "kept": one a generation, kept with the tables (no allocation or views a set-up). The same
# launches and integers. Kept too where the coarse levels replay as a graph
# (``sparse_pressure_setup_graph``, ``VOXFX_SPARSE_SETUP_GRAPH=1``: its pointers must hold).
SCRATCH = os.environ.get("VOXFX_SPARSE_SETUP_SCRATCH", "set-up")
# The coarse levels launched before the unknowns' host read, one read for both
# (sparse_pressure_ahead): "1", or "0" (a read after the unknowns, another after the tables).
AHEAD = os.environ.get("VOXFX_SPARSE_SETUP_AHEAD", "1") != "0"
# ``build``'s coarse levels: "lazy" (default) — their nbr, diag, up and down views made when
# read (a workspace solver reads none: its tables are the buffers), or "made" — four views a
# level each set-up, made while the device waits. The same tables either way. Read at each
# build (``VOXFX_SPARSE_SETUP_VIEWS``). 8M dam break on an H100 (substeps alternating in one
# simulation, bench/flip_sparse_pressure_timeline.py, medians of 6): build 0.101 → 0.047 ms;
# the pressure stage 4.49 / 4.54 ms, within its CG iterations' spread.
VIEWS = ("lazy", "made")
_EXTRA = 7  # values an ahead set-up reads back with the sizes (staged_setup's: 1 or 2)
_GROWTH = 1.5
_LEVEL_ARRAYS = ("keys", "fluid", "position", "ukeys", "flag", "take", "scan", "around", "diag8", "cls", "flags",
                 "scans", "order", "nbr", "diag", "up", "down")  # sparse_pressure_setup._TAIL_ARRAYS' order
_KEPT = ("position", "nbr", "diag", "up", "down")  # a coarse level's arrays kept between set-ups (the rest: scratch)
_workspaces = {}  # device id → Workspace
_generation = [0]  # table buffers made in this process (a solver's key holds theirs)
_serial = itertools.count(1)  # set-ups started in this process: never the same twice, across releases


def enabled() -> bool:
    """Whether set-ups go into the workspace: ``MODE`` "workspace" with the solver's
    persistent buffers (``sparse_pressure_gpu.PERSIST``: its tables are the workspace's;
    without them the solver copies every table, the fresh path's)."""
    if MODE not in ("fresh", "workspace"):
        raise ValueError(f"VOXFX_SPARSE_SETUP must be fresh or workspace, not {MODE!r}")
    from . import sparse_pressure_gpu

    return MODE == "workspace" and sparse_pressure_gpu.PERSIST


def workspace():
    import cupy as cp

    device = cp.cuda.runtime.getDevice()  # Device().id without the object
    ws = _workspaces.get(device)
    if ws is None:
        ws = _workspaces[device] = Workspace(cp)
    return ws


def release():
    """Drop every workspace (``sparse_pressure_gpu.release_gpu_solvers``)."""
    _workspaces.clear()


def held_bytes() -> int:
    """Device bytes the workspaces hold between set-ups (their tables, level 1's candidates
    and segments): what ``sparse_memory`` counts as ``WORKSPACE_CELL``."""
    return sum(ws.held_bytes() for ws in _workspaces.values())


def current(level) -> bool:
    """Whether *level*'s tables still hold (not from a workspace, or from its last set-up)."""
    serial = getattr(level, "ws_serial", None)
    if serial is None:
        return True
    ws = _workspaces.get(getattr(level, "ws_device", None))
    return ws is not None and ws.serial == serial


def _grow(cap, n) -> int:
    return cap if n <= cap else max(int(n * 1.25) + 64, int(cap * _GROWTH))


class Workspace:
    """One device's set-up buffers (module notes)."""

    def __init__(self, cp):
        self.cp = cp
        self.device = cp.cuda.Device().id
        self.serial = 0  # of the last set-up started on this workspace (unique in the process)
        self.cand_cap = self.seg_cap = -1
        self.caps = None  # per level C_l
        self.generation = None
        self.arena = self.work = None  # the coarse scratch (``scratch``)
        self.sums = cp.empty(3 * setup._SCAN_TILES, cp.int32)  # inclusive_scan's tile sums, 3 rows
        self.read = cp.empty(16, cp.int32)  # unknowns' sizes, box and extra values
        self.last = None  # (lo, hi, bounds) of the last set-up's level-0 set: an ahead set-up's guess
        self.ahead = [0, 0]  # set-ups launched ahead whose tables held, and those rebuilt (missed)
        self.graphs = Graphs()  # the coarse levels' graphs (sparse_pressure_setup_graph)
        self.guess = None  # the key base an ahead set-up last guessed (``sticky_guess``)
        self.keep = False  # the coarse scratch kept past its set-up (``scratch``)
        self.held = None  # levels ≥ 2 held across set-ups (``sparse_pressure_workspace_kept.HeldLevels``)

    def held_bytes(self) -> int:
        """Bytes of this workspace's buffers (``held_bytes``)."""
        small = self.sums.nbytes + self.read.nbytes + (0 if self.arena is None else self.arena.nbytes)
        if self.caps is not None:
            small += self.sizes.nbytes + self.rec.nbytes + self.kept_bytes
        return int(small + 9 * max(self.cand_cap, 0) + 8 * max(self.seg_cap, 0))

    # ------------------------------------------------------------------ buffers

    def candidates(self, count, segments):
        """Level 1's candidates (*count*) and brick-row segments (*segments*)."""
        cp = self.cp
        if count > self.cand_cap:
            cap = self.cand_cap = _grow(max(self.cand_cap, 0), count)
            self.flag1, self.take1 = cp.empty(cap, cp.uint8), cp.empty(cap, cp.int32)
            self.map1 = cp.empty(cap, cp.int32)
        if segments > self.seg_cap:
            cap = self.seg_cap = _grow(max(self.seg_cap, 0), segments)
            self.seg, self.seg_scan = cp.empty(cap, cp.int32), cp.empty(cap, cp.int32)

    def tables(self, needs):
        """Capacities C_1 … of the coarse levels needing *needs* entries (``table_caps``;
        ``caps[0]`` is 0: level 0's tables are the solver's); a new generation of table
        buffers where they change."""
        caps = table_caps(needs, self.caps)
        if caps == self.caps:
            return caps
        cp = self.cp
        # the old buffers go before the new ones are taken: ours and the solvers bound to them
        self.caps, self.levels, self.generation, self.arena, self.work = None, None, None, None, None
        self.graphs.clear()
        from .sparse_pressure_gpu import drop_workspace_solvers

        drop_workspace_solvers(self.device)
        backend.ensure_fits(tables_bytes(caps), "the sparse FLIP pressure set-up", cp)
        count = len(caps)
        levels, layout, total = [None], [None], 0
        base = np.zeros((count, len(_LEVEL_ARRAYS)), np.int64)  # a kept array's pointer or a scratch offset
        scratch = np.zeros((count, len(_LEVEL_ARRAYS)), bool)
        for level in range(1, count):
            c, k, fk = caps[level], caps[level] - 1, max(caps[level - 1] - 1, 0)
            shapes = {"keys": (k, cp.int64), "fluid": (k, cp.uint8), "position": (k, cp.int32),
                      "ukeys": (k, cp.int64), "flag": (fk, cp.uint8), "take": (fk, cp.int32),
                      "scan": (fk, cp.int32), "around": ((6, k), cp.int32), "diag8": (k, cp.uint8),
                      "cls": (k, cp.uint8), "flags": ((2, k), cp.int32), "scans": ((2, k), cp.int32),
                      "order": (k, cp.int32), "nbr": ((6, c), cp.int32), "up": ((8, caps[level - 1]), cp.int32),
                      "down": ((64, c), cp.int32), "scand": (k if level == 1 else 0, cp.int32)}
            arrays, spots = {}, {}
            for name, (shape, dtype) in shapes.items():
                nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
                if name in _KEPT or nbytes == 0:
                    arrays[name] = cp.zeros(shape, dtype)
                else:  # carved out of the set-up's scratch (``scratch``)
                    spots[name] = (shape, dtype, total)
                    total += -(-nbytes // CARVE_ALIGN) * CARVE_ALIGN
            arrays["diag"] = cp.ones(c, cp.float32)
            levels.append(arrays)
            layout.append(spots)
            for at, name in enumerate(_LEVEL_ARRAYS):
                if name in spots:
                    base[level, at], scratch[level, at] = spots[name][2], True
                else:
                    base[level, at] = arrays[name].data.ptr
        self.kept_bytes = sum(a.nbytes for arrays in levels[1:] for a in arrays.values())
        self.layout, self.scratch_bytes, self.base, self.scratch_mask = layout, total, base, scratch
        # per level cnt (4 each), then spans (6 each), then an ahead set-up's box and extra values
        self.sizes = cp.empty(10 * count + 6 + _EXTRA, cp.int32)
        cnt, span = self.sizes[:4 * count].reshape(count, 4), self.sizes[4 * count:10 * count].reshape(count, 6)
        self.cnt, self.span = [cnt[level] for level in range(count)], [span[level] for level in range(count)]
        self.rec = cp.empty((count, len(_LEVEL_ARRAYS) + 5), cp.int64)  # mgs_tail_levels' record
        self.levels, self.caps = levels, caps  # last: a failure above leaves no half-made tables
        _generation[0] += 1
        self.generation = _generation[0]
        return caps

    def scratch(self, keep=False):
        """The coarse levels' scratch for one set-up (``build``): one allocation, freed when
        the set-up ends (``work`` None) unless *keep* (the coarse levels' graph reads it:
        ``sparse_pressure_setup_graph``) or ``SCRATCH`` "kept"; ``work[l]``, level l's arrays
        (its kept tables and its scratch views, made when first asked for: the one-block
        tail's levels need only their ``pointers``)."""
        if SCRATCH not in ("set-up", "kept"):
            raise ValueError(f"VOXFX_SPARSE_SETUP_SCRATCH must be set-up or kept, not {SCRATCH!r}")
        self.keep = keep or SCRATCH == "kept"
        if self.arena is None:  # kept: the generation's
            self.arena = self.cp.empty(max(self.scratch_bytes, 1), self.cp.uint8)
            self.pointers = self.base + np.where(self.scratch_mask, np.int64(self.arena.data.ptr), np.int64(0))
            self.work = _Work(self.cp, self.levels, self.layout, self.arena)

    def end_scratch(self):
        if not self.keep:
            self.arena = self.work = None

    def sticky_guess(self, guess):
        """The key base an ahead set-up launches on: the last one where *guess* (``guessed_base``
        of the last box, centred in the keys' room) lies within an eighth of that room of it and
        the box leaves half the room free (any base that holds gives the same tables; the same
        base keeps the coarse levels' graph key), else *guess*."""
        from .sparse_multigrid import _MARGIN, KEY_BITS

        room = (1 << KEY_BITS) - 1 - 2 * _MARGIN
        last, lo, hi = self.guess, self.last[0], self.last[1]
        if (last is None or any(abs(a - b) > room // 8 for a, b in zip(last, guess))
                or any(h - low > room // 2 for low, h in zip(lo, hi))):
            self.guess = last = tuple(guess)
        return last

    def solver_tables(self, kept):
        """Per level of a *kept*-level solver its (nbr, diag, up, down) buffers, None where
        the solver keeps its own (level 0's nbr, diag and up: ``Level0.fill``)."""
        out = []
        for level in range(kept):
            t = self.levels[level]
            below = self.levels[level + 1] if level < kept - 1 else None
            out.append((None if t is None else t["nbr"], None if t is None else t["diag"],
                        None if below is None or level == 0 else below["up"], None if below is None else below["down"]))
        return out


class _Work(dict):
    """Per coarse level its arrays for one set-up (``Workspace.scratch``), made when asked
    for: its kept tables and its views of *arena* (no reference back to the workspace)."""

    def __init__(self, cp, levels, layout, arena):
        super().__init__()
        self.cp, self.levels, self.layout, self.arena = cp, levels, layout, arena

    def __missing__(self, level):
        arrays = dict(self.levels[level])
        for name, (shape, dtype, at) in self.layout[level].items():
            arrays[name] = self.cp.ndarray(shape, dtype, memptr=self.arena.data + at)
        self[level] = arrays
        return arrays


def put_values(values, extra) -> None:
    """``values[at:at + 1] = extra[at]`` for each of *extra* (device arrays of one value each): a
    4-byte device-to-device copy in stream order where both are int32 and *values* contiguous (the
    set-up's count and memo test, ``staged_setup``), CuPy's assignment (a copy kernel and a view)
    otherwise. The same bytes; helper h21h: the copy's host cost is below the assignment's on the
    set-up's stretch where a slow host makes the device wait."""
    import cupy as cp

    direct = values.dtype == cp.int32 and values.flags.c_contiguous
    for at, value in enumerate(extra):
        if direct and value.dtype == cp.int32 and value.size == 1:
            (values.data + 4 * at).copy_from_device_async(value.data, 4)
        else:
            values[at:at + 1] = value


def tables_bytes(caps) -> int:
    """Device bytes of ``Workspace.tables`` for capacities *caps*."""
    total = 0
    for level in range(1, len(caps)):
        total += caps[level] * (8 + 1 + 4 + 8 + 24 + 1 + 1 + 8 + 8 + 4 + 24 + 4 + 256 + 4) + caps[level - 1] * (9 + 32)
    return int(total)


# ---------------------------------------------------------------------- the set-up


def unknowns(grid, kind, extra, ahead=False, before_read=None):
    """``sparse_pressure_setup.unknowns`` into the workspace: the same kernels and read; level
    0's tables are made where they are needed (``Level0.fill``: straight into the solver's
    buffers). *ahead* (a multigrid solve follows, ``AHEAD`` on, a set-up before): the coarse
    levels are launched before the read, which brings their sizes back too
    (``sparse_pressure_ahead``); there *before_read* (``sparse_pressure_solve_ahead.Ahead``) makes
    the read, the solve queued behind it."""
    import cupy as cp

    ws = workspace()
    size = int(grid.size)
    ws.serial = next(_serial)
    ahead = (ahead and AHEAD and ws.last is not None and ws.caps is not None and len(extra) <= _EXTRA
             and len(ws.last[2]) == len(ws.caps))
    # level 0's arrays of grid.size entries, made each set-up (one allocation for what the
    # unknowns keep, one for the scratch, freed once unk_order is queued): kept in the
    # workspace they held 45 B a pool cell between substeps (×1.5 growth), the largest part
    # of its memory
    cells, position, diag8 = carve(cp, {"cells": (cp.int64, size), "position": (cp.int32, size),
                                        "diag8": (cp.uint8, size)}).values()
    in_set, flags, scans = carve(cp, {"in_set": (cp.int64, size), "flags": (cp.int32, (3, size)),
                                      "scans": (cp.int32, (3, size))}).values()
    box_init = [2 ** 31 - 1] * 3 + [-(2 ** 31)] * 3 + [0] * len(extra)
    every = keep_every()  # levels ≥ 2 held across set-ups (sparse_pressure_workspace_kept)
    if ahead:  # the sizes land in level 0's cnt row (m_red, m, set size at 1, 2, 3), then the spans, box, extra
        count = len(ws.caps)
        lo, hi, bounds = ws.last
        guess = guessed_base(lo, hi)
        if graph_enabled() or every:  # the coarse levels' graph key and the held levels hold while the base does
            guess = ws.sticky_guess(guess)
        keep = held_levels.decide(ws, grid, guess, bounds, every)
        read = ws.sizes[:10 * count + 6 + len(extra)]
        init = np.array([0] * (4 * count) + [setup._NO_SPAN] * (6 * count) + box_init, np.int32)
        if keep:
            held_levels.rows(init, ws, count)
        read.set(init)
        sizes, box, values = ws.cnt[0][1:], read[10 * count:10 * count + 6], read[10 * count + 6:]
    else:
        read = ws.read[:9 + len(extra)]
        read.set(np.array([0] * 3 + box_init, np.int32))
        sizes, box, values = read[:3], read[3:9], read[9:]
    put_values(values, extra)
    setup.classify(grid, kind, size, diag8, flags, box)
    setup.inclusive_scan(flags, scans, ws.sums)
    setup._U.launch("unk_order", size, (flags, scans, np.int32(size), sizes, position, cells, in_set))
    del in_set, flags, scans  # freed in stream order: before the coarse levels' scratch is taken
    level = Level0.__new__(Level0)
    level.xp, level.position, level.slot_coords, level.prebuilt = cp, position, grid.slot_coords, None
    level._tables_args = (cells, sizes, grid.nbr, np.int32(size), position, diag8)
    level._prolong_args = level._nbr = level._diag = None
    level.candidates = 0  # level 1's candidates (_launch_levels): brick_words
    level.ws_serial, level.ws_device = ws.serial, ws.device
    level.mg_every, level.mg_keep = every, False
    if ahead:
        level.ws_generation, level.bounds = ws.generation, bounds
        level.mg_keep, level.mg_base = keep, guess
        _launch_levels(grid, kind, ws, level, guess, bounds, size, keep)
        host = read.get() if before_read is None else before_read(level, read)  # the one host read: every size
        cnt_h = host[:4 * count].reshape(count, 4)
        m_red, m, n_set = (int(v) for v in cnt_h[0, 1:])
        box = [int(v) for v in host[10 * count:10 * count + 6]]
        lo, hi = box[:3], box[3:]
        level.extra = tuple(int(v) for v in host[10 * count + 6:])
        bounds = setup.level_bounds(n_set)
        held = m > 0 and tables_stand(ws.caps, lo, hi, bounds, guess)
        if held and keep:  # the V-cycle's level count must be the rebuild's (else built again, levels ≥ 2 too)
            held = held_levels.count_holds(ws, cnt_h, host[4 * count:10 * count].reshape(count, 6), count)
        if keep and not held:  # a kept launch that missed: built again after the read, levels ≥ 2 too
            ws.held, level.mg_keep = None, False
        ws.ahead[0 if held else 1] += 1
        if held:
            level.prebuilt = host[:10 * count]
        else:  # missed: the tables as the two-read path builds them (build, after its read)
            sizes = cp.asarray(np.array([m_red, m, n_set], np.int32))
            level._tables_args = (cells, sizes) + level._tables_args[2:]
    else:
        host = read.get()  # the host read: m and the set's size bound the tables
        m_red, m, n_set = (int(v) for v in host[:3])
        lo, hi = [int(v) for v in host[3:6]], [int(v) for v in host[6:9]]
        level.extra = tuple(int(v) for v in host[9:])
        bounds = setup.level_bounds(n_set)
    if level.prebuilt is None:
        ws.tables([b + 1 for b in bounds[1:]])
        level.ws_generation, level.bounds = ws.generation, bounds
    if m > 0:  # the next set-up's guess (its tail test on these bounds)
        ws.last = (lo, hi, bounds)
    level.m, level.m_red, level.cells, level.level0_box = m, m_red, cells[:m], (lo, hi, n_set)
    return level


def build(grid, kind, level0):
    """``sparse_pressure_setup.build`` for *level0* from ``unknowns`` above: the same
    launches (coarse bounds C_l − 1), into the workspace, unless ``unknowns`` launched them
    ahead; (levels, up, down), views of its buffers (``up[0]`` made when read: ``_Up``)."""
    ws = workspace()
    level0._check()
    if level0.ws_generation != ws.generation:
        raise RuntimeError("the sparse pressure set-up's workspace was rebuilt since these unknowns were found")
    count = len(level0.bounds)
    sizes, level0.prebuilt = level0.prebuilt, None
    if sizes is None:
        lo, hi, n0 = level0.level0_box
        every = getattr(level0, "mg_every", 0)
        base = held_levels.base_for(ws, lo, hi) if every else setup._level0_base(lo, hi)
        while True:  # once, or twice where a kept set-up's level count is not the rebuild's
            keep = held_levels.decide(ws, grid, base, level0.bounds, every)
            init = np.concatenate([np.zeros(4 * count, np.int32), np.full(6 * count, setup._NO_SPAN, np.int32)])
            init[:3] = (n0, level0.m_red, level0.m)
            if keep:
                held_levels.rows(init, ws, count)
            ws.sizes[:10 * count].set(init)
            _launch_levels(grid, kind, ws, level0, base, level0.bounds, level0.m, keep)
            sizes = ws.sizes[:10 * count].get()  # the one host sync
            if not keep or held_levels.count_holds(ws, sizes[:4 * count].reshape(count, 4),
                                                   sizes[4 * count:].reshape(count, 6), count):
                break
        level0.mg_keep, level0.mg_base = keep, base
    cnt_h, span_h = sizes[:4 * count].reshape(count, 4), sizes[4 * count:].reshape(count, 6)
    extents = setup.level_extents(cnt_h, span_h, count)
    kept = setup.levels_kept(extents, count)
    held_levels.commit(ws, grid, level0, cnt_h, span_h, count, kept)
    lazy = env_choice("VOXFX_SPARSE_SETUP_VIEWS", VIEWS, default="lazy") == "lazy"
    levels, up, down = [level0], [], []
    for level in range(1, kept):
        t = ws.levels[level]
        m, m_red = int(cnt_h[level, 2]), int(cnt_h[level, 1])
        if lazy:
            levels.append(_CoarseLevel(m, m_red, t, ws.generation))
            if level > 1:
                up.append(partial(_rows, t["up"], levels[level - 1].m + 1))
            down.append(partial(_rows, t["down"], m + 1))
            continue
        coarse = _Level(m, m_red, t["nbr"][:, :m + 1], t["diag"][:m + 1], None)
        coarse.ws_generation = ws.generation
        levels.append(coarse)
        if level > 1:
            up.append(t["up"][:, :levels[level - 1].m + 1])
        down.append(t["down"][:, :m + 1])
    return levels, (_Up(up, level0) if kept > 1 else []), _Views(down)
