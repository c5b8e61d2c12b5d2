"""The set-up workspace's levels ≥ 2 held across set-ups on the device (sparse_pressure_workspace_kept,
``VOXFX_SPARSE_MG_KEEP``; issue 24, h19d) against NumPy: on one grid whose liquid moves set-up by
set-up, each set-up's V-cycle tables equal, entry for entry, NumPy's fresh hierarchy where the
device rebuilt and h19c's kept model (bench/_mg_kept.py ``KeptVCycle``, levels ≥ 2 from the last
rebuild) where it kept; the kept pressure matches the NumPy kept solve within the CPU/GPU test's
tolerance; and a dam break (warm starts, table reuse, the set-up and the solve launched ahead: the
defaults) converges to 1e-4 every substep with the switch on, keeping levels ≥ 2 on most set-ups,
within a few iterations of the switch off; and a bake resumed from a checkpoint keeps and rebuilds on
the uninterrupted bake's set-ups (each frame's first set-up rebuilds, h19e), its particles the
uninterrupted ones as the switch off leaves them (bit for bit where that is). Levels ≥ 3 held
(``VOXFX_SPARSE_MG_KEEP_FROM`` "3", h19f) on the finer tank and on the dam break, with the set-up's
one-block tail from level 3 (level 3 held from the tail's tables) or none (``TAIL_BOUND`` 0), since
the test scenes' level 2 lies in the default tail (where "3" keeps nothing: a rebuild each set-up);
each test sets the first level held itself (the environment's is not read)."""

import numpy as np
import pytest

from bench._mg_kept import KeptVCycle, Snapshot
from tests.meshes import box
from tests.pressure_solves import solves
from tests.unit.test_flip_sparse_mg_keep_resume import AFTER, resumed_and_uninterrupted
from tests.unit.test_flip_sparse_multigrid_keep import SHAPE3, TOPS, _positions
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_solve_ahead
from voxfx.kernels.flip import sparse_pressure_setup, sparse_pressure_workspace, sparse_transfer
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec

SEQUENCE = (TOPS[3], TOPS[2], TOPS[1], TOPS[0], TOPS[1], TOPS[2])  # the largest first: its capacities hold
_OBSTACLE = np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)])


def _scene(monkeypatch, first, tail=None):
    """The first level held *first* (set for the test), the set-up's tail bound *tail* where given,
    and the tank's scene for it (``SHAPE3``'s for 3: levels ≥ 4)."""
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP_FROM", str(first))
    if tail is not None:
        monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail)
    return {"n": 8 * 48000, "shape": SHAPE3} if first == 3 else {}


def _update(g, xp, top, scene=None):
    spec, pos = _positions(top, **(scene or {}))
    p, vel = xp.asarray(pos), xp.asarray(np.random.default_rng(5).normal(0, 1, pos.shape).astype(np.float32))
    g.update(p, 3, obstacle=_OBSTACLE)
    sparse_transfer.particles_to_grid(g, p, vel)
    sparse_transfer.classify(g, p)
    sparse_transfer.extrapolate(g)
    sparse_transfer.enforce_boundaries(g)


def _tables(M):
    return ([(L.m, L.m_red, backend.to_numpy(L.nbr)[:, :L.m + 1], backend.to_numpy(L.diag)[:L.m + 1])
             for L in M.levels[1:]], [backend.to_numpy(u) for u in M.up], [backend.to_numpy(d) for d in M.down])


def _same_tables(got, want):
    (lg, ug, dg), (lw, uw, dw) = got, want
    assert len(lg) == len(lw) and len(ug) == len(uw) == len(dg) == len(dw)
    for a, b in zip(lg, lw):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3])
    for a, b in zip(ug + dg, uw + dw):
        assert a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("first, tail", [(2, None), (3, 1024), (3, 0)], ids=["from2", "from3-tail3", "from3-no-tail"])
