"""Backend choice, overrides, device facts and the memory guard (CPU machine)."""

import subprocess
import sys

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.backend import BackendError, DeviceMemoryError


@pytest.fixture(autouse=True)
def clean_choice(monkeypatch):
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    backend.set_preference("auto")
    backend.reset()
    yield
    backend.set_preference("auto")
    backend.reset()


def test_env_cpu_forces_numpy(monkeypatch):
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    b = backend.get_backend(refresh=True)
    assert b.name == "cpu" and b.xp is np
    assert "VOXFX_BACKEND=cpu" in b.reason


def test_env_wins_over_preference(monkeypatch):
    backend.set_preference("gpu")
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    assert backend.get_backend(refresh=True).name == "cpu"


def test_bad_env_value_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(backend.ENV_VAR, "tpu")
    with pytest.raises(BackendError, match="VOXFX_BACKEND='tpu'"):
        backend.get_backend(refresh=True)


def test_bad_preference_rejected():
    with pytest.raises(ValueError, match="auto"):
        backend.set_preference("fastest")


def test_auto_matches_what_the_probe_finds():
    cp, why_not = backend.probe_cuda()
    b = backend.get_backend(refresh=True)
    if cp is None:
        assert b.name == "cpu" and why_not in b.reason
    else:
        assert b.name == "gpu"


def test_forced_gpu_without_cuda_raises_naming_the_reason():
    cp, why_not = backend.probe_cuda()
    if cp is not None:
        pytest.skip("this machine has a working GPU")
    backend.set_preference("gpu")
    with pytest.raises(BackendError, match="GPU backend requested") as info:
        backend.get_backend(refresh=True)
    assert why_not in str(info.value)


def test_cpu_device_info_reports_real_memory():
    info = backend.get_backend(refresh=True).device_info() if backend.get_backend().name == "cpu" \
        else backend._CPU.device_info()
    assert info.backend == "cpu"
    assert 0 < info.free_bytes <= info.total_bytes
    # /proc/meminfo is the independent source on Linux.
    with open("/proc/meminfo") as f:
        total_kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    assert info.total_bytes == total_kib * 1024
    assert "free of" in info.summary()


def test_ensure_fits_names_what_did_not_fit():
    free = backend._CPU.device_info().free_bytes
    backend.ensure_fits(1024, "a small grid", xp=np)  # fits: no error
    with pytest.raises(DeviceMemoryError) as info:
        backend.ensure_fits(free * 4, "a 99999³ density grid", xp=np)
    msg = str(info.value)
    assert "a 99999³ density grid" in msg and "free" in msg and "GiB" in msg
    assert isinstance(info.value, MemoryError)


def test_to_numpy_and_array_module_on_numpy():
    a = np.arange(6, dtype=np.float32)
    assert backend.to_numpy(a) is a
    assert backend.array_module(a) is np
    assert backend.to_numpy([1, 2]).tolist() == [1, 2]


def test_cupy_without_driver_falls_back_with_one_message(tmp_path):
    """A fake 'cupy' whose runtime raises like a driverless machine: the real probe code
    must catch it and fall back to NumPy with one message (fresh interpreter)."""
    fake = tmp_path / "cupy"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "__version__ = '13.6.0'\n"
        "class _Runtime:\n"
        "    @staticmethod\n"
        "    def getDeviceCount():\n"
        "        raise RuntimeError('CUDA driver version is insufficient for CUDA runtime version')\n"
        "class cuda:\n"
        "    runtime = _Runtime()\n"
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])\n"
        "from tools.package import load; load()\n"
        "from voxfx.kernels import backend\n"
        "b = backend.get_backend(); b = backend.get_backend(refresh=True)\n"
        "print(b.name)\n"
    )
    root = str(backend.CUDA_DIR.parent.parent)
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path), root],
                       capture_output=True, text=True, env={"PATH": ""}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cpu"
    lines = [line for line in r.stderr.splitlines() if line.startswith("VoxFX:")]
    assert len(lines) == 1, r.stderr  # one clear message, even after a re-choice
    assert "driver version is insufficient" in lines[0]
