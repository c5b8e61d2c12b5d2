"""Trust in headless Blender: what VoxFX writes, where, with which permissions; Free and
the CLI on finished or crafted caches; voxelizing 'everything' skips VoxFX's results."""

import json
import os
import subprocess
import sys

import bpy
import pytest

from voxfx.addon.cache import MANIFEST

from .helpers import ROOT, set_snow, snow_receivers, voxfx_registered


@pytest.fixture
def umask():
    """Run with umask 002 (group-writable), so 'follows the umask' is told apart from
    0644 and from mkstemp's 0600."""
    old = os.umask(0o002)
    yield 0o664
    os.umask(old)


def modes(folder):
    return {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def snowy(tmp_path):
    scene, coll = snow_receivers(tmp_path / "snow.blend", 6, frames=2)
    with voxfx_registered():
        s = scene.voxfx.snow
        set_snow(s, coll, 8, 9, 300, 4000.0, 1, 3.0)
        yield scene, tmp_path / "voxfx_cache" / "snow" / "snow"


def test_every_baked_file_follows_the_umask(snowy, umask):
    scene, folder = snowy
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    got = modes(folder)
    assert {n for n in got if n.endswith(".vdb")} and {n for n in got if n.endswith(".npz")}
    assert got == {n: umask for n in got}, got


def test_node_trees_read_only_inside_the_cache_folder_wherever_it_is(snowy, tmp_path):
    scene, _ = snowy
    elsewhere = tmp_path / "farm share" / "caches"
    scene.voxfx.cache_directory = str(elsewhere) + os.sep  # a .blend may name any folder
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    folder = (elsewhere / "snow").resolve()
    assert (folder / "snow_0002.vxp").is_file()
    strings = [n.string for tree in bpy.data.node_groups if tree.name.startswith("VoxFX")
               for n in tree.nodes if n.bl_idname == "FunctionNodeInputString" and n.string.startswith(("/", "//"))]
    assert strings, "no path prefix found in the loader node trees"
    for prefix in strings:
        assert os.path.dirname(os.path.abspath(bpy.path.abspath(prefix))) == str(folder), prefix


def test_free_with_an_unreadable_manifest_frees_everything_and_nothing_else(snowy, tmp_path):
    scene, folder = snowy
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    sentinel = folder.parent / "keep.txt"
    sentinel.write_text("precious")
    (folder / "notes.txt").write_text("a user's file in the cache folder")
    (folder / MANIFEST).write_text("{ truncated")
    assert bpy.ops.voxfx.snow_free() == {"FINISHED"}
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert sentinel.read_text() == "precious"


def test_free_of_a_crafted_manifest_keeps_files_outside(snowy, tmp_path):
    scene, folder = snowy
    assert bpy.ops.voxfx.snow_bake() == {"FINISHED"}
    victim = tmp_path / "thesis.txt"
    victim.write_text("years of work")
    data = json.loads((folder / MANIFEST).read_text())
    data["frames"]["2"] = {"../../thesis.txt": [13, "00000000"], str(victim): [13, "00000000"]}
    (folder / MANIFEST).write_text(json.dumps(data))
    assert bpy.ops.voxfx.snow_free() == {"FINISHED"}
    assert victim.read_text() == "years of work"
    assert not folder.exists()


def test_cli_on_a_finished_bake_says_the_frames_were_already_baked(snowy):
    scene, folder = snowy
    bpy.ops.wm.save_mainfile()
    cmd = [sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "snow", "--frames", "1-2"]
    env = {"VOXFX_BACKEND": "cpu", "PATH": ""}
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0 and "baked frames 1-2" in first.stdout, first.stdout + first.stderr
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr
    assert "frames 1-2 were already baked" in again.stdout and "baked frames 3-2" not in again.stdout


@pytest.fixture
def cube(tmp_path):
    bpy.ops.mesh.primitive_cube_add(location=(0, 0, 0))
    cube = bpy.context.active_object
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "cube.blend"))
    cube.select_set(True)
    with voxfx_registered():
        s = bpy.context.scene.voxfx.voxelize
        s.resolution, s.mode = 12, "SOLID_SURFACE"
        yield s, cube, tmp_path


def test_voxelize_volume_replaces_its_file_and_free_removes_it(cube, umask):
    s, obj, tmp_path = cube
    s.output_points, s.output_volume, s.output_blocks = False, True, False
    folder = tmp_path / "voxfx_cache" / "cube" / "voxelize"
    for _ in range(3):
        assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    files = sorted(folder.iterdir())
    assert len(files) == 1, files  # one file per result, however many runs
    volume = bpy.data.objects["Cube_volume"]
    assert os.path.samefile(bpy.path.abspath(volume.data.filepath), files[0])
    assert modes(folder) == {files[0].name: umask}
    (folder / "mine.vdb").write_text("a user's file")
    assert bpy.ops.voxfx.voxelize_free() == {"FINISHED"}
    assert sorted(p.name for p in folder.iterdir()) == ["mine.vdb"]


def test_voxelize_everything_skips_voxfx_results(cube):
    s, obj, tmp_path = cube
    s.output_points, s.output_volume, s.output_blocks = True, False, True
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    made = {o.name for o in bpy.data.objects} - {"Cube"}
    assert made and all(o.get("voxfx_output") for o in bpy.data.objects if o.name in made)
    for o in bpy.data.objects:  # the user moves the results out of VoxFX's collection
        for c in list(o.users_collection):
            if c.name.startswith("VoxFX"):
                c.objects.unlink(o)
                bpy.context.scene.collection.objects.link(o)
    bpy.ops.wm.save_mainfile()
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "voxelize", "--separate",
                        "--resolution", "8", "--out", str(tmp_path / "all.vox")], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stderr
    named = [line.split(":")[0] for line in r.stdout.splitlines() if "voxels, grid" in line]
    assert named == ["Cube"], r.stdout
