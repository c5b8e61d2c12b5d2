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
        assert bpy.context.scene.voxfx.cache_directory == "//voxfx_cache/"
        for name in ("liquid", "snow"):
            c = BakeCache(resolve_folder(f"//voxfx_cache/{name}"), name, kind="flip")
            c.begin({}, 1, 2)
            c.write_frame(1, {".vdb": lambda p: np.save(open(p, "wb"), np.zeros(3))})
        assert bpy.ops.voxfx.cache_free(name="liquid", kind="flip") == {"FINISHED"}
    assert not (tmp_path / "voxfx_cache" / "liquid").exists()
    assert (tmp_path / "voxfx_cache" / "snow" / "snow_0001.vdb").is_file()
