"""The sparse GPU pressure solver's buffer sizes (``sparse_pressure_gpu.py``): strides that
grow geometrically and never shrink within a process, vectors carved out of one
allocation (``sparse_pressure_gpu.PERSIST``), the device bytes a solver takes; and
``BufferLoads``, a base of ``SparsePressureSolverGPU``: how a solve's tables, sizes and state
reach its buffers (copied each solve, or with ``PERSIST`` only where new: a set-up
workspace's level 0 filled in place, one write for the state and sizes, one read back)."""

from __future__ import annotations

import numpy as np

from .pressure_gpu import _MAX_BLOCKS

_HEADROOM = 1.25  # buffers take this much more than the solve needs
_GROWTH = 1.5  # a solver that outgrows its strides: at least this factor more
_ALIGN = 64  # float32 entries (256 B) between the starts of carved vectors


def grown_strides(needs, old=None, headroom=_HEADROOM, growth=_GROWTH) -> list:
    """Buffer strides for levels that need *needs* entries: *headroom* more than needed plus
    64; where an *old* solver of as many levels had strides, a level keeps its old stride
    while it fits and otherwise grows to at least *growth* times it (``PERSIST``)."""
    fresh = [int(int(n) * headroom) + 64 for n in needs]
    if old is None or len(old) != len(fresh):
        return fresh
    return [int(s) if int(n) <= int(s) else max(f, int(int(s) * growth)) for n, s, f in zip(needs, old, fresh)]


# How the set-up workspace's coarse capacities grow (``table_caps``; issue 24: each new
# generation of its tables is a new pressure solver, ~10 ms of host time at 8M): "level" — each
# level on its own (``grown_strides``: the +64 gives a deeper level more room for its size, so it
# outgrows a few substeps after level 1, another generation), a new level count fresh; "together"
# — while every level fits, as they are; once one outgrows its capacity, every level grows as one
# (at least ``_GROWTH`` times): one generation where "level" took one per level; a new level count
# (a new generation either way) every level fresh, as "level". The same tables (the kernels pad
# past the sets' sizes): the same pressure. Read at each call. H100 80GB HBM3, 8M Fast frames
# (bench/flip_sparse.py --stages, session 15, i24b): "level" built two solvers in frame 10 (levels
# 1–2 outgrew, then level 3 the next substep, 3,370 over 3,332: generations 1→2→3), "together" one
# — the frame's pressure stage 28.99 → 19.01 ms of host time, its step 40 → 32 ms; the capacities
# after it the same on levels 1–3, the deeper ones < 0.1 MB larger. At a new level count
# "together" kept the levels' room before (i24b2 changed it), up to 1.5× a level's fresh capacity
# where "level" went back to 1.25× its need: a CPU model of the 1M spreading liquid's set growing
# 2.2× over 36 substeps from each start (tests/unit/test_flip_sparse_pressure_buffers.py) held up
# to 5.5 MiB (20%) more tables than "level" after a count change, the likely part of
# tests/gpu/test_liquid_memory_check_gpu.py's frame-11 peak over its estimate with this switch on
# (242.05 against 231.62 MiB, H100, session 15 call 2, with BLOCK "singles", which allocates
# nothing); now at most 2.1 MiB (5.2%) more at any substep: the deeper levels grown with level 1.
# "together" the default since session 17 (H100, 8M Fast frames, two processes a way: frame 10
# built one solver, not two — generations 1→2 alone, capacities [313800, 39309, 4998, 708, 172,
# 106, 97] —, its excess over frames 9 and 11 9.5 / 11.5 → 6 / 5.5 ms; the memory check and the
# workspace GPU files passed with it, the spreading liquid under its estimate with
# MG_DENSE_ROWS "bound").
CAPS = "VOXFX_SPARSE_SETUP_CAPS"
CAPS_MODES = ("together", "level")
# The set-up workspace's coarse capacities where ``table_caps`` sizes them afresh (its first
# set-up, a new level count; issue 24, session 18, h18a): "grown" (default) — the capacities its
# first growth would give, ``_GROWTH`` times ``grown_strides``' (a level's need × 1.875 + 96); "fresh"
# — ``grown_strides``' (× 1.25 + 64), the way before. The 8M dam break's liquid spreads: its
# level-0 set grew 1.29× over Fast frames 1–10 (level 1 needing 167,309 → 215,627 entries), so
# "fresh"'s [209200, 26206, 3332, 472, 115, 71, 65] were outgrown in frame 10 — a new generation of
# tables and a new pressure solver there (+4–6 ms of host time: frame 10 at 33–34 ms against its
# neighbours' 28–31, H100, session 18 call 1). "grown" starts at [313800, 39309, 4998, 708, 172,
# 106, 97], the very capacities "fresh" (with ``CAPS`` "together") grew to in frame 10. Measured
# (H100 80GB HBM3, driver 580.159.04, session 18, h18a's call, bench/setup_first_caps_call.sh; 8M
# Fast frames with --stages, the ways in separate processes alternating, two each): "fresh" built
# a generation and a solver in frame 10, its pressure stage 16.91 / 19.34 ms of host time against
# 12.52 / 13.27 in frame 9; "grown" none after frame 0, 12.78 / 12.84 against 12.86 / 12.88; frame
# 10 34 / 40 → 31 / 31 ms (user frame; frames 9 and 11: 31, 33 / 35, 35 → 30, 32 / 30, 31), the
# same CG iterations every frame. The cost, counted: the coarse tables kept 73.1 →
# 109.6 MiB and the set-up's coarse scratch 17.4 → 26.0 MiB (``tables_bytes``) in frames 0–9
# (3–5% of those frames' pool), the same bytes from frame 10 on; a liquid that spreads 1.5× holds
# the same tables either way from "fresh"'s first growth on (one generation of the chain ahead:
# C × 1.5 each time), one that never spreads 1.5× its start's room more than "fresh" (at most 1.5×
# its tables). The spreading 1M liquid's in-use peaks (bench/_memory_check_probe.py, same call):
# +6.5 MiB in frames 0–3, +15.6 in frame 4 (its level-count change, sized afresh), +7.6 in 5–6,
# −2.6 in 7 ("fresh" grew there), the same in 8–11 (frame 11 213.6 MiB against the frame check's
# 231.6); tests/gpu/test_liquid_memory_check_gpu.py passes. The same tables up to each level's
# size (the kernels pad past the sets' sizes and read them from the device): the same pressure bit
# for bit (tests/gpu/test_flip_sparse_pressure_workspace_gpu.py). Read at each sizing.
FIRST = "VOXFX_SPARSE_SETUP_FIRST_CAPS"
FIRST_MODES = ("grown", "fresh")


