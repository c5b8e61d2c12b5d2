"""Trilinear sampling of lattices and of the MAC faces (``mac.py``): the one sampler of the
FLIP transfers, the wind's self-advection and the snow flakes. ``cuda/include/
voxfx_lattice.cuh`` is its device twin, operation for operation.

A lattice f (sz, sy, sx) holds samples at integer lattice coordinates. Per axis of s
samples: f clamped to [0, s − 1] (NaN → 0, as fminf/fmaxf), i = max(min(⌊f⌋, s − 2), 0),
t = f − i, then ``a + t·(b − a)`` along x, then y, then z: a uniform field comes back
exactly, and points outside get the nearest boundary value. A side of one sample reads
that sample.

Faces: a point in cell units c = (x − origin)/h samples component a on its own lattice,
c less ½ along the two other axes (u at (c_x, c_y − ½, c_z − ½), v at (c_x − ½, c_y,
c_z − ½), w at (c_x − ½, c_y − ½, c_z)); ``face_lattice`` gives those coordinates.
"""

from __future__ import annotations

import numpy as np

from ..backend import array_module

_F = np.float32
_HALF = _F(0.5)


def sample_lattice(f, fx, fy, fz, gradient=False):
    """f at lattice coordinates (fx, fy, fz) (broadcastable); with *gradient* also the
    partial derivatives ∂/∂(fx, fy, fz) of the interpolant (per lattice spacing)."""
    xp = array_module(f)
    fx, fy, fz = xp.broadcast_arrays(fx, fy, fz)
    sz, sy, sx = f.shape
    lo, hi, t = [], [], []
    for c, s in ((fx, sx), (fy, sy), (fz, sz)):
        c = xp.fmin(xp.fmax(c, _F(0)), _F(s - 1))
        i0 = xp.maximum(xp.minimum(c.astype(xp.int64), s - 2), 0)
        lo.append(i0)
        hi.append(xp.minimum(i0 + 1, s - 1))
        t.append(c - i0.astype(xp.float32))
    flat = f.reshape(-1)

    def at(i, j, k):
        return flat[(k * sy + j) * sx + i]

    (i0, j0, k0), (i1, j1, k1), t = lo, hi, t
    corners = (at(i0, j0, k0), at(i1, j0, k0), at(i0, j1, k0), at(i1, j1, k0),
               at(i0, j0, k1), at(i1, j0, k1), at(i0, j1, k1), at(i1, j1, k1))
    return blend(corners, t, gradient)


def blend(corners, t, gradient=False):
    """The trilinear interpolant of the 8 *corners* (p000, p100, p010, p110, p001, p101,
    p011, p111: x fastest) at fractions *t* = (tx, ty, tz), in one fixed operation order
    (every sampler, dense or on bricks, rounds alike); with *gradient* also its partial
    derivatives along x, y, z."""
    p000, p100, p010, p110, p001, p101, p011, p111 = corners
    tx, ty, tz = t
    dx00, dx10, dx01, dx11 = p100 - p000, p110 - p010, p101 - p001, p111 - p011
    c00, c10, c01, c11 = p000 + tx * dx00, p010 + tx * dx10, p001 + tx * dx01, p011 + tx * dx11
    c0 = c00 + ty * (c10 - c00)
    c1 = c01 + ty * (c11 - c01)
    value = c0 + tz * (c1 - c0)
    if not gradient:
        return value
    e0 = dx00 + ty * (dx10 - dx00)
    e1 = dx01 + ty * (dx11 - dx01)
    d0 = c10 - c00
    return value, (e0 + tz * (e1 - e0), d0 + tz * ((c11 - c01) - d0), c1 - c0)


def face_lattice(comp: int, x, y, z) -> tuple:
    """Lattice coordinates of component *comp*'s faces for a point (x, y, z) in cell units."""
    return (x if comp == 0 else x - _HALF, y if comp == 1 else y - _HALF, z if comp == 2 else z - _HALF)


def sample_face(comp: int, f, x, y, z, gradient=False):
    """Component *comp* (its face array *f*) at points (x, y, z) in cell units."""
    return sample_lattice(f, *face_lattice(comp, x, y, z), gradient=gradient)


def sample_faces(faces, x, y, z, gradient=False):
    """The velocity [u, v, w] at points in cell units; with *gradient* also the rows
    ∂u_a/∂(x, y, z) (per cell)."""
    out = [sample_face(comp, f, x, y, z, gradient=gradient) for comp, f in enumerate(faces)]
    if not gradient:
        return out
    return [o[0] for o in out], [o[1] for o in out]
