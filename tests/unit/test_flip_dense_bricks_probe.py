"""h20c's probe of level 0 dense in the pool's bricks (bench/_dense_bricks.py): its NumPy passes on the
dense arrays are today's ``sparse_multigrid`` / ``sparse_pressure`` operations on the fluid cells — the
sweeps (from x = 0 and from a random x), the residual and A p bit for bit, level 1's dense mask the
TableBuilder's level 1 (its unknowns and diagonal), the restriction to float rounding (added separably,
today in one chain), the prolongation bit for bit — on a tank, on a pool whose slots are out of key
order and on two blocks of water with an obstacle (35 bricks). The kernels against these:
tests/gpu/test_flip_dense_bricks_probe_gpu.py."""

import numpy as np
import pytest

from bench import _dense_bricks as db
from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.unit.test_cuda_sparse_pressure_bricks_host import scene
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA, PROLONG_WEIGHTS, RESTRICT_WEIGHTS


def _grid(name):
    if name == "blocks":  # two blocks of water, an obstacle, many bricks
        spec, pos, vel, obstacle = random_scene(np.random.default_rng(11))
        return tank(np, pos, vel, spec, obstacle)
    return scene(name)


def _system(name):
    g = _grid(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    return g, kind, level, db.DenseSystem(g, kind)


def _same(a, b):
    return np.array_equal(np.asarray(a, np.float32).view(np.int32), np.asarray(b, np.float32).view(np.int32))


@pytest.mark.parametrize("name", ["tank", "moved", "blocks"])
def test_dense_level0_passes_are_todays(name):
    g, kind, level, s = _system(name)
    assert level.m > 100 and int((s.diag > 0).sum()) == level.m
    on = np.arange(level.m + 1) < level.m
    assert np.array_equal(s.to_unknowns(level, s.diag.astype(np.float32)), level.diag * on)
    rng = np.random.default_rng(3)
    b = rng.normal(size=level.m + 1).astype(np.float32)
    b[level.m] = 0
    x = rng.normal(size=level.m + 1).astype(np.float32)
    x[level.m] = 0
    nb = s.neighbours()
    bd, xd = s.from_unknowns(level, b), s.from_unknowns(level, x)
    # the first sweep from x = 0 (the dense x holds garbage on the unknowns: `first` ignores it)
    today = np.zeros_like(x)
    for colour in (0, 1):
        sparse_multigrid.sweep(level, today, b, colour, MG_OMEGA)
        db.reference_sweep(s, nb, xd, bd, colour, first=True)
    assert _same(s.to_unknowns(level, xd), today)  # both colours written
    for colour in (0, 1, 1, 0):  # sweeps from there
        sparse_multigrid.sweep(level, today, b, colour, MG_OMEGA)
        db.reference_sweep(s, nb, xd, bd, colour)
        assert _same(s.to_unknowns(level, xd), today), colour
    assert not xd[s.diag == 0].any()  # off the unknowns x stays 0
    r = b - level.apply(x)
    rd = db.reference_residual(s, nb, s.from_unknowns(level, x), bd)
    assert _same(s.to_unknowns(level, rd), r) and not rd[s.diag == 0].any()
    q = level.apply(x)
    qd, dot = db.reference_apply(s, nb, s.from_unknowns(level, x))
    assert _same(s.to_unknowns(level, qd), q)
    assert dot == pytest.approx(float(np.dot(x.astype(np.float64), q.astype(np.float64))), rel=1e-12)


@pytest.mark.parametrize("name", ["tank", "moved", "blocks"])
def test_dense_level1_and_transfers_are_todays(name):
    g, kind, level, s = _system(name)
    coarse, lattice, down, up = db.today_level1(g, kind, level)
    assert coarse.m > 10
    places = db.level1_places(g, lattice)
    assert (places >= 0).all() and int((s.diag1 > 0).sum()) == coarse.m
    assert np.array_equal(s.diag1[places].astype(np.float32), coarse.diag[:coarse.m])
    rng = np.random.default_rng(5)
    r = rng.normal(size=level.m + 1).astype(np.float32)
    r[level.m] = 0
    today = np.float32(0.5) * sparse_multigrid.gather_sum(r, down, RESTRICT_WEIGHTS)
    b1 = db.reference_restrict(s, s.restrict_rows(), s.from_unknowns(level, r))
    scale = float(np.abs(today).max())
    assert np.abs(b1[places] - today[:coarse.m]).max() <= 4e-7 * scale
    assert not b1[s.diag1 == 0].any()
    x1 = rng.normal(size=coarse.m + 1).astype(np.float32)
    x1[coarse.m] = 0
    x1d = np.zeros(s.capacity * db.COARSE, np.float32)
    x1d[places] = x1[:coarse.m]
    x = rng.normal(size=level.m + 1).astype(np.float32)
    x[level.m] = 0
    today = x + sparse_multigrid.gather_sum(x1, up, PROLONG_WEIGHTS)
    xd = db.reference_prolong(s, s.prolong_rows(), s.from_unknowns(level, x), x1d)
    assert _same(s.to_unknowns(level, xd)[:level.m], today[:level.m])
