"""Voxelize Selected with the voxel art options, end to end in headless Blender: texture
colours on a checker quad's points, a merged block mesh (a cube becomes six faces; the
colours stay), and a .vox palette from a palette image."""

from __future__ import annotations

import bpy
import numpy as np
import pytest

from voxfx.kernels.voxelize.palette import linear_to_srgb, srgb_to_linear
from voxfx.kernels.voxfile import read_vox

from .helpers import voxfx_registered
from .test_textures_blender import CELLS, checker_image, quad, textured_material


@pytest.fixture
def registered(tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "art.blend"))
    with voxfx_registered():
        s = bpy.context.scene.voxfx.voxelize
        yield s, tmp_path


def select_only(obj):
    for o in bpy.context.selected_objects:
        o.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def colors_of(geometry, name="color"):
    att = geometry.attributes[name]
    out = np.empty(len(att.data) * 4, np.float32)
    att.data.foreach_get("color", out)
    return out.reshape(-1, 4)


def test_texture_colour_source_gives_points_their_checker_cell(registered):
    s, _ = registered
    image, cells = checker_image()
    obj = quad(textured_material(image))
    select_only(obj)
    s.resolution, s.mode, s.color_source = CELLS, "SURFACE", "TEXTURE"
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    points = bpy.data.objects["Quad_voxels"]
    pos = np.empty(len(points.data.points) * 3, np.float32)
    points.data.attributes["position"].data.foreach_get("vector", pos)
    pos = pos.reshape(-1, 3)
    rgba = colors_of(points.data)
    over = (pos[:, 0] > 0) & (pos[:, 0] < 2) & (pos[:, 1] > 0) & (pos[:, 1] < 2)  # centres over the quad
    assert over.sum() == 2 * CELLS * CELLS  # the quad lies on a voxel boundary: two layers
    i, j = np.floor(pos[over, 0] / 0.5).astype(int), np.floor(pos[over, 1] / 0.5).astype(int)
    expected = cells[j, i] / 255.0
    expected[:, :3] = srgb_to_linear(expected[:, :3])
    np.testing.assert_allclose(rgba[over], expected, atol=2e-6)
    assert points.data.materials[0].name == "VoxFX Voxel Color"  # the image needs UVs points lack


def test_merged_block_mesh_of_a_cube_is_six_faces_with_its_colour(registered):
    s, _ = registered
    bpy.ops.mesh.primitive_cube_add(size=2)
    cube = bpy.context.active_object
    mat = bpy.data.materials.new("Blue")
    if mat.node_tree is None:
        mat.use_nodes = True
    mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.1, 0.2, 0.9, 1)
    cube.data.materials.append(mat)
    select_only(cube)
    s.resolution, s.mode = 8, "SOLID_SURFACE"
    s.output_points, s.output_blocks = False, True
    s.greedy_blocks = True
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    blocks = bpy.data.objects["Cube_blocks"]
    assert len(blocks.data.polygons) == 6
    assert not blocks.data.validate()
    np.testing.assert_allclose(colors_of(blocks.data), np.tile([0.1, 0.2, 0.9, 1], (6, 1)), atol=1e-6)
    area = sum(p.area for p in blocks.data.polygons)
    assert area == pytest.approx(6 * 2.5**2, rel=1e-5)  # 10 voxels of 0.25 m a side
    assert [m.name for m in blocks.data.materials] == ["Blue"]


def test_vox_palette_from_an_image(registered):
    s, tmp = registered
    image, cells = checker_image()
    obj = quad(textured_material(image))
    select_only(obj)
    palette_colours = np.array([[255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255]], np.float64)
    pal = bpy.data.images.new("palette", 3, 1, alpha=True)
    pal.pixels.foreach_set((palette_colours / 255.0).astype(np.float32).ravel())
    s.resolution, s.mode, s.color_source = CELLS, "SURFACE", "TEXTURE"
    s.output_points, s.output_vox, s.vox_path = True, True, "//art.vox"
    s.vox_palette, s.vox_palette_image = "IMAGE", pal
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    scene = read_vox(tmp / "art.vox")
    np.testing.assert_array_equal(scene.palette[:3], palette_colours.astype(np.uint8))
    ijk, index = scene.voxels()
    assert len(ijk) == len(bpy.data.objects["Quad_voxels"].data.points)
    assert set(index.tolist()) <= {1, 2, 3}
    # the points keep their full colour: more distinct colours than the palette
    assert len(np.unique(colors_of(bpy.data.objects["Quad_voxels"].data).round(5), axis=0)) > 3


def test_vox_palette_image_not_chosen_is_explained(registered):
    s, _ = registered
    bpy.ops.mesh.primitive_cube_add(size=2)
    select_only(bpy.context.active_object)
    s.output_vox, s.vox_path, s.vox_palette = True, "//x.vox", "IMAGE"
    with pytest.raises(RuntimeError, match="choose a Palette Image"):
        bpy.ops.voxfx.voxelize()


def test_automatic_vox_palette_is_srgb_of_the_colours(registered):
    s, tmp = registered
    bpy.ops.mesh.primitive_cube_add(size=2)
    cube = bpy.context.active_object
    mat = bpy.data.materials.new("Grey")
    if mat.node_tree is None:
        mat.use_nodes = True
    mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.2, 0.2, 0.2, 1)
    cube.data.materials.append(mat)
    select_only(cube)
    s.resolution, s.output_points, s.output_vox, s.vox_path = 8, False, True, "//grey.vox"
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    scene = read_vox(tmp / "grey.vox")
    _, index = scene.voxels()
    assert set(index.tolist()) == {1}
    expected = np.round(linear_to_srgb(np.array([0.2])) * 255)[0]
    assert tuple(scene.palette[0]) == (expected, expected, expected, 255)


