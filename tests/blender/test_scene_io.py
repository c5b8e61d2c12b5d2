"""addon/scene_io against facts known without it: primitive counts, box corners after a
known transform, surface areas, outward normals, colours written corner by corner."""

from __future__ import annotations

import itertools
import math

import bpy
import numpy as np
import pytest

from voxfx.addon import scene_io
from voxfx.kernels.errors import InputError

# --- helpers (test-side oracles) -------------------------------------------------------


def depsgraph():
    return bpy.context.evaluated_depsgraph_get()


def add_cube(name="Cube", location=(0, 0, 0), rotation=(0, 0, 0), scale=(1, 1, 1)):
    """A 2 m cube centred on its origin. The transform goes on the object: the operator's
    own `scale` argument would bake it into the mesh instead."""
    bpy.ops.mesh.primitive_cube_add(size=2)
    obj = bpy.context.active_object
    obj.name = name
    obj.location, obj.rotation_euler, obj.scale = location, rotation, scale
    return obj


def triangle_corners(soup) -> np.ndarray:
    """float64 (T, 3, 3): the three world positions of each triangle."""
    return soup.vertices[soup.triangles].astype(np.float64)


def triangle_normals(soup) -> np.ndarray:
    """Unnormalised right-hand-rule normals (twice the area)."""
    p = triangle_corners(soup)
    return np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])


def srgb_to_linear(c):
    c = np.asarray(c, dtype=np.float64)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def face_code(normal) -> int:
    """0..5 for ±x, ±y, ±z: which side of an axis-aligned cube a face is on."""
    axis = int(np.argmax(np.abs(normal)))
    return 2 * axis + int(normal[axis] > 0)


# --- geometry --------------------------------------------------------------------------


def test_cube_gives_twelve_triangles_at_known_world_corners():
    add_cube(location=(1, 2, 3), rotation=(0, 0, math.pi / 2), scale=(1, 2, 0.5))

    soup = scene_io.extract_triangles(bpy.context.selected_objects, depsgraph())

    # Scale (1, 2, 0.5) makes the box 2 x 4 x 1; a quarter turn about z swaps x and y,
    # so in world space it spans x ∈ [-1, 3], y ∈ [1, 3], z ∈ [2.5, 3.5].
    expected = np.array(sorted(itertools.product((-1, 3), (1, 3), (2.5, 3.5))))
    got = np.array(sorted(map(tuple, soup.vertices.round(4))))  # round: float32 noise sorts
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert soup.triangles.shape == (12, 3)
    area = 0.5 * np.linalg.norm(triangle_normals(soup), axis=1).sum()
    assert area == pytest.approx(2 * (4 * 2 + 4 * 1 + 2 * 1), rel=1e-5)
    np.testing.assert_allclose(soup.bounds[0], (-1, 1, 2.5), atol=1e-5)
    np.testing.assert_allclose(soup.bounds[1], (3, 3, 3.5), atol=1e-5)
    assert soup.object_names == ["Cube"] and soup.skipped == {}


def test_arrays_have_kernel_dtypes_and_layout():
    add_cube()

    soup = scene_io.extract_triangles([bpy.context.active_object], depsgraph())

    for array, dtype in [
        (soup.vertices, np.float32),
        (soup.triangles, np.int32),
        (soup.material_index, np.int32),
        (soup.object_index, np.int32),
    ]:
        assert array.dtype == dtype and array.flags.c_contiguous
    assert soup.corner_colors is None  # only read when asked for


def test_suzanne_has_968_triangles():
    bpy.ops.mesh.primitive_monkey_add()

    soup = scene_io.extract_triangles(bpy.context.selected_objects, depsgraph())

    assert soup.triangles.shape == (968, 3)  # 500 faces: 468 quads + 32 triangles
    assert soup.vertices.shape == (507, 3)


def test_subdivision_modifier_gives_subdivided_count():
    cube = add_cube()
    cube.modifiers.new("Subdivision", "SUBSURF").levels = 2

    soup = scene_io.extract_triangles([cube], depsgraph())

    # Two levels split each of the 6 quads into 4 × 4; Euler (V − E + F = 2 with E = 2F)
    # gives V = 2 + F = 98.
    assert len(soup.triangles) == 6 * 16 * 2
    assert len(soup.vertices) == 98
    assert len(cube.data.polygons) == 6  # the original mesh is left alone
    assert np.abs(soup.vertices).max() < 1.0  # Catmull-Clark pulls corners inward


def add_text():
    bpy.ops.object.text_add()


def add_bevelled_circle():
    bpy.ops.curve.primitive_bezier_circle_add(radius=1)
    bpy.context.active_object.data.bevel_depth = 0.1


def add_nurbs_sphere():
    bpy.ops.surface.primitive_nurbs_surface_sphere_add()


def add_metaball():
    bpy.ops.object.metaball_add()


