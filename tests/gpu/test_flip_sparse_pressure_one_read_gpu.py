"""The sparse pressure set-up with one host read between the set-up kernels and the unknowns
(sparse_pressure_setup.staged_setup, ``ONE_READ``: cells_sealed pins the sealed regions on
the device, the sealed count and the table reuse test come back with the unknowns' sizes)
against the separate calls and the NumPy reference: the same right-hand side bit for bit,
cell types, sealed regions, unknowns and tables on fresh random liquids, and the same
pressure and iterations through solve_pressure, the table reuse across solves included.
The comparison of the staged set-up with the separate calls runs on the fresh set-up
(``VOXFX_SPARSE_SETUP=fresh``): it finds the unknowns twice before one build, which the
set-up's workspace refuses by design (its buffers hold one set-up at a time); the workspace's
own GPU tests compare it with the fresh set-up bit for bit."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_bricks_gpu import host, liquid, same, tables
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_setup, sparse_pressure_workspace
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID
from voxfx.kernels.flip.sparse_multigrid import VCycle

DT = 1 / 60


def scene(xp, name, seed):
    """``liquid``'s scenes, and "speckled": its tank with random cell types on the active
    cells (FLUID regions walled in by SOLID cells: sealed regions to pin)."""
    if name != "speckled":
        return liquid(xp, name, seed)
    g = liquid(xp, "tank", seed)
    types = np.random.default_rng(seed + 1).choice(np.array([AIR, FLUID, SOLID], np.uint8), g.size,
                                                   p=[0.04, 0.66, 0.30])
    g["cell"] = xp.where(g.active(), xp.asarray(types), g["cell"]).astype(xp.uint8)
    return g


@pytest.mark.parametrize("name", ("tank", "moved", "speckled", "sheet", "empty"))
def test_staged_setup_gives_the_separate_calls_values(monkeypatch, name):
    import cupy

    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "fresh")  # the module text
    seed = int(np.random.default_rng().integers(1 << 30))
    ref = scene(np, name, seed)
    ref_b, ref_kind, ref_enclosed, ref_labels = sparse_pressure.pressure_rhs(ref, DT)
    g = scene(cupy, name, seed)
    staged = sparse_pressure_setup.staged_setup(g, DT, "mg")
    assert staged is not None
    b, kind, enclosed, labels, level, reuse = staged
    assert reuse is False and level is not None
    assert np.array_equal(host(b).view(np.uint32), ref_b.view(np.uint32)), f"seed {seed}"
    assert np.array_equal(host(kind), ref_kind), f"seed {seed}"
    assert (enclosed is None) == (ref_enclosed is None)
    if name in ("speckled", "sheet", "empty"):  # walled-in regions; a sheet in air and no liquid: none
        assert (enclosed is not None) == (name == "speckled")
    if enclosed is not None:
        assert np.array_equal(host(enclosed), ref_enclosed) and np.array_equal(host(labels), ref_labels)
        assert int((host(kind) == AIR).sum()) > int((host(g["cell"]) == AIR).sum())  # the pins
    apart = sparse_pressure.compact_unknowns(g, sparse_pressure.pressure_rhs(g, DT)[1])
    built = tables(level, VCycle(g, kind, level))
    assert same(built, tables(apart, VCycle(g, kind, apart))), f"seed {seed}"
    ref_level = sparse_pressure.compact_unknowns(ref, ref_kind)
    assert same(built, tables(ref_level, VCycle(ref, ref_kind, ref_level))), f"seed {seed}"


def _solves(monkeypatch, one_read, seed, name):
    """Four solves on one grid with the table reuse on: built (no memo), built and kept
    (the types repeat), reused, and built again after one FLUID cell became AIR."""
    import cupy

    monkeypatch.setattr(sparse_pressure_setup, "ONE_READ", one_read)
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", True)
    g = scene(cupy, name, seed)
    out = []
    for step in range(4):
        if step == 3:
            cell = g["cell"]
            first = int(cupy.flatnonzero(cell == FLUID)[7])
            cell[first] = AIR
        p, stats = sparse_pressure.solve_pressure(g, DT, tolerance=1e-5)
        kept = g._pressure_memo[3] is not None
        out.append((host(p), stats["iterations"], kept))
    return out


@pytest.mark.parametrize("name", ("tank", "speckled"))
def test_one_read_solves_give_the_same_pressure_bit_for_bit(monkeypatch, name):
    seed = int(np.random.default_rng().integers(1 << 30))
    one = _solves(monkeypatch, True, seed, name)
    apart = _solves(monkeypatch, False, seed, name)
    for (p1, it1, kept1), (p0, it0, kept0) in zip(one, apart):
        assert it1 == it0 and kept1 == kept0 and np.array_equal(p1.view(np.uint32), p0.view(np.uint32)), f"seed {seed}"
    assert [kept for _, _, kept in one] == [False, True, True, False]
    assert np.abs(one[0][0]).max() > 0


@pytest.mark.parametrize("name", ("moved", "speckled", "sheet"))
def test_level_one_by_ranks_builds_the_sorted_tables(monkeypatch, name):
    """Level 1's set in key order by brick-row ranks (sparse_pressure_setup.RANKS) or by a
    sort: the same tables as each other and the NumPy reference, on a pool whose slots are
    out of key order ("moved")."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    ref = scene(np, name, seed)
    ref_kind = sparse_pressure.solver_cells(ref)[0]
    ref_level = sparse_pressure.compact_unknowns(ref, ref_kind)
    want = tables(ref_level, VCycle(ref, ref_kind, ref_level))
    for ranks in (True, False):
        monkeypatch.setattr(sparse_pressure_setup, "RANKS", ranks)
        g = scene(cupy, name, seed)
        kind = sparse_pressure.solver_cells(g)[0]
        level = sparse_pressure.compact_unknowns(g, kind)
        assert isinstance(level, sparse_pressure_setup._BrickUnknowns)
        assert same(tables(level, VCycle(g, kind, level)), want), f"ranks {ranks}, seed {seed}"
