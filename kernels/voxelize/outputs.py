"""One Voxelize group's voxels and the arrays of its outputs (point attributes, colours,
coverage, density, block faces), computed before anything is written: arrays only, so
the add-on runs it on a worker thread where Esc stops it at the next chunk, then writes
the outputs into the scene and files on the main thread (issue 19: the operator only
reads, runs and writes back)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import backend
from ..grid import GridSpec, bitgrid
from ..memory import trim_heap
from ..progress import report, scaled
from . import voxelize
from .attributes import owner_triangles
from .blocks import exterior_faces
from .coverage import coverage, coverage_slabs, density
from .guard import PER_VOXEL_OUTPUTS
from .lines import voxelize_segments

DEFAULT_COLOR = (0.8, 0.8, 0.8, 1.0)  # a voxel without a material: Blender's default grey


@dataclass
class GroupArrays:
    """One group's voxels and the arrays of its outputs, before any is written."""

    count: int
    grid: object = None  # VoxelGrid
    ijk: object = None  # (N, 3) int32 set voxels
    material: object = None  # (N,) int32 index into the selection's materials, -1 for none
    rgba: object = None  # (N, 4) float32 colour per voxel (points, .vox)
    coverage: object = None  # (N,) float32 fraction inside (points)
    dense: object = None  # [k, j, i] float32 density (volume)
    volume: object = None  # the density built slab by slab (vdb_stream.SlabVolume), split jobs only
    blocks: object = None  # exterior faces (block mesh)
    face_material: object = None  # (F,) int32 material per block face, split jobs only
    vox_file: object = None  # the .vox file written slab by slab (a temporary to rename), split jobs only
    warnings: list = field(default_factory=list)


def compute_group(base, soup, segments, spec, request, vote, guard=None, table=None, progress=None) -> GroupArrays:
    """Voxelize one group and compute its outputs' arrays; arrays only (no bpy), so it may
    run on a worker thread. Long kernels report per chunk into *progress* and stop at the
    next chunk when it answers False (``Cancelled``)."""
    xp = backend.xp()
    empty = np.zeros((0, 3), dtype=np.float32)
    verts = soup.vertices if soup is not None else empty
    tris = soup.triangles if soup is not None else np.zeros((0, 3), dtype=np.int32)
    table = default_material_table(soup) if table is None else table
    grid = voxelize(verts, tris, spec, request.mode, vote=vote, xp=xp, progress=scaled(progress, 0.0, 0.5))
    bits = grid.bits
    trim_heap()  # the voxelization's freed temporaries must not stay under the next stages' peaks
    if segments is not None:
        bits = voxelize_segments(segments.starts, segments.ends, spec, xp=np, words=bits,
                                 progress=scaled(progress, 0.5, 0.55))
        grid.bits = bits
    out = GroupArrays(grid.count(), grid=grid)
    if out.count == 0:
        out.warnings.append(f"{base}: no voxels (is the voxel size larger than the object?)")
        return out
    if guard is not None:  # the exact counts, before any per-voxel array exists
        faces = None
        if "blocks" in request.outputs:
            from .blocks import count_exterior_faces

            faces = count_exterior_faces(bits, spec)
        guard.check_after(spec, out.count, faces, bits)
        if guard.split_layers is not None:  # the job runs split instead (voxelize_job), from these bits
            return out
    if request.outputs & PER_VOXEL_OUTPUTS:  # a volume alone needs no per-voxel lists
        report(progress, 0.55, "voxel attributes")
        out.ijk = grid.coordinates()
        out.material, color = voxel_attributes(soup, verts, tris, spec, bits, xp, len(out.ijk), table)
        if request.outputs & {"points", "vox"}:
            out.rgba = color if color is not None else colors_of(table, out.material)
    solid_mode = request.mode in ("solid", "solid+surface")
    cover = None  # fraction of each voxel inside the mesh (solid modes only)
    if solid_mode and len(tris) and ("volume" in request.outputs or "points" in request.outputs):
        cover = coverage(verts, tris, spec, vote=vote, xp=xp, progress=scaled(progress, 0.6, 0.95))
    report(progress, 0.95, "outputs")
    if "points" in request.outputs:
        ijk = out.ijk
        out.coverage = cover[ijk[:, 2], ijk[:, 1], ijk[:, 0]] if cover is not None else np.ones(len(ijk), np.float32)
    if "volume" in request.outputs:
        # smooth density from the coverage (in place); set voxels wholly outside (thin
        # sheets) still show; slab by slab, no second dense grid
        out.dense = density(bits, spec, cover)
        cover = None
    if "blocks" in request.outputs:
        out.blocks = exterior_faces(grid.bits, spec).to_numpy()
    return out


