"""Read voxel values back out of a Volume object the way Blender itself sees them.

A probe mesh carries one vertex per sample (at the sample position, with integer
``ix``/``iy``/``iz`` point attributes for index sampling). Its Geometry Nodes modifier
fetches the volume object's grid by name and stores the sampled value on each vertex,
which the test reads from the evaluated mesh. This proves Blender really loaded the
file's data, not just its metadata.
"""

from __future__ import annotations

import bpy
import numpy as np
import pytest


def sample_grid(volume_obj, grid_name, *, indices=None, points=None, vector=False):
    """Values of *grid_name* at integer voxel *indices* (N, 3) i, j, k, or at world
    *points* (N, 3) with nearest-neighbour lookup. Returns (N,) or (N, 3) float32."""
    where = np.asarray(indices if indices is not None else points)
    probe = _probe_mesh_object(where, integer=indices is not None)
    probe.modifiers.new("probe", "NODES").node_group = _probe_nodes(
        volume_obj, grid_name, by_index=indices is not None, vector=vector
    )
    evaluated = probe.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    result = evaluated.attributes["probe"]
    values = np.empty(len(where) * (3 if vector else 1), dtype=np.float32)
    result.data.foreach_get("vector" if vector else "value", values)
    return values.reshape(-1, 3) if vector else values


def _probe_mesh_object(where, integer: bool):
    mesh = bpy.data.meshes.new("probe")
    mesh.vertices.add(len(where))
    positions = np.zeros_like(where, dtype=np.float32) if integer else where.astype(np.float32)
    mesh.attributes["position"].data.foreach_set("vector", positions.ravel())
    if integer:
        for axis, name in enumerate(("ix", "iy", "iz")):
            attribute = mesh.attributes.new(name, "INT", "POINT")
            attribute.data.foreach_set("value", np.ascontiguousarray(where[:, axis], dtype=np.int32))
    obj = bpy.data.objects.new("probe", mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _probe_nodes(volume_obj, grid_name, by_index: bool, vector: bool):
    tree = bpy.data.node_groups.new("probe", "GeometryNodeTree")
    tree.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    tree.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes, link = tree.nodes, tree.links.new
    group_in, group_out = nodes.new("NodeGroupInput"), nodes.new("NodeGroupOutput")

    info = nodes.new("GeometryNodeObjectInfo")
    info.inputs["Object"].default_value = volume_obj
    get_grid = nodes.new("GeometryNodeGetNamedGrid")
    get_grid.data_type = "VECTOR" if vector else "FLOAT"
    get_grid.inputs["Name"].default_value = grid_name
    link(info.outputs["Geometry"], get_grid.inputs["Volume"])

    if by_index:
        sample = nodes.new("GeometryNodeSampleGridIndex")
        for axis in ("X", "Y", "Z"):
            named = nodes.new("GeometryNodeInputNamedAttribute")
            named.data_type = "INT"
            named.inputs["Name"].default_value = "i" + axis.lower()
            link(named.outputs["Attribute"], sample.inputs[axis])
    else:
        sample = nodes.new("GeometryNodeSampleGrid")
        if "Interpolation" not in sample.inputs:
            pytest.skip(f"nearest-neighbour Sample Grid needs Blender 5.0 (its Interpolation input); "
                        f"{bpy.app.version_string} always interpolates trilinearly")
        sample.inputs["Interpolation"].default_value = "Nearest Neighbor"
        link(nodes.new("GeometryNodeInputPosition").outputs["Position"], sample.inputs["Position"])
    sample.data_type = "VECTOR" if vector else "FLOAT"
    link(get_grid.outputs["Grid"], sample.inputs["Grid"])

    store = nodes.new("GeometryNodeStoreNamedAttribute")
    store.data_type = "FLOAT_VECTOR" if vector else "FLOAT"
    store.domain = "POINT"
    store.inputs["Name"].default_value = "probe"
    link(group_in.outputs[0], store.inputs["Geometry"])
    link(sample.outputs["Value"], store.inputs["Value"])
    link(store.outputs["Geometry"], group_out.inputs[0])
    return tree
