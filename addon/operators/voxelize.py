"""Voxelize Selected: selection → triangle/segment arrays → kernels.voxelize → outputs
(point cloud, volume, block mesh, MagicaVoxel file), and Bake Frames (a volume sequence).

``plan()`` turns settings into a request, ``voxelize_job()`` is the job generator the
operators run (synchronously headless, modal in the UI); the CLI calls the same two.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np

from ...kernels import backend
from ...kernels.backend import DeviceMemoryError
from ...kernels.errors import BadGeometryError, InputError, VoxFXError
from ...kernels.grid import GridSpec
from ...kernels.voxelize import estimate_bytes, voxelize
from ...kernels.voxelize.attributes import owner_triangles
from ...kernels.voxelize.blocks import exterior_faces
from ...kernels.voxelize.coverage import coverage
from ...kernels.voxelize.lines import voxelize_segments
from ...kernels.voxelize.topology import open_objects
from .. import materials, scene_io, writeback
from ..cache import MANIFEST, BakeCache, CacheError, blend_name, explain, resolve_folder
from ..jobs import BakeResult, JobOperator
from ..sim_bake import summary as bake_summary

KERNEL_MODE = {"SURFACE": "surface", "THIN": "thin", "SOLID": "solid", "SOLID_SURFACE": "solid+surface"}
COLLECTION = "VoxFX Voxels"


@dataclass
class Request:
    mode: str  # kernel mode name
    resolution: int | None = None
    voxel_size: float | None = None
    fill_holes: bool = False
    include_edges: bool = True
    combine: bool = True
    outputs: set = field(default_factory=lambda: {"points"})
    vox_path: str = ""
    cache_dir: str = "//voxfx_cache/{blend_name}/"

    def settings(self) -> dict:
        return {k: (sorted(v) if isinstance(v, set) else v) for k, v in self.__dict__.items()}


def plan(settings, cache_dir: str) -> Request:
    """A request from the scene's VoxelizeSettings (checked: a clear error, not a traceback)."""
    outputs = {name for name, on in (("points", settings.output_points), ("volume", settings.output_volume),
                                     ("blocks", settings.output_blocks), ("vox", settings.output_vox)) if on}
    if not outputs:
        raise InputError("Choose at least one output (point cloud, volume, block mesh or MagicaVoxel)")
    by_size = settings.size_mode == "VOXEL_SIZE"
    if by_size and not settings.voxel_size > 0:
        raise InputError(f"Voxel size must be positive, not {settings.voxel_size}")
    return Request(mode=KERNEL_MODE[settings.mode], resolution=None if by_size else settings.resolution,
                   voxel_size=settings.voxel_size if by_size else None, fill_holes=settings.fill_holes,
                   include_edges=settings.include_edges, combine=settings.combine, outputs=outputs,
                   vox_path=settings.vox_path, cache_dir=cache_dir)


