"""A real operator built on JobOperator, run the ways Blender runs it headless."""

import bpy
import numpy as np
import pytest

from voxfx.addon.cache import BakeCache
from voxfx.addon.jobs import JobOperator
from voxfx.kernels.errors import InputError


def make_operator(cache_dir, fail_at=None):
    class VOXFX_OT_test_bake(JobOperator, bpy.types.Operator):
        """Bake a few frames of a counter into a cache"""

        bl_idname = "voxfx.test_bake"
        bl_label = "Test Bake"
        job_title = "Test bake"

        def make_job(self, context):
            if context.scene.get("broken_input"):
                raise InputError("Object 'Cube' has 3 non-finite vertex coordinates")
            cache = BakeCache(cache_dir, "counter", kind="test", suffixes=(".npy",))
            start, end = context.scene.frame_start, context.scene.frame_end
            return self.steps(cache, start, end)

        def steps(self, cache, start, end):
            for frame in cache.begin({"n": 1}, start, end).todo:
                if frame == fail_at:
                    raise InputError(f"frame {frame} has NaN")
                cache.write_frame(frame, {".npy": lambda p, f=frame: np.save(open(p, "wb"), np.array([f]))})
                yield (frame - start + 1) / (end - start + 1), f"frame {frame}"
            return cache.last_complete_frame()

        def job_finished(self, context, result):
            context.scene["test_bake_last"] = result

    return VOXFX_OT_test_bake


@pytest.fixture
def operator(tmp_path, request):
    fail_at = getattr(request, "param", None)
    cls = make_operator(tmp_path, fail_at)
    bpy.utils.register_class(cls)
    yield tmp_path
    bpy.utils.unregister_class(cls)


@pytest.mark.parametrize("mode", ["EXEC_DEFAULT", "INVOKE_DEFAULT"])
def test_bake_runs_to_the_end_in_background(operator, mode):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    assert bpy.ops.voxfx.test_bake(mode) == {"FINISHED"}
    assert scene["test_bake_last"] == 5
    assert sorted(p.name for p in operator.glob("counter_*.npy")) == [f"counter_{f:04d}.npy" for f in range(1, 6)]


@pytest.mark.parametrize("operator", [3], indirect=True)
def test_failing_frame_reports_and_keeps_complete_frames(operator):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    with pytest.raises(RuntimeError, match="frame 3 has NaN"):  # bpy.ops raises an ERROR report
        bpy.ops.voxfx.test_bake()
    assert "test_bake_last" not in scene
    assert sorted(p.name for p in operator.iterdir() if not p.name.startswith("voxfx_manifest")) == [
        "counter_0001.npy", "counter_0002.npy"]
    assert BakeCache(operator, "counter", kind="test", suffixes=(".npy",)).last_complete_frame() == 2


def test_bad_input_is_an_error_report_not_a_traceback(operator):
    bpy.context.scene["broken_input"] = True
    with pytest.raises(RuntimeError, match="^Error: Object 'Cube' has 3 non-finite vertex coordinates\n$"):
        bpy.ops.voxfx.test_bake()
    assert not list(operator.iterdir())  # refused before any output
