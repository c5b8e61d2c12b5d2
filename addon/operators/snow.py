"""Bake Snow: receivers/obstacles → arrays → kernels.snow.SnowSimulation, frame by frame
into a cache (flakes PLY, depth VDB, depth EXR, a state checkpoint for resume), shown by
a "Snow Flakes" and a "Snow Cover" object whose meshes VoxFX fills with the current frame
(frame_loader)."""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Vector

from ...kernels import backend
from ...kernels.errors import InputError
from ...kernels.settings import from_source
from ...kernels.snow import plan as snow_plan
from ...kernels.snow.cover import cover_max_slope, cover_mesh
from ...kernels.snow.domain import SnowDomain, SnowSettings
from .. import compact_points, disk_plan, frame_loader, materials, node_setups, scene_io, sim_bake, writeback
from ..cache import on_main_thread, BakeCache, blend_name, resolve_folder
from ..jobs import BakeResult, JobOperator, keep_frame_on_abort, report_bake
from .cache import free_bake
from ..ply import write_points

COLLECTION = "VoxFX Snow"
THIN_COVER = 0.002  # m: a finished bake with less snow than this on average gets a warning
FLAKE_CELL = 0.25  # m: compact flake frames quantize on these cells, a flake within 0.12 mm per axis


# ---------------------------------------------------------------- settings and scene

def kernel_settings(s, scene) -> SnowSettings:
    """The kernels' SnowSettings from the scene's property group (wind from force fields
    when asked)."""
    speed, direction = s.wind_speed, s.wind_direction
    if s.use_scene_wind:
        speed, direction = scene_wind(scene, speed, direction)
    settings = from_source(SnowSettings, s, wind_speed=float(speed), wind_direction=float(direction))
    settings.check()
    return settings


def scene_wind(scene, speed, direction):
    """Speed and heading of the strongest Wind force field (its local +Z is the wind
    direction; strength taken as m/s), else the panel's values."""
    winds = [o for o in scene.objects if o.field and o.field.type == "WIND" and o.field.strength != 0]
    if not winds:
        return speed, direction
    strongest = max(winds, key=lambda o: abs(o.field.strength))
    axis = strongest.matrix_world.to_3x3() @ Vector((0, 0, 1))
    sign = 1.0 if strongest.field.strength > 0 else -1.0
    return abs(strongest.field.strength), math.atan2(sign * axis.y, sign * axis.x)


def collect(collection, what: str):
    if collection is None:
        return []
    return [o for o in collection.all_objects if scene_io.may_have_geometry(o)]


def domain_bounds(s, receivers_soup):
    """(lo, hi) of the domain: the Domain object's world bounds, else the receivers'
    bounds plus Sky Height (``kernels.snow.plan.domain_box``)."""
    box = None
    if s.domain_object is not None:
        corners = np.array([s.domain_object.matrix_world @ Vector(c) for c in s.domain_object.bound_box])
        box = (corners.min(axis=0), corners.max(axis=0))
    return snow_plan.domain_box(*receivers_soup.bounds, s.sky_height, box)


def plan_domain(s, receivers_soup) -> SnowDomain:
    """The bake's domain from the panel's settings (``kernels.snow.plan.plan_domain``)."""
    return snow_plan.plan_domain(*domain_bounds(s, receivers_soup), *receivers_soup.bounds, s.wind_resolution,
                                 s.ground_resolution)


def check_memory(s, soup, flakes: int, compact: bool = False) -> SnowDomain:
    """The planned domain, or a refusal before allocating that names the largest wind
    resolution (or flake count) that fits (``kernels.snow.plan.check_memory``). *compact*:
    a GPU bake encodes each frame's flakes on the device between steps, counted beside the
    simulation's state as the liquid's guard counts it (``compact_points.with_device_encoder``)."""
    from ...kernels.memory import release_gpu_pool

    release_gpu_pool()  # blocks an earlier bake left in VoxFX's pool count as free
    info = backend.device_info()
    return snow_plan.check_memory(soup.vertices, soup.triangles, *domain_bounds(s, soup), *soup.bounds,
                                  s.wind_resolution, s.ground_resolution, flakes,
                                  int(info.free_bytes * backend.SAFETY_FRACTION), info.name,
                                  with_encoder=compact_points.with_device_encoder if compact else None)


def disk_estimate(scene):
    """The disk plan of baking the scene's frame range at most (for the panel: the ground
    and wind at their full resolutions), or None."""
    s = scene.voxfx.snow
    if s.receivers is None:
        return None
    return disk_plan.snow_plan(scene.frame_end - scene.frame_start + 1, s.flake_count, s.ground_resolution ** 2,
                               s.wind_resolution ** 3, scene.voxfx.cache_format, scene.voxfx.checkpoint_every)


