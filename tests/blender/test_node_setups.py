"""Render-safe loading of cached frames: Geometry Nodes read the current frame's file."""

import bpy
import numpy as np
import pytest

from voxfx.addon.cache import BakeCache
from voxfx.addon import node_setups, writeback
from voxfx.addon.ply import read_points, write_points
from voxfx.kernels.grid import GridSpec


def evaluated(obj):
    return obj.evaluated_get(bpy.context.evaluated_depsgraph_get())


def test_ply_round_trip(tmp_path):
    pos = np.random.default_rng(1).random((7, 3)).astype(np.float32)
    vel = np.arange(21, dtype=np.float32).reshape(7, 3)
    write_points(tmp_path / "p.ply", pos, {"velocity": vel, "spin": np.arange(7, dtype=np.int32)})
    p, attrs = read_points(tmp_path / "p.ply")
    assert np.array_equal(p, pos) and np.array_equal(attrs["velocity_y"], vel[:, 1])
    assert attrs["spin"].tolist() == list(range(7))


def test_point_sequence_follows_the_frame(tmp_path):
    for frame, count in ((1, 4), (2, 9), (12, 2)):
        write_points(tmp_path / f"flakes_{frame:04d}.ply", np.full((count, 3), frame, np.float32),
                     {"velocity": np.full((count, 3), 10 * frame, np.float32),
                      "size": np.full(count, 0.01, np.float32)})
    obj = bpy.data.objects.new("flakes", bpy.data.meshes.new("flakes"))
    bpy.context.scene.collection.objects.link(obj)
    node_setups.attach(obj, node_setups.points_from_ply_sequence("flakes", str(tmp_path / "flakes_")))
    for frame, count in ((1, 4), (2, 9), (12, 2)):
        bpy.context.scene.frame_set(frame)
        geometry = evaluated(obj).evaluated_geometry()  # keep it alive while reading
        cloud = geometry.pointcloud
        assert len(cloud.points) == count
        vel = np.empty(3 * count, np.float32)
        cloud.attributes["velocity"].data.foreach_get("vector", vel)
        assert (vel == 10 * frame).all()
        radius = np.empty(count, np.float32)
        cloud.attributes["radius"].data.foreach_get("value", radius)
        assert np.allclose(radius, 0.01)


def test_viewport_fraction_thins_points_in_the_viewport_only(tmp_path):
    write_points(tmp_path / "p_0001.ply", np.random.default_rng(0).random((4000, 3)),
                 {"velocity": np.zeros((4000, 3), np.float32), "size": np.full(4000, 0.01, np.float32)})
    obj = bpy.data.objects.new("pts", bpy.data.meshes.new("pts"))
    bpy.context.scene.collection.objects.link(obj)
    mod = node_setups.attach(obj, node_setups.points_from_ply_sequence("pts", str(tmp_path / "p_")))
    node_setups.set_input(mod, "Viewport Fraction", 0.25)
    bpy.context.scene.frame_set(1)
    depsgraph = bpy.context.evaluated_depsgraph_get()  # background: a viewport depsgraph
    geometry = obj.evaluated_get(depsgraph).evaluated_geometry()
    assert 800 < len(geometry.pointcloud.points) < 1200


def test_depth_sequence_lifts_the_ground_and_drops_bare_faces(tmp_path):
    # 4×3 lattice at integer x, y; depth grid with one voxel layer centred on z = 0.
    spec = GridSpec((-0.5, -0.5, -0.5), 1.0, (4, 3, 1))
    depth = np.zeros((1, 3, 4), np.float32)
    depth[0, 1, 2] = 0.7
    writeback.write_vdb(tmp_path / "depth_0003.vdb", {"depth": depth}, spec)
    verts = [(i, j, 0.0) for j in range(3) for i in range(4)]
    faces = [(j * 4 + i, j * 4 + i + 1, (j + 1) * 4 + i + 1, (j + 1) * 4 + i) for j in range(2) for i in range(3)]
    mesh = bpy.data.meshes.new("ground")
    mesh.from_pydata(verts, [], faces)
    obj = bpy.data.objects.new("snow", mesh)
    bpy.context.scene.collection.objects.link(obj)
    node_setups.attach(obj, node_setups.surface_from_depth_sequence("snow", str(tmp_path / "depth_"), 0.0))
    bpy.context.scene.frame_set(3)
    ev = evaluated(obj).data
    assert len(ev.polygons) == 4  # the four faces around vertex (2, 1)
    co = np.array([v.co[:] for v in ev.vertices])
    lifted = co[(co[:, 0] == 2) & (co[:, 1] == 1)]
    assert lifted[0, 2] == pytest.approx(0.7 + 0.001, abs=1e-6)  # depth + the anti-flicker lift
    d = np.empty(len(ev.vertices), np.float32)
    ev.attributes["depth"].data.foreach_get("value", d)
    assert np.allclose(co[:, 2], d + 0.001, atol=1e-6)


