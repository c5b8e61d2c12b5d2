"""FLIP particles (seed 003 §4, Alg. 1): seeding source cells with jittered-stratified
particles. The layout is ``grid.py``'s: ``pos``/``vel`` (N, 3) float32, structure of arrays.

Sources come from the voxelizer: the (i, j, k) voxel indices of a solid voxelization
(``VoxelGrid.coordinates()``) on the FLIP grid's ``GridSpec``. Each source cell gets
``per_cell`` particles; particle s of a cell sits in sub-cell ``SUBCELL_ORDER[s mod 8] ^ m``
of the cell's 2×2×2 sub-cells (bit 0: +x half, bit 1: +y, bit 2: +z), m a random 3-bit
mask per cell, at a uniform random offset inside that sub-cell (kept ``MARGIN`` of a
sub-cell away from its walls, so a particle never lies on a face in float32). With
per_cell = 8 every sub-cell holds exactly one particle; 16 gives two each; 4 gives a
tetrahedron (the even-parity sub-cells, or the odd ones after the mask); 1 gives one
particle uniform over the whole cell.

A liquid *object* seeds the cells its voxelization touches (solid + surface) and keeps,
in the cells its surface crosses, only the particles that lie inside it (``inside_mesh``,
called by ``sim.keep_inside``): its particle volume is its own, within 2% for objects 8
cells across, not the whole cells its surface touches. Inflow (``sim.emit``) fills whole
cells.

Random numbers are the counter-based hash of ``kernels/rng.py`` keyed by (seed, cell
linear index (k·ny + j)·nx + i, particle slot s), so the CPU and the GPU draw identical
bits and a cell's particles do not depend on which other cells are sources. All float
operations are float32 in the same order on both backends (the GPU compiles with
--fmad=false): positions are bit-identical.
"""

from __future__ import annotations

import numpy as np

from ..backend import array_module
from ..errors import InputError
from ..grid import GridSpec, mac
from .. import rng
from ..grid.launch import Kernels

_CU = "flip_transfer.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: CPU and GPU agree to the bit where the ops agree
THREADS = 256  # a multiple of 32 (max_speed_squared reduces per warp)
_F = np.float32

# Sub-cell visiting order (bit 0 = x, 1 = y, 2 = z): the first four form a tetrahedron so
# that per_cell < 8 still spreads over the cell.
SUBCELL_ORDER = (0b000, 0b011, 0b101, 0b110, 0b111, 0b100, 0b010, 0b001)
# RNG streams of seeding.
STREAM_X, STREAM_Y, STREAM_Z = 0, 1, 2
STREAM_MASK = 3  # the per-cell sub-cell mask, drawn with slot 0's key
MARGIN = 1.0 / 256.0  # of a sub-cell: offsets lie in [MARGIN, 1 − MARGIN)
PUSH_EPSILON = 1e-3  # cells: a particle pushed out of a solid lands this far inside a free cell (transfer.py)


