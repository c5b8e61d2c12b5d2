"""GPU support set-up without Blender (issue 10): the driver found without CuPy, the CuPy
wheel chosen for the driver and numpy, and a real pip install into a throwaway VoxFX
folder from a local wheels folder (no network). A small pure-Python wheel stands in for
CuPy (tests/standin_wheel.py): the install, import-path and remove steps are the same
for any wheel."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.standin_wheel import make_wheel
from voxfx.addon.gpu_setup import check, driver, folder, plan
from voxfx.addon.gpu_setup.install import install_steps
from voxfx.addon.jobs import FAILED, FINISHED, JobRunner

MISSING_LIB = ("libcuda-not-here-voxfx.so.1",)


# --------------------------------------------------------------------------- driver

def test_this_machine_has_no_driver_and_says_so_clearly():
    found = driver.detect()
    if found.found:
        pytest.skip(f"this machine has an NVIDIA driver (CUDA {found.cuda_text})")
    assert found.cuda is None and found.problem
    line = found.summary()
    assert line.startswith("NVIDIA driver: no NVIDIA driver found (") and "\n" not in line


def test_missing_library_and_no_nvidia_smi_means_no_driver():
    found = driver.detect(libraries=MISSING_LIB, nvidia_smi=None)
    assert not found.found
    assert "libcuda-not-here-voxfx.so.1" in found.problem


def test_nvidia_smi_answers_when_the_library_cannot_be_loaded(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--query-gpu=name,driver_version" ]; then echo "NVIDIA RTX A4000, 550.54.15"; exit 0; fi\n'
        'echo "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |"\n')
    smi.chmod(0o755)
    found = driver.detect(libraries=MISSING_LIB, nvidia_smi=str(smi))
    assert found.cuda == (12, 4) and found.source == "nvidia-smi"
    assert found.gpus == ("NVIDIA RTX A4000",) and found.release == "550.54.15"
    assert "CUDA 12.4" in found.summary() and "RTX A4000" in found.summary()


def test_driver_library_is_asked_through_ctypes(tmp_path):
    """A stand-in libcuda exporting cuDriverGetVersion, loaded for real with ctypes."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or sys.platform != "linux":
        pytest.skip("needs a C compiler on Linux")
    src = tmp_path / "fake_cuda.c"
    src.write_text("int cuDriverGetVersion(int *v) { *v = 12080; return 0; }\n")
    lib = tmp_path / "libcuda-standin.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    found = driver.detect(libraries=MISSING_LIB + (str(lib),), nvidia_smi=None)
    assert found.cuda == (12, 8) and found.source == str(lib)


# --------------------------------------------------------------------------- plan

def test_numpy_1_gets_cupy_13_for_the_drivers_cuda_major():
    p = plan.plan_install((12, 4), "1.26.4")
    assert p.wheel == "cupy-cuda12x" and p.requirements[0] == "cupy-cuda12x>=13,<14"
    assert set(p.requirements[1:]) == {"nvidia-cuda-nvrtc-cu12==12.*", "nvidia-cuda-runtime-cu12==12.*",
                                       "nvidia-cublas-cu12==12.*"}
    assert plan.plan_install((11, 8), "1.26.4").wheel == "cupy-cuda11x"


def test_numpy_2_gets_cupy_14_and_cuda_13_libraries_lose_their_suffix():
    p = plan.plan_install((13, 0), "2.1.3")
    assert p.requirements[0] == "cupy-cuda13x>=14,<15"
    assert "nvidia-cuda-nvrtc==13.*" in p.requirements


def test_a_newer_driver_than_any_build_uses_the_newest_build():
    assert plan.plan_install((14, 1), "2.3.0").wheel == "cupy-cuda13x"


def test_cupy_14_has_no_cuda_11_build_so_the_driver_must_be_updated():
    with pytest.raises(plan.PlanError, match="update the NVIDIA driver"):
        plan.plan_install((11, 8), "2.0.2")


def test_check_lists_what_is_missing_without_a_driver(tmp_path):
    nothing = driver.Driver(None, problem="libcuda.so.1: cannot open shared object file")
    found = check.check(tmp_path / "gpu", driver=nothing, numpy_version="1.26.4")
    assert found.lines[0].startswith("NVIDIA driver: no NVIDIA driver found")
    assert "Blender's numpy: 1.26.4 (CuPy 13.x)" in found.lines
    assert not found.gpu_ready and "an NVIDIA driver" in found.summary
    assert all("\n" not in line for line in found.lines)