def grid_for(lo, hi, request: Request) -> GridSpec:
    """Grid covering lo..hi with one voxel of padding, sized by voxel size or resolution."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if request.voxel_size:
        return GridSpec.around(lo, hi, request.voxel_size)
    extent = float(np.max(hi - lo))
    size = extent / max(request.resolution, 1) if extent > 0 else 1e-3
    return GridSpec.around(lo, hi, size)


def _peak_bytes(spec, request, n_vertices, n_triangles, vote) -> int:
    peak = estimate_bytes(spec, request.mode, n_vertices, n_triangles, vote)
    if "volume" in request.outputs or request.mode in ("solid", "solid+surface"):
        peak += 4 * spec.voxel_count  # float32 coverage/density on the host
    return peak


def check_memory(spec, request, n_vertices, n_triangles, vote, lo, hi) -> None:
    """Refuse before allocating, naming the largest resolution that fits."""
    try:
        backend.ensure_fits(_peak_bytes(spec, request, n_vertices, n_triangles, vote),
                            f"A {'×'.join(map(str, spec.shape))} voxel grid")
    except DeviceMemoryError as e:
        free = int(backend.device_info().free_bytes * backend.SAFETY_FRACTION)
        good, bad = 2, max(spec.shape)
        while bad - good > 1:  # the peak grows with resolution: bisect it
            mid = (good + bad) // 2
            trial = grid_for(lo, hi, Request(mode=request.mode, resolution=mid, outputs=request.outputs))
            if _peak_bytes(trial, request, n_vertices, n_triangles, vote) <= free:
                good = mid
            else:
                bad = mid
        best = grid_for(lo, hi, Request(mode=request.mode, resolution=good))
        raise InputError(f"{e}. The largest resolution that fits is {good} "
                         f"(voxel size {best.voxel_size:.4g} m)") from e


@dataclass
class Result:
    name: str
    spec: GridSpec
    count: int
    objects: list = field(default_factory=list)
    files: list = field(default_factory=list)


def voxelize_job(context, objects, request: Request, warnings: list, frame=None):
    """Job generator: yields (fraction, message); returns the list of Results."""
    if "vox" in request.outputs:
        vox_output_path(request.vox_path)  # refuse a bad path before any work
    depsgraph = context.evaluated_depsgraph_get()
    selection = scene_io.geometry_objects(objects, depsgraph) if not request.include_edges else None
    candidates = list(objects)
    if selection is not None:
        candidates = selection.objects
        if selection.skipped:
            warnings.append("Skipped: " + ", ".join(f"{n} ({why})" for n, why in selection.skipped.items()))
    groups = [candidates] if request.combine else [[o] for o in candidates]
    results = []
    for g_index, group in enumerate(groups):
        base = f"{group[0].name}" + (f"+{len(group) - 1}" if len(group) > 1 else "")
        yield g_index / len(groups), f"reading {base}"
        soup, segments = _extract(group, depsgraph, request, warnings, frame)
        lo, hi = _bounds(soup, segments)
        spec = grid_for(lo, hi, request)
        vote = request.fill_holes
        if soup is not None and request.mode in ("solid", "solid+surface") and not vote:
            open_names = open_objects(soup.triangles, soup.object_index, soup.object_names)
            if open_names:
                vote = True
                warnings.append(f"Not closed: {', '.join(open_names)}; solid voxels use the 3-axis vote")
        n_v = len(soup.vertices) if soup is not None else 0
        n_t = len(soup.triangles) if soup is not None else 0
        check_memory(spec, request, n_v, n_t, vote, lo, hi)
        yield (g_index + 0.2) / len(groups), f"voxelizing {base} ({'×'.join(map(str, spec.shape))})"
        result = _voxelize_group(base, soup, segments, spec, request, vote, warnings)
        yield (g_index + 0.9) / len(groups), f"writing {base}"
        results.append(result)
    return results


def _extract(group, depsgraph, request, warnings, frame):
    soup = segments = None
    meshes = [o for o in group if scene_io.may_have_geometry(o)]
    try:
        soup = scene_io.extract_triangles(group, depsgraph, with_colors=True, frame=frame)
    except BadGeometryError:
        raise  # a bad object stops the work, named: never left out silently
    except InputError:  # no object with faces: edges and curves may still give voxels
        if not request.include_edges:
            raise
    if request.include_edges:
        segments = scene_io.extract_segments(group, depsgraph, loose_only=True, frame=frame)
        if len(segments) == 0:
            segments = None
    if soup is None and segments is None:
        raise InputError("No selected object has geometry to voxelize: "
                         + ", ".join(o.name for o in group) + (". " if meshes else ""))
    return soup, segments


def _bounds(soup, segments):
    los, his = [], []
    if soup is not None:
        los.append(np.asarray(soup.bounds[0]))
        his.append(np.asarray(soup.bounds[1]))
    if segments is not None:
        pts = np.concatenate([segments.starts, segments.ends])
        los.append(pts.min(axis=0))
        his.append(pts.max(axis=0))
    return np.min(los, axis=0), np.max(his, axis=0)


def _voxelize_group(base, soup, segments, spec, request, vote, warnings) -> Result:
    xp = backend.xp()
    empty = np.zeros((0, 3), dtype=np.float32)
    verts = soup.vertices if soup is not None else empty
    tris = soup.triangles if soup is not None else np.zeros((0, 3), dtype=np.int32)
    grid = voxelize(verts, tris, spec, request.mode, vote=vote, xp=xp)
    bits = grid.bits
    if segments is not None:
        bits = voxelize_segments(segments.starts, segments.ends, spec, xp=np, words=bits)
        grid.bits = bits
    result = Result(base, spec, grid.count())
    if result.count == 0:
        warnings.append(f"{base}: no voxels (is the voxel size larger than the object?)")
        return result
    ijk = grid.coordinates()
    material, color = _voxel_attributes(soup, verts, tris, spec, bits, xp, len(ijk))
    solid_mode = request.mode in ("solid", "solid+surface")
    cover = None  # fraction of each voxel inside the mesh (solid modes only)
    if solid_mode and len(tris) and ("volume" in request.outputs or "points" in request.outputs):
        cover = coverage(verts, tris, spec, vote=vote, xp=xp)
    if "points" in request.outputs:
        cov = cover[ijk[:, 2], ijk[:, 1], ijk[:, 0]] if cover is not None else np.ones(len(ijk), np.float32)
        # Cycles draws a point cloud with its first material only (5.0 ignores material_index),
        # so points carry their source's colour, and a selection of several materials gets a
        # first material that shows it (VoxFX Voxel Color); indices shift by one to match.
        several = soup is not None and (len(set(np.unique(material).tolist())) > 1 or
                                        (len(soup.materials) > 0 and (material < 0).any()))
        attrs = {"material_index": material + 1 if several else material, "coverage": cov,
                 "color": color if color is not None else _material_colors(soup, material)}
        obj = writeback.write_point_cloud(f"{base}_voxels", spec.centers(ijk), attrs,
                                          radius=np.full(len(ijk), 0.5 * spec.voxel_size, np.float32),
                                          collection=_collection())
        _copy_materials(soup, obj, first=materials.voxel_color() if several else None)
        result.objects.append(obj.name)
    if "volume" in request.outputs:
        dense = grid.dense().astype(np.float32)
        if cover is not None:  # smooth density; set voxels wholly outside (thin sheets) still show
            dense = np.where(dense > 0, np.maximum(cover, 0.5 * (cover == 0)), cover).astype(np.float32)
        path = _write_volume(resolve_folder(request.cache_dir) / "voxelize", _safe(base), dense, spec)
        obj = writeback.load_volume(f"{base}_volume", str(path), collection=_collection())
        if not obj.data.materials:
            obj.data.materials.append(materials.volume())
        result.objects.append(obj.name)
        result.files.append(str(path))
    if "blocks" in request.outputs or "vox" in request.outputs:
        _block_outputs(base, grid, spec, material, color, soup, request, result)
    return result


def _write_volume(folder: Path, stem: str, dense, spec) -> Path:
    """Write this result's density VDB and remove the ones earlier runs wrote for it.

    Blender caches a VDB by path for the whole session, so each run needs a new name
    (``<stem>_<run>.vdb``); the older files of the same stem are then deleted, so the
    folder holds one volume per result, and Free (``cache_free`` of ``voxelize``)
    removes it.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheError(explain(e, folder)) from e
    pattern = re.compile(rf"{re.escape(stem)}_(\d+)\.vdb")
    older = [e for e in os.scandir(folder) if pattern.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
    run = max([int(pattern.fullmatch(e.name).group(1)) for e in older] + [int(time.time() * 1000)]) + 1
    path = folder / f"{stem}_{run}.vdb"
    try:
        writeback.write_vdb(path, {"density": dense}, spec)
    except VoxFXError as e:
        if isinstance(e.__cause__, OSError):
            raise CacheError(explain(e.__cause__, folder)) from e
        raise
    for entry in older:
        os.unlink(entry.path)
    return path


def _voxel_attributes(soup, verts, tris, spec, bits, xp, count):
    """Per set voxel: material index (into the combined material list) and RGBA colour."""
    if soup is None or len(tris) == 0:
        return np.full(count, -1, np.int32), None
    owner = owner_triangles(verts, tris, spec, bits, xp=xp)
    ok = owner >= 0
    material = np.where(ok, soup.material_index[np.maximum(owner, 0)], -1).astype(np.int32)
    color = None
    if soup.corner_colors is not None and any(soup.colored_objects or ()):
        # Sources with a colour attribute give it; the others their material's colour.
        color = _material_colors(soup, material)
        from_attribute = ok & np.asarray(soup.colored_objects, bool)[soup.object_index[np.maximum(owner, 0)]]
        corner = soup.corner_colors[np.maximum(owner, 0)[from_attribute]]
        color[from_attribute] = corner.mean(axis=1).astype(np.float32)
    return material, color


def _block_outputs(base, grid, spec, material, color, soup, request, result):
    if "blocks" in request.outputs:
        blocks = exterior_faces(grid.bits, spec).to_numpy()
        face_material = np.maximum(material[blocks.voxel_of_face], 0)
        obj = writeback.write_mesh(f"{base}_blocks", blocks.vertices, blocks.quads,
                                   material_indices=face_material, collection=_collection())
        _copy_materials(soup, obj)
        result.objects.append(obj.name)
    if "vox" in request.outputs:
        from ..vox_export import write_vox

        path = vox_output_path(request.vox_path)
        if not request.combine:
            path = path.with_name(f"{path.stem}_{_safe(base)}{path.suffix}")
        rgba = color if color is not None else _material_colors(soup, material)
        write_vox(path, grid.coordinates(), spec.shape, colors=rgba)
        result.files.append(str(path))


def vox_output_path(text: str) -> Path:
    """The absolute .vox path for the setting *text*; '//' needs a saved .blend."""
    if not text:
        raise InputError("Set a .vox file path to export MagicaVoxel")
    if text.startswith("//") and not bpy.data.filepath:
        raise InputError(f"The .vox path '{text}' is relative to the .blend file, which is not saved yet: "
                         "save the file or choose an absolute path")
    return Path(os.path.abspath(bpy.path.abspath(text)))


def _material_colors(soup, material):
    """RGBA per voxel from its material's colour (``materials.surface_color``; Blender's
    default grey without one)."""
    table = np.empty((len(soup.materials) + 1 if soup else 1, 4), np.float32)
    table[:] = materials.DEFAULT_COLOR
    if soup:
        for i, name in enumerate(soup.materials):
            mat = bpy.data.materials.get(name)
            if mat is not None:
                table[i] = materials.surface_color(mat)
    return table[np.where(material >= 0, material, len(table) - 1)]


def _copy_materials(soup, obj, first=None):
    """Give *obj* the selection's material slots (after *first*, if given), keeping its
    per-face material indices (Blender drops a mesh's ``material_index`` attribute when its
    slots are cleared)."""
    if soup is None:
        return
    data = obj.data
    kept = data.attributes.get("material_index") if isinstance(data, bpy.types.Mesh) else None
    saved = None
    if kept is not None:
        saved = np.empty(len(kept.data), np.int32)
        kept.data.foreach_get("value", saved)
    data.materials.clear()
    if first is not None:
        data.materials.append(first)
    for name in soup.materials:
        data.materials.append(bpy.data.materials.get(name))
    if saved is not None:
        attr = data.attributes.get("material_index") or data.attributes.new("material_index", "INT", "FACE")
        attr.data.foreach_set("value", saved)


def _collection():
    return writeback.ensure_collection(COLLECTION)


def _safe(name: str) -> str:
    """*name* as a file name part: ASCII letters, digits, '-', '_', '.'; starts with a
    letter or digit (cache names must)."""
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in name)
    return safe if safe[:1].isalnum() else f"v{safe}"