def test_gpu_kept_tables_are_numpys_fresh_or_kept_hierarchy(monkeypatch, first, tail):
    import cupy

    scene = _scene(monkeypatch, first, tail)
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    sparse_pressure_gpu.release_gpu_solvers()
    spec, _ = _positions(TOPS[0], **scene)
    gc, gn = SparseFlipGrid(spec, cupy, closed=True), SparseFlipGrid(spec, np, closed=True)
    snaps, events, last = [], [], None
    for top in SEQUENCE:
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "3")
        _update(gc, cupy, top, scene)
        kind, _, _ = sparse_pressure.solver_cells(gc)
        level = sparse_pressure.compact_unknowns(gc, kind)
        got = _tables(VCycle(gc, kind, level))
        held = sparse_pressure_workspace.workspace().held
        assert held is not None
        kept = held is last and held.age > 0
        events.append("kept" if kept else "built")
        last = held
        monkeypatch.delenv("VOXFX_SPARSE_MG_KEEP")
        _update(gn, np, top, scene)
        kind_n, _, _ = sparse_pressure.solver_cells(gn)
        snaps.append(Snapshot(gn, kind_n, sparse_pressure.Unknowns(gn, kind_n)))
        if not kept:
            rebuilt = snaps[-1]
            want = _tables(rebuilt.vcycle)
        else:
            want = _tables(KeptVCycle(snaps[-1], rebuilt, keep_from=first))
        _same_tables(got, want)
        assert held.first == first
    sparse_pressure_gpu.release_gpu_solvers()
    assert events.count("kept") >= 3, events  # every 3: built, kept, kept, built, kept, kept where nothing else moved


def test_gpu_another_grids_set_up_does_not_keep_the_first_grids_levels(monkeypatch):
    """Two grids in turn on one device (two simulations, or a test's scenes), the switch at 8: a
    grid's set-up after the other's rebuilds (its tables NumPy's fresh hierarchy), and a grid's
    second set-up in a row keeps its own levels. (Session 19's device call ran the pressure and
    warm-start files with the switch on before this rule: their second scenes kept the first's
    levels ≥ 2 — the workspace serves every grid — and missed the CPU's tables and iterations.)"""
    import cupy

    _scene(monkeypatch, 2)
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    sparse_pressure_gpu.release_gpu_solvers()
    spec, _ = _positions(TOPS[0])
    grids = [SparseFlipGrid(spec, cupy, closed=True) for _ in range(2)]
    seen = []
    for at, top in ((0, TOPS[2]), (1, TOPS[1]), (1, TOPS[1]), (0, TOPS[2])):
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "8")
        g = grids[at]
        _update(g, cupy, top)
        kind, _, _ = sparse_pressure.solver_cells(g)
        got = _tables(VCycle(g, kind, sparse_pressure.compact_unknowns(g, kind)))
        held = sparse_pressure_workspace.workspace().held
        seen.append((held.grid() is g, held.age))
        monkeypatch.delenv("VOXFX_SPARSE_MG_KEEP")
        gn = SparseFlipGrid(spec, np, closed=True)
        _update(gn, np, top)
        kind_n, _, _ = sparse_pressure.solver_cells(gn)
        _same_tables(got, _tables(VCycle(gn, kind_n, sparse_pressure.Unknowns(gn, kind_n))))  # the same liquid
    sparse_pressure_gpu.release_gpu_solvers()
    assert seen == [(True, 0), (True, 0), (True, 1), (True, 0)]


@pytest.mark.parametrize("first, tail", [(2, None), (3, 1024)], ids=["from2", "from3"])
def test_gpu_kept_pressure_is_the_numpy_kept_pressure(monkeypatch, first, tail):
    """The sequence's solves (``solve_pressure``, tolerance 1e-5) with the switch "3" on both
    backends: converged, within 2 iterations, the pressures within the CPU/GPU test's bound."""
    import cupy

    scene = _scene(monkeypatch, first, tail)
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "3")
    sparse_pressure_gpu.release_gpu_solvers()
    spec, _ = _positions(TOPS[0], **scene)
    grids = {xp: SparseFlipGrid(spec, xp, closed=True) for xp in (np, cupy)}
    for top in SEQUENCE:
        out = {}
        for xp, g in grids.items():
            _update(g, xp, top, scene)
            p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
            out[xp] = (backend.to_numpy(p), stats)
        (pc, sc), (pg, sg) = out[np], out[cupy]
        assert sc["iterations"] >= 3  # a solve the V-cycles ran in
        assert sc["converged"] and sg["converged"] and sg["residual"] <= 1e-5
        assert abs(sg["iterations"] - sc["iterations"]) <= 2  # the device may rebuild where NumPy keeps
        assert np.abs(pg - pc).max() <= 1e-3 * np.abs(pc).max()
    assert sparse_pressure_workspace.workspace().held is not None
    sparse_pressure_gpu.release_gpu_solvers()


