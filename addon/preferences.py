"""Add-on preferences: which backend to use, and GPU support (check, install, remove)."""

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

    gpu_wheels_dir: bpy.props.StringProperty(
        name="Wheels Folder",
        description="Install GPU Support offline from the wheels in this folder (CuPy and NVIDIA's CUDA "
                    "libraries for this platform); empty: download them from PyPI",
        subtype="DIR_PATH",
        default="",
    )

    def draw(self, context):
        layout = self.layout
        layout.prop(self, "backend")
        from .operators.gpu import gpu_folder_path, last_findings
        from .operators.system import last_device_summary

        layout.label(text=last_device_summary(), icon="INFO")
        layout.operator("voxfx.check_device", icon="FILE_REFRESH")

        box = layout.box()
        box.label(text="GPU Support", icon="MEMORY")
        for line in last_findings():
            box.label(text=line)
        row = box.row()
        row.operator("voxfx.gpu_check", icon="VIEWZOOM")
        row.operator("voxfx.gpu_install", icon="IMPORT")
        row.operator("voxfx.gpu_remove", icon="TRASH")
        box.prop(self, "gpu_wheels_dir")
        box.label(text=f"Installs into {gpu_folder_path()}")


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
