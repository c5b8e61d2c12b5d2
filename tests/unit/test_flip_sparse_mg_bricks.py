"""Level 0 smoothed brick by brick (sparse_multigrid_bricks, VOXFX_SPARSE_MG_SMOOTHER "brick";
issue 24, h19a) on NumPy: the brick sweeps read no other brick's new values, the V-cycle stays
symmetric positive definite (the post-smoothing in the adjoint order; the forward order breaks
it), and the pressure solve converges. The device kernels against this reference:
tests/unit/test_cuda_sparse_brick_smooth_host.py (host harness), tests/gpu/test_flip_sparse_mg_bricks_gpu.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.unit.test_cuda_sparse_pressure_host import _tank
from voxfx.kernels.flip import sparse_multigrid, sparse_multigrid_bricks, sparse_pressure
from voxfx.kernels.flip.pressure import MG_SWEEPS
from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA, VCycle


def _level(shape=(40, 24, 36), scale=8):
    g = _tank(shape, scale)
    kind, _, _ = sparse_pressure.solver_cells(g)
    return g, kind, sparse_pressure.Unknowns(g, kind)


def _vcycle(monkeypatch, way, g, kind, level):
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", way)
    return VCycle(g, kind, level)


def test_inside_marks_the_neighbours_of_the_same_brick():
    g, _, level = _level()
    inside = sparse_multigrid_bricks.brick_inside(level)
    m = level.m
    brick = level.cells // 512
    nbr = level.nbr[:, :m]
    assert inside.shape == (6, m) and inside.any() and (~inside & (nbr < m)).any()  # both kinds occur
    i, j, k = level.lattice
    for d, axis in enumerate((i, i, j, j, k, k)):  # inside: the step keeps the brick-local coordinate in 0..7
        step = 1 if d % 2 else -1
        stays = (axis % 8 + step >= 0) & (axis % 8 + step < 8)
        ok = nbr[d] < m
        assert np.array_equal(inside[d][ok], stays[ok])
        assert np.array_equal(inside[d][ok], brick[nbr[d][ok]] == brick[ok])


def test_pre_smoothing_reads_no_other_brick():
    """b changed in one brick changes the pre-smoothed x in that brick alone; the ordinary sweeps
    carry it into the bricks beside it."""
    g, kind, level = _level()
    inside = sparse_multigrid_bricks.brick_inside(level)
    rng = np.random.default_rng(2)
    b = np.append(rng.normal(0, 1, level.m), 0).astype(np.float32)
    brick = level.cells // 512
    one = brick[np.argmax(np.bincount(brick))]  # the brick with most unknowns
    b2 = b.copy()
    b2[:level.m][brick == one] += 1.0
    x = sparse_multigrid_bricks.pre_smooth(level, inside, b, MG_OMEGA, MG_SWEEPS)
    x2 = sparse_multigrid_bricks.pre_smooth(level, inside, b2, MG_OMEGA, MG_SWEEPS)
    changed = np.flatnonzero(x[:level.m] != x2[:level.m])
    assert changed.size and np.all(brick[changed] == one) and x[level.m] == x2[level.m] == 0
    y, y2 = np.zeros_like(b), np.zeros_like(b)
    for v, rhs in ((y, b), (y2, b2)):
        for _ in range(MG_SWEEPS):
            sparse_multigrid.sweep(level, v, rhs, 0, MG_OMEGA)
            sparse_multigrid.sweep(level, v, rhs, 1, MG_OMEGA)
    assert np.any(brick[np.flatnonzero(y[:level.m] != y2[:level.m])] != one)


def test_post_smoothing_holds_the_halo_at_its_start():
    """A brick's post-smoothed x is the same whether the other bricks' x is smoothed with it or
    not: each brick reads its halo as given."""
    g, kind, level = _level()
    inside = sparse_multigrid_bricks.brick_inside(level)
    rng = np.random.default_rng(4)
    b, x0 = (np.append(rng.normal(0, 1, level.m), 0).astype(np.float32) for _ in range(2))
    whole = sparse_multigrid_bricks.post_smooth(level, inside, x0.copy(), b, MG_OMEGA, MG_SWEEPS)
    brick = level.cells // 512
    for one in np.unique(brick)[:5]:
        # smoothing where only this brick's b is used: the others' x moves too, but this brick's is the same
        assert np.array_equal(whole[:level.m][brick == one],
                              sparse_multigrid_bricks.post_smooth(level, inside, x0.copy(), b, MG_OMEGA,
                                                                  MG_SWEEPS)[:level.m][brick == one])
    assert not np.array_equal(whole, x0)


@pytest.mark.parametrize("mutant", [False, True])
def test_brick_vcycle_is_symmetric_positive_definite_and_the_forward_post_order_is_not(monkeypatch, mutant):
    g, kind, level = _level()
    M = _vcycle(monkeypatch, "brick", g, kind, level)
    assert M.smoother == "brick" and len(M.levels) >= 3
    if mutant:
        M._brick_post = (0, 1)
    rng = np.random.default_rng(7)
    u, v = (np.append(rng.normal(0, 1, level.m), 0).astype(np.float32) for _ in range(2))
    Mu, Mv = M(u), M(v)
    uMv, vMu = float(np.dot(u.astype(np.float64), Mv)), float(np.dot(v.astype(np.float64), Mu))
    scale = float(np.dot(u.astype(np.float64), Mu))
    if mutant:
        assert abs(uMv - vMu) > 1e-4 * scale  # ~5e-4 on this tank; the adjoint order ~4e-9
    else:
        assert uMv == pytest.approx(vMu, rel=1e-6, abs=1e-6 * scale)
        assert scale > 0 and float(np.dot(v, Mv)) > 0
    assert Mu[level.m] == 0


def test_brick_vcycle_differs_from_the_red_black_one_only_on_level_0(monkeypatch):
    """Same tables, another z (the smoother is not bit-identical), close to it."""
    g, kind, level = _level()
    rb = _vcycle(monkeypatch, "rb", g, kind, level)
    br = _vcycle(monkeypatch, "brick", g, kind, level)
    assert rb.smoother == "rb" and [L.m for L in rb.levels] == [L.m for L in br.levels]
    r = np.append(np.random.default_rng(1).normal(0, 1, level.m), 0).astype(np.float32)
    z_rb, z_br = rb(r), br(r)
    assert not np.array_equal(z_rb, z_br)
    assert np.abs(z_br - z_rb).max() < 0.5 * np.abs(z_rb).max()


def test_brick_pressure_solves_converge(monkeypatch):
    """The dam-break-like random scene: the brick V-cycle's PCG converges to 1e-5 in at most two
    iterations more than the red-black one's, to the same pressure within the tolerance."""
    spec, pos, vel, obstacle = random_scene(np.random.default_rng(1))
    runs = {}
    for way in ("rb", "brick"):
        monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", way)
        g = tank(np, pos, vel, spec, obstacle)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        runs[way] = (p, stats)
    (p0, s0), (p1, s1) = runs["rb"], runs["brick"]
    assert s0["converged"] and s1["converged"] and s0["iterations"] >= 3
    assert s1["iterations"] <= s0["iterations"] + 2
    assert np.abs(p1 - p0).max() <= 1e-3 * np.abs(p0).max()


def test_smoother_switch(monkeypatch):
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", None)
    monkeypatch.delenv("VOXFX_SPARSE_MG_SMOOTHER", raising=False)
    assert sparse_multigrid_bricks.smoother() == "brick"  # the default since h20d
    monkeypatch.setenv("VOXFX_SPARSE_MG_SMOOTHER", "rb")
    assert sparse_multigrid_bricks.smoother() == "rb"
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "brick")  # the module's value first
    assert sparse_multigrid_bricks.smoother() == "brick"
