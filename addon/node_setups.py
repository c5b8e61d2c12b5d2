"""Geometry Nodes set-ups that show cached frames.

Each tree has a boolean input "Loaded by VoxFX" (off by default). On: the frame's data
is in the modifier object's own mesh, put there by ``frame_loader`` on every frame
change (memory holds one frame). Off: the tree reads the file of the current frame
itself with the Import PLY / Import VDB nodes, which works without VoxFX installed but
leaves every frame read in Blender's memory cache (up to *Memory Cache Limit*). The
switch is lazy: the import branch is not evaluated while the input is on.

* ``points_from_ply_sequence``: per-frame PLY point files → a point cloud with the
  files' attributes (vector attributes re-assembled from their _x/_y/_z columns).
* ``surface_from_depth_sequence``: a ground mesh lifted by a per-frame depth grid
  (a one-layer VDB), depth stored as an attribute, zero-depth points removed.

File names are ``<prefix><frame, 4 digits>.<ext>`` (frames 0–9999), as written by
``cache.BakeCache``.
"""

from __future__ import annotations

import bpy


# Before Blender 5.0, Grid to Mesh (and Volume to Mesh) put the surface half a voxel off
# along +x, +y and +z of the grid (measured with bpy 4.5.15: a level-set ball comes out
# centred at its true centre + 0.5 voxel; bpy 5.0.1 meshes it in place). Sample Grid is
# right in both, so only the mesh is moved back.
MESHER_HALF_VOXEL_OFF = bpy.app.version < (5, 0, 0)


def _frame_path(tree, prefix: str, suffix: str):
    """A string socket with prefix + frame (zero-padded to 4) + suffix."""
    nodes, links = tree.nodes, tree.links
    time = nodes.new("GeometryNodeInputSceneTime")
    add = nodes.new("ShaderNodeMath")
    add.operation = "ADD"
    add.inputs[1].default_value = 10000.0  # 7 → 10007: fixed width before slicing off the 1
    links.new(time.outputs["Frame"], add.inputs[0])
    rounded = nodes.new("ShaderNodeMath")
    rounded.operation = "ROUND"
    links.new(add.outputs[0], rounded.inputs[0])
    text = nodes.new("FunctionNodeValueToString")
    links.new(rounded.outputs[0], text.inputs["Value"])
    cut = nodes.new("FunctionNodeSliceString")
    cut.inputs["Position"].default_value = 1
    cut.inputs["Length"].default_value = 4
    links.new(text.outputs[0], cut.inputs["String"])
    join = nodes.new("GeometryNodeStringJoin")
    head = nodes.new("FunctionNodeInputString")
    head.string = prefix
    tail = nodes.new("FunctionNodeInputString")
    tail.string = suffix
    # A new link to a multi-input socket goes first (Blender 4.2–5.0): link back to front.
    links.new(tail.outputs[0], join.inputs["Strings"])
    links.new(cut.outputs[0], join.inputs["Strings"])
    links.new(head.outputs[0], join.inputs["Strings"])
    return join.outputs[0]


LOADED_INPUT = "Loaded by VoxFX"


def _new_tree(name):
    tree = bpy.data.node_groups.new(name, "GeometryNodeTree")
    tree.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    tree.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    loaded = tree.interface.new_socket(LOADED_INPUT, in_out="INPUT", socket_type="NodeSocketBool")
    loaded.default_value = False
    loaded.description = ("On: VoxFX puts each frame into this object's mesh (memory holds one frame). "
                          "Off: the tree reads the frame's file itself (works without VoxFX; Blender keeps "
                          "every frame read, up to its Memory Cache Limit)")
    return tree, tree.nodes.new("NodeGroupInput"), tree.nodes.new("NodeGroupOutput")


