"""The conservative surface is exactly the closed-box SAT (issue 22 §1, seed 004 §3).

Oracle: ``exact_oracle.surface_voxels``, the 13-axis SAT of each triangle against closed
voxel boxes in rationals (``fractions.Fraction``), sharing no code with the kernels.
Soups (``tests/exact_soups.py``): slivers collinear in floating point, exactly
degenerate triangles, triangles lying in voxel face planes, lattice vertices,
one-decimal triangles and off-lattice axis-parallel ones; on the unit grid and on a
grid of 0.1 m voxels with an off-lattice origin, where every tie becomes a near-tie
within rounding. Before the fix these soups lost voxels (slivers: the float normal's
signs were noise; face planes: only one of the two layers) and thin ⊄ conservative.
"""

import numpy as np
import pytest

from tests import exact_soups as soups
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize import exact
from voxfx.kernels.voxelize.lines import voxelize_segments

from . import exact_oracle as oracle

KIND_NAMES = [k.__name__ for k in soups.KINDS]


def dense(v, t, spec, mode):
    return bitgrid.unpack(voxelize(v, t, spec, mode, xp=np).bits, spec.shape[0]).astype(bool)


def one_kind(kind, seed, count):
    rng = np.random.default_rng(seed)
    make = soups.KINDS[KIND_NAMES.index(kind)]
    v = np.asarray([make(rng) for _ in range(count)], dtype=np.float64).reshape(-1, 3)
    return v, np.arange(len(v)).reshape(-1, 3)


def test_sliver_collinear_in_float_sets_every_voxel_its_segment_crosses():
    """c = a + 0.7(b − a) in float64: the normal is ≈ 1e-16, its signs noise."""
    v = np.array([(2.6, 3.7, 1.4), (3.3, 1.9, 2.3), (3.09, 2.44, 2.03)])
    t = np.array([[0, 1, 2]])
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (8, 8, 8))
    got = dense(v, t, spec, "surface")
    assert got[1, 2, 3]  # [k, j, i]: the segment a–b crosses voxel (3, 2, 1) for t ∈ [0.571, 0.667]
    segment = bitgrid.unpack(voxelize_segments(v[:1], v[1:2], spec), 8).astype(bool)
    assert not (segment & ~got).any()
    assert np.array_equal(got, oracle.surface_voxels(v, t, spec.shape))


def test_triangle_in_a_voxel_face_plane_sets_both_layers():
    v = np.array([(2.3, 2.6, 3.0), (1.1, 4.7, 3.0), (1.8, 0.9, 3.0)])
    t = np.array([[0, 1, 2]])
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (8, 8, 8))
    got = dense(v, t, spec, "surface")
    assert got[2].sum() == got[3].sum() == 8 and got.sum() == 16
    assert np.array_equal(got[2], got[3])
    assert np.array_equal(got, oracle.surface_voxels(v, t, spec.shape))


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("scaled", [False, True], ids=["unit", "scaled"])
def test_surface_equals_exact_closed_box_sat_on_soups(kind, scaled):
    missing = extra = thin_outside = 0
    for seed in range(6):
        v, t = one_kind(kind, 100 * seed + 7, 10)
        spec = soups.UNIT
        if scaled:
            v, spec = soups.scaled(v), soups.SCALED
        want = oracle.surface_voxels(oracle.voxel_units(v, spec.origin, spec.voxel_size), t, spec.shape)
        got = dense(v, t, spec, "surface")
        thin = dense(v, t, spec, "thin")
        missing += int((want & ~got).sum())
        extra += int((got & ~want).sum())
        thin_outside += int((thin & ~got).sum())
    assert (missing, extra, thin_outside) == (0, 0, 0)


def test_mixed_soups_equal_the_oracle_and_thin_is_inside():
    for seed in range(4):
        for scaled in (False, True):
            v, t = soups.soup(1000 + seed, per_kind=3)
            spec = soups.UNIT
            if scaled:
                v, spec = soups.scaled(v), soups.SCALED
            want = oracle.surface_voxels(oracle.voxel_units(v, spec.origin, spec.voxel_size), t, spec.shape)
            got = dense(v, t, spec, "surface")
            assert np.array_equal(got, want), (seed, scaled)
            assert not (dense(v, t, spec, "thin") & ~got).any()


def test_exactly_degenerate_triangles_are_their_segments():
    """A triangle with collinear (dyadic, so exactly collinear) corners touches what its
    longest edge touches: the 3-D line voxelizer (lines.py) as a second oracle."""
    rng = np.random.default_rng(5)
    a = np.round(rng.uniform(0, 8, (40, 3)) * 4) / 4
    b = np.round(np.clip(a + rng.uniform(-3, 3, (40, 3)), 0, 8) * 4) / 4
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (8, 8, 8))
    for m in range(len(a)):
        v = np.stack([a[m], (a[m] + b[m]) / 2, b[m]])
        got = voxelize(v, np.array([[0, 1, 2]]), spec, "surface", xp=np).bits
        assert np.array_equal(got, voxelize_segments(a[m:m + 1], b[m:m + 1], spec)), m


