"""tools/bundle_gpu_wheels.py: per-platform extension zips with the wheels inside, for
studios without PyPI (issue 10). Small pure-Python wheels stand in for CuPy's
per-platform wheels (one tagged manylinux x86_64, one win_amd64, one for any platform,
like fastrlock / cuda-pathfinder); Blender's own extension tool validates and builds."""

import sys
import tomllib
import zipfile

from tests.standin_wheel import make_wheel
from tools.bundle_gpu_wheels import bundle, main

from .helpers import blender_ext_tool


def test_one_zip_per_platform_with_only_its_wheels(tmp_path):
    wheels = tmp_path / "wheels"
    linux = make_wheel(wheels, "voxfx_gpu_standin", tag="cp311-cp311-manylinux2014_x86_64")
    windows = make_wheel(wheels, "voxfx_gpu_standin", tag="cp311-cp311-win_amd64")
    anywhere = make_wheel(wheels, "voxfx_gpu_helper", tag="py3-none-any")
    zips = bundle(wheels, tmp_path / "dist")
    assert sorted(z.name for z in zips) == ["voxfx-0.1.0-linux_x64.zip", "voxfx-0.1.0-windows_x64.zip"]
    for z, own, other in ((zips[0], linux, windows), (zips[1], windows, linux)):
        names = zipfile.ZipFile(z).namelist()
        assert f"wheels/{own.name}" in names and f"wheels/{anywhere.name}" in names
        assert f"wheels/{other.name}" not in names
        assert "addon/gpu_setup/install.py" in names and not any(n.startswith("tests/") for n in names)
        manifest = tomllib.loads(zipfile.ZipFile(z).read("blender_manifest.toml").decode())
        generated = manifest["build"]["generated"]  # what Blender wrote for this platform's zip
        assert sorted(generated["wheels"]) == sorted(f"./wheels/{w.name}" for w in (own, anywhere))
        assert len(generated["platforms"]) == 1


def test_the_bundled_zip_installs_its_wheel_into_blenders_extension_site_packages(tmp_path, fresh_blender):
    bpy = fresh_blender
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "voxfx_gpu_standin", tag="py3-none-any")
    (zip_path,) = bundle(wheels, tmp_path / "dist", platforms=["linux-x64"]) if sys.platform == "linux" else \
        bundle(wheels, tmp_path / "dist", platforms=["windows-x64"])
    pkg = "bl_ext.user_default.voxfx"
    assert bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default",
                                                    enable_on_install=True) == {"FINISHED"}
    try:
        import voxfx_gpu_standin

        assert "site-packages" in voxfx_gpu_standin.WHERE
    finally:
        sys.modules.pop("voxfx_gpu_standin", None)
        bpy.ops.preferences.addon_disable(module=pkg)
        repo_index = list(bpy.context.preferences.extensions.repos.keys()).index("User Default")
        bpy.ops.extensions.package_uninstall(repo_index=repo_index, pkg_id="voxfx")


def test_pure_python_wheels_need_named_platforms(tmp_path, capsys):
    wheels = tmp_path / "wheels"
    make_wheel(wheels)
    assert main(["--wheels", str(wheels), "--out", str(tmp_path / "dist"),
                 "--blender-ext", str(blender_ext_tool())]) == 1
    assert "name the platforms with --platforms" in capsys.readouterr().err