def first_caps(mode=None) -> str:
    """``FIRST``'s way (*mode* wins over the environment)."""
    from ..settings import env_choice

    return env_choice(FIRST, FIRST_MODES, mode)


def table_caps(needs, old=None, mode=None, first=None) -> tuple:
    """Capacities (0, C_1, …) of the set-up workspace's levels for coarse levels needing
    *needs* entries: ``grown_strides`` of *needs* against *old*'s C_1 … (the capacities the
    workspace holds, or None), each level on its own or, ``CAPS`` "together" (*mode*), every
    level grown once one outgrows; sized afresh (no *old*, another level count) as ``FIRST``
    (*first*) says. C_0 is 0 (level 0's tables are the solver's)."""
    from ..settings import env_choice

    held = None if old is None else tuple(int(c) for c in old[1:])
    if held is None or len(held) != len(needs):  # a first sizing or a new level count: every level afresh
        fresh = grown_strides(needs)
        if first_caps(first) == "grown":
            fresh = [int(f * _GROWTH) for f in fresh]
        return (0,) + tuple(fresh)
    if env_choice(CAPS, CAPS_MODES, mode) == "level":
        return (0,) + tuple(grown_strides(needs, held))
    if all(int(n) <= c for n, c in zip(needs, held)):
        return (0,) + held
    return (0,) + tuple(max(f, int(c * _GROWTH)) for f, c in zip(grown_strides(needs), held))