# ------------------------------------------------------------------------- operators

def _poll_selection(cls, context):
    if context.mode != "OBJECT":
        cls.poll_message_set("Switch to Object Mode to voxelize")
        return False
    if not any(scene_io.may_have_geometry(o) for o in context.selected_objects):
        cls.poll_message_set("Select one or more objects with geometry (meshes, curves, text)")
        return False
    return True


class VOXFX_OT_voxelize(JobOperator, bpy.types.Operator):
    """Voxelize the selected objects into the chosen outputs"""

    bl_idname = "voxfx.voxelize"
    bl_label = "Voxelize Selected"
    bl_options = {"REGISTER", "UNDO"}
    job_title = "Voxelize"

    @classmethod
    def poll(cls, context):
        return _poll_selection(cls, context)

    def make_job(self, context):
        request = plan(context.scene.voxfx.voxelize, context.scene.voxfx.cache_directory)
        if "volume" in request.outputs:
            resolve_folder(request.cache_dir)  # an unsaved .blend with '//' fails now, not later
        self._warnings = []
        return voxelize_job(context, list(context.selected_objects), request, self._warnings)

    def job_finished(self, context, results):
        for w in getattr(self, "_warnings", []):
            self.report({"WARNING"}, w)
        total = sum(r.count for r in results)
        self.report({"INFO"}, f"Voxelized {len(results)} result(s), {total:,} voxels")