def seed_particles(cells_ijk, spec: GridSpec, per_cell: int = 8, seed: int = 0, xp=None, velocity=None):
    """Particles filling the source cells *cells_ijk* ((M, 3) integer (i, j, k) of *spec*).

    Returns ``(pos, vel)``, each (M·per_cell, 3) float32 on *xp* (default: where
    *cells_ijk* lives), particle ``m·per_cell + s`` being slot s of cell m. *velocity*: an
    initial velocity (3,) for every particle (default zero)."""
    per_cell = int(per_cell)
    if per_cell < 1:
        raise InputError(f"Particles per cell must be at least 1, not {per_cell}")
    xp = array_module(cells_ijk) if xp is None else xp
    cells = xp.asarray(cells_ijk)
    if cells.ndim != 2 or cells.shape[1] != 3 or cells.dtype.kind not in "iu":
        raise InputError(f"Source cells must be an (M, 3) integer array of (i, j, k), not {cells.dtype} "
                         f"of shape {tuple(cells.shape)}")
    nx, ny, nz = spec.shape
    if nx * ny * nz >= 2**32:
        raise InputError(f"The FLIP grid {nx}×{ny}×{nz} has too many cells (at most 2³² − 1)")
    m = int(cells.shape[0])
    if m and (bool((cells.min(axis=0) < 0).any())
              or bool((cells.max(axis=0) >= xp.asarray([nx, ny, nz])).any())):
        raise InputError(f"Source cells must lie inside the FLIP grid {nx}×{ny}×{nz}")
    n = m * per_cell
    if n >= 2**31:
        raise InputError(f"{n} particles are too many (at most 2³¹ − 1); lower particles per cell")
    vel0 = np.zeros(3, np.float32) if velocity is None else np.asarray(velocity, np.float32).reshape(3)
    cells = xp.ascontiguousarray(cells, dtype=xp.int32)
    ox, oy, oz = (_F(o) for o in spec.origin)
    h = _F(spec.voxel_size)
    key_of_seed = rng.seed_key(seed)
    if xp is not np:
        pos = xp.empty((n, 3), xp.float32)
        vel = xp.empty((n, 3), xp.float32)
        if n:
            KERNELS.launch("seed_particles", n, (cells, np.int64(n), np.int32(per_cell), np.int32(nx), np.int32(ny),
                                                 key_of_seed, ox, oy, oz, h, *vel0, pos, vel))
        return pos, vel

    slot = np.tile(np.arange(per_cell, dtype=np.uint32), m)
    cell = np.repeat(cells, per_cell, axis=0)
    i, j, k = cell[:, 0], cell[:, 1], cell[:, 2]
    lin = ((k.astype(np.uint32) * np.uint32(ny) + j.astype(np.uint32)) * np.uint32(nx)
           + i.astype(np.uint32))
    key = rng.key(key_of_seed, lin, slot)
    mask = (rng.uniform_from_key(rng.key(key_of_seed, lin, np.zeros_like(slot)), STREAM_MASK)
            * _F(8)).astype(np.uint32)
    sub = np.asarray(SUBCELL_ORDER, np.uint32)[slot % np.uint32(8)] ^ mask
    span = _F(1) - _F(2) * _F(MARGIN)
    pos = np.empty((n, 3), np.float32)
    for axis, (c, o, stream) in enumerate(((i, ox, STREAM_X), (j, oy, STREAM_Y), (k, oz, STREAM_Z))):
        half = ((sub >> np.uint32(axis)) & np.uint32(1)).astype(np.float32)
        t = (half + (_F(MARGIN) + rng.uniform_from_key(key, stream) * span)) * _F(0.5)  # in the cell, [0, 1)
        pos[:, axis] = o + (c.astype(np.float32) + t) * h
    vel = np.empty((n, 3), np.float32)
    vel[...] = vel0
    return pos, vel


# --------------------------------------------------------------------------- CuPy launches


# kernels/cuda/flip_transfer.cu, shared with transfer.py; it gets the constants above as -D options
_U32 = np.uint32
KERNELS = Kernels(_CU, _OPTIONS, THREADS, defines={
    **mac.CELL_TYPES, "STREAM_X": _U32(STREAM_X), "STREAM_Y": _U32(STREAM_Y), "STREAM_Z": _U32(STREAM_Z),
    "STREAM_MASK": _U32(STREAM_MASK), "SEED_MARGIN": MARGIN, "SEED_SPAN": 1.0 - 2.0 * MARGIN,
    "SUBCELL_ORDER_PACKED": _U32(sum(sub << (3 * s) for s, sub in enumerate(SUBCELL_ORDER))),  # 3 bits each
    "PUSH_EPSILON": PUSH_EPSILON})


# --------------------------------------------------------------------------- keeping particles inside the source

CHUNK_PAIRS = 1 << 21  # (triangle, point) pairs tested at once


