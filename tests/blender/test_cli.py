"""The ``voxfx`` command: registered with Blender, and ``info`` tells the truth."""

import json
import subprocess
import sys

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

        assert cli.main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


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
