"""Scene → line segments (addon/scene_io.extract_segments) in real headless Blender."""

import math

import numpy as np
import pytest


def link(bpy, name, data):
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def depsgraph(bpy):
    return bpy.context.evaluated_depsgraph_get()


def mesh_with_face_and_loose_edges(bpy, name="wire"):
    """A unit quad in z = 0 plus two loose edges: (2,0,0)–(3,0,0) and (3,0,0)–(3,1,2)."""
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (2, 0, 0), (3, 0, 0), (3, 1, 2)],
                     [(4, 5), (5, 6)], [(0, 1, 2, 3)])
    mesh.update()
    return link(bpy, name, mesh)


def unordered(soup):
    """The segments as a set of unordered end point pairs (rounded to 1e-5 m)."""
    a = np.round(soup.starts.astype(np.float64), 5)
    b = np.round(soup.ends.astype(np.float64), 5)
    return {frozenset((tuple(p), tuple(q))) for p, q in zip(a, b)}


def pairs(*segments):
    return {frozenset((tuple(map(float, p)), tuple(map(float, q)))) for p, q in segments}


def test_loose_edges_only_or_the_whole_wireframe(fresh_blender):
    from voxfx.addon.scene_io import extract_segments

    bpy = fresh_blender
    obj = mesh_with_face_and_loose_edges(bpy)
    loose = extract_segments([obj], depsgraph(bpy))
    assert loose.starts.dtype == np.float32 and loose.starts.shape == (2, 3) and loose.ends.shape == (2, 3)
    assert unordered(loose) == pairs(((2, 0, 0), (3, 0, 0)), ((3, 0, 0), (3, 1, 2)))
    assert loose.object_names == ["wire"] and loose.object_index.tolist() == [0, 0]
    wire = extract_segments([obj], depsgraph(bpy), loose_only=False)
    quad = pairs(((0, 0, 0), (1, 0, 0)), ((1, 0, 0), (1, 1, 0)), ((1, 1, 0), (0, 1, 0)), ((0, 1, 0), (0, 0, 0)))
    assert unordered(wire) == unordered(loose) | quad and len(wire) == 6
    np.testing.assert_array_equal(wire.bounds[0], [0, 0, 0])
    np.testing.assert_array_equal(wire.bounds[1], [3, 1, 2])


def test_world_transform_is_applied_and_objects_are_indexed(fresh_blender):
    from voxfx.addon.scene_io import extract_segments

    bpy = fresh_blender
    plain = mesh_with_face_and_loose_edges(bpy, "plain")
    moved = mesh_with_face_and_loose_edges(bpy, "moved")
    moved.location = (1.0, -2.0, 0.5)
    moved.rotation_euler = (0.3, -0.7, 1.1)
    moved.scale = (2.0, 0.5, -1.5)  # mirrored too
    soup = extract_segments([plain, moved], depsgraph(bpy))
    assert soup.object_names == ["plain", "moved"] and soup.object_index.tolist() == [0, 0, 1, 1]
    matrix = np.array(moved.matrix_world)
    mine = soup.object_index == 1
    local = extract_segments([plain], depsgraph(bpy))  # the same mesh, untransformed

    def world(p):
        return p.astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]

    np.testing.assert_allclose(soup.starts[mine], world(local.starts), atol=1e-5)
    np.testing.assert_allclose(soup.ends[mine], world(local.ends), atol=1e-5)
    assert not np.allclose(soup.starts[mine], local.starts)


def bezier(bpy, name="curve", bevel=0.0):
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    curve.bevel_depth = bevel
    spline = curve.splines.new("BEZIER")
    spline.bezier_points.add(1)
    p0, p1 = spline.bezier_points
    p0.co, p0.handle_left, p0.handle_right = (0, 0, 0), (-1, 0, 0), (1, 2, 0)
    p1.co, p1.handle_left, p1.handle_right = (3, 0, 1), (2, -1, 1.5), (4, 0, 1)
    return link(bpy, name, curve)


