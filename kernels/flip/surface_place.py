"""The "lean" level set's binning with the walls' mirror images by warp groups (issue 24, helper
h17e; ``VOXFX_LEVEL_SET_PLACE``, kernels in ``cuda/flip_surface_place.cu``), an A/B way off by
default. ``surface_gpu._bricks_gpu`` calls it for the "lean" way with 32-bit tags.

"lean" (the default) counts and places each particle's own point by warp groups and its images
one atomic each, in a loop over the 26 image combos that a warp runs whole whenever one of its
lanes lies within reach of a wall. After the 8M dam break's splash the liquid lies along the
walls and piles into corners (cells of 1,249–2,843 points, bench/RESULTS.md i24f), and the level
set's count and place grow: place 0.54 → 1.15 ms from frame 7 to frame 10 (H100, session 17).
The ways here:

* "grouped": a warp loops once over each combo some lane has (the OR of the lanes' combo words,
  mostly 1, 3 or 7 combos along a floor, an edge or a corner) and counts and places that
  combo's images by warp groups (one atomic a cell a warp, the group's slots consecutive);
* "tags": "grouped" placing the tags alone (4 bytes a point scattered, not a 16-byte point
  and its tag), the ordering making each point from its tag (``surface_order_tags``: the
  particle's position mirrored by the tag's combo, the same float operations as the place).

Both also queue the interior skip's cell flags before the level set's one host read, not after
it (the device otherwise idles while the host launches them). The counts and the cell starts are
lean's; a cell's points are placed in another order, which the ordering puts in tag order (and
the crowded cells' sort, ``surface_gpu._order_crowded``): the same list, φ the same bits
(tests/unit/test_cuda_surface_host.py, tests/gpu/test_flip_surface_place_gpu.py).
"""

from __future__ import annotations

import numpy as np

from ..grid.launch import Kernels
from ..settings import env_choice
from .surface_gpu import _OPTIONS, _THREADS, _TILE_DEFINES

PLACE_WAYS = ("lean", "grouped", "tags")  # VOXFX_LEVEL_SET_PLACE (place_way); the first the default
_K = Kernels("flip_surface_place.cu", _OPTIONS, _THREADS, defines=_TILE_DEFINES)


def place_way(given=None) -> str:
    """The lean level set's binning way (module text): *given*, else ``VOXFX_LEVEL_SET_PLACE``,
    else "lean" (``surface_gpu``'s own kernels)."""
    return env_choice("VOXFX_LEVEL_SET_PLACE", PLACE_WAYS, given)


def count(pos, n, wall_args, cell_args, counts, bad) -> None:
    """counts[cell] += the particles and their images per binning cell, bad[0] += the non-finite
    particles: ``surface_count_lean``'s counts."""
    if n:
        _K.launch("surface_count_grouped", n, (pos, np.int64(n), *wall_args, *cell_args, counts, bad))


def place(way, pos, radii, scalar, n, wall_args, cell_args, starts, fill, points, cp):
    """(points as float4 or None for "tags", 32-bit tags): the particles and their images in their
    cells' slots from *starts*, *fill* zeroed (any order within a cell)."""
    tags = cp.empty(points, cp.uint32)
    if way == "tags":
        if n:
            _K.launch("surface_place_tags", n, (pos, np.int64(n), *wall_args, *cell_args, starts, fill, tags))
        return None, tags
    packed = cp.empty((points, 4), cp.float32)
    if n:
        _K.launch("surface_place_grouped", n, (pos, radii, np.int32(0 if scalar else 1), np.int64(n), *wall_args,
                                               *cell_args, starts, fill, packed, tags))
    return packed, tags


def order_tags(pos, radii, scalar, n, wall_args, cell_args, tags, starts, points, limit, cp):
    """"tags"' ordering: every cell of at most *limit* points in tag order, each point made from
    its tag; a fuller cell's points left at their slots for the crowded sort."""
    out = cp.empty((points, 4), cp.float32)
    if points:
        lo_hi = wall_args[1:7]  # wall_args: (walls, lox, loy, loz, hix, hiy, hiz, reach)
        _K.launch("surface_order_tags", points, (pos, radii, np.int32(0 if scalar else 1), np.int64(n), *lo_hi,
                                                 tags, starts, np.int64(points), *cell_args, np.int32(limit), out))
    return out
