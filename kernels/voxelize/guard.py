"""The Voxelize job's host-memory guard (issue 21 §6): the peak of every stage of a job
(voxelization, attributes, coverage, each output; ``job_memory``) from measured per-item
costs, checked before allocating against the real limit (``kernels.memory``), and the
search for the largest resolution that fits, or the z-slab split that makes a Volume job
fit (``split_plan``). Arrays and arithmetic only: the add-on's operator asks it."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import bitgrid
from . import voxelize
from .job_memory import (ATTR_PER_VOXEL, BASE_BYTES, BLOCKS_PER_FACE, COLOR_PER_VOXEL,  # noqa: F401
                         PER_VOXEL_OUTPUTS, POINTS_PER_VOXEL, VDB_PER_GRID_VOXEL, VDB_PER_VOXEL, VOX_PER_VOXEL,
                         bake_estimate, peak_estimate)
from .lines import voxelize_segments
from .request import Request, grid_for

# A .vox file's MAIN chunk gives its children's size as an int32: 4 bytes a voxel, 16 MiB
# kept for the models' headers, the scene graph and the palette
VOX_MAX_VOXELS = (2 ** 31 - 1 - (1 << 24)) // 4
LAST_ESTIMATE: dict = {}  # the parts of the last estimate (bench/memory.py prints them)


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
