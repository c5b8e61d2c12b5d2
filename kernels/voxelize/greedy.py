"""Greedy block mesh: the exterior voxel faces merged into rectangles per plane and label.

The block mesh of ``blocks.exterior_faces`` keeps one quad per exposed voxel face; a solid
1024³ cube gives six million of them. Voxel engines merge coplanar faces of the same look
into rectangles ("greedy meshing"). Here a face's look is the *label* of its voxel (a
material index, a palette index, or any integer key of both): two faces merge only when
they face the same way, lie in the same lattice plane and carry the same label, so the
merged mesh renders exactly as the per-face one when colour and material follow the label.

The merge runs in two vectorised passes, with no per-cell loop:

1. **Runs** along the plane's first axis b: faces sorted by (label, plane, c, b) start a
   new run where the label, plane or row c changes or b is not the previous b + 1.
2. **Stacks** along its second axis c: runs sorted by (label, plane, b0, b1, c) start a
   new rectangle where any of label, plane, b0, b1 changes or c is not the previous c + 1.

This is the run-then-stack form of greedy meshing: a rectangle grows down only over runs
of exactly its width, so where the cell-by-cell sweep would cut a longer run below into a
matching part and a rest, this keeps the longer run whole. The rectangles are disjoint and
cover exactly the exposed faces (each face lies in one run, each run in one rectangle). A
solid box gives six quads.

    from voxfx.kernels.voxelize.greedy import greedy_faces
    mesh = greedy_faces(result.bits, result.spec, labels=material_of_voxel)
    write_mesh("Blocks", mesh.vertices, mesh.quads,
               material_indices=material_of_voxel[mesh.voxel_of_quad])

Corners are welded on the lattice like ``blocks.exterior_faces`` (one vertex per lattice
point used), so the mesh has T-junctions where a long edge meets several short ones, the
usual price of greedy meshes; positions are exact lattice points, so no cracks show.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import backend
from ..grid.spec import GridSpec
from . import blocks


@dataclass
class GreedyMesh:
    vertices: object  # (V, 3) float32 world metres, lattice points
    quads: object  # (Q, 4) int32 vertex indices, counter-clockwise seen from outside
    label_of_quad: object  # (Q,) int64 the label shared by the quad's faces
    voxel_of_quad: object  # (Q,) int64 one of its voxels (linear (k, j, i) set-voxel index)
    direction_of_quad: object  # (Q,) int8 0..5: +x, −x, +y, −y, +z, −z (blocks.DIRECTIONS)
    area_of_quad: object  # (Q,) int64 voxel faces the quad covers
    faces_before: int  # exposed voxel faces (the per-face block mesh's quad count)

    @property
    def voxel_of_face(self):
        """``voxel_of_quad`` under the per-face mesh's name (``blocks.BlockMesh``), so code
        that gathers per-voxel arrays onto faces takes either mesh."""
        return self.voxel_of_quad

    @property
    def quad_count(self) -> int:
        return int(self.quads.shape[0])

    def to_numpy(self) -> "GreedyMesh":
        arrays = (self.vertices, self.quads, self.label_of_quad, self.voxel_of_quad,
                  self.direction_of_quad, self.area_of_quad)
        return GreedyMesh(*(backend.to_numpy(a) for a in arrays), self.faces_before)


def exposed_faces(bits, spec: GridSpec, d: int):
    """(ijk (F, 3) int64, voxel rank (F,) int64) of the set voxels whose face in direction
    *d* is exterior, in linear (k, j, i) order; rank indexes the set voxels in that order."""
    xp = backend.array_module(bits)
    exposed = blocks._exposed(bits, d, xp)
    word, bit = blocks._set_bit_positions(exposed, xp)
    flat = bits.reshape(-1)
    per_word = blocks._popcount(flat).astype(xp.int64)
    word_rank = xp.cumsum(per_word) - per_word
    below = flat[word] & ((xp.uint32(1) << bit) - xp.uint32(1))
    rank = word_rank[word] + blocks._popcount(below)
    return blocks._voxel_of_bit(word, bit, spec.shape, xp), rank.astype(xp.int64)


def greedy_faces(bits, spec: GridSpec, labels=None) -> GreedyMesh:
    """Greedy block mesh of the packed bit grid *bits* over *spec*; *labels* (N,) integers
    per set voxel in linear (k, j, i) order (default: all equal). Runs where *bits* lives
    (NumPy or CuPy)."""
    blocks._check_bits(bits, spec)
    xp = backend.array_module(bits)
    if labels is not None:
        labels = xp.asarray(labels).astype(xp.int64).ravel()
    nx, ny, nz = spec.shape
    lattice = (nx + 1, ny + 1, nz + 1)
    corner_keys, label_of, voxel_of, direction_of, area_of = [], [], [], [], []
    faces_before = 0
    for d in range(6):
        ijk, rank = exposed_faces(bits, spec, d)
        faces_before += int(len(rank))
        if len(rank) == 0:
            continue
        if labels is not None and len(labels) <= int(rank.max()):
            raise ValueError(f"{len(labels)} labels for a grid of more set voxels")
        label = labels[rank] if labels is not None else xp.zeros(len(rank), xp.int64)
        rects = _merge_plane_faces(ijk, label, rank, d, xp)
        a, b, c = d // 2, (d // 2 + 1) % 3, (d // 2 + 2) % 3
        plane, b0, b1, c0, c1, rect_label, rect_voxel = rects
        corners = _rectangle_corners(plane + (1 - d % 2), b0, b1, c0, c1, a, b, c, d % 2, xp)
        corner_keys.append(blocks._linear(corners.reshape(-1, 3), lattice, xp).reshape(-1, 4))
        label_of.append(rect_label)
        voxel_of.append(rect_voxel)
        direction_of.append(xp.full(len(b0), d, dtype=xp.int8))
        area_of.append((b1 - b0) * (c1 - c0))
    if not corner_keys:
        empty = xp.zeros(0, xp.int64)
        return GreedyMesh(xp.zeros((0, 3), xp.float32), xp.zeros((0, 4), xp.int32), empty, empty,
                          xp.zeros(0, xp.int8), empty, 0)
    keys = xp.concatenate(corner_keys)
    unique_keys, inverse = xp.unique(keys.reshape(-1), return_inverse=True)
    ci = unique_keys % (nx + 1)
    cj = (unique_keys // (nx + 1)) % (ny + 1)
    ck = unique_keys // ((nx + 1) * (ny + 1))
    points = xp.stack([ci, cj, ck], axis=1).astype(xp.float64)
    vertices = (xp.asarray(spec.origin, dtype=xp.float64) + points * spec.voxel_size).astype(xp.float32)
    return GreedyMesh(vertices, inverse.reshape(-1, 4).astype(xp.int32), xp.concatenate(label_of),
                      xp.concatenate(voxel_of), xp.concatenate(direction_of),
                      xp.concatenate(area_of).astype(xp.int64), faces_before)


def _merge_plane_faces(ijk, label, rank, d: int, xp):
    """Rectangles (plane, b0, b1, c0, c1, label, voxel) of the faces of direction *d*:
    runs along b, then runs of equal extent stacked along c (module docstring)."""
    a, b, c = d // 2, (d // 2 + 1) % 3, (d // 2 + 2) % 3
    pa, pb, pc = ijk[:, a], ijk[:, b], ijk[:, c]
    # 1. runs along b; lexsort's last key is the primary one
    order = xp.lexsort(xp.stack([pb, pc, pa, label]))
    pa, pb, pc, label, rank = pa[order], pb[order], pc[order], label[order], rank[order]
    start = xp.ones(len(pb), dtype=bool)
    start[1:] = ((label[1:] != label[:-1]) | (pa[1:] != pa[:-1]) | (pc[1:] != pc[:-1])
                 | (pb[1:] != pb[:-1] + 1))
    first = xp.flatnonzero(start)
    last = xp.append(first[1:], len(pb)) - 1
    run_a, run_c, run_label, run_voxel = pa[first], pc[first], label[first], rank[first]
    run_b0, run_b1 = pb[first], pb[last] + 1
    # 2. stack runs of the same extent along c
    order = xp.lexsort(xp.stack([run_c, run_b1, run_b0, run_a, run_label]))
    run_a, run_c, run_label, run_voxel = run_a[order], run_c[order], run_label[order], run_voxel[order]
    run_b0, run_b1 = run_b0[order], run_b1[order]
    start = xp.ones(len(run_c), dtype=bool)
    start[1:] = ((run_label[1:] != run_label[:-1]) | (run_a[1:] != run_a[:-1])
                 | (run_b0[1:] != run_b0[:-1]) | (run_b1[1:] != run_b1[:-1])
                 | (run_c[1:] != run_c[:-1] + 1))
    first = xp.flatnonzero(start)
    last = xp.append(first[1:], len(run_c)) - 1
    return (run_a[first], run_b0[first], run_b1[first], run_c[first], run_c[last] + 1,
            run_label[first], run_voxel[first])


def _rectangle_corners(plane, b0, b1, c0, c1, a, b, c, side, xp):
    """(R, 4, 3) lattice corners, wound like ``blocks.CORNER_OFFSETS``: counter-clockwise
    about +a for the + face, backwards for the − face."""
    loop = ((0, 0), (1, 0), (1, 1), (0, 1)) if side == 0 else ((0, 0), (0, 1), (1, 1), (1, 0))
    corners = xp.empty((len(b0), 4, 3), dtype=xp.int64)
    for n, (ub, uc) in enumerate(loop):
        corners[:, n, a] = plane
        corners[:, n, b] = b1 if ub else b0
        corners[:, n, c] = c1 if uc else c0
    return corners
