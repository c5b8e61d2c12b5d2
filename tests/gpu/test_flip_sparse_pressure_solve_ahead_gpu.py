"""The solve launched ahead of its set-up's host read (sparse_pressure_solve_ahead,
``VOXFX_SPARSE_SOLVE_AHEAD``, issue 24) against the solve queued after the read (the switch
off) in the same process: the same pressure bit for bit and the same iterations and residual —
over a dam break's substeps (the defaults: warm start, table reuse), and over a sequence of solves
of one grid that makes every kind of guess: none to make (the first solve), one taken, sealed
regions appearing (the right-hand side is made after the read: missed), a solve after sealed
regions (nothing launched), a level count that changes between substeps both ways (missed: the
solve launched ahead on the solver of a level fewer gets sizes of 0, ahead_sizes' level count test), and a
guessed solver too small for the unknowns forced (its sizes all 0 on the device: nothing written
past its buffers; missed) — each missed one solved again to the same bits."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves as _solves
from voxfx.kernels import backend
from voxfx.kernels.flip import (sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup,
                                sparse_pressure_solve_ahead, sparse_pressure_workspace)
from voxfx.kernels.flip.grid import FLUID, SOLID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

SWITCH = sparse_pressure_solve_ahead.SWITCH


def host(a):
    return backend.to_numpy(a)


def _counts():
    return tuple(sparse_pressure_solve_ahead.counts[k] for k in ("launched", "taken", "missed"))


def _same(old, new):
    assert len(old) == len(new) and len(old) > 0
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new == s_old
        assert p_new.dtype == p_old.dtype and np.array_equal(p_new.view(np.uint32), p_old.view(np.uint32))


def test_gpu_solve_ahead_gives_the_dam_breaks_iterations_and_pressure_bit_for_bit(monkeypatch):
    """A dam break (warm start and table reuse on, the defaults), three frames: every solve the
    same with the switch on, and some taken ahead."""
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    runs, counts = {}, {}
    for on in (False, True):
        monkeypatch.setenv(SWITCH, "1" if on else "0")
        sparse_pressure_gpu.release_gpu_solvers()
        before = _counts()
        runs[on] = _solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True), 3)
        counts[on] = tuple(b - a for a, b in zip(before, _counts()))
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs[False], runs[True])
    assert counts[False] == (0, 0, 0)
    launched, taken, missed = counts[True]
    assert launched == taken + missed and taken >= 1, counts[True]
    assert max(s["iterations"] for _, s in runs[True]) >= 3


def _pockets(g, count=6):
    """*g*'s cell types with *count* FLUID cells deep in the water walled in by SOLID faces:
    sealed regions, few cells changed (the set-up's capacities and generation stay)."""
    cell, nbr = host(g["cell"]).copy(), host(g.nbr)
    fluid = cell == FLUID
    inside = fluid & (nbr >= 0).all(axis=0) & fluid[np.maximum(nbr, 0)].all(axis=0)
    used = np.zeros(cell.shape, bool)
    centres = []
    for c in np.flatnonzero(inside):
        shell = nbr[:, c]
        ring = nbr[:, shell].ravel()
        if used[c] or used[shell].any() or (ring < 0).any() or used[ring].any():
            continue
        centres.append(c)
        used[c] = used[shell] = used[ring] = True
        if len(centres) == count:
            break
    assert len(centres) == count
    cell[nbr[:, centres].ravel()] = SOLID
    return cell


def _sequence(monkeypatch, warm):
    """The eleven solves of one grid (module notes): [(p on the host, stats)], each solve's
    (launched, taken, missed) increments, and the sizes the forced small solver was given."""
    import cupy

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)  # a set-up every solve
    sparse_pressure_gpu.release_gpu_solvers()
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(11))
    g = tank(cupy, pos, vel, spec, obstacle)
    plain = g["cell"].copy()
    sealed = cupy.asarray(_pockets(g))
    kept, fewer = sparse_pressure_setup.levels_kept, [False]
    monkeypatch.setattr(sparse_pressure_setup, "levels_kept",
                        lambda extents, count: max(1, kept(extents, count) - fewer[0]))
    out, steps, small = [], [], {}

    def solve():
        before = _counts()
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5, warm_start=warm)
        out.append((host(p), stats))
        steps.append(tuple(b - a for a, b in zip(before, _counts())))

    solve()  # nothing to guess from
    solve()  # taken
    g["cell"] = sealed
    solve()  # sealed regions: missed
    solve()  # after sealed regions: not launched
    g["cell"] = plain
    solve()  # not launched (the last had sealed regions)
    solve()  # taken
    fewer[0] = True
    solve()  # a level fewer: missed
    fewer[0] = False
    guess = sparse_pressure_solve_ahead.Ahead._guess
    guessed = []
    with monkeypatch.context() as m:
        m.setattr(sparse_pressure_solve_ahead.Ahead, "_guess", lambda self, level: guessed.append(guess(self, level))
                  or guessed[-1])
        solve()  # a level more: missed
    if guessed and guessed[0] is not None:  # the solver of a level fewer: ahead_sizes' level count test
        small["deeper"] = (len(guessed[0].strides), host(guessed[0].ints))
    solve()  # taken
    solver = next(s for s in sparse_pressure_gpu._solvers.values() if s.generation is not None)
    ws = sparse_pressure_workspace.workspace()
    tiny = sparse_pressure_gpu.SparsePressureSolverGPU([64] + list(solver.strides[1:]), "mg", solver.check_every,
                                                       tables=ws.solver_tables(len(solver.strides)),
                                                       generation=solver.generation, dense=solver.dense_mode)
    with monkeypatch.context() as m:
        m.setattr(sparse_pressure_solve_ahead.Ahead, "_guess", lambda self, level: tiny)
        solve()  # a solver too small forced: missed
    small["ints"] = host(tiny.ints)
    solve()  # taken
    return out, steps, small