# ---------------------------------------------------------------- frame outputs

def depth_spec(domain: SnowDomain):
    """A one-layer grid whose voxel centres are the ground lattice vertices at z = 0."""
    from ...kernels.grid import GridSpec

    c = domain.ground_cell
    x0, y0 = domain.ground_origin
    gx, gy = domain.ground_shape
    return GridSpec((x0 - c / 2, y0 - c / 2, -c / 2), c, (gx, gy, 1))


def write_exr(path, depth):
    """Snow depth (metres) as a float EXR: R = G = B = depth, row 0 = lowest y."""
    gy, gx = depth.shape
    img = bpy.data.images.new("voxfx_snow_depth", width=gx, height=gy, float_buffer=True, is_data=True)
    try:
        rgba = np.empty((gy, gx, 4), np.float32)
        rgba[..., :3] = depth[..., None]
        rgba[..., 3] = 1.0
        img.pixels.foreach_set(rgba.ravel())
        img.filepath_raw = str(path)
        img.file_format = "OPEN_EXR"
        img.save()
    finally:
        bpy.data.images.remove(img)


def frame_writers(arrays, domain, compact=False):
    """The files of one snow frame (suffix → write(path)) from its arrays
    (``kernels.snow.bake.SnowBake.outputs``); *compact*: the flakes as a compact frame and
    the depth grid as half floats (±0.05 %; the EXR keeps full floats)."""
    flakes, depth = arrays["flakes"], arrays["depth"]
    others = {k: v for k, v in flakes.items() if k != "position"}
    if compact and backend.array_module(flakes["position"]) is not np:  # on the GPU: encoded there, now
        encoded = compact_points.encode_here(flakes["position"], others, cell=FLAKE_CELL)
        points = {compact_points.SUFFIX: lambda p: compact_points.write_encoded(p, encoded)}
    elif compact:
        points = {compact_points.SUFFIX: lambda p: compact_points.write_points(p, flakes["position"], others,
                                                                              cell=FLAKE_CELL)}
    else:
        points = {".ply": lambda p: write_points(p, flakes["position"], others)}
    return {
        **points,
        ".vdb": lambda p: writeback.write_vdb(p, {"depth": depth[None]}, depth_spec(domain), half=compact),
        ".exr": on_main_thread(lambda p: write_exr(p, depth)),  # bpy.data.images: never on a writer thread
    }


# ---------------------------------------------------------------- scene objects

def _collection():
    return writeback.ensure_collection(COLLECTION)


def ground_mesh(name, terrain, domain, max_slope_deg: float):
    """The Snow Cover object from ``kernels.snow.cover.cover_mesh``."""
    verts, quads = cover_mesh(terrain, domain, max_slope_deg)
    return writeback.write_mesh(name, verts, quads, collection=_collection())


def attach_outputs(cache, terrain, domain, repose_angle, ext=".ply"):
    """The Snow Flakes and Snow Cover objects, showing the bake's frames: VoxFX loads each
    frame into their meshes (frame_loader); their node trees read the files themselves
    where VoxFX is not installed."""
    prefix = str(cache.folder / f"{cache.name}_")
    stored = bpy.path.relpath(prefix) if bpy.data.filepath else prefix
    flakes = (bpy.data.objects.get("Snow Flakes")
              or writeback.mark_output(bpy.data.objects.new("Snow Flakes", bpy.data.meshes.new("Snow Flakes"))))
    if flakes.name not in _collection().objects:
        _collection().objects.link(flakes)
    node_setups.attach(flakes, node_setups.points_from_ply_sequence("VoxFX Flakes", stored,
                                                                    material=materials.flakes()))
    frame_loader.attach(flakes, "points", stored, ext=ext)
    cover = ground_mesh("Snow Cover", terrain, domain, cover_max_slope(repose_angle))
    cover.data.materials.clear()
    cover.data.materials.append(materials.snow())
    node_setups.attach(cover, node_setups.surface_from_depth_sequence("VoxFX Snow Cover", stored, 0.0))
    frame_loader.attach(cover, "depth", stored, grid="depth", layer_z=0.0)
    return flakes, cover


# ---------------------------------------------------------------- the bake

