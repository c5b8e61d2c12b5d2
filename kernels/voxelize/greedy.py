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

import numpy as np

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
    builder = GreedyBuilder(spec, xp)
    for d in range(6):
        ijk, rank = exposed_faces(bits, spec, d)
        if len(rank) and labels is not None and len(labels) <= int(rank.max()):
            raise ValueError(f"{len(labels)} labels for a grid of more set voxels")
        label = labels[rank] if labels is not None else xp.zeros(len(rank), xp.int64)
        builder.add(d, ijk, label, rank)
    return builder.finish()[0]


class GreedyBuilder:
    """The greedy mesh of faces given in parts (z-slabs of a split grid, the faces of a
    sparse result), equal to ``greedy_faces`` of all of them at once: each part's faces
    become runs along b (``_runs``); at the end the runs of one (label, plane, row c)
    that meet end to start across parts are joined (``_join``: a run along z cut by a
    slab border), and the joined runs are stacked along c (``_stack``), which crosses the
    parts on its own. The rectangles, their order, their voxel and the welded vertices
    are then ``greedy_faces``'; a *payload* per face (its colour, say) comes along, the
    quad's from its ``voxel_of_quad``'s face.

        builder = GreedyBuilder(spec)
        builder.add(d, ijk, label, voxel, payload)   # per part and direction
        mesh, payload_of_quad = builder.finish()"""

    def __init__(self, spec: GridSpec, xp=np):
        self.spec, self.xp = spec, xp
        self.runs = [[] for _ in range(6)]  # per direction: the parts' runs
        self.faces_before = 0

    def add(self, d: int, ijk, label, voxel, payload=None) -> None:
        """Faces of direction *d*: their voxels' *ijk* (F, 3), integer *label* (F,),
        *voxel* (F,) index (what ``voxel_of_quad`` reports) and *payload* (F, ...)."""
        self.faces_before += int(len(voxel))
        if len(voxel):
            self.runs[d].append(_runs(ijk, self.xp.asarray(label).astype(self.xp.int64), voxel, payload, d, self.xp))

    def finish(self):
        """(GreedyMesh, payload per quad or None)."""
        xp = self.xp
        nx, ny, nz = self.spec.shape
        lattice = (nx + 1, ny + 1, nz + 1)
        corner_keys, label_of, voxel_of, direction_of, area_of, payload_of = [], [], [], [], [], []
        for d in range(6):
            parts, self.runs[d] = self.runs[d], []
            if not parts:
                continue
            runs = parts[0] if len(parts) == 1 else _join([None if c[0] is None else xp.concatenate(c)
                                                            for c in zip(*parts)], xp)
            plane, b0, b1, c0, c1, rect_label, rect_voxel, rect_payload = _stack(runs, xp)
            a, b, c = d // 2, (d // 2 + 1) % 3, (d // 2 + 2) % 3
            corners = _rectangle_corners(plane + (1 - d % 2), b0, b1, c0, c1, a, b, c, d % 2, xp)
            corner_keys.append(blocks._linear(corners.reshape(-1, 3), lattice, xp).reshape(-1, 4))
            label_of.append(rect_label)
            voxel_of.append(rect_voxel)
            direction_of.append(xp.full(len(b0), d, dtype=xp.int8))
            area_of.append((b1 - b0) * (c1 - c0))
            payload_of.append(rect_payload)
        if not corner_keys:
            empty = xp.zeros(0, xp.int64)
            return GreedyMesh(xp.zeros((0, 3), xp.float32), xp.zeros((0, 4), xp.int32), empty, empty,
                              xp.zeros(0, xp.int8), empty, self.faces_before), None
        keys = xp.concatenate(corner_keys)
        unique_keys, inverse = xp.unique(keys.reshape(-1), return_inverse=True)
        ci = unique_keys % (nx + 1)
        cj = (unique_keys // (nx + 1)) % (ny + 1)
        ck = unique_keys // ((nx + 1) * (ny + 1))
        points = xp.stack([ci, cj, ck], axis=1).astype(xp.float64)
        vertices = (xp.asarray(self.spec.origin, dtype=xp.float64) + points * self.spec.voxel_size).astype(xp.float32)
        mesh = GreedyMesh(vertices, inverse.reshape(-1, 4).astype(xp.int32), xp.concatenate(label_of),
                          xp.concatenate(voxel_of).astype(xp.int64), xp.concatenate(direction_of),
                          xp.concatenate(area_of).astype(xp.int64), self.faces_before)
        payload = None if payload_of[0] is None else xp.concatenate(payload_of)
        return mesh, payload


def _runs(ijk, label, voxel, payload, d: int, xp):
    """1. Runs along b of the faces of direction *d*: (a, c, b0, b1, label, voxel,
    payload) per run, the voxel and payload of its first face (least b). Faces sorted
    by (label, plane a, row c, b) start a run where any of the first three changes or b
    is not the previous b + 1 (lexsort's last key is the primary one)."""
    a, b, c = d // 2, (d // 2 + 1) % 3, (d // 2 + 2) % 3
    pa, pb, pc = ijk[:, a], ijk[:, b], ijk[:, c]
    order = xp.lexsort(xp.stack([pb, pc, pa, label]))
    pa, pb, pc, label, voxel = pa[order], pb[order], pc[order], label[order], voxel[order]
    start = xp.ones(len(pb), dtype=bool)
    start[1:] = ((label[1:] != label[:-1]) | (pa[1:] != pa[:-1]) | (pc[1:] != pc[:-1])
                 | (pb[1:] != pb[:-1] + 1))
    first = xp.flatnonzero(start)
    last = xp.append(first[1:], len(pb)) - 1
    rows = order[first]
    return (pa[first], pc[first], pb[first], pb[last] + 1, label[first], voxel[first],
            None if payload is None else payload[rows])


def _join(runs, xp):
    """Runs of several parts: those of one (label, a, c) where one ends as the next
    begins (b1 = the next b0) made one, keeping the first's voxel and payload. Within a
    part runs are maximal, so this joins only across the parts' borders."""
    a, c, b0, b1, label, voxel, payload = runs
    order = xp.lexsort(xp.stack([b0, c, a, label]))
    a, c, b0, b1, label, voxel = a[order], c[order], b0[order], b1[order], label[order], voxel[order]
    start = xp.ones(len(b0), dtype=bool)
    start[1:] = (label[1:] != label[:-1]) | (a[1:] != a[:-1]) | (c[1:] != c[:-1]) | (b0[1:] != b1[:-1])
    first = xp.flatnonzero(start)
    last = xp.append(first[1:], len(b0)) - 1
    return (a[first], c[first], b0[first], b1[last], label[first], voxel[first],
            None if payload is None else payload[order[first]])


def _stack(runs, xp):
    """2. Rectangles (plane, b0, b1, c0, c1, label, voxel, payload): runs sorted by
    (label, plane, b0, b1, c) start a new rectangle where any of the first four changes
    or c is not the previous c + 1; a rectangle keeps its first (least c) run's voxel."""
    run_a, run_c, run_b0, run_b1, run_label, run_voxel, payload = runs
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
            run_label[first], run_voxel[first], None if payload is None else payload[order[first]])


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