@pytest.mark.usefixtures("mg_dense_sweeps")  # a level fewer kept is a level fewer solved (MG_DENSE "2" may drop one)
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_gpu_solve_ahead_guesses_missed_are_solved_again_to_the_same_bits(monkeypatch, warm):
    runs, steps = {}, {}
    for on in (False, True):
        monkeypatch.setenv(SWITCH, "1" if on else "0")
        runs[on], steps[on], small = _sequence(monkeypatch, warm)
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs[False], runs[True])
    assert all(step == (0, 0, 0) for step in steps[False])
    assert steps[True] == [(0, 0, 0), (1, 1, 0), (1, 0, 1), (0, 0, 0), (0, 0, 0), (1, 1, 0), (1, 0, 1), (1, 0, 1),
                           (1, 1, 0), (1, 0, 1), (1, 1, 0)], steps[True]
    assert not small["ints"][4:].any()  # the small solver's sizes: all 0, nothing past its buffers
    # the solve launched ahead on the solver of a level fewer, once the hierarchy regained its level:
    # ahead_sizes' level count test (sparse_pressure_solve_ahead.ahead_depth_reference) zeroed its
    # sizes, so its start stopped at once (before: its predicted iterations ran for nothing)
    levels, ints = small["deeper"]
    assert levels >= 2 and not ints[4:].any() and ints[3] > 0, (levels, ints)
    assert all(s["converged"] for _, s in runs[True]) and max(s["iterations"] for _, s in runs[True]) >= 3


@pytest.mark.parametrize("smoother", ["brick", "rb"])
@pytest.mark.parametrize("gather", ["folded", "guess"])
def test_gpu_ahead_sentinels_and_folded_gather_give_the_fills_bits_over_poisoned_vectors(monkeypatch, smoother,
                                                                                        gather):
    """h21f's ways for a solve launched ahead — ``VOXFX_SPARSE_AHEAD_ZERO`` "sentinels" (ahead_sizes
    writes each vector's sentinel 0) with ``VOXFX_SPARSE_AHEAD_GATHER`` "folded" (level 0's diag in
    the gather) or "guess" (and x₀ gathered from the carried pressure) — against "fill" (the whole
    arena zeroed) and "apart" (unk_diag_strided, warm_guess's flat x₀), a warm dam break of four
    frames with the guessed solver's vectors poisoned with NaN before every launch ahead (so an
    entry below a level's m read before the start or the iteration writes it, or any entry past m,
    would spread a NaN): every solve the same bits and stats, some taken ahead."""
    import cupy

    from voxfx.kernels.flip import sparse_multigrid_bricks

    monkeypatch.setenv(SWITCH, "1")
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", smoother)
    launch = sparse_pressure_solve_ahead.Ahead._launch
    guesses = []

    def poisoned(self, solver, *args):
        solver.vectors.fill(cupy.float32(np.nan))
        out = launch(self, solver, *args)
        guesses.append(type(self.x0).__name__)
        return out

    monkeypatch.setattr(sparse_pressure_solve_ahead.Ahead, "_launch", poisoned)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    runs, counts, made = {}, {}, {}
    for zero, way in (("fill", "apart"), ("sentinels", gather)):
        monkeypatch.setenv(sparse_pressure_solve_ahead.ZERO, zero)
        monkeypatch.setenv(sparse_pressure_solve_ahead.GATHER_SWITCH, way)
        sparse_pressure_gpu.release_gpu_solvers()
        before, guesses[:] = _counts(), []
        settings = FlipSettings(seed=5, warm_start_pressure=True)
        runs[zero] = _solves(FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True), 4)
        counts[zero] = tuple(b - a for a, b in zip(before, _counts()))
        made[zero] = list(guesses)
    sparse_pressure_gpu.release_gpu_solvers()
    _same(runs["fill"], runs["sentinels"])
    assert counts["fill"] == counts["sentinels"] and counts["sentinels"][1] >= 1, counts
    assert ("Guess" in made["sentinels"]) == (gather == "guess") and "Guess" not in made["fill"], made
    assert all(s["converged"] for _, s in runs["sentinels"]) and max(s["iterations"] for _, s in runs["sentinels"]) >= 3
