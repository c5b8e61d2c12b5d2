"""The sparse pressure set-up built into a workspace (sparse_pressure_workspace, issue 24:
capacity-sized buffers kept from solve to solve, the coarse tables the solver's own buffers,
level 0's filled straight into the solver's) against the fresh arrays and copies of
``VOXFX_SPARSE_SETUP=fresh``, in the same process: the same tables, and the same pressure
bit for bit and the same iterations over a dam break's substeps, a sequence of liquids whose
hierarchy gains a level and whose solver must grow, reused tables, and tables that another
grid's set-up made stale."""

import numpy as np

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.pressure_solves import solves as _solves
from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure, sparse_pressure_gpu, sparse_pressure_workspace
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec

MODES = ("fresh", "workspace")


def _mode(monkeypatch, mode):
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", mode)
    sparse_pressure_gpu.release_gpu_solvers()


def _red_black(monkeypatch):
    """Level 0 smoothed by the red-black sweeps both ways: the fresh path's solver (no workspace,
    no brick table) has no brick smoother (sparse_multigrid_bricks.SMOOTHER "brick", the default,
    applies to workspace solvers alone), so these comparisons of the same bits pin "rb"."""
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")


def _same(old, new):
    """Every solve's iterations, convergence and residual equal, and p bit for bit."""
    assert len(old) == len(new) and len(old) > 0
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new == s_old
        assert p_new.dtype == p_old.dtype and np.array_equal(p_new, p_old)


def _solver():
    return next(reversed(sparse_pressure_gpu._solvers.values()))


def test_gpu_workspace_tables_are_the_fresh_ones(monkeypatch):
    """VCycle's levels, prolongations (the first made when read) and restrictions, and the
    unknowns' tables, equal entry for entry."""
    import cupy

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(4))
    got = {}
    for mode in MODES:
        _mode(monkeypatch, mode)
        g = tank(cupy, pos, vel, spec, obstacle)
        _, kind, _, _ = sparse_pressure.pressure_rhs(g, 0.01)
        level = sparse_pressure.compact_unknowns(g, kind)
        M = VCycle(g, kind, level)
        got[mode] = ([(L.m, L.m_red, backend.to_numpy(L.nbr), backend.to_numpy(L.diag)) for L in M.levels],
                     [backend.to_numpy(u) for u in M.up], [backend.to_numpy(d) for d in M.down],
                     backend.to_numpy(level.cells), backend.to_numpy(level.position)[:g.size])
        if mode == "workspace":
            assert isinstance(level, sparse_pressure_workspace.Level0) and len(M.levels) >= 3
    (levels_f, up_f, down_f, cells_f, pos_f), (levels_w, up_w, down_w, cells_w, pos_w) = got["fresh"], got["workspace"]
    assert len(levels_f) == len(levels_w) and len(up_f) == len(up_w) == len(down_f) == len(down_w)
    for a, b in zip(levels_f, levels_w):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3])
    for a, b in zip(up_f + down_f, up_w + down_w):
        assert a.shape == b.shape and np.array_equal(a, b)
    assert np.array_equal(cells_f, cells_w) and np.array_equal(pos_f, pos_w)
    sparse_pressure_gpu.release_gpu_solvers()


def test_gpu_workspace_gives_the_dam_breaks_iterations_and_pressure_bit_for_bit(monkeypatch):
    """A dam break (warm start and table reuse on, the defaults) frame by frame: its
    topology changes from substep to substep."""
    _red_black(monkeypatch)  # the fresh path's solver smooths by red-black sweeps
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    runs = {}
    for mode in MODES:
        _mode(monkeypatch, mode)
        runs[mode] = _solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True), 3)
        assert (_solver().generation is not None) == (mode == "workspace")
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["fresh"], runs["workspace"])
    assert len(runs["fresh"]) >= 6 and max(s["iterations"] for _, s in runs["fresh"]) >= 3


