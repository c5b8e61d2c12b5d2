"""Texture colours in real Blender: a quad with a checker image made here, read through
the material's node tree, the mesh's UV map and ``image.pixels``; every voxel must get
its checker cell's colour (as Blender decodes the 8-bit sRGB image). Mix/Gamma chains
are followed; other set-ups fall back with a warning naming the material."""

from __future__ import annotations

import bpy
import numpy as np
import pytest

from voxfx.addon import scene_io, textures
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.palette import srgb_to_linear

CELLS, TEXELS_PER_CELL = 4, 2


def checker_colours():
    """(CELLS, CELLS, 4) byte colours per cell [row j (v), column i (u)], all distinct."""
    rng = np.random.default_rng(11)
    colours = rng.choice(256, size=(CELLS * CELLS, 3), replace=False).astype(np.float64)
    cells = np.concatenate([colours, np.full((CELLS * CELLS, 1), 255.0)], 1)
    return cells.reshape(CELLS, CELLS, 4)


def checker_image(name="checker"):
    cells = checker_colours()
    pixels = np.repeat(np.repeat(cells, TEXELS_PER_CELL, 0), TEXELS_PER_CELL, 1) / 255.0
    size = CELLS * TEXELS_PER_CELL
    image = bpy.data.images.new(name, size, size, alpha=True)
    image.pixels.foreach_set(pixels.astype(np.float32).ravel())
    return image, cells


def textured_material(image, chain=()):
    mat = bpy.data.materials.new("Checker")
    if mat.node_tree is None:
        mat.use_nodes = True
    nodes, links = mat.node_tree.nodes, mat.node_tree.links
    bsdf = next(n for n in nodes if n.type == "BSDF_PRINCIPLED")
    tex = nodes.new("ShaderNodeTexImage")
    tex.image = image
    out = tex.outputs["Color"]
    for kind in chain:
        if kind == "mix":
            node = nodes.new("ShaderNodeMix")
            node.data_type = "RGBA"
            links.new(out, node.inputs[6])  # A (colour)
            node.inputs[7].default_value = (0.2, 0.3, 0.4, 1.0)  # B, unlinked
            out = node.outputs[2]
        else:
            node = nodes.new("ShaderNodeGamma")
            links.new(out, node.inputs["Color"])
            out = node.outputs["Color"]
    links.new(out, bsdf.inputs["Base Color"])
    return mat