def test_liquid_surface_meshes_the_level_set_with_velocity(tmp_path):
    n, h = 24, 0.1
    spec = GridSpec((0.0, 0.0, 0.0), h, (n, n, n))
    k, j, i = np.meshgrid(*(np.arange(n) + 0.5,) * 3, indexing="ij")
    centre, radius = n * h / 2, 0.7
    phi = (np.sqrt((i * h - centre) ** 2 + (j * h - centre) ** 2 + (k * h - centre) ** 2) - radius).astype(np.float32)
    phi = np.clip(phi, -3 * h, 3 * h)
    vel = np.zeros((n, n, n, 3), np.float32)
    vel[..., 0] = 2.5
    for frame in (1, 2):
        writeback.write_vdb(tmp_path / f"liquid_{frame:04d}.vdb", {"surface": phi, "velocity": vel}, spec,
                            grid_class={"surface": "LEVEL_SET", "velocity": "FOG_VOLUME"},
                            background={"surface": 3 * h, "velocity": 0.0})
    obj = bpy.data.objects.new("surface", bpy.data.meshes.new("surface"))
    bpy.context.scene.collection.objects.link(obj)
    node_setups.attach(obj, node_setups.liquid_surface_from_vdb_sequence("liquid", str(tmp_path / "liquid_")))
    bpy.context.scene.frame_set(2)
    mesh = evaluated(obj).data
    co = np.array([v.co[:] for v in mesh.vertices])
    assert len(co) > 100
    r = np.linalg.norm(co - centre, axis=1)
    assert np.abs(r - radius).max() < 0.5 * h
    v = np.empty(3 * len(co), np.float32)
    mesh.attributes["velocity"].data.foreach_get("vector", v)
    assert np.allclose(v.reshape(-1, 3)[:, 0], 2.5, atol=1e-4)


def test_effect_materials_use_the_effects_attributes():
    from voxfx.addon import materials

    snow = materials.snow()
    assert any(n.type == "ATTRIBUTE" and n.attribute_name == "depth" for n in snow.node_tree.nodes)
    water = materials.liquid().node_tree.nodes["Principled BSDF"]
    assert water.inputs["Transmission Weight"].default_value == 1.0
    assert water.inputs["IOR"].default_value == pytest.approx(1.33)
    vol = next(n for n in materials.volume().node_tree.nodes if n.type == "PRINCIPLED_VOLUME")
    assert vol.inputs["Density Attribute"].default_value == "density"
    assert materials.snow() is snow  # created once, then reused (artists may edit it)


