"""Bake Liquid with the sparse solver in headless Blender (issue 12): an open domain whose
liquid leaves the Domain box, an inflow outside it, frame files for all of it."""

import bpy
import numpy as np
import pytest

from voxfx.addon.jobs import JobRunner
from voxfx.addon import compact_points

from .helpers import voxfx_registered


@pytest.fixture
def throw(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.25, 0.5))  # domain 1 × 0.5 × 1 m
    domain = bpy.context.active_object
    domain.scale = (1.0, 0.5, 1.0)
    bpy.ops.mesh.primitive_cube_add(size=0.3, location=(0.75, 0.25, 0.2))
    water = bpy.context.active_object
    bpy.ops.mesh.primitive_cube_add(size=0.1, location=(1.3, 0.25, 0.7))  # 0.25 m beyond the box
    tap = bpy.context.active_object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 6
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "throw.blend"))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        water.voxfx_flip.initial_velocity = (4.0, 0.0, 0.0)
        tap.voxfx_flip.role = "INFLOW"
        tap.voxfx_flip.initial_velocity = (1.0, 0.0, 0.0)
        f = scene.voxfx.flip
        f.domain, f.resolution = domain, 20
        f.solver, f.boundary = "SPARSE", "open"
        yield scene, f, tmp_path / "voxfx_cache" / "throw" / "liquid"


def test_open_domain_sparse_bake_writes_the_liquid_outside_the_box(throw):
    from voxfx.addon.flip_sparse import estimate_line

    scene, f, folder = throw
    line = estimate_line(bpy.context, f)
    assert line.startswith("Memory ≈") and "sparse" in line
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    for frame in range(1, 7):  # the default Compact cache format: .vxp particles beside the VDB
        assert (folder / f"liquid_{frame:04d}.vxp").is_file() and (folder / f"liquid_{frame:04d}.vdb").is_file()
    first, _ = compact_points.read_points(folder / "liquid_0001.vxp")
    last, _ = compact_points.read_points(folder / "liquid_0006.vxp")
    assert len(last) > len(first)  # the tap outside the box emitted
    assert (last[:, 0] > 1.0).sum() > 100  # the liquid left the box along +x ...
    assert last[:, 2].min() < 0.0  # ... and fell through where the floor would be
    scene.frame_set(6)
    dg = bpy.context.evaluated_depsgraph_get()
    surface = bpy.data.objects["Liquid Surface"].evaluated_get(dg).data
    co = np.array([v.co[:] for v in surface.vertices])
    assert len(co) > 50 and co[:, 0].max() > 1.2 and co[:, 2].min() < 0.0  # meshed outside the box too


def test_the_bake_says_when_max_substeps_limits_the_cfl(throw):
    from voxfx.addon.operators.flip import flip_job

    scene, f, folder = throw
    f.max_substeps = 1
    messages = []
    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 2, resume=False))
    assert runner.run(lambda fraction, message: messages.append(message) or True) == "FINISHED"
    assert any("Max Substeps limits it" in m for m in messages)
