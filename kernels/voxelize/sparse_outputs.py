"""One Voxelize group's outputs from a sparse voxelization (issue 11): point attributes
and the block mesh built from the bricks, a chunk of whole rows of bricks at a time,
never from a dense array (arrays only: the add-on runs it on a worker thread and writes
the outputs; the Volume is written from the grid itself, ``addon/sparse_vdb.py``).

Equal to the dense path (``outputs.compute_group``) wherever both fit, up to order:
voxels (points) come in *brick order* (``sparse_result``), not linear (k, j, i) order;
the block mesh has the same welded vertices in the same (lattice) order and the same
quads, its faces in brick order of their voxels, direction by direction within a
chunk. Loose edges and curves are OR-ed into the bricks (``sparse_lines``); in the solid
modes a point's ``coverage`` and the Volume's density are the dense path's 4³
supersampled coverage (``sparse_coverage``: a sparse fine solid, its interior as runs of
1.0), elsewhere 1 at set voxels.

Exposed faces (``blocks.py``'s rule: a set voxel's face whose neighbour is empty, outside
the grid empty) cross brick borders through the topology: the neighbour brick of each
brick along each direction is found by ``Topology.lookup`` (a binary search over the
sorted keys), and its border layer of bits is what the brick's own border faces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import backend
from ..grid.sparse import BRICK, brick_coords, brick_keys
from ..progress import report, scaled
from .blocks import CORNER_OFFSETS, DIRECTIONS, BlockMesh, weld
from .sparse import unpack_rows
from .sparse_attributes import material_and_color, owner_mesh_for, row_chunks
from .sparse_points import chunk_points
from .sparse_result import SparseVoxels

@dataclass
class SparseGroup:
    """One group's sparse voxels and the host arrays of its outputs."""

    count: int
    result: SparseVoxels = None
    ijk: object = None  # (N, 3) int32 set voxels, brick order
    material: object = None  # (N,) int32, −1 none
    rgba: object = None  # (N, 4) float32
    coverage: object = None  # (N,) float32 (1: see the module note)
    blocks: object = None  # BlockMesh, voxel_of_face indexing ijk
    face_material: object = None  # always None: the writer takes material[voxel_of_face] (split jobs set it)
    volume: object = None  # what writes the Volume (the add-on's sparse_vdb.SparseVolume)
    density: object = None  # the solid modes' Volume density (sparse_coverage.coverage_grid), else None
    dense: object = None  # always None: no dense density
    warnings: list = field(default_factory=list)


def exposed_faces(result: SparseVoxels, start: int, stop: int):
    """Per direction d (0..5: +x −x +y −y +z −z): (voxel, d) of the exposed faces of the
    set voxels of bricks start … stop; *voxel* indexes the chunk's voxels in brick order
    (``SparseVoxels.coordinates_of``)."""
    xp = result.xp
    keys, rows = result.bricks_of(start, stop)  # runs of full bricks expanded, this chunk only
    bits = unpack_rows(rows, xp).astype(bool)  # (n, z, y, x)
    flat = bits.reshape(-1)
    rank = xp.cumsum(flat) - 1  # the voxel's index in brick order within the chunk
    coords = brick_coords(keys, xp)
    out = []
    for d in range(6):
        step = xp.asarray(DIRECTIONS[d].astype(np.int64))
        axis = d // 2
        nb = coords + step
        other = unpack_rows(result.rows_at(brick_keys(nb, xp)), xp).astype(bool)  # stored, in a run or empty
        ax = 3 - axis  # array axis of this direction: x is the last
        if d % 2 == 0:  # + side: the neighbour of the last layer is the next brick's first
            neighbour = xp.concatenate([_take(bits, ax, 1, BRICK), _take(other, ax, 0, 1)], axis=ax)
        else:
            neighbour = xp.concatenate([_take(other, ax, BRICK - 1, BRICK), _take(bits, ax, 0, BRICK - 1)], axis=ax)
        # outside the grid is empty, as inactive bricks and the bits past the grid's
        # shape are (``clip_to_shape``): no separate edge test
        exposed = bits & ~neighbour
        idx = xp.flatnonzero(exposed.reshape(-1))
        out.append((rank[idx], d))
    return out


def _take(a, axis, lo, hi):
    sl = [slice(None)] * a.ndim
    sl[axis] = slice(lo, hi)
    return a[tuple(sl)]


def block_mesh(result: SparseVoxels, spec, chunks=None, progress=None) -> BlockMesh:
    """The block mesh (``blocks.exterior_faces``) of a sparse voxelization, chunk by chunk
    of rows of bricks; ``voxel_of_face`` indexes the voxels in brick order."""
    nx, ny, nz = spec.shape
    lattice = np.array([1, nx + 1, (nx + 1) * (ny + 1)], np.int64)
    offset_keys = (CORNER_OFFSETS.reshape(-1, 3) @ lattice).reshape(6, 4)
    keys, voxel_of_face, direction = [], [], []
    chunks = chunks if chunks is not None else row_chunks(result)
    first = 0
    for n, (s, e) in enumerate(chunks):
        ijk = np.asarray(backend.to_numpy(result.coordinates_of(s, e))).astype(np.int64)
        for voxel, d in exposed_faces(result, s, e):
            voxel = np.asarray(backend.to_numpy(voxel))
            keys.append((ijk[voxel] @ lattice)[:, None] + offset_keys[d][None, :])
            voxel_of_face.append(voxel + first)
            direction.append(np.full(len(voxel), d, np.int8))
        first += len(ijk)
        report(progress, (n + 1) / max(len(chunks), 1), "block faces")
    if not keys:
        return BlockMesh(np.zeros((0, 3), np.float32), np.zeros((0, 4), np.int32), np.zeros(0, np.int64),
                         np.zeros(0, np.int8))
    return weld(np.concatenate(keys), spec, np.concatenate(voxel_of_face).astype(np.int64),
                np.concatenate(direction), np)


