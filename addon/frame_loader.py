"""Baked frames loaded into one mesh per output object, replaced on every frame change.

Why: Blender keeps every file its Import PLY / Import VDB nodes (and Volume objects)
have read in one session-wide cache, bounded only by *Preferences → System → Memory
Cache Limit* (4 GB by default), and no Python call clears it. Scrubbing or rendering a
baked sequence therefore kept old frames in memory (issue 21). Here VoxFX reads the
current frame's file with its own readers and writes it into the object's mesh, so the
old frame's data is freed as the new one arrives: memory holds one frame (plus
Blender's evaluated copy), however many frames are shown.

* ``points``: a PLY point file (``ply.write_points``) or a compact particle frame
  (``compact_points``, ``.vxp``: the source's ``ext``) → loose vertices with the file's
  attributes (``name_x/_y/_z`` columns become one vector attribute); the object's
  Geometry Nodes tree turns them into points. Blender's own nodes cannot read ``.vxp``:
  a .blend whose particles were baked compact shows them only where VoxFX is installed
  (the "PLY + VDB" cache format is for other tools).
* ``depth``: the depth grid of a snow ``.vdb`` sampled at the cover mesh's vertices →
  its ``depth`` attribute (the mesh keeps its ground positions; the tree lifts them).
* ``liquid_surface``: the zero crossing of the ``surface`` level set (OpenVDB's own
  mesher, as Blender's Grid to Mesh) with ``velocity`` sampled at the vertices.

The loader runs in ``frame_change_pre``, which Blender calls before it evaluates a new
frame: in the viewport, in ``bpy.ops.render.render(animation=True)``, in ``blender -b
-a`` and at Cycles' motion-blur steps. The frame is the scene time rounded to the
nearest whole frame, as the node trees round it, and a file that is already loaded is
not read again, so motion-blur steps within half a frame keep the same data (motion blur
comes from the ``velocity`` attribute). Render-safety: the handler edits the original
mesh, which Blender allows while it renders only with *Render → Lock Interface*, so VoxFX
turns that on for the scene when it attaches its outputs (``attach``).

A saved .blend carries no frame data: ``save_pre`` empties the meshes and switches the
node trees to read the files themselves (the "Loaded by VoxFX" modifier input off), so a
file opened where VoxFX is not installed still renders every frame, the old way;
``save_post`` and ``load_post`` switch back and load the current frame.
"""

from __future__ import annotations

import math
import os

import bpy
import numpy as np
from bpy.app.handlers import persistent

from . import cache, compact_points, node_setups, ply
from ..kernels.errors import VoxFXError

SOURCE = "voxfx_frames"  # mesh ID property: what to load ({"kind", "prefix", ...})
LOADED = "voxfx_loaded"  # mesh ID property: the file (and its size and time) the mesh holds
LOADED_INPUT = node_setups.LOADED_INPUT  # the node trees' switch between the mesh and the files
MODIFIER = "VoxFX"
SMOOTH_ANGLE_DEG = 60.0  # liquid surface: edges bent more than this stay sharp
EXTENSIONS = {"points": ".ply", "depth": ".vdb", "liquid_surface": ".vdb"}


# ---------------------------------------------------------------------------------------
# Which file


def frame_of(scene) -> int:
    """The frame whose file shows: scene time rounded half up, as the node trees round it."""
    return int(math.floor(scene.frame_current + scene.frame_subframe + 0.5))


def frame_file(prefix: str, frame: int, ext: str) -> str:
    """``<prefix><frame, 4 digits><ext>``, '//' resolved against the .blend (frames 0–9999)."""
    return os.path.abspath(bpy.path.abspath(prefix)) + f"{frame:04d}{ext}"


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}|missing"
    return f"{path}|{st.st_size}|{st.st_mtime_ns}"


# ---------------------------------------------------------------------------------------
# Attaching


def attach(obj, kind: str, prefix: str, scene=None, **params):
    """Let VoxFX load *obj*'s mesh from ``<prefix>####<ext>`` on every frame change.

    *obj* carries its VoxFX Geometry Nodes modifier (from ``node_setups``); its
    "Loaded by VoxFX" input is switched on and the current frame is loaded now. The
    scene's interface is locked while rendering (see the module text)."""
    if kind not in EXTENSIONS:
        raise ValueError(f"unknown frame kind {kind!r}")
    scene = scene or bpy.context.scene
    mesh = obj.data
    mesh[SOURCE] = {"kind": kind, "prefix": prefix, **params}
    if LOADED in mesh:
        del mesh[LOADED]
    scene.render.use_lock_interface = True
    _use_loaded(obj, True)
    load(mesh, frame_of(scene))
    return obj


