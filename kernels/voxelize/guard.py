"""The Voxelize job's host-memory guard (issue 21 §6): the peak of every stage of a job
(voxelization, attributes, coverage, each output) from measured per-item costs, checked
before allocating against the real limit (``kernels.memory``), and the search for the
largest resolution that fits, or the z-slab split that makes a Volume job fit
(``split_plan``). Arrays and arithmetic only: the add-on's operator asks it."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import bitgrid
from . import CPU_BYTES_PER_SURFACE_ITEM, estimate_bytes, voxelize
from .lines import voxelize_segments
from .request import Request, grid_for


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
# A solid's density (its coverage) is constant inside, and copyFromArray makes tiles of
# constant 8³ blocks: its tree is the leaves the surface passes through
# (``split_plan.tree_bytes``), not 16 B per set voxel (2.9× the growth at 512³ before).
BLOCKS_PER_FACE = 150  # exterior_faces' keys, welding and quads, and Blender's mesh
VOX_PER_VOXEL = 104  # colours (float64 gathers → RGBA), palette indices, the chunk bytes

# A .vox file's MAIN chunk gives its children's size as an int32: 4 bytes a voxel, 16 MiB
# kept for the models' headers, the scene graph and the palette
VOX_MAX_VOXELS = (2 ** 31 - 1 - (1 << 24)) // 4
PER_VOXEL_OUTPUTS = {"points", "blocks", "vox"}  # outputs that need voxel lists and attributes
LAST_ESTIMATE: dict = {}  # the parts of the last estimate (bench/memory.py prints them)


def peak_estimate(spec, request, n_vertices, n_triangles, vote, voxels=None, faces=None, *, items=None,
                  n_segments=0, colors=False, xp=None, area=None) -> dict:
    """Peak host memory of ``voxelize_job`` for one group, in parts and ``total``.

    Without *voxels* (before voxelizing) only the voxelization is estimated; with the
    set-voxel count (and, for block output, the exterior face count) every stage is:
    each stage's peak is what stays alive from earlier stages plus its own temporaries,
    and the total is the largest stage (plus what earlier outputs left in Blender).
    *area*: the mesh's surface in voxel units² (bounds a solid volume's VDB tree)."""
    from ..voxelize import blocks as blocks_mod
    from .coverage import coverage_bytes
    from .lines import estimate_bytes as segment_bytes
    from .split_plan import tree_bytes

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
        tree = VDB_PER_VOXEL * N
        if cover and area is not None and not n_segments:  # leaves at the surface only
            tree = min(tree, tree_bytes(area, n_triangles))
        stages["volume"] = live + kept + dens + VDB_PER_GRID_VOXEL * G + tree
        live += dens
    if "blocks" in outs:
        F = int(faces if faces is not None else blocks_mod.max_face_count(spec, N))
        stages["blocks"] = live + kept + 10 * W + BLOCKS_PER_FACE * F  # + the exposed-face bit grids
        kept += 60 * F
    if "vox" in outs:
        stages["vox"] = live + kept + coords + VOX_PER_VOXEL * N
    art = getattr(request, "art", None)  # voxel art (art_cost.ArtCost), after the outputs' arrays
    if art is not None and art.colors and outs & {"blocks", "vox", "points"}:
        from .slab_outputs import block_output_bytes
        from .art_cost import art_whole_bytes

        F = int(faces if faces is not None else blocks_mod.max_face_count(spec, N)) if "blocks" in outs else 0
        stages["art"] = live + kept + block_output_bytes(F)[0] + art_whole_bytes(art, N, F)
    parts.update(stages)
    parts["total"] = int(BASE_BYTES + W + max([kernel] + list(stages.values())))
    return parts


def _counts(soup, segments, spec, request, vote, xp):
    """(set voxels, exterior faces or None) of the job's grid at *spec*: the voxelization
    itself (its bit grid only), for the guard's search of the largest resolution."""
    from .blocks import count_exterior_faces

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
        self._area = None  # the mesh's area in m² (a volume's tree), computed when first needed
        self._exact = {}
        self.split_layers = None  # rows per z-slab when the job runs split (split_plan.py)
        self.split_kind = None  # "volume" (voxelized in slabs), "attributes" (Blocks/.vox from the bit grid) or "mixed"
        self.attribute_layers = None  # rows per z-slab of a "mixed" split's Blocks/.vox pass
        self._split_rows = None  # per-row counts of a Blocks/.vox (or mixed) split that did not fit with one row
        self.split_note = ""

    @staticmethod
    def base_bytes() -> int:
        return BASE_BYTES

    def spec_at(self, resolution):
        return grid_for(self.lo, self.hi, Request(mode=self.request.mode, resolution=resolution))

    def items_at(self, spec):
        """The CPU batches' work items at *spec* (None on the GPU or without triangles)."""
        if self.xp is not np or self.soup is None:
            return None
        from . import work_items

        return work_items(self.soup.vertices, self.soup.triangles, spec, self.request.mode)

    def estimate(self, spec, voxels=None, faces=None) -> dict:
        items = self.items_at(spec)
        area = None
        if "volume" in self.request.outputs and self.nt:
            if self._area is None:
                from .split_plan import triangle_area

                self._area = triangle_area(self.soup.vertices, self.soup.triangles)
            area = self._area / spec.voxel_size ** 2
        est = peak_estimate(spec, self.request, self.nv, self.nt, self.vote, voxels, faces, items=items,
                            n_segments=self.ns, colors=self.colors, xp=self.xp, area=area)
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

    def check_after(self, spec, voxels, faces, bits=None) -> None:
        """With the exact counts (and the bit grid *bits*, which a Blocks/.vox split plans
        its slabs from)."""
        self.check_vox_count(spec, voxels)
        est = self.estimate(spec, voxels, faces)
        if est["total"] > self.usable:
            if self._splittable():
                self.plan_split(spec, est["total"])
                return
            if bits is not None and self._attributes_splittable() and self.plan_attribute_split(
                    spec, est["total"], bits, faces):
                return
            if bits is not None and self._mixed_splittable() and self.plan_mixed_split(
                    spec, est["total"], bits, faces):
                return
            self._bits = bits  # for the refusal's note on what fits split (``_points_hint``)
            try:
                self._refuse(spec, est["total"], exact=(voxels, faces))
            finally:
                self._bits = None  # a refusal kept for later must not hold the grid

    def check_vox_count(self, spec, voxels) -> None:
        """Refuse a .vox of more voxels than its 32-bit chunk sizes hold, naming the largest
        resolution whose exact count fits (``split_search.largest_vox_resolution``): for
        the dense job (``check_after``) and the sparse one (``sparse_outputs``), whatever
        else it outputs."""
        if "vox" not in self.request.outputs or voxels <= VOX_MAX_VOXELS:
            return
        from .split_search import largest_vox_resolution

        r_now = max(spec.shape) - 2 if self.request.resolution is None else int(self.request.resolution)
        best = largest_vox_resolution(self, r_now, voxels, VOX_MAX_VOXELS)  # exact counts at best, best + 1
        choose = f"Resolution {best} or lower" if best else "a larger voxel size"
        raise InputError(f"A MagicaVoxel file holds at most {VOX_MAX_VOXELS:,} voxels (its chunk sizes are "
                         f"32-bit) but this {'×'.join(map(str, spec.shape))} grid has {int(voxels):,}: choose "
                         f"{choose}, or the Block mesh or Volume output")

    def _vox_over(self, voxels) -> bool:
        """Whether a .vox of *voxels* is over its format's bound (then no memory makes the
        job run: the size searches treat it as not fitting)."""
        return "vox" in self.request.outputs and voxels is not None and voxels > VOX_MAX_VOXELS

    # ------------------------------------------------------------- the split
    def _splittable(self) -> bool:
        from .split_plan import splittable

        return self.soup is not None and splittable(self.request, self.segments)

    def _attributes_splittable(self) -> bool:
        from .split_plan import attributes_splittable

        return self.soup is not None and len(self.soup.triangles) > 0 and attributes_splittable(self.request)

    def _mixed_splittable(self) -> bool:
        from .split_plan import mixed_splittable

        return self.soup is not None and len(self.soup.triangles) > 0 and mixed_splittable(self.request,
                                                                                            self.segments)

    def plan_mixed_split(self, spec, whole, bits, faces) -> bool:
        """Volume with Blocks/.vox does not fit whole: keep the bit grid once, write the
        Volume slab by slab from it, then the Blocks/.vox attributes slab by slab (setting
        ``split_layers`` (the Volume's rows per slab), ``attribute_layers``, ``split_kind``
        "mixed" and ``split_note``); False when either pass does not fit with one row."""
        from . import work_items
        from .slab_outputs import row_counts
        from .slabs import SplitMesh, slab_ranges
        from .split_plan import choose_mixed_layers, mixed_split_estimate

        mesh = SplitMesh(self.soup.vertices, self.soup.triangles, spec)
        items = work_items(self.soup.vertices, self.soup.triangles, spec, self.request.mode)
        rows = row_counts(np.asarray(bits), "blocks" in self.request.outputs)
        self._sample_colors(spec, bits, mesh, rows)
        layers = choose_mixed_layers(spec, self.request, mesh, self.vote, rows, faces or 0, self.usable, items,
                                     base=BASE_BYTES)
        if layers is None:
            self._split_rows = rows  # the refusal searches the largest size that runs split from these
            return False
        need = mixed_split_estimate(spec, self.request, mesh, self.vote, rows, faces or 0, *layers, items,
                                    base=BASE_BYTES)
        LAST_ESTIMATE.clear()
        LAST_ESTIMATE.update({"total": need, "whole": int(whole), "layers": layers[0],
                              "attribute_layers": layers[1]})
        (self.split_layers, self.attribute_layers), self.split_kind = layers, "mixed"
        what = " and ".join(n for k, n in (("blocks", "Block mesh"), ("vox", "MagicaVoxel"))
                            if k in self.request.outputs)
        nz = spec.shape[2]
        self.split_note = (f"Volume split into {len(slab_ranges(nz, layers[0]))} z-slabs of {layers[0]} rows, "
                           f"then {what} voxel attributes into {len(slab_ranges(nz, layers[1]))} of {layers[1]}: "
                           f"the whole {'×'.join(map(str, spec.shape))} grid needs {backend.format_bytes(whole)}, "
                           f"{backend.format_bytes(self.usable)} is usable, split needs {backend.format_bytes(need)}")
        return True

    def _sample_colors(self, spec, bits, mesh, rows) -> None:
        """The voxel art's .vox colours estimated from a sample of the grid (texture colours:
        ``art_cost.ArtCost.sampled``) before the split is planned."""
        from dataclasses import replace

        art = getattr(self.request, "art", None)
        if art is not None and hasattr(art, "sampled"):
            self.request = replace(self.request, art=art.sampled(spec, np.asarray(bits), mesh, rows[0]))

    def plan_attribute_split(self, spec, whole, bits, faces) -> bool:
        """The Blocks/.vox attributes do not fit for the whole grid: compute them z-slab by
        z-slab from the bit grid (``slab_outputs``) if a slab fits (setting
        ``split_layers``, ``split_kind`` and ``split_note``); False when not even one row does."""
        from .slab_outputs import row_counts
        from .slabs import SplitMesh, slab_ranges
        from .split_plan import attribute_split_estimate, choose_attribute_layers

        mesh = SplitMesh(self.soup.vertices, self.soup.triangles, spec)
        rows = row_counts(np.asarray(bits), "blocks" in self.request.outputs)
        self._sample_colors(spec, bits, mesh, rows)
        layers = choose_attribute_layers(spec, self.request, mesh, rows, faces or 0, self.usable, base=BASE_BYTES)
        if layers is None:
            self._split_rows = rows  # the refusal searches the largest size that runs split from these
            return False
        need = attribute_split_estimate(spec, self.request, mesh, rows, faces or 0, layers, base=BASE_BYTES)
        LAST_ESTIMATE.clear()
        LAST_ESTIMATE.update({"total": need, "whole": int(whole), "layers": layers})
        self.split_layers, self.split_kind = layers, "attributes"
        what = " and ".join(n for k, n in (("blocks", "Block mesh"), ("vox", "MagicaVoxel"))
                            if k in self.request.outputs)
        slabs = len(slab_ranges(spec.shape[2], layers))
        self.split_note = (f"{what} voxel attributes split into {slabs} z-slabs of "
                           f"{layers} rows: the whole {'×'.join(map(str, spec.shape))} grid needs "
                           f"{backend.format_bytes(whole)}, {backend.format_bytes(self.usable)} is usable, split needs "
                           f"{backend.format_bytes(need)}")
        return True

    def plan_split(self, spec, whole) -> None:
        """The whole Volume job does not fit: run it in z-slabs if a split fits (setting
        ``split_layers`` and the report line ``split_note``), else refuse naming the
        largest resolution whose split fits."""
        from . import work_items
        from .slabs import SplitMesh, slab_ranges
        from .split_plan import choose_layers, largest_split_resolution, split_estimate

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
        self.split_layers, self.split_kind = layers, "volume"
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
        if self._vox_over(self._exact[r][0]):  # a .vox with a point cloud: the file's bound too
            return 1 << 62
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
        from ..memory import largest_that_fits

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
        def model(r):
            if self._vox_over(fit_n(r)):
                return 1 << 62
            return self.estimate(self.spec_at(r), fit_n(r), fit_f(r) if fit_f else None)["total"]

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
        how = ""
        if self._attributes_splittable() or self._mixed_splittable():  # smaller sizes may run split
            from .split_search import largest_split_resolution

            best = largest_split_resolution(self, max(r_now, 3), exact, getattr(self, "_split_rows", None))
            how = ", whole or split into z-slabs,"
        else:
            best = self.largest_resolution(max(r_now, 3), exact)
        hint = self._points_hint(spec, exact, getattr(self, "_bits", None), r_now)
        if best is None:
            raise InputError(f"{what}; not even the smallest grid fits{hint}")
        fit = self.spec_at(best)
        raise InputError(f"{what}. The largest resolution that fits{how} is {best} (voxel size "
                         f"{fit.voxel_size:.4g} m){hint}")

    def _points_hint(self, spec, exact, bits, r_now) -> str:
        """For a point cloud (every voxel a point in Blender at once, never split): the
        outputs that do fit at this resolution split into z-slabs, if any."""
        if "points" not in self.request.outputs or self.soup is None or not len(self.soup.triangles):
            return ""
        from . import work_items
        from .slab_outputs import row_counts
        from .slabs import SplitMesh
        from .split_plan import attribute_split_estimate, choose_layers

        mesh = SplitMesh(self.soup.vertices, self.soup.triangles, spec)
        items = work_items(self.soup.vertices, self.soup.triangles, spec, self.request.mode)
        fits = []
        if choose_layers(spec, self.request.mode, mesh, self.vote, self.usable, items, base=BASE_BYTES):
            fits.append("Volume")
        if bits is not None and exact is not None:
            rows = row_counts(np.asarray(bits), True)
            blocks = Request(mode=self.request.mode, outputs={"blocks"})
            if attribute_split_estimate(spec, blocks, mesh, rows, int(rows[1].sum()), 1,
                                        base=BASE_BYTES) <= self.usable:
                fits.append("Block mesh")
        if not fits:
            return ""
        return (f"; at resolution {r_now} a point cloud cannot fit (every voxel is a point in Blender), but the "
                f"{' and '.join(fits)} output{'s' if len(fits) > 1 else ''} fit{'' if len(fits) > 1 else 's'} "
                f"split into z-slabs")


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


