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
from ...kernels.errors import BadGeometryError, InputError, VoxFXError
from ...kernels.grid import GridSpec, bitgrid
from ...kernels.voxelize import CPU_BYTES_PER_SURFACE_ITEM, estimate_bytes, voxelize
from ...kernels.voxelize.attributes import owner_triangles
from ...kernels.voxelize.blocks import exterior_faces
from ...kernels.voxelize.coverage import coverage, density
from ...kernels.voxelize.lines import voxelize_segments
from ...kernels.progress import report, scaled
from ...kernels.voxelize.topology import open_objects
from .. import materials, scene_io, writeback
from ..cache import MANIFEST, BakeCache, CacheError, blend_name, explain, resolve_folder
from ..jobs import BakeResult, JobOperator, Kernel, keep_frame_on_abort
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


# Host bytes of the operator's stages beyond the kernels' own formulas, per set voxel
# (N), exterior face (F) or grid voxel (G): counted from the arrays of each stage, then
# set from the peaks bench/memory.py measures (table and fit in bench/RESULTS.md).
BASE_BYTES = 6 << 20  # Python objects, first-use imports, allocator slack (RSS, not arrays)
ATTR_PER_VOXEL = 100  # owner_triangles + fill_along_rows: int64 ijk, linear, row, owner,
#                       prev/next scans, masks and gathers; the int32 material
POINTS_PER_VOXEL = 64  # coverage gather (int64 indices), float64 centres → float32,
#                        radius, and Blender's point cloud (position, radius, colour, 2 attributes)
COLOR_PER_VOXEL = 32  # RGBA float32 per voxel, in the job and in Blender
VDB_PER_VOXEL = 16  # the FloatGrid's active leaf voxels (value + masks) while writing
VDB_PER_GRID_VOXEL = 5  # isfinite mask and the [i, j, k]-ordered float32 copy
BLOCKS_PER_FACE = 150  # exterior_faces' keys, welding and quads, and Blender's mesh
VOX_PER_VOXEL = 104  # colours (float64 gathers → RGBA), palette indices, the chunk bytes

PER_VOXEL_OUTPUTS = {"points", "blocks", "vox"}  # outputs that need voxel lists and attributes
LAST_ESTIMATE: dict = {}  # the parts of the last estimate (bench/memory.py prints them)


def peak_estimate(spec, request, n_vertices, n_triangles, vote, voxels=None, faces=None, *, items=None,
                  n_segments=0, colors=False, xp=None) -> dict:
    """Peak host memory of ``voxelize_job`` for one group, in parts and ``total``.

    Without *voxels* (before voxelizing) only the voxelization is estimated; with the
    set-voxel count (and, for block output, the exterior face count) every stage is:
    each stage's peak is what stays alive from earlier stages plus its own temporaries,
    and the total is the largest stage (plus what earlier outputs left in Blender)."""
    from ...kernels.voxelize import blocks as blocks_mod
    from ...kernels.voxelize.coverage import coverage_bytes
    from ...kernels.voxelize.lines import estimate_bytes as segment_bytes

    xp = xp or np
    G, W = spec.voxel_count, bitgrid.nbytes(spec.shape)
    kernel = estimate_bytes(spec, request.mode, n_vertices, n_triangles, vote, xp=xp, items=items)
    if xp is not np:
        kernel = 0  # on the device: voxelize guards it there; the host gets the bit grid
    kernel += segment_bytes(spec, n_segments) if n_segments else 0
    parts = {"G": G, "N": voxels, "F": faces, "kernel": kernel}
    if voxels is None:
        parts["total"] = int(BASE_BYTES + W + kernel)
        return parts
    N = int(voxels)
    solid = request.mode in ("solid", "solid+surface") and n_triangles > 0
    outs = request.outputs
    color = COLOR_PER_VOXEL * N if colors else 0
    coords = bitgrid.coordinates_bytes(spec.shape, N)
    stages = {"count": bitgrid.count_bytes(spec.shape)}
    live = 0
    if outs & PER_VOXEL_OUTPUTS:
        live = 12 * N  # the coordinates, kept to the end
        stages["coordinates"] = coords
        batch = CPU_BYTES_PER_SURFACE_ITEM * (items.surface if items is not None else 0) if xp is np else 0
        # owner_triangles re-lists the voxels, re-runs the surface pass next to their int64
        # coordinates and linear indices (32 B), then fills the owners along rows
        stages["attributes"] = live + max(coords, 32 * N + batch, ATTR_PER_VOXEL * N)
        live += 4 * N + color  # material (and colour) per voxel
    cover = solid and ("volume" in outs or "points" in outs)
    if cover:
        stages["coverage"] = live + coverage_bytes(spec, n_vertices, n_triangles, vote, xp=xp)
        live += 4 * G
    kept = 0  # what finished outputs leave in Blender
    if "points" in outs:
        stages["points"] = live + kept + POINTS_PER_VOXEL * N
        kept += 24 * N + (16 * N if colors else 0)
    if "volume" in outs:
        dens = 0 if cover else 4 * G
        stages["volume"] = live + kept + dens + VDB_PER_GRID_VOXEL * G + VDB_PER_VOXEL * N
        live += dens
    if "blocks" in outs:
        F = int(faces if faces is not None else blocks_mod.max_face_count(spec, N))
        stages["blocks"] = live + kept + 10 * W + BLOCKS_PER_FACE * F  # + the exposed-face bit grids
        kept += 60 * F
    if "vox" in outs:
        stages["vox"] = live + kept + coords + VOX_PER_VOXEL * N
    parts.update(stages)
    parts["total"] = int(BASE_BYTES + W + max([kernel] + list(stages.values())))
    return parts


