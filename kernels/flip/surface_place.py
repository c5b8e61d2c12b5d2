"""The "lean" level set's binning placing the tags alone (issue 24, helper h17e;
``VOXFX_LEVEL_SET_PLACE``, kernels in ``cuda/flip_surface_place.cu``): "tags-plain" the default since
session 17, "tags" and "lean" A/B ways.
``surface_gpu._bricks_gpu`` calls it for the "lean" way with 32-bit tags.

"lean" (the default before session 17) places each point (a float4) and its tag at the point's slot: 20 bytes a
point scattered over the cells, and after the 8M dam break's splash the level set's place grew
0.54 → 1.15 ms a frame (H100, session 17). The ways here place the 4-byte tag alone and make the
points in the ordering (``surface_order_tags``: the particle's position mirrored by the tag's
combo, the same float operations as the place, so the same bits):

* "tags": the walls' images by warp groups too (``surface_count_grouped``,
  ``surface_place_tags``: a warp loops once over each combo some lane has and counts and places
  that combo's images one atomic a cell a warp);
* "tags-plain": the images one atomic each as lean (lean's ``surface_count_lean``,
  ``surface_place_tags_plain``) — the default: session 17's call 3 (H100, the three ways on each
  frame's same particles, one process) gave the binning's stages over frames 6–11 lean 11.85,
  tags 10.12, tags-plain 9.16 ms, frame 11's place 1.13 → 0.44 ms, φ the same bits in every frame;
  the surface GPU files passed with each tag way (46 and 40 passed).

The interior skip's cell flags are queued before the level set's one host read (every way:
``surface_gpu._bricks_gpu``; h17e's ways first did it).
The counts and cell starts are lean's; a cell's points are placed in another order, which the
ordering puts in tag order (and the crowded cells' sort, ``surface_gpu._order_crowded``): the
same list, φ the same bits (tests/unit/test_cuda_surface_place_host.py,
tests/gpu/test_flip_surface_place_gpu.py).

Measured on an NVIDIA H100 80GB HBM3 (driver 580.159.04; ``bench/level_set_place_call.sh``, the
8M Fast frames 6–11 with every way on each frame's particles in one process, device ms summed over
the six frames): place 4.85 (lean) → 2.44 (tags), order cells 1.28 → 1.54, the binning's stages
(set-up to order cells) 14.08 → 11.64, φ the same bits in all 12 frames; in separate processes
place 4.85 / 4.66 → 2.05 / 2.45. A third way, "grouped" (lean's points and tags with the images
by warp groups), was slower than lean (count 1.73 → 2.40, place 4.85 → 5.78: a warp's match
and shuffles a combo cost more than the atomics they save) and was removed after the call
(bench/RESULTS.md, h17e). A fourth, "tags-batch" (s23c: tags-plain with a particle's up to 7 images'
atomics issued together, then their stores), gave the 65M Fast frames 6–11's place 33.7 → 33.9 ms (H100, one
process, the same bits) and was removed after the call (bench/RESULTS.md, s23c).
"""

from __future__ import annotations

import numpy as np

from ..grid.launch import Kernels
from ..settings import env_choice
from .surface_gpu import _OPTIONS, _THREADS, _TILE_DEFINES

PLACE_WAYS = ("tags-plain", "tags", "lean")  # VOXFX_LEVEL_SET_PLACE (place_way); the first the default
GROUPED_COUNT = ("tags",)  # the ways counting by surface_count_grouped (the others: lean's count)
_K = Kernels("flip_surface_place.cu", _OPTIONS, _THREADS, defines=_TILE_DEFINES)


def place_way(given=None) -> str:
    """The lean level set's binning way (module text): *given*, else ``VOXFX_LEVEL_SET_PLACE``,
    else "lean" (``surface_gpu``'s own kernels)."""
    return env_choice("VOXFX_LEVEL_SET_PLACE", PLACE_WAYS, given)


def count(pos, n, wall_args, cell_args, counts, bad) -> None:
    """counts[cell] += the particles and their images per binning cell, bad[0] += the non-finite
    particles, the images by warp groups ("tags"): ``surface_count_lean``'s counts."""
    if n:
        _K.launch("surface_count_grouped", n, (pos, np.int64(n), *wall_args, *cell_args, counts, bad))


def place(way, pos, n, wall_args, cell_args, starts, fill, points, cp):
    """The tags (uint32, *points*) of the particles and their images in their cells' slots from
    *starts*, *fill* zeroed (any order within a cell): *way* "tags" or "tags-plain"."""
    tags = cp.empty(points, cp.uint32)
    if n:
        _K.launch("surface_place_tags" if way == "tags" else "surface_place_tags_plain", n, (
            pos, np.int64(n), *wall_args, *cell_args, starts, fill, tags))
    return tags


def order_tags(pos, radii, scalar, n, wall_args, cell_args, tags, starts, points, limit, cp):
    """The tag ways' ordering: every cell of at most *limit* points in tag order, each point made
    from its tag; a fuller cell's points left at their slots for the crowded sort."""
    out = cp.empty((points, 4), cp.float32)
    if points:
        lo_hi = wall_args[1:7]  # wall_args: (walls, lox, loy, loz, hix, hiy, hiz, reach)
        _K.launch("surface_order_tags", points, (pos, radii, np.int32(0 if scalar else 1), np.int64(n), *lo_hi,
                                                 tags, starts, np.int64(points), *cell_args, np.int32(limit), out))
    return out
