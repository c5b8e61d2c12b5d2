"""The sparse pressure solve launched ahead of its set-up's host read (issue 24: the device
idle after that read). With the set-up launched ahead (``sparse_pressure_workspace.AHEAD``) a
solve reads the unknowns' and every level's sizes once; the host then spent ≈0.27 ms (the warm
start's x₀, ``solver_tables`` and the V-cycle's build, the solver lookup, ``_load_persist``: the
fill, level 0's tables, the brick table, the state) with nothing queued on the device, plus the
gathers' gap before the start graph (H100, 8M dam break, bench/flip_sparse_pressure_timeline.py).

Here, ``SWITCH`` on, the solve goes before that read, on a guess:

1. the solver of the last solve (its strides carry 25% headroom, ``grown_strides``) and so its
   level count, where it is still cached, of the set-up workspace's generation, and the last
   solve had no sealed region (their right-hand side is made after the read);
2. its sizes copied from the workspace's counts into the solver's control ints on the device
   (``ahead_sizes``: all 0 where a level's count passes its stride — then nothing queued
   touches an entry past a sentinel, the start stops at once — or where the V-cycle the host
   will keep has another level count than the solver's: ``ahead_depth_reference``, below);
3. level 0's tables (``unk_tables_strided``, or its diag alone: ``unk_diag_strided`` — or, by
   default, that diag written by ``unknowns_gather``: ``GATHER_SWITCH``), b and x₀
   (``unknowns_gather``) over the stride, reading those sizes; the brick transfers' table from
   pinned memory; the last solve's values left in the vectors but the sentinels, which ahead_sizes
   zeroes (``ZERO``);
4. the start graph and as many single iterations as the last solve took (``PREDICT``);
5. the read itself as a copy into pinned memory queued before all of it, waited for by an
   event: the host goes on while the device runs the solve.

After the read the solve takes the launches (``taken``) where the guess stands — the set-up's
tables stood (``sparse_pressure_ahead.tables_stand``), ahead_sizes kept the sizes (its level
count test, checked again on the host's copy of the read), no sealed region, the solver the lookup
returns is the guessed one (so the level count and the strides hold), the same b, x₀,
tolerance and iteration limit — and otherwise solves the old way (the solver's vectors, tables
and state loaded again), as ``sparse_pressure_ahead`` rebuilds a set-up whose guess missed. The
same kernels on the same values in the same order: the same iterations and pressure bit for bit
(tests/gpu/test_flip_sparse_pressure_solve_ahead_gpu.py; the two kernels on the host,
tests/unit/test_cuda_sparse_pressure_solve_ahead_host.py).

The level count's test (issue 24, h19b). When the hierarchy gains or loses a level (the 8M Fast
frame 6: the V-cycle 6 → 5 levels, a new solver built), the guess is the last solve's solver of
the old count and the host solves on another one after the read; before, ahead_sizes kept the
sizes, so the old solver's start and its predicted iterations (~11 at 8M: ~2.5 ms of device) ran
for nothing ahead of the new solver's launches. ahead_sizes now computes on the device the count
the host will keep from the same counts and spans (``sparse_pressure_workspace.build``'s
``level_extents`` and ``levels_kept``, then ``VCycle._dense_levels``' MG_DENSE "2" drop:
``ahead_depth_reference`` writes the rule out) and zeroes the sizes where it is not the solver's:
the start stops at once (b = 0), the iterations queued are no-ops. The host checks the same rule
on its copy of the read before it takes the launches, so a rule that disagreed with the host's
could cost a miss, never a wrong solve. Host harness: the count equals the host's on random
counts and spans (with int32 wraps), the sizes equal the reference's.

``SWITCH``: ``VOXFX_SPARSE_SOLVE_AHEAD`` "1" (default) or "0" (the solve queued after the read);
read at each solve. 8M dam break on an H100 (session 14, i24s7's call 1; the two alternating each
substep in one process, 11–12 CG iterations either way, the same bits): ``bench/flip_sparse.py
--row 8m --steps 8 --warm 2`` pressure 4.99 → 4.63 ms, substep 7.95 → 7.52 ms (medians of 8; call 2,
the switch the default: 4.85 → 4.53 ms and 7.63 → 7.45 ms);
``bench/flip_sparse_pressure_timeline.py`` pressure 4.24 → 3.93 ms (medians of 6, every solve
launched ahead and taken): in its first substep a way the device had the unknowns' sizes at 0.81 ms
and then waited for the host until ~1.1 ms (load) and 1.45 ms (the start); ahead, the start
followed the coarse levels at once and the last iteration ended at 3.92 ms instead of 4.31 ms.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..grid.launch import THREADS, Kernels
from ..settings import env_choice
from .pressure import MG_MIN_SIDE

SWITCH = "VOXFX_SPARSE_SOLVE_AHEAD"
MODES = ("0", "1")
DEFAULT = "1"
# How a solve launched ahead clears what the last solve left in the guessed solver's vectors (h21f):
# "sentinels" (default) — ahead_sizes, once it has written the sizes, writes 0 at each vector's
# level's m (the sentinel every neighbour that is not an unknown points to); every entry below m is
# written by the start or the iteration before it is read (every iteration reads only what it or
# the start wrote — the last iteration's values otherwise — so no entry but the sentinels reads the
# fill's zeros); "fill" — ``vectors.fill(0)`` over the whole arena first (~41 MB at 8M: 8 vectors
# of level 0's 1.27M-entry stride and the coarse levels'). A guess that misses is solved the old
# way, its load filling every vector as before. The same iterations and pressure bit for bit
# (tests/gpu/test_flip_sparse_pressure_solve_ahead_gpu.py: "1" against "0", whose solves fill; the
# kernel on the host, tests/unit/test_cuda_sparse_pressure_solve_ahead_host.py; the GPU test with every
# vector poisoned with NaN before each launch ahead). Read at each solve. Measured with GATHER_SWITCH below
# (h21f's call, H100 80GB HBM3): the launches before the start graph 0.077 → 0.046 ms of device.
ZERO = "VOXFX_SPARSE_AHEAD_ZERO"
ZEROS = ("sentinels", "fill")
# What a solve launched ahead gathers (h21f): "folded" (default) — unknowns_gather writes level 0's
# diag too (unk_diag_strided's values: that launch, and its read of the cells, dropped); "guess" —
# that, and where the warm start would make x₀ by warm_guess alone (new cells "zero", no relaxation:
# ``sparse_pressure_warm.carried_guess``) the gather reads the carried pressure and takes warm_guess's
# value of it (finite, else 0) at each unknown: no pass over every flat cell, no flat x₀ (a ``Guess``,
# made flat only for a solve that missed); "apart" — unk_diag_strided, then the gather as before.
# Selections and copies only: the same diag, x₀ and pressure bit for bit (host harness; GPU test).
# Read at each solve. Measured (h21f's call, H100 80GB HBM3, 8M, "guess" with ZERO "sentinels"
# against "apart" with "fill", alternating each substep in one process): the solve ahead's launches
# before its start graph 0.077 → 0.046 ms of device, 0.146 → 0.099 ms of host, 5 → 3 launches. "guess"
# is opt-in: its processes held pool peaks of 998–1060 MiB in 3 of 4 (with solver_tables' memo then
# keeping the set-up's own kind, since reverted) against main's 907 in all — it changes which
# allocations the pool holds when (no warm_guess array; the old carried array held to the solve's
# end); not isolated. "folded" allocates as "apart" does.
GATHER_SWITCH = "VOXFX_SPARSE_AHEAD_GATHER"
GATHERS = ("folded", "guess", "apart")
_K = Kernels("flip_sparse_pressure_ahead.cu", (), THREADS)
_last = {}  # device id → (the last solve's solver (weakly), whether the last set-up had sealed regions)
_pinned = {}  # device id → (read buffer int32, brick words uint64, event): pinned, reused each solve
_READ_WORDS = 256
counts = {"launched": 0, "taken": 0, "missed": 0}  # in this process (tests, benches)


def gather_mode(given=None) -> str:
    """``GATHER_SWITCH``'s way: *given*, else ``VOXFX_SPARSE_AHEAD_GATHER``, else "folded"."""
    return env_choice(GATHER_SWITCH, GATHERS, given)