def _check_vox_count(soup, segments, spec, request, vote, voxels) -> None:
    """The dense job's .vox refusal (``MemoryGuard.check_vox_count``: the largest
    resolution whose exact count fits, searched on the same grid as the operator's,
    ``grid_for`` of the group's bounds) for a sparse result of *voxels* set voxels."""
    from .guard import VOX_MAX_VOXELS, MemoryGuard

    if voxels <= VOX_MAX_VOXELS:
        return
    lows, highs = [np.asarray(soup.bounds[0], np.float64)], [np.asarray(soup.bounds[1], np.float64)]
    if segments is not None:  # loose edges and curves widen the grid as the operator's bounds do
        points = np.concatenate([segments.starts, segments.ends])
        lows.append(points.min(axis=0))
        highs.append(points.max(axis=0))
    MemoryGuard(soup, segments, request, vote, np.min(lows, axis=0), np.max(highs, axis=0)).check_vox_count(spec,
                                                                                                            voxels)


def compute_group_sparse(base, soup, spec, request, vote, table=None, progress=None, segments=None) -> SparseGroup:
    """Voxelize one group sparse (with its loose edges and curves, *segments*) and compute
    its outputs' host arrays (no bpy)."""
    from . import voxelize
    from .outputs import default_material_table
    from .sparse_coverage import CoverageRefused, coverage_at, coverage_grid
    from .sparse_lines import add_segments

    xp = backend.xp()
    table = default_material_table(soup) if table is None else table
    result = voxelize(soup.vertices, soup.triangles, spec, request.mode, vote=vote, xp=xp, sparse=True,
                      keep_on_device=True, progress=scaled(progress, 0.0, 0.4))
    if segments is not None:
        add_segments(result, segments.starts, segments.ends)
    out = SparseGroup(result.count(), result)
    if out.count == 0:
        out.warnings.append(f"{base}: no voxels (is the voxel size larger than the object?)")
        return out
    per_voxel = request.outputs & {"points", "blocks", "vox"}
    if "vox" in request.outputs:  # over the file's 32-bit bound: name the largest resolution under it
        _check_vox_count(soup, segments, spec, request, vote, out.count)
    if per_voxel:
        from .sparse_guard import check_outputs, scaled_spec

        def voxelize_at(r):  # the group at longest side r, as here: what a refusal's named size is checked on
            at = voxelize(soup.vertices, soup.triangles, scaled_spec(spec, r), request.mode, vote=vote, xp=xp,
                          sparse=True)
            if segments is not None:
                add_segments(at, segments.starts, segments.ends)
            return at

        check_outputs(result, spec, request.outputs, voxelize_at=voxelize_at)  # exact count, before per-voxel arrays
    cover = None  # the solid modes' coverage (Volume density, points' coverage)
    if request.mode in ("solid", "solid+surface") and request.outputs & {"points", "volume"}:
        try:
            cover = coverage_grid(soup.vertices, soup.triangles, result, vote=vote,
                                  progress=scaled(progress, 0.4, 0.55))
        except CoverageRefused as refused:  # the voxels still fit: density 1 at set voxels, said so
            out.warnings.append(f"{base}: {refused}; the Volume's density and the points' coverage are 1 at "
                                "set voxels instead")
        out.density = cover if "volume" in request.outputs else None
    if per_voxel:
        owner_mesh = owner_mesh_for(soup.vertices, soup.triangles, spec, result.xp)  # owners where the grid is
        chunks = row_chunks(result)
        ijks, materials, colors, covers = [], [], [], []
        for n, (s, e) in enumerate(chunks):
            ijk, owner = chunk_points(result, owner_mesh, s, e)  # runs written as voxels, not as bit rows
            material, color = material_and_color(owner, soup.material_index, table, soup.corner_colors,
                                                 soup.colored_objects, soup.object_index)
            ijks.append(ijk)
            materials.append(material)
            colors.append(color if color is not None else table[np.where(material >= 0, material, len(table) - 1)])
            covers.append(coverage_at(cover, ijk) if cover is not None else np.ones(len(ijk), np.float32))
            report(progress, 0.55 + 0.25 * (n + 1) / len(chunks), "voxel attributes")
        out.ijk = np.concatenate(ijks)
        out.material = np.concatenate(materials)
        out.rgba = np.concatenate(colors).astype(np.float32)
        out.coverage = np.concatenate(covers)
    if "blocks" in request.outputs:
        out.blocks = block_mesh(result, spec, progress=scaled(progress, 0.8, 1.0))
    return out
