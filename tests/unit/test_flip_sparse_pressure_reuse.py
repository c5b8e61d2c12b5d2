"""Issue 24: the sparse pressure solve's tables (unknowns, multigrid hierarchy) are reused
from one substep to the next while the grid's topology and cell types stay the same, kept
only once two substeps in a row find the same cell types, and rebuilt when either changes;
a simulation with reuse steps exactly as one without."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import sparse_pressure, sparse_transfer
from voxfx.kernels.flip.grid import AIR, FLUID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

SPEC = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))


def _still_tank():
    rng = np.random.default_rng(5)
    pos = (rng.uniform(0.0, 1.0, (20000, 3)) * np.array([0.8, 0.4, 0.25])).astype(np.float32)
    g = SparseFlipGrid(SPEC, np, closed=True)
    g.update(pos, 3)
    sparse_transfer.classify(g, pos)
    return g, pos


@pytest.mark.parametrize("preconditioner", ["mg", "jacobi"])
def test_tables_are_kept_after_two_equal_substeps_and_rebuilt_on_a_change(preconditioner):
    g, pos = _still_tank()
    kind = sparse_pressure.solver_cells(g)[0]
    first = sparse_pressure.solver_tables(g, kind, preconditioner)
    assert g._pressure_memo[3] is None  # one substep: nothing kept but the cell types
    second = sparse_pressure.solver_tables(g, kind.copy(), preconditioner)
    third = sparse_pressure.solver_tables(g, kind.copy(), preconditioner)
    assert second[0] is not first[0] and third[0] is second[0] and third[1] is second[1]
    assert sparse_pressure.solver_tables(g, kind.copy(), "none")[0] is not second[0]  # another preconditioner
    changed = kind.copy()
    changed[np.flatnonzero(kind == FLUID)[7]] = AIR
    assert sparse_pressure.solver_tables(g, changed, preconditioner)[0] is not second[0]
    assert g._pressure_memo[3] is None
    again = sparse_pressure.solver_tables(g, changed.copy(), preconditioner)
    assert sparse_pressure.solver_tables(g, changed.copy(), preconditioner)[0] is again[0]
    g.update(pos + np.float32(0.1), 3)  # liquid moved a brick: new topology
    kind = sparse_pressure.solver_cells(g)[0]
    assert g._pressure_memo[0] is not g.nbr
    assert sparse_pressure.solver_tables(g, kind, preconditioner)[0] is not again[0]


def test_reused_tables_give_the_fresh_tables_pressure(monkeypatch):
    g, _ = _still_tank()
    g["w"] = np.random.default_rng(1).normal(0.0, 0.3, g.size).astype(np.float32)
    runs = []
    for reuse in (False, True):
        monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", reuse)
        g._pressure_memo = None
        runs.append([sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(3)])
    assert g._pressure_memo[3] is not None  # the third solve reused the second's tables
    for (p_fresh, s_fresh), (p_reused, s_reused) in zip(*runs):
        assert np.array_equal(p_fresh, p_reused) and s_fresh == s_reused
    assert np.abs(runs[0][0][0]).max() > 0


def test_still_water_steps_alike_with_and_without_reuse(monkeypatch):
    """Still water at 24 fps (several substeps a frame): the same particles bit for bit."""
    water = box((0.0, 0.0, 0.0), (0.8, 0.4, 0.2))
    out = []
    for reuse in (False, True):
        monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", reuse)
        sim = FlipSimulation(SPEC, FlipSettings(max_time_step=1 / 60), *water, xp=np, sparse=True)
        for _ in range(3):
            sim.step(1 / 24)
        out.append((sim.pos.copy(), sim.vel.copy(), getattr(sim.grid, "_pressure_memo", None)))
    (p0, v0, _), (p1, v1, memo) = out
    assert np.array_equal(p0, p1) and np.array_equal(v0, v1)
    assert memo is not None and memo[3] is not None  # settled water: the tables were kept


def test_kept_tables_are_keyed_by_the_dense_coarse_mode(monkeypatch):
    """sparse_pressure.tables_key names what kept tables were built for — with
    sparse_multigrid.dense_mode (its "2" keeps one level fewer): tables kept in one mode are not
    reused in another. sparse_pressure_setup's one-read reuse test compares the same key."""
    from voxfx.kernels.flip import sparse_multigrid

    g, _ = _still_tank()
    kind = sparse_pressure.solver_cells(g)[0]
    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", 0)
    sparse_pressure.solver_tables(g, kind, "mg")
    kept = sparse_pressure.solver_tables(g, kind.copy(), "mg")
    assert g._pressure_memo[2] == sparse_pressure.tables_key("mg", True) == ("mg", True, 0)
    assert sparse_pressure.solver_tables(g, kind.copy(), "mg")[1] is kept[1]
    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", 2)
    other = sparse_pressure.solver_tables(g, kind.copy(), "mg")
    assert other[1] is not kept[1] and g._pressure_memo[2] == ("mg", True, 2)
    assert len(other[1].levels) == len(kept[1].levels) - 1 and other[1].dense is not None
