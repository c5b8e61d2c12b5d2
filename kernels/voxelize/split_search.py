"""The resolution a Voxelize refusal names, where the job's limit is not only the memory of
the whole job (issue 21 §6): the largest resolution whose Blocks/.vox (or Volume with
Blocks/.vox) job runs, whole or split into z-slabs, and the largest whose .vox file fits
the format's 32-bit chunk sizes.

Both are searched the way ``MemoryGuard.largest_resolution`` searches the unsplit size:
the counts the answer depends on (set voxels, exterior faces, and for a split the most
set voxels and faces in one z row) are fitted on exact counts at two resolutions (the
refused one, already voxelized, and a cheap probe), the fitted estimate is bisected,
and the answer is then checked with exact counts at that size: stepping down while it
fails, up while the next size passes. So the size named is one that passes the same
checks the job makes, not a scaling of the refused size.
"""

from __future__ import annotations

import numpy as np

from ..grid import bitgrid
from ..memory import largest_that_fits

PROBE = 128  # the cheap resolution the growth is fitted on (with the refused one)
COUNT_SLAB_VOXELS = 1 << 22  # voxels per z-slab while counting (bit-identical to the whole voxelization)


def fit_powers(r0, n0, r1, n1, p: int, q: int):
    """n(r) = A rᵖ + B r^q (A, B ≥ 0, p < q) through (r0, n0) and (r1, n1); a function of r."""
    if r1 == r0:
        return lambda r: int(round(n1 * (r / r1) ** q))
    # n / rᵖ = A + B r^(q−p): a line in r^(q−p)
    x0, x1 = float(r0) ** (q - p), float(r1) ** (q - p)
    y0, y1 = n0 / float(r0) ** p, n1 / float(r1) ** p
    B = max(0.0, (y1 - y0) / (x1 - x0))
    A = max(0.0, y1 - B * x1)
    return lambda r: int(round(A * float(r) ** p + B * float(r) ** q))


