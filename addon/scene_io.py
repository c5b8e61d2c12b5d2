"""Evaluated scene geometry → arrays for the kernels (world metres, float32 / int32).

Objects are read through the depsgraph, so modifiers are applied and curves, surfaces,
text and metaballs arrive as meshes. Every array is filled with ``foreach_get`` straight
into a preallocated NumPy buffer of the dtype Blender stores (float32 positions and
colours, int32 indices): no Python loop runs per vertex or per triangle, and Blender
never converts element by element. Loops here run once per *object*.

Loop triangles need no ``calc_loop_triangles()``: Blender (4.5+, the manifest's minimum)
keeps them as a cache filled on first read, shared with the original mesh while nothing
changes them.
Instances (collection instances, particles, Geometry Nodes instances that are not
realized) are not read: only each object's own evaluated mesh.

Fast paths matter: ``attributes["position"]``, ``attributes[".corner_vert"]`` and
``loop_triangle_polygons`` are copied as raw memory, while ``mesh.vertices`` (``co``)
and ``mesh.loops`` go through RNA item by item (~30x slower on a million elements).
``loop_triangles.foreach_get("loops")`` has no raw path; it is the dominant cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..kernels.errors import BadGeometryError, InputError

# Object types that Blender evaluates to a mesh without help. Any other type qualifies
# only through its modifiers (e.g. Geometry Nodes that output a mesh).
GEOMETRY_TYPES = frozenset({"MESH", "CURVE", "SURFACE", "FONT", "META"})

NO_MATERIAL = -1  # material_index of triangles whose slot is empty (or no slots at all)
_NO_SLOTS = np.array([NO_MATERIAL], dtype=np.int32)

# Objects without an active colour attribute get white, the neutral factor, so a soup
# mixing coloured and plain objects still has one colour per corner.
WHITE = np.ones(4, dtype=np.float32)

_WHAT_TO_SELECT = "Select a mesh, curve, surface, text or metaball object with faces."


@dataclass
class GeometrySelection:
    """Objects that evaluate to faces, and the others with the reason they were left out."""

    objects: list  # original bpy.types.Object, in input order
    skipped: dict[str, str]  # object name → why it has no geometry (for a warning)


@dataclass
class TriangleSoup:
    """Triangles of several objects in world space, concatenated.

    Triangles are wound counter-clockwise seen from outside (outward normal by the right
    hand rule), also for mirrored objects.
    """

    vertices: np.ndarray  # float32 (V, 3), world metres
    triangles: np.ndarray  # int32 (T, 3), rows index `vertices`
    material_index: np.ndarray  # int32 (T,), index into `materials`, NO_MATERIAL if none
    materials: list[str]  # material names, each once, in order of first use
    object_index: np.ndarray  # int32 (T,), index into `object_names`
    object_names: list[str]
    object_slots: list[np.ndarray]  # per object: int32 (slots,) → index into `materials`
    corner_colors: np.ndarray | None  # float32 (T, 3, 4) scene-linear RGBA, or None
    bounds: tuple[np.ndarray, np.ndarray]  # float32 (3,) min and max of `vertices`
    skipped: dict[str, str]  # object name → why it was left out
    colored_objects: list[bool] | None = None  # per object: had a colour attribute (else white corners)


@dataclass
class _Source:
    """One object's evaluated mesh, held until the arrays are copied out."""

    obj: object  # original object: its name is what the user knows
    evaluated: object  # evaluated object: animated matrix, evaluated material slots
    mesh: object  # evaluated mesh (Object.data, or a to_mesh() copy)
    owns_mesh: bool  # made by to_mesh(): must be released with to_mesh_clear()

    @property
    def vertex_count(self) -> int:
        return len(self.mesh.vertices)

    @property
    def triangle_count(self) -> int:
        return len(self.mesh.loop_triangles)


# ---------------------------------------------------------------------------------------
# Selection