def _use_loaded(obj, on: bool):
    """Switch the object's VoxFX node tree between its mesh (on) and the files (off)."""
    mod = obj.modifiers.get(MODIFIER)
    group = mod.node_group if mod is not None else None
    if group is None or not any(getattr(i, "in_out", "") == "INPUT" and i.name == LOADED_INPUT
                                for i in group.interface.items_tree):
        return
    if bool(node_setups.get_input(mod, LOADED_INPUT)) != on:
        node_setups.set_input(mod, LOADED_INPUT, on)
        obj.update_tag()


def loader_meshes():
    return [m for m in bpy.data.meshes if m.get(SOURCE) is not None and m.library is None]


def _loader_objects():
    return [o for o in bpy.data.objects if o.type == "MESH" and o.data is not None
            and o.data.get(SOURCE) is not None and o.library is None]


# ---------------------------------------------------------------------------------------
# Loading


def load(mesh, frame: int, force: bool = False) -> bool:
    """Put *frame*'s data into *mesh* unless it holds it already; True when it loaded."""
    source = mesh[SOURCE]
    kind = source["kind"]
    # Only a file its cache's manifest vouches for (size and CRC) is read; after the bake
    # the last frame stays, before it nothing shows, and nothing is printed for either.
    prefix = os.path.abspath(bpy.path.abspath(source["prefix"]))
    path, problem = cache.shown_frame(prefix, frame, source.get("ext", EXTENSIONS[kind]))
    if problem:
        _warn_once(problem)
    stamp = _stamp(str(path)) if path is not None else "nothing"
    if not force and mesh.get(LOADED) == stamp:
        return False
    if mesh.is_editmode:  # Edit Mode writes its own copy back on exit: leave the mesh alone
        return False
    try:
        _load_kind(mesh, kind, path, source)
    except VoxFXError as e:  # a file changed between its check and its reading
        _warn_once(str(e))
        _load_kind(mesh, kind, None, source)
    mesh[LOADED] = stamp
    mesh.update()
    return True


def _load_kind(mesh, kind, path, source):
    if kind == "points":
        _load_points(mesh, path)
    elif kind == "depth":
        _load_depth(mesh, path, source)
    else:
        _load_liquid_surface(mesh, path, source)


_warned: set = set()


def _warn_once(text: str) -> None:
    """One console line per problem (a frame change must not print the same error again)."""
    if text not in _warned:
        _warned.add(text)
        print(f"VoxFX: {text}")


def update(scene) -> int:
    """Load the frame *scene* shows into every VoxFX loader mesh; the number loaded."""
    frame = frame_of(scene)
    return sum(load(mesh, frame) for mesh in loader_meshes())


def _load_points(mesh, path):
    if path is None:
        positions, columns = np.zeros((0, 3), np.float32), {}
    else:
        if path.suffix == compact_points.SUFFIX:  # vectors as (N, 3) arrays already: nothing to restack
            positions, columns = compact_points.read_points(path, vectors=True)
        else:
            positions, columns = ply.read_points(path)
    attributes = _vectors_from_columns(columns)
    count = len(positions)
    if len(mesh.vertices) != count or len(mesh.edges) or len(mesh.polygons):
        mesh.clear_geometry()
        mesh.vertices.add(count)
    _keep_only(mesh, set(attributes))
    if not count:  # an empty mesh has no position attribute yet
        return
    mesh.attributes["position"].data.foreach_set("vector", np.ascontiguousarray(positions, np.float32).ravel())
    for name, values in attributes.items():
        _set_point_attribute(mesh, name, values)


def _vectors_from_columns(columns: dict) -> dict:
    """``velocity_x/_y/_z`` → ``velocity`` (N, 3); other columns as they are."""
    out = {}
    for name, values in columns.items():
        base, _, axis = name.rpartition("_")
        if axis in ("x", "y", "z") and base and all(f"{base}_{a}" in columns for a in "xyz"):
            if base not in out:
                out[base] = np.stack([columns[f"{base}_{a}"] for a in "xyz"], axis=1).astype(np.float32)
        else:
            out[name] = values
    return out


def _keep_only(mesh, names: set):
    for name in [a.name for a in mesh.attributes
                 if not a.name.startswith(".") and a.name != "position" and a.name not in names
                 and a.domain == "POINT"]:
        mesh.attributes.remove(mesh.attributes[name])


