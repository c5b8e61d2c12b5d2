"""Bake Snow end to end in headless Blender: frames on disk, render-safe objects,
resume, bad input, CLI."""

import math
import subprocess
import sys

import bpy
import numpy as np
import pytest

from voxfx.addon.jobs import JobRunner
from voxfx.addon import compact_points, ply

from .helpers import ROOT, set_snow, snow_receivers, voxfx_registered


@pytest.fixture
def snowy(tmp_path):
    scene, coll = snow_receivers(tmp_path / "snow.blend", 12, cube=True)
    with voxfx_registered():
        s = scene.voxfx.snow
        set_snow(s, coll, 8, 17, 3000, 4000.0, 2, 4.0)
        yield scene, s, tmp_path / "voxfx_cache" / "snow" / "snow"


@pytest.mark.parametrize("cache_format, suffix", [("COMPACT", ".vxp"), ("PLY_VDB", ".ply")])
def test_bake_writes_every_frame_and_loads_render_safely(snowy, cache_format, suffix):
    scene, s, folder = snowy
    scene.voxfx.cache_format = cache_format
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    for f in (1, 2, 3):
        for ext in (suffix, ".vdb", ".exr"):
            assert (folder / f"snow_{f:04d}{ext}").is_file()
        assert not (folder / f"snow_{f:04d}{'.ply' if suffix == '.vxp' else '.vxp'}").exists()
    read = compact_points.read_points if suffix == ".vxp" else ply.read_points
    pos, attrs = read(folder / f"snow_0003{suffix}")
    assert len(pos) == 3000 and {"velocity_x", "size", "spin"} <= set(attrs)
    # The EXR holds the same depth as the VDB the cover samples.
    img = bpy.data.images.load(str(folder / "snow_0003.exr"))
    px = np.empty(img.size[0] * img.size[1] * 4, np.float32)
    img.pixels.foreach_get(px)
    exr_depth = px.reshape(img.size[1], img.size[0], 4)[..., 0]
    assert img.size[:] == (17, 17) and exr_depth.max() > 0
    flakes, cover = bpy.data.objects["Snow Flakes"], bpy.data.objects["Snow Cover"]
    assert flakes.modifiers["VoxFX"].node_group and cover.modifiers["VoxFX"].node_group
    scene.frame_set(3)
    dg = bpy.context.evaluated_depsgraph_get()
    geometry = flakes.evaluated_get(dg).evaluated_geometry()
    assert len(geometry.pointcloud.points) == 3000
    mesh = cover.evaluated_get(dg).data
    depth = np.empty(len(mesh.vertices), np.float32)
    mesh.attributes["depth"].data.foreach_get("value", depth)
    half = cache_format == "COMPACT"  # the depth VDB in half floats (the EXR keeps full floats)
    assert depth.max() == pytest.approx(exr_depth.max(), rel=2.0 ** -11 if half else 1e-6)
    z = np.array([v.co.z for v in mesh.vertices])
    roof = z > 2.0  # the cube's top is a receiver: snow on the roof, above z = 2
    assert roof.any() and depth[roof].max() > 0
    assert cover.data.materials[0].name == "VoxFX Snow"
    # No face bridges the 2 m step from the ground to the cube's top (a snow curtain),
    # yet both the roof and the ground keep their faces.
    corners = [[cover.data.vertices[i].co.z for i in p.vertices] for p in cover.data.polygons]
    assert not [c for c in corners if min(c) < 0.5 and max(c) > 1.5]
    assert any(min(c) > 1.9 for c in corners) and sum(max(c) < 0.1 for c in corners) > 100


def test_the_snow_panel_shows_the_disk_estimate_and_a_small_disk_refuses(snowy, monkeypatch):
    from voxfx.addon import disk_plan, panels

    scene, s, folder = snowy
    panels._disk_memo.clear()
    line = panels._disk_line(bpy.context, "snow")
    assert line.startswith("Disk: about") and f"for {scene.frame_end - scene.frame_start + 1} frames" in line
    monkeypatch.setenv(disk_plan.FREE_ENV, "1000")
    with pytest.raises(RuntimeError, match="not even one frame fits"):
        bpy.ops.voxfx.snow_bake()
    assert not list(folder.glob("snow_0*"))


def test_resume_gives_the_same_frames_as_an_uninterrupted_bake(snowy):
    from voxfx.addon.operators.snow import snow_job

    scene, s, folder = snowy
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    # VDB files carry a random UUID: compare the flakes (.vxp) and the depth (EXR pixels).
    def frame(f):
        img = bpy.data.images.load(str(folder / f"snow_{f:04d}.exr"), check_existing=False)
        px = np.empty(img.size[0] * img.size[1] * 4, np.float32)
        img.pixels.foreach_get(px)
        bpy.data.images.remove(img)
        return (folder / f"snow_{f:04d}.vxp").read_bytes(), px

    reference = {f: frame(f) for f in (1, 2, 3)}
    bpy.ops.voxfx.snow_free()
    assert not folder.exists()
    runner = JobRunner(snow_job(bpy.context, s, scene.voxfx.cache_directory, 1, 3))
    while not (folder / "snow_0002.vxp").exists():  # frames 1 and 2 done (steps include kernel calls)
        assert runner.step() == "RUNNING"
    runner.request_cancel()
    assert runner.step() == "CANCELLED"
    # Frames are written on a writer thread while the next one simulates, and Cancel waits
    # for the frame in flight: frame 3 may already have been handed over. Whatever was
    # recorded stays; the resumed bake computes exactly the frames that were not.
    third_done = (folder / "snow_0003.vdb").exists()
    resumed = JobRunner(snow_job(bpy.context, s, scene.voxfx.cache_directory, 1, 3))
    assert resumed.run() == "FINISHED"
    if third_done:
        assert resumed.result.summary == "frames 1-3 were already baked"
    else:
        assert resumed.result.summary == "baked frames 3"  # only frame 3 recomputed
    for f in (1, 2, 3):  # CPU backend: bit-identical
        flakes, depth = frame(f)
        assert flakes == reference[f][0] and np.array_equal(depth, reference[f][1])


