"""Panels only draw. 3D View sidebar, tab "VoxFX"."""

import bpy

from . import addon_version
from .flip_sparse import estimate_lines
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
            layout.prop(settings, "checkpoint_every")
            layout.prop(settings, "write_while_simulating")
            layout.prop(settings, "cache_format")


def _timing_row(layout, f) -> None:
    """The Liquid panel's Timing buttons (``voxfx.flip_timing``): the one matching the four
    settings below it shows pressed; none where they were changed by hand."""
    from ..kernels.flip.grid import TIMINGS, timing_of

    current = timing_of(f)
    row = layout.row(align=True)
    row.label(text="Timing")
    for name in TIMINGS:
        op = row.operator("voxfx.flip_timing", text=name.title(), depress=current == name)
        op.timing = name


def _bake_status(layout, context, name: str, kind: str) -> None:
    """What the bake's cache holds, and which frames are damaged (cheap size checks)."""
    from .cache import CacheError, resolve_folder
    from .cache_status import status_line

    try:
        line = status_line(resolve_folder(context.scene.voxfx.cache_directory) / name, name, kind)
    except CacheError:
        return  # an unsaved file: the cache folder is not known yet
    if line:
        layout.label(text=line, icon="ERROR" if "damaged" in line else "CHECKMARK")
    disk = _disk_line(context, kind)
    if disk:
        layout.label(text=disk, icon="DISK_DRIVE")


_disk_memo: dict = {}


def _disk_line(context, kind: str) -> str | None:
    """The bake's estimated disk use and the cache drive's free space (recomputed at most
    every 2 s: a panel redraws far more often)."""
    import time

    from .cache import CacheError, resolve_folder
    from .disk_plan import free_bytes, summary
    from .operators import flip, snow

    now = time.monotonic()
    memo = _disk_memo.get(kind)
    if memo and now - memo[0] < 2.0:
        return memo[1]
    scene = context.scene
    try:
        plan = (flip if kind == "flip" else snow).disk_estimate(scene)
        line = summary(plan, free_bytes(resolve_folder(scene.voxfx.cache_directory))) if plan else None
    except (CacheError, OSError):
        line = None
    _disk_memo[kind] = (now, line)
    return line


