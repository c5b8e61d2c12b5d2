"""Scene settings shared by every effect (effects add their own groups)."""

import bpy

from ..kernels.flip.grid import FlipSettings as KernelFlipSettings
from .flip_sparse import SOLVERS
from ..kernels.settings import default_of, ui_fields
from ..kernels.snow.domain import SnowSettings as KernelSnowSettings

# Path properties declare that they accept '//' (relative to the .blend), as Blender 4.5+ asks.
_RELATIVE_PATH = {"PATH_SUPPORTS_BLEND_RELATIVE"}


def _show_particle_fraction(settings, context):
    """Viewport Particles applies at once to a baked "Liquid Particles" object."""
    from . import node_setups

    obj = bpy.data.objects.get("Liquid Particles")
    mod = obj.modifiers.get("VoxFX") if obj else None
    if mod is not None and mod.node_group is not None:
        node_setups.set_input(mod, "Viewport Fraction", settings.particle_display)
        obj.update_tag()


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
    sparse: bpy.props.EnumProperty(
        name="Sparse",
        description="Voxelize into 8×8×8 bricks that cover only the object's voxels (memory follows the "
        "surface, up to resolution 8192)",
        items=[("AUTO", "Auto", "Sparse above 1024³ voxels on the CPU, or where the dense grid does not fit"),
               ("ALWAYS", "Always", "Always sparse, whatever the size"),
               ("NEVER", "Never", "Always one dense grid (refused where it does not fit)")],
        default="AUTO",
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
        name="Volume",
        description="A density volume (OpenVDB) written to the cache folder and loaded as a Volume object",
        default=False)
    output_blocks: bpy.props.BoolProperty(
        name="Block Mesh", description="Cubes with only their outside faces, merged into one mesh with the "
        "object's materials (voxel-art look)", default=False)
    output_vox: bpy.props.BoolProperty(
        name="MagicaVoxel", description="Export a .vox file", default=False)
    vox_path: bpy.props.StringProperty(
        name="VOX File", description="Where the .vox file is written ('//' = next to the .blend)",
        default="//voxels.vox", subtype="FILE_PATH", options=_RELATIVE_PATH)
    # --- voxel art (issue 15; addon/voxel_art.py) ---
    color_source: bpy.props.EnumProperty(
        name="Color Source",
        description="Where each voxel's colour (points, block faces, .vox) comes from",
        items=[("ATTRIBUTE", "Attribute", "The mesh's colour attribute, else its material's colour"),
               ("MATERIAL", "Material", "The material's Base Color (or viewport colour)"),
               ("TEXTURE", "Texture", "The material's base-colour image at the voxel, through the UV map "
                "(other materials keep their colour)")],
        default="ATTRIBUTE")
    greedy_blocks: bpy.props.BoolProperty(
        name="Merge Block Faces",
        description="Merge the block mesh's faces of one colour and material in a plane into rectangles: far "
        "fewer faces, the same look (a face colour attribute keeps the colours)",
        default=False)
    vox_palette: bpy.props.EnumProperty(
        name="VOX Palette",
        description="How the .vox file's palette of at most 255 colours is made (the points keep full colour)",
        items=[("AUTO", "Automatic", "The colours that represent the voxels best (k-means in the OKLab "
                "perceptual colour space)"),
               ("IMAGE", "Image", "Each voxel takes the nearest colour of a palette image (up to 255 colours, "
                "e.g. a MagicaVoxel palette PNG)")],
        default="AUTO")
    vox_palette_image: bpy.props.PointerProperty(
        name="Palette Image", type=bpy.types.Image,
        description="The image whose distinct colours (top row first) form the .vox palette")


