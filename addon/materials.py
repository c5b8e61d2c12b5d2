"""Materials for the effects' outputs: they show the effect out of the box (artists are
free to replace them; VoxFX only creates them when missing)."""

from __future__ import annotations

import bpy


def surface_color(mat) -> tuple:
    """The colour a material shows: its Principled BSDF's Base Color when that is not
    driven by a texture, else its viewport display colour."""
    tree = mat.node_tree if bpy.app.version >= (5, 0, 0) or mat.use_nodes else None  # 5.0+: always nodes
    bsdf = next((n for n in tree.nodes if n.type == "BSDF_PRINCIPLED"), None) if tree else None
    if bsdf is not None and not bsdf.inputs["Base Color"].is_linked:
        return tuple(bsdf.inputs["Base Color"].default_value)
    return tuple(mat.diffuse_color)


def voxel_color() -> bpy.types.Material:
    """Voxel points of several materials: Cycles shades a point cloud with its first
    material only, so this one shows each point's ``color`` (its source's colour)."""
    mat, tree = _node_material("VoxFX Voxel Color")
    if tree is None:
        return mat
    nodes, links = tree.nodes, tree.links
    bsdf = nodes.get("Principled BSDF")
    color = nodes.new("ShaderNodeAttribute")
    color.attribute_name = "color"
    links.new(color.outputs["Color"], bsdf.inputs["Base Color"])
    bsdf.inputs["Roughness"].default_value = 0.6
    return mat


def _node_material(name):
    mat = bpy.data.materials.get(name)
    if mat is not None:
        return mat, None
    mat = bpy.data.materials.new(name)
    if mat.node_tree is None:  # Blender < 5.0 creates materials without nodes
        mat.use_nodes = True
    return mat, mat.node_tree


def snow() -> bpy.types.Material:
    """Snow whose whiteness and translucency follow the ``depth`` attribute: thin snow
    lets the ground's grey through, deep snow is bright and slightly translucent."""
    mat, tree = _node_material("VoxFX Snow")
    if tree is None:
        return mat
    mat.diffuse_color = (0.95, 0.97, 1.0, 1.0)
    nodes, links = tree.nodes, tree.links
    bsdf = nodes.get("Principled BSDF")
    depth = nodes.new("ShaderNodeAttribute")
    depth.attribute_name = "depth"
    ramp = nodes.new("ShaderNodeMapRange")
    ramp.inputs["From Min"].default_value = 0.0
    ramp.inputs["From Max"].default_value = 0.05  # fully white from 5 cm of snow
    links.new(depth.outputs["Fac"], ramp.inputs["Value"])
    mix = nodes.new("ShaderNodeMix")
    mix.data_type = "RGBA"
    mix.inputs["A"].default_value = (0.45, 0.45, 0.45, 1.0)
    mix.inputs["B"].default_value = (0.95, 0.97, 1.0, 1.0)
    links.new(ramp.outputs["Result"], mix.inputs["Factor"])
    links.new(mix.outputs["Result"], bsdf.inputs["Base Color"])
    bsdf.inputs["Roughness"].default_value = 0.7
    if "Subsurface Weight" in bsdf.inputs:
        links.new(ramp.outputs["Result"], bsdf.inputs["Subsurface Weight"])
    return mat


def flakes() -> bpy.types.Material:
    """Falling snow: white, slightly translucent and soft-edged, so 200k flakes read as
    snowfall rather than hard white dots (motion blur from ``velocity`` does the rest)."""
    mat, tree = _node_material("VoxFX Flakes")
    if tree is None:
        return mat
    mat.diffuse_color = (0.95, 0.97, 1.0, 1.0)
    bsdf = tree.nodes.get("Principled BSDF")
    bsdf.inputs["Base Color"].default_value = (0.95, 0.97, 1.0, 1.0)
    bsdf.inputs["Roughness"].default_value = 0.6
    bsdf.inputs["Alpha"].default_value = 0.75
    if "Subsurface Weight" in bsdf.inputs:
        bsdf.inputs["Subsurface Weight"].default_value = 0.5
    return mat


def liquid() -> bpy.types.Material:
    """Clear water: a glass-like Principled BSDF (transmission 1, IOR 1.33)."""
    mat, tree = _node_material("VoxFX Liquid")
    if tree is None:
        return mat
    mat.diffuse_color = (0.55, 0.75, 0.95, 0.6)
    bsdf = tree.nodes.get("Principled BSDF")
    bsdf.inputs["Base Color"].default_value = (0.85, 0.93, 1.0, 1.0)
    bsdf.inputs["Roughness"].default_value = 0.02
    bsdf.inputs["IOR"].default_value = 1.33
    weight = "Transmission Weight" if "Transmission Weight" in bsdf.inputs else "Transmission"
    bsdf.inputs[weight].default_value = 1.0
    return mat


def volume() -> bpy.types.Material:
    """A Principled Volume whose density is the grid named ``density``."""
    mat, tree = _node_material("VoxFX Volume")
    if tree is None:
        return mat
    nodes, links = tree.nodes, tree.links
    for node in [n for n in nodes if n.type != "OUTPUT_MATERIAL"]:
        nodes.remove(node)
    out = next(n for n in nodes if n.type == "OUTPUT_MATERIAL")
    vol = nodes.new("ShaderNodeVolumePrincipled")
    vol.inputs["Color"].default_value = (0.8, 0.85, 0.9, 1.0)
    vol.inputs["Density Attribute"].default_value = "density"
    vol.inputs["Density"].default_value = 5.0
    links.new(vol.outputs["Volume"], out.inputs["Volume"])
    return mat