def inside_mesh(points, vertices, triangles, spec: GridSpec):
    """(N,) bool: which *points* ((N, 3) world, inside *spec*'s grid) lie inside the mesh,
    by the voxelizer's own parity rule (seed 004 §4.1) cast from each point instead of
    from voxel centres: along each axis a ray in each direction counts the triangles whose
    projection holds the point (edge functions with the top-left fill rule, so a ray
    through a shared edge counts it once), and the axis votes "inside" when both
    directions cross an odd number. A point is inside when at least two axes vote so.

    For a closed mesh every axis and direction agree (the crossings of a line are even),
    so this is the exact solid test. For an open mesh an axis whose line passes a hole
    disagrees with itself and is outvoted as in ``voxelize(vote=True)``, and a surface
    with no volume (a lone triangle) is crossed once along any line: nothing is inside.
    NumPy, float64, deterministic: the GPU path runs it on the host copies of the
    bit-identical seeded positions, so both backends keep the same particles."""
    from ..voxelize.solid import _yz_setup, edge_function
    from ..voxelize.surface import _expand
    from ..voxelize.triangles import to_voxel_units

    p = to_voxel_units(np.asarray(points, np.float64).reshape(-1, 3), spec.origin, spec.voxel_size)
    votes = np.zeros(len(p), np.uint8)
    if len(p) == 0 or len(triangles) == 0:
        return votes.astype(bool)
    pv = to_voxel_units(np.asarray(vertices, np.float64), spec.origin, spec.voxel_size)
    tri = np.asarray(triangles, np.int64)
    for perm in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):  # the ray's axis first
        before, after = _crossings(p[:, perm], pv[:, perm], tri, tuple(spec.shape[a] for a in perm), _yz_setup,
                                   _expand, edge_function)
        votes += ((before & 1) & (after & 1)).astype(np.uint8)
    return votes >= 2


def _crossings(p, pv, tri, shape, yz_setup, expand, edge_function):
    """Per point, the number of triangles its line along axis 0 crosses at or before it
    (q ≤ x, as the voxelizer flips voxels i ≥ q) and after it (q > x). Triangles are
    paired with the points of the (j, k) columns their yz bounding box covers."""
    _, ny, nz = shape
    v = np.stack([pv[tri[:, 0]], pv[tri[:, 1]], pv[tri[:, 2]]], axis=1)
    n_x, n_y, n_z, nv0, ep, eq, sign, top_left = yz_setup(v)  # canonical edges, as the solid fill
    col = (np.clip(np.floor(p[:, 2]), 0, nz - 1).astype(np.int64) * ny
           + np.clip(np.floor(p[:, 1]), 0, ny - 1).astype(np.int64))
    order = np.argsort(col, kind="stable")
    starts = np.searchsorted(col[order], np.arange(ny * nz + 1))
    jlo = np.clip(np.floor(v[:, :, 1].min(axis=1)), 0, ny - 1).astype(np.int64)
    jhi = np.clip(np.floor(v[:, :, 1].max(axis=1)), 0, ny - 1).astype(np.int64)
    klo = np.clip(np.floor(v[:, :, 2].min(axis=1)), 0, nz - 1).astype(np.int64)
    khi = np.clip(np.floor(v[:, :, 2].max(axis=1)), 0, nz - 1).astype(np.int64)
    wj = jhi - jlo + 1
    counts = np.where(n_x != 0, wj * (khi - klo + 1), 0)  # triangles parallel to the ray never cross it
    owner, local = expand(counts)
    t = owner
    c = (klo[t] + local // wj[t]) * ny + (jlo[t] + local % wj[t])
    per = starts[c + 1] - starts[c]  # points in each (triangle, column) pair
    before = np.zeros(len(p), np.int64)
    after = np.zeros(len(p), np.int64)
    ends = np.cumsum(per)
    first = 0
    while first < len(per):
        last = max(first + 1, int(np.searchsorted(ends, ends[first] - per[first] + CHUNK_PAIRS, side="right")))
        pair, k = expand(per[first:last])
        tt = t[first + pair]
        q_idx = order[starts[c[first + pair]] + k]
        y, z, x = p[q_idx, 1], p[q_idx, 2], p[q_idx, 0]
        hit = np.ones(len(tt), bool)
        for e in range(3):
            E = edge_function(ep[tt, e], eq[tt, e], sign[tt, e], y, z)
            hit &= (E > 0) | ((E == 0) & top_left[tt, e])
        tt, q_idx, y, z, x = tt[hit], q_idx[hit], y[hit], z[hit], x[hit]
        q = ((nv0[tt] - n_y[tt] * y) - n_z[tt] * z) / n_x[tt]  # where the line meets the plane
        at_or_before = q <= x
        before += np.bincount(q_idx[at_or_before], minlength=len(p))
        after += np.bincount(q_idx[~at_or_before], minlength=len(p))
        first = last
    return before, after
