"""Scene settings shared by every effect (effects add their own groups)."""

import bpy

# Blender 4.5+ asks path properties to declare that they accept '//' (relative to the .blend).
_RELATIVE_PATH = {"PATH_SUPPORTS_BLEND_RELATIVE"} if bpy.app.version >= (4, 5, 0) else set()


class VoxelizeSettings(bpy.types.PropertyGroup):
    size_mode: bpy.props.EnumProperty(
        name="Size By",
        description="How the voxel size is chosen",
        items=[("RESOLUTION", "Resolution", "Number of voxels along the longest side of the selection"),
               ("VOXEL_SIZE", "Voxel Size", "Edge length of one voxel in scene units (metres)")],
        default="RESOLUTION",
    )
    resolution: bpy.props.IntProperty(
        name="Resolution", description="Voxels along the longest side of the selection's bounding box",
        default=64, min=2, soft_max=1024, max=8192)
    voxel_size: bpy.props.FloatProperty(
        name="Voxel Size", description="Edge length of one voxel", default=0.05, min=1e-5, soft_min=0.001,
        subtype="DISTANCE", unit="LENGTH", precision=4)
    mode: bpy.props.EnumProperty(
        name="Mode",
        description="Which voxels count as part of the object",
        items=[("SURFACE", "Surface", "Every voxel a triangle touches (conservative, no gaps)"),
               ("THIN", "Thin Surface", "A thinner shell that is still watertight for face-neighbours (6-separating)"),
               ("SOLID", "Solid", "Voxels whose centre is inside the closed mesh"),
               ("SOLID_SURFACE", "Solid + Surface", "The solid plus every voxel the surface touches")],
        default="SOLID_SURFACE",
    )
    fill_holes: bpy.props.BoolProperty(
        name="Tolerate Holes",
        description="For solid modes: vote along x, y and z so small holes in open meshes do not leak "
        "(slower; used automatically when a selected mesh is not closed)",
        default=False)
    include_edges: bpy.props.BoolProperty(
        name="Edges and Curves",
        description="Also voxelize loose mesh edges and curves without bevel (wires, hair-like curves)",
        default=True)
    combine: bpy.props.BoolProperty(
        name="Combine Objects", description="One result for all selected objects (off: one result per object)",
        default=True)
    output_points: bpy.props.BoolProperty(
        name="Point Cloud", description="Points at voxel centres with material_index, color and coverage",
        default=True)
    output_volume: bpy.props.BoolProperty(
        name="Volume", description="A density volume (OpenVDB) written to the cache folder and loaded as a Volume object",
        default=False)
    output_blocks: bpy.props.BoolProperty(
        name="Block Mesh", description="Cubes with only their outside faces, merged into one mesh with the "
        "object's materials (voxel-art look)", default=False)
    output_vox: bpy.props.BoolProperty(
        name="MagicaVoxel", description="Export a .vox file", default=False)
    vox_path: bpy.props.StringProperty(
        name="VOX File", description="Where the .vox file is written ('//' = next to the .blend)",
        default="//voxels.vox", subtype="FILE_PATH", options=_RELATIVE_PATH)


class VoxFXSceneSettings(bpy.types.PropertyGroup):
    cache_directory: bpy.props.StringProperty(
        name="Cache Folder",
        description="Where bakes are stored. '//' means next to the .blend file (kept relative "
        "so the project can move to a render farm)",
        default="//voxfx_cache/",
        subtype="DIR_PATH",
        options=_RELATIVE_PATH,
    )
    voxelize: bpy.props.PointerProperty(type=VoxelizeSettings)


_classes = (VoxelizeSettings, VoxFXSceneSettings)
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(_classes)


def register():
    _register_classes()
    bpy.types.Scene.voxfx = bpy.props.PointerProperty(type=VoxFXSceneSettings)


def unregister():
    del bpy.types.Scene.voxfx
    _unregister_classes()
