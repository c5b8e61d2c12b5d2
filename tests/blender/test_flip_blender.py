"""Bake Liquid end to end in headless Blender: a tiny dam break around an obstacle."""

import subprocess
import sys

import bpy
import numpy as np
import pytest

from voxfx.addon.jobs import JobRunner
from voxfx.addon import compact_points, ply

from .helpers import ROOT, voxfx_registered


@pytest.fixture
def dam(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.25, 0.5))  # domain 1 × 0.5 × 1 m
    domain = bpy.context.active_object
    domain.scale = (1.0, 0.5, 1.0)
    bpy.ops.mesh.primitive_cube_add(size=0.3, location=(0.15, 0.25, 0.15))
    water = bpy.context.active_object
    bpy.ops.mesh.primitive_cube_add(size=0.1, location=(0.6, 0.25, 0.05))
    rock = bpy.context.active_object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "dam.blend"))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        rock.voxfx_flip.role = "OBSTACLE"
        f = scene.voxfx.flip
        f.domain, f.resolution = domain, 20
        yield scene, f, water, rock, tmp_path / "voxfx_cache" / "dam" / "liquid"


def particle_file(folder, frame):
    """The frame's particle file, in whichever cache format the bake used (one only)."""
    found = [p for p in (folder / f"liquid_{frame:04d}.ply", folder / f"liquid_{frame:04d}.vxp") if p.is_file()]
    assert len(found) == 1, found
    return found[0]


def read_points(path):
    return (compact_points.read_points if path.suffix == ".vxp" else ply.read_points)(path)


@pytest.mark.parametrize("cache_format, suffix", [("COMPACT", ".vxp"), ("PLY_VDB", ".ply")])
def test_bake_writes_mesh_points_and_vdb_per_frame(dam, cache_format, suffix):
    scene, f, water, rock, folder = dam
    assert scene.voxfx.cache_format == "COMPACT"  # the default: a studio pays for the disk
    scene.voxfx.cache_format = cache_format
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    for frame in range(1, 5):
        assert particle_file(folder, frame).suffix == suffix and (folder / f"liquid_{frame:04d}.vdb").is_file()
    first, _ = read_points(particle_file(folder, 1))
    last, attrs = read_points(particle_file(folder, 4))
    assert len(first) == len(last) > 1000
    assert last[:, 2].mean() < first[:, 2].mean()  # the column collapses
    assert {"velocity_x", "velocity_z", "size"} <= set(attrs)
    scene.frame_set(3)
    dg = bpy.context.evaluated_depsgraph_get()
    surface = bpy.data.objects["Liquid Surface"].evaluated_get(dg).data
    assert len(surface.vertices) > 50 and "velocity" in surface.attributes
    assert [m.name for m in surface.materials if m] == ["VoxFX Liquid"]  # set inside the node tree
    co = np.array([v.co[:] for v in surface.vertices])
    assert co.min() > -0.06 and co[:, 0].max() < 1.06  # inside the domain (± a cell)
    geometry = bpy.data.objects["Liquid Particles"].evaluated_get(dg).evaluated_geometry()
    assert len(geometry.pointcloud.points) == len(first)
    f.particle_display = 0.25  # the panel's Viewport Particles applies to the baked object at once
    dg = bpy.context.evaluated_depsgraph_get()  # background: a viewport depsgraph
    thinned = bpy.data.objects["Liquid Particles"].evaluated_get(dg).evaluated_geometry()
    assert 0.15 * len(first) < len(thinned.pointcloud.points) < 0.35 * len(first)
    vol = bpy.data.objects["Liquid VDB"]
    assert vol.data.is_sequence and vol.data.frame_duration == 4
    # Hidden in renders and the viewport (Blender would keep every drawn frame: issue 21);
    # shown, it loads both grids.
    assert vol.hide_render and vol.hide_viewport
    vol.hide_viewport = False
    scene.frame_set(2)
    assert vol.data.grids.load() and {g.name for g in vol.data.grids} == {"surface", "velocity"}


def test_resume_after_cancel_matches_an_uninterrupted_bake(dam):
    from voxfx.addon.operators.flip import flip_job

    scene, f, water, rock, folder = dam
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    reference = [particle_file(folder, k).read_bytes() for k in range(1, 5)]
    bpy.ops.voxfx.flip_free()
    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4))
    while not (folder / "liquid_0002.vxp").exists():  # frames 1 and 2 baked (steps include kernel calls)
        assert runner.step() == "RUNNING"
    runner.request_cancel()
    assert runner.step() == "CANCELLED"
    # Frames are written on a writer thread while the next one simulates, and Cancel waits
    # for the frame in flight: frame 3 may already be recorded. The resumed bake computes
    # exactly the frames that were not.
    third_done = any((folder / f"liquid_0003.{ext}").is_file() for ext in ("ply", "vxp"))
    resumed = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4))
    assert resumed.run() == "FINISHED"
    assert resumed.result.summary == ("baked frames 4" if third_done else "baked frames 3-4")
    assert [particle_file(folder, k).read_bytes() for k in range(1, 5)] == reference  # CPU: bit-identical


