"""Brute-force triangle/box overlap by the separating axis theorem (Akenine-Möller's
13 axes), per voxel, in float64. Written independently of the fast path on purpose:
it shares no code or formulas with kernels/voxelize."""

import numpy as np


def sat_overlap(tri, box_min, box_max):
    """tri (3, 3); boxes (N, 3) min and max corners. True where they overlap (touching counts)."""
    centre = (box_min + box_max) * 0.5
    half = (box_max - box_min) * 0.5
    v = tri[None, :, :] - centre[:, None, :]  # (N, 3, 3) triangle relative to each box centre
    edges = [tri[1] - tri[0], tri[2] - tri[1], tri[0] - tri[2]]
    axes = [np.eye(3)[k] for k in range(3)]
    candidates = list(axes)
    candidates.append(np.cross(edges[0], edges[1]))
    for e in edges:
        for a in axes:
            candidates.append(np.cross(a, e))
    ok = np.ones(len(box_min), dtype=bool)
    for axis in candidates:
        if not np.any(axis):
            continue  # degenerate axis separates nothing
        proj = v @ axis  # (N, 3)
        radius = half @ np.abs(axis)  # (N,)
        ok &= ~((proj.min(axis=1) > radius) | (proj.max(axis=1) < -radius))
    return ok


def brute_force_surface(pv, triangles, shape):
    """Dense bool [k, j, i]: every voxel of the grid against every triangle."""
    nx, ny, nz = shape
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    mins = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1).astype(np.float64)
    hit = np.zeros(len(mins), dtype=bool)
    for tri in triangles:
        hit |= sat_overlap(pv[tri], mins, mins + 1.0)
    return hit.reshape(nz, ny, nx)


def sat_overlap_pairs(tris, box_min):
    """Vectorised SAT over pairs: tris (N, 3, 3), unit boxes with min corners (N, 3)."""
    centre = box_min + 0.5
    v = tris - centre[:, None, :]
    e = np.stack([tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 1], tris[:, 0] - tris[:, 2]], axis=1)
    axes = [np.broadcast_to(np.eye(3)[k], (len(tris), 3)) for k in range(3)]
    candidates = list(axes) + [np.cross(e[:, 0], e[:, 1])]
    for i in range(3):
        for k in range(3):
            candidates.append(np.cross(np.broadcast_to(np.eye(3)[k], (len(tris), 3)), e[:, i]))
    ok = np.ones(len(tris), dtype=bool)
    for axis in candidates:
        proj = np.einsum("nck,nk->nc", v, axis)
        radius = 0.5 * np.abs(axis).sum(axis=1)
        ok &= ~((proj.min(axis=1) > radius) | (proj.max(axis=1) < -radius))
    return ok


def candidate_surface(pv, triangles, shape):
    """Dense bool [k, j, i] by SAT over every voxel within one voxel of each triangle's box."""
    nx, ny, nz = shape
    tri = pv[triangles]
    lo = np.floor(tri.min(axis=1)).astype(np.int64) - 1
    hi = np.floor(tri.max(axis=1)).astype(np.int64) + 1
    lo = np.clip(lo, 0, np.array(shape) - 1)
    hi = np.clip(hi, 0, np.array(shape) - 1)
    out = np.zeros((nz, ny, nx), dtype=bool)
    ext = hi - lo + 1
    for di in range(int(ext[:, 0].max())):
        for dj in range(int(ext[:, 1].max())):
            for dk in range(int(ext[:, 2].max())):
                d = np.array([di, dj, dk])
                m = np.all(d < ext, axis=1)
                p = (lo[m] + d).astype(np.float64)
                hit = sat_overlap_pairs(tri[m], p)
                q = p[hit].astype(np.int64)
                out[q[:, 2], q[:, 1], q[:, 0]] = True
    return out
