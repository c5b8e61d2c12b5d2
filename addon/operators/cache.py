"""Cache operators shared by every bake: free a bake, open its folder."""

import bpy

from ..cache import BakeCache, CacheError, resolve_folder


def _bake_folder(context, name: str):
    return resolve_folder(context.scene.voxfx.cache_directory) / name


def free_bake(op, context, name: str, kind: str) -> set:
    """Free one bake's cache for operator *op*: one report line, never a traceback.
    GPU memory the bake left in CuPy's pool and its cached solvers go back too."""
    from ..jobs import release_memory

    release_memory()
    try:
        cache = BakeCache(_bake_folder(context, name), name, kind=kind)
        removed = cache.free()
    except CacheError as e:
        op.report({"ERROR"}, str(e))
        return {"CANCELLED"}
    for note in cache.notes:
        op.report({"WARNING"}, note)
    op.report({"INFO"}, f"Freed the {name} bake ({removed} files)")
    return {"FINISHED"}


class VOXFX_OT_cache_free(bpy.types.Operator):
    """Delete the cached frames of one bake (only files that bake wrote)"""

    bl_idname = "voxfx.cache_free"
    bl_label = "Free Bake"
    bl_options = {"REGISTER"}

    name: bpy.props.StringProperty(name="Bake Name", description="Name of the bake whose cache is freed")
    kind: bpy.props.StringProperty(name="Effect", description="Effect that wrote the cache (voxelize, snow, flip)")

    @classmethod
    def poll(cls, context):
        if not hasattr(context.scene, "voxfx"):
            cls.poll_message_set("VoxFX is not set up in this scene")
            return False
        return True

    def execute(self, context):
        return free_bake(self, context, self.name, self.kind)


class VOXFX_OT_cache_reveal(bpy.types.Operator):
    """Open the cache folder in the system file browser"""

    bl_idname = "voxfx.cache_reveal"
    bl_label = "Open Cache Folder"

    def execute(self, context):
        try:
            folder = resolve_folder(context.scene.voxfx.cache_directory)
        except CacheError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        if not folder.is_dir():
            self.report({"WARNING"}, f"Nothing baked yet: '{folder}' does not exist")
            return {"CANCELLED"}
        bpy.ops.wm.path_open(filepath=str(folder))
        return {"FINISHED"}


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_OT_cache_free, VOXFX_OT_cache_reveal))


def register():
    _register()


def unregister():
    _unregister()
