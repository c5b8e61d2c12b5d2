"""VoxFX: GPU voxel effects for Blender (extension entry point).

Blender imports this package and calls ``register()``/``unregister()``; everything that
touches ``bpy`` lives in ``addon/``. ``kernels/`` is importable without Blender.
"""


def register():
    from . import addon

    addon.register()


def unregister():
    from . import addon

    addon.unregister()
