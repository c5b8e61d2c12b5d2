"""Host memory of a Voxelize job, stage by stage (issue 21 §6), before any array exists:
the peak of every stage of one group's job (voxelization, attributes, coverage, each
output) and of one Bake Frames frame, from measured per-item costs. What ``guard``
checks against the real limit; arrays and arithmetic only."""

from __future__ import annotations

import numpy as np

from ..grid import bitgrid
from . import CPU_BYTES_PER_SURFACE_ITEM, estimate_bytes

# Host bytes of the operator's stages beyond the kernels' own formulas, per set voxel
# (N), exterior face (F) or grid voxel (G): counted from the arrays of each stage, then
# set from the peaks bench/memory.py measures (table and fit in bench/RESULTS.md).
BASE_BYTES = 6 << 20  # Python objects, first-use imports, allocator slack (RSS, not arrays)
ATTR_PER_VOXEL = 100  # owner_triangles + fill_along_rows: int64 ijk, linear, row, owner,
#                       prev/next scans, masks and gathers; the int32 material
POINTS_PER_VOXEL = 64  # coverage gather (int64 indices), float64 centres → float32,
#                        radius, and Blender's point cloud (position, radius, colour, 2 attributes)
COLOR_PER_VOXEL = 32  # RGBA float32 per voxel, in the job and in Blender
VDB_PER_VOXEL = 16  # the FloatGrid's active leaf voxels (value + masks) while writing
VDB_PER_GRID_VOXEL = 5  # isfinite mask and the [i, j, k]-ordered float32 copy
# A solid's density (its coverage) is constant inside, and copyFromArray makes tiles of
# constant 8³ blocks: its tree is the leaves the surface passes through
# (``split_plan.tree_bytes``), not 16 B per set voxel (2.9× the growth at 512³ before).
BLOCKS_PER_FACE = 150  # exterior_faces' keys, welding and quads, and Blender's mesh
VOX_PER_VOXEL = 104  # colours (float64 gathers → RGBA), palette indices, the chunk bytes
PER_VOXEL_OUTPUTS = {"points", "blocks", "vox"}  # outputs that need voxel lists and attributes


