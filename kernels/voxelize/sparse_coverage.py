"""Coverage of a sparse voxelization (issue 11; seed 004 §5.5): the Volume density of the
solid modes, the fraction of each voxel's 4×4×4 sub-voxel centres inside the mesh, as
8³ bricks, equal to the dense path's ``coverage.density(bits, spec, coverage(...))`` at
every voxel.

    result = voxelize(vertices, triangles, spec, "solid", sparse=True)
    grid = coverage_grid(vertices, triangles, result)   # channel "density", runs of 1.0
    coverage_at(grid, ijk)                               # the dense path's coverage there

How. The dense path voxelizes a grid 4× finer (same origin, a quarter of the voxel size)
and counts each voxel's 64 samples. Here that fine grid is voxelized sparse
(``voxelize(..., sparse=True)``: exactly the dense fine voxels, its interior as runs of
full bricks), so a coarse brick is 4 × 4 × 4 fine bricks and falls in one of three cases:

* every one of its 64 fine bricks lies in a fine run: all samples inside, density 1 —
  found from the runs alone, by a sweep along x over each coarse brick row's 16 fine
  rows (the coarse bricks that all 16 cover wholly), and kept as runs of 1.0;
* some of its fine bricks are stored, or lie in runs, but not all (or it holds a set
  voxel of the coarse result): counted sample by sample (``SparseVoxels.rows_at``: stored
  rows, full rows in runs, empty elsewhere), stored as a float brick;
* none: density 0 (background), unless a coarse voxel is set there.

Set voxels that cover nothing (thin sheets, lines) take 0.5, as ``coverage.density``
gives them, so they still show; a bit channel ``uncovered`` marks them, so that
``coverage_at`` still gives the coverage itself (0 there), the points' attribute.

Memory follows the fine surface (16× the coarse surface's bricks) and a chunk of
coarse bricks being counted (8 KiB of sample counts each), never the grid. Both backends:
every step is an ``xp`` array operation, the fine pass is the sparse voxelizer's own.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..grid.sparse import BRICK, SparseGrid, Tiles, Topology, brick_coords, brick_keys
from ..progress import report, scaled
from .coverage import SUB
from .sparse import merged_runs, unpack_rows
from .sparse_result import SparseVoxels

CHUNK = 1024  # coarse bricks counted at once: 8 MiB of nibble counts
FINE_BRICKS_PER_STORED = 24
_NIBBLES = np.array([[bin(b & 15).count("1"), bin(b >> 4).count("1")] for b in range(256)], np.uint8)
UNCOVERED = "uncovered"


class CoverageRefused(InputError):
    """The fine pass of the coverage does not fit (the sparse guard's refusal, reworded)."""


def fine_spec(spec: GridSpec) -> GridSpec:
    """The grid the samples are voxelized on: ``coverage.coverage_slabs``'s fine grid."""
    return GridSpec(spec.origin, spec.voxel_size / SUB, tuple(SUB * int(n) for n in spec.shape))


def fine_bytes(result: SparseVoxels, n_vertices: int, n_triangles: int) -> int:
    """Peak bytes of the fine pass, estimated from the coarse result before it runs
    (``sparse_guard.coverage_bytes``, the job's estimate counts the same): the fine
    surface at ``FINE_BRICKS_PER_STORED`` bricks per stored coarse brick (the surface's
    bricks grow 4× per doubling: 16× here, measured 16.3–16.6× on the bunny from 256³ to
    2048³, with margin) and the inside held as runs, which the surface bricks' cost covers."""
    from .sparse_guard import coverage_bytes

    return coverage_bytes(result.stored_bricks, n_vertices, n_triangles, result.xp)[0]


def fine_voxels(vertices, triangles, result: SparseVoxels, vote: bool = False, progress=None) -> SparseVoxels:
    """The sparse solid of the fine grid (runs kept, on *result*'s device), cut to its
    shape; ``CoverageRefused`` (naming the sampling) when its estimate does not fit."""
    from .sparse import voxelize_sparse
    from .sparse_result import clip_to_shape

    xp, fine = result.xp, fine_spec(result.spec)
    need, usable = fine_bytes(result, len(vertices), len(triangles)), backend.usable_bytes(xp)
    if need > usable:
        raise CoverageRefused(f"The smooth density samples every voxel 4×4×4 times: a sparse "
                              f"{'×'.join(map(str, fine.shape))} solid that needs about {backend.format_bytes(need)} "
                              f"of {'host' if xp is np else 'device'} memory but only {backend.format_bytes(usable)} "
                              "is usable")
    grid = voxelize_sparse(vertices, triangles, fine, "solid", vote=vote, xp=xp, progress=progress, tiles=True)
    return SparseVoxels(fine, clip_to_shape(grid, fine.shape))


def coverage_grid(vertices, triangles, result: SparseVoxels, *, vote: bool = False, progress=None,
                  chunk: int = CHUNK) -> SparseGrid:
    """A ``SparseGrid`` on *result*'s device whose float32 channel ``density`` is, at every
    voxel of *result*'s grid, ``coverage.density(bits, spec, coverage(...))`` of the dense
    path (background 0, runs of 1.0 in ``tiles["density"]``), and whose bit channel
    ``uncovered`` marks the set voxels that cover nothing (density 0.5 there)."""
    xp = result.xp
    fine = fine_voxels(vertices, triangles, result, vote, scaled(progress, 0.0, 0.7))
    full, partial = _run_cover(fine.runs, xp)
    coarse_runs = result.runs
    loose = _difference(coarse_runs, full, xp)  # coarse run bricks not wholly sampled inside
    explicit = _unique(xp, brick_keys(brick_coords(fine.grid.topology.keys, xp) // SUB, xp),
                       Tiles(partial, 1).keys(xp), result.grid.topology.keys, Tiles(loose, 1).keys(xp))
    runs = _difference(full, _unit_runs(explicit, xp), xp)
    keys, density, uncovered = [], [], []
    n = int(explicit.shape[0])
    for s in range(0, n, chunk):
        k = explicit[s:s + chunk]
        d, u = _counted(fine, result, k, xp)
        keep = (d.reshape(d.shape[0], -1) != 0).any(axis=1)
        keys.append(k[keep])
        density.append(d[keep])
        uncovered.append(u[keep])
        report(progress, 0.7 + 0.3 * min(n, s + chunk) / max(n, 1), "coverage")
    out = SparseGrid(Topology.of_sorted(xp.concatenate(keys) if keys else xp.zeros(0, xp.int64), xp),
                     result.grid.origin, result.grid.voxel_size)
    out.channels["density"] = xp.concatenate(density) if density else xp.zeros((0,) + (BRICK,) * 3, xp.float32)
    out.channels[UNCOVERED] = xp.concatenate(uncovered) if uncovered else xp.zeros((0, BRICK, BRICK), xp.uint8)
    out.backgrounds["density"], out.backgrounds[UNCOVERED] = 0.0, 0
    if runs.shape[0]:
        out.tiles["density"] = Tiles(runs, 1.0)
    report(progress, 1.0, "coverage")
    return out


def _counted(fine: SparseVoxels, result: SparseVoxels, keys, xp):
    """(density (n, 8, 8, 8) float32, uncovered bit rows (n, 8, 8)) of coarse bricks *keys*."""
    n = int(keys.shape[0])
    c = brick_coords(keys, xp) * SUB  # each coarse brick's first fine brick
    lz, ly, lx = (a.ravel() for a in xp.meshgrid(*(xp.arange(SUB),) * 3, indexing="ij"))
    sub = xp.stack([lx, ly, lz], axis=1)  # its 64 fine bricks, z-major
    rows = fine.rows_at(brick_keys((c[:, None, :] + sub[None]).reshape(-1, 3), xp))
    # a coarse voxel's 4 samples along x are a nibble of a fine row's byte: set samples per
    # nibble (n, fz, fy, fx, z, y, 2) → (n, 32 Z, 32 Y, 8 X) → 4 × 4 of them per coarse voxel
    nibbles = xp.asarray(_NIBBLES)[rows.reshape(n, SUB, SUB, SUB, BRICK, BRICK)]
    nibbles = nibbles.transpose(0, 1, 4, 2, 5, 3, 6).reshape(n, BRICK, SUB, BRICK, SUB, BRICK)
    counts = nibbles.sum(axis=(2, 4), dtype=xp.int32)
    cover = counts.astype(xp.float32) / np.float32(SUB ** 3)  # as coverage_slabs rounds it
    bits = unpack_rows(result.rows_at(keys), xp).astype(bool)
    uncovered = bits & (counts == 0)
    density = xp.where(uncovered, xp.float32(0.5), cover)  # coverage.density: thin sheets still show
    rows = (uncovered.astype(xp.uint8) << xp.arange(BRICK, dtype=xp.uint8)).sum(axis=3, dtype=xp.uint8)
    return density, rows


def coverage_at(grid: SparseGrid, ijk):
    """float32 coverage at voxels *ijk* ((m, 3), x y z) of a ``coverage_grid``: its
    density, 0 at the uncovered set voxels (the dense path's coverage there)."""
    xp = grid.xp
    ijk = xp.asarray(ijk).astype(xp.int64)
    keys = brick_keys(ijk // BRICK, xp)
    local = ijk % BRICK
    out = xp.zeros(ijk.shape[0], xp.float32)
    if grid.topology.count:
        slot = grid.topology.lookup(keys)
        s = xp.maximum(slot, 0)
        value = grid.channels["density"][s, local[:, 2], local[:, 1], local[:, 0]]
        bit = (grid.channels[UNCOVERED][s, local[:, 2], local[:, 1]] >> local[:, 0].astype(xp.uint8)) & 1
        out = xp.where((slot >= 0) & (bit == 0), value, out)
    tiles = grid.tiles.get("density")
    if tiles is not None and tiles.runs.shape[0]:
        runs = tiles.runs
        b = ijk // BRICK
        r = xp.searchsorted(brick_keys(runs[:, [0, 2, 3]], xp), keys, side="right") - 1
        rr = xp.maximum(r, 0)
        inside = (r >= 0) & (runs[rr, 2] == b[:, 1]) & (runs[rr, 3] == b[:, 2]) & (b[:, 0] < runs[rr, 1])
        out = xp.where(inside, xp.float32(tiles.value), out)
    return backend.to_numpy(out).astype(np.float32)


# ------------------------------------------------------------------ runs as intervals
def _run_cover(fine_runs, xp):
    """(full, partial) coarse runs from the fine runs: coarse bricks whose 64 fine bricks
    all lie in runs, and coarse bricks some run reaches but not wholly."""
    if fine_runs.shape[0] == 0:
        return (xp.zeros((0, 4), xp.int64),) * 2
    row = fine_runs[:, 2:4] // SUB
    whole = xp.concatenate([-(-fine_runs[:, :1] // SUB), fine_runs[:, 1:2] // SUB, row], axis=1)
    reach = xp.concatenate([fine_runs[:, :1] // SUB, -(-fine_runs[:, 1:2] // SUB), row], axis=1)
    whole = whole[whole[:, 1] > whole[:, 0]]
    seg, count = _sweep([whole, reach], xp)
    # a coarse brick row has 16 fine rows, each with disjoint runs: 16 wholly = every fine brick
    full = merged_runs([seg[count[:, 0] == SUB * SUB]], xp)
    partial = seg[(count[:, 1] > 0) & (count[:, 0] < SUB * SUB)]
    return full, partial


def _difference(a, b, xp):
    """The bricks of runs *a* outside runs *b*, as runs."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return a
    seg, count = _sweep([a, b], xp)
    return merged_runs([seg[(count[:, 0] > 0) & (count[:, 1] == 0)]], xp)


def _sweep(lists, xp):
    """Cut the brick rows of the runs of *lists* ((m, 4) int64 (bx0, bx1, by, bz) each)
    into segments where every list's count of runs is constant: (segments (s, 4), counts
    (s, len(lists))), segments covered by no run left out."""
    starts, deltas = [], []
    for i, r in enumerate(lists):
        for x, sign in ((r[:, 0], 1), (r[:, 1], -1)):
            starts.append(brick_keys(xp.stack([x, r[:, 2], r[:, 3]], axis=1), xp))
            d = xp.zeros((r.shape[0], len(lists)), xp.int64)
            d[:, i] = sign
            deltas.append(d)
    key = xp.concatenate(starts)
    order = xp.argsort(key)  # events at one x in any order: the count after the last of them is read
    key, count = key[order], xp.cumsum(xp.concatenate(deltas)[order], axis=0)  # rows balance: 0 between rows
    last = xp.flatnonzero(xp.concatenate([key[1:] != key[:-1], xp.ones(1, bool)]))  # the count after each x
    key, count = key[last], count[last]
    c = brick_coords(key, xp)
    same_row = xp.concatenate([(c[1:, 1] == c[:-1, 1]) & (c[1:, 2] == c[:-1, 2]), xp.zeros(1, bool)])
    keep = same_row & (count > 0).any(axis=1)
    nxt = xp.concatenate([c[1:, 0], xp.zeros(1, xp.int64)])
    seg = xp.stack([c[:, 0], nxt, c[:, 1], c[:, 2]], axis=1)
    return seg[keep], count[keep]


def _unit_runs(keys, xp):
    c = brick_coords(keys, xp)
    return xp.stack([c[:, 0], c[:, 0] + 1, c[:, 1], c[:, 2]], axis=1)


def _unique(xp, *keys):
    parts = [k for k in keys if k.shape[0]]
    return xp.unique(xp.concatenate(parts)) if parts else xp.zeros(0, xp.int64)