class Guess:
    """x₀ of a warm solve launched ahead whose gather took it from the carried pressure
    (``GATHER_SWITCH`` "guess"): the flat array warm_guess makes of it (``flat``) only where a solve that missed needs
    it (``flat_guess``); a taken solve compares it by identity, as the array before."""

    def __init__(self, carried):
        self.carried, self._flat = carried, None

    def flat(self):
        if self._flat is None:
            from .sparse_pressure_cells import warm_guess

            self._flat = warm_guess(self.carried)
        return self._flat


def flat_guess(x0):
    """*x0* as a flat array: a ``Guess`` made into warm_guess's (a solve that missed, or no solve
    ahead), anything else as it is."""
    return x0.flat() if isinstance(x0, Guess) else x0


def zero(given=None) -> str:
    """``ZERO``'s way: *given*, else ``VOXFX_SPARSE_AHEAD_ZERO``, else "sentinels"."""
    return env_choice(ZERO, ZEROS, given)


def mode(given=None) -> str:
    """``SWITCH``'s way: *given*, else ``VOXFX_SPARSE_SOLVE_AHEAD``, else ``DEFAULT``."""
    return env_choice(SWITCH, MODES, given, default=DEFAULT)


def enabled() -> bool:
    return mode() == "1"


def ahead_depth_reference(cnt, count, drop, min_side=MG_MIN_SIDE) -> int:
    """NumPy: ``ahead_sizes``' ahead_depth — the V-cycle's level count the host keeps for the
    set-up's counts *cnt* (4 a level for *count* levels, then 6 span entries a level): as
    ``sparse_pressure_workspace.build``'s extents and ``sparse_pressure_setup.levels_kept``,
    then ``sparse_multigrid.VCycle._dense_levels``' drop where *drop* ≥ 0 (its
    DENSE_DROP_UNKNOWNS, MG_DENSE "2"). Written out here, not called: the device's rule, which a
    test that patches ``levels_kept`` does not move."""
    values = np.asarray(cnt, np.int32)[:10 * count].tolist()  # Python ints: ~10 µs a solve, not ~35
    spans = values[4 * count:]
    kept = 1
    while kept < count:
        level = kept - 1
        at = 6 * level
        # the host's int32 sums wrap; its + 1 does not
        extent = 0 if values[4 * level + 2] == 0 else max(
            (spans[at + a] + spans[at + a + 3] + 2 ** 31) % 2 ** 32 - 2 ** 31 for a in range(3)) + 1
        if extent < min_side:
            break
        kept += 1
    if drop >= 0 and kept > 2 and values[4 * (kept - 2) + 2] <= drop:
        kept -= 1
    return kept


