"""h20c's probe (bench/_dense_bricks.py): the dense-brick kernels (_dense_bricks.cu) against their NumPy
references on the same dense arrays — every pass bit for bit (the sweeps from x = 0 and from a random x,
the residual, q = A p, the restriction, the prolongation), the dot p·q to double rounding — on the unit
test's tank, its pool out of key order and a two-block scene with an obstacle of many bricks. The
references against today's operations: tests/unit/test_flip_dense_bricks_probe.py."""

import numpy as np
import pytest

from bench import _dense_bricks as db
from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.unit.test_cuda_sparse_pressure_bricks_host import scene
from voxfx.kernels.flip import sparse_pressure


def _grid(name):
    if name == "blocks":
        spec, pos, vel, obstacle = random_scene(np.random.default_rng(11))
        return tank(np, pos, vel, spec, obstacle)
    return scene(name)


def _bits(a, b):
    return np.array_equal(np.asarray(a).view(np.int32), np.asarray(b).view(np.int32))


@pytest.mark.parametrize("name", ["tank", "moved", "blocks"])
def test_dense_brick_kernels_match_numpy(name):
    import cupy as cp

    g = _grid(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    s = db.DenseSystem(g, kind)
    d = s.on_device()
    k = db.Kernels(d)
    rng = np.random.default_rng(7)
    on = s.diag > 0
    b = np.where(on, rng.normal(size=s.n), 0).astype(np.float32)
    x = np.where(on, rng.normal(size=s.n), 0).astype(np.float32)
    nb = s.neighbours()
    xg, bg = cp.asarray(x), cp.asarray(b)
    for colour, first in ((0, True), (1, True), (0, False), (1, False), (1, False), (0, False)):
        db.reference_sweep(s, nb, x, b, colour, first)
        k.sweep(xg, bg, colour, first)
        assert _bits(xg.get(), x), (colour, first)
    r = cp.zeros_like(xg)  # the kernels write the bricks holding FLUID alone: the others stay 0, as read
    k.residual(xg, bg, r)
    assert _bits(r.get(), db.reference_residual(s, nb, x, b))
    q = cp.zeros_like(xg)
    k.apply_dot(xg, q)
    qr, dot = db.reference_apply(s, nb, x)
    assert _bits(q.get(), qr)
    assert float(k.dot.get()[0]) == pytest.approx(dot, rel=1e-12)
    b1 = cp.full(s.capacity * db.COARSE, np.nan, cp.float32)  # slots not in `bricks` stay unwritten
    k.restrict(r, b1)
    want = db.reference_restrict(s, s.restrict_rows(), r.get())
    mine = np.where(np.repeat(np.isin(np.arange(s.capacity), s.bricks), db.COARSE), b1.get(), want)
    assert (s.diag1 > 0).sum() > 10 and _bits(mine, want)
    x1 = np.where(s.diag1 > 0, rng.normal(size=s.diag1.shape[0]), 0).astype(np.float32)
    k.prolong(cp.asarray(x1), xg)
    assert _bits(xg.get(), db.reference_prolong(s, s.prolong_rows(), x, x1))
