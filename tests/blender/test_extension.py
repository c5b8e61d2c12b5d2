"""The extension as Blender sees it: its own validate/build tool accepts it, the built
zip installs, enables and disables twice, and nothing stays registered."""

import subprocess
import sys
import zipfile

import pytest

from .helpers import ROOT, blender_ext_tool

PKG = "bl_ext.user_default.voxfx"


def run_tool(*args):
    return subprocess.run([sys.executable, str(blender_ext_tool()), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    r = run_tool("build", "--source-dir", str(ROOT), "--output-dir", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    zips = list(out.glob("voxfx-*.zip"))
    assert len(zips) == 1, r.stdout
    return zips[0]


def test_blender_validates_the_source_tree():
    r = run_tool("validate", str(ROOT))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_built_zip_has_the_addon_and_not_the_dev_tree(built_zip):
    names = zipfile.ZipFile(built_zip).namelist()
    for needed in ("blender_manifest.toml", "__init__.py", "addon/__init__.py", "kernels/backend.py",
                   "kernels/cuda/bitgrid.cu", "kernels/cuda/include/voxfx_rng.cuh",
                   "kernels/cuda/include/voxfx_mac.cuh", "addon/gpu_setup/install.py",
                   "addon/operators/gpu.py"):
        assert needed in names
    for excluded in ("tests/", "bench/", "demo_blends/", ".ci/", "tools/", ".venv/", ".venv-min/", ".venv-52/"):
        assert not any(n.startswith(excluded) for n in names), excluded


def test_built_zip_ships_every_cuda_source_and_header(built_zip):
    """Every kernel file and shared header is in the zip (a module split into new files, a
    new header: the built extension compiles them on the user's GPU)."""
    names = set(zipfile.ZipFile(built_zip).namelist())
    cuda = ROOT / "kernels" / "cuda"
    sources = sorted(p.relative_to(ROOT).as_posix() for p in [*cuda.glob("*.cu"), *cuda.glob("include/*.cuh")])
    assert any(s.endswith(".cu") for s in sources) and any(s.endswith(".cuh") for s in sources)
    assert [s for s in sources if s not in names] == []


def registered_voxfx_types(bpy):
    return sorted(n for n in dir(bpy.types) if n.startswith("VOXFX_") or n.startswith("VoxFX"))


def our_handlers(bpy):
    found = []
    for name in dir(bpy.app.handlers):
        handlers = getattr(bpy.app.handlers, name)
        if isinstance(handlers, list):
            found += [f for f in handlers if getattr(f, "__module__", "").startswith(PKG)]
    return found


def cli_command_is_free(bpy, capfd):
    """Registering 'voxfx' ourselves must not warn about a duplicate."""
    capfd.readouterr()
    handle = bpy.utils.register_cli_command("voxfx", lambda argv: 0)
    bpy.utils.unregister_cli_command(handle)
    out = capfd.readouterr()
    return "duplicate" not in (out.out + out.err)


def test_install_enable_disable_twice_leaves_nothing(built_zip, fresh_blender, capfd):
    bpy = fresh_blender
    before = registered_voxfx_types(bpy)
    assert before == []
    r = bpy.ops.extensions.package_install_files(filepath=str(built_zip), repo="user_default", enable_on_install=True)
    assert r == {"FINISHED"}
    try:
        for _ in range(2):
            assert PKG in bpy.context.preferences.addons.keys()
            assert "VOXFX_OT_check_device" in registered_voxfx_types(bpy)
            assert hasattr(bpy.types.Scene, "voxfx")
            assert not cli_command_is_free(bpy, capfd)  # our command is there
            assert bpy.ops.voxfx.check_device() == {"FINISHED"}

            bpy.ops.preferences.addon_disable(module=PKG)
            assert PKG not in bpy.context.preferences.addons.keys()
            assert registered_voxfx_types(bpy) == []
            assert not hasattr(bpy.types.Scene, "voxfx")
            assert our_handlers(bpy) == []
            assert cli_command_is_free(bpy, capfd)

            bpy.ops.preferences.addon_enable(module=PKG)
    finally:
        bpy.ops.preferences.addon_disable(module=PKG)
        repo_index = list(bpy.context.preferences.extensions.repos.keys()).index("User Default")
        bpy.ops.extensions.package_uninstall(repo_index=repo_index, pkg_id="voxfx")
    assert registered_voxfx_types(bpy) == []


def test_register_refuses_a_blender_older_than_the_manifest_minimum(fresh_blender, monkeypatch):
    import voxfx.addon
    from voxfx.kernels.errors import VoxFXError

    assert voxfx.addon.blender_version_min() <= tuple(fresh_blender.app.version)
    monkeypatch.setattr(voxfx.addon, "blender_version_min", lambda: (99, 0, 0))
    with pytest.raises(VoxFXError, match=r"needs Blender 99\.0\.0 or newer, not "):
        voxfx.register()
    assert registered_voxfx_types(fresh_blender) == []