def ahead_sizes_reference(cnt, strides, max_iterations, count=0, drop=-1, min_side=MG_MIN_SIDE) -> np.ndarray:
    """NumPy: ``ahead_sizes``' ints for *cnt* (4 a level) and the solver's *strides*; with
    *count* > 0 (*cnt* the workspace's sizes: *count* levels of counts, then their spans) every
    size 0 too where ``ahead_depth_reference`` is not the solver's level count."""
    depth_ok = count <= 0 or ahead_depth_reference(cnt, count, drop, min_side) == len(strides)
    cnt = np.asarray(cnt, np.int32)[:4 * len(strides)].reshape(-1, 4)
    m_red, m = cnt[:, 1], cnt[:, 2]
    fits = depth_ok and bool(np.all((m >= 0) & (m < np.asarray(strides)) & (m_red >= 0) & (m_red <= m)))
    sizes = np.stack([m_red, m], axis=1).reshape(-1) if fits else np.zeros(2 * len(strides), np.int32)
    return np.concatenate([np.array([0, 0, 0, max_iterations], np.int32), sizes.astype(np.int32)])


def depth_drop() -> int:
    """``ahead_sizes``' *drop*: ``sparse_multigrid.DENSE_DROP_UNKNOWNS`` where the coarsest level's
    solve drops the last level (``dense_mode`` 2), else −1."""
    from .sparse_multigrid import DENSE_DROP_UNKNOWNS, dense_mode

    return DENSE_DROP_UNKNOWNS if dense_mode() == 2 else -1


def note(solver) -> None:
    """The solve's solver (``sparse_pressure_gpu.solve_flat``): the next solve's guess."""
    device = solver.cp.cuda.Device().id
    sealed = _last.get(device, (None, False))[1]
    _last[device] = (weakref.ref(solver), sealed)


