"""The coarsest level solved by its dense inverse (sparse_multigrid.MG_DENSE,
VOXFX_SPARSE_MG_DENSE; issue 24, i24p4) on NumPy: G the inverse of the level's operator, the
V-cycle still symmetric positive definite (CG stays valid), "2" one level fewer, and the
pressure solve converging in no more iterations. The device's G and z against these:
tests/unit/test_cuda_sparse_vcycle_plan_host.py (host harness), tests/gpu/test_flip_sparse_mg_dense_gpu.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.unit.test_cuda_sparse_pressure_host import _tank
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec


def _vcycles(monkeypatch, modes=(0, 1, 2)):
    g = _tank((40, 24, 36), 8)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    out = {}
    for mode in modes:
        monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
        out[mode] = VCycle(g, kind, level)
    return out, level


def test_dense_inverse_is_the_coarsest_operators_inverse(monkeypatch):
    M, _ = _vcycles(monkeypatch)
    assert len(M[1].levels) == len(M[0].levels) == len(M[2].levels) + 1
    assert M[0].dense is None and M[0].dense_mode == 0
    for mode in (1, 2):
        C, g = M[mode].levels[-1], M[mode].dense
        assert g.dtype == np.float32 and g.shape == (C.m, C.m) and np.array_equal(g, g.T)
        a = sparse_multigrid.dense_operator(C)
        assert np.allclose(g @ a, np.eye(C.m), atol=1e-5)
        b = np.append(np.random.default_rng(mode).normal(0, 1, C.m), 0).astype(np.float32)
        x = sparse_multigrid.dense_solve(g, b)
        assert x[C.m] == 0 and np.allclose(C.apply(x)[:C.m], b[:C.m], atol=1e-4)


def test_dense_two_drops_a_level_only_where_the_one_above_is_small(monkeypatch):
    monkeypatch.setattr(sparse_multigrid, "DENSE_DROP_UNKNOWNS", 0)
    M, _ = _vcycles(monkeypatch, (0, 2))
    assert len(M[2].levels) == len(M[0].levels) and M[2].levels[-1].m == M[0].levels[-1].m


@pytest.mark.parametrize("mode", [1, 2])
def test_dense_vcycle_is_symmetric_positive_definite(monkeypatch, mode):
    M, level = _vcycles(monkeypatch, (mode,))
    rng = np.random.default_rng(7)
    u, v = (np.append(rng.normal(0, 1, level.m), 0).astype(np.float32) for _ in range(2))
    Mu, Mv = M[mode](u), M[mode](v)
    uMv, vMu = float(np.dot(u, Mv)), float(np.dot(v, Mu))
    assert uMv == pytest.approx(vMu, rel=1e-4, abs=1e-4 * float(np.dot(u, Mu)))
    assert float(np.dot(u, Mu)) > 0 and float(np.dot(v, Mv)) > 0


def test_dense_pressure_solves_converge_in_no_more_iterations(monkeypatch):
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(1))
    runs = {}
    for mode in (0, 1, 2):
        monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
        g = tank(np, pos, vel, spec, obstacle)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        sparse_pressure.project(g, p, 0.01)
        runs[mode] = (p, stats, float(np.abs(sparse_pressure.divergence(g)).max()))
    p0, s0, d0 = runs[0]
    assert s0["converged"] and s0["iterations"] >= 3
    for mode in (1, 2):
        p, s, d = runs[mode]
        assert s["converged"] and s["iterations"] <= s0["iterations"]
        assert np.abs(p - p0).max() <= 1e-3 * np.abs(p0).max() and d <= 2 * d0 + 1e-6


def test_dense_mode_from_the_environment(monkeypatch):
    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", None)
    monkeypatch.delenv("VOXFX_SPARSE_MG_DENSE", raising=False)
    assert sparse_multigrid.dense_mode() == 2  # the default since the fourteenth session
    monkeypatch.setenv("VOXFX_SPARSE_MG_DENSE", "0")
    assert sparse_multigrid.dense_mode() == 0
    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", 1)  # the module's value first
    assert sparse_multigrid.dense_mode() == 1
    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", None)
    monkeypatch.setenv("VOXFX_SPARSE_MG_DENSE", "3")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_MG_DENSE"):
        sparse_multigrid.dense_mode()


@pytest.mark.parametrize("shape,fill", [((96, 96, 24), (1.0, 1.0, 0.15)), ((64, 64, 64), (0.6, 0.6, 0.6)),
                                        ((128, 128, 16), (0.9, 0.9, 0.12))])
def test_the_dense_coarsest_level_fits_the_bounded_rows(monkeypatch, shape, fill):
    """The coarsest level a dense inverse solves spans < MG_MIN_SIDE cells on its longest axis (or
    is empty) or, "2", is the level above such a one with ≤ DENSE_DROP_UNKNOWNS unknowns: within
    ``sparse_pressure_buffers.DENSE_ROWS`` "bound"'s least rows (i24b3: G and its scratch sized by
    that level's stride, the set-up's capacity, held 13.0–29.3 MiB for it at the spreading 1M
    liquid's frame 11). A thin sheet's coarsening ends in an empty level (its coarse cells lack the
    fluid children): (96, 96, 24) at 15% depth, levels of 36769, 4513, 484 and 0 unknowns."""
    from voxfx.kernels.flip.sparse_pressure_buffers import _DENSE_ROWS_MIN

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, shape)
    rng = np.random.default_rng(3)
    n = int(np.prod(shape) * np.prod(fill) * 8)
    pos = (rng.uniform(0, 1, (n, 3)) * np.asarray(fill) * np.asarray(spec.upper)).astype(np.float32)
    g = tank(np, pos, np.zeros_like(pos), spec)
    _, kind, *_ = sparse_pressure.pressure_rhs(g, 0.01, None)
    level = sparse_pressure.Unknowns(g, kind)
    for mode in (1, 2):
        monkeypatch.setattr(sparse_multigrid, "MG_DENSE", mode)
        M = VCycle(g, kind, level)
        assert len(M.levels) >= 3 and M.dense_mode == mode and M.dense is not None
        assert M.levels[-1].m <= _DENSE_ROWS_MIN == sparse_multigrid.DENSE_DROP_UNKNOWNS
