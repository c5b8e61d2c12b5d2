"""Voxelize Selected: selection → triangle/segment arrays → kernels.voxelize → outputs
(point cloud, volume, block mesh, MagicaVoxel file), and Bake Frames (a volume sequence).

``plan()`` turns settings into a request, ``voxelize_job()`` is the job generator the
operators run (synchronously headless, modal in the UI); the CLI calls the same two.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import bpy
import numpy as np

from ...kernels import backend
from ...kernels.errors import BadGeometryError, InputError
from ...kernels.memory import trim_heap
from ...kernels.voxelize.guard import (LAST_ESTIMATE, bake_estimate, bake_split, check_memory,  # noqa: F401
                                       peak_estimate)
from ...kernels.voxelize.outputs import compute_group, compute_group_split, volume_density, volume_density_split
from ...kernels.voxelize.request import Request, grid_for
from ...kernels.voxelize.sparse_guard import DenseRefused, plan_group, sparse_instead
from ...kernels.voxelize.sparse_outputs import compute_group_sparse
from ...kernels.voxelize.topology import open_objects
from .. import scene_io, voxel_art, writeback
from ..cache import MANIFEST, BakeCache, CacheError, blend_name, explain, resolve_folder
from ..jobs import BakeResult, JobOperator, Kernel, keep_frame_on_abort, report_bake
from ..sim_bake import summary as bake_summary
from ..sparse_vdb import SparseVolume
from ..vdb_stream import SlabVolume
from ..voxelize_outputs import (COLLECTION, Result, _collection, _material_table, _safe,  # noqa: F401
                                _vox_path, _vox_writer, _write_group, vox_output_path)

KERNEL_MODE = {"SURFACE": "surface", "THIN": "thin", "SOLID": "solid", "SOLID_SURFACE": "solid+surface"}


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
                   vox_path=settings.vox_path, cache_dir=cache_dir, sparse=settings.sparse.lower())


def voxelize_job(context, objects, request: Request, warnings: list, frame=None):
    """Job generator: yields (fraction, message); returns the list of Results.

    Every group is read from the scene, then voxelized with all its output arrays (a
    ``Kernel``: on a worker thread in the interactive path, where Esc stops it at its
    next chunk); only once every group is done are the outputs written, in one step, so
    a cancel leaves the scene as it was. (A .vox file written slab by slab waits as a
    temporary beside its path until then, and is removed if the job stops.)"""
    temporaries = []
    try:
        return (yield from _voxelize_job(context, objects, request, warnings, frame, temporaries))
    finally:
        for temporary in temporaries:  # renamed when written; else the job stopped
            temporary.unlink(missing_ok=True)


def _voxelize_job(context, objects, request, warnings, frame, temporaries):
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
    done = []
    n = len(groups)
    for g_index, group in enumerate(groups):
        base = f"{group[0].name}" + (f"+{len(group) - 1}" if len(group) > 1 else "")
        yield 0.95 * g_index / n, f"reading {base}"
        soup, segments = _extract(group, depsgraph, request, warnings, frame)
        art = voxel_art.read(context, group, depsgraph, soup, warnings, request.outputs)  # issue 15 (bpy)
        lo, hi = _bounds(soup, segments)
        spec = grid_for(lo, hi, request)
        vote = request.fill_holes
        if soup is not None and request.mode in ("solid", "solid+surface") and not vote:
            open_names = open_objects(soup.triangles, soup.object_index, soup.object_names)
            if open_names:
                vote = True
                warnings.append(f"Not closed: {', '.join(open_names)}; solid voxels use the 3-axis vote")
        guard, sparse, note = plan_group(spec, _with_art(request, art, soup), soup, segments, vote, lo, hi)
        table = _material_table(soup)  # material colours: bpy, so read here
        a, b = 0.95 * (g_index + 0.1) / n, 0.95 * (g_index + 1) / n
        yield a, f"voxelizing {base} ({'×'.join(map(str, spec.shape))}{', sparse' if sparse else ''})"
        arrays = None
        if not sparse and guard.split_layers is None:
            try:
                arrays = yield Kernel(lambda progress, args=(base, soup, segments, spec, request, vote, guard, table):
                                      compute_group(*args, progress=progress), f"voxelizing {base}", a, b)
            except DenseRefused as refused:  # the exact counts do not fit: sparse, if that fits
                sparse, note = True, sparse_instead(refused, soup, spec, request, vote)
        if sparse:  # 8³ bricks (issue 11): outputs from the bricks, no dense array (sparse_outputs, sparse_vdb)
            if note:
                warnings.append(f"{base}: {note}")
            arrays = yield Kernel(lambda progress, args=(base, soup, spec, request, vote, table), lines=segments:
                                  compute_group_sparse(*args, progress=progress, segments=lines),
                                  f"voxelizing {base} (sparse)", a, b)
            arrays.volume = SparseVolume(arrays.result, arrays.density) if "volume" in request.outputs and \
                arrays.count else None
        elif guard.split_layers is not None:  # planned before voxelizing, or after counting (check_after)
            warnings.append(f"{base}: {guard.split_note}")
            split = dict(kind=guard.split_kind, grid=arrays.grid if arrays is not None else None, table=table,
                         write_vox=_vox_writer(_vox_path(base, request), spec, temporaries)
                         if "vox" in request.outputs else None, attribute_layers=guard.attribute_layers,
                         art=voxel_art.slab_art(art, soup, spec, request, table))  # issue 15

            arrays = yield Kernel(lambda progress, args=(base, soup, spec, request, vote, guard.split_layers),
                                  split=split: compute_group_split(*args, SlabVolume, progress=progress, **split),
                                  f"voxelizing {base} in slabs of {guard.split_layers} rows", a, b)
        arrays = yield Kernel(lambda progress, args=(arrays, soup, spec, request, art, table):  # issue 15
                              voxel_art.apply(*args, progress=progress), f"colours of {base}", b, b)
        warnings.extend(arrays.warnings)
        done.append((base, soup, spec, arrays, art))
    yield 0.95, "writing the outputs"  # the last place a cancel stops: nothing is written yet
    return [_write_group(base, soup, spec, arrays, request, art) for base, soup, spec, arrays, art in done]


def _with_art(request, art, soup):
    """*request* with its voxel art's memory (``art_cost.ArtCost``) for the guard's split plan."""
    if art is None or soup is None:
        return request
    from dataclasses import replace

    from ...kernels.voxelize.art_cost import ArtCost

    return replace(request, art=ArtCost.of(art.settings(), request.outputs, soup.triangles,
                                           getattr(soup, "material_index", None)))


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
        report_bake(self, result, "Voxelize")


def bake_frames_job(context, objects, request: Request, folder: Path, start: int, end: int):
    """One grid for the whole sequence (the union of every frame's bounds), then per
    frame: extract at that frame, voxelize (a ``Kernel``), write the density VDB into the
    cache; finally load the files as a Volume sequence. Resumes after the last complete
    frame; a cancel keeps the complete frames and puts the scene back on its frame."""
    return keep_frame_on_abort(context.scene, _bake_frames(context, objects, request, folder, start, end))


def _bake_frames(context, objects, request, folder, start, end):
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
    usable = backend.usable_bytes(np)
    xp = backend.xp()

    def frame_density(soup, progress):
        return volume_density(soup.vertices, soup.triangles, spec, request.mode, request.fill_holes, xp, progress)

    for frame in sorted(todo):
        a, b = 0.1 + 0.9 * (frame - start) / (end - start + 1), 0.1 + 0.9 * (frame - start + 1) / (end - start + 1)
        soup = scene_io.extract_triangles(objects, depsgraph, frame=frame)
        need = bake_estimate(spec, request, soup.vertices, soup.triangles, request.fill_holes)
        layers, note = bake_split(soup, spec, request, lo, hi, usable, need)
        if note:
            cache.note(f"Bake Frames: {note}")
        if layers is None:
            density = yield Kernel(lambda progress, soup=soup: frame_density(soup, progress), f"frame {frame}", a, b)
            write = lambda p, d=density: writeback.write_vdb(p, {"density": d}, spec)  # noqa: E731
        else:  # the frame does not fit whole: the same z-slabs as Voxelize's Volume split
            volume = yield Kernel(lambda progress, soup=soup, layers=layers: volume_density_split(
                soup, spec, request.mode, request.fill_holes, layers, xp, SlabVolume("density", spec), progress),
                f"frame {frame} in slabs of {layers} rows", a, b)
            write = lambda p, v=volume: v.write(p)  # noqa: E731
        cache.write_frame(frame, {".vdb": write})
        density = volume = write = None
        trim_heap()  # this frame's freed temporaries must not stay under the next frame's peak
        yield b, f"frame {frame}/{end}"
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
