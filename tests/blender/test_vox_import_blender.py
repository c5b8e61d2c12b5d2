"""Import .vox in real Blender: files written by VoxFX's exporter come back voxel for
voxel (positions, palette index, colour), as points and as a merged block mesh whose
faces cover exactly the voxels' outside faces; export → import → export is lossless;
MATL metal gets a metallic material; the operator refuses a crafted file with one line
and creates nothing."""

from __future__ import annotations

import struct
from collections import Counter

import bpy
import numpy as np
import pytest

from tests.blender.helpers import voxfx_registered
from voxfx.addon import vox_import
from voxfx.addon.vox_export import vox_bytes, write_vox
from voxfx.kernels.voxelize.palette import srgb_to_linear
from voxfx.kernels.voxfile import read_vox

SIZE = 0.25
STEPS = [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]


def random_voxels(seed=0, shape=(12, 9, 7)):
    rng = np.random.default_rng(seed)
    dense = rng.random(shape[::-1]) < 0.35
    dense[2:6, 2:7, 3:10] = True  # a block: something for the merge to do
    k, j, i = np.nonzero(dense)
    ijk = np.stack([i, j, k], 1)
    index = rng.integers(1, 4, size=len(ijk))  # three colours
    index[(k >= 2) & (k < 6) & (j >= 2) & (j < 7) & (i >= 3) & (i < 10)] = 7
    palette = rng.integers(0, 256, size=(255, 4), dtype=np.uint8)
    palette[:, 3] = 255
    return ijk, index, palette


def attribute(geometry, name, width=1, dtype=np.float32):
    att = geometry.attributes[name]
    values = np.empty(len(att.data) * width, dtype)
    att.data.foreach_get("color" if width == 4 else "value", values)
    return values.reshape(-1, width) if width > 1 else values


def expected_colour(palette, index):
    c = palette[index - 1].astype(np.float64) / 255.0
    c[:, :3] = srgb_to_linear(c[:, :3])
    return c


def test_points_come_back_voxel_for_voxel_and_reexport_losslessly(tmp_path):
    ijk, index, palette = random_voxels()
    path = write_vox(tmp_path / "in.vox", ijk, (12, 9, 7), color_indices=index, palette=palette)
    obj = vox_import.import_vox(path, voxel_size=SIZE, as_points=True)
    cloud = obj.data
    pos = np.empty(len(cloud.points) * 3, np.float32)
    cloud.attributes["position"].data.foreach_get("vector", pos)
    got_ijk = np.floor(pos.reshape(-1, 3) / SIZE).astype(np.int64)
    got_index = attribute(cloud, "vox_index", dtype=np.int32)
    assert {(*p, c) for p, c in zip(got_ijk.tolist(), got_index.tolist())} == \
        {(*p, c) for p, c in zip(ijk.tolist(), index.tolist())}
    np.testing.assert_allclose(attribute(cloud, "color", 4), expected_colour(palette, got_index), atol=1e-6)
    # export again from what Blender holds: the same file content
    again = write_vox(tmp_path / "out.vox", got_ijk, (12, 9, 7), color_indices=got_index,
                      palette=read_vox(path).palette[:255])
    first, second = read_vox(path), read_vox(again)
    np.testing.assert_array_equal(first.palette, second.palette)
    assert Counter(map(tuple, np.c_[first.voxels()[0], first.voxels()[1]].tolist())) == \
        Counter(map(tuple, np.c_[second.voxels()[0], second.voxels()[1]].tolist()))


def faces_of_voxels(ijk, index):
    cells = {tuple(p): c for p, c in zip(ijk.tolist(), index.tolist())}
    faces = Counter()
    for p, c in cells.items():
        for d, step in enumerate(STEPS):
            if (p[0] + step[0], p[1] + step[1], p[2] + step[2]) not in cells:
                faces[(*p, d, c)] += 1
    return faces


def faces_of_mesh(obj):
    """(i, j, k, direction, vox_index) of every unit face the mesh's polygons cover, from
    Blender's own polygon normals and vertex positions."""
    mesh = obj.data
    co = np.empty(len(mesh.vertices) * 3, np.float32)
    mesh.vertices.foreach_get("co", co)
    co = np.rint(co.reshape(-1, 3) / SIZE).astype(int)
    labels = attribute(mesh, "vox_index", dtype=np.int32)
    faces = Counter()
    for poly, label in zip(mesh.polygons, labels.tolist()):
        n = np.rint(np.array(poly.normal)).astype(int)
        d = STEPS.index(tuple(n.tolist()))
        a = d // 2
        pts = co[list(poly.vertices)]
        lo, hi = pts.min(0), pts.max(0)
        plane = lo[a] - (1 if d % 2 == 0 else 0)
        ranges = [range(lo[x], hi[x]) if x != a else [plane] for x in range(3)]
        for i in ranges[0]:
            for j in ranges[1]:
                for k in ranges[2]:
                    faces[(i, j, k, d, label)] += 1
    return faces


