"""Input a user can give that used to end in 'Internal error': each is now one clear
line naming the object or setting at fault, and a good object is never dropped silently."""

import bpy
import pytest

from .helpers import voxfx_registered


@pytest.fixture
def registered(tmp_path):
    bpy.ops.wm.read_homefile(use_empty=True)
    with voxfx_registered():
        s = bpy.context.scene.voxfx.voxelize
        s.resolution = 8
        s.output_points, s.output_volume, s.output_blocks, s.output_vox = True, False, False, False
        yield s, tmp_path


def select(*objects):
    bpy.ops.object.select_all(action="DESELECT")
    for o in objects:
        o.select_set(True)
    bpy.context.view_layer.objects.active = objects[0]


def empty_mesh(name="Empty"):
    obj = bpy.data.objects.new(name, bpy.data.meshes.new(name))
    bpy.context.scene.collection.objects.link(obj)
    return obj


def nan_tet(name="Tet"):
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0), (float("nan"), 0, 1)], [], [(0, 1, 2), (0, 1, 3), (1, 2, 3),
                                                                               (0, 2, 3)])
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def cube(location=(0, 0, 0)):
    bpy.ops.mesh.primitive_cube_add(location=location)
    return bpy.context.active_object


def wire(name="Wire"):
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([(3, 0, 0), (4, 1, 1)], [(0, 1)], [])
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


@pytest.mark.parametrize("edges", [True, False])
def test_an_empty_mesh_alone_is_named_not_an_internal_error(registered, edges):
    s, _ = registered
    s.include_edges = edges
    select(empty_mesh())
    with pytest.raises(RuntimeError) as e:
        bpy.ops.voxfx.voxelize()
    assert "Empty" in str(e.value) and "Internal error" not in str(e.value) and "KeyError" not in str(e.value)


def test_an_empty_mesh_next_to_a_cube_is_skipped_with_a_warning(registered):
    s, _ = registered
    s.include_edges = True
    c = cube()
    select(c, empty_mesh())
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    assert any(o.name.endswith("_voxels") for o in bpy.data.objects)


@pytest.mark.parametrize("others", [[], ["cube"], ["cube", "wire"]])
def test_a_nan_vertex_is_named_and_no_good_object_is_dropped_silently(registered, others):
    s, _ = registered
    s.include_edges = True  # the default
    objects = [nan_tet()] + [cube() if o == "cube" else wire() for o in others]
    select(*objects)
    before = set(bpy.data.objects.keys())
    with pytest.raises(RuntimeError, match=r"Object 'Tet' has 1 vertices with non-finite coordinates"):
        bpy.ops.voxfx.voxelize()
    assert set(bpy.data.objects.keys()) == before  # nothing half made (e.g. only the wire)


def test_volume_into_a_folder_that_cannot_be_written_is_one_line(registered):
    s, tmp_path = registered
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "v.blend"))
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    bpy.context.scene.voxfx.cache_directory = str(blocker) + "/"
    s.output_points, s.output_volume = False, True
    select(cube())
    with pytest.raises(RuntimeError) as e:
        bpy.ops.voxfx.voxelize()
    message = str(e.value)
    assert "cache folder" in message and "Internal error" not in message and "Errno" not in message


def test_vox_path_relative_to_an_unsaved_file_is_refused(registered, tmp_path, monkeypatch):
    s, _ = registered
    monkeypatch.chdir(tmp_path)
    s.output_vox, s.vox_path = True, "//voxels.vox"
    select(cube())
    with pytest.raises(RuntimeError, match="relative to the .blend file, which is not saved yet"):
        bpy.ops.voxfx.voxelize()
    assert not (tmp_path / "voxels.vox").exists()


def test_voxelize_reports_progress_from_inside_its_kernels_and_cancels_there(registered):
    from voxfx.addon.jobs import JobRunner
    from voxfx.addon.operators.voxelize import plan, voxelize_job

    s, _ = registered
    s.resolution, s.mode = 48, "SOLID_SURFACE"
    bpy.ops.mesh.primitive_monkey_add()
    monkey = bpy.context.active_object
    request = plan(s, "//voxfx_cache/")
    request.outputs = {"points"}
    heard = []
    runner = JobRunner(voxelize_job(bpy.context, [monkey], request, []), title="voxelize")
    assert runner.run(lambda f, m: heard.append((f, m)) or True) == "FINISHED"
    inside = [m for _, m in heard if m.startswith("voxelizing Suzanne:")]
    assert inside, heard  # the kernels' own stages, not only the job's steps
    fractions = [f for f, _ in heard]
    assert fractions == sorted(fractions)  # progress only moves forward
    before = set(bpy.data.objects.keys())
    runner = JobRunner(voxelize_job(bpy.context, [monkey], request, []), title="voxelize")
    state = runner.run(lambda f, m: not m.startswith("voxelizing Suzanne:"))  # Esc inside the kernel
    assert state == "CANCELLED" and set(bpy.data.objects.keys()) == before
