"""Evaluated scene geometry → line segments for the segment voxelizer
(``kernels.voxelize.lines``): loose (or all) mesh edges, curves without bevel, hair
curves. Objects are evaluated as ``scene_io`` evaluates them for triangles (modifiers
applied, the scene moved to a frame first if asked); callers may import both names from
``scene_io``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.errors import BadGeometryError
from .scene_io import _bounds, _evaluated_mesh, _move_to_frame, _release, may_have_geometry

@dataclass
class SegmentSoup:
    """Line segments of several objects in world space, concatenated (for the segment
    voxelizer, ``kernels.voxelize.lines``)."""

    starts: np.ndarray  # float32 (S, 3), world metres
    ends: np.ndarray  # float32 (S, 3)
    object_index: np.ndarray  # int32 (S,), index into `object_names`
    object_names: list[str]  # objects that gave at least one segment
    bounds: tuple[np.ndarray, np.ndarray] | None  # float32 (3,) min and max; None if S = 0
    skipped: dict[str, str]  # object name → why it gave no segments

    def __len__(self) -> int:
        return len(self.starts)


def extract_segments(objects, depsgraph, *, loose_only=True, frame=None) -> SegmentSoup:
    """Line segments of the objects, in world space.

    * Meshes (and anything that evaluates to a mesh: curves, text, ...): their edges,
      with ``loose_only`` only those no face uses, else every edge (a wireframe). A curve
      without bevel or extrude evaluates to its polyline (``resolution_u`` segments per
      Bezier span), all of whose edges are loose.
    * Hair curves ('CURVES' objects): the polyline through each curve's points, closed
      for cyclic curves. These are the stored points: Catmull-Rom or Bezier smoothing
      between them is not evaluated (hair is usually dense enough for that not to show).

    Unlike `extract_triangles`, an empty result is no error: segments usually come with
    faces from other objects. Objects that give none are named in ``skipped``.
    InputError if an end point is NaN/inf (after the world transform).
    """
    if frame is not None:
        _move_to_frame(depsgraph.scene, frame)
    starts, ends, names, skipped = [], [], [], {}
    for obj in objects:
        pair, reason = _object_segments(obj, depsgraph, loose_only)
        if pair is None:
            skipped[obj.name] = reason
            continue
        _check_finite_segments(obj.name, pair)
        starts.append(pair[0])
        ends.append(pair[1])
        names.append(obj.name)
    if starts:
        start_array, end_array = np.concatenate(starts), np.concatenate(ends)
        counts = [len(s) for s in starts]
        object_index = np.repeat(np.arange(len(names), dtype=np.int32), counts)
        lower_a, upper_a = _bounds(start_array)
        lower_b, upper_b = _bounds(end_array)
        bounds = (np.minimum(lower_a, lower_b), np.maximum(upper_a, upper_b))
    else:
        start_array = np.zeros((0, 3), dtype=np.float32)
        end_array = np.zeros((0, 3), dtype=np.float32)
        object_index = np.zeros(0, dtype=np.int32)
        bounds = None
    return SegmentSoup(start_array, end_array, object_index, names, bounds, skipped)


def _object_segments(obj, depsgraph, loose_only):
    """((starts, ends) float32 world, None) for an object with segments, else (None, reason)."""
    if obj.type != "CURVES" and not may_have_geometry(obj):
        return None, f"no geometry ({obj.type.lower().replace('_', ' ')})"
    evaluated = obj.evaluated_get(depsgraph)
    if not evaluated.is_evaluated:
        return None, "not in the view layer (excluded, or disabled in viewports)"
    if obj.type == "CURVES":
        points, pairs = _hair_polylines(evaluated.data)
    else:
        source = _evaluated_mesh(obj, evaluated)
        if source is None:
            return None, f"no geometry ({obj.type.lower().replace('_', ' ')})"
        try:
            points, pairs = _mesh_edges(source.mesh, loose_only)
        finally:
            _release([source])
    if len(pairs) == 0:
        if obj.type != "CURVES" and loose_only:
            return None, "no loose edges (every edge belongs to a face; read all edges for a wireframe)"
        return None, "no edges"
    world = _to_world(points, evaluated.matrix_world)
    return (world[pairs[:, 0]], world[pairs[:, 1]]), None


def _to_world(points, matrix_world) -> np.ndarray:
    """Local float32 positions → world, computed in float64, stored float32."""
    matrix = np.array(matrix_world, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf are reported by the caller
        world = points @ matrix[:3, :3].T
        world += matrix[:3, 3]
        return world.astype(np.float32)


def _mesh_edges(mesh, loose_only):
    """(positions float32 (V, 3), edges int32 (E, 2)) of a mesh, loose ones only if asked."""
    points = np.empty((len(mesh.vertices), 3), dtype=np.float32)
    if len(points) == 0:  # an empty mesh has no 'position' attribute at all
        return points, np.zeros((0, 2), dtype=np.int32)
    mesh.attributes["position"].data.foreach_get("vector", points.reshape(-1))
    edges = np.empty((len(mesh.edges), 2), dtype=np.int32)
    attribute = mesh.attributes.get(".edge_verts")
    if attribute is not None:  # raw copy; mesh.edges would go item by item
        attribute.data.foreach_get("value", edges.reshape(-1))
    else:
        mesh.edges.foreach_get("vertices", edges.reshape(-1))
    if loose_only and len(mesh.polygons):
        corner_edges = np.empty(len(mesh.loops), dtype=np.int32)
        attribute = mesh.attributes.get(".corner_edge")
        if attribute is not None:
            attribute.data.foreach_get("value", corner_edges)
        else:
            mesh.loops.foreach_get("edge_index", corner_edges)
        in_a_face = np.zeros(len(edges), dtype=bool)
        in_a_face[corner_edges] = True
        edges = edges[~in_a_face]
    return points, edges


def _hair_polylines(curves):
    """(positions float32 (P, 3), segments int32 (S, 2)) of a Curves data-block: point i
    to i+1 within each curve, and last to first for cyclic curves."""
    points = np.empty((len(curves.points), 3), dtype=np.float32)
    if len(points):
        curves.attributes["position"].data.foreach_get("vector", points.reshape(-1))
    offsets = np.empty(len(curves.curve_offset_data), dtype=np.int32)
    curves.curve_offset_data.foreach_get("value", offsets)
    first, sizes = offsets[:-1], np.diff(offsets)
    has_next = np.ones(len(points), dtype=bool)  # every point but each curve's last
    has_next[(first + sizes - 1)[sizes > 0]] = False
    starts = np.flatnonzero(has_next).astype(np.int32)
    pairs = [np.stack([starts, starts + 1], axis=1)]
    cyclic = curves.attributes.get("cyclic")
    if cyclic is not None and cyclic.domain == "CURVE" and len(sizes):
        closed = np.empty(len(sizes), dtype=bool)
        cyclic.data.foreach_get("value", closed)
        closed &= sizes > 2  # two points are already joined
        pairs.append(np.stack([(first + sizes - 1)[closed], first[closed]], axis=1).astype(np.int32))
    return points, np.concatenate(pairs)


def _check_finite_segments(name, pair) -> None:
    bad = int(np.count_nonzero(~(np.isfinite(pair[0]).all(axis=1) & np.isfinite(pair[1]).all(axis=1))))
    if bad:
        raise BadGeometryError(
            f"Object '{name}' has {bad} edges with non-finite end points (NaN/inf); "
            "fix or delete them (or the transform that overflows) and try again."
        )