class Ahead:
    """One solve's plan (``plan``): called with the set-up's level 0 and its read in place of the
    read (``sparse_pressure_workspace.unknowns``); ``read`` after it, with the sealed count."""

    def __init__(self, grid, b, preconditioner, tolerance, max_iterations, check_every, warm):
        self.grid, self.b, self.preconditioner = grid, b, preconditioner
        self.tolerance, self.max_iterations, self.check_every = float(tolerance), int(max_iterations), int(check_every)
        self.warm = bool(warm)
        self.solver = self.x0 = None  # the solver launched on, x₀ as launched
        self.held, self.sealed = False, None  # the set-up's tables stood, its sealed count (after the read)
        self.count, self.drop, self.depth_ok = 0, -1, False  # ahead_sizes' level count test and its outcome
        self.predicted = 0

    def _guess(self, level):
        """The solver to launch on, or None (module notes, 1)."""
        from . import sparse_pressure_gpu
        from .sparse_pressure_workspace import workspace

        cp = level.xp
        ref, sealed = _last.get(cp.cuda.Device().id, (None, False))
        solver = None if ref is None or sealed else ref()
        b = self.b
        if (solver is None or not sparse_pressure_gpu.PERSIST or not solver.persist
                or self.preconditioner != "mg" or solver.preconditioner != "mg"
                or solver.check_every != self.check_every or solver.generation is None
                or solver.generation != getattr(level, "ws_generation", None)
                or not any(s is solver for s in sparse_pressure_gpu._solvers.values())
                or len(solver.strides) > len(workspace().caps or ())
                or (len(solver.strides) > 1 and not solver.brick_transfers[1])  # level 0's up: filled the old way
                or b.dtype != np.float32 or b.ndim != 1 or not b.flags.c_contiguous):
            return None
        return solver

    def __call__(self, level, read):
        """The host's copy of *read* (the set-up's sizes), with the solve queued behind it where
        a guess is made (module notes)."""
        solver = self._guess(level)
        if solver is None or int(read.size) > _READ_WORDS:
            return read.get()
        cp = level.xp
        stream = cp.cuda.get_current_stream()
        host_read, words, event = _buffers(cp)
        n = int(read.size)
        cp.cuda.runtime.memcpyAsync(host_read.ctypes.data, read.data.ptr, 4 * n, cp.cuda.runtime.memcpyDeviceToHost,
                                    stream.ptr)
        event.record(stream)
        self._launch(solver, level, words, stream)
        event.synchronize()
        # whether ahead_sizes kept the sizes (the level count's test): else the launches stopped at once
        self.depth_ok = ahead_depth_reference(host_read, self.count, self.drop) == len(solver.strides)
        return host_read[:n].copy()

    def _launch(self, solver, level, words, stream):
        """Module notes, 2–4, on *solver* for *level*."""
        from . import sparse_pressure_gpu
        from .sparse_pressure_warm import carried_guess, initial_guess, relax_guess
        from .sparse_pressure_workspace import fill_tables, workspace

        cp = level.xp
        if zero() == "sentinels":  # ahead_sizes writes each vector's sentinel 0 (ZERO)
            sentinels = sentinel_table(solver)
        else:
            solver.vectors.fill(0)
            sentinels = (np.uint64(0), np.uint64(0), np.int32(0))
        strides = solver.ahead_limits()  # its strides (and its dense inverse's rows + 1 on the coarsest)
        self.count, self.drop = len(workspace().caps), depth_drop()  # the level count's test (ahead_depth)
        _K.launch_grid("ahead_sizes", (1,), (1,), (workspace().sizes, strides, np.int32(len(solver.strides)),
                                                   np.int32(self.count), np.int32(self.drop), np.int32(MG_MIN_SIDE),
                                                   np.int32(self.max_iterations), solver.ints, *sentinels))
        B = solver.levels[0]
        cells, diag8 = level._tables_args[0], level._tables_args[5]
        way = gather_mode()
        folded = way != "apart"
        if not folded or B.nbr is not None:  # the diag (and nbr rows) by their own launch
            fill_tables(level._tables_args, solver.sizes, B.stride, B.nbr, B.diag, B.stride)  # nbr None: the diag
        solver._filled = None  # level 0's tables are these now: loaded again unless taken
        if any(solver.brick_transfers):
            words[:] = level.brick_words()
            cp.cuda.runtime.memcpyAsync(solver.brick_ptrs.data.ptr, words.ctypes.data, words.nbytes,
                                        cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
            solver._brick_level = level
            solver._span_due = solver._span_tables(level)  # the span smoother's tables (h20a), after
            solver._brick_span_table()  # ahead_sizes wrote the sizes
        x0 = None  # no sealed region where taken: the solve's cell types are the grid's
        carried = carried_guess(self.grid) if self.warm and way == "guess" else None
        if carried is not None:  # x₀ = warm_guess(carried) taken at the unknowns by the gather (GATHER_SWITCH)
            x0 = Guess(carried)
        elif self.warm:
            x0 = relax_guess(self.grid, self.grid["cell"], self.b, initial_guess(self.grid, None, None))
        flat = carried if carried is not None else (np.uint64(0) if x0 is None else x0)
        diag = (diag8, B.diag) if folded and B.nbr is None else (np.uint64(0), np.uint64(0))  # level 0's diag here
        _K.launch("unknowns_gather", B.stride, (self.b, flat, cells, solver.sizes, solver.b, solver.x,
                                                 np.int32(carried is not None), *diag))
        solver.start_graph(x0 is not None, self.tolerance).run()
        self.predicted = min(solver.last_iterations, self.max_iterations) if sparse_pressure_gpu.PREDICT else 0
        for _ in range(self.predicted):
            solver.single.run()
        self.solver, self.x0 = solver, x0
        level.solve_ahead = self
        counts["launched"] += 1

    def guessed(self, enclosed, b) -> bool:
        """Whether the x₀ launched ahead (``x0``) is the solve's: no sealed region shifts it and
        *b* is the right-hand side it was launched with (``sparse_pressure.solve_pressure``)."""
        return self.solver is not None and self.warm and enclosed is None and self.b is b

    def queued(self, single):
        """``run_blocks``' single iteration, the predicted ones already queued (``Queued``)."""
        return Queued(single, self.predicted)

    def read(self, level, sealed) -> None:
        """After the set-up's read: whether its tables stood (*level*, its level 0) and the
        sealed count, the next solve's guess."""
        self.held = level is not None and getattr(level, "prebuilt", None) is not None
        self.sealed = int(sealed)
        cp = self.grid.xp
        device = cp.cuda.Device().id
        _last[device] = (_last.get(device, (None, False))[0], self.sealed > 0)


def sentinel_table(solver):
    """(pointers, levels, count) of *solver*'s ``PERSIST`` vectors for ahead_sizes, which writes 0 at
    each one's level's m (its sentinel) in place of ``vectors.fill(0)`` (``ZERO``); made once a
    solver (its ``_sentinels``)."""
    if solver._sentinels is None:
        cp = solver.cp
        views = solver.vector_views
        assert len(views) == len(solver.vector_levels)
        ptrs = cp.asarray(np.array([v.data.ptr for v in views], np.uint64))
        levels = cp.asarray(np.array(solver.vector_levels, np.int32))
        solver._sentinels = (ptrs, levels, np.int32(len(views)))
    return solver._sentinels


def _buffers(cp):
    device = cp.cuda.Device().id
    got = _pinned.get(device)
    if got is None:
        mem = cp.cuda.alloc_pinned_memory(4 * _READ_WORDS + 8 * 8)
        host_read = np.frombuffer(mem, np.int32, _READ_WORDS)
        words = np.frombuffer(mem, np.uint64, 8, offset=4 * _READ_WORDS)[:6]
        got = _pinned[device] = (host_read, words, cp.cuda.Event(disable_timing=True), mem)
    return got[:3]


def plan(grid, b, preconditioner, solve):
    """An ``Ahead`` for a solve of *grid* (*solve*: tolerance, max_iterations, check_every, warm),
    or None where ``SWITCH`` is off."""
    if solve is None or not enabled():
        return None
    return Ahead(grid, b, preconditioner, *solve)


def taken(level0, solver, b, x0, tolerance, max_iterations):
    """The ``Ahead`` launched for this solve where it stands (module notes), else None (the
    solve then loads everything again); either way the level holds it no longer."""
    ahead = getattr(level0, "solve_ahead", None)
    if ahead is None:
        return None
    level0.solve_ahead = None
    ok = (ahead.solver is solver and ahead.held and ahead.depth_ok and ahead.sealed == 0 and ahead.b is b
          and ahead.x0 is x0
          and ahead.tolerance == float(tolerance) and ahead.max_iterations == int(max_iterations))
    counts["taken" if ok else "missed"] += 1
    return ahead if ok else None


class Queued:
    """``run_blocks``' single iteration with the first *n* runs already queued ahead: those
    runs launch nothing, later ones replay the graph."""

    def __init__(self, single, n):
        self.single, self.n = single, int(n)

    def run(self) -> None:
        if self.n > 0:
            self.n -= 1
            return
        self.single.run()
