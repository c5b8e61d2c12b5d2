"""Voxelize in z-slabs when the whole job does not fit (issue 21 §6).

The voxelization (``kernels.voxelize.slabs``: bit-identical to the unsplit grid), the
coverage of solid modes (one fine grid, box by box) and the density go slab by slab
into one VDB tree (``outputs.voxelize_group_split``;
the add-on's ``vdb_stream``): the peak is one slab's arrays plus the mesh
and the tree, which grows with the surface (constant leaves inside a solid become
tiles). Block mesh and .vox output split their attribute stage instead
(``attribute_split_estimate``, ``slab_outputs``): the bit grid stays whole and owners,
faces and colours go a z-slab at a time. A Volume together with Blocks/.vox keeps the
bit grid once and runs both (``mixed_split_estimate``): the Volume slab by slab from the
grid's rows, then the attributes; their voxel art's memory is ``art_cost``'s. A point
cloud needs every voxel at once in Blender, so for it the guard names the largest
resolution that fits unsplit; for the others, the largest that runs whole or split
(``split_search``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..grid import GridSpec, bitgrid
from ..memory import largest_that_fits
from . import WorkItems, estimate_bytes
from .art_cost import art_bytes
from .coverage import coverage_slab_bytes
from .slabs import RANGE_BYTES_PER_TRIANGLE, SplitMesh, slab_work_items, triangles_per_slab

SPLIT_OUTPUTS = {"volume"}
SLAB_BUDGET = 1 << 30  # a slab's own arrays stop growing here: more rows per slab buy no speed
# Per voxel of a slab: its density (float32), the (x, y, z) copy copyFromArray reads, the
# isfinite mask, and the leaves OpenVDB builds for it before pruning constant ones (2.3 kB
# per leaf of 512 voxels, counted as 16 B per voxel like the unsplit path's VDB_PER_VOXEL).
SLAB_OUTPUT_PER_VOXEL = 4 + 4 + 1 + 16
# The tree kept: a leaf (≈ 2.3 kB) per 8³ block the surface passes through, about three per
# 64 voxel units of surface area (a plane crosses up to two leaf layers, and curvature).
VDB_LEAF_BYTES = 2304
LEAVES_PER_AREA = 3 / 64


def splittable(request, segments) -> bool:
    """Volume output only, and no loose edges or curves (the line voxelizer is unsplit)."""
    return request.outputs <= SPLIT_OUTPUTS and segments is None


def surface_area(mesh: SplitMesh) -> float:
    """The mesh's area in voxel units² (sets the size of the VDB tree kept)."""
    return triangle_area(mesh.pv, mesh.triangles)


def corner_areas(corners) -> np.ndarray:
    """(T,) float64 area of each triangle from its (T, 3, 3) corners, 65 536 at a time."""
    out = np.empty(len(corners), np.float64)
    for t0 in range(0, len(corners), 1 << 16):
        v = np.asarray(corners[t0:t0 + (1 << 16)], np.float64)
        out[t0:t0 + len(v)] = 0.5 * np.linalg.norm(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), axis=1)
    return out


def triangle_area(vertices, triangles) -> float:
    """The summed area of *triangles* (in the units² of *vertices*), 65 536 at a time."""
    vertices = np.asarray(vertices)
    return float(sum(float(corner_areas(vertices[triangles[t0:t0 + (1 << 16)]]).sum())
                     for t0 in range(0, len(triangles), 1 << 16)))


def mesh_bytes(mesh: SplitMesh) -> int:
    """The split mesh kept through the slabs: voxel-unit vertices, the triangles' ranges and
    their int64 indices."""
    return 24 * len(mesh.pv) + RANGE_BYTES_PER_TRIANGLE * len(mesh.triangles) + 24 * len(mesh.triangles)


def most_layers(need, usable: int, nz: int):
    """The most rows per slab (1 .. *nz*) whose *need* fits *usable*, capped where the slab's
    own arrays pass ``SLAB_BUDGET``; None when not even one row fits."""
    smallest = need(1)
    if smallest > usable:
        return None
    return largest_that_fits(need, min(usable, smallest + SLAB_BUDGET), 1, nz)


def tree_bytes(area: float, n_triangles: int) -> int:
    """The VDB tree of a density over a mesh of *area* voxel units²: a leaf per 8³ block
    the surface passes through (constant blocks inside a solid are tiles)."""
    return int(VDB_LEAF_BYTES * (LEAVES_PER_AREA * area + int(n_triangles)))