def _growing(side, n):
    """A block of water *side* of the tank long (the scenes of the sequence below)."""
    rng = np.random.default_rng(1)
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (48, 24, 40))
    pos = (rng.uniform(0.0, 1.0, (n, 3)) * np.array([side, 0.5, 0.5]) * np.asarray(spec.upper)).astype(np.float32)
    return spec, pos, rng.normal(0, 1, pos.shape).astype(np.float32)


def test_gpu_workspace_over_a_hierarchy_that_gains_a_level_and_a_solver_that_grows(monkeypatch):
    """Four liquids in turn (NumPy: 3, 4, 4, 4 levels; the third fits the second's
    buffers; the fourth builds one level more and needs more room): the same pressure bit
    for bit and iterations as the fresh path, the same level-0 strides (so the same
    reduction grids), and the events themselves."""
    _red_black(monkeypatch)  # the fresh path's solver smooths by red-black sweeps
    import cupy

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setenv("VOXFX_SPARSE_SETUP_FIRST_CAPS", "fresh")  # the ways its events were written for
    sequence = [(0.15, 4000), (0.5, 20000), (0.6, 26000), (1.0, 50000)]
    runs, strides, solvers, generations = {}, {}, {}, []
    for mode in MODES:
        _mode(monkeypatch, mode)
        runs[mode], strides[mode], solvers[mode] = [], [], []
        for side, n in sequence:
            spec, pos, vel = _growing(side, n)
            g = tank(cupy, pos, vel, spec)
            p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
            runs[mode].append((backend.to_numpy(p), stats))
            solver = _solver()
            strides[mode].append(solver.strides)
            solvers[mode].append(solver)
            if mode == "workspace":
                generations.append(sparse_pressure_workspace.workspace().generation)
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["fresh"], runs["workspace"])
    assert [s[0] for s in strides["fresh"]] == [s[0] for s in strides["workspace"]]
    assert [len(s) for s in strides["fresh"]] == [len(s) for s in strides["workspace"]]
    counts = [len(s) for s in strides["workspace"]]
    assert counts[0] < counts[1]  # the hierarchy gains a level
    ws = solvers["workspace"]
    assert ws[2] is ws[1] and generations[2] == generations[1]  # the unknowns changed, the buffers held
    assert counts[3] == counts[2] and ws[3] is not ws[2] and generations[3] != generations[2]  # it grew
    assert strides["workspace"][3][0] > strides["workspace"][2][0]


def test_gpu_workspace_reuses_tables_and_drops_ones_another_grid_made_stale(monkeypatch):
    """Table reuse on: three cold solves of grid A (the third reuses the kept tables and
    skips filling level 0 again), then grid B's set-up (which rebuilds the workspace), then A
    again: its kept tables are stale and rebuilt. Every pressure equal bit for bit to the
    fresh path's."""
    _red_black(monkeypatch)  # the fresh path's solver smooths by red-black sweeps
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", True)
    scene_a = random_scene(np.random.default_rng(2))
    scene_b = random_scene(np.random.default_rng(3), shape=(36, 28, 30), n=40000)
    runs = {}
    for mode in MODES:
        _mode(monkeypatch, mode)
        a, b = (tank(cupy, pos, vel, spec, obstacle) for spec, pos, vel, obstacle in (scene_a, scene_b))
        out = [sparse_pressure.solve_pressure(a, 0.01, tolerance=1e-5) for _ in range(3)]
        kept = a._pressure_memo[3]
        assert kept is not None
        if mode == "workspace":
            assert _solver().tables_skipped == 1 and _solver()._filled is kept[0]
            assert sparse_pressure.tables_hold(kept)
        out.append(sparse_pressure.solve_pressure(b, 0.01, tolerance=1e-5))
        if mode == "workspace":
            assert not sparse_pressure.tables_hold(kept)  # B's set-up rebuilt the workspace
        out.append(sparse_pressure.solve_pressure(a, 0.01, tolerance=1e-5))
        runs[mode] = [(backend.to_numpy(p), stats) for p, stats in out]
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["fresh"], runs["workspace"])


SWITCHED = {"VOXFX_SPARSE_PCG_BLOCK": "singles", "VOXFX_SPARSE_SETUP_CAPS": "together",
            "VOXFX_SPARSE_MG_DENSE_ROWS": "bound"}
