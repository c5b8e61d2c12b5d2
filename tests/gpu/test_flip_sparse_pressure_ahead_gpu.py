"""The set-up launched ahead of its host read (sparse_pressure_workspace.AHEAD, issue 24: the
coarse levels built on a guessed key base and the workspace's capacities before the
unknowns' sizes are read, one read for both) against the two-read set-up
(``VOXFX_SPARSE_SETUP_AHEAD=0``) in the same process: the same tables entry for entry, the
same pressure bit for bit and iterations over a dam break's substeps, with most set-ups
launched ahead; and the misses injected — a guess far from the liquid, capacities too
small for it (the kernels clamp the sets to their rows) — rebuilt to the same bits."""

import numpy as np

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves as _solves
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup, sparse_pressure_workspace
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec


def _ahead(monkeypatch, on):
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    monkeypatch.setattr(sparse_pressure_workspace, "AHEAD", on)
    sparse_pressure_gpu.release_gpu_solvers()  # a new workspace: its first set-up reads twice


def _same(old, new):
    assert len(old) == len(new) and len(old) > 0
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new == s_old
        assert p_new.dtype == p_old.dtype and np.array_equal(p_new, p_old)


def _tables(g, kind, level):
    M = VCycle(g, kind, level)
    return ([(L.m, L.m_red, backend.to_numpy(L.nbr), backend.to_numpy(L.diag)) for L in M.levels],
            [backend.to_numpy(u) for u in M.up], [backend.to_numpy(d) for d in M.down])


def test_gpu_ahead_tables_are_the_two_read_ones(monkeypatch):
    """The second set-up of a grid, launched ahead on the first's box and capacities: its
    levels, prolongations and restrictions equal the two-read set-up's entry for entry."""
    import cupy

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(6))
    got = {}
    for on in (False, True):
        _ahead(monkeypatch, on)
        g = tank(cupy, pos, vel, spec, obstacle)
        _, kind, _, _ = sparse_pressure.pressure_rhs(g, 0.01)
        first = sparse_pressure_setup.unknowns(g, kind, (), ahead=True)
        VCycle(g, kind, first)
        level = sparse_pressure_setup.unknowns(g, kind, (), ahead=True)
        assert level.prebuilt is not None if on else level.prebuilt is None
        got[on] = _tables(g, kind, level)
        assert sparse_pressure_workspace.workspace().ahead == ([1, 0] if on else [0, 0])
    (levels_a, up_a, down_a), (levels_b, up_b, down_b) = got[False], got[True]
    assert len(levels_a) == len(levels_b) >= 3 and len(up_a) == len(up_b) and len(down_a) == len(down_b)
    for a, b in zip(levels_a, levels_b):
        assert a[:2] == b[:2] and np.array_equal(a[2], b[2]) and np.array_equal(a[3], b[3])
    for a, b in zip(up_a + down_a, up_b + down_b):
        assert a.shape == b.shape and np.array_equal(a, b)
    sparse_pressure_gpu.release_gpu_solvers()


def test_gpu_ahead_gives_the_dam_breaks_iterations_and_pressure_bit_for_bit(monkeypatch):
    """A dam break (warm start and table reuse on, the defaults), three frames: every solve
    the same, and set-ups launched ahead (not the first: no box to guess from)."""
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    runs, ahead = {}, {}
    for on in (False, True):
        _ahead(monkeypatch, on)
        runs[on] = _solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True), 3)
        ahead[on] = list(sparse_pressure_workspace.workspace().ahead)
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs[False], runs[True])
    assert ahead[False] == [0, 0]
    assert ahead[True][0] >= 1 and sum(ahead[True]) <= len(runs[True]) - 1
    assert max(s["iterations"] for _, s in runs[True]) >= 3


def test_gpu_ahead_misses_are_rebuilt_to_the_same_bits(monkeypatch):
    """Four cold solves of one grid with AHEAD on, between them a miss injected: before the
    second, the workspace's last box moved 2^21 cells away (its guessed base below no cell);
    before the third, its capacities made from a set a twentieth the size (the sets clamped
    to their rows, a new generation). Each missed set-up rebuilt: the same pressure and
    iterations as the two-read set-up's, and the fourth launched ahead again."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(7))
    runs = {}
    for on in (False, True):
        _ahead(monkeypatch, on)
        g = tank(cupy, pos, vel, spec, obstacle)
        out = [sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)]
        ws = sparse_pressure_workspace.workspace()
        lo, hi, bounds = ws.last
        ws.last = ([v + 2 ** 21 for v in lo], [v + 2 ** 21 for v in hi], bounds)
        out.append(sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5))
        if on:
            assert ws.ahead == [0, 1]
        generation = ws.generation
        ws.caps = None  # a workspace grown for a smaller liquid
        ws.tables([max(1, (b + 1) // 20) for b in ws.last[2][1:]])
        out.append(sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5))
        out.append(sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5))
        if on:
            assert ws.ahead == [1, 2] and ws.generation > generation + 1  # grown back
        runs[on] = [(backend.to_numpy(p), stats) for p, stats in out]
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs[False], runs[True])
    assert all(p is not None for p, _ in runs[True])