@pytest.mark.parametrize(
    "add", [add_text, add_bevelled_circle, add_nurbs_sphere, add_metaball], ids=lambda f: f.__name__
)
def test_non_mesh_types_give_triangles(add):
    add()
    obj = bpy.context.active_object

    soup = scene_io.extract_triangles([obj], depsgraph())

    assert len(soup.triangles) > 10
    assert soup.object_names == [obj.name] and soup.skipped == {}
    assert soup.triangles.min() >= 0 and soup.triangles.max() < len(soup.vertices)


def test_bevelled_circle_spans_radius_plus_bevel():
    add_bevelled_circle()

    soup = scene_io.extract_triangles([bpy.context.active_object], depsgraph())

    # A Bézier circle is not exactly round, hence the tolerance.
    np.testing.assert_allclose(soup.bounds[0], (-1.1, -1.1, -0.1), atol=0.02)
    np.testing.assert_allclose(soup.bounds[1], (1.1, 1.1, 0.1), atol=0.02)


def test_two_objects_index_their_own_vertices():
    add_cube(location=(-5, 0, 0))
    bpy.ops.mesh.primitive_monkey_add(location=(5, 0, 0))
    cube, monkey = bpy.data.objects["Cube"], bpy.data.objects["Suzanne"]

    soup = scene_io.extract_triangles([cube, monkey], depsgraph())

    assert soup.object_names == ["Cube", "Suzanne"]
    assert np.bincount(soup.object_index).tolist() == [12, 968]
    x = triangle_corners(soup)[..., 0]
    assert (x[soup.object_index == 0] < -3).all()
    assert (x[soup.object_index == 1] > 3).all()


@pytest.mark.parametrize("scale", [(1, 1, 1), (-1, 1, 1), (1, -2, 1), (-1, -1, -1), (-1, -1, 1)])
def test_normals_point_outward_also_when_mirrored(scale):
    centre = np.array((3.0, 0.0, 0.0))
    add_cube(location=centre, scale=scale)

    soup = scene_io.extract_triangles([bpy.context.active_object], depsgraph())

    outward = triangle_corners(soup).mean(axis=1) - centre
    assert (np.einsum("ij,ij->i", triangle_normals(soup), outward) > 0).all()


def test_frame_moves_to_the_animated_position():
    cube = add_cube()
    for frame, x in [(1, 0.0), (11, 10.0)]:
        cube.location.x = x
        cube.keyframe_insert("location", index=0, frame=frame)

    soup = scene_io.extract_triangles([cube], depsgraph(), frame=11)

    assert bpy.context.scene.frame_current == 11
    np.testing.assert_allclose(soup.bounds[0][0], 9.0, atol=1e-5)
    np.testing.assert_allclose(soup.bounds[1][0], 11.0, atol=1e-5)


# --- materials -------------------------------------------------------------------------


def test_material_index_per_triangle_with_shared_material_list():
    red, blue = bpy.data.materials.new("Red"), bpy.data.materials.new("Blue")
    two_colour = add_cube("TwoColour")
    two_colour.data.materials.append(red)
    two_colour.data.materials.append(blue)
    top = np.array([polygon.normal.z > 0.5 for polygon in two_colour.data.polygons])
    two_colour.data.polygons.foreach_set("material_index", top.astype(np.int32))
    blue_only = add_cube("BlueOnly", location=(5, 0, 0))
    blue_only.data.materials.append(blue)
    plain = add_cube("Plain", location=(-5, 0, 0))

    soup = scene_io.extract_triangles([two_colour, blue_only, plain], depsgraph())

    assert soup.materials == ["Red", "Blue"]  # each name once, in order of first use
    names = np.array(soup.materials + ["<none>"])[soup.material_index]  # -1 → "<none>"
    on_top = triangle_normals(soup)[:, 2] > 0.5
    first = soup.object_index == 0
    assert (names[first & on_top] == "Blue").all() and (first & on_top).sum() == 2
    assert (names[first & ~on_top] == "Red").all()
    assert (names[soup.object_index == 1] == "Blue").all()
    assert (soup.material_index[soup.object_index == 2] == scene_io.NO_MATERIAL).all()
    assert [slots.tolist() for slots in soup.object_slots] == [[0, 1], [1], []]


# --- colours ---------------------------------------------------------------------------


def test_byte_corner_colours_are_linear_and_per_face():
    cube = add_cube()
    mesh = cube.data
    colors = mesh.color_attributes.new("Col", "BYTE_COLOR", "CORNER")
    mesh.color_attributes.active_color = colors
    # sRGB encodes the corner's vertex (0.25 or 0.75 per axis), alpha the face: the
    # same vertex has a different alpha on each face, which a POINT read would lose.
    for polygon in mesh.polygons:
        for corner in polygon.loop_indices:
            position = np.array(mesh.vertices[mesh.loops[corner].vertex_index].co)
            alpha = (face_code(polygon.normal) + 1) / 8
            colors.data[corner].color_srgb = (*(0.5 + 0.25 * position), alpha)

    soup = scene_io.extract_triangles([cube], depsgraph(), with_colors=True)

    assert soup.corner_colors.shape == (12, 3, 4) and soup.corner_colors.dtype == np.float32
    expected_rgb = srgb_to_linear(0.5 + 0.25 * triangle_corners(soup))
    np.testing.assert_allclose(soup.corner_colors[..., :3], expected_rgb, atol=3e-3)
    codes = np.array([face_code(n) for n in triangle_normals(soup)])
    expected_alpha = np.repeat(((codes + 1) / 8)[:, None], 3, axis=1)
    np.testing.assert_allclose(soup.corner_colors[..., 3], expected_alpha, atol=3e-3)


