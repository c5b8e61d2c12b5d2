"""Base-colour image textures of the selection, for texture colours (kernels/voxelize/texture.py).

    inputs = read_textures(objects, depsgraph, soup, warnings)   # main thread (bpy)
    rgba = textured_colors(inputs, soup, spec, ijk, owner, base_rgba)   # arrays: any thread

A material is textured when its Principled BSDF's Base Color comes from an Image Texture
node, directly or through simple chains of Mix (colour) and Gamma nodes (the first linked
colour input of each is followed; their own effect on the colour is not applied). The
image node's UV map is the one named by a UV Map node on its Vector input, else the
mesh's active render UV map, as Blender renders it. The image is sampled as the node
says: its interpolation (Linear or Closest; Cubic and Smart are sampled as Linear, with a
note naming the material) and extension (Repeat, Extend, Clip or Mirror); an image used
by two nodes of different settings is sampled each way (its pixels held once). Other
set-ups (no image, procedural textures, an image without pixels, a mesh without UV map)
keep the viewport / Base Color colour and add one warning naming the material (or
object).

Pixels come through ``image.pixels.foreach_get`` in Blender's order (bottom row first).
8-bit images in the sRGB colour space are converted to linear, as Blender does before
it filters them; float images are scene-linear already.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..kernels.voxelize.palette import srgb_to_linear
from ..kernels.voxelize.texture import EXTENSIONS, TexturedMesh, sampler_code
from . import scene_io

_FOLLOW = {"MIX", "MIX_RGB", "GAMMA"}


@dataclass
class TextureInputs:
    """Per triangle of a soup: its corner UVs and image, and the images' pixels."""

    uvs: np.ndarray  # (T, 3, 2) float32
    image_of_triangle: np.ndarray  # (T,) int32, −1 where the material is not textured
    images: list = field(default_factory=list)  # (H, W, 4) float32 linear RGBA, per (image, sampler)
    image_names: list = field(default_factory=list)
    samplers: list = field(default_factory=list)  # texture.sampler_code per entry of images

    @property
    def any(self) -> bool:
        return bool(len(self.image_of_triangle)) and bool((self.image_of_triangle >= 0).any())


def base_color_image(material):
    """(image node, None) when *material*'s Base Color comes from an Image Texture through
    simple Mix/Gamma chains, else (None, why not)."""
    tree = getattr(material, "node_tree", None)
    if tree is None:
        return None, "it has no node tree"
    bsdf = next((n for n in tree.nodes if n.type == "BSDF_PRINCIPLED"), None)
    if bsdf is None:
        return None, "it has no Principled BSDF"
    socket = bsdf.inputs["Base Color"]
    for _ in range(16):  # a chain longer than this is not "simple"
        if not socket.is_linked:
            return None, "its Base Color is not linked to an image texture"
        node = socket.links[0].from_node
        if node.type == "TEX_IMAGE":
            if node.image is None:
                return None, "its Image Texture node has no image"
            return node, None
        if node.type not in _FOLLOW:
            return None, f"its Base Color comes from a {node.bl_label} node"
        socket = _colour_input(node)
        if socket is None:
            return None, f"its {node.bl_label} node has no linked colour input"
    return None, "its Base Color node chain is too long"


def _colour_input(node):
    """The first linked colour input of a Mix / MixRGB / Gamma node."""
    for socket in node.inputs:
        if socket.type == "RGBA" and socket.enabled and socket.is_linked:
            return socket
    return None


def image_pixels(image) -> np.ndarray:
    """(H, W, 4) float32 linear RGBA of *image* (bottom row first)."""
    width, height = image.size
    if width == 0 or height == 0:
        raise ValueError("the image has no pixels (is its file missing?)")
    pixels = np.empty(width * height * 4, np.float32)
    image.pixels.foreach_get(pixels)
    pixels = pixels.reshape(height, width, 4)
    if not image.is_float and image.colorspace_settings.name == "sRGB":
        pixels[..., :3] = srgb_to_linear(pixels[..., :3])
    return pixels


def node_sampler(node, material: str, warnings: list) -> int:
    """``texture.sampler_code`` of an Image Texture node's interpolation and extension;
    Cubic and Smart are sampled as Linear, said once per material."""
    interpolation, extension = node.interpolation, node.extension
    if interpolation not in ("Linear", "Closest"):
        warnings.append(f"Material '{material}': its image's {interpolation} interpolation is sampled as Linear")
        interpolation = "Linear"
    if extension not in EXTENSIONS:  # a newer Blender's mode: the node's default
        warnings.append(f"Material '{material}': its image's {extension} extension is sampled as Repeat")
        extension = "REPEAT"
    return sampler_code(interpolation, extension)


