"""Triangle setup of the triangle/box overlap test (seed 004 §3.1, Eq. 1–3), in voxel units.

Everything is float64 in voxel units: voxel (i, j, k) is the box [i, i+1]×[j, j+1]×
[k, k+1] (Δp = 1). The formulas are written term by term in the same order as in
``cuda/voxelize.cu``; the CUDA side is compiled without FMA contraction, so both
backends round every operation identically and produce the same voxels.

The conservative test is the separating-axis test on *closed* boxes decided exactly
(issue 22 §1): the signs of the normal's components (which pick the critical corner of
Eq. 1 and the inward side of each edge in Eq. 2) are exact, and every edge and plane
function is compared with a bound on its rounding error; values within the bound of 0
(ties, slivers) are decided by ``exact.py``. So a triangle lying in a voxel face plane
touches the voxels on both sides, a sliver whose float normal is noise sets every voxel
the real triangle touches, and a triangle with collinear corners is its segment. The
thin test (§3.4) stays a float test and is only used together with the exact
conservative one, so thin ⊂ conservative holds voxel for voxel.

Projection planes are cyclic axis pairs (a, b) with normal axis c: xy (c = z),
yz (c = x), zx (c = y). A plane's edge normals are flipped by the sign of n_c so they
point into the projected triangle whatever its winding (Eq. 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mesh import check_inputs, check_shapes, to_voxel_units  # noqa: F401 (the voxelizer's names)
from . import exact

PLANES = ((0, 1, 2), (1, 2, 0), (2, 0, 1))  # (a, b, c): xy, yz, zx
PLANE_NORMAL_TO = {2: 0, 0: 1, 1: 2}  # dominant axis c -> index of the plane (a, b) ⟂ c


@dataclass
class TriangleSetup:
    """Per-triangle quantities of the overlap test, arrays over T triangles."""

    v: np.ndarray  # (T, 3, 3) corners v0, v1, v2 in voxel units
    n: np.ndarray  # (T, 3) normal e0 × e1 (unnormalised: only signs and ratios matter)
    nerr: np.ndarray  # (T, 3) scale of n's rounding error (exact.normal_error)
    orient: np.ndarray  # (T, 3) int8 exact signs of n (the triangle's orientation per plane)
    degenerate: np.ndarray  # (T,) n = 0 exactly: collinear corners (a segment or a point)
    d1: np.ndarray  # (T,) plane offsets of Eq. 1 at the corners where n·x is largest / smallest
    d2: np.ndarray
    plane_bound: np.ndarray  # (T,) rounding bound of Eq. 1 over the touched box (tier 1)
    ne: np.ndarray  # (T, 3 planes, 3 edges, 2) edge normals in (a, b) of each plane
    de: np.ndarray  # (T, 3 planes, 3 edges) edge-function offsets (Eq. 2)
    edge_bound: np.ndarray  # (T, 3 planes, 3 edges) rounding bound of Eq. 2 over the box
    side: np.ndarray  # (T, 3 planes) ±1: orientation of the triangle in each plane
    lo: np.ndarray  # (T, 3) int64 touched voxel range, clipped to the grid
    hi: np.ndarray
    dominant: np.ndarray  # (T,) int64 axis of largest |n| (first on ties)
    wide: np.ndarray  # (T,) n too uncertain for the depth range: test the whole box (surface.py)
    thin: tuple | None = None  # (d1, d2, de) of the 6-separating test (§3.4), thin mode only


def setup(pv, triangles, shape, thin: bool = False) -> TriangleSetup:
    """Triangle setup of the conservative (26-separating) test, decided exactly as the
    closed-box SAT does (``exact.py``), plus the thin (6-separating) one when *thin*."""
    v = np.stack([pv[triangles[:, 0]], pv[triangles[:, 1]], pv[triangles[:, 2]]], axis=1)
    v0, v1, v2 = v[:, 0], v[:, 1], v[:, 2]
    e = np.stack([v1 - v0, v2 - v1, v0 - v2], axis=1)  # e_i = v_{i+1} − v_i
    e0, e1 = e[:, 0], e[:, 1]
    n = np.stack([e0[:, 1] * e1[:, 2] - e0[:, 2] * e1[:, 1],
                  e0[:, 2] * e1[:, 0] - e0[:, 0] * e1[:, 2],
                  e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]], axis=1)
    # The signs of n decide the critical corner (Eq. 1) and which side of each edge is
    # inside (Eq. 2): taken exactly, so a sliver whose float normal is noise (≈ 1e-16)
    # still tests the right sides; 0 where the triangle projects to a segment.
    nerr = exact.normal_error(e0, e1)
    orient = exact.orientation_signs(v, n, nerr)

    lo, hi = _touched_box(v, shape)
    reach = np.maximum(np.abs(lo), np.abs(hi + 1)).astype(np.float64)  # |X| of every box corner X

    # Eq. 1: critical point c and its opposite corner
    c = (orient > 0).astype(np.float64)
    d1 = (n[:, 0] * (c[:, 0] - v0[:, 0]) + n[:, 1] * (c[:, 1] - v0[:, 1])) + n[:, 2] * (c[:, 2] - v0[:, 2])
    d2 = (n[:, 0] * ((1.0 - c[:, 0]) - v0[:, 0]) + n[:, 1] * ((1.0 - c[:, 1]) - v0[:, 1])) \
        + n[:, 2] * ((1.0 - c[:, 2]) - v0[:, 2])
    plane_bound = exact.FILTER * ((np.abs(n) + nerr) * (reach + np.abs(v0) + 1.0)).sum(axis=1)

    T = v.shape[0]
    ne = np.empty((T, 3, 3, 2))
    de = np.empty((T, 3, 3))
    edge_bound = np.empty((T, 3, 3))
    side = np.empty((T, 3))
    thin_de = np.empty((T, 3, 3)) if thin else None
    for p, (a, b, c_) in enumerate(PLANES):
        s = np.where(orient[:, c_] >= 0, 1.0, -1.0)
        side[:, p] = s
        for i in range(3):
            na = (-e[:, i, b]) * s
            nb = e[:, i, a] * s
            vi = v[:, i]
            # Eq. 2: evaluate at the "most interior" corner of the pixel
            t = na * vi[:, a] + nb * vi[:, b]
            de[:, p, i] = ((-t) + np.maximum(0.0, na)) + np.maximum(0.0, nb)
            edge_bound[:, p, i] = exact.FILTER * (np.abs(na) * ((reach[:, a] + np.abs(vi[:, a])) + 1.0)
                                                  + np.abs(nb) * ((reach[:, b] + np.abs(vi[:, b])) + 1.0))
            if thin:  # 4-separating edge pixelisation (§3.4)
                t = na * (0.5 - vi[:, a]) + nb * (0.5 - vi[:, b])
                thin_de[:, p, i] = t + 0.5 * np.maximum(np.abs(na), np.abs(nb))
            ne[:, p, i, 0] = na
            ne[:, p, i, 1] = nb

    thin_set = None
    if thin:  # §3.4: slab of half-width ½|n_◇| around the plane through the voxel centre
        m = (n[:, 0] * (0.5 - v0[:, 0]) + n[:, 1] * (0.5 - v0[:, 1])) + n[:, 2] * (0.5 - v0[:, 2])
        h = 0.5 * np.maximum(np.maximum(np.abs(n[:, 0]), np.abs(n[:, 1])), np.abs(n[:, 2]))
        thin_set = (m + h, m - h, thin_de)
    dominant = _dominant(n)
    # The depth range along D (surface.depth_candidates) divides by n_D: trusted when the
    # plane's rounding over the box is well below a voxel's worth of n_D.
    wide = ~(8.0 * plane_bound < np.abs(n[np.arange(T), dominant]))
    return TriangleSetup(v, n, nerr, orient, ~orient.any(axis=1), d1, d2, plane_bound, ne, de, edge_bound, side,
                         lo, hi, dominant, wide, thin_set)


def _touched_box(v, shape):
    bmin = np.minimum(np.minimum(v[:, 0], v[:, 1]), v[:, 2])
    bmax = np.maximum(np.maximum(v[:, 0], v[:, 1]), v[:, 2])
    lo = np.maximum(np.ceil(bmin).astype(np.int64) - 1, 0)  # closed boxes: touching counts (§3.2)
    hi = np.minimum(np.floor(bmax).astype(np.int64), np.asarray(shape, dtype=np.int64) - 1)
    return lo, hi


def _dominant(n):
    return np.argmax(np.abs(n), axis=1).astype(np.int64)


@dataclass
class TouchedBoxes:
    """What ``surface.column_counts`` reads, without the rest of the setup (work sizing)."""

    lo: np.ndarray
    hi: np.ndarray
    dominant: np.ndarray


def touched_boxes(pv, triangles, shape) -> TouchedBoxes:
    v = np.stack([pv[triangles[:, 0]], pv[triangles[:, 1]], pv[triangles[:, 2]]], axis=1)
    e0, e1 = v[:, 1] - v[:, 0], v[:, 2] - v[:, 1]
    n = np.stack([e0[:, 1] * e1[:, 2] - e0[:, 2] * e1[:, 1],
                  e0[:, 2] * e1[:, 0] - e0[:, 0] * e1[:, 2],
                  e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]], axis=1)
    return TouchedBoxes(*_touched_box(v, shape), _dominant(n))


UNSURE_CHUNK = 1 << 16  # items decided exactly at once (their filters' temporaries)


def plane_test(s: TriangleSetup, t, p):
    """Eq. 1 for voxels with min corner p (N, 3) of triangles t (N,), exact: the plane
    meets the closed box iff n·(X − v0) is ≥ 0 at the corner where it is largest and ≤ 0
    where it is smallest. Triangles without a normal (exactly collinear corners) have no
    such axis: their edges decide (SAT on a segment)."""
    n = s.n[t]
    npv = (n[:, 0] * p[:, 0] + n[:, 1] * p[:, 1]) + n[:, 2] * p[:, 2]
    a = npv + s.d1[t]
    b = npv + s.d2[t]
    bound = s.plane_bound[t]
    ok = s.degenerate[t] | ((a >= bound) & (b <= -bound))
    unsure = ~ok & (a >= -bound) & (b <= bound)
    unsure_all = np.flatnonzero(unsure)
    for c0 in range(0, len(unsure_all), UNSURE_CHUNK):  # exactly, only the unsure sides (usually one)
        u = unsure_all[c0:c0 + UNSURE_CHUNK]  # in chunks: ties (a face on voxel planes) cost a bounded peak
        tu, pu = t[u], p[u]
        c = (s.orient[tu] > 0).astype(np.float64)
        vu, nu, eu = s.v[tu], s.n[tu], s.nerr[tu]
        res = np.ones(len(u), dtype=bool)
        for which, corner, want in ((a[u] < bound[u], pu + c, 1), (b[u] > -bound[u], pu + (1.0 - c), -1)):
            m = np.flatnonzero(which & res)
            res[m] = exact.plane_signs(vu[m], nu[m], eu[m], corner[m]) != -want
        ok[u] = res
    return ok


def projection_test(s: TriangleSetup, t, p, plane: int):
    """Eq. 3 in one coordinate plane: all three edge functions ≥ 0, decided exactly
    (tier 1 here, tiers 2–3 in ``exact.edge_at_least_zero``)."""
    a, b, _ = PLANES[plane]
    ok = np.ones(len(t), dtype=bool)
    unsure = []
    for i in range(3):
        na = s.ne[t, plane, i, 0]
        nb = s.ne[t, plane, i, 1]
        E = (na * p[:, a] + nb * p[:, b]) + s.de[t, plane, i]
        bound = s.edge_bound[t, plane, i]
        sure = E >= bound
        maybe = ~sure & (E >= -bound)
        ok &= sure | maybe
        unsure.append(maybe)
    for i in range(3):
        unsure_i = np.flatnonzero(unsure[i] & ok)
        for c0 in range(0, len(unsure_i), UNSURE_CHUNK):  # bounded peak at ties, as in plane_test
            u = unsure_i[c0:c0 + UNSURE_CHUNK]
            tu = t[u]
            na, nb = s.ne[tu, plane, i, 0], s.ne[tu, plane, i, 1]
            X = p[u].copy()
            X[:, a] += na > 0  # the corner where the edge function is largest
            X[:, b] += nb > 0
            ok[u] = exact.edge_at_least_zero(s.v[tu], i, a, b, na, nb, s.side[tu, plane], X)
    return ok


def thin_test(s: TriangleSetup, t, p):
    """The 6-separating test of §3.4 (slab around the plane through the voxel centre and
    4-separating edge pixelisation), in floating point: used only together with the
    exact conservative test, so thin ⊂ conservative holds exactly."""
    d1, d2, de = s.thin
    n = s.n[t]
    npv = (n[:, 0] * p[:, 0] + n[:, 1] * p[:, 1]) + n[:, 2] * p[:, 2]
    x = npv + d1[t]
    y = npv + d2[t]
    ok = ((x <= 0) & (y >= 0)) | ((x >= 0) & (y <= 0))
    for plane, (a, b, _) in enumerate(PLANES):
        for i in range(3):
            ok &= (s.ne[t, plane, i, 0] * p[:, a] + s.ne[t, plane, i, 1] * p[:, b]) + de[t, plane, i] >= 0
    return ok


def overlaps(s: TriangleSetup, t, p):
    """Triangle t overlaps voxel p (given p lies in t's touched box): Eq. 3 ×3 ∧ Eq. 1
    (∧ the thin test in thin mode, evaluated first: it is the more selective). Each
    stage runs only on the items that passed the ones before."""
    keep = np.arange(len(t))
    if s.thin is not None:
        keep = np.flatnonzero(thin_test(s, t, p))
    for plane in range(3):
        keep = keep[projection_test(s, t[keep], p[keep], plane)]
    keep = keep[plane_test(s, t[keep], p[keep])]
    ok = np.zeros(len(t), dtype=bool)
    ok[keep] = True
    return ok
