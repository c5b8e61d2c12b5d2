"""The ``voxfx`` command: registered with Blender, and ``info`` tells the truth."""

import json
import subprocess
import sys

import pytest

from voxfx.kernels import backend

from .helpers import ROOT, voxfx_registered


def test_info_reports_version_backend_and_memory(capsys):
    with voxfx_registered():
        from voxfx.addon import cli

        assert cli.is_registered()
        assert cli.main(["info", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    b = backend.get_backend()
    assert facts["voxfx"] == "0.1.0"
    assert facts["backend"] == b.name
    assert facts["memory_total"] == b.device_info().total_bytes
    assert 0 < facts["memory_free"] <= facts["memory_total"]
    assert not cli.is_registered()


def test_unknown_command_fails_with_usage(capsys):
    with voxfx_registered():
        from voxfx.addon import cli

        assert cli.main(["frobnicate"]) == 1
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["voxelize", "--resolution", "0", "--out", "x.vdb"],
     "--resolution: '0' is out of range: use a whole number from 2"),
    (["voxelize", "--resolution", "-5", "--out", "x.vdb"], "--resolution: '-5' is out of range"),
    (["voxelize", "--voxel-size", "nan", "--out", "x.vdb"], "--voxel-size: 'nan' is out of range"),
    (["flip", "--resolution", "0"], "--resolution: '0' is out of range: use a whole number from 8 to 2048"),
    (["snow", "--flakes", "0"], "--flakes: '0' is out of range: use a whole number from 1 to 2147483647"),
    (["snow", "--rate", "-5"], "--rate: '-5' is out of range: use a number more than 0.0"),
    (["snow", "--rate", "lots"], "--rate: 'lots' is not a number"),
    (["snow", "--frames", "9-3"], "--frames '9-3' ends before it starts"),
])
def test_out_of_range_options_are_refused_quoting_what_was_typed(capsys, argv, says):
    with voxfx_registered():
        from voxfx.addon import cli

        assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_missing_blend_file_is_one_line():
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", "missing.blend", "info"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 1
    assert r.stderr.strip() == "voxfx: error: --blend needs an existing .blend file, not 'missing.blend'"


def test_python_dash_m_entry_point_runs_info():
    """The README's way to reach the CLI without the Blender binary."""
    r = subprocess.run([sys.executable, "-m", "tools.cli", "info"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert "VoxFX 0.1.0 on Blender" in r.stdout
    assert "backend: cpu" in r.stdout


def test_forced_unusable_gpu_is_an_error_exit():
    if backend.probe_cuda()[0] is not None:
        return  # a GPU machine: forcing the GPU is not an error there
    r = subprocess.run([sys.executable, "-m", "tools.cli", "info"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={"VOXFX_BACKEND": "gpu", "PATH": ""})
    assert r.returncode == 1
    assert "GPU backend requested" in r.stdout


def test_forced_unusable_gpu_during_a_bake_is_one_line_not_an_internal_error(tmp_path):
    if backend.probe_cuda()[0] is not None:
        return
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.mesh.primitive_cube_add()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "c.blend"))
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", str(tmp_path / "c.blend"), "voxelize",
                        "--resolution", "8", "--out", str(tmp_path / "c.vdb")], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env={"VOXFX_BACKEND": "gpu", "PATH": ""})
    assert r.returncode == 1
    assert "GPU backend requested" in r.stderr
    assert "Internal error" not in r.stderr + r.stdout and "Traceback" not in r.stderr + r.stdout


def test_help_of_the_module_entry_point_names_blend():
    r = subprocess.run([sys.executable, "-m", "tools.cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={"VOXFX_BACKEND": "cpu", "PATH": ""})
    assert r.returncode == 0 and "--blend FILE.blend" in r.stdout and "voxelize" in r.stdout