def bake_estimate(spec, request, vertices, triangles, vote) -> int:
    """Peak host memory of one Bake Frames frame (``outputs.volume_density``, then
    ``write_vdb``). Solid modes: the coverage (its float32 result and one slab), then
    write_vdb's copies (``VDB_PER_GRID_VOXEL``) and the tree. Other modes: the
    voxelization (the frame's real work items), the bit grid unpacked (uint8 then bool)
    and its float32, then the same writing. The tree is a leaf per 8³ block the surface
    passes through (``split_plan.tree_bytes``, as the unsplit guard counts it): a solid's
    inside is tiles, a surface's density is 0 away from it."""
    from . import work_items
    from .coverage import coverage_bytes
    from .split_plan import tree_bytes, triangle_area

    G, W = spec.voxel_count, bitgrid.nbytes(spec.shape)
    nv, nt = len(vertices), len(triangles)
    tree = min(VDB_PER_VOXEL * G, tree_bytes(triangle_area(vertices, triangles) / spec.voxel_size ** 2, nt))
    writing = 4 * G + VDB_PER_GRID_VOXEL * G + tree
    if request.mode in ("solid", "solid+surface"):
        return int(BASE_BYTES + max(coverage_bytes(spec, nv, nt, vote, xp=np), writing))
    items = work_items(vertices, triangles, spec, request.mode)
    kernel = estimate_bytes(spec, request.mode, nv, nt, vote, xp=np, items=items)
    return int(BASE_BYTES + W + max(kernel, 2 * G + 4 * G, writing))


def bake_split(soup, spec, request, lo, hi, usable, need):
    """``(None, "")`` when a Bake Frames frame fits whole (*need*: ``bake_estimate``), else
    the rows per z-slab of the Volume split and its report line: the same plan as
    Voxelize's (``MemoryGuard.plan_split``), which refuses in one line naming the largest
    resolution whose split fits when not even one row does."""
    if need <= usable:
        LAST_ESTIMATE.clear()
        LAST_ESTIMATE.update({"total": int(need), "whole": int(need)})
        return None, ""
    guard = MemoryGuard(soup, None, request, request.fill_holes, lo, hi, usable=usable)
    guard.plan_split(spec, need)
    return guard.split_layers, guard.split_note