MAIN = {"VOXFX_SPARSE_PCG_BLOCK": "graph", "VOXFX_SPARSE_SETUP_CAPS": "level",  # the ways before
        "VOXFX_SPARSE_MG_DENSE_ROWS": "stride"}


def test_gpu_growth_switches_give_the_same_pressure_with_no_more_solvers(monkeypatch):
    """The block as single-iteration replays and the coarse capacities grown together (issue
    24: the 8M frames that built pressure solvers), and the coarsest level's dense inverse of rows
    for its unknowns, not its stride (i24b3), against main's ways
    over a liquid that spreads solve by solve (its hierarchy gains levels, its buffers grow):
    the same pressure bit for bit and the same stats, and no more solvers built."""
    import cupy

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    runs, built, blocks = {}, {}, {}
    for way in ("main", "switched"):
        for name in SWITCHED:
            monkeypatch.setenv(name, SWITCHED[name] if way == "switched" else MAIN[name])
        _mode(monkeypatch, "workspace")
        runs[way], solvers = [], []
        for step in range(12):
            side = 0.2 + 0.07 * step
            spec, pos, vel = _growing(side, int(20000 * side))
            g = tank(cupy, pos, vel, spec)
            p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
            runs[way].append((backend.to_numpy(p), stats))
            if not solvers or _solver() is not solvers[-1]:
                solvers.append(_solver())
        built[way] = len(solvers)
        blocks[way] = sum(s.loop.launches for s in solvers)
        assert all(s.block == ("singles" if way == "switched" else "graph") for s in solvers)
        # the coarsest level's unknowns ≤ 128 (sparse_pressure_buffers.DENSE_ROWS): rows ≤ 1.25 · 129 + 64
        assert all(s.dense is None or (s.dense_rows <= min(s.strides[-1], 225) if way == "switched"
                                       else s.dense_rows == s.strides[-1]) for s in solvers)
        del solvers
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["main"], runs["switched"])
    assert 1 < built["switched"] <= built["main"], built
    assert blocks["switched"] > 0  # a first solve (no guess) ran blocks: the single's replays


def test_gpu_a_new_level_counts_solver_starts_from_the_last_solves_iterations(monkeypatch):
    """A liquid whose hierarchy gains a level: the new level count's workspace solver starts
    from the last solve's iteration count (``PREDICT``'s guess, ``sparse_pressure_solvers._prior``;
    it started from 0 and ran a block before its first check) and level 0's stride fresh (no
    more memory); the pressure and stats bit for bit as ``VOXFX_SPARSE_SETUP=fresh``'s
    (no workspace: no guess carried)."""
    _red_black(monkeypatch)  # the fresh path's solver smooths by red-black sweeps
    import cupy

    from voxfx.kernels.flip import sparse_pressure_solvers

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    for name in SWITCHED:
        monkeypatch.delenv(name, raising=False)
    lookup, got = sparse_pressure_solvers._solver, []

    def traced(needs, *args, **kwargs):
        solver = lookup(needs, *args, **kwargs)
        got.append((solver, len(needs), solver.last_iterations, solver.strides[0], int(needs[0])))
        return solver

    runs = {}
    for mode in MODES:
        _mode(monkeypatch, mode)
        if mode == "workspace":
            monkeypatch.setattr(sparse_pressure_solvers, "_solver", traced)
        runs[mode] = []
        for step in range(12):
            side = 0.2 + 0.07 * step
            spec, pos, vel = _growing(side, int(20000 * side))
            p, stats = sparse_pressure.solve_pressure(tank(cupy, pos, vel, spec), 0.01, tolerance=1e-5)
            runs[mode].append((backend.to_numpy(p), stats))
    monkeypatch.setattr(sparse_pressure_solvers, "_solver", lookup)
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["fresh"], runs["workspace"])
    assert len(got) == len(runs["workspace"])
    changes = [at for at in range(1, len(got)) if got[at][1] != got[at - 1][1]]
    assert changes  # the hierarchy gained a level
    for at in changes:
        solver, _, guess, stride, need = got[at]
        assert solver is not got[at - 1][0]
        assert guess == runs["workspace"][at - 1][1]["iterations"] > 0  # the last solve's count, not 0
        assert stride == int(need * 1.25) + 64  # fresh (grown_strides)