def may_have_geometry(obj) -> bool:
    """Cheap test for poll(): can this object evaluate to a mesh at all?"""
    return obj.type in GEOMETRY_TYPES or len(obj.modifiers) > 0


def selected_geometry(context) -> GeometrySelection:
    """The selected objects that have faces (see `geometry_objects`)."""
    return geometry_objects(context.selected_objects, context.evaluated_depsgraph_get())


def geometry_objects(objects, depsgraph) -> GeometrySelection:
    """Keep the objects that evaluate to a mesh with faces; name the others.

    Raises InputError when none is left, listing what was given. This evaluates (and
    converts non-mesh objects once); an operator that extracts anyway can call
    `extract_triangles` alone and warn with its ``skipped``.
    """
    sources, skipped = _evaluate_all(objects, depsgraph)
    _release(sources)
    _require_geometry(sources, skipped)
    return GeometrySelection([source.obj for source in sources], skipped)


def _require_geometry(sources, skipped) -> None:
    if sources:
        return
    if not skipped:
        raise InputError(f"No object selected. {_WHAT_TO_SELECT}")
    names = ", ".join(skipped)
    raise InputError(f"No selected object has geometry: {names}. {_WHAT_TO_SELECT}")


def _evaluate_all(objects, depsgraph):
    sources, skipped = [], {}
    try:
        for obj in objects:
            source, reason = _evaluate(obj, depsgraph)
            if source is None:
                skipped[obj.name] = reason
            else:
                sources.append(source)
    except BaseException:
        _release(sources)
        raise
    return sources, skipped


def _evaluate(obj, depsgraph):
    """(source, None) for an object with faces, else (None, reason)."""
    no_geometry = f"no geometry ({obj.type.lower().replace('_', ' ')})"
    if not may_have_geometry(obj):
        return None, no_geometry
    evaluated = obj.evaluated_get(depsgraph)
    if not evaluated.is_evaluated:  # evaluated_get() hands back the original object
        return None, "not in the view layer (excluded, or disabled in viewports)"
    source = _evaluated_mesh(obj, evaluated)
    if source is None:
        return None, no_geometry
    if len(source.mesh.polygons) == 0:
        _release([source])
        return None, "no faces (an empty mesh, or a curve without extrude or bevel)"
    return source, None


def _evaluated_mesh(obj, evaluated):
    # A mesh object's evaluated data already is the modified mesh: reading it directly
    # saves a copy of the whole mesh. Other types are converted by to_mesh().
    if obj.type == "MESH":
        return _Source(obj, evaluated, evaluated.data, owns_mesh=False)
    try:
        mesh = evaluated.to_mesh()
    except RuntimeError:  # a lattice or Grease Pencil with modifiers: no mesh to make
        return None
    if mesh is None:
        return None
    return _Source(obj, evaluated, mesh, owns_mesh=True)


def _release(sources) -> None:
    for source in sources:
        if source.owns_mesh:
            source.evaluated.to_mesh_clear()
            source.owns_mesh = False


# ---------------------------------------------------------------------------------------
# Extraction


def extract_triangles(objects, depsgraph, *, with_colors=False, frame=None) -> TriangleSoup:
    """Triangles of the objects that have geometry, in world space.

    ``frame`` (float allowed for sub-frames) moves the scene there first with
    ``frame_set``, which re-evaluates the view layer's depsgraph: pass the one from
    ``context.evaluated_depsgraph_get()``. Objects without faces are reported in
    ``skipped``; InputError if none is left or a vertex is NaN/inf.
    """
    if frame is not None:
        _move_to_frame(depsgraph.scene, frame)
    sources, skipped = _evaluate_all(objects, depsgraph)
    try:
        _require_geometry(sources, skipped)
        return _read_sources(sources, skipped, with_colors)
    finally:
        _release(sources)


def _move_to_frame(scene, frame) -> None:
    whole = math.floor(frame)
    scene.frame_set(int(whole), subframe=float(frame - whole))


