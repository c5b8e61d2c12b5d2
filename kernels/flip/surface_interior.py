"""The particle level set's interior skip (issue 24; ``VOXFX_LEVEL_SET_INTERIOR``, on by default
since the fourteenth session, "0" off): nodes deep inside the liquid get φ = −band without a gather.

Deep inside the liquid a Zhu–Bridson φ is about −r̄ (about −½ voxel), not a distance, and
meshing needs only the zero crossing and its neighbourhood; OpenVDB stores a level set's
inside as −background tiles (``addon/vdb_files._vdb_grid`` keeps |φ| ≥ band inactive). Yet
the interior nodes are most of a liquid's nodes, and each cost a full gather (~650 particle
tests a node at 8M, ``surface_gpu``'s module text). The rule, from the binning cells the
gather uses anyway (``surface_gpu._cell_grid``: edge max(R/2, voxel)) and their point counts
(the particles and, closed against the walls, their mirror images):

* a cell is **full** when it holds at least ``full`` = ⌈``INTERIOR_FILL``·(edge/r)³⌉
  points (r the largest particle radius, the rest spacing of ``surface_radii``: a quarter
  of a cell at rest, 2 of the 8 a cell of edge 2r holds; half (4) lost most interior cells
  within 4 substeps of a dam break, whose cells' counts scatter, on the CPU at 64³ and on
  the H100 at 65M);
* a node is **interior** when every cell of the cube of ``reach`` cells each side of its own
  cell is full (cells beyond the cell grid are not), ``reach`` = ⌈(R + (S + 1)·h)/edge⌉
  (S the smoothing steps, h the voxel; + 0.01 for the gather's cull slack): then every node
  within S + 1 voxels of it (per axis) gathers from full cells only (its R-sphere's cells,
  ``node_phi``'s ranges, lie in the cube);
* an interior node's φ is −band, no gather; every other node's gather is untouched.

A skip changes φ at the interior nodes and, through S smoothing steps, at nodes within S
voxels of them; the mesh needs the nodes beside a sign change. So every node the skip
changes, and its neighbours, sits in a neighbourhood of full cells — liquid on every side
for at least R around it, where φ is the deep-liquid value −r̄ and no zero crossing lies.
What counts cannot prove: a contrived arrangement (every cell's points pushed to one face)
can move x̄ by r̄ and put a zero crossing among full cells; the tests check on FLIP-like
liquids (seeded balls and pools, the dam break) that the signs, the nodes beside a
crossing and the liquid volume are unchanged, and that skipping a node next to the surface
(a mutation) is caught.

Measured on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CuPy 14.2; one call, the skip off and
on alternating in one process, ``bench/flip_level_set.py --modes lean --region-bounds 1
--interior 0 1``) with the first build's rule — a full cell then held half the rest count
(4 of 8) and the erosion used 64-bit indices:

| scene | off ms (gather) | on ms (gather, cells) | VDB active voxels off → on | surface |
|---|---|---|---|---|
| 8M dam break, 24 substeps | 2.72 (1.40) | 2.97 (1.40, 0.27) | 1,198,550 → 1,198,338 | the same |
| 65M dam break, 4 substeps | 15.66 (10.48) | 14.48 (9.17, 0.31) | 8,831,646 → 7,318,379 | the same |

("the same": the same signs on every node and the same bits beside every sign change.)
``bench/flip_sparse.py --row 8m --frames 10 --timing fast --level-set --trim``: 5–10 ms of
level set a frame either way (frames 2–9). At 8M after 0.2 s the liquid is a layer too thin
(and its cells' counts too scattered) for a cube of 5 cells of full cells: nothing to skip,
and the three erosion passes cost 0.27 ms. Since then a full cell holds a quarter (2 of 8:
on the CPU's 64³ dam break the skip then changes 40–50% of the liquid's nodes at every
check to 24 substeps, the surface kept, where half lost more than half of them within 4
substeps) and the passes use 32-bit indices (the host harness gives the same cells). Timed so
(fourteenth session, H100, lean, off → on, the surface the same): 8M after 4 substeps 2.43 →
2.19 ms (VDB active voxels 1,161,077 → 415,148), after 24 2.79 → 2.62 ms (1,198,549 →
576,496); 65M after 4 substeps 18.22 → 12.63 ms (8,800,625 → 1,833,029): on by default.

The CPU reference (``interior_nodes_cpu``) and the GPU (``surface_gpu``: the counts of its
binning, ``cuda/flip_surface_interior.cu``'s erosion, the gathers' check) put the points in
the same cells (float32 ⌊(x − o)/edge⌋ as ``cell_of``) and the nodes in theirs (``cell_key`` of
the node's float32 centre), so they skip the same nodes; skipped nodes are −band on both.
"""

