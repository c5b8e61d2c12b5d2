"""Import .vox: a MagicaVoxel file as a block mesh or point cloud (File > Import and the
Voxelize panel). The reading and conversion are ``addon/vox_import.py``."""

import bpy
from bpy_extras.io_utils import ImportHelper

from ...kernels.errors import VoxFXError
from .. import vox_import


class VOXFX_OT_import_vox(bpy.types.Operator, ImportHelper):
    """Import a MagicaVoxel .vox file (every model of its scene) as a block mesh or a point cloud"""

    bl_idname = "voxfx.import_vox"
    bl_label = "Import .vox"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".vox"
    filter_glob: bpy.props.StringProperty(default="*.vox", options={"HIDDEN"})
    voxel_size: bpy.props.FloatProperty(
        name="Voxel Size", description="Edge length of one voxel in the scene", default=0.1, min=1e-6,
        soft_min=0.001, soft_max=10.0, subtype="DISTANCE", unit="LENGTH")
    import_as: bpy.props.EnumProperty(
        name="Import As", description="What the voxels become",
        items=(("MESH", "Block Mesh", "The voxels' outside faces as a mesh with a face colour attribute"),
               ("POINTS", "Point Cloud", "One point per voxel at its centre, with a colour attribute")),
        default="MESH")
    greedy: bpy.props.BoolProperty(
        name="Merge Faces", default=True,
        description="Block mesh: merge faces of one colour in a plane into rectangles (far fewer faces, same look)")

    def execute(self, context):
        try:
            arrays = vox_import.import_arrays(self.filepath, voxel_size=self.voxel_size,
                                              as_points=self.import_as == "POINTS", greedy=self.greedy)
            obj = vox_import.write_import(arrays)
        except VoxFXError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        for other in context.selected_objects:
            other.select_set(False)
        obj.select_set(True)
        context.view_layer.objects.active = obj
        if arrays.quads is None:
            self.report({"INFO"}, f"Imported {arrays.voxel_count:,} voxels as points ({obj.name})")
        else:
            self.report({"INFO"}, f"Imported {arrays.voxel_count:,} voxels as {len(arrays.quads):,} faces "
                                  f"({arrays.faces_before:,} before merging) ({obj.name})")
        return {"FINISHED"}


def menu_import(self, context):
    self.layout.operator(VOXFX_OT_import_vox.bl_idname, text="MagicaVoxel (.vox) [VoxFX]")


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_OT_import_vox,))


def register():
    _register()
    bpy.types.TOPBAR_MT_file_import.append(menu_import)


def unregister():
    bpy.types.TOPBAR_MT_file_import.remove(menu_import)
    _unregister()
