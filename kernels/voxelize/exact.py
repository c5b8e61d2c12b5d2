"""Exact signs for the triangle/box test (seed 004 §3.1 decided as the closed-box SAT does).

Every test of the conservative voxelizer is the sign of one of two polynomials in the
float64 voxel-unit coordinates, evaluated at an integer box corner X:

* an edge function, s·orient2d(u, w, X) = s·((w_a − u_a)(X_b − u_b) − (w_b − u_b)(X_a − u_a))
  (Eq. 2: edge u → w in the plane (a, b), s the triangle's orientation there), and
* the plane function n·(X − v0), n = (v1 − v0) × (v2 − v1) (Eq. 1).

Each is decided in three tiers, the first that is sure wins (a floating-point filter in
the manner of Shewchuk's adaptive predicates):

1. the fast formula (``triangles.py``) against a per-triangle bound on its rounding error
   (``FILTER`` times the sum of the magnitudes of its terms over the triangle's box);
2. the difference form Σ n_k·(X_k − v_k), each difference rounded once, against a
   per-voxel bound: exact for every tie of axis-aligned geometry (a term whose
   difference is 0 contributes neither value nor error), so faces lying in voxel face
   planes never reach tier 3;
3. the exact value in rationals (``fractions.Fraction``) for the few pairs left: true
   ties of general geometry and near-degenerate (sliver) triangles.

Tiers 1–2 are trusted only where provably right, so the result is the exact sign: the
CPU and CUDA paths agree because both are exact, not because they round alike.
Underflow is not modelled: coordinates are assumed far above 1e-150 voxels apart.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# Bound factor: every filtered expression has at most ~11 roundings of relative size
# 2⁻⁵³ over the sum of its terms' magnitudes; 2⁻⁴⁷ leaves a factor > 5 to spare.
FILTER = 2.0 ** -47


def _f(x):
    return Fraction(float(x))


def _sign(x):
    return (x > 0) - (x < 0)


def normal_error(e0, e1):
    """|e0_a e1_b| + |e0_b e1_a| per normal component c (a, b = c+1, c+2): FILTER times
    this bounds the rounding of n_c = e0_a e1_b − e0_b e1_a (edges rounded once each)."""
    return np.stack([np.abs(e0[:, 1] * e1[:, 2]) + np.abs(e0[:, 2] * e1[:, 1]),
                     np.abs(e0[:, 2] * e1[:, 0]) + np.abs(e0[:, 0] * e1[:, 2]),
                     np.abs(e0[:, 0] * e1[:, 1]) + np.abs(e0[:, 1] * e1[:, 0])], axis=1)


def orientation_signs(v, n, nerr):
    """(T, 3) int8 exact signs of the normal's components: n_c is orient2d of the
    triangle in the plane ⟂ c. *nerr* (T, 3) from ``normal_error``."""
    sign = np.sign(n).astype(np.int8)
    unsure = (np.abs(n) <= FILTER * nerr) & (nerr > 0)  # nerr = 0: both products 0, n exact
    for t, c in zip(*np.nonzero(unsure)):
        a, b = (c + 1) % 3, (c + 2) % 3
        sign[t, c] = _orient2d(v[t, 0], v[t, 1], v[t, 2], a, b)
    return sign


def _orient2d(u, w, x, a, b):
    """Sign of (w_a − u_a)(x_b − u_b) − (w_b − u_b)(x_a − u_a), exact."""
    ua, ub, wa, wb, xa, xb = (_f(u[a]), _f(u[b]), _f(w[a]), _f(w[b]), _f(x[a]), _f(x[b]))
    return _sign((wa - ua) * (xb - ub) - (wb - ub) * (xa - ua))


def _plane(v, x):
    """Sign of ((v1 − v0) × (v2 − v1)) · (x − v0), exact."""
    p = [[_f(c) for c in row] for row in v]
    e0 = [p[1][k] - p[0][k] for k in range(3)]
    e1 = [p[2][k] - p[1][k] for k in range(3)]
    n = (e0[1] * e1[2] - e0[2] * e1[1], e0[2] * e1[0] - e0[0] * e1[2], e0[0] * e1[1] - e0[1] * e1[0])
    return _sign(sum(n[k] * (_f(x[k]) - p[0][k]) for k in range(3)))


def edge_at_least_zero(v, edge, a, b, na, nb, s, X):
    """Tiers 2–3 of E ≥ 0 for items whose tier 1 was unsure: edge *edge* (u = v[edge],
    w = v[edge+1]) of each item's triangle v (N, 3, 3), rounded edge normal (na, nb) =
    s·(−(w_b − u_b), w_a − u_a) (N,), orientation s = ±1 (N,), box corner X (N, 3)
    (integer coordinates: the corner where the edge function is largest). a, b: the
    plane's axes.

    E = N·(X − u) = N·(X − w) exactly, so tier 2 tries both ends: a corner on either
    end point (a lattice vertex) is then decided without rationals."""
    ok = np.zeros(len(na), dtype=bool)
    unsure = np.ones(len(na), dtype=bool)
    for end in (edge, (edge + 1) % 3):
        m = np.flatnonzero(unsure)
        da = X[m, a] - v[m, end, a]  # one rounding each, relative: exactly 0 at ties
        db = X[m, b] - v[m, end, b]
        E = na[m] * da + nb[m] * db
        bound = FILTER * (np.abs(na[m]) * np.abs(da) + np.abs(nb[m]) * np.abs(db))
        ok[m] = E >= bound
        unsure[m] = ~ok[m] & (E >= -bound)
    for m in np.flatnonzero(unsure):
        ok[m] = s[m] * _orient2d(v[m, edge], v[m, (edge + 1) % 3], X[m], a, b) >= 0
    return ok


def plane_signs(v, n, nerr, X):
    """Tiers 2–3: exact sign of n·(X − v0) per item (v (N, 3, 3), rounded n and its
    error scale *nerr* (N, 3), corner X (N, 3)). n·(X − v_i) is the same for the three
    corners, so tier 2 tries each: a box corner on a vertex is decided without rationals."""
    sign = np.zeros(len(n), dtype=np.int8)
    unsure = np.ones(len(n), dtype=bool)
    for corner in range(3):
        m = np.flatnonzero(unsure)
        d = X[m] - v[m, corner]
        value = (n[m, 0] * d[:, 0] + n[m, 1] * d[:, 1]) + n[m, 2] * d[:, 2]
        bound = FILTER * ((np.abs(n[m]) + nerr[m]) * np.abs(d)).sum(axis=1)
        sign[m] = np.where(value > bound, 1, np.where(value < -bound, -1, 0))
        unsure[m] = (np.abs(value) <= bound) & (bound > 0)
    for m in np.flatnonzero(unsure):
        sign[m] = _plane(v[m], X[m])
    return sign
