"""The kernels around the sparse pressure solve (``sparse_pressure_cells.around_kernels``,
``VOXFX_SPARSE_PRESSURE_AROUND``: warm_guess, unknowns_scatter, warm_carry, the last two in one
launch — unknowns_scatter_carry — where a warm solve has no sealed region) against the CuPy
array code they replace: the same pressure, iterations and carried warm start bit for bit over
warm solves in a row, sealed regions included, and each kernel against its array expression
on random values (NaN and ±inf among the carried ones)."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_bricks_gpu import host
from tests.gpu.test_flip_sparse_pressure_one_read_gpu import scene
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_cells
from voxfx.kernels.flip.grid import FLUID

DT = 1 / 60


def _warm_solves(monkeypatch, way, name, seed, fused=None):
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_PRESSURE_AROUND", way)
    if fused is not None:  # count the scatter-and-carry launches a solve makes first (with
        # VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD=1 it launches again into its own arrays, out=, before later reads)
        one = sparse_pressure_cells.unknowns_scatter_carry
        monkeypatch.setattr(sparse_pressure_cells, "unknowns_scatter_carry",
                            lambda *a, **k: (None if k else fused.append(1)) or one(*a, **k))
    g = scene(cupy, name, seed)
    out = []
    for step in range(3):
        g["u"] = g["u"] + np.float32(0.01 * (step + 1))  # another right-hand side each solve
        p, stats = sparse_pressure.solve_pressure(g, DT, tolerance=1e-5, warm_start=True)
        out.append((host(p), stats["iterations"], host(g[sparse_pressure.CARRIED])))
    return out


@pytest.mark.parametrize("name", ("tank", "speckled", "sheet"))
def test_around_kernels_give_the_array_codes_solves(monkeypatch, name):
    seed = int(np.random.default_rng().integers(1 << 30))
    fused = []
    arrays = _warm_solves(monkeypatch, "arrays", name, seed)
    kernels = _warm_solves(monkeypatch, "kernels", name, seed, fused)
    for (pa, ia, ca), (pk, ik, ck) in zip(arrays, kernels):
        assert ia == ik, f"seed {seed}"
        assert np.array_equal(pa.view(np.uint32), pk.view(np.uint32)), f"seed {seed}"
        assert np.array_equal(ca.view(np.uint32), ck.view(np.uint32)), f"seed {seed}"
    if name == "tank":  # its solves without a sealed region carry in their scatter's launch
        assert 1 <= len(fused) <= 3, (len(fused), seed)
    if name == "speckled":  # sealed regions: the scatter, the mean removed, then the carry
        assert not fused, seed


def test_each_around_kernel_equals_its_array_expression():
    import cupy as cp

    rng = np.random.default_rng()
    n = 5000
    carried = rng.normal(0, 3, n).astype(np.float32)
    carried[rng.random(n) < 0.2] = np.nan
    carried[:3] = (np.inf, -np.inf, -0.0)
    c = cp.asarray(carried)
    want = cp.where(cp.isfinite(c), c, np.float32(0))
    assert np.array_equal(host(sparse_pressure_cells.warm_guess(c)).view(np.uint32), host(want).view(np.uint32))
    m = 1700
    cells = cp.asarray(rng.permutation(n)[:m])
    position = cp.full(n, m, cp.int32)
    position[cells] = cp.arange(m, dtype=cp.int32)
    x = cp.asarray(rng.normal(0, 1, m + 1).astype(np.float32))
    want = cp.zeros(n, cp.float32)
    want[cells] = x[:m]
    got = sparse_pressure_cells.unknowns_scatter(position, x, m, n)
    assert np.array_equal(host(got).view(np.uint32), host(want).view(np.uint32))
    cell = cp.asarray(rng.integers(0, 3, n).astype(np.uint8))
    want = cp.where(cell == FLUID, got, np.float32(np.nan)).astype(cp.float32)
    assert np.array_equal(host(sparse_pressure_cells.warm_carry(cell, got)).view(np.uint32),
                          host(want).view(np.uint32))
    p, kept = sparse_pressure_cells.unknowns_scatter_carry(position, x, m, n, cell)  # both in one launch
    assert np.array_equal(host(p).view(np.uint32), host(got).view(np.uint32))
    assert np.array_equal(host(kept).view(np.uint32), host(want).view(np.uint32))