def test_gpu_first_caps_grown_give_the_same_pressure_in_fewer_generations(monkeypatch):
    """``VOXFX_SPARSE_SETUP_FIRST_CAPS`` "grown" (the coarse capacities sized afresh as a first
    growth's, 1.875× a level's need + 96; issue 24, h18a: the 8M Fast frame 10's new generation and
    solver) against "fresh" (1.25× + 64) over a liquid whose level-0 set spreads 1.52× in eight solves
    within one level count (18,242 → 27,705 cells on the NumPy grid: the tank's solid and fluid cells
    of its active bricks), as the 8M dam break's does 1.29× over its Fast frames 1–10: the same pressure bit
    for bit and the same stats (the kernels read the sets' sizes, not the capacities); the
    generations each way's ``table_caps`` gives for the set-ups' needs, "fresh" one more than
    "grown"'s single one, and no more solvers built."""
    import cupy

    from voxfx.kernels.flip.sparse_pressure_buffers import table_caps

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    tables = sparse_pressure_workspace.Workspace.tables
    runs, gens, built, needs = {}, {}, {}, {}

    def traced(ws, want):
        needs[way].append(tuple(want))
        return tables(ws, want)

    monkeypatch.setattr(sparse_pressure_workspace.Workspace, "tables", traced)
    for way in ("fresh", "grown"):
        monkeypatch.setenv("VOXFX_SPARSE_SETUP_FIRST_CAPS", way)
        _mode(monkeypatch, "workspace")
        runs[way], needs[way], solvers = [], [], []
        before = sparse_pressure_workspace._generation[0]  # table buffers made in this process
        for side in np.linspace(0.3, 0.65, 8):
            spec, pos, vel = _growing(side, int(20000 * side))
            p, stats = sparse_pressure.solve_pressure(tank(cupy, pos, vel, spec), 0.01, tolerance=1e-5)
            runs[way].append((backend.to_numpy(p), stats))
            if not solvers or _solver() is not solvers[-1]:
                solvers.append(_solver())
        gens[way], built[way] = sparse_pressure_workspace._generation[0] - before, len(solvers)
        del solvers
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["fresh"], runs["grown"])
    assert len({len(n) for way in needs for n in needs[way]}) == 1  # one level count throughout
    for way in gens:  # the generations table_caps gives for the needs it was asked (a set-up that went
        # ahead on tables that stood asked none)
        caps, count = None, 0
        for n in needs[way]:
            new = table_caps(list(n), caps, first=way)
            count += new != caps
            caps = new
        assert gens[way] == count, (way, gens, needs[way])
    assert gens["grown"] == 1 < gens["fresh"], gens
    assert built["grown"] <= built["fresh"], built


def test_gpu_put_values_writes_what_the_assignment_writes():
    """``put_values`` (the set-up's extra values into its read row: a 4-byte device copy each where
    both are int32) leaves the row as ``values[at:at + 1] = value`` does, neighbours untouched, in
    stream order after a write queued before it; int64 values and a strided row take the assignment."""
    import cupy

    extra = [cupy.asarray(np.array([v], np.int32)) for v in (7, -3, 2 ** 31 - 1)]
    for make in (lambda: cupy.arange(12, dtype=cupy.int32), lambda: cupy.arange(24, dtype=cupy.int32)[::2]):
        want, got = make(), make()
        for at, value in enumerate(extra):
            want[4 + at:5 + at] = value
        got[4:7].fill(-9)  # queued before: the copies land after it
        sparse_pressure_workspace.put_values(got[4:7], extra)
        assert (got.get() == want.get()).all()
    row = cupy.zeros(3, cupy.int32)
    wide, offset = cupy.asarray(np.array([5], np.int64)), (cupy.ones(2, cupy.int32) * 6)[1:]
    sparse_pressure_workspace.put_values(row, [wide, offset])
    assert row.get().tolist() == [5, 6, 0]