def quad(material, size=2.0):
    mesh = bpy.data.meshes.new("quad")
    mesh.from_pydata([(0, 0, 0), (size, 0, 0), (size, size, 0), (0, size, 0)], [], [(0, 1, 2, 3)])
    uv = mesh.uv_layers.new(name="UVMap")
    uv.uv.foreach_set("vector", np.array([[0, 0], [1, 0], [1, 1], [0, 1]], np.float32).ravel())
    mesh.materials.append(material)
    obj = bpy.data.objects.new("Quad", mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def voxel_colours(obj, warnings):
    depsgraph = bpy.context.evaluated_depsgraph_get()
    soup = scene_io.extract_triangles([obj], depsgraph, with_colors=True)
    spec = GridSpec((0.0, 0.0, -0.25), 2.0 / CELLS, (CELLS, CELLS, 1))  # the quad runs mid-voxel
    grid = voxelize(soup.vertices, soup.triangles, spec, "surface", xp=np)
    ijk = grid.coordinates()
    owner = owner_triangles(soup.vertices, soup.triangles, spec, grid.bits, xp=np)
    inputs = textures.read_textures([obj], depsgraph, soup, warnings)
    base = np.tile(np.float32([0.1, 0.2, 0.3, 1.0]), (len(ijk), 1))
    return ijk, textures.textured_colors(inputs, soup, spec, ijk, owner, base)


@pytest.mark.parametrize("chain", [(), ("mix",), ("gamma", "mix")], ids=["direct", "mix", "gamma+mix"])
def test_every_voxel_gets_its_checker_cell_colour(chain):
    image, cells = checker_image()
    obj = quad(textured_material(image, chain))
    warnings = []
    ijk, rgba = voxel_colours(obj, warnings)
    assert len(ijk) == CELLS * CELLS and not warnings
    expected = cells[ijk[:, 1], ijk[:, 0]] / 255.0  # voxel (i, j) lies over cell (u = i, v = j)
    expected[:, :3] = srgb_to_linear(expected[:, :3])  # an 8-bit sRGB image is decoded to linear
    np.testing.assert_allclose(rgba, expected, atol=2e-6)


def test_named_uv_map_of_a_uv_map_node_is_used():
    image, cells = checker_image()
    mat = textured_material(image)
    tex = next(n for n in mat.node_tree.nodes if n.type == "TEX_IMAGE")
    uvmap = mat.node_tree.nodes.new("ShaderNodeUVMap")
    uvmap.uv_map = "Mirrored"
    mat.node_tree.links.new(uvmap.outputs["UV"], tex.inputs["Vector"])
    obj = quad(mat)
    mirrored = obj.data.uv_layers.new(name="Mirrored")  # u flipped
    mirrored.uv.foreach_set("vector", np.array([[1, 0], [0, 0], [0, 1], [1, 1]], np.float32).ravel())
    ijk, rgba = voxel_colours(obj, [])
    expected = cells[ijk[:, 1], CELLS - 1 - ijk[:, 0]] / 255.0
    expected[:, :3] = srgb_to_linear(expected[:, :3])
    np.testing.assert_allclose(rgba, expected, atol=2e-6)


def test_procedural_base_colour_falls_back_with_a_warning_naming_the_material():
    mat = bpy.data.materials.new("Marble")
    if mat.node_tree is None:
        mat.use_nodes = True
    bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    noise = mat.node_tree.nodes.new("ShaderNodeTexNoise")
    mat.node_tree.links.new(noise.outputs["Color"], bsdf.inputs["Base Color"])
    obj = quad(mat)
    warnings = []
    _, rgba = voxel_colours(obj, warnings)
    assert len(warnings) == 1 and "'Marble'" in warnings[0] and "viewport colour" in warnings[0]
    np.testing.assert_allclose(rgba, np.tile([0.1, 0.2, 0.3, 1.0], (len(rgba), 1)), atol=1e-7)


def test_mesh_without_uv_map_falls_back_with_a_warning():
    image, _ = checker_image()
    obj = quad(textured_material(image))
    obj.data.uv_layers.remove(obj.data.uv_layers["UVMap"])
    warnings = []
    _, rgba = voxel_colours(obj, warnings)
    assert any("'Quad' has no UV map" in w for w in warnings)
    np.testing.assert_allclose(rgba[:, :3], np.tile([0.1, 0.2, 0.3], (len(rgba), 1)), atol=1e-7)


# ------------------------------------------------------------------ interpolation and extension

def gn_image_samples(image, uv, interpolation, extension):
    """(N, 4) colours of *image* at *uv* (N, 2) from Geometry Nodes' own Image Texture
    node set to *interpolation* / *extension*: Blender's sampler, as the oracle."""
    mesh = bpy.data.meshes.new("uv_probe")
    mesh.vertices.add(len(uv))
    position = np.zeros((len(uv), 3), np.float32)
    position[:, :2] = uv
    mesh.attributes["position"].data.foreach_set("vector", position.ravel())
    obj = bpy.data.objects.new("uv_probe", mesh)
    bpy.context.scene.collection.objects.link(obj)
    tree = bpy.data.node_groups.new("uv_probe", "GeometryNodeTree")
    tree.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    tree.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes, link = tree.nodes, tree.links.new
    group_in, group_out = nodes.new("NodeGroupInput"), nodes.new("NodeGroupOutput")
    tex = nodes.new("GeometryNodeImageTexture")
    tex.inputs["Image"].default_value = image
    tex.interpolation, tex.extension = interpolation, extension
    link(nodes.new("GeometryNodeInputPosition").outputs["Position"], tex.inputs["Vector"])
    store = nodes.new("GeometryNodeStoreNamedAttribute")
    store.data_type, store.domain = "FLOAT_COLOR", "POINT"
    store.inputs["Name"].default_value = "probe"
    link(group_in.outputs["Geometry"], store.inputs["Geometry"])
    link(tex.outputs["Color"], store.inputs["Value"])
    link(store.outputs["Geometry"], group_out.inputs["Geometry"])
    obj.modifiers.new("probe", "NODES").node_group = tree
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    out = np.empty(4 * len(uv), np.float32)
    evaluated.attributes["probe"].data.foreach_get("color", out)
    return out.reshape(-1, 4)


@pytest.mark.parametrize("extension", ["REPEAT", "EXTEND", "CLIP", "MIRROR"])
@pytest.mark.parametrize("interpolation", ["Linear", "Closest"])
def test_sampler_matches_blenders_image_texture_node(interpolation, extension):
    """Every interpolation × extension against Blender's own Image Texture node (the
    Geometry Nodes one: the shader node's sampling, evaluable headless), at random UVs
    from −2 to 3 on a float image (linear pixels: no colour conversion on either side).
    Two differences, stated: Geometry Nodes' Closest + Clip keeps the edge texel for u
    in [1, 1 + 1/W) (and v likewise), an off-by-one against the node's own "exterior
    pixels transparent", which VoxFX follows there (left out of the comparison); and
    Geometry Nodes premultiplies its result's colour by its alpha, which for an opaque
    image shows only where a Linear + Clip sample blends with the transparent exterior
    (alpha < 1): there VoxFX keeps the blend of the texels with transparent black, and
    the node gives that times alpha (compared so)."""
    from voxfx.kernels.voxelize.texture import pack_images, sample_images, sampler_code

    rng = np.random.default_rng(5)
    h, w = 5, 7
    pixels = rng.random((h, w, 4)).astype(np.float32)
    pixels[..., 3] = 1  # opaque: Clip's transparent black is then plain to see in alpha
    image = bpy.data.images.new("modes", w, h, alpha=True, float_buffer=True)
    image.pixels.foreach_set(pixels.ravel())
    uv = rng.uniform(-2, 3, size=(3000, 2)).astype(np.float32)
    expected = gn_image_samples(image, uv, interpolation, extension)
    start, width, height, flat = pack_images([pixels])
    packed = (start, width, height, np.array([sampler_code(interpolation, extension)], np.int32), flat)
    got = sample_images(uv[:, 0], uv[:, 1], np.zeros(len(uv), np.int64), packed)
    keep = np.ones(len(uv), bool)
    if (interpolation, extension) == ("Closest", "CLIP"):
        keep = (np.floor(uv[:, 0] * w) != w) & (np.floor(uv[:, 1] * h) != h)
        assert (~keep).sum() > 10 and (got[~keep] == 0).all()
    premultiplied = got.copy()
    premultiplied[:, :3] *= got[:, 3:]
    np.testing.assert_allclose(premultiplied[keep], expected[keep], rtol=0, atol=2e-6)
    opaque = got[:, 3] == 1
    assert opaque.sum() > 50
    np.testing.assert_array_equal(got[opaque], premultiplied[opaque])  # ours itself where nothing is clipped
    if extension == "CLIP":
        assert (expected[keep][:, 3] == 0).sum() > 100  # the oracle really clipped


def test_closest_extend_node_gives_voxels_past_the_uv_square_the_edge_cells():
    """A checker quad whose UVs run from −0.5 to 1.5: with Closest and Extend, the
    voxels over the outer half get the edge cells' colours, unblended."""
    image, cells = checker_image()
    mat = textured_material(image)
    tex = next(n for n in mat.node_tree.nodes if n.type == "TEX_IMAGE")
    tex.interpolation, tex.extension = "Closest", "EXTEND"
    obj = quad(mat)
    obj.data.uv_layers["UVMap"].uv.foreach_set(
        "vector", np.array([[-0.5, -0.5], [1.5, -0.5], [1.5, 1.5], [-0.5, 1.5]], np.float32).ravel())
    warnings = []
    ijk, rgba = voxel_colours(obj, warnings)
    assert not warnings
    # voxel i covers u in [i/2 − 1/2, i/2): its centre at u = i/2 − 1/4 → cell ⌊4u⌋ clamped to 0..3
    cell = np.clip(np.floor(4 * (ijk[:, :2] / 2 - 0.25)).astype(int), 0, CELLS - 1)
    expected = cells[cell[:, 1], cell[:, 0]] / 255.0
    expected[:, :3] = srgb_to_linear(expected[:, :3])
    np.testing.assert_allclose(rgba, expected, atol=2e-6)


def test_cubic_node_is_sampled_as_linear_with_a_warning():
    image, cells = checker_image()
    mat = textured_material(image)
    next(n for n in mat.node_tree.nodes if n.type == "TEX_IMAGE").interpolation = "Cubic"
    warnings = []
    ijk, rgba = voxel_colours(quad(mat), warnings)
    assert warnings == ["Material 'Checker': its image's Cubic interpolation is sampled as Linear"]
    expected = cells[ijk[:, 1], ijk[:, 0]] / 255.0  # cell centres: Linear gives the cell colour
    expected[:, :3] = srgb_to_linear(expected[:, :3])
    np.testing.assert_allclose(rgba, expected, atol=2e-6)
