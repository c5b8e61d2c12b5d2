"""Checks and unit conversion of triangle meshes, shared by every effect (the voxelizer,
the snow ground, FLIP's bodies and seeding): one place for what a valid mesh is."""

from __future__ import annotations

import numpy as np

from .errors import InputError


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
    from .backend import array_module, to_numpy

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
    from .backend import array_module

    xp = array_module(vertices)
    v = vertices.astype(xp.float64)
    return (v - xp.asarray(np.asarray(origin, dtype=np.float64))) / np.float64(voxel_size)
