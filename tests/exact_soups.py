"""Triangle soups where float arithmetic meets exact ties (issue 22): slivers collinear in
floating point, exactly degenerate triangles, triangles in voxel face planes, vertices on
voxel corners and edges, and one-decimal triangles whose edges pass within rounding of
voxel edges. Shared by the CPU oracle tests and the GPU comparisons."""

from __future__ import annotations

import numpy as np

from voxfx.kernels.grid import GridSpec

SHAPE = (8, 8, 8)
UNIT = GridSpec((0.0, 0.0, 0.0), 1.0, SHAPE)
# A grid whose voxel units are not the world's: origin and size with rounding of their own.
SCALED = GridSpec((-0.3, 0.1, 0.25), 0.1, SHAPE)


def _decimal(rng, n, lo=0.0, hi=8.0):
    """n points with one-decimal coordinates (not dyadic: every tie is a near-tie in float)."""
    return np.round(rng.uniform(lo, hi, size=(n, 3)), 1)


def _near(rng, a, reach=2.5):
    return np.round(np.clip(a + rng.uniform(-reach, reach, size=3), -0.4, 8.4), 1)


def sliver(rng):
    a = _decimal(rng, 1)[0]
    b = _near(rng, a)
    t = rng.choice([0.1, 0.25, 0.3, 0.5, 0.7, 0.9, rng.uniform(0, 1)])
    return [a, b, a + t * (b - a)]  # c rounded off the line a–b (or, rarely, on it)


def exact_degenerate(rng):
    a = np.round(rng.uniform(0, 8, 3) * 4) / 4  # dyadic: the midpoint below is exact
    b = np.round(np.clip(a + rng.uniform(-2.5, 2.5, 3), 0, 8) * 4) / 4
    return [[a, b, b], [a, a, a], [a, b, (a + b) / 2], [a, b, a]][rng.integers(4)]


def face_plane(rng):
    a = _decimal(rng, 1)[0]
    tri = np.array([a, _near(rng, a), _near(rng, a)])
    tri[:, rng.integers(3)] = rng.integers(1, 8)  # all three in one voxel face plane
    return list(tri)


def lattice(rng):
    """Vertices on voxel corners, edges and face centres (0.5 lattice)."""
    a = np.round(rng.uniform(0, 8, 3) * 2) / 2
    return [a, np.round(np.clip(a + rng.uniform(-2.5, 2.5, 3), 0, 8) * 2) / 2,
            np.round(np.clip(a + rng.uniform(-2.5, 2.5, 3), 0, 8) * 2) / 2]


def decimal(rng):
    a = _decimal(rng, 1)[0]
    return [a, _near(rng, a), _near(rng, a)]


def axis_parallel(rng):
    tri = np.array(decimal(rng))
    tri[:, rng.integers(3)] = tri[0, rng.integers(3)]  # in a plane x, y or z = const, off-lattice
    return list(tri)


KINDS = (sliver, exact_degenerate, face_plane, lattice, decimal, axis_parallel)


def soup(seed, per_kind=2):
    """(vertices, triangles) in voxel units of UNIT: per_kind triangles of every kind."""
    rng = np.random.default_rng(seed)
    tris = [make(rng) for make in KINDS for _ in range(per_kind)]
    v = np.asarray(tris, dtype=np.float64).reshape(-1, 3)
    return v, np.arange(len(v)).reshape(-1, 3)


def scaled(v):
    """The same soup in world metres of SCALED (approximately the same voxels)."""
    return np.asarray(SCALED.origin) + v * SCALED.voxel_size
