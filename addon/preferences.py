"""Add-on preferences: which backend to use."""

import bpy

from ..kernels import backend
from . import addon_package


def _apply_backend(self, context):
    backend.set_preference(self.backend.lower())


class VOXFX_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = addon_package()

    backend: bpy.props.EnumProperty(
        name="Compute Backend",
        description="Where VoxFX computes. The VOXFX_BACKEND environment variable (cpu/gpu/auto) overrides this",
        items=[
            ("AUTO", "Automatic", "The GPU when a CUDA device really answers, otherwise the CPU"),
            ("GPU", "GPU (CUDA)", "Always the GPU through CuPy; an error if CUDA is not usable"),
            ("CPU", "CPU", "Always the CPU through NumPy (slower, no GPU needed)"),
        ],
        default="AUTO",
        update=_apply_backend,
    )

    def draw(self, context):
        layout = self.layout
        layout.prop(self, "backend")
        from .operators.system import last_device_summary

        layout.label(text=last_device_summary(), icon="INFO")
        layout.operator("voxfx.check_device", icon="FILE_REFRESH")


def preferences(context=None):
    """This add-on's preferences, or None when it is not enabled as an add-on (tests)."""
    context = context or bpy.context
    addon = context.preferences.addons.get(addon_package())
    return addon.preferences if addon else None


def register():
    bpy.utils.register_class(VOXFX_AP_preferences)
    prefs = preferences()
    if prefs is not None:
        backend.set_preference(prefs.backend.lower())


def unregister():
    bpy.utils.unregister_class(VOXFX_AP_preferences)