def test_bad_input_is_explained(dam):
    scene, f, water, rock, folder = dam
    water.voxfx_flip.role = "NONE"
    assert not bpy.ops.voxfx.flip_bake.poll()  # no liquid: poll explains
    water.voxfx_flip.role = "LIQUID"
    water.location = (5, 5, 5)
    with pytest.raises(RuntimeError, match="outside the domain"):
        bpy.ops.voxfx.flip_bake()
    water.location = (0.15, 0.25, 0.15)
    f.resolution = 2048
    from voxfx.kernels import backend

    if backend.device_info().free_bytes > 2 ** 42:
        pytest.skip("more than 4 TiB free")
    with pytest.raises(RuntimeError, match="largest resolution that fits is \\d+"):
        bpy.ops.voxfx.flip_bake()
    assert not folder.exists()


def test_cli_flip(dam):
    scene, f, water, rock, folder = dam
    bpy.ops.wm.save_mainfile()
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-2",
                        "--resolution", "12"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "baked frames 1-2" in r.stdout and (folder / "liquid_0002.vdb").is_file()


def test_inflow_outflow_and_a_moving_obstacle(dam):
    scene, f, water, rock, folder = dam
    bpy.ops.mesh.primitive_cube_add(size=0.1, location=(0.8, 0.25, 0.8))
    tap = bpy.context.active_object
    tap.voxfx_flip.role = "INFLOW"
    tap.voxfx_flip.initial_velocity = (0.0, 0.0, -1.0)
    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(0.9, 0.25, 0.1))
    sink = bpy.context.active_object
    sink.voxfx_flip.role = "OUTFLOW"
    rock.location = (0.6, 0.25, 0.05)
    rock.keyframe_insert("location", frame=1)
    rock.location = (0.4, 0.25, 0.05)  # slides towards the water
    rock.keyframe_insert("location", frame=4)
    from voxfx.addon.operators.flip import Poses, domain_spec
    from voxfx.kernels.flip.bodies import obstacle_state

    poses = Poses(bpy.context, [rock])
    now, after = poses.at(2)[rock.name], poses.at(3)[rock.name]
    cells, velocity = obstacle_state([now], [after.matrix], domain_spec(f.domain, f.resolution), 24.0, np)
    assert len(cells) and velocity is not None and velocity[..., 0].min() < 0  # moving towards −x
    vx = velocity[cells[:, 2], cells[:, 1], cells[:, 0], 0]  # a translation: every cell at the rock's speed
    assert vx == pytest.approx(np.full(len(cells), (after.matrix[0, 3] - now.matrix[0, 3]) * 24.0), rel=1e-4)
    changes = []
    bpy.app.handlers.frame_change_pre.append(lambda scene, *_: changes.append(scene.frame_current))
    try:
        assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    finally:
        bpy.app.handlers.frame_change_pre.clear()
    assert len(changes) <= 4 + 2, changes  # the scene is visited once per baked frame (4) and at the start
    counts = [len(read_points(particle_file(folder, k))[0]) for k in range(1, 5)]
    assert counts[1] > counts[0]  # the tap adds liquid
    last, _ = read_points(particle_file(folder, 4))
    in_sink = (np.abs(last[:, 0] - 0.9) < 0.08) & (last[:, 2] < 0.18)
    assert not in_sink.any()  # the outflow keeps its volume empty


def test_cfl_number_sets_the_substeps(dam):
    import re

    from voxfx.addon.operators.flip import flip_job

    scene, f, water, rock, folder = dam
    water.voxfx_flip.initial_velocity = (3.0, 0.0, 0.0)  # fast enough to need substeps
    f.max_substeps = 64

    def substeps(cfl):
        f.cfl = cfl
        counts = []
        runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4, resume=False))
        assert runner.run(lambda fraction, message: counts.extend(
            int(n) for n in re.findall(r"(\d+) substeps", message)) or True) == "FINISHED"
        return sum(counts)

    few, many = substeps(4.0), substeps(0.5)
    assert 0 < few and many >= 4 * few  # substeps ∝ 1 / CFL (rounded up per frame)


def test_after_a_bake_the_liquid_is_what_renders(dam):
    scene, f, water, rock, folder = dam
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    assert f.domain.display_type == "BOUNDS" and f.domain.hide_render
    assert water.hide_render and water.display_type == "WIRE"  # the source only defines the sim
    assert not rock.hide_render  # an obstacle is a scene object
    assert bpy.data.objects["Liquid Particles"].hide_render
    assert not bpy.data.objects["Liquid Surface"].hide_render
    f.render_particles, f.hide_sim_objects = True, False
    f.domain.hide_render = water.hide_render = False
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}  # all frames done: only the outputs are set up again
    assert not bpy.data.objects["Liquid Particles"].hide_render and not f.domain.hide_render


