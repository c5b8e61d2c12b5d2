"""Bake Liquid: roles → arrays → kernels.flip.FlipSimulation, frame by frame into a cache
(particles PLY, level-set + velocity VDB, a state checkpoint for resume), shown by
"Liquid Particles" and "Liquid Surface" objects whose meshes VoxFX fills with the current
frame (frame_loader), and as a Volume sequence (hidden: for pipelines and shading)."""

from __future__ import annotations


import bpy
import numpy as np
from mathutils import Vector

from ...kernels import backend
from ...kernels.errors import InputError
from ...kernels.flip.bake import FlipBake, frame_arrays
from ...kernels.flip.bodies import Body, emission_per_frame
from ...kernels.flip.grid import TIMINGS, FlipSettings
from ...kernels.settings import from_source
from ...kernels.grid import GridSpec
from .. import (compact_points, disk_plan, frame_loader, liquid_files, materials, node_setups, scene_io, sim_bake,
               writeback)
from ..cache import BakeCache, blend_name, resolve_folder
from ..flip_sparse import (GuardedBake, choose_solver, climb, estimate_options, frame_check, liquid_reach,
                           memory_need, time_centred)
from ..jobs import BakeResult, JobOperator, keep_frame_on_abort, report_bake
from .cache import free_bake

COLLECTION = "VoxFX Liquid"


def role_objects(scene, role):
    return [o for o in scene.objects if getattr(o, "voxfx_flip", None) is not None and o.voxfx_flip.role == role
            and scene_io.may_have_geometry(o)]


def domain_spec(domain_obj, resolution: int) -> GridSpec:
    """Grid filling the domain object's world bounding box; cubic cells."""
    corners = np.array([domain_obj.matrix_world @ Vector(c) for c in domain_obj.bound_box])
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    ext = hi - lo
    if np.any(ext <= 0):
        raise InputError(f"The domain '{domain_obj.name}' has no volume")
    h = float(ext.max()) / resolution
    shape = tuple(max(2, int(round(e / h))) for e in ext)
    return GridSpec(tuple(lo), h, shape)


def disk_estimate(scene):
    """The disk plan of baking the scene's frame range (for the panel: the liquid objects'
    bounding boxes stand in for their meshes, as the bake's own estimate does), or None."""
    f = scene.voxfx.flip
    liquids = role_objects(scene, "LIQUID")
    if f.domain is None or not liquids:
        return None
    try:
        spec = domain_spec(f.domain, f.resolution)
    except InputError:
        return None
    corners = np.array([o.matrix_world @ Vector(c) for o in liquids for c in o.bound_box])
    lo = np.maximum(corners.min(axis=0), spec.origin)
    hi = np.minimum(corners.max(axis=0), spec.upper)
    approx = int(f.particles_per_cell * np.prod(np.clip((hi - lo) / spec.voxel_size, 1, None)))
    try:
        sparse, _ = choose_solver(spec, approx, f)
    except InputError:
        return None
    return disk_plan.liquid_plan(scene.frame_end - scene.frame_start + 1, approx, scene.voxfx.cache_format,
                                 scene.voxfx.checkpoint_every, f.particles_per_cell, box_inflows(scene, spec, f),
                                 most=spec.voxel_count * f.particles_per_cell,
                                 grid_faces=None if sparse else face_count(spec), time_centred=time_centred(f))


def face_count(spec) -> int:
    """MAC faces of the dense grid of *spec* (its velocity is in every checkpoint)."""
    nx, ny, nz = spec.shape
    return (nx + 1) * ny * nz + nx * (ny + 1) * nz + nx * ny * (nz + 1)


def box_inflows(scene, spec, f) -> tuple[float, int]:
    """``FlipBake.inflow_emission`` with each inflow's bounding box (in the domain) for its
    cells: (particles added per frame, at the first fill)."""
    gravity = kernel_settings(f, scene).gravity
    fps = scene.render.fps / scene.render.fps_base
    rate, fill = 0.0, 0
    for obj in role_objects(scene, "INFLOW"):
        corners = np.array([obj.matrix_world @ Vector(c) for c in obj.bound_box])
        lo, hi = np.maximum(corners.min(axis=0), spec.origin), np.minimum(corners.max(axis=0), spec.upper)
        x, y, z = np.ceil(np.clip((hi - lo) / spec.voxel_size, 0, None)).astype(int).tolist()
        rate += emission_per_frame(x * y * z, (y * z, x * z, x * y), tuple(obj.voxfx_flip.initial_velocity), gravity,
                                   fps, spec.voxel_size, f.particles_per_cell)
        fill += x * y * z * f.particles_per_cell
    return rate, fill


