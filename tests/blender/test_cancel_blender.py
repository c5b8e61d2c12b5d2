"""Esc inside a kernel, headless (issue 23, issue 19): each bake runs on the threaded
runner the interactive path uses; the test holds the worker inside a kernel call, asks
the runner to cancel there (what Esc does: there is no window to press it in), and
checks that the cache and the scene are exactly as before the run."""

import threading
from contextlib import contextmanager

import bpy
import pytest

from voxfx.addon.jobs import CANCELLED, FINISHED, RUNNING, JobRunner

from .helpers import dam_scene, set_snow, snow_receivers, voxfx_registered


@contextmanager
def held_inside(monkeypatch, owner, name, armed):
    """Wrap *owner.name* so that, once *armed* is set, its next call (on the worker
    thread) waits inside the kernel until released; yields (inside, release) events."""
    inside, release = threading.Event(), threading.Event()
    real = getattr(owner, name)

    def hold(*args, **kwargs):
        if armed.is_set() and not inside.is_set():
            assert threading.current_thread() is not threading.main_thread()  # kernels run off the main thread
            inside.set()
            assert release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, hold)
    yield inside, release


def cancel_while_held(runner, inside, release):
    """Step the threaded runner until the held kernel is inside its call, cancel, let it go."""
    while not inside.is_set():
        assert runner.step() == RUNNING, runner.error
        inside.wait(0.01)
    assert runner.worker is not None  # mid-kernel, not between steps
    runner.request_cancel()  # Esc
    release.set()
    assert runner.wait(30)
    assert runner.step() == CANCELLED


def scene_state():
    """What a cancelled job must leave untouched: every datablock by name, the frame."""
    scene = bpy.context.scene
    blocks = {kind: sorted(b.name for b in getattr(bpy.data, kind))
              for kind in ("objects", "meshes", "pointclouds", "volumes", "node_groups", "materials", "collections")}
    return blocks, scene.frame_current


def folder_state(folder):
    """Every file under *folder* with its bytes (an absent folder: empty); of a bake's
    manifest, the frames and checkpoints it records (starting the run updates its frame
    range, before any kernel: that is the new bake's plan, not the cancel's doing)."""
    import json

    state = {}
    for p in sorted(folder.rglob("*")) if folder.exists() else ():
        if p.is_file():
            data = p.read_bytes()
            if p.name == "voxfx_manifest.json":
                manifest = json.loads(data)
                data = (manifest["frames"], manifest["checkpoints"])
            state[str(p.relative_to(folder))] = data
    return state


# ------------------------------------------------------------------------------ Liquid

@pytest.fixture
def dam(tmp_path):
    with dam_scene(tmp_path / "dam.blend", 16) as (scene, f):
        yield scene, f, tmp_path / "voxfx_cache" / "dam"


def test_liquid_cancelled_inside_a_frame_step_leaves_cache_and_scene_as_before(dam, monkeypatch):
    from voxfx.addon.operators.flip import flip_job
    from voxfx.kernels.flip import transfer

    scene, f, cache = dam
    scene.frame_start, scene.frame_end = 1, 2
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}  # frames 1-2 on disk, outputs in the scene
    scene.frame_set(1)
    before_files, before_scene = folder_state(cache), scene_state()
    armed = threading.Event()
    with held_inside(monkeypatch, transfer, "particles_to_grid", armed) as (inside, release):
        runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4), threaded=True)
        armed.set()  # frames 1-2 are done: the first transfer is inside frame 3's step
        cancel_while_held(runner, inside, release)
    assert folder_state(cache) == before_files  # frames 1-2 and their manifest, byte for byte
    assert scene_state() == before_scene  # no new or half-written object; back on frame 1
    scene.frame_end = 4  # and the bake resumes after the last complete frame
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    assert (cache / "liquid" / "liquid_0004.vdb").is_file()


# ------------------------------------------------------------------------------ Snow

@pytest.fixture
def snowy(tmp_path):
    scene, coll = snow_receivers(tmp_path / "snow.blend", 12)
    with voxfx_registered():
        s = scene.voxfx.snow
        set_snow(s, coll, 8, 17, 2000, 4000.0, 2, 4.0)
        yield scene, s, tmp_path / "voxfx_cache" / "snow"


def test_snow_cancelled_inside_a_frame_leaves_cache_and_scene_as_before(snowy, monkeypatch):
    from voxfx.addon.operators.snow import snow_job
    from voxfx.kernels.snow import sim

    scene, s, cache = snowy
    scene.frame_end = 1
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    scene.frame_set(1)
    before_files, before_scene = folder_state(cache), scene_state()
    armed = threading.Event()
    with held_inside(monkeypatch, sim, "step_flakes", armed) as (inside, release):
        runner = JobRunner(snow_job(bpy.context, s, scene.voxfx.cache_directory, 1, 3), threaded=True)
        armed.set()
        cancel_while_held(runner, inside, release)
    assert folder_state(cache) == before_files
    assert scene_state() == before_scene


# ------------------------------------------------------------------------------ Voxelize

@pytest.fixture
def two_spheres(tmp_path):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1, location=(0, 0, 0))
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1, location=(3, 0, 0))
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "spheres.blend"))
    with voxfx_registered():
        v = bpy.context.scene.voxfx.voxelize
        v.mode, v.size_mode, v.resolution = "SOLID_SURFACE", "RESOLUTION", 32
        v.output_points = v.output_volume = v.output_blocks = True
        v.combine = False
        yield bpy.context.scene, tmp_path / "voxfx_cache"


def test_voxelize_cancelled_inside_the_second_object_writes_nothing(two_spheres, monkeypatch):
    from voxfx.addon.operators.voxelize import plan, voxelize_job
    from voxfx.kernels.voxelize import surface

    scene, cache = two_spheres
    objects = sorted(bpy.data.objects, key=lambda o: o.name)
    before_files, before_scene = folder_state(cache), scene_state()
    armed = threading.Event()
    with held_inside(monkeypatch, surface, "_set_bits", armed) as (inside, release):
        request = plan(scene.voxfx.voxelize, scene.voxfx.cache_directory)
        runner = JobRunner(voxelize_job(bpy.context, objects, request, []), threaded=True)
        while not runner.message.startswith(f"voxelizing {objects[1].name} ("):  # the first object is done
            assert runner.step() == RUNNING, runner.error
            runner.wait(30)
        armed.set()
        cancel_while_held(runner, inside, release)
    assert folder_state(cache) == before_files  # no volume file
    assert scene_state() == before_scene  # not even the first object's outputs
    runner = JobRunner(voxelize_job(bpy.context, objects, request, []), threaded=True)
    while runner.step() == RUNNING:
        runner.wait(30)
    assert runner.state == FINISHED and len(runner.result) == 2 and all(r.count for r in runner.result)
