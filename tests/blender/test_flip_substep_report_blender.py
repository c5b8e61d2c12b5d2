"""Bake Liquid's final report names the substeps per frame and why (issue 24:
``FlipSimulation.substep_summary`` in the report line and the CLI's last line)."""

import re
import subprocess
import sys

import bpy
import pytest

from voxfx.addon.jobs import JobRunner

from .helpers import ROOT, voxfx_registered


@pytest.fixture
def tank(tmp_path):
    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.25, 0.25))  # domain 1 × 0.5 × 0.5 m
    domain = bpy.context.active_object
    domain.scale = (1.0, 0.5, 0.5)
    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(0.1, 0.25, 0.1))
    water = bpy.context.active_object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "tank.blend"))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        f = scene.voxfx.flip
        f.domain, f.resolution = domain, 12
        yield scene, f, water


def bake(scene, f, resume=False):
    """Run the liquid job; returns (result, substeps of each stepped frame from its progress lines)."""
    from voxfx.addon.operators.flip import flip_job

    counts = []
    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, scene.frame_start, scene.frame_end,
                                resume=resume))
    assert runner.run(lambda fraction, message: counts.extend(
        int(n) for n in re.findall(r"(\d+) substeps", message)) or True) == "FINISHED", runner.error
    return runner.result, counts


def test_the_report_line_names_the_substeps_per_frame_and_why(tank):
    scene, f, water = tank
    water.voxfx_flip.initial_velocity = (4.0, 0.0, 0.0)  # fast: the CFL asks for several substeps
    result, counts = bake(scene, f)
    assert len(counts) == 3  # frames 2–4 stepped, frame 1 the initial state
    line = result.line("Liquid")
    assert line.startswith("Liquid: baked frames 1-4 in ")
    assert f"substeps per frame {min(counts)}–{max(counts)}" in line and "over 3 frames" in line
    assert "the liquid's speed (CFL)" in line


def test_the_report_says_when_max_substeps_limited_the_cfl(tank):
    scene, f, water = tank
    water.voxfx_flip.initial_velocity = (4.0, 0.0, 0.0)
    f.cfl, f.max_substeps = 0.5, 2
    result, counts = bake(scene, f)
    assert counts == [2, 2, 2]
    assert "substeps per frame 2–2" in result.details and "3 by Max Substeps limited the CFL" in result.details


def test_an_already_baked_range_reports_no_substeps(tank):
    scene, f, water = tank
    bake(scene, f)
    result, counts = bake(scene, f, resume=True)
    assert counts == [] and result.details == ""
    assert result.line("Liquid").endswith("were already baked in '" + result.folder + "'")


def test_the_operator_reports_the_line(tank, capfd):
    scene, f, water = tank
    water.voxfx_flip.initial_velocity = (4.0, 0.0, 0.0)
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    out = capfd.readouterr()
    assert "substeps per frame" in out.out + out.err


def test_the_cli_prints_the_substeps_after_the_frames(tank):
    scene, f, water = tank
    water.voxfx_flip.initial_velocity = (4.0, 0.0, 0.0)
    bpy.ops.wm.save_mainfile()
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-3",
                        "--resolution", "12"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("baked frames 1-3 in ") and "substeps per frame" in last and "over 2 frames" in last


def test_the_timing_buttons_set_the_four_settings_and_fast_takes_three_substeps(tank):
    from voxfx.kernels.flip.grid import TIMINGS, timing_of

    scene, f, water = tank
    items = bpy.ops.voxfx.flip_timing.get_rna_type().properties["timing"].enum_items
    assert [item.identifier for item in items] == list(TIMINGS)  # the panel draws a button per TIMINGS name
    assert timing_of(f) == "accurate"
    with pytest.raises(TypeError, match='enum "quick" not found'):  # Blender's one line, not "Internal error"
        bpy.ops.voxfx.flip_timing(timing="quick")
    assert timing_of(f) == "accurate"
    assert bpy.ops.voxfx.flip_timing(timing="fast") == {"FINISHED"}
    assert timing_of(f) == "fast" and f.max_substeps == 3 and f.time_centred_advection
    assert f.cfl == pytest.approx(TIMINGS["fast"]["cfl"]) and f.max_time_step == pytest.approx(1 / 72)
    result, counts = bake(scene, f)
    assert counts == [3, 3, 3]  # 1/24 s frames at most 1/72 s a substep, Max Substeps 3
    f.cfl = 4.0
    assert timing_of(f) == "custom"
    assert bpy.ops.voxfx.flip_timing(timing="balanced") == {"FINISHED"}
    assert timing_of(f) == "balanced" and f.cfl == pytest.approx(8.0) and f.max_substeps == 16
    assert f.max_time_step == pytest.approx(1 / 72) and f.time_centred_advection
    assert bpy.ops.voxfx.flip_timing(timing="accurate") == {"FINISHED"}
    assert timing_of(f) == "accurate" and not f.time_centred_advection


def test_the_cli_timing_option(tank):
    scene, f, water = tank
    water.voxfx_flip.initial_velocity = (4.0, 0.0, 0.0)
    bpy.ops.wm.save_mainfile()
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--frames", "1-3",
                        "--resolution", "12", "--timing", "fast"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "substeps per frame 3–3" in r.stdout.strip().splitlines()[-1]
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip", "--timing", "quick"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode != 0 and "invalid choice: 'quick'" in r.stderr and "Traceback" not in r.stderr