def test_the_disk_estimate_bounds_the_real_bake_and_a_small_disk_refuses_up_front(dam, monkeypatch):
    from voxfx.addon import disk_plan
    from voxfx.addon.operators.flip import disk_estimate

    scene, f, water, rock, folder = dam
    plan = disk_estimate(scene)
    assert plan is not None and plan.frames == 4
    monkeypatch.setenv(disk_plan.FREE_ENV, str(plan.bytes_for(2) + disk_plan.RESERVE))  # a small disk, injected
    with pytest.raises(RuntimeError, match="2 frames would fit"):
        bpy.ops.voxfx.flip_bake()
    assert not list(folder.glob("liquid_0*"))  # refused before the first frame
    monkeypatch.delenv(disk_plan.FREE_ENV)
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    written = sum(p.stat().st_size for p in folder.iterdir())
    assert written <= plan.total < 6 * written  # an upper bound, not a wild one


def test_the_disk_estimate_counts_what_an_inflow_adds(dam):
    """A small bake whose liquid comes mostly from a tap: its real bytes stay under the
    estimate and within 1.5× of it; without the tap's particles the estimate fell short."""
    from voxfx.addon import disk_plan
    from voxfx.addon.operators.flip import disk_estimate

    scene, f, water, rock, folder = dam
    water.scale = (0.5, 0.5, 0.5)  # 0.15 m of water to start with
    rock.voxfx_flip.role = "NONE"
    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(0.5, 0.25, 0.7))
    tap = bpy.context.active_object
    tap.voxfx_flip.role = "INFLOW"
    tap.voxfx_flip.initial_velocity = (0.0, 0.0, -2.0)
    f.resolution = 40
    scene.frame_end = 12
    plan = disk_estimate(scene)
    assert plan.frame_sizes is not None and plan.last_frame > 3 * plan.per_frame  # the tap's liquid counted
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    written = sum(p.stat().st_size for p in folder.iterdir())
    counts = [len(read_points(particle_file(folder, k))[0]) for k in (1, 12)]
    assert counts[1] > 5 * counts[0]  # most of the liquid came from the tap
    assert written <= plan.total <= 1.5 * written, (written, plan.total)
    without = disk_plan.liquid_plan(plan.frames, 8 * int(counts[0] / 8), "COMPACT", scene.voxfx.checkpoint_every)
    assert without.total < written  # what the estimate said before it counted inflows


def test_cli_prints_the_disk_estimate_and_refuses_a_full_disk(dam):
    scene, f, water, rock, folder = dam
    bpy.ops.wm.save_mainfile()
    args = [sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-2",
            "--resolution", "12"]
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={"VOXFX_BACKEND": "cpu", "PATH": "", "VOXFX_FREE_BYTES": "1000"})
    assert r.returncode != 0 and "not even one frame fits" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    r = subprocess.run(args + ["--cache-format", "ply"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Disk: about" in r.stdout and "free" in r.stdout
    assert (folder / "liquid_0002.ply").is_file() and not (folder / "liquid_0002.vxp").exists()


def test_the_liquid_panel_shows_the_disk_estimate_and_free_space(dam):
    from voxfx.addon import panels

    panels._disk_memo.clear()
    line = panels._disk_line(bpy.context, "flip")
    assert line.startswith("Disk: about") and "for 4 frames" in line and line.endswith("free")


def test_a_ply_bake_resumes_in_its_own_format_when_the_default_is_compact(dam):
    """An interrupted v0.1 (PLY) bake is neither thrown away nor mixed with .vxp frames."""
    from voxfx.addon.operators.flip import flip_job

    scene, f, water, rock, folder = dam
    scene.voxfx.cache_format = "PLY_VDB"
    first = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 2))
    assert first.run() == "FINISHED"
    before = [particle_file(folder, k).read_bytes() for k in (1, 2)]
    scene.voxfx.cache_format = "COMPACT"
    resumed = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4))
    assert resumed.run() == "FINISHED" and resumed.result.summary == "baked frames 3-4"
    assert any("goes on as such" in note for note in resumed.result.notes)
    assert [particle_file(folder, k).suffix for k in range(1, 5)] == [".ply"] * 4
    assert [particle_file(folder, k).read_bytes() for k in (1, 2)] == before
    particles = bpy.data.objects["Liquid Particles"]
    scene.frame_set(4)
    assert len(particles.data.vertices) == len(read_points(particle_file(folder, 4))[0])
