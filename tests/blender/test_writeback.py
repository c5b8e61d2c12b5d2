"""Write-back into real headless Blender: values go in through ``addon.writeback`` and come
back out through other routes (RNA collections, evaluated data, Geometry Nodes sampling,
the independent ``tinyvdb`` reader), so a wrong axis order or offset shows up as a wrong
number, not just a missing object."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import bpy
import numpy as np
import pytest

from voxfx.addon import writeback
from voxfx.kernels.errors import InputError, VoxFXError
from voxfx.kernels.grid import GridSpec

from .gn_probe import sample_grid

FIELD_KEYS = {
    "FLOAT": "value",
    "INT": "value",
    "BOOLEAN": "value",
    "FLOAT_VECTOR": "vector",
    "FLOAT_COLOR": "color",
}
FIELD_WIDTH = {"FLOAT_VECTOR": 3, "FLOAT_COLOR": 4}
FIELD_DTYPE = {"INT": np.int32, "BOOLEAN": bool}


def read_attribute(geometry, name):
    """An attribute's values read back with foreach_get, shaped (N,) or (N, width)."""
    attribute = geometry.attributes[name]
    width = FIELD_WIDTH.get(attribute.data_type, 1)
    values = np.empty(
        len(attribute.data) * width, dtype=FIELD_DTYPE.get(attribute.data_type, np.float32)
    )
    attribute.data.foreach_get(FIELD_KEYS[attribute.data_type], values)
    return values.reshape(-1, width) if width > 1 else values


def all_voxels(spec):
    """(N, 3) i, j, k of every voxel, in the order of a C-order [k, j, i] array's ravel()."""
    k, j, i = np.indices(spec.array_shape).reshape(3, -1)
    return np.stack([i, j, k], axis=1)


# ---------------------------------------------------------------------------------------
# Point clouds


def test_point_cloud_attributes_round_trip_for_every_dtype():
    rng = np.random.default_rng(1)
    count = 257
    positions = rng.normal(size=(count, 3))  # float64 in: stored as float32
    given = {
        "temperature": rng.random(count),
        "flake_id": rng.integers(-(2**31), 2**31 - 1, count, dtype=np.int64),
        "on_ground": rng.random(count) < 0.5,
        "velocity": rng.normal(size=(count, 3)).astype(np.float32),
        "tint": rng.random((count, 4)),
    }
    obj = writeback.write_point_cloud("snow", positions, given, radius=0.05)

    cloud = obj.data
    assert obj.type == "POINTCLOUD" and obj.name in bpy.context.scene.collection.objects
    assert len(cloud.points) == count
    # exactly the given attributes: nothing left over from creating the cloud
    types = {a.name: (a.data_type, a.domain) for a in cloud.attributes}
    assert types == {
        "position": ("FLOAT_VECTOR", "POINT"),
        "radius": ("FLOAT", "POINT"),
        "temperature": ("FLOAT", "POINT"),
        "flake_id": ("INT", "POINT"),
        "on_ground": ("BOOLEAN", "POINT"),
        "velocity": ("FLOAT_VECTOR", "POINT"),
        "tint": ("FLOAT_COLOR", "POINT"),
    }
    np.testing.assert_array_equal(read_attribute(cloud, "position"), positions.astype(np.float32))
    np.testing.assert_array_equal(read_attribute(cloud, "radius"), np.full(count, 0.05, np.float32))
    for name, values in given.items():
        expected = values.astype(np.float32) if values.dtype.kind == "f" else values
        np.testing.assert_array_equal(read_attribute(cloud, name), expected)


