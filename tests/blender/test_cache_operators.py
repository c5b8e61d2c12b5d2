"""Cache folders relative to the .blend, and the Free Bake operator."""

import bpy
import numpy as np
import pytest

from voxfx.addon.cache import BakeCache, CacheError, resolve_folder

from .helpers import voxfx_registered


def test_relative_folder_needs_a_saved_blend():
    with pytest.raises(CacheError, match="not saved"):
        resolve_folder("//voxfx_cache/")


def test_relative_folder_resolves_next_to_the_blend(tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    assert resolve_folder("//voxfx_cache/liquid") == (tmp_path / "voxfx_cache" / "liquid").resolve()


def test_free_bake_operator_removes_only_that_bake(tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    with voxfx_registered():
        assert bpy.context.scene.voxfx.cache_directory == "//voxfx_cache/{blend_name}/"
        for name in ("liquid", "snow"):
            c = BakeCache(resolve_folder(f"//voxfx_cache/{{blend_name}}/{name}"), name, kind="flip")
            c.begin({}, 1, 2)
            c.write_frame(1, {".vdb": lambda p: np.save(open(p, "wb"), np.zeros(3))})
        assert bpy.ops.voxfx.cache_free(name="liquid", kind="flip") == {"FINISHED"}
    assert not (tmp_path / "voxfx_cache" / "shot" / "liquid").exists()
    assert (tmp_path / "voxfx_cache" / "shot" / "snow" / "snow_0001.vdb").is_file()


def test_default_folder_is_one_per_blend_file(tmp_path):
    with voxfx_registered():
        default = bpy.context.scene.voxfx.cache_directory
        with pytest.raises(CacheError, match="named after the .blend file, which is not saved yet"):
            resolve_folder(default)
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot_a.blend"))
        a = resolve_folder(default)
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot_b.blend"))
        b = resolve_folder(default)
    assert a == (tmp_path / "voxfx_cache" / "shot_a").resolve() and b == (tmp_path / "voxfx_cache" / "shot_b").resolve()


def test_another_blend_never_bakes_over_a_cache_without_being_told(tmp_path):
    shared = tmp_path / "shared" / "snow"
    a = BakeCache(shared, "snow", kind="snow", suffixes=(".vdb",), owner="shot_a")
    a.begin({"x": 1}, 1, 2)
    a.write_frame(1, {".vdb": lambda p: open(p, "wb").write(b"frame")})
    b = BakeCache(shared, "snow", kind="snow", suffixes=(".vdb",), owner="shot_b")
    with pytest.raises(CacheError, match="holds the snow bake of 'shot_a.blend', not of 'shot_b.blend'"):
        b.begin({"x": 1}, 1, 2)
    assert (shared / "snow_0001.vdb").read_bytes() == b"frame"
    BakeCache(shared, "snow", kind="snow", suffixes=(".vdb",)).free()  # Free, then B may bake there
    assert b.begin({"x": 1}, 1, 2).todo == [1, 2]
