"""The multigrid variants of bench/flip_mg_iterations.py (sparse_multigrid_variants, issue
24, i24m) on NumPy: with the default options the variant V-cycle is the reference's bit for
bit, and every variant stays a symmetric positive definite operator (u·M v = v·M u,
u·M u > 0), the condition for CG."""

import numpy as np
import pytest

from tests.unit.test_cuda_sparse_pressure_host import _tank
from voxfx.kernels.flip import sparse_pressure
from voxfx.kernels.flip.sparse_multigrid import VCycle
from bench._mg_variants import BrickBoundary, MGOptions, VariantVCycle


@pytest.fixture(scope="module")
def system():
    g = _tank((40, 24, 36), 8)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    rng = np.random.default_rng(2)
    u, v = (np.append(rng.normal(0, 1, level.m), 0).astype(np.float32) for _ in range(2))
    return g, kind, level, u, v


@pytest.mark.usefixtures("mg_dense_sweeps")
def test_default_variant_is_the_reference_vcycle_bit_for_bit(system):
    g, kind, level, u, _ = system
    assert np.array_equal(VariantVCycle(g, kind, level)(u), VCycle(g, kind, level)(u))


@pytest.mark.parametrize("options", [
    MGOptions(omega=1.0), MGOptions(boundary_sweeps=2, boundary_width=2, smoother="rb"),  # red-black variants
    MGOptions(boundary_sweeps=1, boundary_air=True, smoother="rb"),
    MGOptions(coarse_exact=True), MGOptions(coarsen_fluid=4), MGOptions(correction=1.2),
    MGOptions(coarse_level_sweeps=4, coarse_from=1), MGOptions(surface="layer"),
    MGOptions(brick_boundary=2, smoother="brick"),  # boundary sweeps inside level 0's bricks (s23a)
    MGOptions(brick_boundary=1, brick_boundary_width=2, brick_boundary_first=True, smoother="brick")],
    ids=["omega", "boundary", "boundary-air", "coarse-exact", "coarsen-4", "correction", "coarse-sweeps", "surface",
         "brick-boundary", "brick-boundary-first"])
def test_every_variant_is_a_symmetric_positive_definite_operator_that_differs(system, options):
    g, kind, level, u, v = system
    M = VariantVCycle(g, kind, level, options)
    Mu, Mv = M(u).astype(np.float64), M(v).astype(np.float64)
    uMv, vMu = float(u @ Mv), float(v @ Mu)
    assert abs(uMv - vMu) <= 1e-4 * max(abs(uMv), 1.0)
    assert float(u @ Mu) > 0 and float(v @ Mv) > 0
    if not options.coarse_exact:  # (this tank's few coarsest unknowns: the sweeps solve them exactly already)
        assert not np.array_equal(M(u), VCycle(g, kind, level)(u))


def test_level0_boundary_smoothing_is_a_red_black_variant(system):
    """The brick smoother (the default since h20d) pre-smooths from 0: boundary sweeps on level 0
    before it are refused, not lost."""
    g, kind, level, _, _ = system
    with pytest.raises(ValueError, match="smoother=rb"):
        VariantVCycle(g, kind, level, MGOptions(boundary_sweeps=1, smoother="brick"))
    VariantVCycle(g, kind, level, MGOptions(boundary_sweeps=1, boundary_from=1, smoother="brick"))


@pytest.mark.parametrize("first", [False, True])
def test_brick_boundary_sweeps_break_the_symmetry_in_the_forward_post_order(system, monkeypatch, first):
    """The boundary sweeps inside the bricks (s23a) keep the V-cycle symmetric only with the
    post-smoothing's boundary colours in the adjoint order (black, red): the forward order breaks it."""
    g, kind, level, u, v = system
    options = MGOptions(brick_boundary=2, brick_boundary_first=first, smoother="brick")
    gaps = []
    for post in ((1, 0), (0, 1)):
        monkeypatch.setattr(BrickBoundary, "post", post)
        M = VariantVCycle(g, kind, level, options)
        Mu, Mv = M(u).astype(np.float64), M(v).astype(np.float64)
        gaps.append(abs(float(u @ Mv) - float(v @ Mu)) / float(u @ Mu))
    assert gaps[0] < 1e-6 < 1e-4 < gaps[1], gaps



def test_brick_boundary_sweeps_stay_inside_the_brick(system):
    """With the boundary sweeps (s23a) the pre-smoothing still reads no other brick: b changed in one
    brick changes x in that brick alone; and the sweeps change x there (the boundary unknowns only
    before the next brick sweep)."""
    from voxfx.kernels.flip import sparse_multigrid_bricks as bricks
    from voxfx.kernels.flip.sparse_multigrid import MG_OMEGA

    _, _, level, u, _ = system
    inside = bricks.brick_inside(level)
    edge = BrickBoundary(level, 2, 1, MG_OMEGA)
    brick = level.cells // 512
    one = brick[np.argmax(np.bincount(brick))]
    u2 = u.copy()
    u2[:level.m][brick == one] += 1.0
    x, x2 = (bricks.pre_smooth(level, inside, rhs, MG_OMEGA, 3, boundary=edge) for rhs in (u, u2))
    changed = np.flatnonzero(x[:level.m] != x2[:level.m])
    assert changed.size and np.all(brick[changed] == one)
    plain = bricks.pre_smooth(level, inside, u, MG_OMEGA, 3)
    moved = np.flatnonzero(plain[:level.m] != x[:level.m])
    assert moved.size and np.isin(moved, np.concatenate(edge.cells)).all()