# --------------------------------------------------------------------------- install

@pytest.fixture
def pip_offline(monkeypatch):
    """pip sees only what the test gives it: no config files, no PIP_* settings."""
    for var in [v for v in os.environ if v.startswith("PIP_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def run_job(steps):
    runner = JobRunner(steps, title="install")
    messages = []
    runner.run(lambda fraction, message: messages.append((fraction, message)) or True)
    return runner, messages


def test_install_import_and_remove_from_a_wheels_folder(tmp_path, pip_offline):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, requires=("numpy>=1.20",))  # like CuPy, it needs numpy
    target = tmp_path / "voxfx_gpu"
    runner, messages = run_job(install_steps(target, ["voxfx-gpu-standin"], wheels_dir=wheels))
    assert runner.state == FINISHED, runner.error
    assert runner.result == ["voxfx-gpu-standin 1.0"]
    fractions = [f for f, _ in messages]
    assert fractions == sorted(fractions) and len(messages) >= 3  # progress, line by line
    log = (target / folder.LOG_NAME).read_text()
    assert "--no-index" in log and "Successfully installed voxfx-gpu-standin-1.0" in log
    # Blender's numpy satisfies the dependency: no second numpy in the folder
    assert not any(p.name.startswith("numpy") for p in target.iterdir())
    assert folder.installed(target) == [("voxfx-gpu-standin", "1.0")]

    assert str(target) not in sys.path
    try:
        folder.activate(target)
        assert sys.path[-1] == str(target)
        import voxfx_gpu_standin

        assert Path(voxfx_gpu_standin.WHERE).parent.parent == target
    finally:
        sys.modules.pop("voxfx_gpu_standin", None)
    folder.remove(target)
    assert not target.exists() and str(target) not in sys.path


def test_offline_install_names_the_wheel_the_folder_lacks(tmp_path, pip_offline):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    runner, _ = run_job(install_steps(tmp_path / "gpu", ["cupy-cuda12x>=13,<14"], wheels_dir=wheels))
    assert runner.state == FAILED
    assert runner.error.startswith(f"the wheels folder {wheels} has no wheel of cupy-cuda12x")
    assert "log: " in runner.error and "\n" not in runner.error


def test_no_network_says_so_and_points_to_the_wheels_folder(tmp_path, pip_offline, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there
    runner, _ = run_job(install_steps(tmp_path / "gpu", ["cupy-cuda12x>=13,<14"]))
    assert runner.state == FAILED
    assert runner.error.startswith("cannot reach PyPI") and "Wheels Folder" in runner.error


def test_an_unmarked_folder_is_never_installed_into_or_removed(tmp_path):
    theirs = tmp_path / "someones_folder"
    theirs.mkdir()
    (theirs / "precious.txt").write_text("keep")
    with pytest.raises(folder.FolderError, match="not made by VoxFX"):
        folder.prepare(theirs)
    with pytest.raises(folder.FolderError, match="not a GPU support folder made by VoxFX"):
        folder.remove(theirs)
    assert (theirs / "precious.txt").exists()
    home_with_mark = Path.home() / folder.MARKER
    assert not home_with_mark.exists()
    with pytest.raises(folder.FolderError):
        folder.remove(Path.home())


def test_env_var_moves_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(folder.ENV_VAR, str(tmp_path / "farm_gpu"))
    assert folder.gpu_folder(tmp_path / "blender_user") == tmp_path / "farm_gpu"
    monkeypatch.delenv(folder.ENV_VAR)
    assert folder.gpu_folder(tmp_path / "blender_user") == tmp_path / "blender_user"


def test_cancel_stops_pip_while_it_waits_for_the_network(tmp_path, pip_offline, monkeypatch):
    """A server that accepts and never answers keeps pip waiting (as a slow download
    would); cancelling the job must stop pip at once and say so in the log."""
    import socket
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.getsockname()[1]}/simple")
    try:
        runner = JobRunner(install_steps(tmp_path / "gpu", ["cupy-cuda12x>=13,<14"]), title="install")
        started = time.monotonic()
        while runner.step() == "RUNNING" and time.monotonic() - started < 2.0:
            pass  # pip is started and waiting
        runner.request_cancel()
        assert runner.step() == "CANCELLED"
        assert time.monotonic() - started < 8.0  # not pip's 15 s network timeout
    finally:
        server.close()
    log = (tmp_path / "gpu" / folder.LOG_NAME).read_text()
    assert "--- stopped by VoxFX" in log
