"""Device check: which backend VoxFX computes on, and how much memory it has."""

import bpy

from ...kernels import backend
from ...kernels.errors import VoxFXError

_summary = "Device not checked yet"


def last_device_summary() -> str:
    """The last device check, for panels (drawing must not probe CUDA)."""
    return _summary


def check_device() -> str:
    """Choose the backend afresh and describe its device in one line."""
    global _summary
    b = backend.get_backend(refresh=True)
    _summary = b.device_info().summary()
    return _summary


class VOXFX_OT_check_device(bpy.types.Operator):
    """Probe the GPU and report the backend and device VoxFX computes on"""

    bl_idname = "voxfx.check_device"
    bl_label = "Check Device"
    bl_options = {"REGISTER"}

    def execute(self, context):
        try:
            summary = check_device()
        except VoxFXError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"VoxFX computes on {summary}")
        return {"FINISHED"}


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_OT_check_device,))


def register():
    _register()


def unregister():
    _unregister()
