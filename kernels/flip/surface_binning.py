"""The GPU level set's binning steps (``surface_gpu._bricks_gpu``'s steps 1 and 3: the particles and their
images counted per binning cell, placed, each cell's points put in tag order; the crowded cells sorted
apart, ``_order_crowded``, and its CuPy kernels made ahead, ``_compile_crowded_order``). Moved out of
``surface_gpu`` (session 23: that module had grown to 585 lines), no behaviour changed: ``surface_gpu``
imports these names, so ``surface_gpu._order_crowded`` and the others are the same functions; their
settings (``sort_cell_max``, ``SORT_CELL_MAX``, ``STATS``, ``_K_LEAN``) are read from ``surface_gpu`` at each
call, so a test's or bench's setting there holds here too."""

from __future__ import annotations

import os

import numpy as np

_CROWDED_READY: set = set()  # (device, tag type) whose crowded-cell sort ran in this process (_compile_crowded_order)


def _gpu():
    """``surface_gpu`` (it imports this module: looked up at the call)."""
    from . import surface_gpu

    return surface_gpu


def _order_crowded(packed, tags, starts, ordered, cp, limit=None):
    """``surface_order_cells`` for the cells of more than *limit* (``SORT_CELL_MAX``) points,
    which it leaves alone: their points (contiguous per cell, any order within it) go to
    *ordered*'s same slots in tag order, by a stable sort of those points alone — (group,
    tag) — so the memory is theirs, not the whole list's (a sort of every point by (cell,
    tag) took ~4 GiB at 65M particles; issue 21 §6). Its steps are CuPy's own kernels, made
    the first time a process meets them: ``_compile_crowded_order`` runs it at the level
    set's first call."""
    sizes = starts[1:] - starts[:-1]
    crowded = cp.flatnonzero(sizes > (_gpu().sort_cell_max() if limit is None else limit))
    lengths = sizes[crowded].astype(cp.int64)
    del sizes
    ends = cp.cumsum(lengths)
    m = int(ends[-1])  # a host read, only when a cell is crowded
    stats = _gpu().STATS
    if stats is not None:
        stats.update(crowded_cells=int(crowded.size), crowded_points=m)
    group = cp.zeros(m, cp.int64)
    group[ends[:-1]] = 1
    group = cp.cumsum(group)  # each point's crowded cell (0 … k − 1)
    slot = starts[crowded].astype(cp.int64)[group] + cp.arange(m, dtype=cp.int64) - (ends - lengths)[group]
    order = cp.argsort(tags[slot], kind="stable")  # the tags are unique; then by group, stably
    order = order[cp.argsort(group[order], kind="stable")]
    ordered[slot] = packed[slot[order]]


CROWDED_LAYOUTS = ((1, 600), (2, 300), (600, 2))  # _compile_crowded_order: (crowded cells, points each)
_LAYOUT_CELLS = 2 ** 19  # binning cells of those layouts (> 512²: the two-level scan of flatnonzero)


