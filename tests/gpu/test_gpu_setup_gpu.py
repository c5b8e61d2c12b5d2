"""GPU set-up on a real device (issues 10 and 21): CuPy compiles into the kernel cache
folder VoxFX chose (CUPY_CACHE_DIR read at compile time), falls back to a temporary one
when it is unwritable or becomes so mid-job, and the driver found without CuPy agrees
with CuPy's own answer."""

import os
import shutil
import uuid

import pytest

from voxfx.addon.gpu_setup import driver, plan
from voxfx.kernels import backend, kernel_cache


@pytest.fixture(autouse=True)
def own_cache_state(monkeypatch):
    for var in (kernel_cache.ENV_VAR, kernel_cache.CUPY_ENV):
        monkeypatch.delenv(var, raising=False)
    kernel_cache._reset_for_tests()
    yield
    kernel_cache._reset_for_tests()


def fresh_compile():
    """Compile bitgrid.cu under a never-seen option, so CuPy cannot take it from a cache."""
    return backend.load_module("bitgrid.cu", options=(f"-DVOXFX_CACHE_TEST_{uuid.uuid4().hex}=1",))


def cubins(folder):
    return {p.name for p in folder.iterdir() if p.suffix == ".cubin"}


def test_cupy_compiles_into_the_folder_voxfx_chose(tmp_path):
    backend.get_backend(refresh=True)  # CuPy imported first: the folder must still be honoured
    chosen = kernel_cache.configure(tmp_path / "kernels").path
    before = cubins(chosen)
    fresh_compile()
    assert len(cubins(chosen) - before) >= 1


def test_unwritable_folder_falls_back_and_the_gpu_is_still_used(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = kernel_cache.configure(blocker / "kernels")
    assert cache.source == "temporary fallback"
    assert backend.get_backend(refresh=True).name == "gpu"
    before = cubins(cache.path)
    fresh_compile()
    assert len(cubins(cache.path) - before) >= 1


def test_cache_lost_mid_job_compiles_into_a_temporary_folder(tmp_path):
    wanted = tmp_path / "kernels"
    kernel_cache.configure(wanted)
    assert backend.get_backend(refresh=True).name == "gpu"
    shutil.rmtree(wanted)
    wanted.write_text("the cache folder is a file now")
    fresh_compile()  # no bare OSError
    used = kernel_cache.current().path
    assert used != wanted and cubins(used)
    assert os.environ["CUPY_CACHE_DIR"] == str(used)


def test_driver_found_without_cupy_matches_cupy():
    import cupy as cp

    found = driver.detect()
    v = cp.cuda.runtime.driverGetVersion()
    assert found.found and found.cuda == (v // 1000, (v % 1000) // 10)
    assert plan.plan_install(found.cuda, __import__("numpy").__version__).wheel.startswith("cupy-cuda")