def snow_job(context, s, cache_dir: str, frame_start: int, frame_end: int, resume: bool = True):
    """Job generator: bake frames start..end; returns a BakeResult. A cancel or failure
    leaves the cache with its complete frames and the scene on the frame it showed."""
    return keep_frame_on_abort(context.scene, _snow_job(context, s, cache_dir, frame_start, frame_end, resume))


def _snow_job(context, s, cache_dir, frame_start, frame_end, resume):
    from ...kernels.snow.bake import SnowBake

    scene = context.scene
    settings = kernel_settings(s, scene)
    receivers = collect(s.receivers, "receivers")
    if not receivers:
        raise InputError("Choose a Receivers collection with at least one mesh for snow to land on")
    depsgraph = context.evaluated_depsgraph_get()
    scene.frame_set(frame_start)
    soup = scene_io.extract_triangles(receivers, depsgraph)
    obstacle_objects = [o for o in collect(s.obstacles, "obstacles") if o not in receivers]
    obstacles = scene_io.extract_triangles(obstacle_objects, depsgraph) if obstacle_objects else None
    domain = check_memory(s, soup, settings.flake_count)
    fps = scene.render.fps / scene.render.fps_base
    folder = resolve_folder(cache_dir) / "snow"
    cache = BakeCache(folder, "snow", kind="snow", checkpoint_every=scene.voxfx.checkpoint_every,
                      owner=blend_name())
    key = {"settings": settings.__dict__, "domain": [list(domain.wind.origin), domain.wind.voxel_size,
                                                    list(domain.wind.shape), domain.ground_cell],
           "receivers": sorted(o.name for o in receivers), "substeps": s.substeps, "fps": fps}
    compact = cache.choose_format(key, scene.voxfx.cache_format, resume, "snow")
    if compact and backend.xp() is not np:  # the frames' encoder on the device too (the same domain)
        check_memory(s, soup, settings.flake_count, compact=True)
    plan = cache.begin(key, frame_start, frame_end, resume=resume)
    disk = disk_plan.snow_plan(len(plan.todo), settings.flake_count, int(np.prod(domain.ground_shape)),
                               int(np.prod(domain.wind.shape)), scene.voxfx.cache_format, scene.voxfx.checkpoint_every)
    yield 0.0, disk_plan.summary(disk, disk_plan.check(disk, folder))  # refuses when it cannot fit
    bake = SnowBake(domain, settings, (soup.vertices, soup.triangles),
                    (obstacles.vertices, obstacles.triangles) if obstacles else None, xp=backend.xp(), fps=fps,
                    substeps=s.substeps, frame_end=frame_end, particles_on_device=compact)
    written, sim = yield from sim_bake.run(cache, plan, bake, lambda arrays: frame_writers(arrays, domain, compact),
                                           background=scene.voxfx.write_while_simulating)
    attach_outputs(cache, sim.terrain_host(), domain, settings.repose_angle,
                   compact_points.SUFFIX if compact else ".ply")
    mean = sim.snow_volume() / sim.area if sim.area > 0 else 0.0
    if mean < THIN_COVER:
        cache.note(f"The snow cover is only {1000 * mean:.2g} mm deep on average, too thin to see: raise "
                   "Snowfall (cm/h), Time Scale or Starting Depth (5 cm/h is real time: 10 s add 0.014 mm)")
    return BakeResult(sim_bake.summary(written, plan), str(folder), list(cache.notes))


class VOXFX_OT_snow_bake(JobOperator, bpy.types.Operator):
    """Bake snowfall over the scene's frame range (resumes after the last complete frame)"""

    bl_idname = "voxfx.snow_bake"
    bl_label = "Bake Snow"
    bl_options = {"REGISTER"}
    job_title = "Snow"

    @classmethod
    def poll(cls, context):
        s = context.scene.voxfx.snow if hasattr(context.scene, "voxfx") else None
        if s is None or s.receivers is None or not collect(s.receivers, "receivers"):
            cls.poll_message_set("Set a Receivers collection with meshes for the snow to land on")
            return False
        return True

    def make_job(self, context):
        scene = context.scene
        return snow_job(context, scene.voxfx.snow, scene.voxfx.cache_directory, scene.frame_start, scene.frame_end)

    def job_finished(self, context, result):
        report_bake(self, result, "Snow")


class VOXFX_OT_snow_free(bpy.types.Operator):
    """Delete the snow bake's cached frames and its state"""

    bl_idname = "voxfx.snow_free"
    bl_label = "Free Snow Bake"

    def execute(self, context):
        return free_bake(self, context, "snow", "snow")


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_OT_snow_bake, VOXFX_OT_snow_free))


def register():
    _register()


def unregister():
    _unregister()
