"""Block mesh: the exterior faces of a voxel set as one welded quad mesh.

A voxel face is kept when the voxel is set and its neighbour across that face is not
(outside the grid counts as empty), so a face between two set voxels never appears and
the faces of a cavity do. Every kept face becomes one quad on the voxel lattice, wound
so its normal points from the set voxel to the empty one. Corners are welded: a lattice
point used by several faces is one vertex.

    from voxfx.kernels.voxelize.blocks import exterior_faces
    blocks = exterior_faces(result.bits, result.spec)
    write_mesh("Blocks", blocks.vertices, blocks.quads,
               material_indices=voxel_material[blocks.voxel_of_face])

``voxel_of_face`` indexes the set voxels in linear (k, j, i) order, the order of
``bitgrid.coordinates`` / ``VoxelGrid.coordinates()``, so any per-voxel array in that
order maps to faces with one gather.

Welding on the lattice is what makes the mesh closed: every edge is shared by an even
number of faces (two, or four where voxels touch only along an edge, which is therefore
non-manifold by design). The work runs on the array module of the bit grid, NumPy or
CuPy, with the same operations on both and no dense unpacking: shifts on packed words for
the neighbour test, popcount prefix sums for the voxel index, ``unique`` for welding. Its
memory follows the number of faces (``count_exterior_faces`` is exact and cheap), which is
checked against the free memory before the mesh is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backend
from ..grid import bitgrid
from ..grid.spec import GridSpec

# Direction d = 2·axis + (0 for +, 1 for −): +x, −x, +y, −y, +z, −z.
DIRECTIONS = np.array(
    [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=np.int8
)


def _corner_offsets() -> np.ndarray:
    """(6, 4, 3) lattice offsets of each face's corners from its voxel's min corner.

    With b, c the two axes after a (cyclic), the loop (0,0) (1,0) (1,1) (0,1) in (b, c)
    turns counter-clockwise about +a because e_b × e_c = e_a; the − face runs it backwards.
    """
    offsets = np.zeros((6, 4, 3), dtype=np.int64)
    forward = ((0, 0), (1, 0), (1, 1), (0, 1))
    backward = ((0, 0), (0, 1), (1, 1), (1, 0))
    for a in range(3):
        b, c = (a + 1) % 3, (a + 2) % 3
        for side, loop in ((0, forward), (1, backward)):
            d = 2 * a + side
            offsets[d, :, a] = 1 - side  # the + face lies in the plane index + 1
            for corner, (ub, uc) in enumerate(loop):
                offsets[d, corner, b] = ub
                offsets[d, corner, c] = uc
    return offsets


CORNER_OFFSETS = _corner_offsets()


@dataclass
class BlockMesh:
    vertices: object  # (V, 3) float32 world metres, on the lattice of the grid
    quads: object  # (F, 4) int32 vertex indices, counter-clockwise seen from outside
    voxel_of_face: object  # (F,) int64 index into the set voxels in linear (k, j, i) order
    direction_of_face: object  # (F,) int8 0..5: +x, −x, +y, −y, +z, −z (see DIRECTIONS)

    @property
    def axis_of_face(self):
        """(F,) int8 axis of each face's normal: 0 = x, 1 = y, 2 = z."""
        return self.direction_of_face // 2

    @property
    def sign_of_face(self):
        """(F,) int8 +1 or −1: which way along its axis each face's normal points."""
        return 1 - 2 * (self.direction_of_face % 2)

    def normals(self):
        """(F, 3) float32 unit outward normals."""
        xp = backend.array_module(self.direction_of_face)
        return xp.asarray(DIRECTIONS, dtype=xp.float32)[self.direction_of_face.astype(xp.int64)]

    @property
    def face_count(self) -> int:
        return int(self.quads.shape[0])

    def to_numpy(self) -> "BlockMesh":
        return BlockMesh(*(backend.to_numpy(a) for a in
                           (self.vertices, self.quads, self.voxel_of_face, self.direction_of_face)))


# Bytes per exposed face at the peak (welding): four int64 corner keys, what ``unique``
# needs beside them (sorted copy, sort permutation, flags, running count, inverse: about
# five key-sized arrays), int32 quads, voxel and direction per face, and the (m, 32) bit
# table of the words holding exposed bits (at most one word per face).
_BYTES_PER_FACE = 4 * 8 * 6 + 16 + 8 + 1 + 32 * 4
_BYTES_PER_VERTEX = 12 + 8 * 3  # float32 position; its key and lattice coordinates