def _compile_crowded_order(cp, tag_type) -> None:
    """Run ``_order_crowded`` once per device and tag type on small made-up cells, so that
    the CuPy kernels of its steps (element-wise, scan, take and scatter: 16 in the 8M dam
    break, whose set-up had used CuPy's scans already) are compiled or taken from CuPy's
    disk cache at the level set's first call, which makes its own kernels anyway, instead
    of in the frame where a binning cell first holds more than ``SORT_CELL_MAX`` points.
    Measured on an H100 80GB HBM3 (``bench/flip_sparse.py --row 8m --frames 10 --timing fast
    --level-set --trim --compile-log``, two calls on the same kind): frame 5's level set 905
    ms (NVRTC compiling them there) → 6 ms, no kernel first used after frame 0; frame 0's
    level set 96 → 121 ms with the disk cache warm (its 19 modules loaded in 30 ms), about
    +1.1 s with it cold (3.0 s in all, 1.9 without). CuPy (14.2) makes a kernel per argument
    types, array rank — an array of one entry is of rank 0 to it — and, in its scans
    (flatnonzero, cumsum), per size class (over 512 entries, over 512²): so the layouts
    (``CROWDED_LAYOUTS``, limit 0) have 1, 2 and 600 crowded cells among 2¹⁹, and 600 points
    or more crowded (a real call: over ``SORT_CELL_MAX``); one made-up layout of two cells
    left two kernels to frame 5 (242 ms). Arrays of more than 2³¹ bytes take CuPy's
    64-bit-index kernels, not made here. ``VOXFX_LEVEL_SET_COMPILE_AHEAD=0``: not run
    (the A/B baseline, a process each; tests/gpu/test_flip_surface_compile_ahead_gpu.py)."""
    key = (cp.cuda.runtime.getDevice(), np.dtype(tag_type).str)
    if key in _CROWDED_READY or os.environ.get("VOXFX_LEVEL_SET_COMPILE_AHEAD", "1").strip() == "0":
        return
    for cells, each in CROWDED_LAYOUTS:
        starts = np.zeros(_LAYOUT_CELLS + 1, np.int32)
        starts[1:cells + 1] = np.arange(1, cells + 1) * each  # the first *cells* cells hold *each*, the others none
        starts[cells + 1:] = cells * each
        packed = cp.zeros((cells * each, 4), cp.float32)
        _order_crowded(packed, cp.arange(cells * each, dtype=tag_type), cp.asarray(starts), cp.empty_like(packed), cp,
                       limit=0)
    _CROWDED_READY.add(key)


def _place_way(lean) -> str:
    """The binning's way (``surface_place.place_way``, ``VOXFX_LEVEL_SET_PLACE``) where the level set
    is "lean" with 32-bit tags, else "lean" (this module's kernels)."""
    if not lean:
        return "lean"
    from . import surface_place  # it imports surface_gpu

    return surface_place.place_way()


def _count(way, binning, pos, n, wall_args, cell_args, counts, bad) -> None:
    """Step 1 of ``_bricks_gpu``: the particles and their images counted per binning cell."""
    if way != "lean":
        from . import surface_place

        if way in surface_place.GROUPED_COUNT:
            surface_place.count(pos, n, wall_args, cell_args, counts, bad)
            return
    lean = binning is _gpu()._K_LEAN
    binning.launch("surface_count_lean" if lean else "surface_count", n, (pos, np.int64(n), *wall_args, *cell_args,
                                                                         counts, bad))


def _place(way, binning, pos, radii, scalar, n, wall_args, cell_args, starts, fill, points, cp):
    """Step 3's place: (points as float4, or None where *way* places the tags alone; tags)."""
    if way != "lean":
        from . import surface_place

        return None, surface_place.place(way, pos, n, wall_args, cell_args, starts, fill, points, cp)
    lean = binning is _gpu()._K_LEAN
    packed = cp.empty((points, 4), cp.float32)
    tags = cp.empty(points, cp.uint32 if lean else cp.int64)
    binning.launch("surface_place_lean" if lean else "surface_place", n, (
        pos, radii, np.int32(0 if scalar else 1), np.int64(n), *wall_args, *cell_args, starts, fill, packed, tags))
    return packed, tags


def _order_cells(way, binning, packed, tags, pos, radii, scalar, n, wall_args, cell_args, starts, points, fullest,
                 cp):
    """Step 3's order: every cell's points in tag order (float4 (points, 4)); cells of more
    than ``sort_cell_max()`` points sorted apart (``_order_crowded``)."""
    limit = _gpu().sort_cell_max()
    if way != "lean":  # the points made from their tags, a crowded cell's left at its slots and sorted in place
        from . import surface_place

        ordered = surface_place.order_tags(pos, radii, scalar, n, wall_args, cell_args, tags, starts, points, limit,
                                           cp)
        packed = ordered
    else:
        ordered = cp.empty_like(packed)
        binning.launch("surface_order_cells_lean" if binning is _gpu()._K_LEAN else "surface_order_cells", points, (
            packed, tags, starts, np.int64(points), *cell_args, np.int32(limit), ordered))
    if fullest > limit:  # crowded cells (a splash piled into a corner): sorted apart
        _order_crowded(packed, tags, starts, ordered, cp)
    return ordered