def compute_group_split(base, soup, spec, request, vote, layers, new_volume, progress=None, *, kind="volume",
                        grid=None, table=None, write_vox=None, attribute_layers=None, art=None) -> GroupArrays:
    """One group's outputs split into z-slabs of *layers* rows: the Volume voxelized slab
    by slab into one density tree (``voxelize_group_split``), or (*kind* "attributes")
    the Blocks/.vox attributes of the voxelized *grid* slab by slab
    (``slab_outputs.split_attribute_outputs``; *write_vox* writes the .vox file there;
    *art*, an ``art_outputs.SlabArt``, gives colours, merged faces and the palette),
    or (*kind* "mixed") both from the one voxelized *grid*: its Volume slab by slab
    (``volume_of_grid_split``), then its Blocks/.vox in slabs of *attribute_layers* rows.
    Arrays (and the .vox temporary) only, written by the add-on."""
    if kind in ("attributes", "mixed"):
        table = default_material_table(soup) if table is None else table
        out = GroupArrays(grid.count(), grid=grid)
        from .slab_outputs import split_attribute_outputs

        part = progress
        if kind == "mixed":
            out.volume = volume_of_grid_split(soup, spec, request.mode, vote, grid.bits, layers, new_volume,
                                              scaled(progress, 0.0, 0.5))
            layers, part = attribute_layers, scaled(progress, 0.5, 1.0)
        blocks, out.vox_file = split_attribute_outputs(soup, spec, grid.bits, layers, request.outputs, table,
                                                       write_vox, part, art=art)
        if blocks is not None:
            out.blocks, out.face_material = blocks
        if art is not None:  # issue 15: face colours, faces before/after merging (art_outputs.SlabArt)
            art.finish(out)
        return out
    count, volume = voxelize_group_split(soup, spec, request, vote, layers, new_volume, progress)
    out = GroupArrays(count, volume=volume if count else None)
    if not count:
        out.warnings.append(f"{base}: no voxels (is the voxel size larger than the object?)")
    return out


def voxel_attributes(soup, verts, tris, spec, bits, xp, count, table):
    """Per set voxel: material index (into the combined material list) and RGBA colour
    (None: the material's, from *table*)."""
    if soup is None or len(tris) == 0:
        return np.full(count, -1, np.int32), None
    owner = owner_triangles(verts, tris, spec, bits, xp=xp)
    ok = owner >= 0
    material = np.where(ok, soup.material_index[np.maximum(owner, 0)], -1).astype(np.int32)
    color = None
    if soup.corner_colors is not None and any(soup.colored_objects or ()):
        # Sources with a colour attribute give it; the others their material's colour.
        color = colors_of(table, material)
        from_attribute = ok & np.asarray(soup.colored_objects, bool)[soup.object_index[np.maximum(owner, 0)]]
        corner = soup.corner_colors[np.maximum(owner, 0)[from_attribute]]
        color[from_attribute] = corner.mean(axis=1).astype(np.float32)
    return material, color


def default_material_table(soup):
    table = np.empty((len(soup.materials) + 1 if soup else 1, 4), np.float32)
    table[:] = DEFAULT_COLOR
    return table


def colors_of(table, material):
    """RGBA per voxel from its material's row of *table* (the last row without one)."""
    return table[np.where(material >= 0, material, len(table) - 1)]


