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
in the cells its surface crosses, only the particles that lie inside it (``voxelize.inside.points_inside``,
called by ``source.keep_inside``): its particle volume is its own, within 2% for objects 8
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