def _switch(tree, gin, data_type, from_files, from_mesh):
    """A Switch: the object's own mesh data when "Loaded by VoxFX" is on, else the files'."""
    switch = tree.nodes.new("GeometryNodeSwitch")
    switch.input_type = data_type
    tree.links.new(gin.outputs[LOADED_INPUT], switch.inputs["Switch"])
    tree.links.new(from_files, switch.inputs["False"])
    tree.links.new(from_mesh, switch.inputs["True"])
    return switch.outputs[0]


def _named_attribute(tree, name):
    """A Named Attribute node reading the float attribute *name*."""
    attr = tree.nodes.new("GeometryNodeInputNamedAttribute")
    attr.data_type = "FLOAT"
    attr.inputs["Name"].default_value = name
    return attr


def _store_point_attribute(tree, data_type, name, geometry, value):
    """*geometry* with *value* stored as the point attribute *name* (a Store Named Attribute node)."""
    store = tree.nodes.new("GeometryNodeStoreNamedAttribute")
    store.data_type = data_type
    store.domain = "POINT"
    store.inputs["Name"].default_value = name
    tree.links.new(geometry, store.inputs["Geometry"])
    tree.links.new(value, store.inputs["Value"])
    return store.outputs[0]


def _named_grid(tree, volume, data_type, name):
    """A Get Named Grid node taking the grid *name* (*data_type*) out of the *volume* socket."""
    get = tree.nodes.new("GeometryNodeGetNamedGrid")
    get.data_type = data_type
    get.inputs["Name"].default_value = name
    tree.links.new(volume, get.inputs["Volume"])
    return get


def _with_material(tree, geometry, material):
    """*geometry* given *material* (geometry made inside a node tree has no material slots of
    its own); unchanged when *material* is None."""
    if material is None:
        return geometry
    paint = tree.nodes.new("GeometryNodeSetMaterial")
    paint.inputs["Material"].default_value = material
    tree.links.new(geometry, paint.inputs["Geometry"])
    return paint.outputs[0]


def points_from_ply_sequence(name: str, prefix: str, vectors=("velocity",), radius_attribute="size", material=None):
    """Node tree: import ``prefix####.ply`` of the current frame as a point cloud. The
    modifier input "Viewport Fraction" thins the points in the viewport only (renders
    always get all of them). With "Loaded by VoxFX" on, the points are the vertices of
    the object's mesh (``frame_loader`` kind ``points``), with vector attributes whole."""
    tree, gin, out = _new_tree(name)
    fraction = tree.interface.new_socket("Viewport Fraction", in_out="INPUT", socket_type="NodeSocketFloat")
    fraction.default_value, fraction.min_value, fraction.max_value = 1.0, 0.0, 1.0
    nodes, links = tree.nodes, tree.links
    imp = nodes.new("GeometryNodeImportPLY")
    links.new(_frame_path(tree, prefix, ".ply"), imp.inputs["Path"])
    radius = _named_attribute(tree, radius_attribute)
    to_points = nodes.new("GeometryNodeMeshToPoints")
    links.new(imp.outputs[0], to_points.inputs["Mesh"])
    links.new(radius.outputs["Attribute"], to_points.inputs["Radius"])
    geometry = to_points.outputs[0]
    for vec in vectors:
        combine = nodes.new("ShaderNodeCombineXYZ")
        for axis in "XYZ":
            attr = _named_attribute(tree, f"{vec}_{axis.lower()}")
            links.new(attr.outputs["Attribute"], combine.inputs[axis])
        geometry = _store_point_attribute(tree, "FLOAT_VECTOR", vec, geometry, combine.outputs[0])
    own = nodes.new("GeometryNodeMeshToPoints")
    links.new(gin.outputs[0], own.inputs["Mesh"])
    links.new(radius.outputs["Attribute"], own.inputs["Radius"])
    geometry = _switch(tree, gin, "GEOMETRY", geometry, own.outputs[0])
    # Viewport thinning: drop a point when in the viewport and its random value ≥ fraction.
    rnd = nodes.new("FunctionNodeRandomValue")
    rnd.data_type = "FLOAT"
    above = nodes.new("FunctionNodeCompare")
    above.data_type = "FLOAT"
    above.operation = "GREATER_EQUAL"
    links.new(rnd.outputs["Value"], above.inputs[0])
    links.new(gin.outputs["Viewport Fraction"], above.inputs[1])
    both = nodes.new("FunctionNodeBooleanMath")
    both.operation = "AND"
    links.new(nodes.new("GeometryNodeIsViewport").outputs[0], both.inputs[0])
    links.new(above.outputs["Result"], both.inputs[1])
    thin = nodes.new("GeometryNodeDeleteGeometry")
    thin.domain = "POINT"
    links.new(geometry, thin.inputs["Geometry"])
    links.new(both.outputs[0], thin.inputs["Selection"])
    links.new(_with_material(tree, thin.outputs[0], material), out.inputs[0])
    return tree