@pytest.mark.parametrize("every, first, tail", [("3", 2, None), ("4", 2, None), ("3", 3, 512)],
                         ids=["3", "4", "3-from3"])
def test_gpu_dam_break_converges_with_levels_kept(monkeypatch, every, first, tail):
    """A 48×40×40 dam break (warm starts, table reuse, the set-up and solve launched ahead), 6
    frames: every solve with the switch on converges to 1e-4; a third of the set-ups at least
    kept levels ≥ 2; the solves launched ahead were taken as often as with the switch off (within
    2); the iterations within 1 a solve of the switch off on average."""
    import cupy

    _scene(monkeypatch, first, tail)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 40, (48, 40, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.9))
    runs, ages, taken = {}, [], {}
    solve = sparse_pressure.solve_pressure

    def spy(*args, **kwargs):
        out = solve(*args, **kwargs)
        held = sparse_pressure_workspace.workspace().held
        ages.append(None if held is None else held.age)
        return out

    for way in ("0", every):
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", way)
        sparse_pressure_gpu.release_gpu_solvers()
        sim = FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True)
        before = dict(sparse_pressure_solve_ahead.counts)
        monkeypatch.setattr(sparse_pressure, "solve_pressure", spy)
        runs[way] = solves(sim, 6)
        monkeypatch.setattr(sparse_pressure, "solve_pressure", solve)
        taken[way] = sparse_pressure_solve_ahead.counts["taken"] - before["taken"]
        if way != "0":
            kept_ages = ages[len(runs["0"]):]
            assert sum(1 for a in kept_ages if a) >= len(kept_ages) // 3, kept_ages
    sparse_pressure_gpu.release_gpu_solvers()
    off, on = runs["0"], runs[every]
    assert len(on) >= 12
    for _, stats in on:
        assert stats["converged"] and stats["residual"] <= 1e-4
    mean_off = np.mean([s["iterations"] for _, s in off])
    mean_on = np.mean([s["iterations"] for _, s in on])
    assert mean_on <= mean_off + 1.0, (mean_off, mean_on)
    assert taken[every] >= taken["0"] - 2, taken  # a kept set-up does not break the solve launched ahead


def test_gpu_resumed_bake_with_levels_kept_follows_the_uninterrupted_one(monkeypatch):
    """tests/unit/test_flip_sparse_mg_keep_resume.py on the device (2 substeps a frame, "3", the
    checkpoint after 2 frames, the workspace warmed by a bake of the scene first: no new
    generation, which rebuilds, in the bakes compared): the held levels' ages set-up by set-up the
    same in the resumed and the uninterrupted bake, each frame's first set-up rebuilt and the
    others kept. A GPU resume is within float32 rounding, not always bit for bit
    (tests/gpu/test_flip_sim_gpu.py, test_flip_particle_sort_gpu.py): the positions within 1e-5
    as there, and bit for bit where the same resume with the switch off is."""
    import cupy

    _scene(monkeypatch, 2)
    sparse_pressure_gpu.release_gpu_solvers()
    out = {}
    for way in ("0", "3"):
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", way)
        out[way] = resumed_and_uninterrupted(cupy, monkeypatch, warm=True)
    sparse_pressure_gpu.release_gpu_solvers()
    want, got, ages_a, ages_b = out["3"]
    assert ages_a == ages_b, (ages_a, ages_b)
    assert len(ages_a) >= 2 * AFTER and ages_a.count(0) == AFTER, ages_a
    assert sum(1 for age in ages_a if age) >= AFTER, ages_a
    off_want, off_got = out["0"][:2]
    exact_off = bool(np.array_equal(off_got, off_want))
    gap, gap_off = float(np.abs(got - want).max()), float(np.abs(off_got - off_want).max())
    print(f"\nresumed against uninterrupted, max |dx|: switch off {gap_off:.3g}, \"3\" {gap:.3g}")
    assert gap <= 1e-5
    assert np.array_equal(got, want) or not exact_off, (gap, gap_off)