def kernel_settings(f, scene, sparse=None) -> FlipSettings:
    """The kernels' settings of the Liquid panel *f*: *sparse* the solver ``choose_solver``
    picked (default: Sparse chosen outright)."""
    gravity = tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)
    sparse = f.solver == "SPARSE" if sparse is None else bool(sparse)
    return from_source(FlipSettings, f, gravity=gravity, sparse=sparse)


def bake_memory_need(spec, particles: int, f, compact: bool, xp=None, usable=None, reach=None) -> int:
    """Peak bytes of the liquid bake (``memory_need``: dense or sparse as ``choose_solver``
    picks with *usable* bytes) on the device of *xp* (default: the backend's); a GPU bake
    writing Compact frames also encodes each frame on the device
    (``compact_points.device_encoder_bytes``, ~60 B a particle) beside the simulation's state."""
    from ...kernels.flip.sparse_memory import sparse_flip_memory
    from ...kernels.flip.sim import flip_memory

    xp = xp or backend.xp()
    need = memory_need(spec, particles, f, xp=xp, usable=usable, reach=reach)  # sparse: the liquid's volume (issue 12)
    if not compact or xp is np:
        return need
    apic = bool(getattr(f, "apic", False))
    sparse, _ = choose_solver(spec, particles, f, usable=usable, xp=xp)
    if sparse:
        stages = sparse_flip_memory(spec, particles, int(f.particles_per_cell), apic,
                                    closed=getattr(f, "boundary", "closed") == "closed", parts=True, xp=xp,
                                    narrow_band=int(getattr(f, "narrow_band", 0)), climb=climb(spec, reach),
                                    **estimate_options(f))
    else:
        stages = flip_memory(spec, particles, apic, parts=True, xp=xp, **estimate_options(f))
    return max(need, compact_points.with_device_encoder(stages, particles))


def check_memory(spec, particles, f, domain_obj, compact: bool = False, reach=None):
    """Refuse before allocating, naming the largest resolution that fits (particles scale
    with the cell count). The limit is the device's free memory plus VoxFX's own pool's
    free blocks (``backend.device_info``), after earlier bakes' blocks and cached solvers
    were given back. *compact*: frames are encoded on the device (``bake_memory_need``);
    *reach*: how high the liquid can climb (``flip_sparse.liquid_reach``)."""
    from ...kernels.memory import largest_that_fits, release_gpu_pool

    release_gpu_pool()
    info = backend.device_info()
    free = int(info.free_bytes * backend.SAFETY_FRACTION)
    need = bake_memory_need(spec, particles, f, compact, usable=free, reach=reach)
    if need <= free:
        return

    def trial(res):
        t = domain_spec(domain_obj, res)
        return bake_memory_need(t, int(particles * t.voxel_count / spec.voxel_count), f, compact, usable=free,
                                reach=reach)

    best = largest_that_fits(trial, free, 8, f.resolution - 1)
    raise InputError(f"A {'×'.join(map(str, spec.shape))} liquid grid with about {particles:,} particles needs "
                     f"{backend.format_bytes(need)} but only {backend.format_bytes(free)} is usable on "
                     f"{info.name}{backend.limit_note(info)}"
                     + (f". The largest resolution that fits is {best}" if best else ""))


def _is_animated(obj) -> bool:
    """Whether the object may move or deform over time (then it is re-voxelized per frame)."""
    ad = obj.animation_data
    return bool((ad and (ad.action or ad.drivers)) or obj.parent or obj.constraints
                or any(m.show_viewport for m in obj.modifiers))


def pose(context, objects) -> dict:
    """The bodies (``kernels.flip.bodies.Body``: world triangles and matrix) of *objects*
    at the scene's current frame, by object name: all the liquid bake reads of a moving
    object; the kernels voxelize them and derive velocities."""
    depsgraph = context.evaluated_depsgraph_get()
    out = {}
    for obj in objects:
        soup = scene_io.extract_triangles([obj], depsgraph)
        out[obj.name] = Body(soup.vertices, soup.triangles, np.array(obj.matrix_world, dtype=np.float64))
    return out