def split_estimate(spec: GridSpec, mode: str, mesh: SplitMesh, vote: bool, layers: int, items=None, area=None,
                   base: int = 0, voxelized: bool = False) -> int:
    """Peak host memory of the split Volume job with slabs of *layers* rows (*voxelized*:
    the slabs' bits are read from a whole bit grid counted in *base*, not voxelized)."""
    nx, ny, nz = spec.shape
    layers = max(1, min(nz, int(layers)))
    nv, nt = len(mesh.pv), len(mesh.triangles)
    nt_slab = triangles_per_slab(mesh, layers, vote)
    slab = GridSpec(spec.origin, spec.voxel_size, (nx, ny, layers))
    per_slab = slab_work_items(mesh, layers, mode, vote)
    items = per_slab if items is None else WorkItems(min(per_slab.surface, items.surface),
                                                     min(per_slab.solid, items.solid))
    kept = mesh_bytes(mesh)
    area = surface_area(mesh) if area is None else area
    tree = tree_bytes(area, nt)
    voxelizing = 0 if voxelized else estimate_bytes(slab, mode, 0, nt_slab, vote, xp=np, items=items)
    stage = voxelizing
    slab_voxels = nx * ny * layers
    if mode in ("solid", "solid+surface"):
        cover = coverage_slab_bytes(spec, layers, 0, nt_slab, vote, xp=np)
        stage = max(stage, bitgrid.nbytes(slab.shape) + cover + RANGE_BYTES_PER_TRIANGLE * nt + 24 * nv)
    output = bitgrid.nbytes(slab.shape) + SLAB_OUTPUT_PER_VOXEL * slab_voxels
    return int(base + kept + tree + max(stage, output))


def choose_layers(spec: GridSpec, mode: str, mesh: SplitMesh, vote: bool, usable: int, items=None,
                  base: int = 0, voxelized: bool = False):
    """Rows per slab of the Volume split (``most_layers`` of ``split_estimate``)."""
    area = surface_area(mesh)
    return most_layers(lambda layers: split_estimate(spec, mode, mesh, vote, layers, items, area, base, voxelized),
                       usable, spec.shape[2])


def largest_split_resolution(guard, r_now: int):
    """The largest resolution below *r_now* whose split Volume job fits the guard's limit."""
    from . import work_items

    def need(r):
        spec = guard.spec_at(r)
        mesh = SplitMesh(guard.soup.vertices, guard.soup.triangles, spec)
        items = work_items(guard.soup.vertices, guard.soup.triangles, spec, guard.request.mode)
        return split_estimate(spec, guard.request.mode, mesh, guard.vote, 1, items, base=guard.base_bytes())

    return largest_that_fits(need, guard.usable, 2, r_now - 1)


# ---------------------------------------------------------------- Blocks and .vox split
ATTRIBUTE_OUTPUTS = {"blocks", "vox"}
BLENDER_MESH_PER_FACE = 60  # Blender's block mesh (guard.BLOCKS_PER_FACE's kept part)
# owners_box's peak per set voxel of a slab: 100–103 B allocated (tracemalloc, cube 400³),
# 102–112 B of RSS growth per slab voxel at 1024³ (bench/RESULTS.md); the unsplit
# ATTR_PER_VOXEL is 100 B
OWNERS_PER_VOXEL = 120


def attributes_splittable(request) -> bool:
    """Block mesh and .vox output (any of them, nothing else): their attributes are
    computed a z-slab at a time from the whole bit grid (``slab_outputs``)."""
    return bool(request.outputs & ATTRIBUTE_OUTPUTS) and request.outputs <= ATTRIBUTE_OUTPUTS


def slab_maxima(per_row, layers: int) -> int:
    """The largest sum of *per_row* over the z-slabs of *layers* rows."""
    if per_row is None or not len(per_row):
        return 0
    starts = np.arange(0, len(per_row), max(1, int(layers)))
    return int(np.add.reduceat(per_row, starts).max())


