"""Write kernel results into the Blender scene: point clouds, meshes and VDB volumes.

This is the only module that puts results into ``bpy`` data. It does no math: arrays
arrive finished (world metres, float32 / int32) and go in through the bulk attribute API
(``attributes[name].data.foreach_set`` on contiguous arrays), never through a Python loop
over elements. Every input is checked before the scene is touched, so a bad call leaves
the scene as it was.

Attribute arrays are mapped by shape and dtype:

    (N,) float → FLOAT     (N,) integer → INT     (N,) bool → BOOLEAN
    (N, 3) float → FLOAT_VECTOR                  (N, 4) float → FLOAT_COLOR

Volumes are written as ``.vdb`` files with Blender's own OpenVDB module
(``vdb_files.py``; ``write_vdb`` is re-exported here) and shown by Volume objects (single
files or frame sequences), which is render-safe: nothing edits data while a frame renders.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import bpy
import numpy as np

from ..kernels.errors import InputError, VoxFXError
from .vdb_files import (GRID_CLASSES, _background, _vdb_transform, _write_atomically,  # noqa: F401
                        openvdb_module, vdb_recorded_length, write_vdb)

# ---------------------------------------------------------------------------------------
# Attributes


_INT32 = np.iinfo(np.int32)


def attribute_layout(name: str, values, count: int):
    """(Blender data type, foreach field, flat contiguous array) for one attribute array."""
    values = np.asarray(values)
    if values.ndim == 0 or values.shape[0] != count:
        raise InputError(
            f"attribute {name!r} has shape {values.shape}, but the geometry has {count} elements"
        )
    tail = values.shape[1:]
    if values.dtype == np.bool_ and tail == ():
        return "BOOLEAN", "value", np.ascontiguousarray(values).ravel()
    if np.issubdtype(values.dtype, np.integer) and tail == ():
        if count and (values.min() < _INT32.min or values.max() > _INT32.max):
            raise InputError(
                f"attribute {name!r} has values outside the 32-bit integer range Blender stores"
            )
        return "INT", "value", np.ascontiguousarray(values, dtype=np.int32).ravel()
    if np.issubdtype(values.dtype, np.floating):
        kind = {
            (): ("FLOAT", "value"),
            (3,): ("FLOAT_VECTOR", "vector"),
            (4,): ("FLOAT_COLOR", "color"),
        }.get(tail)
        if kind:
            return kind[0], kind[1], np.ascontiguousarray(values, dtype=np.float32).ravel()
    raise InputError(
        f"attribute {name!r} has shape {values.shape} and dtype {values.dtype}; expected (N,) "
        "float, int or bool, (N, 3) float (vector) or (N, 4) float (colour)"
    )


def _attribute_layouts(arrays, count: int) -> dict:
    """Check every attribute up front (before the scene changes) and lay it out for Blender."""
    layouts = {}
    for name, values in (arrays or {}).items():
        if not name or name.startswith(".") or name == "position":
            raise InputError(
                f"attribute name {name!r} is reserved: positions are given separately and names "
                "starting with '.' belong to Blender"
            )
        layouts[name] = attribute_layout(name, values, count)
    return layouts


def _write_attributes(geometry, domain: str, layouts: dict):
    for name, (data_type, field, flat) in layouts.items():
        attribute = geometry.attributes.get(name)
        if attribute is not None and (attribute.data_type != data_type or attribute.domain != domain):
            geometry.attributes.remove(attribute)
            attribute = None
        if attribute is None:
            attribute = geometry.attributes.new(name, data_type, domain)
        attribute.data.foreach_set(field, flat)


def _positions(values, what: str) -> np.ndarray:
    """(N, 3) finite positions as a flat contiguous float32 array."""
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] != 3 or not np.issubdtype(values.dtype, np.number):
        raise InputError(f"{what} must be an (N, 3) array of numbers, not shape {values.shape}")
    values = np.ascontiguousarray(values, dtype=np.float32)
    if not np.isfinite(values).all():
        raise InputError(f"{what} contain NaN or infinite values")
    return values.ravel()


# ---------------------------------------------------------------------------------------
# Objects


def _existing_object(target, object_type: str):
    """The object *target* names (or is), None when there is none yet; a wrong type is an error."""
    obj = target if isinstance(target, bpy.types.Object) else bpy.data.objects.get(target)
    if obj is not None and obj.type != object_type:
        raise VoxFXError(
            f"object {obj.name!r} is of type {obj.type}, not {object_type}; "
            "rename it or choose another output name"
        )
    return obj


OUTPUT_TAG = "voxfx_output"  # custom property on every object VoxFX makes


def mark_output(obj):
    """Tag *obj* as made by VoxFX (so voxelizing 'everything' skips it); returns it."""
    obj[OUTPUT_TAG] = True
    return obj


def is_output(obj) -> bool:
    return bool(obj.get(OUTPUT_TAG)) or any(c.name.startswith("VoxFX ") for c in obj.users_collection)


def _new_object(name: str, data, collection):
    obj = mark_output(bpy.data.objects.new(name, data))
    _link(obj, collection)
    return obj


def _link(obj, collection):
    """Link *obj* into *collection* (the scene collection when None) unless it is there."""
    if collection is None:
        collection = bpy.context.scene.collection
    if obj.name not in collection.objects:
        collection.objects.link(obj)


def _swap_data(obj, new_data, datablocks):
    """Give *obj* new data, keeping its materials and data name; free the old data if unused."""
    old = obj.data
    for material in old.materials:
        new_data.materials.append(material)
    name = old.name
    obj.data = new_data
    if old.users == 0:
        datablocks.remove(old)
        new_data.name = name  # only free once the old block is gone, else Blender adds '.001'


# ---------------------------------------------------------------------------------------
# Point clouds


def write_point_cloud(target, positions, attributes=None, *, radius=None, collection=None):
    """Create or update the point cloud object *target* (a name or an object).

    *positions* is (N, 3) in object space; *attributes* maps names to per-point arrays;
    *radius* is one number or (N,) values (stored as the ``radius`` attribute). An existing
    object keeps its identity, materials and links even when N changes, and afterwards
    holds exactly the given attributes. New objects go to *collection* (default: the
    scene collection). Returns the object.
    """
    flat_positions = _positions(positions, "point positions")
    count = len(flat_positions) // 3
    arrays = dict(attributes or {})
    if radius is not None:
        if "radius" in arrays:
            raise InputError(
                "give the point radius either as radius= or as a 'radius' attribute, not both"
            )
        arrays["radius"] = np.broadcast_to(np.asarray(radius, dtype=np.float32), (count,))
    layouts = _attribute_layouts(arrays, count)

    obj = _existing_object(target, "POINTCLOUD")
    if obj is None:
        obj = _new_object(str(target), _sized_point_cloud(str(target), count), collection)
    else:
        if len(obj.data.points) != count:
            _swap_data(obj, _sized_point_cloud(obj.data.name, count), bpy.data.pointclouds)
        if collection is not None:
            _link(obj, collection)
    cloud = obj.data
    _remove_attributes_except(cloud, set(layouts) | {"position"})
    cloud.attributes["position"].data.foreach_set("vector", flat_positions)
    _write_attributes(cloud, "POINT", layouts)
    cloud.update_tag()
    return obj


def _remove_attributes_except(geometry, keep: set):
    for name in [a.name for a in geometry.attributes if a.name not in keep]:
        geometry.attributes.remove(geometry.attributes[name])


# bpy 5.2.3 sizes a point cloud with PointCloud.resize(); bpy 5.0.1 and 4.5 have no such
# call and go through the Convert operator, which refuses while any object is in Edit Mode.
POINT_CLOUD_RESIZE = "resize" in bpy.types.PointCloud.bl_rna.functions


def _sized_point_cloud(name: str, count: int):
    """A new point cloud datablock with *count* points (positions not yet set)."""
    if POINT_CLOUD_RESIZE:
        cloud = bpy.data.pointclouds.new(name)
        cloud.resize(count)
        return cloud
    return _point_cloud_from_loose_vertices(name, count)


def _point_cloud_from_loose_vertices(name: str, count: int):
    """bpy 5.0.1 has no call that sizes a point cloud, so convert a mesh of loose vertices.

    Adding the vertices is one allocation and the conversion copies arrays (about 3–13 ms
    for 1M points, measured); the carrier object and mesh are removed so nothing leaks.
    """
    mesh = bpy.data.meshes.new(name)
    mesh.vertices.add(count)
    carrier = bpy.data.objects.new(name, mesh)
    # The operator only sees objects in the view layer.
    bpy.context.scene.collection.objects.link(carrier)
    try:
        with bpy.context.temp_override(
            active_object=carrier,
            object=carrier,
            selected_objects=[carrier],
            selected_editable_objects=[carrier],
        ):
            result = bpy.ops.object.convert(target="POINTCLOUD")
        cloud = carrier.data if carrier.type == "POINTCLOUD" else None
    except RuntimeError:  # the operator refused to run: it does not while any object is in Edit Mode
        result, cloud = None, None
    finally:
        bpy.data.objects.remove(carrier)
        if mesh.users == 0:
            bpy.data.meshes.remove(mesh)
    if result != {"FINISHED"} or cloud is None or len(cloud.points) != count:
        raise VoxFXError(
            f"Blender could not create a point cloud of {count} points for {name!r}; "
            "if an object is in Edit Mode, switch to Object Mode and try again"
        )
    return cloud


# ---------------------------------------------------------------------------------------
# Meshes


def write_mesh(
    target,
    vertices,
    faces,
    *,
    face_sizes=None,
    point_attributes=None,
    face_attributes=None,
    material_indices=None,
    collection=None,
):
    """Create or rebuild the mesh object *target* (a name or an object).

    *faces* is (F, k) vertex indices for faces of k corners (triangles, quads), or the
    flat corner list of all faces with *face_sizes* (F,) giving each face's corner count.
    *point_attributes* / *face_attributes* map names to per-vertex / per-face arrays;
    *material_indices* (F,) picks each face's material slot. An existing object keeps its
    mesh datablock and materials; its geometry and attributes are replaced. Returns the
    object.
    """
    flat_vertices = _positions(vertices, "mesh vertices")
    vertex_count = len(flat_vertices) // 3
    corners, starts = _face_corners(faces, face_sizes, vertex_count)
    face_count = len(starts)
    point_layouts = _attribute_layouts(point_attributes, vertex_count)
    face_arrays = dict(face_attributes or {})
    if material_indices is not None:
        face_arrays["material_index"] = _material_indices(material_indices)
    face_layouts = _attribute_layouts(face_arrays, face_count)

    obj = _existing_object(target, "MESH")
    if obj is None:
        obj = _new_object(str(target), bpy.data.meshes.new(str(target)), collection)
    else:
        _refuse_edit_mode(obj.data)
        if collection is not None:
            _link(obj, collection)
    mesh = obj.data
    mesh.clear_geometry()
    mesh.vertices.add(vertex_count)
    mesh.loops.add(len(corners))
    mesh.polygons.add(face_count)
    mesh.attributes["position"].data.foreach_set("vector", flat_vertices)
    _set_corner_vertices(mesh, corners)
    mesh.polygons.foreach_set("loop_start", starts)
    mesh.update(calc_edges=True)
    _write_attributes(mesh, "POINT", point_layouts)
    _write_attributes(mesh, "FACE", face_layouts)
    return obj


def _face_corners(faces, face_sizes, vertex_count: int):
    """(corner vertex indices, first corner of each face) as contiguous int32 arrays."""
    faces = np.asarray(faces)
    if faces.size and not np.issubdtype(faces.dtype, np.integer):
        raise InputError(f"mesh faces must be integer vertex indices, not {faces.dtype}")
    if face_sizes is None:
        if faces.ndim != 2 or (faces.size and faces.shape[1] < 3):
            raise InputError(
                f"mesh faces must be (F, k) with k ≥ 3 corners, or a flat corner list with "
                f"face_sizes; got shape {faces.shape}"
            )
        sizes = np.full(faces.shape[0], faces.shape[1], dtype=np.int64)
    else:
        sizes = np.asarray(face_sizes, dtype=np.int64).ravel()
        if len(sizes) and sizes.min() < 3:
            raise InputError("every mesh face needs at least 3 corners")
        if int(sizes.sum()) != faces.size:
            raise InputError(
                f"face_sizes add up to {int(sizes.sum())} corners, but {faces.size} were given"
            )
    corners = np.ascontiguousarray(faces, dtype=np.int32).ravel()
    if len(corners) and (corners.min() < 0 or corners.max() >= vertex_count):
        raise InputError(f"mesh faces use vertex indices outside 0..{vertex_count - 1}")
    starts = np.zeros(len(sizes), dtype=np.int32)
    np.cumsum(sizes[:-1], out=starts[1:])
    return corners, starts


def _material_indices(values):
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer) or (values.size and values.min() < 0):
        raise InputError("material indices must be non-negative integers (material slot numbers)")
    return values


def _set_corner_vertices(mesh, corners):
    # Writing the corner→vertex attribute directly is far faster than going through
    # MeshLoop.vertex_index (measured 0.5 vs 75–100 ms for 1M corners); the loop path
    # stays as the fallback should Blender rename its internal attribute.
    corner_vert = mesh.attributes.get(".corner_vert")
    if corner_vert is not None and corner_vert.data_type == "INT":
        corner_vert.data.foreach_set("value", corners)
    else:
        mesh.loops.foreach_set("vertex_index", corners)


def _refuse_edit_mode(mesh):
    # Edit Mode keeps its own copy of the mesh and writes it back on exit, which would
    # silently undo anything written here.
    if mesh.is_editmode:
        raise VoxFXError(f"mesh {mesh.name!r} is in Edit Mode; switch to Object Mode and try again")


def set_mesh_positions(target, positions):
    """Move the vertices of an existing mesh (an object or mesh) to *positions* (V, 3).

    Used for displacement: topology, attributes and materials stay as they are.
    """
    mesh = target.data if isinstance(target, bpy.types.Object) else target
    if not isinstance(mesh, bpy.types.Mesh):
        raise VoxFXError(
            f"{getattr(target, 'name', target)!r} is not a mesh, so its vertices cannot be moved"
        )
    positions = np.asarray(positions)
    vertex_count = len(mesh.vertices)
    if positions.ndim != 2 or positions.shape != (vertex_count, 3):
        raise InputError(
            f"mesh {mesh.name!r} has {vertex_count} vertices, but new positions of shape "
            f"{positions.shape} were given (expected ({vertex_count}, 3)); was the mesh changed "
            "since it was read?"
        )
    flat = _positions(positions, f"new positions for mesh {mesh.name!r}")
    _refuse_edit_mode(mesh)
    mesh.attributes["position"].data.foreach_set("vector", flat)
    mesh.update()


# ---------------------------------------------------------------------------------------
# Volume objects


def vdb_frame_path(folder, stem: str, frame: int, digits: int = 4) -> Path:
    """The file of *frame* in a sequence: ``folder/stem_0001.vdb`` (digits right before the
    extension, as Blender's sequence loader expects)."""
    return Path(folder) / f"{stem}_{int(frame):0{digits}d}.vdb"


SEQUENCE_MODES = ("CLIP", "EXTEND", "REPEAT", "PING_PONG")


def load_volume(name, filepath, *, sequence_frames=None, sequence_mode="CLIP", collection=None):
    """Create or update the Volume object *name* showing the ``.vdb`` file *filepath*.

    For a frame sequence, *filepath* is the file shown at the first frame and
    *sequence_frames* is (first scene frame, number of files); later files are found by
    the frame number right before the extension (``smoke_0001.vdb``). *sequence_mode*
    says what shows outside the range (CLIP: nothing). Paths are stored relative to the
    .blend file once it is saved, so a bake folder can move with it. Returns the object.

    Blender caches each VDB file by path for the whole session (grid list, transforms and
    trees; measured in bpy 5.0.1: re-assigning the path, ``grids.unload()`` and depsgraph
    updates all keep the old data), so a file rewritten in place is not seen again:
    write a re-bake under new file names.
    """
    # bpy.path.abspath resolves '//' paths (relative to the .blend file).
    filepath = Path(os.path.abspath(bpy.path.abspath(str(filepath))))
    if not filepath.is_file():
        raise VoxFXError(f"cannot load volume {name!r}: {filepath} does not exist")
    sequence = _sequence_settings(filepath, sequence_frames, sequence_mode)

    obj = _existing_object(name, "VOLUME")
    if obj is None:
        obj = _new_object(str(name), bpy.data.volumes.new(str(name)), collection)
    elif collection is not None:
        _link(obj, collection)
    volume = obj.data
    volume.is_sequence = sequence is not None
    if sequence is not None:
        volume.frame_start, volume.frame_duration, volume.frame_offset, volume.sequence_mode = sequence
    volume.filepath = _blend_relative(filepath)
    return obj


def _sequence_settings(filepath: Path, sequence_frames, sequence_mode):
    """(frame_start, frame_duration, frame_offset, sequence_mode) or None for a single file."""
    if sequence_frames is None:
        return None
    frame_start, count = (int(v) for v in sequence_frames)
    if count < 1:
        raise InputError(f"a volume sequence needs at least one file, not {count}")
    if sequence_mode not in SEQUENCE_MODES:
        raise InputError(f"sequence mode must be one of {SEQUENCE_MODES}, not {sequence_mode!r}")
    number = re.search(r"(\d+)$", filepath.stem)
    if number is None:
        raise InputError(
            f"{filepath.name} has no frame number right before its extension (e.g. smoke_0001.vdb), "
            "so Blender cannot find the other files of the sequence"
        )
    # Blender shows file number (scene frame - frame_start + 1 + frame_offset).
    return frame_start, count, int(number.group(1)) - 1, sequence_mode


def _blend_relative(filepath: Path) -> str:
    if not bpy.data.is_saved:
        return str(filepath)
    try:
        return bpy.path.relpath(str(filepath))
    except ValueError:  # another drive (Windows): a relative path is impossible
        return str(filepath)


def ensure_collection(name: str):
    """The collection *name*, created and linked under the scene's collection if needed."""
    coll = bpy.data.collections.get(name)
    if coll is None:
        coll = bpy.data.collections.new(name)
    if coll.name not in bpy.context.scene.collection.children:
        bpy.context.scene.collection.children.link(coll)
    return coll