def max_face_count(spec: GridSpec, voxel_count: int | None = None) -> int:
    """Most exterior faces possible: six per set voxel, and each lattice face once."""
    nx, ny, nz = spec.shape
    lattice_faces = 3 * spec.voxel_count + ny * nz + nz * nx + nx * ny
    return lattice_faces if voxel_count is None else min(6 * int(voxel_count), lattice_faces)


def estimate_bytes(spec: GridSpec, face_count: int | None = None) -> int:
    """Peak memory of ``exterior_faces`` on a grid of *spec* making *face_count* faces
    (default: the most possible, ``max_face_count``). ``count_exterior_faces`` gives the
    exact count cheaply, which is what ``exterior_faces`` checks before it allocates."""
    nx, ny, nz = spec.shape
    faces = max_face_count(spec) if face_count is None else int(face_count)
    vertices = min(4 * faces, (nx + 1) * (ny + 1) * (nz + 1))
    words = spec.array_shape[0] * spec.array_shape[1] * bitgrid.words_along_x(nx)
    grids = 4 * words * 8 + 8 * words  # the grid, 6 exposed grids, a shifted copy; word ranks
    return int(grids + _BYTES_PER_FACE * faces + _BYTES_PER_VERTEX * vertices)


def count_exterior_faces(bits, spec: GridSpec) -> int:
    """Number of faces ``exterior_faces`` would make, from bit operations alone."""
    _check_bits(bits, spec)
    xp = backend.array_module(bits)
    return sum(int(_popcount(_exposed(bits, d, xp)).sum(dtype=xp.int64)) for d in range(6))


def exterior_faces(bits, spec: GridSpec) -> BlockMesh:
    """The block mesh of the set voxels of a packed bit grid *bits* over *spec*.

    Runs where *bits* lives (NumPy or CuPy) and returns arrays there; ``.to_numpy()``
    brings them to the host. Refuses (``DeviceMemoryError``) before allocating the mesh
    if it would not fit.
    """
    _check_bits(bits, spec)
    xp = backend.array_module(bits)
    nx, ny, nz = spec.shape
    exposed = [_exposed(bits, d, xp) for d in range(6)]
    face_count = sum(int(_popcount(e).sum(dtype=xp.int64)) for e in exposed)
    backend.ensure_fits(estimate_bytes(spec, face_count), f"a block mesh of {face_count:,} faces", xp=xp)

    # Rank of a set voxel = set bits in the words before its word + set bits below it in
    # its word: the position of the voxel in linear (k, j, i) order, without listing voxels.
    flat_bits = bits.reshape(-1)
    per_word = _popcount(flat_bits).astype(xp.int64)
    word_rank = xp.cumsum(per_word) - per_word

    # A lattice point (ci, cj, ck), 0..n per axis, has key (ck·(ny+1) + cj)·(nx+1) + ci.
    # The key is linear, so a corner's key is its voxel's key plus the corner's offset key.
    lattice_shape = (nx + 1, ny + 1, nz + 1)
    offset_keys = xp.asarray(_linear(CORNER_OFFSETS.reshape(-1, 3), lattice_shape, np).reshape(6, 4))
    keys, voxel_of_face, direction_of_face = [], [], []
    for d in range(6):
        word, bit = _set_bit_positions(exposed[d], xp)
        exposed[d] = None  # free it: the faces take over
        below = flat_bits[word] & ((xp.uint32(1) << bit) - xp.uint32(1))
        voxel_of_face.append(word_rank[word] + _popcount(below))
        ijk = _voxel_of_bit(word, bit, spec.shape, xp)
        keys.append(_linear(ijk, lattice_shape, xp)[:, None] + offset_keys[d][None, :])
        direction_of_face.append(xp.full(len(word), d, dtype=xp.int8))
    keys = xp.concatenate(keys)
    voxel_of_face = xp.concatenate(voxel_of_face).astype(xp.int64)
    direction_of_face = xp.concatenate(direction_of_face)

    return weld(keys, spec, voxel_of_face, direction_of_face, xp)


