"""The liquid's Solver choice (issue 12): Auto bakes dense where its memory estimate fits
and sparse where it does not, says which and why on the panel before baking and in the
bake's report; resolutions up to 2048 along the longest side."""

import subprocess
import sys

import bpy
import pytest

from voxfx.addon.jobs import JobRunner
from voxfx.addon import compact_points

from .helpers import ROOT, voxfx_registered


@pytest.fixture
def pool(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=4, location=(2.0, 2.0, 2.0))  # domain: a 4 m cube
    domain = bpy.context.active_object
    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(1.0, 1.0, 0.1))  # 0.2 m of water on the floor
    water = bpy.context.active_object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 2
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "pool.blend"))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        f = scene.voxfx.flip
        f.domain, f.resolution = domain, 40
        yield scene, f, tmp_path / "voxfx_cache" / "pool" / "liquid"


def bake(scene, f):
    from voxfx.addon.operators.flip import flip_job

    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, scene.frame_start, scene.frame_end,
                                resume=False))
    assert runner.run() == "FINISHED"
    return runner.result


def test_auto_is_the_default_and_bakes_dense_where_dense_fits(pool):
    from voxfx.addon.flip_sparse import estimate_lines

    scene, f, folder = pool
    assert f.solver == "AUTO"
    why, memory = estimate_lines(bpy.context, f)
    assert why.startswith("Solver: dense (Auto:") and "fits" in why
    assert memory.startswith("Memory ≈") and "(dense," in memory
    result = bake(scene, f)
    assert "Solver: dense" in result.details
    assert (folder / "liquid_0002.vxp").is_file()


def test_auto_goes_sparse_at_resolution_2048_where_dense_does_not_fit(pool):
    """A 4 m cube at 2048 (2048³ cells: dense would need terabytes) with 10³ cells of water:
    the panel says sparse and why before baking, and the bake runs, its outputs around
    the liquid."""
    from voxfx.addon.flip_sparse import estimate_lines
    from voxfx.kernels import backend

    scene, f, folder = pool
    f.resolution = 2048  # h = 4 m / 2048
    bpy.data.objects["Cube.001"].scale = (0.1, 0.1, 0.1)  # 0.02 m: 10.24 cells across
    bpy.data.objects["Cube.001"].location = (1.0, 1.0, 0.01)
    bpy.context.view_layer.update()
    why, memory = estimate_lines(bpy.context, f)
    assert why.startswith("Solver: sparse (Auto: dense would need") and "usable" in why
    assert "(sparse," in memory
    need = float(memory.split("≈ ")[1].split(" ")[0])
    assert memory.split("≈ ")[1].split(" ")[1] in ("KiB", "MiB") or need < 2  # follows the liquid, not the box
    assert backend.device_info().free_bytes < 2 ** 42  # (dense: > 4 TiB)
    result = bake(scene, f)
    assert "Solver: sparse (Auto" in result.details
    points, _ = compact_points.read_points(folder / "liquid_0002.vxp")
    expected = 8 * (0.02 / (4.0 / 2048)) ** 3  # particles per cell × the water's cells
    assert abs(len(points) / expected - 1) < 0.02 and points[:, 2].min() >= 0.0
    assert (folder / "liquid_0002.vdb").stat().st_size < 2 ** 20  # the liquid's region, not a 2048³ box


def test_dense_with_open_boundaries_is_refused_in_one_line(pool):
    from voxfx.addon.flip_sparse import estimate_lines

    scene, f, folder = pool
    f.solver, f.boundary = "DENSE", "open"
    message = "Open boundaries need the sparse solver: set Solver to Sparse or Auto"
    assert estimate_lines(bpy.context, f) == [message]
    with pytest.raises(RuntimeError, match=f"^Error: {message}\n$"):
        bpy.ops.voxfx.flip_bake()
    assert not folder.exists()
    f.solver = "AUTO"
    assert estimate_lines(bpy.context, f)[0] == "Solver: sparse (Auto: open boundaries)"


def test_cli_solver_option(pool):
    scene, f, folder = pool
    bpy.ops.wm.save_mainfile()
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-1",
                        "--solver", "sparse"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Solver: sparse" in r.stdout
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-1",
                        "--solver", "fast"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "invalid choice" in r.stderr