class Poses:
    """The bodies of the moving objects per frame, each frame visited once
    (``scene.frame_set`` once per baked frame; the last two frames are kept)."""

    def __init__(self, context, objects):
        self.context, self.objects, self.frames = context, list(objects), {}

    def at(self, frame: int) -> dict:
        if frame not in self.frames:
            self.context.scene.frame_set(frame)
            self.frames = {f: b for f, b in self.frames.items() if f == frame - 1}
            self.frames[frame] = pose(self.context, self.objects)
        return self.frames[frame]


def frame_writers(sim, spec, progress=None, compact=False):
    """The files of one liquid frame from the simulation (``kernels.flip.bake.frame_arrays``)."""
    return writers_of(frame_arrays(sim, spec, progress), spec, compact)


def writers_of(arrays, spec, compact=False):
    """The files of one liquid frame (suffix → write(path)) from its arrays, the VDB too
    (``liquid_files.writers_of``)."""
    return liquid_files.writers_of(arrays, spec, compact, write_vdb=writeback.write_vdb)


def _collection():
    return writeback.ensure_collection(COLLECTION)


def _empty_mesh_object(name):
    obj = bpy.data.objects.get(name) or writeback.mark_output(bpy.data.objects.new(name, bpy.data.meshes.new(name)))
    if obj.name not in _collection().objects:
        _collection().objects.link(obj)
    return obj


def attach_outputs(cache, start, count, display=1.0, ext=".ply"):
    prefix = str(cache.folder / f"{cache.name}_")
    stored = bpy.path.relpath(prefix) if bpy.data.filepath else prefix
    particles = _empty_mesh_object("Liquid Particles")
    mod = node_setups.attach(particles, node_setups.points_from_ply_sequence("VoxFX Liquid Particles", stored))
    node_setups.set_input(mod, "Viewport Fraction", float(display))
    frame_loader.attach(particles, "points", stored, ext=ext)
    surface = _empty_mesh_object("Liquid Surface")
    mat = materials.liquid()
    node_setups.attach(surface, node_setups.liquid_surface_from_vdb_sequence("VoxFX Liquid Surface", stored,
                                                                             material=mat))
    surface.data.materials.clear()
    surface.data.materials.append(mat)
    frame_loader.attach(surface, "liquid_surface", stored, surface="surface", velocity="velocity")
    volume = writeback.load_volume("Liquid VDB", str(cache.frame_path(start, ".vdb")), sequence_frames=(start, count),
                                   collection=_collection())
    # The surface mesh renders; the VDB is for pipelines and shading. Hidden in the viewport
    # too: Blender keeps every volume frame it draws in its memory cache (issue 21).
    volume.hide_render = volume.hide_viewport = True
    return particles, surface, volume


def present(f, liquids, inflows, outflows, particles) -> None:
    """After a bake, let the liquid be what renders: the domain box shows as bounds and,
    with Hide Sim Objects in Renders, it and the objects that only define the simulation
    (sources, inflows, outflows) stay out of renders; the particles render only if asked.
    Obstacles are scene objects (a rock, a glass) and are left alone."""
    if f.hide_sim_objects:
        f.domain.display_type = "BOUNDS"
        for obj in [f.domain, *liquids, *inflows, *outflows]:
            obj.hide_render = True
        for obj in [*liquids, *inflows, *outflows]:
            obj.display_type = "WIRE"  # the baked surface shows through in the viewport
    particles.hide_render = not f.render_particles


def flip_job(context, f, cache_dir: str, frame_start: int, frame_end: int, resume: bool = True):
    """Job generator: bake frames start..end; returns a BakeResult. A cancel or failure
    leaves the cache with its complete frames and the scene on the frame it showed."""
    return keep_frame_on_abort(context.scene, _flip_job(context, f, cache_dir, frame_start, frame_end, resume))