def _read_sources(sources, skipped, with_colors) -> TriangleSoup:
    vertex_starts = _starts([source.vertex_count for source in sources])
    triangle_starts = _starts([source.triangle_count for source in sources])
    vertex_total, triangle_total = int(vertex_starts[-1]), int(triangle_starts[-1])
    _check_index_range(vertex_total, triangle_total)

    vertices = np.empty((vertex_total, 3), dtype=np.float32)
    triangles = np.empty((triangle_total, 3), dtype=np.int32)
    material_index = np.empty(triangle_total, dtype=np.int32)
    object_index = np.empty(triangle_total, dtype=np.int32)
    corner_colors = np.empty((triangle_total, 3, 4), dtype=np.float32) if with_colors else None
    materials: dict[str, int] = {}
    object_slots = []
    colored: list[bool] = []

    for i, source in enumerate(sources):
        v = slice(vertex_starts[i], vertex_starts[i + 1])
        t = slice(triangle_starts[i], triangle_starts[i + 1])
        _read_world_vertices(source, vertices[v])
        corners = _read_triangle_corners(source.mesh, flip=_is_mirrored(source.evaluated))
        corner_verts = _read_corner_verts(source.mesh)
        np.add(corner_verts[corners], vertex_starts[i], out=triangles[t])
        slots = _slot_table(source.evaluated, materials)
        object_slots.append(slots)
        # An object without slots has no material: one pseudo-slot keeps the look-up uniform.
        lookup = slots if len(slots) else _NO_SLOTS
        material_index[t] = lookup[_read_triangle_slots(source.mesh, len(lookup))]
        object_index[t] = i
        if with_colors:
            colored.append(_read_corner_colors(source.mesh, corners, corner_verts, corner_colors[t]))

    return TriangleSoup(
        vertices=vertices,
        triangles=triangles,
        material_index=material_index,
        materials=list(materials),
        object_index=object_index,
        object_names=[source.obj.name for source in sources],
        object_slots=object_slots,
        corner_colors=corner_colors,
        bounds=_bounds(vertices),
        skipped=skipped,
        colored_objects=colored if with_colors else None,
    )


def _starts(counts) -> np.ndarray:
    """Offsets of each object's block in the concatenated arrays, total last."""
    return np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))


def _bounds(vertices):
    # Column by column: NumPy reduces an (N, 3) array over axis 0 ~20x slower.
    lower = np.array([vertices[:, axis].min() for axis in range(3)], dtype=np.float32)
    upper = np.array([vertices[:, axis].max() for axis in range(3)], dtype=np.float32)
    return lower, upper


def _check_index_range(vertex_total, triangle_total) -> None:
    # Indices are int32 for the kernels, which also address the T * 3 corners as one flat
    # array; beyond int32 they would silently wrap.
    limit = np.iinfo(np.int32).max
    if vertex_total > limit or triangle_total * 3 > limit:
        raise InputError(
            f"The selection has {triangle_total:,} triangles and {vertex_total:,} vertices, "
            "more than VoxFX can index; select fewer objects or lower modifier levels."
        )


# --- vertices ---------------------------------------------------------------------------


