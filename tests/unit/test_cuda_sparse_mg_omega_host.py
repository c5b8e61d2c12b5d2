"""The over-relaxed V-cycle (``sparse_multigrid.MG_OMEGA``, ``VOXFX_SPARSE_MG_OMEGA``, default
1.3; issue 24, i24m) on the host. test_cuda_sparse_pressure_host.py checks the kernels at the
default ω against the NumPy reference; here the same harness compiled with the other values
(plain Gauss-Seidel, ω = 1, and ω = 1.45) gives the reference's z bit for bit too — split and
fused launches, the one-block and cluster tails, their shared-memory forms and
mg_smooth_first2 — and PCG with the over-relaxed V-cycle reaches the tolerance in fewer
iterations on a tank than plain Gauss-Seidel. The device run is
tests/gpu/test_flip_sparse_mg_omega_gpu.py."""

import numpy as np
import pytest

from tests.unit import test_cuda_sparse_pressure_host as base
from tests.unit.test_cuda_exact import _build, with_defines
from voxfx.kernels.flip import sparse_multigrid, sparse_multigrid_bricks, sparse_pressure
from voxfx.kernels.flip.pressure import MG_SWEEPS
from voxfx.kernels.flip.sparse_pressure_gpu import _MGT

OMEGA = 1.3


@pytest.fixture(scope="module", params=[1.0, 1.45], ids=["plain", "1.45"])
def omega_device(request, tmp_path_factory):
    """(ω, the harness compiled with it: as kernels.grid.launch writes a float define)."""
    omega = request.param
    text = float(np.float32(omega)).hex() + "f"
    extra = [f"#define MG_SWEEPS {MG_SWEEPS}", "#undef MG_OMEGA", f"#define MG_OMEGA {text}"]
    return omega, _build(tmp_path_factory, with_defines(base.HARNESS, _MGT, extra))


@pytest.mark.parametrize("scene", [(), ((40, 24, 36), 8)], ids=["tank", "big-tank"])
def test_vcycle_kernels_of_another_omega_equal_the_numpy_reference_bit_for_bit(omega_device, scene, monkeypatch):
    omega, device = omega_device
    monkeypatch.setattr(sparse_multigrid, "MG_OMEGA", omega)
    base.test_sparse_pressure_kernels_equal_the_numpy_tables_bit_for_bit(device, scene)


def test_over_relaxation_changes_the_vcycle_and_keeps_it_symmetric(monkeypatch):
    """ω = 1.3 gives another z than plain Gauss-Seidel (the switch is live), and the
    V-cycle stays a symmetric operator (CG's condition): u·M v = v·M u."""
    g = base._tank((40, 24, 36), 8)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = sparse_multigrid.VCycle(g, kind, level)
    rng = np.random.default_rng(5)
    u, v = (np.append(rng.normal(0, 1, level.m), 0).astype(np.float32) for _ in range(2))
    monkeypatch.setattr(sparse_multigrid, "MG_OMEGA", 1.0)
    plain = M(u)
    monkeypatch.setattr(sparse_multigrid, "MG_OMEGA", OMEGA)
    relaxed_u, relaxed_v = M(u), M(v)
    assert np.abs(relaxed_u - plain).max() > 1e-3 * np.abs(plain).max()
    uMv, vMu = float(u.astype(np.float64) @ relaxed_v), float(v.astype(np.float64) @ relaxed_u)
    assert abs(uMv - vMu) <= 1e-4 * max(abs(uMv), 1.0)
    assert float(u.astype(np.float64) @ relaxed_u) > 0


def test_over_relaxed_pcg_converges_in_fewer_iterations_on_a_tank(monkeypatch):
    """ω of the red-black sweeps (the kernels these harnesses check): level 0 so too
    (sparse_multigrid_bricks.SMOOTHER "rb"; the default "brick" smooths inside bricks)."""
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")
    g = base._tank((40, 24, 36), 8)
    rng = np.random.default_rng(11)
    fluid = g["cell"] == base.FLUID
    b = np.where(fluid, rng.normal(0, 1, g.size), 0).astype(np.float32)
    kind, _, _ = sparse_pressure.solver_cells(g)
    counts = []
    for omega in (1.0, OMEGA):
        monkeypatch.setattr(sparse_multigrid, "MG_OMEGA", omega)
        monkeypatch.setattr(g, "_pressure_memo", None, raising=False)  # no tables kept across the two
        p, its, residual, converged = sparse_pressure.pcg(g, kind, b, 1e-6, 200, check_every=1)
        assert converged and residual <= 1e-6
        level = sparse_pressure.Unknowns(g, kind)
        r = level.gather(b) - level.apply(level.gather(p))
        assert np.linalg.norm(r) <= 2e-6 * np.linalg.norm(level.gather(b))
        counts.append(its)
    assert counts[1] < counts[0]
