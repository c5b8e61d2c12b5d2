"""Narrow Band on the Liquid panel (issue 12): particles only near the surface of deep
water, the rest on the grid; it needs the sparse solver (Auto takes it)."""

import subprocess
import sys

import bpy
import pytest

from voxfx.addon.jobs import JobRunner
from voxfx.addon import compact_points

from .helpers import ROOT, voxfx_registered


@pytest.fixture
def tank(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.5, 0.5))  # domain 1 m
    domain = bpy.context.active_object
    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.5, 0.35))  # still water 0.7 m deep
    water = bpy.context.active_object
    water.scale = (1.0, 1.0, 0.7)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 2
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "tank.blend"))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        f = scene.voxfx.flip
        f.domain, f.resolution = domain, 10
        yield scene, f, tmp_path / "voxfx_cache" / "tank" / "liquid"


def bake(scene, f):
    from voxfx.addon.operators.flip import flip_job

    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 2, resume=False))
    assert runner.run() == "FINISHED"
    return runner.result


def test_a_narrow_band_bakes_deep_water_with_a_third_of_the_particles(tank):
    from voxfx.addon.flip_sparse import estimate_lines

    scene, f, folder = tank
    assert f.narrow_band == 0  # off by default
    bake(scene, f)
    full, _ = compact_points.read_points(folder / "liquid_0002.vxp")
    f.narrow_band = 2
    assert estimate_lines(bpy.context, f)[0] == "Solver: sparse (Auto: the narrow band)"
    result = bake(scene, f)
    assert "Solver: sparse (Auto: the narrow band)" in result.details
    band, _ = compact_points.read_points(folder / "liquid_0002.vxp")
    assert len(band) < len(full) / 3  # 7 layers of cells, the top 2 keep their particles
    assert band[:, 2].min() > 0.4  # only near the surface (0.7 m)


def test_a_narrow_band_with_the_dense_solver_or_one_cell_deep_is_refused_in_one_line(tank):
    scene, f, folder = tank
    f.narrow_band, f.solver = 2, "DENSE"
    with pytest.raises(RuntimeError, match="^Error: The narrow band needs the sparse solver: set Solver to Sparse "
                                           "or Auto\n$"):
        bpy.ops.voxfx.flip_bake()
    f.solver, f.narrow_band = "AUTO", 1
    with pytest.raises(RuntimeError, match="^Error: The narrow band must be 0 \\(off\\) or at least 2 cells deep, "
                                           "not 1\n$"):
        bpy.ops.voxfx.flip_bake()


def test_cli_narrow_band_option(tank):
    scene, f, folder = tank
    bpy.ops.wm.save_mainfile()
    args = [sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-2"]
    r = subprocess.run(args + ["--narrow-band", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Solver: sparse (Auto: the narrow band)" in r.stdout
    r = subprocess.run(args + ["--narrow-band", "-1"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "--narrow-band" in r.stderr


def test_the_bakes_memory_estimate_counts_the_narrow_bands_update(tank):
    """The guard's estimate (Domain panel and bake) includes the band's update when the
    band is on (65M particles at 512³): on the GPU it is the largest stage; on the CPU
    the substep's particles outweigh it."""
    import numpy as np

    from voxfx.addon.flip_sparse import memory_need
    from voxfx.addon.operators.flip import bake_memory_need, domain_spec
    from voxfx.kernels.flip.sparse_memory import sparse_flip_memory

    scene, f, folder = tank
    f.solver = "SPARSE"
    spec = domain_spec(f.domain, 512)
    particles = 65_536_000
    gpu = object()  # any module but NumPy: the device branch
    for xp in (np, gpu):
        f.narrow_band = 0
        off = memory_need(spec, particles, f, xp=xp)
        f.narrow_band = 4
        on = memory_need(spec, particles, f, xp=xp)
        assert on == sparse_flip_memory(spec, particles, int(f.particles_per_cell), narrow_band=4, xp=xp)
        assert on > off if xp is gpu else on == off
        assert bake_memory_need(spec, particles, f, True, xp=xp) >= on  # Compact frames encoded beside it