def _uv_map_name(image_node):
    vector = image_node.inputs.get("Vector")
    if vector is not None and vector.is_linked:
        source = vector.links[0].from_node
        if source.type == "UVMAP" and source.uv_map:
            return source.uv_map
    return None


def read_textures(objects, depsgraph, soup, warnings: list) -> TextureInputs:
    """Texture inputs for *soup*, made by ``scene_io.extract_triangles(objects, depsgraph)``
    (same objects, same frame: the triangles come in the same order). Main thread."""
    t_total = len(soup.triangles)
    uvs = np.zeros((t_total, 3, 2), np.float32)
    image_of_triangle = np.full(t_total, -1, np.int32)
    inputs = TextureInputs(uvs, image_of_triangle)
    material_image, material_uv, pixels_of = {}, {}, {}
    for m, name in enumerate(soup.materials):
        material = _material(name)
        node, why = base_color_image(material) if material is not None else (None, "it is missing")
        if node is None:
            if material is not None and why != "its Base Color is not linked to an image texture":
                warnings.append(f"Material '{name}': no texture colours ({why}); using its viewport colour")
            continue
        try:
            if node.image.name not in pixels_of:
                pixels_of[node.image.name] = image_pixels(node.image)
        except ValueError as error:
            warnings.append(f"Material '{name}': no texture colours ({error}); using its viewport colour")
            continue
        sampler = node_sampler(node, name, warnings)
        key = (node.image.name, sampler)
        if key not in zip(inputs.image_names, inputs.samplers):
            inputs.image_names.append(node.image.name)
            inputs.samplers.append(sampler)
            inputs.images.append(pixels_of[node.image.name])  # the same array: stored once (pack_images)
        material_image[m] = list(zip(inputs.image_names, inputs.samplers)).index(key)
        material_uv[m] = _uv_map_name(node)
    if not material_image:
        return inputs

    sources, _ = scene_io._evaluate_all(objects, depsgraph)
    try:
        start = 0
        for i, source in enumerate(sources):
            count = source.triangle_count
            rows = slice(start, start + count)
            start += count
            materials_here = soup.material_index[rows]
            wanted = {m for m in np.unique(materials_here).tolist() if m in material_image}
            if not wanted:
                continue
            corners = scene_io._read_triangle_corners(source.mesh, flip=scene_io._is_mirrored(source.evaluated))
            for m in wanted:
                uv_values = _corner_uvs(source.mesh, material_uv[m])
                if uv_values is None:
                    warnings.append(f"Object '{soup.object_names[i]}' has no UV map"
                                    + (f" '{material_uv[m]}'" if material_uv[m] else "")
                                    + f": material '{soup.materials[m]}' uses its viewport colour there")
                    continue
                mine = np.flatnonzero(materials_here == m)
                uvs[rows][mine] = uv_values[corners[mine]]
                image_of_triangle[rows][mine] = material_image[m]
        if start != t_total:
            raise ValueError("the scene changed between reading triangles and textures")
    finally:
        scene_io._release(sources)
    return inputs


def _material(name):
    import bpy

    return bpy.data.materials.get(name)


def _corner_uvs(mesh, name):
    """(loops, 2) float32 UVs of the named UV map, else the active render one; None if none."""
    layers = mesh.uv_layers
    layer = layers.get(name) if name else next((uv for uv in layers if uv.active_render), None)
    if layer is None and not name and len(layers):
        layer = layers.active
    if layer is None:
        return None
    values = np.empty(len(mesh.loops) * 2, np.float32)
    layer.uv.foreach_get("vector", values)
    return values.reshape(-1, 2)


def textured_mesh(inputs: TextureInputs, soup):
    """The kernels' ``TexturedMesh`` of *soup* with these inputs (None when nothing is
    textured): prepared once, for a whole grid, its z-slabs or its brick chunks."""
    if not inputs.any:
        return None
    return TexturedMesh(soup.vertices, soup.triangles, inputs.uvs, inputs.image_of_triangle, inputs.images,
                        inputs.samplers)


def textured_colors(inputs: TextureInputs, soup, spec, ijk, owner, base_rgba, xp=None):
    """*base_rgba* (N, 4) with textured voxels' colours replaced by their texture's colour
    at the closest point of their owner triangle. Arrays only: any thread."""
    mesh = textured_mesh(inputs, soup)
    if mesh is None:
        return base_rgba
    return mesh.recolor(spec, ijk, owner, base_rgba, xp or np)