def test_point_cloud_update_keeps_object_changes_count_and_leaks_nothing():
    rng = np.random.default_rng(2)
    first = writeback.write_point_cloud(
        "flip", rng.random((100, 3)), {"speed": rng.random(100), "age": np.arange(100)}
    )
    material = bpy.data.materials.new("water")
    first.data.materials.append(material)
    data_name = first.data.name

    positions = rng.random((37, 3)).astype(np.float32)
    speed = rng.random(37).astype(np.float32)
    second = writeback.write_point_cloud("flip", positions, {"speed": speed})

    assert second == first
    assert len(second.data.points) == 37
    np.testing.assert_array_equal(read_attribute(second.data, "position"), positions)
    np.testing.assert_array_equal(read_attribute(second.data, "speed"), speed)
    assert "age" not in second.data.attributes  # the cloud holds exactly what was given
    assert list(second.data.materials) == [material]
    assert second.data.name == data_name
    # nothing leaked: no stale point cloud, no conversion mesh or carrier object
    assert (len(bpy.data.pointclouds), len(bpy.data.meshes), len(bpy.data.objects)) == (1, 0, 1)

    same_count_data = second.data
    moved = positions + 1.0
    writeback.write_point_cloud(second, moved, {"age": np.arange(37)})
    assert second.data == same_count_data  # same count: written in place
    np.testing.assert_array_equal(read_attribute(second.data, "position"), moved)
    assert sorted(a.name for a in second.data.attributes) == ["age", "position"]


def test_point_cloud_goes_into_the_given_collection():
    collection = bpy.data.collections.new("VoxFX")
    bpy.context.scene.collection.children.link(collection)
    obj = writeback.write_point_cloud("grains", np.zeros((3, 3)), collection=collection)
    assert list(obj.users_collection) == [collection]


@pytest.mark.parametrize(
    "attributes, radius, message",
    [
        ({"speed": np.zeros(4)}, None, r"shape \(4,\), but the geometry has 5"),
        ({"weights": np.zeros((5, 2))}, None, r"shape \(5, 2\)"),
        ({"position": np.zeros((5, 3))}, None, "reserved"),
        ({"radius": np.zeros(5)}, 0.1, "not both"),
    ],
)
def test_point_cloud_rejects_bad_attributes_before_touching_the_scene(attributes, radius, message):
    with pytest.raises(InputError, match=message):
        writeback.write_point_cloud("bad", np.zeros((5, 3)), attributes, radius=radius)
    assert len(bpy.data.objects) == 0 and len(bpy.data.pointclouds) == 0


