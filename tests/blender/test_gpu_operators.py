"""Check GPU / Install GPU Support / Remove GPU Support driven headless (issue 10), and
the kernel cache folder the add-on hands to CuPy (issue 21). This machine has no NVIDIA
driver; the install goes into a throwaway folder from a local wheels folder, with a small
pure-Python wheel standing in for CuPy (the pip, import-path and remove steps are the
same for any wheel)."""

import os
import sys

import pytest

from tests.standin_wheel import make_wheel

from .helpers import voxfx_registered


@pytest.fixture
def gpu_folder(tmp_path, monkeypatch):
    for var in [v for v in os.environ if v.startswith("PIP_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("VOXFX_GPU_DIR", str(tmp_path / "voxfx_gpu"))
    return tmp_path / "voxfx_gpu"


def no_driver_here():
    from voxfx.addon.gpu_setup import driver

    if driver.detect().found:
        pytest.skip("this machine has an NVIDIA driver")


def test_check_gpu_reports_the_missing_driver_and_cupy(fresh_blender, gpu_folder, capfd):
    no_driver_here()
    bpy = fresh_blender
    with voxfx_registered():
        from voxfx.addon.operators.gpu import last_findings

        assert bpy.ops.voxfx.gpu_check() == {"FINISHED"}
        findings = last_findings()
    out = capfd.readouterr()
    text = out.out + out.err
    assert "no NVIDIA driver found" in text and "CuPy: not installed" in text
    assert "Traceback" not in text
    assert findings[0].startswith("NVIDIA driver: no NVIDIA driver found")
    assert findings[-1].startswith("GPU not usable: missing an NVIDIA driver")
    assert any(line.startswith("Blender's numpy: ") for line in findings)


def test_install_refuses_without_a_driver_in_one_line(fresh_blender, gpu_folder):
    no_driver_here()
    bpy = fresh_blender
    with voxfx_registered():
        with pytest.raises(RuntimeError) as info:
            bpy.ops.voxfx.gpu_install()
    message = str(info.value)
    assert "no NVIDIA driver found" in message and "install the NVIDIA driver first" in message
    assert "Traceback" not in message
    assert not gpu_folder.exists()


def test_install_then_remove_from_a_wheels_folder(fresh_blender, gpu_folder, tmp_path):
    bpy = fresh_blender
    wheels = tmp_path / "wheels"
    make_wheel(wheels)
    with voxfx_registered():
        r = bpy.ops.voxfx.gpu_install(requirement="voxfx-gpu-standin", wheels_dir=str(wheels))
        assert r == {"FINISHED"}
        assert (gpu_folder / "install.log").is_file()
        assert str(gpu_folder) in sys.path  # usable without a restart
        try:
            import voxfx_gpu_standin

            assert voxfx_gpu_standin.WHERE.startswith(str(gpu_folder))
        finally:
            sys.modules.pop("voxfx_gpu_standin", None)

        assert bpy.ops.voxfx.gpu_remove() == {"FINISHED"}
        assert not gpu_folder.exists() and str(gpu_folder) not in sys.path


def test_the_add_on_gives_cupy_a_kernel_cache_in_blenders_user_folder(fresh_blender, monkeypatch):
    from voxfx.kernels import kernel_cache

    for var in (kernel_cache.ENV_VAR, kernel_cache.CUPY_ENV):
        monkeypatch.delenv(var, raising=False)
    kernel_cache._reset_for_tests()
    with voxfx_registered():
        from voxfx.addon.operators.gpu import user_data_dir

        expected = user_data_dir("kernel_cache")
        assert kernel_cache.current().path == expected and expected.is_dir()
        assert os.environ["CUPY_CACHE_DIR"] == str(expected)
        assert str(expected).startswith(os.environ["BLENDER_USER_RESOURCES"])
    kernel_cache._reset_for_tests()