class VOXFX_PT_voxelize(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "VoxFX"
    bl_label = "Voxelize"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        s = context.scene.voxfx.voxelize
        layout.prop(s, "size_mode")
        layout.prop(s, "resolution" if s.size_mode == "RESOLUTION" else "voxel_size")
        layout.prop(s, "mode")
        if s.mode in ("SOLID", "SOLID_SURFACE"):
            layout.prop(s, "fill_holes")
        layout.prop(s, "include_edges")
        layout.prop(s, "combine")
        layout.prop(s, "sparse")
        col = layout.column(heading="Outputs", align=True)
        col.prop(s, "output_points")
        col.prop(s, "output_volume")
        col.prop(s, "output_blocks")
        col.prop(s, "output_vox")
        if s.output_vox:
            layout.prop(s, "vox_path")
        # voxel art (issue 15)
        layout.prop(s, "color_source")
        if s.output_blocks:
            layout.prop(s, "greedy_blocks")
        if s.output_vox:
            layout.prop(s, "vox_palette")
            if s.vox_palette == "IMAGE":
                layout.prop(s, "vox_palette_image")
        layout.operator("voxfx.voxelize", icon="MESH_GRID")
        row = layout.row(align=True)
        row.operator("voxfx.voxelize_bake", icon="RENDER_ANIMATION")
        row.operator("voxfx.voxelize_free", text="", icon="TRASH")
        layout.operator("voxfx.import_vox", icon="IMPORT")  # issue 15: .vox import


class VOXFX_PT_snow(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "VoxFX"
    bl_label = "Snow"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        s = context.scene.voxfx.snow
        col = layout.column(heading="Scene")
        col.prop(s, "receivers")
        col.prop(s, "obstacles")
        col.prop(s, "domain_object")
        if s.domain_object is None:
            col.prop(s, "sky_height")
        col = layout.column(heading="Resolution")
        col.prop(s, "wind_resolution")
        col.prop(s, "ground_resolution")
        col.prop(s, "substeps")
        col = layout.column(heading="Snowfall")
        col.prop(s, "snowfall_rate")
        col.prop(s, "time_scale")
        col.prop(s, "initial_depth")
        col.prop(s, "snow_density")
        col.prop(s, "flake_count")
        col.prop(s, "preset")
        col.prop(s, "seed")
        col = layout.column(heading="Wind")
        col.prop(s, "use_scene_wind")
        sub = col.column()
        sub.active = not s.use_scene_wind
        sub.prop(s, "wind_speed")
        sub.prop(s, "wind_direction")
        col.prop(s, "gust_strength")
        col.prop(s, "pressure_solver")
        col = layout.column(heading="Settling")
        col.prop(s, "repose_angle")
        col.prop(s, "drift")
        if s.drift:
            col.prop(s, "drift_threshold")
        row = layout.row(align=True)
        row.operator("voxfx.snow_bake", icon="FREEZE")
        row.operator("voxfx.snow_free", text="", icon="TRASH")
        _bake_status(layout, context, "snow", "snow")


class VOXFX_PT_flip(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "VoxFX"
    bl_label = "Liquid"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        f = context.scene.voxfx.flip
        layout.prop(f, "domain")
        layout.prop(f, "resolution")
        layout.prop(f, "solver")
        row = layout.row()
        row.active = f.solver != "DENSE"
        row.prop(f, "boundary")
        row = layout.row()
        row.active = f.solver != "DENSE" and f.boundary == "open"
        row.prop(f, "kill_distance")
        row = layout.row()
        row.active = f.solver != "DENSE"
        row.prop(f, "narrow_band")
        for line, icon in zip(estimate_lines(context, f), ("INFO", "MEMORY")):
            layout.label(text=line, icon=icon)
        layout.prop(f, "particles_per_cell")
        layout.prop(f, "max_particles_per_cell")
        layout.prop(f, "density_correction")
        layout.prop(f, "apic")
        row = layout.row()
        row.active = not f.apic
        row.prop(f, "flip_ratio")
        _timing_row(layout, f)
        layout.prop(f, "cfl")
        layout.prop(f, "max_substeps")
        layout.prop(f, "max_time_step")
        layout.prop(f, "time_centred_advection")
        layout.prop(f, "pressure_tolerance")
        row = layout.row()
        row.active = f.solver != "DENSE"
        row.prop(f, "warm_start_pressure")
        layout.prop(f, "seed")
        layout.prop(f, "particle_display")
        layout.prop(f, "render_particles")
        layout.prop(f, "hide_sim_objects")
        obj = context.active_object
        if obj is not None and hasattr(obj, "voxfx_flip"):
            box = layout.box()
            box.prop(obj.voxfx_flip, "role", text=f"{obj.name}")
            if obj.voxfx_flip.role in ("LIQUID", "INFLOW"):
                box.prop(obj.voxfx_flip, "initial_velocity")
        row = layout.row(align=True)
        row.operator("voxfx.flip_bake", icon="MOD_FLUIDSIM")
        row.operator("voxfx.flip_free", text="", icon="TRASH")
        _bake_status(layout, context, "liquid", "flip")


class VOXFX_PT_flip_object(bpy.types.Panel):
    """Physics properties: the object's role in the VoxFX liquid simulation."""

    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"
    bl_label = "VoxFX Liquid"

    @classmethod
    def poll(cls, context):
        return context.object is not None and hasattr(context.object, "voxfx_flip")

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        s = context.object.voxfx_flip
        layout.prop(s, "role")
        if s.role in ("LIQUID", "INFLOW"):
            layout.prop(s, "initial_velocity")


_register, _unregister = bpy.utils.register_classes_factory(
    (VOXFX_PT_system, VOXFX_PT_voxelize, VOXFX_PT_snow, VOXFX_PT_flip, VOXFX_PT_flip_object))


def register():
    _register()


def unregister():
    _unregister()