def weld(keys, spec, voxel_of_face, direction_of_face, xp):
    """The block mesh of faces given by their 4 corner *keys* (linear indices on the
    (nx + 1, ny + 1, nz + 1) corner lattice): one vertex per distinct key; unique sorts, so
    vertices come in lattice order (dense, split and sparse meshes weld alike)."""
    nx, ny, _ = spec.shape
    unique_keys, inverse = xp.unique(keys.reshape(-1), return_inverse=True)
    quads = inverse.reshape(-1, 4).astype(xp.int32)
    ci = unique_keys % (nx + 1)
    cj = (unique_keys // (nx + 1)) % (ny + 1)
    ck = unique_keys // ((nx + 1) * (ny + 1))
    points = xp.stack([ci, cj, ck], axis=1).astype(xp.float64)
    vertices = (xp.asarray(spec.origin, dtype=xp.float64) + points * spec.voxel_size).astype(xp.float32)
    return BlockMesh(vertices, quads, voxel_of_face, direction_of_face)


def _check_bits(bits, spec: GridSpec) -> None:
    nx, ny, nz = spec.shape
    expected = (nz, ny, bitgrid.words_along_x(nx))
    if tuple(bits.shape) != expected or bits.dtype != np.uint32:
        raise ValueError(f"bit grid of shape {tuple(bits.shape)} and dtype {bits.dtype} does not match "
                         f"{nx}×{ny}×{nz} voxels (expected uint32 words of shape {expected})")


def _linear(ijk, shape, xp):
    """Linear index (k·ny + j)·nx + i of (N, 3) integer (i, j, k) over *shape* (nx, ny, nz)."""
    nx, ny, _ = (int(n) for n in shape)
    ijk = ijk.astype(xp.int64)
    return (ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0]


def _popcount(words):
    """Set bits per uint32 word (SWAR: NumPy 1.26 has no popcount, and this runs on CuPy too)."""
    xp = backend.array_module(words)
    u = xp.uint32
    x = words - ((words >> u(1)) & u(0x55555555))
    x = (x & u(0x33333333)) + ((x >> u(2)) & u(0x33333333))
    x = (x + (x >> u(4))) & u(0x0F0F0F0F)
    return ((x * u(0x01010101)) >> u(24)).astype(xp.int32)


def _set_bit_positions(words, xp):
    """(flat word index, bit) of every set bit, ascending, i.e. in linear voxel order.

    Only words that hold a set bit are expanded (32 flags each), so the cost follows the
    exposed surface, not the grid's volume.
    """
    flat = words.reshape(-1)
    word = xp.flatnonzero(flat)
    flags = (flat[word][:, None] >> xp.arange(32, dtype=xp.uint32)[None, :]) & xp.uint32(1)
    row, bit = xp.nonzero(flags)
    return word[row], bit.astype(xp.uint32)


def _voxel_of_bit(word, bit, shape, xp):
    """(N, 3) int64 (i, j, k) of bit *bit* of flat word *word* in a grid of *shape*."""
    nx, ny, _ = (int(n) for n in shape)
    wx = bitgrid.words_along_x(nx)
    row = word // wx
    i = (word % wx) * 32 + bit.astype(xp.int64)
    return xp.stack([i, row % ny, row // ny], axis=1)


def _exposed(bits, d: int, xp):
    """Bit grid of the set voxels whose neighbour in direction *d* is empty or outside."""
    return bits & ~_neighbour_bits(bits, d, xp)


def _neighbour_bits(bits, d: int, xp):
    """Bit grid whose bit at voxel v is the bit of v's neighbour in direction *d* (0 outside).

    Along y and z the neighbour is a whole row away; along x it is the next bit, which for
    bit 31 (or 0) sits in the next (previous) word. Padding bits stay zero, so the last
    voxel of a row sees an empty neighbour.
    """
    out = xp.zeros_like(bits)
    if d == 0:  # +x: bit b+1, or bit 0 of the next word
        out[:] = bits >> xp.uint32(1)
        out[..., :-1] |= bits[..., 1:] << xp.uint32(31)
    elif d == 1:  # −x: bit b−1, or bit 31 of the previous word
        out[:] = bits << xp.uint32(1)
        out[..., 1:] |= bits[..., :-1] >> xp.uint32(31)
    elif d == 2:
        out[:, :-1] = bits[:, 1:]
    elif d == 3:
        out[:, 1:] = bits[:, :-1]
    elif d == 4:
        out[:-1] = bits[1:]
    else:
        out[1:] = bits[:-1]
    return out