def mesh_faces(obj):
    """(sorted rows of corner positions + colour, total area) of a block mesh object."""
    mesh = obj.data
    co = np.empty(3 * len(mesh.vertices), np.float32)
    mesh.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    loops = np.empty(len(mesh.loops), np.int32)
    mesh.loops.foreach_get("vertex_index", loops)
    corners = np.sort(co[loops.reshape(-1, 4)].round(5).reshape(-1, 4, 3), axis=1).reshape(-1, 12)
    rows = np.concatenate([corners, colors_of(mesh).round(6)], 1)
    return rows[np.lexsort(rows.T[::-1])], sum(p.area for p in mesh.polygons)


def test_sparse_result_gets_texture_colours_and_merged_faces_like_dense(registered):
    """The same textured quad voxelized dense and sparse (Sparse: Always): the sparse
    points carry the same texture colours and its merged block mesh has the same faces,
    areas and face colours (before, sparse results kept material colours and one face
    per voxel side, with a warning)."""
    s, _ = registered
    image, _ = checker_image()
    obj = quad(textured_material(image))
    select_only(obj)
    s.resolution, s.mode, s.color_source = 2 * CELLS, "SURFACE", "TEXTURE"
    s.output_points, s.output_blocks, s.greedy_blocks = True, True, True
    got = {}
    for sparse in ("NEVER", "ALWAYS"):
        s.sparse = sparse
        assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
        points = bpy.data.objects["Quad_voxels"].data
        pos = np.empty(3 * len(points.points), np.float32)
        points.attributes["position"].data.foreach_get("vector", pos)
        pos = pos.reshape(-1, 3)
        order = np.lexsort(pos.T[::-1])
        got[sparse] = (pos[order], colors_of(points)[order], *mesh_faces(bpy.data.objects["Quad_blocks"]))
        for name in ("Quad_voxels", "Quad_blocks"):
            bpy.data.objects.remove(bpy.data.objects[name])
    (p0, c0, f0, a0), (p1, c1, f1, a1) = got["NEVER"], got["ALWAYS"]
    np.testing.assert_array_equal(p0, p1)
    np.testing.assert_allclose(c1, c0, atol=1e-6)
    assert len(np.unique(c0.round(5), axis=0)) >= CELLS * CELLS  # texture colours, not one material colour
    assert f0.shape == f1.shape and len(f0) < 2 * (2 * CELLS) ** 2  # merged
    np.testing.assert_allclose(f1, f0, atol=1e-5)
    assert a1 == pytest.approx(a0)


def test_split_job_glue_gives_the_unsplit_art(registered):
    """The add-on's glue for a split job (``voxel_art.slab_art`` from what ``read``
    took from Blender: the node's images, UVs, the palette image) into the z-slab job
    (``compute_group_split``): merged faces, face colours and the .vox equal what the
    unsplit job's ``voxel_art.apply`` gives."""
    from voxfx.addon import vox_export, voxel_art
    from voxfx.addon.operators.voxelize import _material_table
    from voxfx.addon.scene_io import extract_triangles
    from voxfx.kernels.grid import GridSpec
    from voxfx.kernels.voxelize.outputs import compute_group, compute_group_split
    from voxfx.kernels.voxelize.request import Request

    s, tmp = registered
    image, _ = checker_image()
    obj = quad(textured_material(image))
    s.color_source, s.greedy_blocks = "TEXTURE", True
    request = Request(mode="surface", resolution=16, outputs={"blocks", "vox"}, vox_path=str(tmp / "q.vox"))
    depsgraph = bpy.context.evaluated_depsgraph_get()
    soup = extract_triangles([obj], depsgraph, with_colors=True)
    spec = GridSpec((-0.125, -0.125, -0.25), 0.125, (18, 18, 4))
    warnings = []
    art = voxel_art.read(bpy.context, [obj], depsgraph, soup, warnings, request.outputs)
    table = _material_table(soup)
    whole = compute_group("Q", soup, None, spec, request, False, table=table)
    want = voxel_art.apply(whole, soup, spec, request, art, table)
    assert want.blocks.quad_count < want.blocks.faces_before and not warnings

    def write_vox(per_tile, counts, colors, slabs, palette=None):
        return vox_export.write_vox_slabs(tmp / "split.vox", spec.shape, per_tile, counts, colors, slabs,
                                          palette=palette)

    split = compute_group_split("Q", soup, spec, request, False, 1, None, kind="attributes", grid=whole.grid,
                                table=table, write_vox=write_vox,
                                art=voxel_art.slab_art(art, soup, spec, request, table))
    np.testing.assert_array_equal(split.blocks.quads, want.blocks.quads)
    np.testing.assert_array_equal(split.blocks.vertices, want.blocks.vertices)
    np.testing.assert_array_equal(voxel_art.face_attributes(split)["color"], voxel_art.face_attributes(want)["color"])
    assert any("before merging" in w for w in split.warnings)
    voxel_art.write_vox(tmp / "whole.vox", want, spec)
    assert split.vox_file.read_bytes() == (tmp / "whole.vox").read_bytes()