def test_frames_loaded_by_voxfx_match_the_files(tmp_path):
    """The frame loader (memory holds one frame, issue 21) gives the geometry the node
    trees' own file reading gives: points with their attributes, the lifted cover, the
    liquid surface facing out with its velocity."""
    from voxfx.addon import frame_loader

    rng = np.random.default_rng(3)
    def baked(name, kind, suffix, write):
        """Frame 2 of a one-file bake, written through its cache (the loader reads only
        what a manifest vouches for); returns the sequence prefix."""
        cache = BakeCache(tmp_path / name, name, kind=kind)
        cache.begin({}, 1, 2)
        cache.write_frame(2, {suffix: write})
        return str(tmp_path / name / f"{name}_")

    p_prefix = baked("p", "flip", ".ply", lambda path: write_points(
        path, rng.random((50, 3)), {"velocity": rng.random((50, 3)).astype(np.float32),
                                    "size": np.full(50, 0.02, np.float32)}))
    spec = GridSpec((-0.5, -0.5, -0.5), 1.0, (4, 3, 1))
    depth = rng.random((1, 3, 4)).astype(np.float32)
    d_prefix = baked("d", "snow", ".vdb", lambda path: writeback.write_vdb(path, {"depth": depth}, spec))
    n, h = 24, 0.1
    k, j, i = np.meshgrid(*(np.arange(n) + 0.5,) * 3, indexing="ij")
    phi = np.clip(np.sqrt((i * h - 1.2) ** 2 + (j * h - 1.2) ** 2 + (k * h - 1.2) ** 2) - 0.7, -3 * h, 3 * h)
    vel = np.zeros((n, n, n, 3), np.float32)
    vel[..., 0], vel[..., 2] = 2.5, (k * h).astype(np.float32)  # z-velocity = z: checks interpolation
    l_prefix = baked("l", "flip", ".vdb", lambda path: writeback.write_vdb(
        path, {"surface": phi.astype(np.float32), "velocity": vel}, GridSpec((0.0, 0.0, 0.0), h, (n, n, n)),
        grid_class={"surface": "LEVEL_SET", "velocity": "FOG_VOLUME"}, background={"surface": 3 * h, "velocity": 0.0}))
    verts = [(x, y, 0.0) for y in range(3) for x in range(4)]
    faces = [(y * 4 + x, y * 4 + x + 1, (y + 1) * 4 + x + 1, (y + 1) * 4 + x) for y in range(2) for x in range(3)]

    def pair(kind, tree, base=None, **params):
        objs = []
        for loaded in (False, True):
            mesh = bpy.data.meshes.new(kind)
            if base:
                mesh.from_pydata(*base)
            obj = bpy.data.objects.new(kind, mesh)
            bpy.context.scene.collection.objects.link(obj)
            node_setups.attach(obj, tree)
            if loaded:
                frame_loader.attach(obj, kind, params.pop("prefix"), **params)
            objs.append(obj)
        return objs

    frame_loader.register()
    try:
        points = pair("points", node_setups.points_from_ply_sequence("p", p_prefix), prefix=p_prefix)
        cover = pair("depth", node_setups.surface_from_depth_sequence("d", d_prefix, 0.0), (verts, [], faces),
                     prefix=d_prefix, grid="depth", layer_z=0.0)
        surface = pair("liquid_surface", node_setups.liquid_surface_from_vdb_sequence("l", l_prefix),
                       prefix=l_prefix)
        bpy.context.scene.frame_set(2)
        dg = bpy.context.evaluated_depsgraph_get()

        def cloud(obj):
            geometry = obj.evaluated_get(dg).evaluated_geometry()  # keep it alive while reading
            c = geometry.pointcloud
            pos, vel, rad = (np.empty(k * len(c.points), np.float32) for k in (3, 3, 1))
            c.attributes["position"].data.foreach_get("vector", pos)
            c.attributes["velocity"].data.foreach_get("vector", vel)
            c.attributes["radius"].data.foreach_get("value", rad)
            return pos, vel, rad

        for a, b in zip(cloud(points[0]), cloud(points[1])):
            assert np.array_equal(a, b)
        files, own = (o.evaluated_get(dg).data for o in cover)
        assert len(files.polygons) == len(own.polygons)
        za, zb = (np.array([v.co.z for v in m.vertices]) for m in (files, own))
        assert np.allclose(np.sort(za), np.sort(zb), atol=1e-6)
        own = surface[1].evaluated_get(dg).data
        co = np.array([v.co[:] for v in own.vertices])
        assert len(co) > 100 and np.abs(np.linalg.norm(co - 1.2, axis=1) - 0.7).max() < 0.5 * h
        normals = np.array([p.normal[:] for p in own.polygons])
        centres = np.array([p.center[:] for p in own.polygons])
        assert (np.einsum("ij,ij->i", normals, centres - 1.2) > 0).all()  # facing out, as Grid to Mesh
        v = np.empty(3 * len(co), np.float32)
        own.attributes["velocity"].data.foreach_get("vector", v)
        v = v.reshape(-1, 3)
        assert np.allclose(v[:, 0], 2.5, atol=1e-5)
        assert np.allclose(v[:, 2], co[:, 2], atol=1e-4)  # trilinear, as Sample Grid
        assert [m.name for m in own.materials] == []  # no material given here; flip.py sets one
        assert len(surface[0].evaluated_get(dg).data.vertices) == pytest.approx(len(co), rel=0.05)
    finally:
        frame_loader.unregister()