def attribute_split_estimate(spec: GridSpec, request, mesh: SplitMesh, rows, faces, layers: int, base: int = 0,
                             segments: int = 0) -> int:
    """Peak host memory of the Blocks/.vox job split into z-slabs of *layers* rows, from
    the exact set voxels and exterior faces per z row (*rows*: ``slab_outputs.row_counts``)
    and the whole job's exterior face count *faces*. Kept throughout: the whole bit grid
    and the mesh's ranges. Then the largest of three stages: a slab's attributes
    (``owners_box``: coordinates, linear indices, surface hits and the row fill; or the
    slab's faces and their welding; the .vox pass's coordinates) beside the block mesh
    built so far; ``BlockBuilder.finish`` (argsort and reordered copies); and Blender's
    copy of the mesh beside the finished arrays (``slab_outputs.block_output_bytes``)."""
    from . import CPU_BYTES_PER_SURFACE_ITEM
    from .blocks import _BYTES_PER_FACE
    from .slab_outputs import block_output_bytes

    nx, ny, nz = spec.shape
    layers = max(1, min(nz, int(layers)))
    voxels_per_row, faces_per_row = rows
    n_slab = slab_maxima(voxels_per_row, layers)
    f_slab = slab_maxima(faces_per_row, layers) if "blocks" in request.outputs else 0
    items = slab_work_items(mesh, layers, "surface")
    kept = mesh_bytes(mesh)
    whole = bitgrid.nbytes(spec.shape)
    F = int(faces) if "blocks" in request.outputs else 0
    built, finishing = block_output_bytes(F)
    slab_bits = bitgrid.nbytes((nx, ny, layers + 2))
    # owners_box: its surface pass (a batch) runs beside the voxels' int32 and int64
    # coordinates and linear indices (48 B); the owners and the row fill come after it
    owners = max(OWNERS_PER_VOXEL * n_slab, 48 * n_slab + CPU_BYTES_PER_SURFACE_ITEM * items.surface)
    faces_stage = _BYTES_PER_FACE * f_slab + 8 * slab_bits + 12 * n_slab
    # .vox, after owners_box: the colour index, int32 then int64 coordinates, and in the
    # writer the int64 tiles, tile keys, their argsort, the sorted keys and the XYZI bytes
    vox = (1 + 12 + 24 + 24 + 8 + 8 + 8 + 4) * n_slab if "vox" in request.outputs else 0
    # voxel art (request.art, ``art_cost.ArtCost``): kept through the slabs, its slab stage after owners_box
    f_exposed = slab_maxima(faces_per_row, layers) if faces_per_row is not None else 6 * n_slab
    art = getattr(request, "art", None)
    density = art.slab_density(spec, layers) if art is not None else None  # the slab that looks up the most
    art_kept, art_slab, art_finishing, art_writing = art_bytes(art, int(np.sum(voxels_per_row)), n_slab, F, f_exposed,
                                                               density)
    slab = built + art_kept + max(owners, 4 * n_slab + vox, faces_stage, art_slab)  # .vox arrays after owners_box
    finishing = art_kept + max(finishing, built + art_finishing)
    writing = built + BLENDER_MESH_PER_FACE * F + art_writing
    return int(base + whole + kept + segments + max(slab, finishing, writing))


def choose_attribute_layers(spec: GridSpec, request, mesh: SplitMesh, rows, faces, usable: int, base: int = 0):
    """Rows per slab of the Blocks/.vox split (``most_layers`` of ``attribute_split_estimate``)."""
    return most_layers(lambda layers: attribute_split_estimate(spec, request, mesh, rows, faces, layers, base),
                       usable, spec.shape[2])


# ---------------------------------------------------------------- Volume with Blocks/.vox
def mixed_splittable(request, segments) -> bool:
    """Volume together with Block mesh and/or .vox (nothing else, no loose edges): the
    whole bit grid is kept once; the Volume goes slab by slab from it into the VDB tree,
    then the Blocks/.vox attributes slab by slab (``outputs.compute_group_split``)."""
    outputs = request.outputs
    return ("volume" in outputs and bool(outputs & ATTRIBUTE_OUTPUTS)
            and outputs <= SPLIT_OUTPUTS | ATTRIBUTE_OUTPUTS and segments is None)


def attribute_request(request):
    """*request* with its Block mesh / .vox outputs only (the mixed split's second part)."""
    return replace(request, outputs=set(request.outputs) & ATTRIBUTE_OUTPUTS)


def mixed_split_estimate(spec: GridSpec, request, mesh: SplitMesh, vote: bool, rows, faces, volume_layers: int,
                         attribute_layers: int, items=None, area=None, base: int = 0) -> int:
    """Peak host memory of the mixed split: the Volume pass (``split_estimate`` of slabs
    read from the whole bit grid, which it keeps) then the Blocks/.vox pass
    (``attribute_split_estimate``, which counts the whole bit grid) beside the VDB tree
    the Volume pass built."""
    area = surface_area(mesh) if area is None else area
    whole_bits = bitgrid.nbytes(spec.shape)
    volume = split_estimate(spec, request.mode, mesh, vote, volume_layers, items, area, base + whole_bits,
                            voxelized=True)
    attributes = attribute_split_estimate(spec, attribute_request(request), mesh, rows, faces, attribute_layers,
                                          base + tree_bytes(area, len(mesh.triangles)))
    return max(volume, attributes)


def choose_mixed_layers(spec: GridSpec, request, mesh: SplitMesh, vote: bool, rows, faces, usable: int, items=None,
                        base: int = 0):
    """(rows per slab of the Volume pass, of the Blocks/.vox pass): each the most whose
    stage fits *usable* (``choose_layers``, ``choose_attribute_layers``); None when
    either does not fit with one row."""
    area = surface_area(mesh)
    volume = choose_layers(spec, request.mode, mesh, vote, usable, items, base + bitgrid.nbytes(spec.shape),
                           voxelized=True)
    attributes = choose_attribute_layers(spec, attribute_request(request), mesh, rows, faces, usable,
                                         base + tree_bytes(area, len(mesh.triangles)))
    if volume is None or attributes is None:
        return None
    return volume, attributes
