"""Triangle setup of the triangle/box overlap test (seed 004 §3.1, Eq. 1–3), in voxel units.

Everything is float64 in voxel units: voxel (i, j, k) is the box [i, i+1]×[j, j+1]×
[k, k+1] (Δp = 1). The formulas are written term by term in the same order as in
``cuda/voxelize.cu``; the CUDA side is compiled without FMA contraction, so both
backends round every operation identically and produce the same voxels.

Projection planes are cyclic axis pairs (a, b) with normal axis c: xy (c = z),
yz (c = x), zx (c = y). A plane's edge normals are flipped by the sign of n_c so they
point into the projected triangle whatever its winding (Eq. 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

PLANES = ((0, 1, 2), (1, 2, 0), (2, 0, 1))  # (a, b, c): xy, yz, zx
PLANE_NORMAL_TO = {2: 0, 0: 1, 1: 2}  # dominant axis c -> index of the plane (a, b) ⟂ c


def check_shapes(vertices, triangles) -> None:
    """(V, 3) vertices and (T, 3) triangles; reads no data (cheap for device arrays)."""
    v_shape, t_shape = tuple(np.shape(vertices)), tuple(np.shape(triangles))
    if len(v_shape) != 2 or v_shape[1] != 3:
        raise InputError(f"vertices must have shape (V, 3), not {v_shape}")
    if len(t_shape) != 2 or t_shape[1] != 3:
        raise InputError(f"triangles must have shape (T, 3), not {t_shape}")


def check_inputs(vertices, triangles) -> None:
    """Shape, index and finiteness checks with messages a user can act on (CPU path;
    the GPU path makes the same checks inside its kernels, see gpu.DeviceMesh)."""
    from ..backend import array_module, to_numpy

    check_shapes(vertices, triangles)
    if not triangles.size:
        return
    xp = array_module(vertices)
    bad = (~xp.isfinite(vertices)).any(axis=1).sum() if vertices.size else xp.zeros((), dtype=xp.int64)
    lo, hi, bad = (int(x) for x in to_numpy(xp.stack([triangles.min().astype(xp.int64),
                                                       triangles.max().astype(xp.int64), bad.astype(xp.int64)])))
    if lo < 0 or hi >= vertices.shape[0]:
        raise InputError("triangle indices point outside the vertex array")
    if bad:
        raise InputError(f"{bad} vertices have non-finite coordinates (NaN/inf)")


def to_voxel_units(vertices, origin, voxel_size):
    """float64 positions in voxel units: (v − origin) / voxel_size, on the array's own
    backend (CuPy's elementwise subtract and divide round exactly as NumPy's)."""
    from ..backend import array_module

    xp = array_module(vertices)
    v = vertices.astype(xp.float64)
    return (v - xp.asarray(np.asarray(origin, dtype=np.float64))) / np.float64(voxel_size)


@dataclass
class TriangleSetup:
    """Per-triangle quantities of the overlap test, arrays over T triangles."""

    v: np.ndarray  # (T, 3, 3) corners v0, v1, v2 in voxel units
    n: np.ndarray  # (T, 3) normal e0 × e1 (unnormalised: only signs and ratios matter)
    d1: np.ndarray  # (T,) plane offsets of Eq. 1 (or §3.4 for thin)
    d2: np.ndarray
    ne: np.ndarray  # (T, 3 planes, 3 edges, 2) edge normals in (a, b) of each plane
    de: np.ndarray  # (T, 3 planes, 3 edges) edge-function offsets (Eq. 2 or §3.4)
    lo: np.ndarray  # (T, 3) int64 touched voxel range, clipped to the grid
    hi: np.ndarray
    dominant: np.ndarray  # (T,) int64 axis of largest |n| (first on ties)


def setup(pv, triangles, shape, thin: bool = False) -> TriangleSetup:
    """Triangle setup for conservative (26-separating) or thin (6-separating) tests."""
    v = np.stack([pv[triangles[:, 0]], pv[triangles[:, 1]], pv[triangles[:, 2]]], axis=1)
    v0, v1, v2 = v[:, 0], v[:, 1], v[:, 2]
    e = np.stack([v1 - v0, v2 - v1, v0 - v2], axis=1)  # e_i = v_{i+1} − v_i
    e0, e1 = e[:, 0], e[:, 1]
    n = np.stack([e0[:, 1] * e1[:, 2] - e0[:, 2] * e1[:, 1],
                  e0[:, 2] * e1[:, 0] - e0[:, 0] * e1[:, 2],
                  e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]], axis=1)

    if thin:  # §3.4: slab of half-width ½|n_◇| around the plane through the voxel centre
        m = (n[:, 0] * (0.5 - v0[:, 0]) + n[:, 1] * (0.5 - v0[:, 1])) + n[:, 2] * (0.5 - v0[:, 2])
        h = 0.5 * np.maximum(np.maximum(np.abs(n[:, 0]), np.abs(n[:, 1])), np.abs(n[:, 2]))
        d1, d2 = m + h, m - h
    else:  # Eq. 1: critical point c and its opposite corner
        c = (n > 0).astype(np.float64)
        d1 = (n[:, 0] * (c[:, 0] - v0[:, 0]) + n[:, 1] * (c[:, 1] - v0[:, 1])) + n[:, 2] * (c[:, 2] - v0[:, 2])
        d2 = (n[:, 0] * ((1.0 - c[:, 0]) - v0[:, 0]) + n[:, 1] * ((1.0 - c[:, 1]) - v0[:, 1])) \
            + n[:, 2] * ((1.0 - c[:, 2]) - v0[:, 2])

    T = v.shape[0]
    ne = np.empty((T, 3, 3, 2))
    de = np.empty((T, 3, 3))
    for p, (a, b, c) in enumerate(PLANES):
        s = np.where(n[:, c] >= 0, 1.0, -1.0)
        for i in range(3):
            na = (-e[:, i, b]) * s
            nb = e[:, i, a] * s
            vi = v[:, i]
            if thin:  # 4-separating edge pixelisation (§3.4)
                t = na * (0.5 - vi[:, a]) + nb * (0.5 - vi[:, b])
                de[:, p, i] = t + 0.5 * np.maximum(np.abs(na), np.abs(nb))
            else:  # Eq. 2: evaluate at the "most interior" corner of the pixel
                t = na * vi[:, a] + nb * vi[:, b]
                de[:, p, i] = ((-t) + np.maximum(0.0, na)) + np.maximum(0.0, nb)
            ne[:, p, i, 0] = na
            ne[:, p, i, 1] = nb

    bmin = np.minimum(np.minimum(v0, v1), v2)
    bmax = np.maximum(np.maximum(v0, v1), v2)
    lo = np.maximum(np.ceil(bmin).astype(np.int64) - 1, 0)  # closed boxes: touching counts (§3.2)
    hi = np.minimum(np.floor(bmax).astype(np.int64), np.asarray(shape, dtype=np.int64) - 1)
    dominant = np.argmax(np.abs(n), axis=1).astype(np.int64)
    return TriangleSetup(v, n, d1, d2, ne, de, lo, hi, dominant)


def plane_test(s: TriangleSetup, t, p):
    """Eq. 1 for voxels with min corner p (N, 3) of triangles t (N,)."""
    n = s.n[t]
    npv = (n[:, 0] * p[:, 0] + n[:, 1] * p[:, 1]) + n[:, 2] * p[:, 2]
    a = npv + s.d1[t]
    b = npv + s.d2[t]
    return ((a <= 0) & (b >= 0)) | ((a >= 0) & (b <= 0))


def projection_test(s: TriangleSetup, t, p, plane: int):
    """Eq. 3 in one coordinate plane: all three edge functions ≥ 0."""
    a, b, _ = PLANES[plane]
    ok = np.ones(len(t), dtype=bool)
    for i in range(3):
        na = s.ne[t, plane, i, 0]
        nb = s.ne[t, plane, i, 1]
        ok &= (na * p[:, a] + nb * p[:, b]) + s.de[t, plane, i] >= 0
    return ok


def overlaps(s: TriangleSetup, t, p):
    """Triangle t overlaps voxel p (given p lies in t's touched box): Eq. 1 ∧ Eq. 3 ×3."""
    ok = plane_test(s, t, p)
    for plane in range(3):
        ok &= projection_test(s, t, p, plane)
    return ok