def _exact(guard, r):
    """(set voxels, exterior faces or None, (voxels per z row, faces per z row or None)) at
    resolution *r*, from the job's own voxelization at that size (cached on the guard);
    None where that voxelization does not fit in the memory free now."""
    from .. import backend
    from ..memory import trim_heap
    from . import voxelize
    from .lines import voxelize_segments
    from .slab_outputs import row_counts
    from .slabs import voxelize_split

    cache = guard.__dict__.setdefault("_exact_rows", {})
    if r not in cache:
        soup, segments, spec = guard.soup, guard.segments, guard.spec_at(r)
        try:
            if guard.xp is np:  # in z-slabs: counting needs the bit grid, not the whole voxelization's peak
                nx, ny, _ = spec.shape
                bits = voxelize_split(soup.vertices, soup.triangles, spec, guard.request.mode,
                                      max(1, COUNT_SLAB_VOXELS // (nx * ny)), vote=guard.vote)
            else:
                bits = np.asarray(backend.to_numpy(voxelize(soup.vertices, soup.triangles, spec, guard.request.mode,
                                                            vote=guard.vote, xp=guard.xp).bits))
        except backend.DeviceMemoryError:  # the process has less free than when the guard read its limit
            cache[r] = None
            return None
        if segments is not None:  # as the job does (``guard._counts``)
            bits = voxelize_segments(segments.starts, segments.ends, spec, xp=np, words=bits)
        rows = row_counts(bits, "blocks" in guard.request.outputs)
        faces = int(rows[1].sum()) if rows[1] is not None else None
        cache[r] = (bitgrid.count(bits), faces, rows)
        del bits
        trim_heap()  # a probe's temporaries must not shrink what the next probe (or the job) may use
    return cache[r]


def split_need(guard, spec, voxels, faces, rows) -> int:
    """Host bytes the job at *spec* needs to run at all: the voxelization, then the whole
    job or, if that does not fit, its split with one row per slab (the least the split
    plan can take: ``plan_attribute_split``, ``plan_mixed_split``)."""
    from . import work_items
    from .guard import BASE_BYTES, VOX_MAX_VOXELS
    from .slabs import SplitMesh
    from .split_plan import attribute_split_estimate, mixed_split_estimate

    if "vox" in guard.request.outputs and voxels > VOX_MAX_VOXELS:
        return 1 << 62  # no .vox file holds it, whatever the memory
    before = guard.estimate(spec)["total"]
    whole = guard.estimate(spec, voxels, faces)["total"]
    if whole <= guard.usable:
        return max(before, whole)
    mesh = SplitMesh(guard.soup.vertices, guard.soup.triangles, spec)
    if "volume" in guard.request.outputs:
        items = work_items(guard.soup.vertices, guard.soup.triangles, spec, guard.request.mode)
        split = mixed_split_estimate(spec, guard.request, mesh, guard.vote, rows, faces or 0, 1, 1, items,
                                     base=BASE_BYTES)
    else:
        split = attribute_split_estimate(spec, guard.request, mesh, rows, faces or 0, 1, base=BASE_BYTES)
    return max(before, split)


def largest_split_resolution(guard, r_now: int, exact_now=None, rows_now=None):
    """The largest resolution below *r_now* at which the guard's Blocks/.vox or mixed job
    runs (``split_need`` fits), or None. *exact_now*: (voxels, faces) at *r_now* and
    *rows_now* its per-row counts (``row_counts``), when the refusal came after
    voxelizing; else the growth is fitted on two cheap probes."""
    before = lambda r: guard.estimate(guard.spec_at(r))["total"]  # noqa: E731
    top = largest_that_fits(before, guard.usable, 2, r_now - 1)
    if top is None:
        return None
    if exact_now is not None and rows_now is not None:
        guard.__dict__.setdefault("_exact_rows", {})[r_now] = (int(exact_now[0]), exact_now[1], rows_now)
        r0, r1 = max(2, min(PROBE, r_now // 2, top)), r_now
    else:
        r1 = min(top, PROBE)
        r0 = max(2, r1 // 2)

    def peaks(r):  # (voxels, faces, most voxels in a row, most faces in a row)
        n, f, (vrows, frows) = _exact(guard, r)
        return (n, f or 0, int(vrows.max()) if len(vrows) else 0,
                int(frows.max()) if frows is not None and len(frows) else 0)

    if _exact(guard, r0) is None or _exact(guard, r1) is None:  # no room even to probe
        return None
    a, b = peaks(r0), peaks(r1)
    # a surface grows like r², a solid like r³; a z row of them like r and r²
    fits = [fit_powers(r0, x, r1, y, *powers) for x, y, powers in zip(a, b, ((2, 3), (2, 3), (1, 2), (1, 2)))]
    faces_wanted = "blocks" in guard.request.outputs

    def model(r):
        n, f, v_row, f_row = (fit(r) for fit in fits)
        rows = (np.array([v_row], np.int64), np.array([f_row], np.int64) if faces_wanted else None)
        return split_need(guard, guard.spec_at(r), n, f if faces_wanted else None, rows)

    def exact(r):
        spec = guard.spec_at(r)
        if guard.estimate(spec)["total"] > guard.usable:  # cannot even voxelize it to count
            return guard.estimate(spec)["total"]
        counted = _exact(guard, r)
        if counted is None:
            return 1 << 62
        return split_need(guard, spec, *counted)

    r = largest_that_fits(model, guard.usable, 2, top) or 2
    while r >= 2 and exact(r) > guard.usable:
        r -= max(1, r // 64)  # the fit was low: step down (about 1.5% a step)
    if r < 2:
        return None
    while r + 1 <= top and guard.spec_at(r + 1).voxel_count <= guard.VERIFY_VOXELS and exact(r + 1) <= guard.usable:
        r += 1
    return r


def largest_vox_resolution(guard, r_now: int, voxels_now: int, most: int):
    """The largest resolution below *r_now* whose grid has at most *most* set voxels (a
    .vox file's bound), checked exactly: it has at most *most*, and the next one up more
    (or is *r_now*). None when not even the smallest does."""
    counts = {r_now: int(voxels_now)}

    def exact(r):
        if r not in counts:
            counted = _exact(guard, r)
            counts[r] = counted[0] if counted is not None else 1 << 62  # not countable here: too large
        return counts[r]

    r1 = max(2, min(PROBE, r_now // 2))
    fit = fit_powers(r1, exact(r1), r_now, counts[r_now], 2, 3)
    r = largest_that_fits(fit, most, 2, r_now - 1) or 2
    while r >= 2 and exact(r) > most:
        r -= max(1, r // 256)
    if r < 2:
        return None
    while r + 1 < r_now and exact(r + 1) <= most:
        r += 1
    return r