class SnowSettings(bpy.types.PropertyGroup):
    """The Snow panel: the scene-side properties below, and every field of the kernels'
    ``SnowSettings`` made with ``setting`` (added by ``_add_settings_fields``)."""

    receivers: bpy.props.PointerProperty(
        name="Receivers", type=bpy.types.Collection,
        description="Objects snow lands on (terrain, roofs, trees); they also block the wind")
    obstacles: bpy.props.PointerProperty(
        name="Obstacles", type=bpy.types.Collection,
        description="Objects that only block the wind (snow does not settle on them)")
    domain_object: bpy.props.PointerProperty(
        name="Domain", type=bpy.types.Object,
        description="Box whose bounds are the simulation domain (empty: the receivers' bounds plus Sky Height)")
    sky_height: bpy.props.FloatProperty(
        name="Sky Height", description="Height of the domain above the highest receiver (automatic domain)",
        default=8.0, min=0.5, subtype="DISTANCE", unit="LENGTH")
    wind_resolution: bpy.props.IntProperty(
        name="Wind Resolution", description="Wind cells along the longer horizontal side of the domain",
        default=48, min=8, soft_max=256, max=1024)
    ground_resolution: bpy.props.IntProperty(
        name="Ground Resolution", description="Snow-depth samples along the longer horizontal side",
        default=128, min=8, soft_max=1024, max=4096)
    use_scene_wind: bpy.props.BoolProperty(
        name="Use Wind Force Fields", description="Take speed and direction from the scene's Wind force fields",
        default=False)
    substeps: bpy.props.IntProperty(
        name="Steps per Frame", description="Simulation steps per frame", default=2, min=1, max=64)


FLIP_ROLES = [
    ("NONE", "None", "Not part of the liquid simulation"),
    ("LIQUID", "Liquid", "Its volume is liquid at the first frame"),
    ("OBSTACLE", "Obstacle", "Liquid flows around it; it may move (rigid motion sets the wall velocity)"),
    ("INFLOW", "Inflow", "Emits liquid at its Velocity wherever its volume holds none"),
    ("OUTFLOW", "Outflow", "Deletes the liquid that enters its volume"),
]


class FlipObjectSettings(bpy.types.PropertyGroup):
    role: bpy.props.EnumProperty(name="Liquid Role", items=FLIP_ROLES, default="NONE",
                                 description="What this object is in the VoxFX liquid simulation")
    initial_velocity: bpy.props.FloatVectorProperty(
        name="Velocity",
        description="Liquid: velocity at the first frame; Inflow: velocity of the emitted liquid (m/s)",
        size=3,
        default=(0.0, 0.0, 0.0), subtype="VELOCITY", unit="VELOCITY")


class FlipSettings(bpy.types.PropertyGroup):
    """The Liquid panel: the scene-side properties below, and every field of the kernels'
    ``FlipSettings`` made with ``setting``."""

    domain: bpy.props.PointerProperty(
        name="Domain", type=bpy.types.Object,
        description="Box object whose bounds enclose the simulation (closed walls)")
    resolution: bpy.props.IntProperty(
        name="Resolution", description="Grid cells along the longest side of the domain (up to 2048: above a few "
        "hundred the sparse solver, whose memory follows the liquid)",
        default=48, min=8, soft_max=512, max=2048)
    solver: bpy.props.EnumProperty(
        name="Solver", items=SOLVERS, default="AUTO",
        description="The grid the liquid is solved on: Auto picks dense where its memory fits, sparse where it does "
        "not (the panel says which and why before baking)")
    particle_display: bpy.props.FloatProperty(
        name="Viewport Particles", description="Fraction of the particles shown in the viewport",
        default=1.0, min=0.0, max=1.0, subtype="FACTOR", update=_show_particle_fraction)
    hide_sim_objects: bpy.props.BoolProperty(
        name="Hide Sim Objects in Renders",
        description="After a bake, the Domain shows as bounds and it, the Liquid sources, Inflows and Outflows are "
        "left out of renders (they only define the simulation); obstacles stay as they are",
        default=True)
    render_particles: bpy.props.BoolProperty(
        name="Render Particles",
        description="Render the Liquid Particles point cloud too (off: only the Liquid Surface renders)",
        default=False)