def _flip_job(context, f, cache_dir, frame_start, frame_end, resume):
    scene = context.scene
    if f.domain is None:
        raise InputError("Choose a Domain object (a box around the liquid)")
    liquids = role_objects(scene, "LIQUID")
    if not liquids:
        raise InputError("No object has the Liquid role: set one in its Physics properties (VoxFX Liquid)")
    obstacles = role_objects(scene, "OBSTACLE")
    inflows = role_objects(scene, "INFLOW")
    outflows = role_objects(scene, "OUTFLOW")
    depsgraph = context.evaluated_depsgraph_get()
    scene.frame_set(frame_start)
    spec = domain_spec(f.domain, f.resolution)
    liquid = scene_io.extract_triangles(liquids, depsgraph)
    lo, hi = np.asarray(liquid.bounds[0]), np.asarray(liquid.bounds[1])
    if np.any(hi < np.asarray(spec.origin)) or np.any(lo > np.asarray(spec.upper)):
        raise InputError(f"The liquid ({', '.join(o.name for o in liquids)}) lies outside the domain '{f.domain.name}'")
    obstacle = scene_io.extract_triangles(obstacles, depsgraph) if obstacles else None
    approx = int(f.particles_per_cell * np.prod(np.clip((hi - lo) / spec.voxel_size, 1, None)))
    gravity = tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)
    speed = max(np.linalg.norm(np.asarray(o.voxfx_flip.initial_velocity, float)) for o in liquids)
    reach = liquid_reach(float(hi[2]), (speed, 0.0, 0.0), gravity)  # how high it can splash (sparse estimate)
    check_memory(spec, approx, f, f.domain, compact=scene.voxfx.cache_format == "COMPACT", reach=reach)
    sparse, solver = choose_solver(spec, approx, f)  # Auto: dense where it fits, else sparse (issue 12)
    settings = kernel_settings(f, scene, sparse)
    velocity = tuple(liquids[0].voxfx_flip.initial_velocity)
    fps = scene.render.fps / scene.render.fps_base
    folder = resolve_folder(cache_dir) / "liquid"
    cache = BakeCache(folder, "liquid", kind="flip", checkpoint_every=scene.voxfx.checkpoint_every,
                      owner=blend_name())
    # the time-centred advection off (today's advection) leaves the settings, and so the hash, older bakes have
    recorded = {k: v for k, v in settings.__dict__.items() if v or k != "time_centred_advection"}
    key = {"settings": recorded, "grid": [list(spec.origin), spec.voxel_size, list(spec.shape)],
           "liquids": sorted(o.name for o in liquids), "obstacles": sorted(o.name for o in obstacles), "fps": fps,
           "inflows": sorted(o.name for o in inflows), "outflows": sorted(o.name for o in outflows),
           "velocity": velocity}
    compact = cache.choose_format(key, scene.voxfx.cache_format, resume, "liquid")
    plan = cache.begin(key, frame_start, frame_end, resume=resume)
    xp = backend.xp()
    moving = [o for o in obstacles + inflows + outflows if _is_animated(o)]
    obstacles_move = any(o in moving for o in obstacles)
    ports_move = bool(moving) and bool(inflows or outflows)  # inflows and outflows
    start = pose(context, inflows + outflows)  # the scene is at frame_start
    bake = FlipBake(spec, settings, (liquid.vertices, liquid.triangles),
                    (obstacle.vertices, obstacle.triangles) if obstacle else None, xp=xp, fps=fps,
                    initial_velocity=velocity, obstacle_names=[o.name for o in obstacles],
                    inflows=[(o.name, start[o.name]) for o in inflows],
                    outflows=[(o.name, start[o.name]) for o in outflows], obstacles_move=obstacles_move,
                    ports_move=ports_move, frame_end=frame_end, kept_in=str(folder), particles_on_device=compact)
    inflow_velocity = {o.name: tuple(o.voxfx_flip.initial_velocity) for o in inflows}
    disk = disk_plan.liquid_plan(len(plan.todo), approx, scene.voxfx.cache_format, scene.voxfx.checkpoint_every,
                                 f.particles_per_cell, bake.inflow_emission(inflow_velocity),
                                 after=plan.todo[0] - frame_start if plan.todo else 0,
                                 most=spec.voxel_count * f.particles_per_cell,
                                 grid_faces=None if sparse else face_count(spec), time_centred=time_centred(f))
    # refuses when it cannot fit; says which grid and why (Auto)
    yield 0.0, f"{disk_plan.summary(disk, disk_plan.check(disk, folder))}; {solver}"
    poses = Poses(context, (obstacles if obstacles_move else []) + (inflows + outflows if ports_move else []))

    def scene_inputs(frame):
        """What the step from frame − 1 to frame reads from the scene (here, on the main
        thread): the moving bodies at both frames and the inflows' velocities."""
        moved = (poses.at(frame - 1), poses.at(frame)) if obstacles_move or ports_move else None
        return {"poses": moved, "velocities": {o.name: tuple(o.voxfx_flip.initial_velocity) for o in inflows}}

    # the memory looked at again before each frame: a liquid that spreads past the limit stops cleanly
    guarded = GuardedBake(bake, frame_check(spec, f, sparse, compact, approx, xp, reach), frame_start)
    written, sim = yield from sim_bake.run(cache, plan, guarded, lambda arrays: writers_of(arrays, spec, compact),
                                           scene_inputs, background=scene.voxfx.write_while_simulating)
    particles, _, _ = attach_outputs(cache, frame_start, frame_end - frame_start + 1, f.particle_display,
                                     compact_points.SUFFIX if compact else ".ply")
    present(f, liquids, inflows, outflows, particles)
    substeps = FlipBake.summary(sim) if getattr(sim, "substep_log", None) else ""  # frames stepped in this run
    return BakeResult(sim_bake.summary(written, plan), str(folder), list(cache.notes),
                      details=f"{solver}; {substeps}" if substeps else "")  # frames stepped: by which solver