def test_exact_predicates_agree_with_rationals_near_ties():
    """Tiers 2–3 of ``exact``: random near-collinear and lattice inputs, every sign
    compared with a Fraction evaluation."""
    from fractions import Fraction as F

    rng = np.random.default_rng(11)
    n = 400
    u = np.round(rng.uniform(0, 6, (n, 3)), 1)
    w = np.round(rng.uniform(0, 6, (n, 3)), 1)
    x = np.floor(u + rng.uniform(0, 1, (n, 1)) * (w - u))  # integer corners near the segment
    third = u + 0.3 * (w - u)  # near-collinear triangles (u, w, third)
    v = np.stack([u, w, third], axis=1)
    e0, e1 = w - u, third - w
    n_ = np.cross(e0, e1)
    signs = exact.plane_signs(v, n_, exact.normal_error(e0, e1), x)
    orient = exact.orientation_signs(v, n_, exact.normal_error(e0, e1))
    for m in range(n):
        P = [[F(float(c)) for c in row] for row in v[m]]
        E0 = [P[1][k] - P[0][k] for k in range(3)]
        E1 = [P[2][k] - P[1][k] for k in range(3)]
        N = (E0[1] * E1[2] - E0[2] * E1[1], E0[2] * E1[0] - E0[0] * E1[2], E0[0] * E1[1] - E0[1] * E1[0])
        value = sum(N[k] * (F(float(x[m, k])) - P[0][k]) for k in range(3))
        assert signs[m] == (value > 0) - (value < 0), m
        assert list(orient[m]) == [(c > 0) - (c < 0) for c in N], m
    a, b = 0, 1
    for s in (1.0, -1.0):
        na, nb = -(w[:, b] - u[:, b]) * s, (w[:, a] - u[:, a]) * s
        ok = exact.edge_at_least_zero(v, 0, a, b, na, nb, np.full(n, s), x)
        for m in range(n):
            ua, ub, wa, wb = (F(float(c)) for c in (u[m, a], u[m, b], w[m, a], w[m, b]))
            value = (wa - ua) * (F(float(x[m, b])) - ub) - (wb - ub) * (F(float(x[m, a])) - ua)
            assert ok[m] == (s * value >= 0), (m, s)


def test_face_plane_faces_take_no_rational_fallback(monkeypatch):
    """Axis-aligned ties and corners on vertices are decided by the difference form
    (tier 2): a box whose faces lie in voxel face planes never reaches the rational
    fallback (sides 7, 6, 5: the faces' diagonals meet no other lattice point, which
    would be a true tie of general geometry)."""
    calls = []
    monkeypatch.setattr(exact, "_plane", lambda *a: calls.append(a) or 0)
    monkeypatch.setattr(exact, "_orient2d", lambda *a: calls.append(a) or 0)
    corners = np.array([[x, y, z] for z in (2.0, 7.0) for y in (1.0, 7.0) for x in (3.0, 10.0)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    t = np.array([[q[0], q[1], q[2]] for q in quads] + [[q[0], q[2], q[3]] for q in quads])
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (13, 13, 13))
    got = dense(corners, t, spec, "surface")
    assert not calls
    assert np.array_equal(got, oracle.surface_voxels(corners, t, spec.shape))


@pytest.mark.parametrize("mode", ["surface", "thin"])
def test_ties_decided_in_small_chunks_give_the_same_voxels(monkeypatch, mode):
    """The exact fallbacks run in chunks of ``UNSURE_CHUNK`` items (a bounded peak where a
    face lies on voxel planes and every candidate is a tie): the chunk size changes no
    voxel."""
    from tests.meshes import box
    from voxfx.kernels.voxelize import triangles

    v, t = box((1.0, 2.0, 3.0), (9.0, 8.5, 7.0))  # faces on voxel planes: ties everywhere
    sv, st = soups.soup(11)
    cases = [(v, t, GridSpec((0.0, 0.0, 0.0), 0.5, (24, 24, 24))), (sv, st, soups.UNIT)]
    whole = [voxelize(a, b, g, mode, xp=np).bits for a, b, g in cases]
    monkeypatch.setattr(triangles, "UNSURE_CHUNK", 7)
    for (a, b, g), want in zip(cases, whole):
        assert np.array_equal(voxelize(a, b, g, mode, xp=np).bits, want)
        assert bitgrid.count(want) > 0