def _set_point_attribute(mesh, name, values):
    values = np.asarray(values)
    if values.ndim == 2:
        data_type, field, flat = "FLOAT_VECTOR", "vector", np.ascontiguousarray(values, np.float32).ravel()
    elif values.dtype.kind == "f":
        data_type, field, flat = "FLOAT", "value", np.ascontiguousarray(values, np.float32)
    else:
        data_type, field, flat = "INT", "value", np.ascontiguousarray(values, np.int32)
    attribute = mesh.attributes.get(name)
    if attribute is not None and (attribute.data_type != data_type or attribute.domain != "POINT"):
        mesh.attributes.remove(attribute)
        attribute = None
    if attribute is None:
        attribute = mesh.attributes.new(name, data_type, "POINT")
    attribute.data.foreach_set(field, flat)


def _load_depth(mesh, path, source):
    count = len(mesh.vertices)
    depth = np.zeros(count, np.float32)  # no file: no snow, as the node tree shows it
    if path is not None and count:
        positions = np.empty(3 * count, np.float32)
        mesh.attributes["position"].data.foreach_get("vector", positions)
        positions = positions.reshape(-1, 3)
        positions[:, 2] = source.get("layer_z", 0.0)
        grid = _read_grid(path, source.get("grid", "depth"))
        if grid is not None:
            depth = sample(grid, positions)
    _set_point_attribute(mesh, "depth", depth)


def _load_liquid_surface(mesh, path, source):
    vertices = np.zeros((0, 3), np.float32)
    quads = np.zeros((0, 4), np.int32)
    velocity = None
    if path is not None:
        surface = _read_grid(path, source.get("surface", "surface"))
        if surface is not None:
            points, faces = surface.convertToQuads(0.0)  # world space, as Grid to Mesh (threshold 0)
            vertices = np.asarray(points, np.float32).reshape(-1, 3)
            quads = np.ascontiguousarray(np.asarray(faces, np.int64).reshape(-1, 4)[:, ::-1], np.int32)  # face out
            vel_grid = _read_grid(path, source.get("velocity", "velocity"))
            if vel_grid is not None and len(vertices):
                velocity = sample(vel_grid, vertices)
    mesh.clear_geometry()
    if not len(vertices):
        return
    mesh.vertices.add(len(vertices))
    mesh.loops.add(4 * len(quads))
    mesh.polygons.add(len(quads))
    mesh.attributes["position"].data.foreach_set("vector", vertices.ravel())
    corner_vert = mesh.attributes.get(".corner_vert")
    if corner_vert is not None:
        corner_vert.data.foreach_set("value", quads.ravel())
    else:
        mesh.loops.foreach_set("vertex_index", quads.ravel())
    mesh.polygons.foreach_set("loop_start", np.arange(0, 4 * len(quads), 4, dtype=np.int32))
    mesh.update(calc_edges=True)
    # Water is smooth: shade it so, keeping sharp only the real creases (where the closed
    # surface turns along a domain wall, 90°), as Shade Auto Smooth would.
    mesh.shade_smooth()
    mesh.set_sharp_from_angle(angle=math.radians(SMOOTH_ANGLE_DEG))
    if velocity is None:
        velocity = np.zeros((len(vertices), 3), np.float32)
    _set_point_attribute(mesh, "velocity", velocity)


# ---------------------------------------------------------------------------------------
# VDB reading and sampling


def _openvdb():
    from .writeback import openvdb_module

    return openvdb_module()


def _read_grid(path, name):
    """Grid *name* of the file, or None when the file lacks it (the node trees then show nothing)."""
    vdb = _openvdb()
    try:
        return vdb.read(str(path), name)
    except (KeyError, RuntimeError, ValueError, OSError):
        return None


BLOCK = 128  # voxels per side copied out of a grid at once when sampling (≤ 26 MB for vectors)