from __future__ import annotations

import math

import numpy as np

from ..settings import env_choice

INTERIOR_FILL = 0.25  # a full cell holds at least this fraction of the (edge / r)³ points a cell holds at rest
REACH_SLACK = 0.01  # cells: the gather's cull slack (voxfx_surface.cuh SLACK) and float rounding of u


def interior_skip(given=None) -> bool:
    """Whether the level set skips interior nodes: *given*, else ``VOXFX_LEVEL_SET_INTERIOR``
    ("1" on, the default since the fourteenth session; "0" off; ``settings.env_choice``: anything
    else is refused). Measured on an H100 (``bench/flip_level_set.py --interior 0 1``, lean): 8M
    after 4 substeps 2.43 → 2.19 ms, after 24 2.79 → 2.62 ms; 65M 18.22 → 12.63 ms; the surface
    the same, the VDB's active voxels 1.16M → 0.42M, 1.20M → 0.58M, 8.80M → 1.83M."""
    if given is not None:
        return bool(given)
    return env_choice("VOXFX_LEVEL_SET_INTERIOR", ("0", "1"), default="1") == "1"


def interior_rule(spec, R: float, r_max: float, smooth_iterations: int) -> tuple:
    """(full, reach): the points a full cell holds at least and the cube's half-width in
    cells (module text) for *spec*'s nodes, kernel radius *R*, largest radius *r_max*."""
    from .surface_gpu import _cell_grid

    edge = _cell_grid(spec, R)[1]
    full = max(1, int(math.ceil(INTERIOR_FILL * (edge / float(r_max)) ** 3 - 1e-9)))
    reach = int(math.ceil((float(R) + (int(smooth_iterations) + 1) * spec.voxel_size) / edge + REACH_SLACK))
    return full, reach


def eroded(full, reach: int, axis: int):
    """*full* (bool, cells [k, j, i]) where every cell within *reach* along *axis* (the
    array's axis) is full; cells beyond the array are not."""
    out = full.copy()
    v, f = np.moveaxis(out, axis, 0), np.moveaxis(full, axis, 0)
    n = v.shape[0]
    for s in range(1, reach + 1):
        if s >= n:
            v[...] = False
            break
        v[:-s] &= f[s:]
        v[n - s:] = False
        v[s:] &= f[:-s]
        v[:s] = False
    return out


def interior_cells_cpu(points, spec, R, rule):
    """(nz, ny, nx) over the binning cells of *spec*: True where the cell's cube of
    *rule*'s reach is full of *points* (float32 (N, 3), finite)."""
    from .surface_gpu import _cell_grid

    full, reach = rule
    co, edge, counts_shape = _cell_grid(spec, R)
    f = np.float32
    inv = f(1.0 / edge)
    key = np.zeros(len(points), np.int64)
    inside = np.ones(len(points), bool)
    for axis in (2, 1, 0):  # (k·cy + j)·cx + i
        c = np.floor((points[:, axis] - f(co[axis])) * inv)
        inside &= (c >= 0) & (c < counts_shape[axis])
        key = key * counts_shape[axis] + np.where(inside, c, 0).astype(np.int64)
    cx, cy, cz = counts_shape
    counts = np.bincount(key[inside], minlength=cx * cy * cz).reshape(cz, cy, cx)
    cells = counts >= full
    for axis in range(3):
        cells = eroded(cells, reach, axis)
    return cells


def node_cells(spec, R):
    """Per axis (x, y, z) the binning cell of each node's float32 centre (as ``cell_key``)."""
    from .surface import _node_coordinate
    from .surface_gpu import _cell_grid

    co, edge, _ = _cell_grid(spec, R)
    f = np.float32
    inv = f(1.0 / edge)
    return [np.floor((_node_coordinate(np.arange(n), spec.origin[a], spec.voxel_size, np) - f(co[a])) * inv)
            .astype(np.int64) for a, n in enumerate(spec.shape)]


def interior_nodes_cpu(points, spec, R, rule):
    """(nz, ny, nx) bool: the interior nodes of *spec* (module text) for *points*."""
    cells = interior_cells_cpu(points, spec, R, rule)
    ci, cj, ck = node_cells(spec, R)
    return cells[np.ix_(ck, cj, ci)]