def _read_world_vertices(source, out) -> None:
    """Local float32 positions → world, computed in float64, stored float32 in `out`."""
    source.mesh.attributes["position"].data.foreach_get("vector", out.reshape(-1))
    matrix = np.array(source.evaluated.matrix_world, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf are reported just below
        world = out @ matrix[:3, :3].T  # float32 @ float64 → float64
        world += matrix[:3, 3]
        out[...] = world
    _check_finite(source.obj.name, out)


def count_non_finite_vertices(vertices) -> int:
    """Vertices (rows) with any NaN or infinite coordinate."""
    return int(np.count_nonzero(~np.isfinite(vertices).all(axis=1)))


def _check_finite(name, vertices) -> None:
    # Checked after the transform: a huge scale can overflow float32 to inf as well.
    bad = count_non_finite_vertices(vertices)
    if bad:
        raise BadGeometryError(
            f"Object '{name}' has {bad} vertices with non-finite coordinates (NaN/inf); "
            "fix or delete them (or the transform that overflows) and try again."
        )


def _is_mirrored(evaluated) -> bool:
    # A negative determinant mirrors space, which turns counter-clockwise winding into
    # clockwise: the triangles must be flipped to keep normals pointing outward.
    return evaluated.matrix_world.to_3x3().determinant() < 0


# --- triangles --------------------------------------------------------------------------


def _read_triangle_corners(mesh, *, flip) -> np.ndarray:
    """int32 (T, 3): the corner (loop) indices of each loop triangle."""
    corners = np.empty((len(mesh.loop_triangles), 3), dtype=np.int32)
    mesh.loop_triangles.foreach_get("loops", corners.reshape(-1))
    if flip:
        corners[:, [1, 2]] = corners[:, [2, 1]]
    return corners


def _read_corner_verts(mesh) -> np.ndarray:
    """int32 (corners,): the vertex of each face corner."""
    corner_verts = np.empty(len(mesh.loops), dtype=np.int32)
    attribute = mesh.attributes.get(".corner_vert")
    if attribute is not None:  # raw copy; mesh.loops would go item by item
        attribute.data.foreach_get("value", corner_verts)
    else:
        mesh.loops.foreach_get("vertex_index", corner_verts)
    return corner_verts


# --- materials --------------------------------------------------------------------------


def _slot_table(evaluated, materials: dict[str, int]) -> np.ndarray:
    """int32 per slot: index into the shared material list (added there on first use)."""
    slots = np.full(len(evaluated.material_slots), NO_MATERIAL, dtype=np.int32)
    for slot_index, slot in enumerate(evaluated.material_slots):
        if slot.material is not None:
            slots[slot_index] = materials.setdefault(slot.material.name, len(materials))
    return slots


def _read_triangle_slots(mesh, slot_count) -> np.ndarray:
    """int32 (T,): material slot of each triangle, clamped like Blender renders it."""
    triangle_count = len(mesh.loop_triangles)
    attribute = mesh.attributes.get("material_index")
    if slot_count <= 1 or attribute is None or attribute.domain != "FACE":
        return np.zeros(triangle_count, dtype=np.int32)
    face_slots = np.empty(len(mesh.polygons), dtype=np.int32)
    attribute.data.foreach_get("value", face_slots)
    triangle_faces = np.empty(triangle_count, dtype=np.int32)
    mesh.loop_triangle_polygons.foreach_get("value", triangle_faces)
    # Out-of-range indices render with the last slot; negative ones with the first.
    return np.clip(face_slots[triangle_faces], 0, slot_count - 1)


# --- colours ----------------------------------------------------------------------------


def _read_corner_colors(mesh, corners, corner_verts, out) -> bool:
    """Fill `out` (T, 3, 4) with the active colour attribute at each triangle corner
    (white without one); return whether the mesh has one."""
    attribute = mesh.color_attributes.active_color
    if attribute is None or attribute.domain not in ("POINT", "CORNER"):
        out[...] = WHITE
        return False
    values = _read_color_values(attribute)
    indices = corners if attribute.domain == "CORNER" else corner_verts[corners]
    np.take(values, indices, axis=0, out=out)
    return True


def _read_color_values(attribute) -> np.ndarray:
    """float32 (N, 4) scene-linear RGBA.

    'color' is linear for both kinds: FLOAT_COLOR stores it as is (raw copy), and
    BYTE_COLOR (sRGB bytes) is converted by Blender, the same conversion it renders with.
    """
    values = np.empty((len(attribute.data), 4), dtype=np.float32)
    attribute.data.foreach_get("color", values.reshape(-1))
    return values


# ---------------------------------------------------------------------------------------
# Segments live in ``scene_segments``, which imports this module's evaluation helpers:
# its two names stay importable from here, looked up on first use (no import cycle)


def __getattr__(name):
    if name in ("SegmentSoup", "extract_segments"):
        from . import scene_segments

        return getattr(scene_segments, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