@pytest.mark.parametrize("greedy", [True, False])
def test_block_mesh_covers_exactly_the_outside_faces(tmp_path, greedy):
    ijk, index, palette = random_voxels(seed=1)
    path = write_vox(tmp_path / "in.vox", ijk, (12, 9, 7), color_indices=index, palette=palette)
    arrays = vox_import.import_arrays(path, voxel_size=SIZE, greedy=greedy)
    obj = vox_import.write_import(arrays)
    expected = faces_of_voxels(ijk, index)
    assert faces_of_mesh(obj) == expected
    assert arrays.faces_before == sum(expected.values())
    if greedy:
        assert len(obj.data.polygons) < arrays.faces_before
    colours = attribute(obj.data, "color", 4)
    np.testing.assert_allclose(colours, expected_colour(palette, attribute(obj.data, "vox_index", dtype=np.int32)),
                               atol=1e-6)
    assert obj.data.materials[0].name == "VoxFX Voxel Color"


def test_tiled_export_comes_back_whole(tmp_path):
    ijk, index, palette = random_voxels(seed=2)
    path = write_vox(tmp_path / "tiles.vox", ijk, (12, 9, 7), color_indices=index, palette=palette, model_size=5)
    obj = vox_import.import_vox(path, voxel_size=SIZE, greedy=False)
    assert faces_of_mesh(obj) == faces_of_voxels(ijk, index)


def matl(index, props):
    body = struct.pack("<i", index) + struct.pack("<i", len(props))
    for k, v in props.items():
        body += struct.pack("<i", len(k)) + k.encode() + struct.pack("<i", len(v)) + v.encode()
    return b"MATL" + struct.pack("<ii", len(body), 0) + body


def test_metal_matl_gets_a_metallic_material(tmp_path):
    data = vox_bytes(np.array([[0, 0, 0], [3, 0, 0]]), (4, 1, 1), color_indices=np.array([1, 2]))
    chunk = matl(2, {"_type": "_metal", "_metal": "0.8", "_rough": "0.3"})
    # append the MATL chunk inside MAIN: patch MAIN's children size
    children = struct.unpack("<i", data[16:20])[0]
    data = data[:16] + struct.pack("<i", children + len(chunk)) + data[20:] + chunk
    path = tmp_path / "matl.vox"
    path.write_bytes(data)
    obj = vox_import.import_vox(path, voxel_size=SIZE)
    assert len(obj.data.materials) == 2
    metal = obj.data.materials[1]
    bsdf = next(n for n in metal.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    assert bsdf.inputs["Metallic"].default_value == pytest.approx(0.8)
    assert bsdf.inputs["Roughness"].default_value == pytest.approx(0.3)
    slots = attribute(obj.data, "material_index", dtype=np.int32)
    labels = attribute(obj.data, "vox_index", dtype=np.int32)
    np.testing.assert_array_equal(slots, (labels == 2).astype(np.int32))


def test_operator_imports_and_refuses_a_crafted_file(tmp_path):
    ijk, index, palette = random_voxels(seed=3)
    good = write_vox(tmp_path / "good.vox", ijk, (12, 9, 7), color_indices=index, palette=palette)
    bad = tmp_path / "bad.vox"
    bad.write_bytes(good.read_bytes()[:200])
    with voxfx_registered():
        assert bpy.ops.voxfx.import_vox(filepath=str(good), import_as="POINTS", voxel_size=SIZE) == {"FINISHED"}
        obj = bpy.context.view_layer.objects.active
        assert obj.name == "good" and obj.type == "POINTCLOUD" and len(obj.data.points) == len(ijk)
        count = len(bpy.data.objects)
        with pytest.raises(RuntimeError) as error:
            bpy.ops.voxfx.import_vox(filepath=str(bad))
        assert "'bad.vox' is not a readable MagicaVoxel file" in str(error.value)
        assert "Traceback" not in str(error.value)
        assert len(bpy.data.objects) == count
        # a second import never replaces the first object
        assert bpy.ops.voxfx.import_vox(filepath=str(good), voxel_size=SIZE) == {"FINISHED"}
        assert bpy.context.view_layer.objects.active.name == "good.001"
        from voxfx.addon.operators.vox_import import menu_import

        assert menu_import in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()
