"""Which triangle a voxel comes from, for per-voxel attributes (material, colour).

The owner of a set voxel is the smallest index of a triangle whose conservative test
covers it: a deterministic choice, identical on both backends (the GPU takes it with
``atomicMin``). Voxels no triangle touches (the inside of a solid) take the owner of the
nearest owned voxel before them in their x row, else after them, so the inside of an
object carries the material of the surface it enters through.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid import bitgrid
from .surface import surface_voxels_cpu
from .triangles import check_inputs, check_shapes, to_voxel_units

NONE = -1


def owner_triangles(vertices, triangles, spec, bits, xp=None):
    """(N,) int32 owner triangle of each set voxel of *bits*, in ``bitgrid.coordinates``
    order (linear k, j, i); -1 only when a row holds no owned voxel at all."""
    xp = xp or backend.xp()
    nx, ny, nz = spec.shape
    if xp is np:
        v = np.asarray(backend.to_numpy(vertices))
        t = np.asarray(backend.to_numpy(triangles)).astype(np.int64)
        check_inputs(v, t)
        ijk = bitgrid.coordinates(np.asarray(backend.to_numpy(bits)), nx).astype(np.int64)
        linear = (ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0]
        hits = []
        surface_voxels_cpu(to_voxel_units(v, spec.origin, spec.voxel_size), t, spec.shape, tri_ids=hits)
        owner = smallest_owner(linear, hits).astype(np.int32)
    else:
        from .gpu import surface_owners_gpu

        check_shapes(vertices, triangles)
        ijk = bitgrid.coordinates(xp.asarray(bits), nx).astype(xp.int64)
        linear = (ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0]
        owner = surface_owners_gpu(vertices, triangles, spec, linear).get()
        linear = linear.get()
    return fill_along_rows(owner, linear // nx)


def smallest_owner(linear, hits, index=None):
    """int64 per entry of the sorted *linear* indices: the smallest triangle of the
    (linear, triangle) *hits* (``surface_voxels_cpu(tri_ids=…)``) at it, INT32_MAX where
    none; *index* maps the hits' triangle numbers to the whole mesh's."""
    owner = np.full(len(linear), np.iinfo(np.int32).max, dtype=np.int64)
    for lin, tri in hits:
        pos = np.searchsorted(linear, lin)
        ok = pos < len(linear)
        ok[ok] = linear[pos[ok]] == lin[ok]
        np.minimum.at(owner, pos[ok], tri[ok] if index is None else index[tri[ok]])
    return owner


def fill_along_rows(owner, row):
    """Give unowned entries (INT32_MAX) the previous owned entry's owner in the same row,
    else the next one's; -1 where the row has none. Entries are in linear order."""
    owner = np.asarray(owner, dtype=np.int64)
    unowned = owner == np.iinfo(np.int32).max
    if not unowned.any():
        return owner.astype(np.int32)
    idx = np.arange(len(owner))
    prev = np.maximum.accumulate(np.where(unowned, -1, idx))
    nxt = np.minimum.accumulate(np.where(unowned, len(owner), idx)[::-1])[::-1]
    out = owner.copy()
    take_prev = unowned & (prev >= 0) & (row[np.maximum(prev, 0)] == row)
    out[take_prev] = owner[prev[take_prev]]
    rest = unowned & ~take_prev
    take_next = rest & (nxt < len(owner)) & (row[np.minimum(nxt, len(owner) - 1)] == row)
    out[take_next] = owner[nxt[take_next]]
    out[rest & ~take_next] = NONE
    return out.astype(np.int32)