def _counts(soup, segments, spec, request, vote, xp):
    """(set voxels, exterior faces or None) of the job's grid at *spec*: the voxelization
    itself (its bit grid only), for the guard's search of the largest resolution."""
    from ...kernels.voxelize.blocks import count_exterior_faces

    verts = soup.vertices if soup is not None else np.zeros((0, 3), np.float32)
    tris = soup.triangles if soup is not None else np.zeros((0, 3), np.int32)
    bits = voxelize(verts, tris, spec, request.mode, vote=vote, xp=xp).bits
    if segments is not None:
        bits = voxelize_segments(segments.starts, segments.ends, spec, xp=np, words=bits)
    faces = count_exterior_faces(bits, spec) if "blocks" in request.outputs else None
    return bitgrid.count(bits), faces


class MemoryGuard:
    """The host-memory guard of one Voxelize group: the limit is read once, before the
    work (so earlier stages' arrays do not shrink it), and checked before voxelizing
    (the voxelization's own peak) and again with the exact voxel count before any
    per-voxel array exists. A refusal names the largest resolution that fits, searched
    with the same estimate and checked with exact counts at the sizes it names."""

    def __init__(self, soup, segments, request, vote, lo, hi, usable=None):
        self.soup, self.segments, self.request, self.vote = soup, segments, request, vote
        self.lo, self.hi = lo, hi
        self.xp = backend.xp()
        self.usable = backend.usable_bytes(np) if usable is None else int(usable)
        self.nv = len(soup.vertices) if soup is not None else 0
        self.nt = len(soup.triangles) if soup is not None else 0
        self.ns = len(segments.starts) if segments is not None else 0
        self.colors = soup is not None and soup.corner_colors is not None
        self._exact = {}
        self.split_layers = None  # rows per z-slab when the Volume job runs split (voxelize_split.py)
        self.split_note = ""

    @staticmethod
    def base_bytes() -> int:
        return BASE_BYTES

    def spec_at(self, resolution):
        return grid_for(self.lo, self.hi, Request(mode=self.request.mode, resolution=resolution))

    def estimate(self, spec, voxels=None, faces=None) -> dict:
        items = None
        if self.xp is np and self.soup is not None:
            from ...kernels.voxelize import work_items

            items = work_items(self.soup.vertices, self.soup.triangles, spec, self.request.mode)
        est = peak_estimate(spec, self.request, self.nv, self.nt, self.vote, voxels, faces, items=items,
                            n_segments=self.ns, colors=self.colors, xp=self.xp)
        LAST_ESTIMATE.clear()
        LAST_ESTIMATE.update(est)
        return est

    def check_before(self, spec) -> None:
        est = self.estimate(spec)
        need = est["total"]
        if self._splittable():  # the volume stage's dense arrays, whatever the voxel count
            need = max(need, self.estimate(spec, 0)["total"])
            LAST_ESTIMATE["whole"] = need
            if need > self.usable:
                self.plan_split(spec, need)
                return
        if need > self.usable:
            self._refuse(spec, need, exact=None)

    def check_after(self, spec, voxels, faces) -> None:
        est = self.estimate(spec, voxels, faces)
        if est["total"] > self.usable:
            if self._splittable():
                self.plan_split(spec, est["total"])
                return
            self._refuse(spec, est["total"], exact=(voxels, faces))

    # ------------------------------------------------------------- the split
    def _splittable(self) -> bool:
        from .voxelize_split import splittable

        return self.soup is not None and splittable(self.request, self.segments)

    def plan_split(self, spec, whole) -> None:
        """The whole Volume job does not fit: run it in z-slabs if a split fits (setting
        ``split_layers`` and the report line ``split_note``), else refuse naming the
        largest resolution whose split fits."""
        from ...kernels.voxelize import work_items
        from ...kernels.voxelize.slabs import SplitMesh, slab_ranges
        from .voxelize_split import choose_layers, largest_split_resolution, split_estimate

        mesh = SplitMesh(self.soup.vertices, self.soup.triangles, spec)
        items = work_items(self.soup.vertices, self.soup.triangles, spec, self.request.mode)
        layers = choose_layers(spec, self.request.mode, mesh, self.vote, self.usable, items, base=BASE_BYTES)
        grid = "×".join(map(str, spec.shape))
        if layers is None:
            info = backend._CPU.device_info()
            need = split_estimate(spec, self.request.mode, mesh, self.vote, 1, items, base=BASE_BYTES)
            what = (f"A {grid} volume needs {backend.format_bytes(whole)} of host memory whole and "
                    f"{backend.format_bytes(need)} split into z-slabs of one row, but only "
                    f"{backend.format_bytes(self.usable)} is usable ({backend.format_bytes(info.free_bytes)} free"
                    f"{backend.limit_note(info)})")
            r_now = max(spec.shape) - 2 if self.request.resolution is None else int(self.request.resolution)
            best = largest_split_resolution(self, max(r_now, 3))
            if best is None:
                raise InputError(f"{what}; not even the smallest grid fits")
            raise InputError(f"{what}. The largest resolution that fits is {best} "
                             f"(voxel size {self.spec_at(best).voxel_size:.4g} m)")
        need = split_estimate(spec, self.request.mode, mesh, self.vote, layers, items, base=BASE_BYTES)
        LAST_ESTIMATE.clear()
        LAST_ESTIMATE.update({"total": need, "whole": int(whole), "layers": layers})
        self.split_layers = layers
        self.split_note = (f"Volume split into {len(slab_ranges(spec.shape[2], layers))} z-slabs of {layers} rows: "
                           f"the whole {grid} grid needs {backend.format_bytes(whole)}, "
                           f"{backend.format_bytes(self.usable)} is usable, split needs {backend.format_bytes(need)}")

    # ------------------------------------------------------------- the search
    def _exact_need(self, r) -> int:
        spec = self.spec_at(r)
        if self.estimate(spec)["total"] > self.usable:  # cannot even voxelize it to count
            return self.estimate(spec)["total"]
        if r not in self._exact:
            self._exact[r] = _counts(self.soup, self.segments, spec, self.request, self.vote, self.xp)
        return self.estimate(spec, *self._exact[r])["total"]

    PROBE = 128  # exact counts at up to this resolution fit the growth model (cheap)
    VERIFY_VOXELS = 1 << 25  # check the size above the answer exactly while its grid is this small

    def largest_resolution(self, r_now, exact_now=None):
        """The largest resolution below *r_now* whose estimate fits, or None.

        Voxel and face counts grow like A r² + B r³ (a surface and a volume part): fitted
        on exact counts at two cheap resolutions, searched with the same estimate the
        guard uses, then the answer is checked with its exact count (stepping down until
        it fits: the size named is one that passes the guard and runs) and, while cheap,
        the next size up too (stepping up while it fits)."""
        from ...kernels.memory import largest_that_fits

        before = lambda r: self.estimate(self.spec_at(r))["total"]  # noqa: E731
        top = largest_that_fits(before, self.usable, 2, r_now - 1)
        if top is None:
            return None
        if exact_now is not None:
            self._exact[r_now] = exact_now
        r1 = min(top, self.PROBE)
        r0 = max(2, r1 // 2)
        for r in (r0, r1):
            self._exact_need(r)
        fit_n = _fit_growth(r0, self._exact[r0][0], r1, self._exact[r1][0])
        fit_f = None
        if self._exact[r1][1] is not None:
            fit_f = _fit_growth(r0, self._exact[r0][1], r1, self._exact[r1][1])
        model = lambda r: self.estimate(self.spec_at(r), fit_n(r), fit_f(r) if fit_f else None)["total"]  # noqa
        r = largest_that_fits(model, self.usable, 2, top) or 2
        while r >= 2 and self._exact_need(r) > self.usable:
            r -= max(1, r // 64)  # the fit was low: step down (about 1.5% a step)
        if r < 2:
            return None
        while (r + 1 <= top and self.spec_at(r + 1).voxel_count <= self.VERIFY_VOXELS
               and self._exact_need(r + 1) <= self.usable):
            r += 1
        return r

    def _refuse(self, spec, need, exact):
        info = backend._CPU.device_info()
        outputs = ", ".join(sorted(self.request.outputs))
        what = (f"A {'×'.join(map(str, spec.shape))} voxel grid with its outputs ({outputs}) "
                f"needs {backend.format_bytes(need)} of host memory but only {backend.format_bytes(self.usable)} is "
                f"usable ({backend.format_bytes(info.free_bytes)} free{backend.limit_note(info)})")
        r_now = max(spec.shape) - 2 if self.request.resolution is None else int(self.request.resolution)
        best = self.largest_resolution(max(r_now, 3), exact)
        if best is None:
            raise InputError(f"{what}; not even the smallest grid fits")
        fit = self.spec_at(best)
        raise InputError(f"{what}. The largest resolution that fits is {best} (voxel size {fit.voxel_size:.4g} m)")


def _fit_growth(r0, n0, r1, n1):
    """n(r) = A r² + B r³ (A, B ≥ 0) through (r0, n0) and (r1, n1): surface-like and
    volume-like parts of a voxel or face count. Returns a function of r."""
    if r1 == r0:
        return lambda r: int(n1 * (r / r1) ** 3)
    # n/r² = A + B r: a line through two points
    y0, y1 = n0 / r0 ** 2, n1 / r1 ** 2
    B = max(0.0, (y1 - y0) / (r1 - r0))
    A = max(0.0, y1 - B * r1)
    return lambda r: int(round(A * r * r + B * r ** 3))


def check_memory(spec, request, soup, segments, vote, lo, hi) -> "MemoryGuard":
    """Refuse before allocating (the voxelization's own peak), naming the largest
    resolution that fits; returns the guard, which ``voxelize_job`` asks again with the
    exact counts (``check_after``) before any per-voxel array exists."""
    guard = MemoryGuard(soup, segments, request, vote, lo, hi)
    guard.check_before(spec)
    return guard


def bake_estimate(spec, request, n_vertices, n_triangles, vote) -> int:
    """Peak host memory of one Bake Frames frame: the voxelization, then the float32
    density (coverage for solid modes; else the unpacked grid, its bool copy and the
    float32) and write_vdb's copies and tree (every voxel counted active)."""
    from ...kernels.voxelize.coverage import coverage_bytes

    G, W = spec.voxel_count, bitgrid.nbytes(spec.shape)
    kernel = estimate_bytes(spec, request.mode, n_vertices, n_triangles, vote, xp=np)
    solid = request.mode in ("solid", "solid+surface")
    dens = coverage_bytes(spec, n_vertices, n_triangles, vote, xp=np) if solid else W + 6 * G
    return int(W + max(kernel, dens, 4 * G + VDB_PER_GRID_VOXEL * G + VDB_PER_VOXEL * G))


@dataclass
class Result:
    name: str
    spec: GridSpec
    count: int
    objects: list = field(default_factory=list)
    files: list = field(default_factory=list)


def voxelize_job(context, objects, request: Request, warnings: list, frame=None):
    """Job generator: yields (fraction, message); returns the list of Results.

    Every group is read from the scene, then voxelized with all its output arrays (a
    ``Kernel``: on a worker thread in the interactive path, where Esc stops it at its
    next chunk); only once every group is done are the outputs written, in one step, so
    a cancel leaves the scene as it was."""
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
        lo, hi = _bounds(soup, segments)
        spec = grid_for(lo, hi, request)
        vote = request.fill_holes
        if soup is not None and request.mode in ("solid", "solid+surface") and not vote:
            open_names = open_objects(soup.triangles, soup.object_index, soup.object_names)
            if open_names:
                vote = True
                warnings.append(f"Not closed: {', '.join(open_names)}; solid voxels use the 3-axis vote")
        guard = check_memory(spec, request, soup, segments, vote, lo, hi)
        table = _material_table(soup)  # material colours: bpy, so read here
        a, b = 0.95 * (g_index + 0.1) / n, 0.95 * (g_index + 1) / n
        yield a, f"voxelizing {base} ({'×'.join(map(str, spec.shape))})"
        arrays = None
        if guard.split_layers is None:
            arrays = yield Kernel(lambda progress, args=(base, soup, segments, spec, request, vote, guard, table):
                                  compute_group(*args, progress=progress), f"voxelizing {base}", a, b)
        if guard.split_layers is not None:  # planned before voxelizing, or after counting (check_after)
            warnings.append(f"{base}: {guard.split_note}")
            arrays = yield Kernel(lambda progress, args=(base, soup, spec, request, vote, guard.split_layers):
                                  compute_group_split(*args, progress=progress),
                                  f"voxelizing {base} in slabs of {guard.split_layers} rows", a, b)
        warnings.extend(arrays.warnings)
        done.append((base, soup, spec, arrays))
    yield 0.95, "writing the outputs"  # the last place a cancel stops: nothing is written yet
    return [_write_group(base, soup, spec, arrays, request) for base, soup, spec, arrays in done]


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


@dataclass
class GroupArrays:
    """One group's voxels and the arrays of its outputs, before any is written."""

    count: int
    grid: object = None  # VoxelGrid
    ijk: object = None  # (N, 3) int32 set voxels
    material: object = None  # (N,) int32 index into the selection's materials, -1 for none
    rgba: object = None  # (N, 4) float32 colour per voxel (points, .vox)
    coverage: object = None  # (N,) float32 fraction inside (points)
    dense: object = None  # [k, j, i] float32 density (volume)
    volume: object = None  # the density built slab by slab (vdb_stream.SlabVolume), split jobs only
    blocks: object = None  # exterior faces (block mesh)
    warnings: list = field(default_factory=list)


def compute_group(base, soup, segments, spec, request, vote, guard=None, table=None, progress=None) -> GroupArrays:
    """Voxelize one group and compute its outputs' arrays; arrays only (no bpy), so it may
    run on a worker thread. Long kernels report per chunk into *progress* and stop at the
    next chunk when it answers False (``Cancelled``)."""
    xp = backend.xp()
    empty = np.zeros((0, 3), dtype=np.float32)
    verts = soup.vertices if soup is not None else empty
    tris = soup.triangles if soup is not None else np.zeros((0, 3), dtype=np.int32)
    table = _material_table_default(soup) if table is None else table
    grid = voxelize(verts, tris, spec, request.mode, vote=vote, xp=xp, progress=scaled(progress, 0.0, 0.5))
    bits = grid.bits
    if segments is not None:
        bits = voxelize_segments(segments.starts, segments.ends, spec, xp=np, words=bits,
                                 progress=scaled(progress, 0.5, 0.55))
        grid.bits = bits
    out = GroupArrays(grid.count(), grid=grid)
    if out.count == 0:
        out.warnings.append(f"{base}: no voxels (is the voxel size larger than the object?)")
        return out
    if guard is not None:  # the exact counts, before any per-voxel array exists
        faces = None
        if "blocks" in request.outputs:
            from ...kernels.voxelize.blocks import count_exterior_faces

            faces = count_exterior_faces(bits, spec)
        guard.check_after(spec, out.count, faces)
        if guard.split_layers is not None:  # the Volume job runs split instead (voxelize_job)
            return out
    if request.outputs & PER_VOXEL_OUTPUTS:  # a volume alone needs no per-voxel lists
        report(progress, 0.55, "voxel attributes")
        out.ijk = grid.coordinates()
        out.material, color = _voxel_attributes(soup, verts, tris, spec, bits, xp, len(out.ijk), table)
        if request.outputs & {"points", "vox"}:
            out.rgba = color if color is not None else _colors_of(table, out.material)
    solid_mode = request.mode in ("solid", "solid+surface")
    cover = None  # fraction of each voxel inside the mesh (solid modes only)
    if solid_mode and len(tris) and ("volume" in request.outputs or "points" in request.outputs):
        cover = coverage(verts, tris, spec, vote=vote, xp=xp, progress=scaled(progress, 0.6, 0.95))
    report(progress, 0.95, "outputs")
    if "points" in request.outputs:
        ijk = out.ijk
        out.coverage = cover[ijk[:, 2], ijk[:, 1], ijk[:, 0]] if cover is not None else np.ones(len(ijk), np.float32)
    if "volume" in request.outputs:
        # smooth density from the coverage (in place); set voxels wholly outside (thin
        # sheets) still show; slab by slab, no second dense grid
        out.dense = density(bits, spec, cover)
        cover = None
    if "blocks" in request.outputs:
        out.blocks = exterior_faces(grid.bits, spec).to_numpy()
    return out


def _write_group(base, soup, spec, arrays: GroupArrays, request) -> Result:
    """Write one group's outputs into the scene and files (main thread)."""
    result = Result(base, spec, arrays.count)
    if arrays.count == 0:
        return result
    ijk, material = arrays.ijk, arrays.material
    if "points" in request.outputs:
        # Cycles draws a point cloud with its first material only (5.0 ignores material_index),
        # so points carry their source's colour, and a selection of several materials gets a
        # first material that shows it (VoxFX Voxel Color); indices shift by one to match.
        several = soup is not None and (len(set(np.unique(material).tolist())) > 1 or
                                        (len(soup.materials) > 0 and (material < 0).any()))
        attrs = {"material_index": material + 1 if several else material, "coverage": arrays.coverage,
                 "color": arrays.rgba}
        obj = writeback.write_point_cloud(f"{base}_voxels", spec.centers(ijk), attrs,
                                          radius=np.full(len(ijk), 0.5 * spec.voxel_size, np.float32),
                                          collection=_collection())
        _copy_materials(soup, obj, first=materials.voxel_color() if several else None)
        result.objects.append(obj.name)
    if "volume" in request.outputs:
        path = _write_volume(resolve_folder(request.cache_dir) / "voxelize", _safe(base), arrays.dense, spec,
                             volume=arrays.volume)
        arrays.dense = arrays.volume = None
        obj = writeback.load_volume(f"{base}_volume", str(path), collection=_collection())
        if not obj.data.materials:
            obj.data.materials.append(materials.volume())
        result.objects.append(obj.name)
        result.files.append(str(path))
    if "blocks" in request.outputs or "vox" in request.outputs:
        _block_outputs(base, arrays, spec, soup, request, result)
    return result


def compute_group_split(base, soup, spec, request, vote, layers, progress=None) -> GroupArrays:
    """The Volume output of one group voxelized in z-slabs of *layers* rows into one
    density tree (``voxelize_split``); arrays only, written by ``_write_group``."""
    from .voxelize_split import voxelize_group_split

    count, volume = voxelize_group_split(base, soup, spec, request, vote, layers, progress)
    out = GroupArrays(count, volume=volume if count else None)
    if not count:
        out.warnings.append(f"{base}: no voxels (is the voxel size larger than the object?)")
    return out


def _write_volume(folder: Path, stem: str, dense, spec, volume=None) -> Path:
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
        if volume is not None:  # a tree built slab by slab (vdb_stream.SlabVolume)
            volume.write(path)
        else:
            writeback.write_vdb(path, {"density": dense}, spec)
    except VoxFXError as e:
        if isinstance(e.__cause__, OSError):
            raise CacheError(explain(e.__cause__, folder)) from e
        raise
    for entry in older:
        os.unlink(entry.path)
    return path


def _voxel_attributes(soup, verts, tris, spec, bits, xp, count, table):
    """Per set voxel: material index (into the combined material list) and RGBA colour
    (None: the material's, from *table*)."""
    if soup is None or len(tris) == 0:
        return np.full(count, -1, np.int32), None
    owner = owner_triangles(verts, tris, spec, bits, xp=xp)
    ok = owner >= 0
    material = np.where(ok, soup.material_index[np.maximum(owner, 0)], -1).astype(np.int32)
    color = None
    if soup.corner_colors is not None and any(soup.colored_objects or ()):
        # Sources with a colour attribute give it; the others their material's colour.
        color = _colors_of(table, material)
        from_attribute = ok & np.asarray(soup.colored_objects, bool)[soup.object_index[np.maximum(owner, 0)]]
        corner = soup.corner_colors[np.maximum(owner, 0)[from_attribute]]
        color[from_attribute] = corner.mean(axis=1).astype(np.float32)
    return material, color


def _block_outputs(base, arrays: GroupArrays, spec, soup, request, result):
    if "blocks" in request.outputs:
        blocks = arrays.blocks
        face_material = np.maximum(arrays.material[blocks.voxel_of_face], 0)
        obj = writeback.write_mesh(f"{base}_blocks", blocks.vertices, blocks.quads,
                                   material_indices=face_material, collection=_collection())
        _copy_materials(soup, obj)
        result.objects.append(obj.name)
    if "vox" in request.outputs:
        from ..vox_export import write_vox

        path = vox_output_path(request.vox_path)
        if not request.combine:
            path = path.with_name(f"{path.stem}_{_safe(base)}{path.suffix}")
        write_vox(path, arrays.ijk, spec.shape, colors=arrays.rgba)
        result.files.append(str(path))


def vox_output_path(text: str) -> Path:
    """The absolute .vox path for the setting *text*; '//' needs a saved .blend."""
    if not text:
        raise InputError("Set a .vox file path to export MagicaVoxel")
    if text.startswith("//") and not bpy.data.filepath:
        raise InputError(f"The .vox path '{text}' is relative to the .blend file, which is not saved yet: "
                         "save the file or choose an absolute path")
    return Path(os.path.abspath(bpy.path.abspath(text)))


def _material_table(soup):
    """RGBA per material of the selection (``materials.surface_color``), then Blender's
    default grey for voxels without one: read from ``bpy`` on the main thread."""
    table = _material_table_default(soup)
    if soup:
        for i, name in enumerate(soup.materials):
            mat = bpy.data.materials.get(name)
            if mat is not None:
                table[i] = materials.surface_color(mat)
    return table


def _material_table_default(soup):
    table = np.empty((len(soup.materials) + 1 if soup else 1, 4), np.float32)
    table[:] = materials.DEFAULT_COLOR
    return table


def _colors_of(table, material):
    """RGBA per voxel from its material's row of *table* (the last row without one)."""
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
    need = bake_estimate(spec, request, len(soup.vertices), len(soup.triangles), request.fill_holes)
    usable = backend.usable_bytes(np)
    if need > usable:
        from ...kernels.memory import largest_that_fits

        trial = lambda r: bake_estimate(grid_for(lo, hi, Request(mode=request.mode, resolution=r)), request,  # noqa
                                        len(soup.vertices), len(soup.triangles), request.fill_holes)
        best = largest_that_fits(trial, usable, 2, max(spec.shape))
        raise InputError(f"Baking a {'×'.join(map(str, spec.shape))} volume needs {backend.format_bytes(need)} per "
                         f"frame but only {backend.format_bytes(usable)} of host memory is usable"
                         + (f". The largest resolution that fits is {best}" if best else ""))
    xp = backend.xp()
    def frame_density(soup, progress):
        if request.mode in ("solid", "solid+surface"):
            return coverage(soup.vertices, soup.triangles, spec, vote=request.fill_holes, xp=xp, progress=progress)
        grid = voxelize(soup.vertices, soup.triangles, spec, request.mode, xp=xp, progress=progress)
        return grid.dense().astype(np.float32)

    for frame in sorted(todo):
        a, b = 0.1 + 0.9 * (frame - start) / (end - start + 1), 0.1 + 0.9 * (frame - start + 1) / (end - start + 1)
        soup = scene_io.extract_triangles(objects, depsgraph, frame=frame)
        density = yield Kernel(lambda progress, soup=soup: frame_density(soup, progress), f"frame {frame}", a, b)
        cache.write_frame(frame, {".vdb": lambda p, d=density: writeback.write_vdb(p, {"density": d}, spec)})
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
