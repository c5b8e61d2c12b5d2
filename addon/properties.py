"""Scene settings shared by every effect (effects add their own groups)."""

import bpy


class VoxFXSceneSettings(bpy.types.PropertyGroup):
    cache_directory: bpy.props.StringProperty(
        name="Cache Folder",
        description="Where bakes are stored. '//' means next to the .blend file (kept relative "
        "so the project can move to a render farm)",
        default="//voxfx_cache/",
        subtype="DIR_PATH",
    )


_classes = (VoxFXSceneSettings,)
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(_classes)


def register():
    _register_classes()
    bpy.types.Scene.voxfx = bpy.props.PointerProperty(type=VoxFXSceneSettings)


def unregister():
    del bpy.types.Scene.voxfx
    _unregister_classes()