def test_bezier_curve_without_bevel_gives_its_polyline(fresh_blender):
    from voxfx.addon.scene_io import extract_segments

    bpy = fresh_blender
    obj = bezier(bpy)
    obj.location = (10.0, 0.0, -1.0)
    soup = extract_segments([obj], depsgraph(bpy))
    resolution = obj.data.resolution_u
    assert len(soup) == resolution  # one Bezier span, resolution_u segments
    # A chain from the first control point to the last, whatever order Blender lists it in.
    ends = np.concatenate([soup.starts, soup.ends]).round(5)
    points, uses = np.unique(ends, axis=0, return_counts=True)
    tips = {tuple(p) for p in points[uses == 1].tolist()}
    assert tips == {(10.0, 0.0, -1.0), (13.0, 0.0, 0.0)}
    assert len(points) == resolution + 1 and (uses[uses != 1] == 2).all()
    # Convex hull property: the curve stays in the box of its control points and handles.
    lo, hi = np.array([-1, -1, 0]) + [10, 0, -1], np.array([4, 2, 1.5]) + [10, 0, -1]
    assert (ends >= lo - 1e-5).all() and (ends <= hi + 1e-5).all()
    assert np.ptp(ends[:, 1]) > 0.3  # really curved, not the straight chord


def test_bevelled_curve_has_no_loose_edges_but_a_wireframe(fresh_blender):
    from voxfx.addon.scene_io import extract_segments

    bpy = fresh_blender
    obj = bezier(bpy, bevel=0.1)
    soup = extract_segments([obj], depsgraph(bpy))
    assert len(soup) == 0 and soup.bounds is None and "loose" in soup.skipped["curve"]
    assert len(extract_segments([obj], depsgraph(bpy), loose_only=False)) > 50


def test_hair_curves_give_the_polyline_of_their_points(fresh_blender):
    from voxfx.addon.scene_io import extract_segments

    bpy = fresh_blender
    hair = bpy.data.hair_curves.new("hair")
    hair.add_curves([3, 4])
    points = np.arange(21, dtype=np.float32).reshape(7, 3) * 0.1
    hair.attributes["position"].data.foreach_set("vector", points.reshape(-1))
    obj = link(bpy, "hair", hair)
    obj.location = (0.0, 0.0, 2.0)
    soup = extract_segments([obj], depsgraph(bpy))
    world = points + [0, 0, 2]
    assert unordered(soup) == pairs(*[(world[i].round(5), world[i + 1].round(5)) for i in (0, 1, 3, 4, 5)])
    cyclic = hair.attributes.new("cyclic", "BOOLEAN", "CURVE")
    cyclic.data.foreach_set("value", [False, True])
    closed = extract_segments([obj], depsgraph(bpy))
    assert unordered(closed) == unordered(soup) | pairs((world[6].round(5), world[3].round(5)))


def test_objects_without_segments_are_skipped_with_a_reason(fresh_blender):
    from voxfx.addon.scene_io import extract_segments

    bpy = fresh_blender
    empty = link(bpy, "empty", None)
    faces_only = bpy.data.meshes.new("faces")
    faces_only.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
    solid = link(bpy, "faces", faces_only)
    wire = mesh_with_face_and_loose_edges(bpy)
    soup = extract_segments([empty, solid, wire], depsgraph(bpy))
    assert soup.object_names == ["wire"] and len(soup) == 2
    assert "no geometry" in soup.skipped["empty"] and "loose" in soup.skipped["faces"]
    assert len(extract_segments([], depsgraph(bpy))) == 0


def test_non_finite_end_points_are_an_input_error(fresh_blender):
    from voxfx.addon.scene_io import extract_segments
    from voxfx.kernels.errors import InputError

    bpy = fresh_blender
    mesh = bpy.data.meshes.new("bad")
    mesh.from_pydata([(0, 0, 0), (math.nan, 0, 0)], [(0, 1)], [])
    obj = link(bpy, "bad", mesh)
    with pytest.raises(InputError, match="'bad'.*non-finite"):
        extract_segments([obj], depsgraph(bpy))


def test_extracted_segments_voxelize_where_they_are(fresh_blender):
    from voxfx.addon.scene_io import extract_segments
    from voxfx.kernels.grid import GridSpec, bitgrid
    from voxfx.kernels.voxelize.lines import voxelize_segments

    bpy = fresh_blender
    obj = mesh_with_face_and_loose_edges(bpy)
    obj.location = (0.25, 0.25, 0.25)  # loose edge (2.25..3.25, .25, .25): voxels x = 2, 3
    soup = extract_segments([obj], depsgraph(bpy))
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (5, 5, 5))
    flat = soup.starts[:, 2] == soup.ends[:, 2]
    bits = voxelize_segments(soup.starts[flat], soup.ends[flat], spec, xp=np)
    assert {tuple(v) for v in bitgrid.coordinates(bits, 5).tolist()} == {(2, 0, 0), (3, 0, 0)}