class VOXFX_OT_voxelize_bake(JobOperator, bpy.types.Operator):
    """Voxelize the selected (animated) objects over the scene's frame range into a volume sequence"""

    bl_idname = "voxfx.voxelize_bake"
    bl_label = "Bake Frames"
    bl_options = {"REGISTER"}
    job_title = "Voxelize bake"

    @classmethod
    def poll(cls, context):
        return _poll_selection(cls, context)

    def make_job(self, context):
        settings = context.scene.voxfx.voxelize
        request = plan(settings, context.scene.voxfx.cache_directory)
        request.outputs = {"volume_sequence"}
        request.combine = True
        folder = resolve_folder(request.cache_dir) / "voxelize_bake"
        objects = list(context.selected_objects)
        scene = context.scene
        return bake_frames_job(context, objects, request, folder, scene.frame_start, scene.frame_end)

    def job_finished(self, context, result):
        for note in result.notes:
            self.report({"WARNING"}, note)
        self.report({"INFO"}, f"Voxelize: {result.summary} in '{result.folder}'")


def bake_frames_job(context, objects, request: Request, folder: Path, start: int, end: int):
    """One grid for the whole sequence (the union of every frame's bounds), then per
    frame: extract at that frame, voxelize, write the density VDB into the cache; finally
    load the files as a Volume sequence. Resumes after the last complete frame."""
    depsgraph = context.evaluated_depsgraph_get()
    base = _safe(objects[0].name if objects else "voxels")
    cache = BakeCache(folder, f"{base}", kind="voxelize", owner=blend_name())
    plan = cache.begin(request.settings(), start, end)
    todo = set(plan.todo)
    # One grid for the whole sequence, from the union of every frame's bounds.
    lo = hi = None
    for frame in range(start, end + 1):
        soup = scene_io.extract_triangles(objects, depsgraph, frame=frame)
        lo = soup.bounds[0] if lo is None else np.minimum(lo, soup.bounds[0])
        hi = soup.bounds[1] if hi is None else np.maximum(hi, soup.bounds[1])
        yield 0.1 * (frame - start + 1) / (end - start + 1), f"bounds at frame {frame}"
    spec = grid_for(lo, hi, request)
    check_memory(spec, request, 0, 0, request.fill_holes, lo, hi)
    xp = backend.xp()
    for frame in sorted(todo):
        soup = scene_io.extract_triangles(objects, depsgraph, frame=frame)
        if request.mode in ("solid", "solid+surface"):
            density = coverage(soup.vertices, soup.triangles, spec, vote=request.fill_holes, xp=xp)
        else:
            density = voxelize(soup.vertices, soup.triangles, spec, request.mode, xp=xp).dense().astype(np.float32)
        cache.write_frame(frame, {".vdb": lambda p, d=density: writeback.write_vdb(p, {"density": d}, spec)})
        yield 0.1 + 0.9 * (frame - start + 1) / (end - start + 1), f"frame {frame}/{end}"
    path = cache.frame_path(start, ".vdb")
    writeback.load_volume(f"{base}_voxels_seq", str(path), sequence_frames=(start, end - start + 1),
                          collection=_collection())
    return BakeResult(bake_summary(sorted(todo), plan), str(folder), list(cache.notes))