def voxelize_group_split(soup, spec, request, vote, layers, new_volume, progress=None):
    """The Volume output of one group, slab by slab: (set voxel count, the volume).
    *new_volume(name, spec)* makes the tree the slabs go into (``add(k0, density)``; the
    add-on's ``vdb_stream.SlabVolume``). Arrays only: it may run on a worker thread;
    *progress* may cancel between chunks."""
    from .slabs import SplitMesh, voxelize_slabs

    xp = backend.xp()
    verts, tris = soup.vertices, soup.triangles
    solid = request.mode in ("solid", "solid+surface")
    if xp is np:
        slabs = voxelize_slabs(SplitMesh(verts, tris, spec), request.mode, layers, vote=vote, progress=progress)
    else:
        from .gpu_slabs import DeviceSplitMesh, voxelize_slabs_gpu

        slabs = voxelize_slabs_gpu(DeviceSplitMesh(verts, tris, spec), request.mode, layers, vote=vote,
                                   progress=progress)
    covers = coverage_slabs(verts, tris, spec, layers=layers, vote=vote, xp=xp) if solid and len(tris) else None
    volume = new_volume("density", spec)
    count = 0
    nx, ny, _ = spec.shape
    for k0, k1, bits in slabs:
        cover = next(covers)[2] if covers is not None else None
        count += bitgrid.count(bits)
        part = GridSpec(spec.origin, spec.voxel_size, (nx, ny, k1 - k0))
        volume.add(k0, density(bits, part, cover))
        del bits, cover
    return count, volume


def volume_of_grid_split(soup, spec: GridSpec, mode: str, vote: bool, bits, layers: int, new_volume,
                         progress=None):
    """The Volume of the whole packed bit grid *bits*, z-slab by z-slab of *layers* rows
    into ``new_volume("density", spec)``: each slab's density from those rows of the grid
    and (solid modes) the coverage's slab, the values ``compute_group``'s ``density``
    gives them (the coverage does not depend on its slab size, ``coverage_slabs``)."""
    from .slabs import slab_ranges

    verts, tris = soup.vertices, soup.triangles
    nx, ny, nz = spec.shape
    solid = mode in ("solid", "solid+surface") and len(tris)
    covers = coverage_slabs(verts, tris, spec, layers=layers, vote=vote, xp=backend.xp(), progress=progress) \
        if solid else None
    volume = new_volume("density", spec)
    for k0, k1 in slab_ranges(nz, layers):
        cover = next(covers)[2] if covers is not None else None
        volume.add(k0, density(bits[k0:k1], GridSpec(spec.origin, spec.voxel_size, (nx, ny, k1 - k0)), cover))
        del cover
        if covers is None:
            report(progress, k1 / nz, "density")
    return volume


def volume_density(vertices, triangles, spec: GridSpec, mode: str, vote: bool, xp, progress=None):
    """float32 [k, j, i] density of one Bake Frames frame: the coverage for solid modes,
    else 1 at set voxels."""
    if mode in ("solid", "solid+surface"):
        return coverage(vertices, triangles, spec, vote=vote, xp=xp, progress=progress)
    grid = voxelize(vertices, triangles, spec, mode, xp=xp, progress=progress)
    trim_heap()  # the voxelization's freed temporaries must not stay under the density's peak
    return grid.dense().astype(np.float32)


def volume_density_split(soup, spec: GridSpec, mode: str, vote: bool, layers: int, xp, volume, progress=None):
    """``volume_density`` of one Bake Frames frame z-slab by z-slab into *volume*
    (``add(k0, density)``; the add-on's ``vdb_stream.SlabVolume``), returned: each slab is
    those rows of ``volume_density`` (the coverage's slabs, or the voxelization's slabs
    unpacked; both bit-identical to the unsplit grid, ``slabs.py``)."""
    verts, tris = soup.vertices, soup.triangles
    nx = spec.shape[0]
    if mode in ("solid", "solid+surface"):
        for k0, _k1, cover in coverage_slabs(verts, tris, spec, layers=layers, vote=vote, xp=xp, progress=progress):
            volume.add(k0, cover)
        return volume
    from .slabs import SplitMesh, voxelize_slabs

    if xp is np:
        slabs = voxelize_slabs(SplitMesh(verts, tris, spec), mode, layers, progress=progress)
    else:
        from .gpu_slabs import DeviceSplitMesh, voxelize_slabs_gpu

        slabs = voxelize_slabs_gpu(DeviceSplitMesh(verts, tris, spec), mode, layers, progress=progress)
    for k0, _k1, bits in slabs:
        volume.add(k0, bitgrid.unpack(np.asarray(backend.to_numpy(bits)), nx).astype(np.float32))
        del bits
    return volume