def sample(grid, points):
    """Trilinear values of *grid* at world *points* (N, 3), as Blender's Sample Grid gives
    them (voxel centres at integer index coordinates; outside: the background). Copies
    out only the voxels around the points, a block of at most (BLOCK + 1)³ at a time, so
    memory stays small."""
    points = np.asarray(points, np.float64)
    vector = "Vec3" in type(grid).__name__
    channels = (3,) if vector else ()
    out = np.zeros((len(points),) + channels, np.float32)
    if not len(points):
        return out
    index = _world_to_index(grid, points)
    nearest = np.rint(index)
    # Points on voxel centres (the snow cover's lattice): one look-up each, not eight.
    on_centres = bool(np.abs(index - nearest).max() < 1e-3)
    base = (nearest if on_centres else np.floor(index)).astype(np.int64)
    frac = (index - base).astype(np.float32)
    block = base // BLOCK
    block -= block.min(axis=0)
    span = block.max(axis=0) + 1
    key = (block[:, 0] * span[1] + block[:, 1]) * span[2] + block[:, 2]  # one integer per block
    order = np.argsort(key, kind="stable")
    bounds = np.flatnonzero(np.diff(key[order], prepend=-1, append=-1))
    for b in range(len(bounds) - 1):
        members = order[bounds[b]:bounds[b + 1]]
        corner = base[members]
        origin = corner.min(axis=0)
        shape = tuple(int(v) for v in corner.max(axis=0) - origin + 2)  # the voxels around these points
        dense = np.zeros(shape + channels, np.float32)
        grid.copyToArray(dense, ijk=tuple(int(v) for v in origin))  # axes (x, y, z)
        i, j, k = (corner - origin).T
        if on_centres:
            out[members] = dense[i, j, k]
            continue
        fx, fy, fz = (frac[members, a] for a in range(3))
        if vector:
            fx, fy, fz = fx[:, None], fy[:, None], fz[:, None]
        c00 = dense[i, j, k] * (1 - fx) + dense[i + 1, j, k] * fx
        c10 = dense[i, j + 1, k] * (1 - fx) + dense[i + 1, j + 1, k] * fx
        c01 = dense[i, j, k + 1] * (1 - fx) + dense[i + 1, j, k + 1] * fx
        c11 = dense[i, j + 1, k + 1] * (1 - fx) + dense[i + 1, j + 1, k + 1] * fx
        out[members] = (c00 * (1 - fy) + c10 * fy) * (1 - fz) + (c01 * (1 - fy) + c11 * fy) * fz
    return out


def _world_to_index(grid, points):
    """Index-space coordinates of world *points* for a grid with an affine transform."""
    transform = grid.transform
    origin = np.array(transform.indexToWorld((0.0, 0.0, 0.0)))
    a = [np.array(transform.indexToWorld(e)) - origin for e in ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0))]
    # Rows a[0..2] map index steps to world steps; their inverse by cofactors (a LAPACK
    # call here measured 5 ms, its thread pool waking up next to Blender's).
    cof = np.array([np.cross(a[1], a[2]), np.cross(a[2], a[0]), np.cross(a[0], a[1])])
    inverse = cof.T / np.dot(a[0], cof[0])
    d = points - origin
    return d[:, 0:1] * inverse[0] + d[:, 1:2] * inverse[1] + d[:, 2:3] * inverse[2]


# ---------------------------------------------------------------------------------------
# Handlers


@persistent
def _on_frame_change(scene, depsgraph=None):
    update(scene)


@persistent
def _on_save_pre(*_args):
    # The .blend keeps no frame data: empty the meshes and let the trees read the files,
    # so a file opened without VoxFX still shows every frame.
    for obj in _loader_objects():
        _use_loaded(obj, False)
    for mesh in loader_meshes():
        source = mesh[SOURCE]
        if source["kind"] == "depth":
            attribute = mesh.attributes.get("depth")
            if attribute is not None:
                mesh.attributes.remove(attribute)
        else:
            mesh.clear_geometry()
        if LOADED in mesh:
            del mesh[LOADED]
        mesh.update()


@persistent
def _on_load_post(*_args):
    scene = bpy.context.scene
    for obj in _loader_objects():
        _use_loaded(obj, True)
    if scene is not None:
        update(scene)


_HANDLERS = (
    (bpy.app.handlers.frame_change_pre, _on_frame_change),
    (bpy.app.handlers.save_pre, _on_save_pre),
    (bpy.app.handlers.save_post, _on_load_post),
    (bpy.app.handlers.load_post, _on_load_post),
)


def register():
    for handlers, function in _HANDLERS:
        # Replace a copy left by an earlier registration (a reloaded add-on has new functions).
        for existing in [h for h in handlers if getattr(h, "__name__", "") == function.__name__
                         and getattr(h, "__module__", "") == function.__module__]:
            handlers.remove(existing)
        handlers.append(function)


def unregister():
    for handlers, function in _HANDLERS:
        for existing in [h for h in handlers if getattr(h, "__name__", "") == function.__name__
                         and getattr(h, "__module__", "") == function.__module__]:
            handlers.remove(existing)