def surface_from_depth_sequence(name: str, prefix: str, layer_z: float, grid="depth", min_depth=1e-4, lift=0.001):
    """Node tree: lift the input mesh by the depth grid of ``prefix####.vdb`` sampled at
    (x, y, layer_z), plus a constant *lift* (1 mm, so thin snow never lies in the
    terrain's own surface and flickers); store ``depth``; drop faces whose corners
    average ≤ *min_depth*. With "Loaded by VoxFX" on, the depth is the mesh's own
    ``depth`` attribute (``frame_loader`` kind ``depth``)."""
    tree, gin, out = _new_tree(name)
    nodes, links = tree.nodes, tree.links
    imp = nodes.new("GeometryNodeImportVDB")
    links.new(_frame_path(tree, prefix, ".vdb"), imp.inputs["Path"])
    get = _named_grid(tree, imp.outputs[0], "FLOAT", grid)
    pos = nodes.new("GeometryNodeInputPosition")
    sep = nodes.new("ShaderNodeSeparateXYZ")
    links.new(pos.outputs[0], sep.inputs[0])
    at = nodes.new("ShaderNodeCombineXYZ")
    links.new(sep.outputs["X"], at.inputs["X"])
    links.new(sep.outputs["Y"], at.inputs["Y"])
    at.inputs["Z"].default_value = layer_z
    sample = nodes.new("GeometryNodeSampleGrid")
    links.new(get.outputs["Grid"], sample.inputs["Grid"])
    links.new(at.outputs[0], sample.inputs["Position"])
    own = _named_attribute(tree, "depth")
    depth = _switch(tree, gin, "FLOAT", sample.outputs["Value"], own.outputs["Attribute"])
    stored_depth = _store_point_attribute(tree, "FLOAT", "depth", gin.outputs[0], depth)
    raised = nodes.new("ShaderNodeMath")
    raised.operation = "ADD"
    raised.inputs[1].default_value = lift
    links.new(depth, raised.inputs[0])
    offset = nodes.new("ShaderNodeCombineXYZ")
    links.new(raised.outputs[0], offset.inputs["Z"])
    move = nodes.new("GeometryNodeSetPosition")
    links.new(stored_depth, move.inputs["Geometry"])
    links.new(offset.outputs[0], move.inputs["Offset"])
    # Faces whose corners all lack snow go (the face-domain average of the stored point
    # attribute is ≤ min_depth only then); faces at the edge of a snowy area stay.
    stored = _named_attribute(tree, "depth")
    thin = nodes.new("FunctionNodeCompare")
    thin.data_type = "FLOAT"
    thin.operation = "LESS_EQUAL"
    thin.inputs[1].default_value = min_depth
    links.new(stored.outputs["Attribute"], thin.inputs[0])
    drop = nodes.new("GeometryNodeDeleteGeometry")
    drop.domain = "FACE"
    links.new(move.outputs[0], drop.inputs["Geometry"])
    links.new(thin.outputs["Result"], drop.inputs["Selection"])
    links.new(drop.outputs[0], out.inputs[0])
    return tree