def test_bad_input_is_reported(snowy):
    scene, s, folder = snowy
    s.snowfall_rate = 0.0
    with pytest.raises(RuntimeError, match="Snowfall rate must be positive"):
        bpy.ops.voxfx.snow_bake()
    s.snowfall_rate = 5.0
    s.receivers = None
    assert not bpy.ops.voxfx.snow_bake.poll()
    s.receivers = bpy.data.collections["Receivers"]
    from voxfx.kernels import backend

    if backend.device_info().free_bytes > 2 ** 42:
        pytest.skip("machine has more than 4 TiB free")
    s.wind_resolution = 1024  # ~0.5 G cells × 56 B: refused before anything is allocated
    with pytest.raises(RuntimeError, match=r"needs .* but only .* largest wind resolution that fits is \d+"):
        bpy.ops.voxfx.snow_bake()
    s.wind_resolution, s.flake_count = 8, 2_000_000_000
    with pytest.raises(RuntimeError, match=r"At most [\d,]+ flakes fit"):
        bpy.ops.voxfx.snow_bake()
    assert not folder.exists()  # nothing written


def test_cli_snow(snowy):
    scene, s, folder = snowy
    bpy.ops.wm.save_mainfile()
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "snow", "--frames", "1-2",
                        "--receivers", "Receivers", "--flakes", "500", "--rate", "100", "--save"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "baked frames 1-2" in r.stdout
    assert (folder / "snow_0002.vdb").is_file()


def test_wind_can_come_from_a_wind_force_field(snowy):
    from voxfx.addon.operators.snow import kernel_settings

    scene, s, folder = snowy
    bpy.ops.object.effector_add(type="WIND", rotation=(0.0, np.pi / 2, np.pi / 2))  # local +Z → world +Y
    bpy.context.active_object.field.strength = 7.0
    s.use_scene_wind = True
    k = kernel_settings(s, scene)
    assert k.wind_speed == pytest.approx(7.0)
    assert math.degrees(k.wind_direction) == pytest.approx(90.0, abs=1e-4)
    s.use_scene_wind = False
    assert kernel_settings(s, scene).wind_speed == pytest.approx(s.wind_speed)


def test_receivers_outside_the_domain_are_refused(snowy):
    scene, s, folder = snowy
    bpy.ops.mesh.primitive_cube_add(size=1, location=(100, 100, 0))
    s.domain_object = bpy.context.active_object
    with pytest.raises(RuntimeError, match="outside the snow domain"):
        bpy.ops.voxfx.snow_bake()


def test_with_the_default_snowfall_a_short_bake_shows_snow(snowy):
    scene, s, folder = snowy
    s.snowfall_rate = 5.0  # the defaults (5 cm/h, Time Scale 1, Starting Depth 5 cm)
    s.property_unset("time_scale")
    s.property_unset("initial_depth")
    assert s.initial_depth == pytest.approx(0.05) and s.time_scale == 1.0
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    scene.frame_set(3)
    cover = bpy.data.objects["Snow Cover"].evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    assert len(cover.vertices) > 100  # the cover is there at once


def test_a_cover_too_thin_to_see_is_reported(snowy):
    from voxfx.addon.operators.snow import snow_job

    scene, s, folder = snowy
    s.snowfall_rate, s.initial_depth = 5.0, 0.0  # real-time snowfall for 3 frames: microns
    runner = JobRunner(snow_job(bpy.context, s, scene.voxfx.cache_directory, 1, 3))
    assert runner.run() == "FINISHED"
    assert any("too thin to see" in n and "Time Scale" in n for n in runner.result.notes), runner.result.notes


def test_the_wind_grid_reaches_a_cell_below_the_receivers(snowy):
    """Issue 22 §5: with the ground plane on the wind grid's bottom face its first cell
    layer was solid and the drift read no wind. Automatic domain and a Domain box alike."""
    from voxfx.addon import scene_io
    from voxfx.addon.operators.snow import collect, plan_domain

    scene, s, folder = snowy
    soup = scene_io.extract_triangles(collect(s.receivers, "receivers"), bpy.context.evaluated_depsgraph_get())
    lo, hi = (np.asarray(b) for b in soup.bounds)
    for domain_object in (None, "box"):
        if domain_object:
            bpy.ops.mesh.primitive_cube_add(size=12, location=(0, 0, 6))  # bottom face on the ground plane
            s.domain_object = bpy.context.active_object
        d = plan_domain(s, soup)
        assert d.wind.origin[2] <= lo[2] - d.wind.voxel_size + 1e-9
        assert d.wind.upper[2] >= hi[2]
        assert d.ground_origin == pytest.approx(tuple(lo[:2]), abs=1e-6)
