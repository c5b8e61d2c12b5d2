"""Block meshes in real Blender: written with ``writeback.write_mesh`` and read back through
Blender's own views of the mesh (polygon normals and areas, ``validate``, bmesh manifold
test and signed volume), so a winding or welding mistake shows as Blender sees it."""

from __future__ import annotations

import bpy
import bmesh  # noqa: I001 - importable only once bpy is
import numpy as np

from voxfx.addon import writeback
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize.blocks import DIRECTIONS, exterior_faces


def write_blocks(dense, spec, materials_per_voxel=None, slots=0):
    mesh = exterior_faces(bitgrid.pack(dense), spec)
    material_indices = None if materials_per_voxel is None else materials_per_voxel[mesh.voxel_of_face]
    obj = writeback.write_mesh("Blocks", mesh.vertices, mesh.quads, material_indices=material_indices)
    for slot in range(slots):
        obj.data.materials.append(bpy.data.materials.new(f"voxel material {slot}"))
    return obj, mesh


def polygon_array(mesh, field, width, dtype=np.float32):
    values = np.empty(len(mesh.polygons) * width, dtype=dtype)
    mesh.polygons.foreach_get(field, values)
    return values.reshape(-1, width) if width > 1 else values


def two_boxes():
    """An L of two overlapping boxes: closed, no voxels touching only along an edge."""
    dense = np.zeros((6, 7, 9), dtype=bool)  # [k, j, i] over 9 × 7 × 6 voxels
    dense[1:5, 1:3, 1:8] = True
    dense[1:3, 1:6, 1:4] = True
    return dense


def test_block_mesh_in_blender_is_valid_closed_and_faces_outward():
    dense = two_boxes()
    nz, ny, nx = dense.shape
    spec = GridSpec((-1.0, 0.5, 2.0), 0.2, (nx, ny, nz))
    obj, blocks = write_blocks(dense, spec)
    mesh = obj.data
    assert len(mesh.polygons) == len(blocks.quads)
    assert len(mesh.vertices) == len(blocks.vertices)
    assert mesh.validate(verbose=False) is False  # nothing to repair

    normals = polygon_array(mesh, "normal", 3)
    assert np.allclose(normals, DIRECTIONS[blocks.direction_of_face], atol=1e-5)
    area = polygon_array(mesh, "area", 1)
    assert np.allclose(area, spec.voxel_size**2, rtol=1e-4)

    bm = bmesh.new()
    try:
        bm.from_mesh(mesh)
        assert all(edge.is_manifold for edge in bm.edges)
        assert all(edge.is_contiguous for edge in bm.edges)  # neighbours wound consistently
        # Outward normals make the signed volume positive and equal to the voxels' volume.
        volume = bm.calc_volume(signed=True)
        assert abs(volume - dense.sum() * spec.voxel_size**3) < 1e-5
    finally:
        bm.free()


def test_random_voxels_validate_and_normals_point_into_empty_space():
    rng = np.random.default_rng(21)
    dense = rng.random((5, 6, 35)) < 0.4
    nz, ny, nx = dense.shape
    spec = GridSpec((0.0, 0.0, 0.0), 0.5, (nx, ny, nz))
    obj, blocks = write_blocks(dense, spec)
    mesh = obj.data
    assert len(mesh.polygons) == len(blocks.quads)
    assert mesh.validate(verbose=False) is False
    centres = polygon_array(mesh, "center", 3)
    normals = polygon_array(mesh, "normal", 3)
    # Half a voxel along the normal is the centre of an empty (or outside) voxel, half a
    # voxel against it the centre of a set one.
    outside = np.floor((centres + 0.25 * normals) / spec.voxel_size).astype(int)
    inside = np.floor((centres - 0.25 * normals) / spec.voxel_size).astype(int)
    assert dense[inside[:, 2], inside[:, 1], inside[:, 0]].all()
    within = np.all((outside >= 0) & (outside < (nx, ny, nz)), axis=1)
    assert not dense[outside[within, 2], outside[within, 1], outside[within, 0]].any()


def test_material_indices_come_from_each_face_voxel():
    dense = two_boxes()
    nz, ny, nx = dense.shape
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (nx, ny, nz))
    k, j, i = np.nonzero(dense)  # the order voxel_of_face indexes
    material_of_voxel = (i >= 4).astype(np.int32) + 2 * (k >= 3)  # four slots by position
    obj, blocks = write_blocks(dense, spec, material_of_voxel, slots=4)
    mesh = obj.data
    assert mesh.validate(verbose=False) is False
    got = polygon_array(mesh, "material_index", 1, dtype=np.int32)
    # Independent expectation: the voxel behind each Blender polygon, found from its centre.
    centres = polygon_array(mesh, "center", 3)
    normals = polygon_array(mesh, "normal", 3)
    behind = np.floor(centres - 0.5 * normals).astype(int)
    expected = (behind[:, 0] >= 4).astype(np.int32) + 2 * (behind[:, 2] >= 3)
    assert (got == expected).all()
    assert set(got.tolist()) == {0, 1, 2, 3}
