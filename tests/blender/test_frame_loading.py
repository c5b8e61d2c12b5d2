"""Which frame file VoxFX shows (issues 21 and 23): only files their cache's manifest
vouches for (size and CRC), a damaged one named once and never read; after the bake the
last frame stays, before it nothing shows, and any frame number works (10000+ too)."""

import bpy
import pytest

from .helpers import voxfx_registered
from .scrub import attach_bakes, count, write_liquid_bake, write_snow_bake

FLAKES, PARTICLES = 500, 300


def points(obj):
    geometry = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).evaluated_geometry()
    return len(geometry.pointcloud.points) if geometry.pointcloud else 0


@pytest.fixture
def shown(tmp_path):
    snow = write_snow_bake(tmp_path / "snow", 5, FLAKES, ground=16)
    liquid = write_liquid_bake(tmp_path / "liquid", 5, PARTICLES, resolution=12)
    with voxfx_registered():
        yield attach_bakes(snow, liquid, 5), snow[0], liquid


def test_a_damaged_frame_is_named_once_and_never_read(shown, capfd):
    objects, snow, _ = shown
    path = snow.frame_path(3, ".ply")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # same size, one byte changed
    path.write_bytes(bytes(data))
    scene = bpy.context.scene
    scene.frame_set(2)
    assert points(objects["flakes"]) == count(FLAKES, 2)
    for _ in range(3):
        scene.frame_set(3)
        assert points(objects["flakes"]) == 0  # not shown, not half shown
        scene.frame_set(4)
        assert points(objects["flakes"]) == count(FLAKES, 4)
    out = capfd.readouterr().out
    assert out.count("frame 3 of") == 1 and "is damaged" in out and "press Bake to repair it" in out


def test_after_the_bake_the_last_frame_stays_and_before_it_nothing_shows(shown, capfd):
    objects, _, _ = shown
    scene = bpy.context.scene
    scene.frame_set(9)
    assert points(objects["flakes"]) == count(FLAKES, 5) and points(objects["particles"]) == count(PARTICLES, 5)
    scene.frame_set(0)
    assert points(objects["flakes"]) == 0 and points(objects["particles"]) == 0
    out, err = capfd.readouterr()
    assert "PLY" not in out + err and "Error" not in out + err  # no error spam outside the range


def test_frames_from_10000_on_show(tmp_path):
    from voxfx.addon import frame_loader
    from voxfx.addon.cache import BakeCache
    from voxfx.addon.operators import flip
    from voxfx.addon.ply import write_points

    import numpy as np

    cache = BakeCache(tmp_path / "liquid", "liquid", kind="flip")
    cache.begin({}, 9999, 10001)
    for frame in (9999, 10000, 10001):
        cache.write_frame(frame, {".ply": lambda p, f=frame: write_points(p, np.zeros((f - 9990, 3), np.float32))})
    assert cache.frame_path(10000, ".ply").name == "liquid_10000.ply"
    with voxfx_registered():
        particles = flip._empty_mesh_object("Liquid Particles")
        particles.data["voxfx_frames"] = {"kind": "points", "prefix": str(tmp_path / "liquid" / "liquid_")}
        scene = bpy.context.scene
        for frame in (9999, 10000, 10001):
            scene.frame_set(frame)
            frame_loader.update(scene)
            assert len(particles.data.vertices) == frame - 9990


def test_the_liquid_surface_is_smooth_shaded_with_its_wall_creases_sharp(shown):
    objects, _, _ = shown
    bpy.context.scene.frame_set(2)
    mesh = objects["surface"].data
    assert len(mesh.polygons) > 50
    sharp = mesh.attributes.get("sharp_face")
    assert sharp is None or not any(v.value for v in sharp.data)  # smooth: no flat-shaded faces


def test_flakes_render_with_the_falling_snow_material(shown):
    objects, _, _ = shown
    bpy.context.scene.frame_set(2)
    geometry = objects["flakes"].evaluated_get(bpy.context.evaluated_depsgraph_get()).evaluated_geometry()
    assert [m.name for m in geometry.pointcloud.materials] == ["VoxFX Flakes"]