def bpy_property(f):
    """The Blender property of one kernel settings field (``kernels.settings.setting``)."""
    meta = dict(f.metadata["ui"])
    default = default_of(f)
    if "items" in meta:
        meta["items"] = [tuple(item) for item in meta["items"]]
        return bpy.props.EnumProperty(default=default, **meta)
    if isinstance(default, bool):
        return bpy.props.BoolProperty(default=default, **meta)
    if isinstance(default, int):
        return bpy.props.IntProperty(default=default, **meta)
    if isinstance(default, float):
        return bpy.props.FloatProperty(default=default, **meta)
    if isinstance(default, str):
        return bpy.props.StringProperty(default=default, **meta)
    if isinstance(default, tuple):
        return bpy.props.FloatVectorProperty(default=default, size=len(default), **meta)
    raise TypeError(f"no Blender property for setting {f.name!r} ({type(default).__name__})")


def _add_settings_fields(group, kernel_settings):
    """Give property group *group* one property per artist-set field of the kernels'
    settings class: same name, default, limits and unit (one definition, issue 19)."""
    annotations = group.__dict__.get("__annotations__", {})
    for f in ui_fields(kernel_settings):
        if f.name in annotations:
            raise TypeError(f"{group.__name__}.{f.name} is defined twice (here and in the kernels)")
        annotations[f.name] = bpy_property(f)
    group.__annotations__ = annotations


_add_settings_fields(SnowSettings, KernelSnowSettings)
_add_settings_fields(FlipSettings, KernelFlipSettings)


class VoxFXSceneSettings(bpy.types.PropertyGroup):
    cache_directory: bpy.props.StringProperty(
        name="Cache Folder",
        description="Where bakes are stored. '//' means next to the .blend file (kept relative "
        "so the project can move to a render farm); {blend_name} is the .blend file's name, so "
        "every .blend gets a cache of its own",
        default="//voxfx_cache/{blend_name}/",
        subtype="DIR_PATH",
        options=_RELATIVE_PATH,
    )
    checkpoint_every: bpy.props.IntProperty(
        name="Checkpoint Every",
        description="Keep the simulation state of every Nth frame (and the newest) in the cache, so a damaged "
        "frame or a re-bake from frame N restarts near N instead of at the first frame. 0 keeps only the "
        "last complete frame's state (least disk; a repair then simulates again from the first frame)",
        default=10, min=0, max=10000)
    write_while_simulating: bpy.props.BoolProperty(
        name="Write While Simulating",
        description="Write each baked frame's files on a thread of their own while the next frame is simulated "
        "(faster bakes). Each frame's checkpoint is saved first, so a crash or kill costs at most the frame "
        "being simulated (off: the frame in flight); a frame whose checkpoint was saved but whose files "
        "were cut short is rewritten from it on the next Bake. Recorded frames are never lost",
        default=True)
    cache_format: bpy.props.EnumProperty(
        name="Cache Format",
        description="How liquid particles and snow flakes are stored per frame",
        items=[("COMPACT", "Compact", "Particles in VoxFX's compact format (.vxp, under 8 bytes per liquid "
                "particle: positions to 1/1000 of a cell, velocities as half floats); VoxFX loads them. "
                "Volumes stay OpenVDB"),
               ("PLY_VDB", "PLY + VDB", "Particles as plain PLY point files (28 bytes per liquid particle) that "
                "other tools and Blender's Import PLY node read, volumes as OpenVDB")],
        default="COMPACT")
    voxelize: bpy.props.PointerProperty(type=VoxelizeSettings)
    snow: bpy.props.PointerProperty(type=SnowSettings)
    flip: bpy.props.PointerProperty(type=FlipSettings)


_classes = (VoxelizeSettings, SnowSettings, FlipObjectSettings, FlipSettings, VoxFXSceneSettings)
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(_classes)


def register():
    _register_classes()
    bpy.types.Scene.voxfx = bpy.props.PointerProperty(type=VoxFXSceneSettings)
    bpy.types.Object.voxfx_flip = bpy.props.PointerProperty(type=FlipObjectSettings)


def unregister():
    del bpy.types.Object.voxfx_flip
    del bpy.types.Scene.voxfx
    _unregister_classes()