def test_point_cloud_rejects_nan_positions_and_a_name_taken_by_another_type():
    positions = np.zeros((2, 3))
    positions[1, 2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        writeback.write_point_cloud("bad", positions)
    bpy.data.objects.new("taken", None)
    with pytest.raises(VoxFXError, match="'taken' is of type EMPTY, not POINTCLOUD"):
        writeback.write_point_cloud("taken", np.zeros((2, 3)))


# ---------------------------------------------------------------------------------------
# Meshes


def read_faces(mesh):
    """(first corner, corner count) per face and the corner→vertex list, via RNA collections."""
    starts = np.empty(len(mesh.polygons), dtype=np.int32)
    sizes = np.empty(len(mesh.polygons), dtype=np.int32)
    corners = np.empty(len(mesh.loops), dtype=np.int32)
    mesh.polygons.foreach_get("loop_start", starts)
    mesh.polygons.foreach_get("loop_total", sizes)
    mesh.loops.foreach_get("vertex_index", corners)
    return starts, sizes, corners


def read_positions(mesh):
    positions = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", positions)
    return positions.reshape(-1, 3)


PRISM = np.array([[0, 0, 0], [2, 0, 0], [0, 1, 0], [0, 0, 3], [2, 0, 3], [0, 1, 3]], dtype=np.float32)
PRISM_TRIANGLES = np.array([[0, 2, 1], [3, 4, 5]])
PRISM_QUADS = np.array([[0, 1, 4, 3], [1, 2, 5, 4], [2, 0, 3, 5]])


@pytest.mark.parametrize("faces", [PRISM_TRIANGLES, PRISM_QUADS], ids=["triangles", "quads"])
def test_mesh_round_trips_vertices_faces_attributes_and_materials(faces):
    rng = np.random.default_rng(3)
    face_count = len(faces)
    heat = rng.random(6)
    normals = rng.normal(size=(face_count, 3)).astype(np.float32)
    materials = np.arange(face_count)[::-1] % 2
    obj = writeback.write_mesh(
        "prism",
        PRISM,
        faces,
        point_attributes={"heat": heat},
        face_attributes={"wind_normal": normals, "cell": np.arange(face_count) * 7},
        material_indices=materials,
    )

    mesh = obj.data
    assert (len(mesh.vertices), len(mesh.polygons)) == (6, face_count)
    np.testing.assert_array_equal(read_positions(mesh), PRISM)
    starts, sizes, corners = read_faces(mesh)
    np.testing.assert_array_equal(sizes, np.full(face_count, faces.shape[1]))
    np.testing.assert_array_equal(corners, faces.ravel())
    np.testing.assert_array_equal(starts, np.arange(face_count) * faces.shape[1])
    assert (mesh.attributes["heat"].domain, mesh.attributes["wind_normal"].domain) == ("POINT", "FACE")
    np.testing.assert_array_equal(read_attribute(mesh, "heat"), heat.astype(np.float32))
    np.testing.assert_array_equal(read_attribute(mesh, "wind_normal"), normals)
    np.testing.assert_array_equal(read_attribute(mesh, "cell"), np.arange(face_count) * 7)
    material_index = np.empty(face_count, dtype=np.int32)
    mesh.polygons.foreach_get("material_index", material_index)
    np.testing.assert_array_equal(material_index, materials)
    assert not mesh.validate(verbose=False)  # validate() returns True when it had to fix something


def test_mesh_with_mixed_face_sizes_and_rebuild_in_place():
    # a triangle, a quad and a pentagon given as one flat corner list
    vertices = np.array([[x, y, 0] for y in range(2) for x in range(5)], dtype=np.float32)
    corners = np.array([0, 1, 5, 1, 2, 7, 6, 2, 3, 4, 9, 8])
    first = writeback.write_mesh("ground", vertices, corners, face_sizes=[3, 4, 5])
    material = bpy.data.materials.new("snow")
    first.data.materials.append(material)

    starts, sizes, read_corners = read_faces(first.data)
    np.testing.assert_array_equal(sizes, [3, 4, 5])
    np.testing.assert_array_equal(starts, [0, 3, 7])
    np.testing.assert_array_equal(read_corners, corners)
    assert len(first.data.edges) == 12  # edges were built (4 shared + 8 on the rim)

    second = writeback.write_mesh("ground", PRISM, PRISM_TRIANGLES)
    assert second == first and list(second.data.materials) == [material]
    assert (len(second.data.vertices), len(second.data.polygons)) == (6, 2)
    assert len(bpy.data.meshes) == 1


@pytest.mark.parametrize(
    "faces, face_sizes, message",
    [
        (np.array([[0, 1, 6]]), None, r"outside 0\.\.5"),
        (np.array([[0, 1]]), None, "k ≥ 3"),
        (np.array([0, 1, 2, 3]), [3, 2], "at least 3"),
        (np.array([0, 1, 2, 3]), [3], "add up to 3 corners"),
        (np.array([[0.0, 1.0, 2.0]]), None, "integer"),
    ],
)
def test_mesh_rejects_bad_faces(faces, face_sizes, message):
    with pytest.raises(InputError, match=message):
        writeback.write_mesh("bad", PRISM, faces, face_sizes=face_sizes)
    assert len(bpy.data.objects) == 0


def newell_normals(positions, faces):
    """Unit normals of (possibly non-planar) polygons: n ∝ Σ v_i × v_(i+1) (Newell's method)."""
    corners = positions[faces]
    normals = np.cross(corners, np.roll(corners, -1, axis=1)).sum(axis=1)
    return normals / np.linalg.norm(normals, axis=1, keepdims=True)


def test_displacement_moves_vertices_exactly_and_keeps_topology():
    obj = writeback.write_mesh("ground", PRISM, PRISM_QUADS, point_attributes={"heat": np.arange(6.0)})
    _ = obj.data.polygon_normals[0].vector  # normals computed (and cached) for the old shape
    displaced = PRISM + np.random.default_rng(4).normal(size=PRISM.shape).astype(np.float32)

    writeback.set_mesh_positions(obj, displaced)

    np.testing.assert_array_equal(read_positions(obj.data), displaced)
    np.testing.assert_array_equal(read_faces(obj.data)[2], PRISM_QUADS.ravel())
    np.testing.assert_array_equal(read_attribute(obj.data, "heat"), np.arange(6.0))
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    np.testing.assert_array_equal(read_positions(evaluated), displaced)  # the scene sees the move
    normals = np.array([n.vector[:] for n in obj.data.polygon_normals])
    np.testing.assert_allclose(
        normals, newell_normals(displaced.astype(np.float64), PRISM_QUADS), atol=1e-5
    )


def test_displacement_with_wrong_count_names_the_mesh_and_changes_nothing():
    obj = writeback.write_mesh("ground", PRISM, PRISM_QUADS)
    with pytest.raises(InputError, match=r"mesh 'ground' has 6 vertices.*\(5, 3\)"):
        writeback.set_mesh_positions(obj, PRISM[:5] + 1)
    np.testing.assert_array_equal(read_positions(obj.data), PRISM)


def test_writes_are_refused_in_edit_mode_without_leaking():
    obj = writeback.write_mesh("ground", PRISM, PRISM_QUADS)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    with pytest.raises(VoxFXError, match="'ground' is in Edit Mode"):
        writeback.set_mesh_positions(obj, PRISM + 1)
    with pytest.raises(VoxFXError, match="'ground' is in Edit Mode"):
        writeback.write_mesh(obj, PRISM, PRISM_TRIANGLES)
    assert (len(bpy.data.objects), len(bpy.data.meshes), len(bpy.data.pointclouds)) == (1, 1, 0)
    bpy.ops.object.mode_set(mode="OBJECT")
    np.testing.assert_array_equal(read_positions(obj.data), PRISM)


def test_point_clouds_while_a_mesh_is_in_edit_mode():
    """Where Blender can size a point cloud directly (PointCloud.resize, bpy 5.2.3) the
    write goes through; before, it can only convert a mesh, which Blender refuses in Edit
    Mode: then the error says so and nothing is left behind."""
    ground = writeback.write_mesh("ground", PRISM, PRISM_QUADS)
    bpy.context.view_layer.objects.active = ground
    bpy.ops.object.mode_set(mode="EDIT")
    if writeback.POINT_CLOUD_RESIZE:
        obj = writeback.write_point_cloud("snow", np.arange(12.0).reshape(4, 3))
        assert obj.type == "POINTCLOUD"
        np.testing.assert_array_equal(read_attribute(obj.data, "position"), np.arange(12.0).reshape(4, 3))
        assert (len(bpy.data.objects), len(bpy.data.meshes), len(bpy.data.pointclouds)) == (2, 1, 1)
    else:
        with pytest.raises(VoxFXError, match="Edit Mode"):
            writeback.write_point_cloud("snow", np.zeros((4, 3)))
        assert (len(bpy.data.objects), len(bpy.data.meshes), len(bpy.data.pointclouds)) == (1, 1, 0)
    bpy.ops.object.mode_set(mode="OBJECT")


# ---------------------------------------------------------------------------------------
# VDB files: arrays → file, checked with the independent tinyvdb reader and in Blender

# Asymmetric on purpose: a transposed axis order cannot go unnoticed.
SMALL = GridSpec(origin=(1.0, -2.0, 0.5), voxel_size=0.5, shape=(7, 5, 3))
# Several 8³ leaves per axis, with a fog volume and a level set of the same ellipsoid.
SPHERE = GridSpec(origin=(-1.0, 0.5, 2.0), voxel_size=0.25, shape=(19, 13, 11))
LEVEL_SET_BACKGROUND = 0.5
FILE_METADATA = {"creator": "VoxFX tests", "frame": 12}


def small_fields():
    rng = np.random.default_rng(5)
    density = rng.random(SMALL.array_shape).astype(np.float32)
    density[density < 0.3] = 0.0  # background voxels, to be stored inactive
    velocity = rng.normal(size=SMALL.array_shape + (3,)).astype(np.float32)
    velocity[0, 0, :] = 0.0
    return density, velocity


def sphere_fields():
    k, j, i = np.indices(SPHERE.array_shape)
    r = np.sqrt(((i - 9) / 9.0) ** 2 + ((j - 6) / 6.5) ** 2 + ((k - 5) / 5.0) ** 2)
    return np.clip(1.0 - r, 0.0, None).astype(np.float32), (r - 0.7).astype(np.float32)


@pytest.fixture(scope="module")
def vdb_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vdb")
    density, velocity = small_fields()
    small = writeback.write_vdb(
        folder / "small.vdb", {"velocity": velocity, "density": density}, SMALL, metadata=FILE_METADATA
    )
    fog, sdf = sphere_fields()
    sphere = writeback.write_vdb(
        folder / "sphere.vdb",
        {"density": fog, "sdf": sdf},
        SPHERE,
        grid_class={"sdf": "LEVEL_SET"},
        background={"sdf": LEVEL_SET_BACKGROUND},
    )
    return {"small": small, "sphere": sphere}


def tinyvdb_grids(path):
    tinyvdb = pytest.importorskip("tinyvdb")  # the independent reader
    file = tinyvdb.open(str(path))
    file.read_grids()
    return {file.grid_name(n): (file.grid_type_name(n), file.grid(n)) for n in range(file.grid_count)}


def tinyvdb_active_values(grid):
    """{(x, y, z): value} of the active voxels of a small float grid."""
    sparse = grid.to_sparse()
    coords = np.frombuffer(sparse["coords"], np.int32).reshape(-1, 3)
    values = np.frombuffer(sparse["values"], np.float32)
    return dict(zip(map(tuple, coords.tolist()), values.tolist()))


def expected_active_values(values, keep):
    return {(i, j, k): values[k, j, i] for k, j, i in zip(*np.nonzero(keep))}


def test_vdb_file_read_by_tinyvdb_has_names_types_transform_and_values(vdb_files):
    density, velocity = small_fields()
    grids = tinyvdb_grids(vdb_files["small"])

    assert {name: kind for name, (kind, _) in grids.items()} == {
        "density": "Tree_float_5_4_3",
        "velocity": "Tree_vec3s_5_4_3",
    }
    for name, (_, grid) in grids.items():
        assert (grid.metadata["name"], grid.metadata["class"]) == (name, "fog volume")
        assert grid.transform["type"] == "uniform_scale_translate"
        np.testing.assert_allclose(grid.transform["voxel_size"], [0.5] * 3)
        # index (0, 0, 0) sits at voxel 0's centre, half a voxel inside the grid's corner
        np.testing.assert_allclose(grid.transform["translation"], [1.25, -1.75, 0.75])
    assert tinyvdb_active_values(grids["density"][1]) == expected_active_values(density, density != 0)
    assert writeback.openvdb_module().readMetadata(str(vdb_files["small"])) == FILE_METADATA
    assert writeback.vdb_recorded_length(vdb_files["small"]) == os.path.getsize(vdb_files["small"])

    # Vector grids: tinyvdb has no sparse view, but the whole grid fits leaf 0, whose
    # 512 values are stored x-slowest (offset = 64 x + 8 y + z).
    tree = grids["velocity"][1].tree
    (leaf,) = [tree.node(n) for n in range(tree.num_nodes) if tree.node(n).level == 3]
    stored = np.frombuffer(leaf.data, np.float32).reshape(8, 8, 8, 3)  # [x, y, z]
    nx, ny, nz = SMALL.shape
    np.testing.assert_array_equal(stored[:nx, :ny, :nz], velocity.transpose(2, 1, 0, 3))


def test_vdb_level_set_and_multi_leaf_fog_read_by_tinyvdb(vdb_files):
    fog, sdf = sphere_fields()
    grids = tinyvdb_grids(vdb_files["sphere"])
    fog_grid, sdf_grid = grids["density"][1], grids["sdf"][1]

    assert tinyvdb_active_values(fog_grid) == expected_active_values(fog, fog != 0)
    assert sdf_grid.metadata["class"] == "level set"
    assert sdf_grid.float_background() == LEVEL_SET_BACKGROUND
    # only the narrow band |d| < background is active; the rest became inside/outside tiles
    band = np.abs(sdf) < LEVEL_SET_BACKGROUND
    assert tinyvdb_active_values(sdf_grid) == expected_active_values(sdf, band)


def test_vdb_loads_in_blender_with_exact_values_at_every_voxel(vdb_files):
    density, velocity = small_fields()
    obj = writeback.load_volume("smoke", vdb_files["small"])
    volume = obj.data

    assert volume.grids.load(), volume.grids.error_message
    assert [(g.name, g.data_type, g.channels) for g in volume.grids] == [
        ("density", "FLOAT", 1),
        ("velocity", "VECTOR_FLOAT", 3),
    ]
    assert volume.velocity_grid == "velocity"  # Blender recognised the motion grid
    voxels = all_voxels(SMALL)
    np.testing.assert_array_equal(sample_grid(obj, "density", indices=voxels), density.ravel())
    np.testing.assert_array_equal(
        sample_grid(obj, "density", points=SMALL.centers(voxels)), density.ravel()
    )
    np.testing.assert_array_equal(
        sample_grid(obj, "velocity", indices=voxels, vector=True), velocity.reshape(-1, 3)
    )


def leaf_bounds(spec, active):
    """Blender's volume bounds: whole 8³ leaves holding active voxels, ± half a voxel."""
    ijk = np.stack(np.nonzero(active)[::-1], axis=1)  # (i, j, k)
    low = (ijk.min(axis=0) // 8) * 8 - 0.5
    high = (ijk.max(axis=0) // 8) * 8 + 7.5
    translation = np.asarray(spec.vdb_translation())
    return translation + low * spec.voxel_size, translation + high * spec.voxel_size


def test_level_set_and_fog_in_blender_match_values_and_leaf_bounds(vdb_files):
    fog, sdf = sphere_fields()
    obj = writeback.load_volume("sphere", vdb_files["sphere"])
    voxels = all_voxels(SPHERE)

    np.testing.assert_array_equal(sample_grid(obj, "density", indices=voxels), fog.ravel())
    # inside the band: the distance; beyond it: ∓background, filled in by sign
    expected_sdf = np.clip(sdf, -LEVEL_SET_BACKGROUND, LEVEL_SET_BACKGROUND)
    np.testing.assert_array_equal(sample_grid(obj, "sdf", indices=voxels), expected_sdf.ravel())

    if bpy.app.version < (5, 0, 0):
        pytest.skip("values checked; before Blender 5.0 a volume's bounds end at the centres of "
                    "the outermost leaf voxels, not at their faces (half a voxel further out)")
    fog_low, fog_high = leaf_bounds(SPHERE, fog != 0)
    sdf_low, sdf_high = leaf_bounds(SPHERE, np.abs(sdf) < LEVEL_SET_BACKGROUND)
    corners = np.array([tuple(c) for c in obj.bound_box])
    np.testing.assert_allclose(corners.min(axis=0), np.minimum(fog_low, sdf_low), atol=1e-5)
    np.testing.assert_allclose(corners.max(axis=0), np.maximum(fog_high, sdf_high), atol=1e-5)


def test_volume_sequence_shows_one_file_per_frame(tmp_path):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (4, 3, 2))
    rng = np.random.default_rng(6)
    frames = {frame: rng.random(spec.array_shape).astype(np.float32) for frame in (3, 4, 5)}
    for frame, density in frames.items():
        writeback.write_vdb(
            writeback.vdb_frame_path(tmp_path, "smoke", frame), {"density": density}, spec
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "smoke_0003.vdb",
        "smoke_0004.vdb",
        "smoke_0005.vdb",
    ]

    obj = writeback.load_volume("smoke", tmp_path / "smoke_0003.vdb", sequence_frames=(3, 3))
    volume = obj.data
    assert (volume.is_sequence, volume.frame_start, volume.frame_duration) == (True, 3, 3)
    voxels = all_voxels(spec)
    for frame, density in frames.items():
        bpy.context.scene.frame_set(frame)
        grids = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data.grids
        assert Path(grids.frame_filepath).name == f"smoke_{frame:04d}.vdb"
        np.testing.assert_array_equal(sample_grid(obj, "density", indices=voxels), density.ravel())
    bpy.context.scene.frame_set(6)  # past the end: CLIP shows nothing
    assert not obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data.grids.is_loaded


def test_volume_path_is_relative_once_the_blend_is_saved(tmp_path, vdb_files):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    (tmp_path / "cache").mkdir()
    target = tmp_path / "cache" / "small.vdb"
    target.write_bytes(Path(vdb_files["small"]).read_bytes())
    obj = writeback.load_volume("smoke", target)
    assert obj.data.filepath == "//cache/small.vdb"
    assert obj.data.grids.load(), obj.data.grids.error_message


def test_sequence_needs_a_frame_number_before_the_extension(tmp_path, vdb_files):
    target = tmp_path / "smoke.vdb"
    target.write_bytes(Path(vdb_files["small"]).read_bytes())
    with pytest.raises(InputError, match="frame number"):
        writeback.load_volume("smoke", target, sequence_frames=(1, 3))
    with pytest.raises(VoxFXError, match="does not exist"):
        writeback.load_volume("smoke", tmp_path / "missing_0001.vdb")


@pytest.mark.parametrize(
    "grids, message",
    [
        ({"density": np.zeros((7, 5, 3), np.float32)}, r"shape \(7, 5, 3\).*\(3, 5, 7\)"),
        ({"density": np.full(SMALL.array_shape, np.nan, np.float32)}, "NaN"),
        ({"": np.zeros(SMALL.array_shape, np.float32)}, "needs a name"),
        ({}, "no grids"),
    ],
)
def test_write_vdb_rejects_bad_grids_and_writes_nothing(tmp_path, grids, message):
    with pytest.raises(InputError, match=message):
        writeback.write_vdb(tmp_path / "out.vdb", grids, SMALL)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------
# Atomic writes. Tests run as root, for whom a read-only mode bit stops nothing, so each
# failure below is one that stops root too.

DENSITY = {"density": np.ones(SMALL.array_shape, np.float32)}


def test_write_into_a_folder_that_cannot_exist_names_the_path(tmp_path):
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("a file, not a folder")
    target = not_a_folder / "smoke.vdb"
    with pytest.raises(VoxFXError, match=f"could not write {target}: Not a directory"):
        writeback.write_vdb(target, DENSITY, SMALL)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_failed_rename_removes_the_temporary_file(tmp_path):
    target = tmp_path / "smoke.vdb"
    target.mkdir()  # a folder in the way: the rename at the end fails
    with pytest.raises(VoxFXError, match=f"could not write {target}"):
        writeback.write_vdb(target, DENSITY, SMALL)
    assert [p.name for p in tmp_path.iterdir()] == ["smoke.vdb"] and target.is_dir()


def test_full_disk_is_detected_and_the_old_file_survives(tmp_path):
    # OpenVDB returns normally from a write cut short; a file-size limit cuts it short
    # the way a full disk does (the write fails with EFBIG instead of ENOSPC).
    resource = pytest.importorskip("resource")  # POSIX only
    target = tmp_path / "smoke.vdb"
    writeback.write_vdb(target, DENSITY, SMALL)
    old_bytes = target.read_bytes()
    big = {"density": np.random.default_rng(7).random((40, 40, 40), dtype=np.float32)}
    big_spec = GridSpec((0, 0, 0), 0.1, (40, 40, 40))

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the signal kills us
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
    try:
        with pytest.raises(VoxFXError, match="incomplete"):
            writeback.write_vdb(target, big, big_spec)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous_handler)

    assert [p.name for p in tmp_path.iterdir()] == ["smoke.vdb"]
    assert target.read_bytes() == old_bytes
    writeback.write_vdb(target, big, big_spec)  # with room again, the same write succeeds
    assert writeback.vdb_recorded_length(target) == os.path.getsize(target) > 64 * 1024
