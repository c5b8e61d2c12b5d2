"""Voxelize's outputs into the scene and files, on the main thread once every group is
voxelized (``operators.voxelize``): the point cloud, the density volume, the block mesh
and the MagicaVoxel file of each group, with the selection's materials."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np

from ..kernels.errors import InputError, VoxFXError
from ..kernels.grid import GridSpec
from ..kernels.voxelize.outputs import GroupArrays, default_material_table
from . import materials, voxel_art, writeback
from .cache import CacheError, explain, resolve_folder
from .vox_export import write_vox_slabs

COLLECTION = "VoxFX Voxels"


@dataclass
class Result:
    name: str
    spec: GridSpec
    count: int
    objects: list = field(default_factory=list)
    files: list = field(default_factory=list)


def _write_group(base, soup, spec, arrays: GroupArrays, request, art=None) -> Result:
    """Write one group's outputs into the scene and files (main thread)."""
    result = Result(base, spec, arrays.count)
    if arrays.count == 0:
        return result
    ijk, material = arrays.ijk, arrays.material
    if "points" in request.outputs:
        # Cycles draws a point cloud with its first material only (5.0 ignores material_index),
        # so points carry their source's colour, and a selection of several materials gets a
        # first material that shows it (VoxFX Voxel Color); indices shift by one to match.
        several = soup is not None and (len(set(np.unique(material).tolist())) > 1 or
                                        (len(soup.materials) > 0 and (material < 0).any()))
        attrs = {"material_index": material + 1 if several else material, "coverage": arrays.coverage,
                 "color": arrays.rgba}
        obj = writeback.write_point_cloud(f"{base}_voxels", spec.centers(ijk), attrs,
                                          radius=np.full(len(ijk), 0.5 * spec.voxel_size, np.float32),
                                          collection=_collection())
        _copy_materials(soup, obj, first=materials.voxel_color() if several else None)
        if art is not None:
            voxel_art.show_colors(obj, art)  # issue 15
        result.objects.append(obj.name)
    if "volume" in request.outputs:
        path = _write_volume(resolve_folder(request.cache_dir) / "voxelize", _safe(base), arrays.dense, spec,
                             volume=arrays.volume)
        arrays.dense = arrays.volume = None
        obj = writeback.load_volume(f"{base}_volume", str(path), collection=_collection())
        if not obj.data.materials:
            obj.data.materials.append(materials.volume())
        result.objects.append(obj.name)
        result.files.append(str(path))
    if "blocks" in request.outputs or "vox" in request.outputs:
        _block_outputs(base, arrays, spec, soup, request, result, art)
    return result


def _write_volume(folder: Path, stem: str, dense, spec, volume=None) -> Path:
    """Write this result's density VDB and remove the ones earlier runs wrote for it.

    Blender caches a VDB by path for the whole session, so each run needs a new name
    (``<stem>_<run>.vdb``); the older files of the same stem are then deleted, so the
    folder holds one volume per result, and Free (``cache_free`` of ``voxelize``)
    removes it.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheError(explain(e, folder)) from e
    pattern = re.compile(rf"{re.escape(stem)}_(\d+)\.vdb")
    older = [e for e in os.scandir(folder) if pattern.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
    run = max([int(pattern.fullmatch(e.name).group(1)) for e in older] + [int(time.time() * 1000)]) + 1
    path = folder / f"{stem}_{run}.vdb"
    try:
        if volume is not None:  # a tree built slab by slab (vdb_stream.SlabVolume)
            volume.write(path)
        else:
            writeback.write_vdb(path, {"density": dense}, spec)
    except VoxFXError as e:
        if isinstance(e.__cause__, OSError):
            raise CacheError(explain(e.__cause__, folder)) from e
        raise
    for entry in older:
        os.unlink(entry.path)
    return path


def _block_outputs(base, arrays: GroupArrays, spec, soup, request, result, art=None):
    if "blocks" in request.outputs:
        blocks = arrays.blocks
        face_material = getattr(arrays, "face_material", None)  # split jobs carry it per face (sparse: none)
        if face_material is None:
            face_material = np.maximum(arrays.material[blocks.voxel_of_face], 0)
        obj = writeback.write_mesh(f"{base}_blocks", blocks.vertices, blocks.quads,
                                   material_indices=face_material, collection=_collection(),
                                   face_attributes=voxel_art.face_attributes(arrays))  # issue 15: face colour
        _copy_materials(soup, obj)
        if art is not None:
            voxel_art.show_colors(obj, art)  # issue 15
        result.objects.append(obj.name)
    if "vox" in request.outputs:
        from .vox_export import finish_vox

        path = _vox_path(base, request)
        if getattr(arrays, "vox_file", None) is not None:  # written slab by slab (issue 21): put in place
            finish_vox(arrays.vox_file, path)
        else:
            voxel_art.write_vox(path, arrays, spec)  # issue 15: the palette of voxel_art.apply
        result.files.append(str(path))


def _vox_writer(path, spec, temporaries):
    """``slab_outputs``' *write_vox*: the .vox file into a temporary beside *path*, listed
    in *temporaries* (renamed when the outputs are written, else removed)."""
    def write(per_tile, owner_counts, owner_colors, slabs, palette=None):
        temporaries.append(write_vox_slabs(path, spec.shape, per_tile, owner_counts, owner_colors, slabs,
                                           palette=palette))
        return temporaries[-1]
    return write


def _vox_path(base, request) -> Path:
    path = vox_output_path(request.vox_path)
    if not request.combine:
        path = path.with_name(f"{path.stem}_{_safe(base)}{path.suffix}")
    return path


def vox_output_path(text: str) -> Path:
    """The absolute .vox path for the setting *text*; '//' needs a saved .blend."""
    if not text:
        raise InputError("Set a .vox file path to export MagicaVoxel")
    if text.startswith("//") and not bpy.data.filepath:
        raise InputError(f"The .vox path '{text}' is relative to the .blend file, which is not saved yet: "
                         "save the file or choose an absolute path")
    return Path(os.path.abspath(bpy.path.abspath(text)))


def _material_table(soup):
    """RGBA per material of the selection (``materials.surface_color``), then Blender's
    default grey for voxels without one: read from ``bpy`` on the main thread."""
    table = default_material_table(soup)
    if soup:
        for i, name in enumerate(soup.materials):
            mat = bpy.data.materials.get(name)
            if mat is not None:
                table[i] = materials.surface_color(mat)
    return table


def _copy_materials(soup, obj, first=None):
    """Give *obj* the selection's material slots (after *first*, if given), keeping its
    per-face material indices (Blender drops a mesh's ``material_index`` attribute when its
    slots are cleared)."""
    if soup is None:
        return
    data = obj.data
    kept = data.attributes.get("material_index") if isinstance(data, bpy.types.Mesh) else None
    saved = None
    if kept is not None:
        saved = np.empty(len(kept.data), np.int32)
        kept.data.foreach_get("value", saved)
    data.materials.clear()
    if first is not None:
        data.materials.append(first)
    for name in soup.materials:
        data.materials.append(bpy.data.materials.get(name))
    if saved is not None:
        attr = data.attributes.get("material_index") or data.attributes.new("material_index", "INT", "FACE")
        attr.data.foreach_set("value", saved)


def _collection():
    return writeback.ensure_collection(COLLECTION)


def _safe(name: str) -> str:
    """*name* as a file name part: ASCII letters, digits, '-', '_', '.'; starts with a
    letter or digit (cache names must)."""
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in name)
    return safe if safe[:1].isalnum() else f"v{safe}"