def vector_layout(strides, smooth) -> tuple:
    """(lengths, levels) of ``PERSIST``'s vectors in the arena's order: level 0's b, x, r, z, d, q (and
    its r for the restriction where levels past 0 exist), then each coarser level's x and b (and its r
    below the coarsest), the brick smoother's x on level 0 where *smooth*; each vector's length is its
    level's stride. The solve ahead's ahead_sizes writes each one's 0 at its level's m
    (``sparse_pressure_solve_ahead.sentinel_table``)."""
    last = len(strides) - 1
    levels = [0] * (6 + (1 if last else 0))
    for level in range(1, last + 1):
        levels += [level] * (3 if level < last else 2)
    levels += [0] if smooth else []
    return [int(strides[level]) for level in levels], levels


def carve(xp, lengths, dtype, align=_ALIGN):
    """(arena, views): one zeroed allocation holding arrays of *lengths* entries, each view
    starting *align* entries apart at least (``PERSIST``: one fill zeroes them all)."""
    starts, total = [], 0
    for n in lengths:
        starts.append(total)
        total += -(-int(n) // align) * align
    arena = xp.zeros(max(total, 1), dtype)
    return arena, [arena[at:at + int(n)] for at, n in zip(starts, lengths)]


# How many of the coarsest level's unknowns a solver's dense inverse (``sparse_multigrid.MG_DENSE``)
# holds rows for (issue 24, session 15, i24b3): "stride" (default) — its stride, G stride² floats
# and mg_dense_inverse's scratch stride² + 2·stride doubles; "bound" — ``dense_rows``: G of that
# many rows of the stride (its layout, row j at j·stride, as before) and the scratch for that many
# unknowns, a solver whose coarsest level outgrows them replaced (``fits``), and a solve launched
# ahead on one sized nothing (``ahead_limits``). The coarsest level spans fewer than MG_MIN_SIDE (4)
# cells on its longest axis (≤ 27 unknowns; a thin sheet's ends empty: its coarse cells lack fluid
# children, tests/unit/test_flip_sparse_mg_dense.py) or, "2", is the one above such a level with at
# most DENSE_DROP_UNKNOWNS (128); its stride is the set-up workspace's capacity of that level (bounded by
# an eighth of the level above's set, ×1.25 + 64, grown 1.5× — with ``CAPS`` "together" as level 1
# grows): the spreading 1M liquid's frame 11 (tests/gpu/test_liquid_memory_check_gpu.py) held G and
# scratch of 13.0 MiB ("level", stride 1066) and 29.3 MiB ("together", 1599) for ≤ 128 unknowns;
# "bound" 0.78 MiB (128 rows, the scratch in shared memory). The same G and pressure bit for bit
# (the kernels read m rows; tests/gpu/test_flip_sparse_mg_dense_gpu.py). Read when a solver is
# built. "bound" is the default (session 16, call 1, H100 80GB HBM3: the dense, pressure, solve-ahead,
# persist and memory-check GPU files pass with it, alone and with ``CAPS`` "together"; the probe's
# frame 11 peak 225.5 → 213.0 MiB, with "together" 242.1 → 213.6 under the 231.6 estimate); "stride"
# the way before, for A/B.
DENSE_ROWS = "VOXFX_SPARSE_MG_DENSE_ROWS"
DENSE_ROWS_MODES = ("bound", "stride")
_DENSE_ROWS_MIN = 128  # sparse_multigrid.DENSE_DROP_UNKNOWNS: the coarsest level's unknowns at most


def dense_rows(need, stride, mode=None) -> int:
    """Rows of a solver's dense inverse (``DENSE_ROWS``, *mode*) for a coarsest level of *stride*
    needing *need* entries (m + 1): the stride, or ("bound") ``grown_strides``' headroom over m
    and at least ``_DENSE_ROWS_MIN``, within the stride."""
    from ..settings import env_choice

    if env_choice(DENSE_ROWS, DENSE_ROWS_MODES, mode) == "stride":
        return int(stride)
    return min(int(stride), max(_DENSE_ROWS_MIN, grown_strides([int(need)])[0]))


def ahead_limits(strides, rows=None) -> list:
    """Per level the bound ahead_sizes holds m + 1 under (``sparse_pressure_solve_ahead``): the
    strides, the coarsest level's at most its dense inverse's *rows* + 1 (None: no dense inverse)."""
    limits = [int(s) for s in strides]
    if rows is not None:
        limits[-1] = min(limits[-1], int(rows) + 1)
    return limits


def dense_scratch_bytes(stride) -> int:
    """Bytes of mg_dense_inverse's float64 scratch for a coarsest level of *stride*: stride² + 2·stride
    doubles (its Gauss-Jordan matrix, pivot row and column; ``_dense_setup``)."""
    s = int(stride)
    return 8 * (s * s + 2 * s)


def dense_bytes(stride, shared_limit=0, rows=None) -> int:
    """Device bytes of a solver's dense inverse of its coarsest level (``sparse_multigrid.MG_DENSE``,
    ``SparsePressureSolverGPU._dense_setup``): G, *rows* (``dense_rows``; None: the stride) × stride
    float32, and the scratch for *rows* unknowns (``dense_scratch_bytes``) in global memory where it
    passes the device's *shared_limit* bytes of shared memory a block. With rows = stride quadratic
    in the stride, which for a workspace solver is the set-up's capacity of that level, not its
    unknowns (issue 24, session 15, i24b3: the spreading 1M liquid of
    tests/gpu/test_liquid_memory_check_gpu.py keeps 4 levels in frame 11, its coarsest of ≤ 128
    unknowns; ``CAPS`` "together" had grown that level's capacity with level 1's, 1066 → 1599: G
    and scratch 13.0 → 29.3 MiB, the 16.56 MiB it held and peaked above "level" with the tables'
    0.29; H100, session 15 call 3, bench/_memory_check_probe.py)."""
    s = int(stride)
    rows = s if rows is None else min(s, int(rows))
    scratch = dense_scratch_bytes(rows)
    return 4 * rows * s + (0 if scratch <= int(shared_limit) else scratch)


def span_table_bytes(slots) -> int:
    """Device bytes of the brick smoother's span table for a pool of *slots* slots
    (``sparse_pressure_brick_smooth._span_tables``: ``SPAN_WORDS`` int32 a slot, grown to 1.25× the slots)."""
    from .sparse_multigrid_bricks import SPAN_WORDS

    slots = int(slots)
    return 4 * SPAN_WORDS * max(1, slots + slots // 4) if slots > 0 else 0


def brick_smooth_bytes(stride0, slots=0) -> int:
    """Device bytes the brick smoother adds to a solver of level-0 stride *stride0*
    (``sparse_multigrid_bricks.SMOOTHER`` "brick", the default; issue 24, h20d): ``brick_x`` (4 B a
    level-0 entry), its r·z partials (8 B a block of ``SMOOTH_GRID_CELLS`` entries, a bound) and the
    span table of *slots* pool slots (``span_table_bytes``: 0 where the pool is not known yet — the
    table is grown where a level 0 is loaded, ``_span_tables``). At 8M (stride 1.27M, 3,198 slots):
    5.1 MB + 1.0 MB, the pool peak's +5 MiB (902 → 907 MiB, H100, bench/RESULTS.md h20a)."""
    s = int(stride0)
    return 4 * s + 8 * (s // 256 + 1) + span_table_bytes(slots)


def solver_memory_bytes(strides, preconditioner="mg", level0_nbr=True, dense=0, shared_limit=0,
                        dense_rows=None, brick_smooth=False, slots=0) -> int:
    """Device bytes of a solver with these level strides: per level nbr (24 B; on level 0 only
    with *level0_nbr*: ``sparse_pressure_vcycle.NBR_TABLE``), diag (4 B), b, x, r (12 B), the
    tables up (32 B) and down (256 B per coarse entry); the CG's six vectors on level 0; with
    *dense* (the V-cycle's ``dense_mode``, "mg" of two levels on) the coarsest level's dense
    inverse (``dense_bytes``, *shared_limit* the device's shared memory a block, its *dense_rows*);
    with *brick_smooth* (level 0 smoothed brick by brick: a workspace solver's, "mg" of two levels
    on) ``brick_smooth_bytes`` of level 0's stride and the pool's *slots*."""
    total = (6 * 4 * strides[0] if level0_nbr else 0) + 28 * strides[0]
    if preconditioner == "mg":
        total += 4 * strides[0]
        for s in strides[1:]:
            total += s * (28 + 12 + 256) + 32 * strides[0]
        if dense and len(strides) > 1:
            total += dense_bytes(strides[-1], shared_limit, dense_rows)
        if brick_smooth and len(strides) > 1:
            total += brick_smooth_bytes(strides[0], slots)
    return int(total + 2 * 8 * _MAX_BLOCKS + 1024)


class _Buffers:
    """One level's device buffers; *tables* (nbr, diag) where the caller owns them
    (``sparse_pressure_workspace``); without *nbr* no nbr rows (None: level 0 of a solver whose
    passes find their neighbours from the bricks, ``sparse_pressure_vcycle.NBR_TABLE``)."""

    def __init__(self, cp, stride, tables=None, nbr=True):
        self.stride = int(stride)
        if tables is None:
            self.nbr = cp.zeros((6, self.stride), cp.int32) if nbr else None
            self.diag = cp.ones(self.stride, cp.float32)
        else:
            self.nbr, self.diag = tables
        self.b = self.x = self.r = self.up = self.down = None


class BufferLoads:
    """A solve's tables, sizes and state into the solver's buffers (module text); the solver
    (``sparse_pressure_gpu.SparsePressureSolverGPU``) owns the buffers these fill."""

    def _load(self, levels, vcycle):
        """Copy the tables into the buffers, zero the vectors (sentinels 0), set sizes."""
        cp = self.cp
        sizes = []
        for level, (L, B) in enumerate(zip(levels, self.levels)):
            n = L.m + 1
            if B.nbr is not None:
                B.nbr[:, :n] = L.nbr
            B.diag[:n] = L.diag
            for a in (B.b, B.x, B.r):
                if a is not None:
                    a.fill(0)
            if vcycle is not None and level < len(levels) - 1:
                B.up[:, :n] = vcycle.up[level]
                B.down[:, :levels[level + 1].m + 1] = vcycle.down[level]
            sizes += [L.m_red, L.m]
        for a in (self.b, self.x, self.d, self.q):
            a.fill(0)
        self.sizes[...] = cp.asarray(np.array(sizes, np.int32))

    def _load_persist(self, levels, vcycle, max_iterations):
        """``_load`` and the state's reset for ``PERSIST``: one fill zeroes every vector,
        the tables are copied where they are not the arrays loaded last, one write sets the
        state and the sizes."""
        self.vectors.fill(0)
        if self.generation is not None:  # the coarse tables built in place, level 0's filled here
            if any(getattr(L, "ws_generation", None) != self.generation for L in levels):
                raise RuntimeError("sparse pressure tables of another set-up workspace than the solver's")
            if self._filled is not levels[0]:
                B = self.levels[0]
                up = len(levels) > 1 and not self.brick_transfers[1]  # the brick prolongation reads no up[0]
                levels[0].fill(B.nbr, B.diag, B.stride, B.up if up else None)  # nbr None: the diag alone
                self._brick_load(levels[0])
                self._filled = levels[0]
            else:
                self.tables_skipped += 1
            self._set_state(levels, max_iterations)
            self._brick_span_table()
            return
        tables = [(L.nbr, L.diag) + ((vcycle.up[level], vcycle.down[level])
                                     if vcycle is not None and level < len(levels) - 1 else ())
                  for level, L in enumerate(levels)]
        same = self._loaded is not None and len(self._loaded) == len(tables) and all(
            len(a) == len(b) and all(x is y for x, y in zip(a, b)) for a, b in zip(self._loaded, tables))
        if not same:
            for level, (L, B, t) in enumerate(zip(levels, self.levels, tables)):
                n = L.m + 1
                if B.nbr is not None:
                    B.nbr[:, :n] = t[0]
                B.diag[:n] = t[1]
                if len(t) > 2:
                    B.up[:, :n] = t[2]
                    B.down[:, :levels[level + 1].m + 1] = t[3]
            self._loaded = tables
        else:
            self.tables_skipped += 1
        self._set_state(levels, max_iterations)

    def _set_state(self, levels, max_iterations):
        values = [0, 0, 0, max_iterations]
        for L in levels:
            values += [L.m_red, L.m]
        self.ints.set(np.array(values, np.int32))

    def read_control(self):
        """(state, scalars) on the host by one read (``PERSIST``; ``run_blocks``' check)."""
        host = self.control.get()
        return host[8:].view(np.int32)[:4], host[:8]
