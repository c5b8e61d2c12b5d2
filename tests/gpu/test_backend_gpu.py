"""The GPU backend on a real device: choice, facts, memory guard, CUDA module cache."""

import pytest

from voxfx.kernels import backend


def test_auto_picks_the_gpu_and_describes_it(monkeypatch):
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    backend.reset()
    b = backend.get_backend(refresh=True)
    assert b.name == "gpu"
    info = b.device_info()
    assert info.backend == "gpu" and info.name
    assert 0 < info.free_bytes <= info.total_bytes
    assert "cupy" in info.versions and "compute capability" in info.versions


def test_gpu_memory_guard_names_what_did_not_fit():
    b = backend.get_backend(refresh=True)
    free = b.device_info().free_bytes
    b.ensure_fits(1 << 20, "one MiB")
    with pytest.raises(backend.DeviceMemoryError, match="huge grid"):
        b.ensure_fits(free * 2, "huge grid")


def test_raw_modules_compile_once_per_file():
    a = backend.load_module("bitgrid.cu")
    assert backend.load_module("bitgrid.cu") is a
    assert a.get_function("pack_bits") is not None