def test_float_point_colours_follow_vertices_of_a_mirrored_object():
    cube = add_cube(location=(2, 0, 0), scale=(-1, 1, 1))
    mesh = cube.data
    colors = mesh.color_attributes.new("Col", "FLOAT_COLOR", "POINT")
    mesh.color_attributes.active_color = colors
    local = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", local)
    rgba = np.concatenate([local.reshape(-1, 3), np.full((len(mesh.vertices), 1), 0.5)], axis=1)
    colors.data.foreach_set("color", rgba.astype(np.float32).ravel())

    soup = scene_io.extract_triangles([cube], depsgraph(), with_colors=True)

    # Undo the transform by hand: x_local = -(x_world - 2); y, z unchanged.
    world = triangle_corners(soup)
    expected_local = np.stack([2 - world[..., 0], world[..., 1], world[..., 2]], axis=-1)
    np.testing.assert_allclose(soup.corner_colors[..., :3], expected_local, atol=1e-6)
    np.testing.assert_allclose(soup.corner_colors[..., 3], 0.5)


def test_objects_without_colours_get_white():
    add_cube()

    soup = scene_io.extract_triangles([bpy.context.active_object], depsgraph(), with_colors=True)

    np.testing.assert_array_equal(soup.corner_colors, np.ones((12, 3, 4), np.float32))


# --- validation and selection ----------------------------------------------------------


def test_non_finite_vertices_raise_naming_the_object():
    cube = add_cube("Broken")
    positions = np.empty((len(cube.data.vertices), 3), dtype=np.float32)
    cube.data.vertices.foreach_get("co", positions.ravel())
    positions[0, 0], positions[3, 2] = np.nan, np.inf
    cube.data.vertices.foreach_set("co", positions.ravel())
    cube.data.update()
    add_cube("Fine", location=(5, 0, 0))

    with pytest.raises(InputError, match=r"'Broken' has 2 vertices with non-finite"):
        scene_io.extract_triangles(bpy.data.objects, depsgraph())


def test_count_non_finite_vertices_counts_rows():
    vertices = np.zeros((5, 3), dtype=np.float32)
    vertices[1] = (np.nan, np.nan, 0)  # one vertex, two bad coordinates
    vertices[4, 2] = -np.inf
    assert scene_io.count_non_finite_vertices(vertices) == 2


def test_only_camera_and_empty_raise_listing_them():
    bpy.ops.object.camera_add()
    bpy.ops.object.empty_add()
    objects = [bpy.data.objects["Camera"], bpy.data.objects["Empty"]]

    for read in (scene_io.geometry_objects, scene_io.extract_triangles):
        with pytest.raises(InputError, match="No selected object has geometry: Camera, Empty"):
            read(objects, depsgraph())


def test_nothing_selected_raises():
    with pytest.raises(InputError, match="No object selected"):
        scene_io.extract_triangles([], depsgraph())


def test_mixed_selection_keeps_geometry_and_names_the_rest():
    cube = add_cube()
    bpy.ops.object.light_add(type="POINT")
    bpy.ops.curve.primitive_bezier_curve_add()  # no bevel or extrude: a bare line
    empty_mesh = bpy.data.objects.new("EmptyMesh", bpy.data.meshes.new("EmptyMesh"))
    bpy.context.scene.collection.objects.link(empty_mesh)
    unlinked = bpy.data.objects.new("Unlinked", bpy.data.meshes.new("Unlinked"))
    objects = [*bpy.context.scene.objects, unlinked]

    selection = scene_io.geometry_objects(objects, depsgraph())
    soup = scene_io.extract_triangles(objects, depsgraph())

    assert selection.objects == [cube]
    assert soup.object_names == ["Cube"] and len(soup.triangles) == 12
    expected_reasons = {
        "Point": "no geometry (light)",
        "BézierCurve": "no faces",
        "EmptyMesh": "no faces",
        "Unlinked": "not in the view layer",
    }
    for skipped in (selection.skipped, soup.skipped):
        assert set(skipped) == set(expected_reasons)
        for name, reason in expected_reasons.items():
            assert skipped[name].startswith(reason)


def test_selected_geometry_reads_the_context_selection():
    add_cube()
    bpy.ops.object.camera_add()  # becomes the only selected object

    with pytest.raises(InputError, match="Camera"):
        scene_io.selected_geometry(bpy.context)
    bpy.data.objects["Cube"].select_set(True)
    selection = scene_io.selected_geometry(bpy.context)

    assert [obj.name for obj in selection.objects] == ["Cube"]
    assert selection.skipped == {"Camera": "no geometry (camera)"}