def attach(obj, tree, name="VoxFX"):
    """Put *tree* on *obj* as its (only) VoxFX Geometry Nodes modifier."""
    mod = obj.modifiers.get(name) or obj.modifiers.new(name, "NODES")
    mod.node_group = tree
    return mod


def _input_identifier(mod, socket_name: str):
    return next(i.identifier for i in mod.node_group.interface.items_tree
                if getattr(i, "in_out", "") == "INPUT" and i.name == socket_name)


def set_input(mod, socket_name: str, value) -> None:
    """Set a Geometry Nodes modifier input by its socket name."""
    identifier = _input_identifier(mod, socket_name)
    properties = getattr(mod, "properties", None)
    if properties is not None and hasattr(properties, "inputs"):  # Blender ≥ 5.2: typed properties
        getattr(properties.inputs, identifier).value = value
    else:  # ≤ 5.1: ID properties on the modifier
        mod[identifier] = value


def get_input(mod, socket_name: str):
    """A Geometry Nodes modifier input's value, by its socket name."""
    identifier = _input_identifier(mod, socket_name)
    properties = getattr(mod, "properties", None)
    if properties is not None and hasattr(properties, "inputs"):
        return getattr(properties.inputs, identifier).value
    return mod.get(identifier)


def liquid_surface_from_vdb_sequence(name: str, prefix: str, surface="surface", velocity="velocity", material=None):
    """Node tree: mesh the level set *surface* of ``prefix####.vdb`` at its zero crossing
    (Grid to Mesh, threshold 0), store the *velocity* grid sampled at the vertices as the
    ``velocity`` attribute (motion blur), and give it *material* (geometry made inside a
    node tree has no material slots of its own). With "Loaded by VoxFX" on, the surface
    is the object's own mesh (``frame_loader`` kind ``liquid_surface``)."""
    tree, gin, out = _new_tree(name)
    nodes, links = tree.nodes, tree.links
    imp = nodes.new("GeometryNodeImportVDB")
    links.new(_frame_path(tree, prefix, ".vdb"), imp.inputs["Path"])
    phi = _named_grid(tree, imp.outputs[0], "FLOAT", surface)
    mesh = nodes.new("GeometryNodeGridToMesh")
    links.new(phi.outputs["Grid"], mesh.inputs["Grid"])
    mesh.inputs["Threshold"].default_value = 0.0
    surface_mesh = mesh.outputs[0]
    if MESHER_HALF_VOXEL_OFF:
        # Move the surface back by half a voxel, along the grid's own axes (its transform).
        info = nodes.new("GeometryNodeGridInfo")
        info.data_type = "FLOAT"
        links.new(phi.outputs["Grid"], info.inputs["Grid"])
        back = nodes.new("FunctionNodeTransformDirection")
        back.inputs["Direction"].default_value = (-0.5, -0.5, -0.5)
        links.new(info.outputs["Transform"], back.inputs["Transform"])
        shift = nodes.new("GeometryNodeSetPosition")
        links.new(surface_mesh, shift.inputs["Geometry"])
        links.new(back.outputs[0], shift.inputs["Offset"])
        surface_mesh = shift.outputs[0]
    vel = _named_grid(tree, imp.outputs[0], "VECTOR", velocity)
    sample = nodes.new("GeometryNodeSampleGrid")
    sample.data_type = "VECTOR"
    links.new(vel.outputs["Grid"], sample.inputs["Grid"])
    links.new(nodes.new("GeometryNodeInputPosition").outputs[0], sample.inputs["Position"])
    stored = _store_point_attribute(tree, "FLOAT_VECTOR", "velocity", surface_mesh, sample.outputs["Value"])
    geometry = _switch(tree, gin, "GEOMETRY", stored, gin.outputs[0])
    links.new(_with_material(tree, geometry, material), out.inputs[0])
    return tree
