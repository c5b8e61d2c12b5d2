"""The kept-hierarchy V-cycle of bench/flip_mg_iterations.py (bench/_mg_kept.py, issue 24,
h19c) on NumPy: kept from the same substep it is the fresh V-cycle bit for bit; kept from a
tank whose liquid has moved, its level 0 ↔ kept level transfers still satisfy R = ½·Pᵀ and the
V-cycle stays symmetric positive definite (⟨V a, b⟩ = ⟨a, V b⟩, ⟨a, V a⟩ > 0), as CG needs."""

import numpy as np
import pytest

from bench._mg_kept import KeptVCycle, Snapshot, _rebased
from bench._mg_variants import VariantVCycle
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure, sparse_transfer
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import PROLONG_WEIGHTS, RESTRICT_WEIGHTS
from voxfx.kernels.grid import GridSpec

SHAPE = (40, 24, 36)


def _puddles(top):
    """A closed tank with an obstacle and two puddles (tests/unit/test_cuda_sparse_pressure_host's
    tank), the first one's top at *top* of the height: another *top*, another substep's cells."""
    rng = np.random.default_rng(8)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, SHAPE)
    up = np.asarray(spec.upper)
    first = rng.uniform(0.0, 0.4, (48000, 3)) * up
    first[:, 1] *= top / 0.4
    pos = np.concatenate([first, rng.uniform(0.7, 0.95, (24000, 3)) * up]).astype(np.float32)
    g = SparseFlipGrid(spec, np, closed=True)
    g.update(pos, 3, obstacle=np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)]))
    sparse_transfer.classify(g, pos)
    kind, _, _ = sparse_pressure.solver_cells(g)
    return Snapshot(g, kind, sparse_pressure.Unknowns(g, kind)), (g, kind)


@pytest.fixture(scope="module", params=["dense", "sweeps"])
def tanks(request):
    """The two tanks, the coarsest level solved by its dense inverse (the default, 3 levels) or
    by sweeps (``MG_DENSE`` 0: no level dropped, 4 levels, so levels ≥ 3 can be kept)."""
    old = sparse_multigrid.MG_DENSE
    sparse_multigrid.MG_DENSE = 0 if request.param == "sweeps" else old
    try:
        yield _puddles(0.4), _puddles(0.7)
    finally:
        sparse_multigrid.MG_DENSE = old


def _deep_enough(tanks, keep_from):
    if any(len(t.vcycle.levels) <= keep_from for t, _ in tanks):
        pytest.skip(f"{len(tanks[0][0].vcycle.levels)} levels: none ≥ {keep_from} to keep")


def _vectors(m, seed=2):
    rng = np.random.default_rng(seed)
    return [np.append(rng.normal(0, 1, m), 0).astype(np.float32) for _ in range(2)]


@pytest.mark.parametrize("keep_from", [1, 2, 3])
def test_kept_from_the_same_substep_is_the_fresh_vcycle_bit_for_bit(tanks, keep_from):
    _deep_enough(tanks, keep_from)
    (a, (g, kind)), _ = tanks
    u, _ = _vectors(a.level0.m)
    fresh = VariantVCycle(g, kind, a.level0)
    kept = KeptVCycle(a, a, keep_from=keep_from)
    assert all(np.array_equal(x, y) for x, y in zip(kept.up + kept.down, fresh.up + fresh.down))
    assert np.array_equal(kept(u), fresh(u))


def test_kept_cells_on_another_base_give_the_same_tables(tanks):
    """The rebasing (``common_bases``): the kept coarse set 5 cells lower on every axis, the same
    cells, the same bits."""
    (a, (g, kind)), _ = tanks
    lower = Snapshot.__new__(Snapshot)
    lower.vcycle, lower.level0 = a.vcycle, a.level0
    moved = _rebased(a.cells[1], a.keys[1], tuple(b - 5 for b in a.cells[1].base))
    lower.cells, lower.keys = [a.cells[0], moved[0]], [a.keys[0], moved[1]]
    u, _ = _vectors(a.level0.m)
    kept = KeptVCycle(a, lower)
    assert np.array_equal(kept.up[0], a.vcycle.up[0]) and np.array_equal(kept.down[0], a.vcycle.down[0])
    assert np.array_equal(kept(u), a.vcycle(u))


def _dense_transfers(up, down, m_fine, m_coarse):
    """(P, R) as dense float64 matrices from the gather tables and their weights."""
    P = np.zeros((m_fine, m_coarse))
    for row, w in enumerate(PROLONG_WEIGHTS):
        ok = up[row, :m_fine] < m_coarse
        np.add.at(P, (np.flatnonzero(ok), up[row, :m_fine][ok]), float(w))
    R = np.zeros((m_coarse, m_fine))
    for row, w in enumerate(RESTRICT_WEIGHTS):
        ok = down[row, :m_coarse] < m_fine
        np.add.at(R, (np.flatnonzero(ok), down[row, :m_coarse][ok]), 0.5 * float(w))
    return P, R


@pytest.mark.parametrize("keep_from", [1, 2, 3])
def test_kept_from_another_substep_stays_symmetric_positive_definite(tanks, keep_from):
    _deep_enough(tanks, keep_from)
    (old, _), (new, (g, kind)) = tanks
    assert new.level0.m != old.level0.m  # the liquid moved: other unknowns on level 0
    kept = KeptVCycle(new, old, keep_from=keep_from)
    f = keep_from - 1
    m_fine, m_coarse = kept.levels[f].m, kept.levels[keep_from].m
    P, R = _dense_transfers(kept.up[f], kept.down[f], m_fine, m_coarse)
    assert P.any() and np.array_equal(R, 0.5 * P.T)
    # some current fine unknowns have no kept coarse unknown under them, some kept coarse
    # unknowns no current children: both sides of the change are exercised
    assert (P.sum(axis=1) == 0).any() or (P.sum(axis=0) < P.sum(axis=0).max()).any()
    u, v = _vectors(new.level0.m)
    Mu, Mv = kept(u).astype(np.float64), kept(v).astype(np.float64)
    uMv, vMu = float(u @ Mv), float(v @ Mu)
    assert abs(uMv - vMu) <= 1e-4 * max(abs(uMv), 1.0)
    assert float(u @ Mu) > 0 and float(v @ Mv) > 0
    assert not np.array_equal(kept(u), VariantVCycle(g, kind, new.level0)(u))