def free_voxelize_outputs(root: Path, notes: list) -> int:
    """Remove what Voxelize wrote under the cache folder *root*: the volume files of
    ``voxelize/`` (``<stem>_<run>.vdb``) and the frame bakes in ``voxelize_bake/``, by
    their name patterns; return the count."""
    removed = 0
    volumes = root / "voxelize"
    pattern = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*_\d+\.vdb|\.voxfx-tmp\..+")
    if volumes.is_dir():
        try:
            for entry in os.scandir(volumes):
                if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
                    removed += 1
        except OSError as e:
            raise CacheError(f"{explain(e, volumes)}: freed {removed} files") from e
        try:
            volumes.rmdir()
        except OSError:
            pass
    bake = root / "voxelize_bake"
    try:
        name = json.loads((bake / MANIFEST).read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        name = None
    if isinstance(name, str):
        try:
            cache = BakeCache(bake, name, kind="voxelize")
        except CacheError:
            notes.append(f"The manifest in '{bake}' names no valid bake: nothing freed there")
        else:
            removed += cache.free()
            notes.extend(cache.notes)
    return removed


class VOXFX_OT_voxelize_free(bpy.types.Operator):
    """Delete the volumes and frame bakes Voxelize wrote into the cache folder"""

    bl_idname = "voxfx.voxelize_free"
    bl_label = "Free Voxelize Files"

    def execute(self, context):
        notes = []
        try:
            removed = free_voxelize_outputs(resolve_folder(context.scene.voxfx.cache_directory), notes)
        except CacheError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        for note in notes:
            self.report({"WARNING"}, note)
        self.report({"INFO"}, f"Freed the voxelize files ({removed} files)")
        return {"FINISHED"}


_register, _unregister = bpy.utils.register_classes_factory((VOXFX_OT_voxelize, VOXFX_OT_voxelize_bake,
                                                             VOXFX_OT_voxelize_free))


def register():
    _register()


def unregister():
    _unregister()
