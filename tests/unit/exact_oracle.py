"""Exact rational oracles for the voxelizer: closed-box SAT for triangle/box overlap and
the inside/outside state of voxel centres of a closed mesh.

Written from the definitions, sharing no code or formulas with kernels/voxelize. Every
float is an exact rational (``Fraction(x)``), so ties and slivers are decided as real
geometry decides them. Float arithmetic is used only as a *filter*: a float result is
trusted when it is farther from zero than a generous bound on its error, and the
decision is recomputed in rationals otherwise.

Input positions are world metres converted once to float64 voxel units,
``(v − origin) / voxel_size`` rounded as IEEE does (the voxelizer's documented input),
then taken exactly from there on.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# Float results within this relative distance of zero are recomputed exactly.
FILTER = 2.0 ** -30


def voxel_units(vertices, origin, voxel_size):
    """float64 (v − origin) / voxel size, one IEEE rounding per operation."""
    v = np.asarray(vertices).astype(np.float64)
    return (v - np.asarray(origin, dtype=np.float64)) / np.float64(voxel_size)


def _exact_points(points):
    return [tuple(Fraction(float(c)) for c in p) for p in points]


def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


# ------------------------------------------------------------------ triangle / closed box


class ExactTriangle:
    """Separating axes of one triangle (Akenine-Möller's 13, zero axes dropped) with the
    triangle's exact projection interval on each. A triangle whose normal is exactly zero
    is a segment or a point; the same axes then are those of the segment (box normals and
    direction × box edges), so one test covers all three cases."""

    def __init__(self, corners):
        self.v = _exact_points(corners)
        v0, v1, v2 = self.v
        edges = [_sub(v1, v0), _sub(v2, v1), _sub(v0, v2)]
        unit = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
        axes = list(unit) + [_cross(edges[0], edges[1])]
        axes += [_cross(u, e) for e in edges for u in unit]
        self.axes = []
        for a in axes:
            if any(a):
                proj = [_dot(a, p) for p in self.v]
                self.axes.append((a, min(proj), max(proj)))
        self.lo = [min(p[k] for p in self.v) for k in range(3)]
        self.hi = [max(p[k] for p in self.v) for k in range(3)]
        self.degenerate = not any(_cross(edges[0], edges[1]))

    def touches_box(self, p):
        """The closed unit box [p, p + 1] (integer min corner p) meets the closed triangle."""
        for a, t_lo, t_hi in self.axes:
            base = a[0] * p[0] + a[1] * p[1] + a[2] * p[2]
            b_lo = base + sum(min(0, c) for c in a)
            b_hi = base + sum(max(0, c) for c in a)
            if b_hi < t_lo or b_lo > t_hi:
                return False
        return True

    def segment_touches_box(self, p):
        """For a degenerate triangle only: its hull (segment or point) clipped against the
        box by parameter (Liang–Barsky), an independent check of the SAT above."""
        assert self.degenerate
        # The hull of collinear points: the two farthest apart.
        pairs = [(a, b) for a in self.v for b in self.v]
        a, b = max(pairs, key=lambda ab: _dot(_sub(ab[1], ab[0]), _sub(ab[1], ab[0])))
        d = _sub(b, a)
        t0, t1 = Fraction(0), Fraction(1)
        for k in range(3):
            lo, hi = Fraction(p[k]), Fraction(p[k] + 1)
            if d[k] == 0:
                if a[k] < lo or a[k] > hi:
                    return False
                continue
            ta, tb = (lo - a[k]) / d[k], (hi - a[k]) / d[k]
            t0, t1 = max(t0, min(ta, tb)), min(t1, max(ta, tb))
            if t0 > t1:
                return False
        return True


def surface_voxels(pv, triangles, shape):
    """Dense bool [k, j, i]: voxels whose closed box meets a closed triangle (exact)."""
    nx, ny, nz = shape
    out = np.zeros((nz, ny, nx), dtype=bool)
    dims = np.array(shape)
    for tri in np.asarray(triangles):
        v = np.asarray(pv, dtype=np.float64)[tri]
        # Closed boxes: voxel i touches [lo, hi] iff i ≤ hi and i + 1 ≥ lo (with a margin).
        lo = np.maximum(np.ceil(v.min(axis=0)).astype(np.int64) - 2, 0)
        hi = np.minimum(np.floor(v.max(axis=0)).astype(np.int64) + 1, dims - 1)
        if (hi < lo).any():
            continue
        K, J, I = np.meshgrid(*(np.arange(lo[a], hi[a] + 1) for a in (2, 1, 0)), indexing="ij")  # noqa: E741
        boxes = np.stack([I, J, K], axis=-1).reshape(-1, 3)
        boxes = boxes[~_clearly_separated(v, boxes)]
        t = ExactTriangle(v)
        for i, j, k in boxes:
            if not out[k, j, i] and t.touches_box((int(i), int(j), int(k))):
                out[k, j, i] = True
    return out


def _clearly_separated(v, boxes):
    """Float pre-filter: separated by more than a wide margin on a box normal or an
    edge × box-edge axis (axes whose float components are the edges themselves, so
    slivers are no harder than other triangles). Everything else is decided exactly."""
    scale = (np.abs(v).max() + np.abs(boxes).max() + 2.0) ** 2
    margin = scale * FILTER
    edges = [v[1] - v[0], v[2] - v[1], v[0] - v[2]]
    axes = [np.eye(3)[k] for k in range(3)] + [np.cross(np.eye(3)[k], e) for e in edges for k in range(3)]
    out = np.zeros(len(boxes), dtype=bool)
    for a in axes:
        proj = v @ a
        base = boxes @ a
        b_lo = base + np.minimum(a, 0).sum()
        b_hi = base + np.maximum(a, 0).sum()
        out |= (b_hi < proj.min() - margin) | (b_lo > proj.max() + margin)
    return out


# ------------------------------------------------------------------ voxel centres of a closed mesh
#
# Inside = odd number of crossings of a ray from the centre towards +x. The ray is moved
# by an infinitesimal (−ε², ε) in (y, z) (simulation of simplicity), which keeps it off
# every projected vertex and edge, so each crossing is a proper one and the parity is the
# winding number's. A centre that lies exactly on the surface has no inside/outside; it
# is reported in ``on_surface`` and excluded from comparisons.


def _orient_yz(u, w, c):
    """(w − u) × (c − u) in the (y, z) plane, exact."""
    return (w[1] - u[1]) * (c[2] - u[2]) - (w[2] - u[2]) * (c[1] - u[1])


def _sign(x):
    return (x > 0) - (x < 0)


def _side_perturbed(u, w, c):
    """Sign of orient(u, w, c + (−ε², ε)): the exact value, else the ε and ε² terms."""
    s = _sign(_orient_yz(u, w, c))
    if s:
        return s
    # d/dε of (w_y − u_y)(c_z + ε − u_z) − (w_z − u_z)(c_y − ε² − u_y): (w_y − u_y), then (w_z − u_z)
    return _sign(w[1] - u[1]) or _sign(w[2] - u[2])


def _float_orient_yz(V, c_y, c_z, i, k):
    u, w = V[:, i], V[:, k]
    value = (w[:, 1] - u[:, 1]) * (c_z - u[:, 2]) - (w[:, 2] - u[:, 2]) * (c_y - u[:, 1])
    scale = (np.abs(w[:, 1]) + np.abs(u[:, 1])) * (np.abs(c_z) + np.abs(u[:, 2])) \
        + (np.abs(w[:, 2]) + np.abs(u[:, 2])) * (np.abs(c_y) + np.abs(u[:, 1]))
    return value, scale * FILTER


def solid_voxels(pv, triangles, shape):
    """(inside, on_surface), dense bool [k, j, i] each, for the voxel centres (i+½, j+½, k+½)."""
    nx, ny, nz = shape
    V = np.asarray(pv, dtype=np.float64)[np.asarray(triangles)]  # (T, 3, 3)
    flips = np.zeros((nz, ny, nx + 1), dtype=bool)
    on_surface = np.zeros((nz, ny, nx), dtype=bool)
    exact_cache = {}

    def exact(t):
        if t not in exact_cache:
            exact_cache[t] = _exact_points(V[t])
        return exact_cache[t]

    # Candidate (triangle, column) pairs: column centres inside the triangle's closed yz box.
    jlo = np.maximum(np.ceil(V[:, :, 1].min(axis=1) - 0.5).astype(np.int64), 0)
    jhi = np.minimum(np.floor(V[:, :, 1].max(axis=1) - 0.5).astype(np.int64), ny - 1)
    klo = np.maximum(np.ceil(V[:, :, 2].min(axis=1) - 0.5).astype(np.int64), 0)
    khi = np.minimum(np.floor(V[:, :, 2].max(axis=1) - 0.5).astype(np.int64), nz - 1)
    wj, wk = np.maximum(jhi - jlo + 1, 0), np.maximum(khi - klo + 1, 0)
    count = wj * wk
    tri = np.repeat(np.arange(len(V)), count)
    local = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    j = jlo[tri] + local % wj[tri]
    k = klo[tri] + local // wj[tri]
    cy, cz = j + 0.5, k + 0.5
    Vt = V[tri]

    # Orientation of each triangle in yz (its normal's x) and of the centre against each edge.
    area, area_bound = _float_orient_yz(Vt, Vt[:, 2, 1], Vt[:, 2, 2], 0, 1)
    sides, bounds = zip(*(_float_orient_yz(Vt, cy, cz, i, (i + 1) % 3) for i in range(3)))
    sides, bounds = np.stack(sides, axis=1), np.stack(bounds, axis=1)
    sure_area = np.abs(area) > area_bound
    sure_sides = (np.abs(sides) > bounds).all(axis=1)
    sure = sure_area & sure_sides
    hit = sure & ((np.sign(sides) == np.sign(area)[:, None]).all(axis=1))
    crossings = [(int(a), int(b), int(c)) for a, b, c in zip(tri[hit], j[hit], k[hit])]
    for n in np.flatnonzero(~sure):  # decided exactly, with the perturbation
        t, jj, kk = int(tri[n]), int(j[n]), int(k[n])
        v = exact(t)
        c = (None, Fraction(2 * jj + 1, 2), Fraction(2 * kk + 1, 2))
        orientation = _sign(_orient_yz(v[0], v[1], v[2]))
        if orientation == 0:
            continue  # projects to a segment: the moved ray misses it
        if all(_side_perturbed(v[i], v[(i + 1) % 3], c) == orientation for i in range(3)):
            crossings.append((t, jj, kk))

    t, jj, kk = (np.array(c, dtype=np.int64) for c in zip(*crossings)) if crossings else (np.zeros(0, np.int64),) * 3
    first, decided = _first_centres_beyond_float(V[t], jj + 0.5, kk + 0.5, nx)
    for n in np.flatnonzero(~decided):  # within the filter's error bound of a centre: in rationals
        first[n], exact_hit = _first_centre_beyond(V[t[n]], exact, int(t[n]), int(jj[n]) + 0.5, int(kk[n]) + 0.5, nx)
        if exact_hit is not None:
            on_surface[kk[n], jj[n], exact_hit] = True
    parity = np.zeros(flips.shape, np.int64)
    np.add.at(parity, (kk, jj, first), 1)  # two crossings at one centre cancel, as flipping twice does
    flips ^= parity % 2 == 1
    inside = (np.cumsum(flips, axis=2) % 2 == 1)[:, :, :nx]
    _mark_centres_on_surface(V, exact, shape, on_surface)
    return inside & ~on_surface, on_surface


def _first_centres_beyond_float(v, cy, cz, nx):
    """``_first_centre_beyond``'s float filter for many crossings at once: (first, decided);
    *first* is trusted only where *decided* (the plane's x at the column is farther from
    a centre than the bound on its float error)."""
    n = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        x = v[:, 0, 0] - (n[:, 1] * (cy - v[:, 0, 1]) + n[:, 2] * (cz - v[:, 0, 2])) / n[:, 0]
        edges = np.abs(v[:, 1] - v[:, 0]).sum(axis=1) * np.abs(v[:, 2] - v[:, 0]).sum(axis=1)
        size = np.abs(v).max(axis=(1, 2)) + np.abs(cy) + np.abs(cz) + 1
        tol = FILTER + 2.0 ** -40 * (edges / np.abs(n[:, 0])) * size
        r = x - 0.5 - np.floor(x - 0.5)
        decided = (n[:, 0] != 0) & (tol < r) & (r < 1 - tol)
    first = np.where(decided, np.clip(np.floor(np.where(decided, x, 0.0) - 0.5) + 1, 0, nx), 0).astype(np.int64)
    return first, decided


def _first_centre_beyond(v, exact, t, cy, cz, nx):
    """Smallest i in 0..nx with i + ½ > x of the triangle's plane at (cy, cz) (nx: none),
    and the i whose centre lies exactly on the plane, if any."""
    n = np.cross(v[1] - v[0], v[2] - v[0])
    if n[0] != 0:
        x = v[0, 0] - (n[1] * (cy - v[0, 1]) + n[2] * (cz - v[0, 2])) / n[0]
        # float error ≲ 2⁻⁵⁰ × size × conditioning of the plane along x
        edges = np.abs(v[1] - v[0]).sum() * np.abs(v[2] - v[0]).sum()
        tol = FILTER + 2.0 ** -40 * (edges / abs(n[0])) * (np.abs(v).max() + abs(cy) + abs(cz) + 1)
        r = x - 0.5 - np.floor(x - 0.5)
        if tol < r < 1 - tol:
            return int(np.clip(np.floor(x - 0.5) + 1, 0, nx)), None
    e = exact(t)
    N = _cross(_sub(e[1], e[0]), _sub(e[2], e[0]))
    X = e[0][0] - (N[1] * (Fraction(cy) - e[0][1]) + N[2] * (Fraction(cz) - e[0][2])) / N[0]
    # i + ½ > X  ⇔  i > X − ½
    first = (X - Fraction(1, 2)).__floor__() + 1
    on = None
    if first - 1 + Fraction(1, 2) == X and 0 <= first - 1 < nx:
        on = first - 1
    return int(min(max(first, 0), nx)), on


def _mark_centres_on_surface(V, exact, shape, on_surface):
    """Centres lying exactly on a closed triangle (any orientation, also parallel to x)."""
    nx, ny, nz = shape
    lo = np.maximum(np.ceil(V.min(axis=1) - 0.5).astype(np.int64), 0)
    hi = np.minimum(np.floor(V.max(axis=1) - 0.5).astype(np.int64), np.array(shape) - 1)
    n = np.cross(V[:, 1] - V[:, 0], V[:, 2] - V[:, 0])
    edges = np.abs(V[:, 1] - V[:, 0]).sum(axis=1) * np.abs(V[:, 2] - V[:, 0]).sum(axis=1)
    scale = (np.abs(n).sum(axis=1) + edges) * (np.abs(V).max(axis=(1, 2)) + np.array(shape).max() + 1)
    for t in np.flatnonzero((hi >= lo).all(axis=1)):
        ii, jj, kk = (np.arange(lo[t, a], hi[t, a] + 1) for a in range(3))
        K, J, I = np.meshgrid(kk, jj, ii, indexing="ij")  # noqa: E741
        c = np.stack([I, J, K], axis=-1).reshape(-1, 3) + 0.5
        near = np.abs((c - V[t, 0]) @ n[t]) <= scale[t] * FILTER + 1e-300
        if not near.any():
            continue
        e = exact(t)
        for p in c[near]:
            P = tuple(Fraction(float(x)) for x in p)
            if _point_on_triangle(e, P):
                on_surface[int(p[2]), int(p[1]), int(p[0])] = True


def _point_on_triangle(e, p):
    v0, v1, v2 = e
    N = _cross(_sub(v1, v0), _sub(v2, v0))
    if any(N):
        if _dot(N, _sub(p, v0)) != 0:
            return False
        sides = [_dot(N, _cross(_sub(e[(i + 1) % 3], e[i]), _sub(p, e[i]))) for i in range(3)]
        return all(s >= 0 for s in sides) or all(s <= 0 for s in sides)
    # Degenerate: on the segment hull of the three points.
    for a in e:
        for b in e:
            d, w = _sub(b, a), _sub(p, a)
            if not any(_cross(d, w)) and 0 <= _dot(w, d) <= _dot(d, d) and (any(d) or not any(w)):
                return True
    return False
