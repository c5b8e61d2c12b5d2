"""MagicaVoxel ``.vox`` → a block mesh or a point cloud in the scene.

    obj = import_vox(path, voxel_size=0.1, as_points=False, greedy=True)

The file is read by ``kernels/voxfile.py`` (every length, size and nesting checked: the
file is untrusted), its models placed by the scene graph into one set of world voxels
(MagicaVoxel's x, y, z are Blender's: both are z-up), and written as

* **Block Mesh** (default): the outside faces of the voxels, merged into rectangles of one
  colour (``greedy``; else one quad per voxel face), with a face ``color`` attribute and
  ``vox_index`` (the palette index) and the ``VoxFX Voxel Color`` material, which shows
  ``color``. Colour indices whose ``MATL`` is metal, glass or emissive get a material of
  that kind instead (roughness, metalness, transmission and emission from the chunk);
* **Point Cloud**: a point per voxel at its centre with ``color``, ``vox_index`` and a
  radius of half a voxel.

Palette colours are sRGB bytes (what MagicaVoxel shows); ``color`` is Blender's linear
value of them. Voxel (x, y, z) has its minimum corner at (x, y, z) × voxel size, so a
file written by VoxFX's exporter comes back on its grid's voxel coordinates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..kernels.errors import InputError
from ..kernels.grid import GridSpec, bitgrid
from ..kernels.voxelize.blocks import exterior_faces
from ..kernels.voxelize.greedy import greedy_faces
from ..kernels.voxelize.palette import srgb_to_linear
from ..kernels.voxfile import read_vox

MAX_GRID_BYTES = 4 << 30  # packed bit grid of the scene's bounding box, for the block mesh
_SPECIAL = ("_metal", "_glass", "_emit")


@dataclass
class ImportArrays:
    """What goes into the scene, before any bpy call."""

    name: str
    voxel_count: int
    positions: np.ndarray = None  # points: (N, 3) centres; mesh: (V, 3) vertices
    quads: np.ndarray = None  # mesh only: (Q, 4)
    color: np.ndarray = None  # (N or Q, 4) float32 linear
    vox_index: np.ndarray = None  # (N or Q,) int32 palette index 1..255
    material_slot: np.ndarray = None  # mesh only: (Q,) slot, 0 = plain colour
    slot_materials: list = field(default_factory=list)  # per slot ≥ 1: MATL properties
    faces_before: int = 0
    radius: float = 0.0


def import_arrays(path, *, voxel_size: float = 0.1, as_points: bool = False, greedy: bool = True) -> ImportArrays:
    """Read and convert a .vox file to arrays (no bpy: may run on a worker thread)."""
    if not voxel_size > 0:
        raise InputError(f"Voxel size must be positive, not {voxel_size}")
    path = Path(os.fspath(path))
    scene = read_vox(path)
    ijk, index = scene.voxels()
    out = ImportArrays(path.stem or "vox", len(ijk), radius=0.5 * voxel_size)
    if len(ijk) == 0:
        raise InputError(f"'{path.name}' holds no voxels")
    rgba = scene.palette[index.astype(np.int64) - 1].astype(np.float64) / 255.0
    rgba[:, :3] = srgb_to_linear(rgba[:, :3])
    rgba = rgba.astype(np.float32)
    if as_points:
        out.positions = ((ijk + 0.5) * voxel_size).astype(np.float32)
        out.color, out.vox_index = rgba, index.astype(np.int32)
        return out

    lo = ijk.min(axis=0)
    shape = tuple(int(s) for s in ijk.max(axis=0) - lo + 1)
    spec = GridSpec(tuple(float(v) for v in lo * voxel_size), float(voxel_size), shape)
    if bitgrid.nbytes(shape) > MAX_GRID_BYTES:
        raise InputError(f"'{path.name}' spans {'×'.join(map(str, shape))} voxels, too large for a block mesh: "
                         "import it as a point cloud")
    local = ijk - lo
    linear = (local[:, 2] * shape[1] + local[:, 1]) * shape[0] + local[:, 0]
    order = np.argsort(linear)  # the block mesh indexes voxels in linear (k, j, i) order
    local, index, rgba = local[order], index[order], rgba[order]
    bits = _pack(local, shape)
    if greedy:
        mesh = greedy_faces(bits, spec, labels=index.astype(np.int64))
        voxel, out.faces_before = mesh.voxel_of_quad, mesh.faces_before
        out.quads = mesh.quads
    else:
        mesh = exterior_faces(bits, spec)
        voxel, out.faces_before = mesh.voxel_of_face, mesh.face_count
        out.quads = mesh.quads
    out.positions = mesh.vertices
    out.color, out.vox_index = rgba[voxel], index[voxel].astype(np.int32)
    out.material_slot, out.slot_materials = _material_slots(scene.materials, out.vox_index)
    return out


def _pack(local, shape):
    """Packed bit grid (``bitgrid`` layout) of distinct voxels *local* (N, 3) over *shape*."""
    nx, ny, nz = shape
    wx = bitgrid.words_along_x(nx)
    words = np.zeros((nz, ny, wx), np.uint32)
    word = (local[:, 2] * ny + local[:, 1]) * wx + local[:, 0] // 32
    bit = (local[:, 0] % 32).astype(np.int64)
    unique, inverse = np.unique(word, return_inverse=True)
    # distinct voxels set distinct bits of a word, so their sum is their OR (exact in float64)
    words.reshape(-1)[unique] = np.bincount(inverse.ravel(), weights=np.ldexp(1.0, bit)).astype(np.uint32)
    return words


def _material_slots(materials: dict, vox_index):
    """(slot per face (0: plain colour), MATL properties per slot ≥ 1) for the colour
    indices whose material is metal, glass or emissive; equal properties share a slot."""
    slot_of_index = np.zeros(256, np.int32)
    slots, seen = [], {}
    for i in np.unique(vox_index).tolist():
        props = materials.get(i)
        if not props or props.get("_type") not in _SPECIAL:
            continue
        key = tuple(sorted(props.items()))
        if key not in seen:
            slots.append(dict(props))
            seen[key] = len(slots)
        slot_of_index[i] = seen[key]
    return slot_of_index[vox_index], slots


def import_vox(path, *, voxel_size: float = 0.1, as_points: bool = False, greedy: bool = True, collection=None):
    """Import a .vox file as a new object in *collection* (default: the active one)."""
    arrays = import_arrays(path, voxel_size=voxel_size, as_points=as_points, greedy=greedy)
    return write_import(arrays, collection=collection)


def write_import(arrays: ImportArrays, collection=None):
    """Put *arrays* into the scene as a new object (main thread); returns it."""
    import bpy

    from . import materials, writeback

    collection = collection or bpy.context.collection
    name = _free_name(arrays.name)
    attrs = {"color": arrays.color, "vox_index": arrays.vox_index}
    if arrays.quads is None:
        obj = writeback.write_point_cloud(name, arrays.positions, attrs, radius=arrays.radius, collection=collection)
        obj.data.materials.append(materials.voxel_color())
        return obj
    obj = writeback.write_mesh(name, arrays.positions, arrays.quads, face_attributes=attrs,
                               material_indices=arrays.material_slot if arrays.slot_materials else None,
                               collection=collection)
    obj.data.materials.append(materials.voxel_color())
    for props in arrays.slot_materials:
        obj.data.materials.append(_matl_material(props))
    return obj


def _free_name(stem: str) -> str:
    """*stem*, or *stem*.001 … when an object of that name exists: an import never
    replaces an object."""
    import bpy

    if stem not in bpy.data.objects:
        return stem
    n = 1
    while f"{stem}.{n:03d}" in bpy.data.objects:
        n += 1
    return f"{stem}.{n:03d}"


def _number(props, key, default):
    try:
        return float(props.get(key, default))
    except ValueError:
        return default


def _matl_material(props: dict):
    """A node material for a MATL chunk: the voxel colour (``color``) as Base Color, and
    roughness, metalness, transmission or emission as the chunk gives them."""
    import bpy

    kind = props.get("_type", "_diffuse")
    rough = min(max(_number(props, "_rough", 0.5), 0.0), 1.0)
    name = f"VoxFX .vox {kind[1:]} " + " ".join(f"{k[1:]}={v}" for k, v in sorted(props.items()) if k != "_type")
    mat = bpy.data.materials.get(name[:63])
    if mat is not None:
        return mat
    mat = bpy.data.materials.new(name[:63])
    if mat.node_tree is None:  # Blender < 5.0 creates materials without nodes
        mat.use_nodes = True
    nodes, links = mat.node_tree.nodes, mat.node_tree.links
    bsdf = next(n for n in nodes if n.type == "BSDF_PRINCIPLED")
    color = nodes.new("ShaderNodeAttribute")
    color.attribute_name = "color"
    links.new(color.outputs["Color"], bsdf.inputs["Base Color"])
    bsdf.inputs["Roughness"].default_value = rough
    if kind == "_metal":
        bsdf.inputs["Metallic"].default_value = min(max(_number(props, "_metal", 1.0), 0.0), 1.0)
    elif kind == "_glass":
        socket = bsdf.inputs.get("Transmission Weight") or bsdf.inputs.get("Transmission")
        socket.default_value = min(max(_number(props, "_trans", 1.0), 0.0), 1.0)
    elif kind == "_emit":
        links.new(color.outputs["Color"], bsdf.inputs["Emission Color"])
        # MagicaVoxel: emission 0..1 times a power of ten set by "flux"
        strength = _number(props, "_emit", 1.0) * 10.0 ** _number(props, "_flux", 0.0)
        bsdf.inputs["Emission Strength"].default_value = max(strength, 0.0)
    return mat