def peak_estimate(spec, request, n_vertices, n_triangles, vote, voxels=None, faces=None, *, items=None,
                  n_segments=0, colors=False, xp=None, area=None) -> dict:
    """Peak host memory of ``voxelize_job`` for one group, in parts and ``total``.

    Without *voxels* (before voxelizing) only the voxelization is estimated; with the
    set-voxel count (and, for block output, the exterior face count) every stage is:
    each stage's peak is what stays alive from earlier stages plus its own temporaries,
    and the total is the largest stage (plus what earlier outputs left in Blender).
    *area*: the mesh's surface in voxel units² (bounds a solid volume's VDB tree)."""
    from ..voxelize import blocks as blocks_mod
    from .coverage import coverage_bytes
    from .lines import estimate_bytes as segment_bytes
    from .split_plan import tree_bytes

    xp = xp or np
    G, W = spec.voxel_count, bitgrid.nbytes(spec.shape)
    kernel = estimate_bytes(spec, request.mode, n_vertices, n_triangles, vote, xp=xp, items=items)
    if xp is not np:
        kernel = 0  # on the device: voxelize guards it there; the host gets the bit grid
    kernel += segment_bytes(spec, n_segments) if n_segments else 0
    parts = {"G": G, "N": voxels, "F": faces, "kernel": kernel}
    if voxels is None:
        parts["total"] = int(BASE_BYTES + W + kernel)
        return parts
    N = int(voxels)
    solid = request.mode in ("solid", "solid+surface") and n_triangles > 0
    outs = request.outputs
    color = COLOR_PER_VOXEL * N if colors else 0
    coords = bitgrid.coordinates_bytes(spec.shape, N)
    stages = {"count": bitgrid.count_bytes(spec.shape)}
    live = 0
    if outs & PER_VOXEL_OUTPUTS:
        live = 12 * N  # the coordinates, kept to the end
        stages["coordinates"] = coords
        batch = CPU_BYTES_PER_SURFACE_ITEM * (items.surface if items is not None else 0) if xp is np else 0
        # owner_triangles re-lists the voxels, re-runs the surface pass next to their int64
        # coordinates and linear indices (32 B), then fills the owners along rows
        stages["attributes"] = live + max(coords, 32 * N + batch, ATTR_PER_VOXEL * N)
        live += 4 * N + color  # material (and colour) per voxel
    cover = solid and ("volume" in outs or "points" in outs)
    if cover:
        stages["coverage"] = live + coverage_bytes(spec, n_vertices, n_triangles, vote, xp=xp)
        live += 4 * G
    kept = 0  # what finished outputs leave in Blender
    if "points" in outs:
        stages["points"] = live + kept + POINTS_PER_VOXEL * N
        kept += 24 * N + (16 * N if colors else 0)
    if "volume" in outs:
        dens = 0 if cover else 4 * G
        tree = VDB_PER_VOXEL * N
        if cover and area is not None and not n_segments:  # leaves at the surface only
            tree = min(tree, tree_bytes(area, n_triangles))
        stages["volume"] = live + kept + dens + VDB_PER_GRID_VOXEL * G + tree
        live += dens
    if "blocks" in outs:
        F = int(faces if faces is not None else blocks_mod.max_face_count(spec, N))
        stages["blocks"] = live + kept + 10 * W + BLOCKS_PER_FACE * F  # + the exposed-face bit grids
        kept += 60 * F
    if "vox" in outs:
        stages["vox"] = live + kept + coords + VOX_PER_VOXEL * N
    art = getattr(request, "art", None)  # voxel art (art_cost.ArtCost), after the outputs' arrays
    if art is not None and art.colors and outs & {"blocks", "vox", "points"}:
        from .slab_outputs import block_output_bytes
        from .art_cost import art_whole_bytes

        F = int(faces if faces is not None else blocks_mod.max_face_count(spec, N)) if "blocks" in outs else 0
        stages["art"] = live + kept + block_output_bytes(F)[0] + art_whole_bytes(art, N, F)
    parts.update(stages)
    parts["total"] = int(BASE_BYTES + W + max([kernel] + list(stages.values())))
    return parts


def bake_estimate(spec, request, vertices, triangles, vote) -> int:
    """Peak host memory of one Bake Frames frame (``outputs.volume_density``, then
    ``write_vdb``). Solid modes: the coverage (its float32 result and one slab), then
    write_vdb's copies (``VDB_PER_GRID_VOXEL``) and the tree. Other modes: the
    voxelization (the frame's real work items), the bit grid unpacked (uint8 then bool)
    and its float32, then the same writing. The tree is a leaf per 8³ block the surface
    passes through (``split_plan.tree_bytes``, as the unsplit guard counts it): a solid's
    inside is tiles, a surface's density is 0 away from it."""
    from . import work_items
    from .coverage import coverage_bytes
    from .split_plan import tree_bytes, triangle_area

    G, W = spec.voxel_count, bitgrid.nbytes(spec.shape)
    nv, nt = len(vertices), len(triangles)
    tree = min(VDB_PER_VOXEL * G, tree_bytes(triangle_area(vertices, triangles) / spec.voxel_size ** 2, nt))
    writing = 4 * G + VDB_PER_GRID_VOXEL * G + tree
    if request.mode in ("solid", "solid+surface"):
        return int(BASE_BYTES + max(coverage_bytes(spec, nv, nt, vote, xp=np), writing))
    items = work_items(vertices, triangles, spec, request.mode)
    kernel = estimate_bytes(spec, request.mode, nv, nt, vote, xp=np, items=items)
    return int(BASE_BYTES + W + max(kernel, 2 * G + 4 * G, writing))
