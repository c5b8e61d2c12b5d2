"""Panels only draw. 3D View sidebar, tab "VoxFX"."""

import bpy

from . import addon_version
from .operators.system import last_device_summary


class VOXFX_PT_system(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "VoxFX"
    bl_label = "VoxFX"

    def draw(self, context):
        layout = self.layout
        layout.label(text=f"VoxFX {addon_version()}")
        row = layout.row(align=True)
        row.label(text=last_device_summary(), icon="MEMORY")
        row.operator("voxfx.check_device", text="", icon="FILE_REFRESH")
        settings = getattr(context.scene, "voxfx", None)
        if settings is not None:
            row = layout.row(align=True)
            row.prop(settings, "cache_directory")
            row.operator("voxfx.cache_reveal", text="", icon="FILE_FOLDER")


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_PT_system,))


def register():
    _register()


def unregister():
    _unregister()