class VOXFX_OT_flip_bake(JobOperator, bpy.types.Operator):
    """Bake the liquid over the scene's frame range (resumes after the last complete frame)"""

    bl_idname = "voxfx.flip_bake"
    bl_label = "Bake Liquid"
    bl_options = {"REGISTER"}
    job_title = "Liquid"

    @classmethod
    def poll(cls, context):
        f = context.scene.voxfx.flip if hasattr(context.scene, "voxfx") else None
        if f is None or f.domain is None:
            cls.poll_message_set("Choose a Domain object for the liquid")
            return False
        if not role_objects(context.scene, "LIQUID"):
            cls.poll_message_set("Give an object the Liquid role (Physics properties → VoxFX Liquid)")
            return False
        return True

    def make_job(self, context):
        scene = context.scene
        return flip_job(context, scene.voxfx.flip, scene.voxfx.cache_directory, scene.frame_start, scene.frame_end)

    def job_finished(self, context, result):
        report_bake(self, result, "Liquid")


class VOXFX_OT_flip_free(bpy.types.Operator):
    """Delete the liquid bake's cached frames and its state"""

    bl_idname = "voxfx.flip_free"
    bl_label = "Free Liquid Bake"

    def execute(self, context):
        return free_bake(self, context, "liquid", "flip")


def set_timing(f, name: str) -> None:
    """Give the Liquid settings *f* the four timing values of ``TIMINGS[name]``."""
    if name not in TIMINGS:
        raise InputError(f"Timing must be one of {', '.join(TIMINGS)}, not {name!r}")
    for key, value in TIMINGS[name].items():
        setattr(f, key, value)


class VOXFX_OT_flip_timing(bpy.types.Operator):
    """Set CFL Number, Max Substeps, Max Time Step and Time-Centred Advection together"""

    bl_idname = "voxfx.flip_timing"
    bl_label = "Liquid Timing"
    bl_options = {"REGISTER", "UNDO"}

    timing: bpy.props.EnumProperty(
        name="Timing",
        items=(("accurate", "Accurate", "The defaults: CFL 2, up to 8 substeps a frame, at most 1/30 s a substep"),
               ("balanced", "Balanced", "At most 8 cells a substep (CFL 8, up to 16 substeps, at most 1/72 s a "
                "substep, time-centred advection): three substeps a 24 fps frame while the liquid is slow, more "
                "as it speeds up and the finer the grid, so fine grids keep their liquid's volume where Fast "
                "loses it; cheaper than Accurate on coarse grids"),
               ("fast", "Fast", "Three substeps a 24 fps frame (CFL 5, at most 1/72 s a substep, time-centred "
                "advection): about twice as fast; the dam break's front and the sloshing period stay within "
                "the accuracy tests' bounds. On very fine grids (512³) particles pile up against the walls "
                "more than with Accurate: prefer Accurate there")),
        default="accurate")

    def execute(self, context):
        set_timing(context.scene.voxfx.flip, self.timing)
        self.report({"INFO"}, f"Liquid timing: {self.timing}")
        return {"FINISHED"}


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_OT_flip_bake, VOXFX_OT_flip_free,
                                                             VOXFX_OT_flip_timing))


def register():
    _register()


def unregister():
    _unregister()
