"""Voxelize a box of the grid at a time (issue 21 §6): z-slabs whose memory is bounded by
the slab, not the grid, and whose union is the unsplit result bit for bit.

    mesh = SplitMesh(vertices, triangles, spec)          # voxel units, once
    for k0, k1, bits in voxelize_slabs(mesh, "solid", layers=64):
        ...                                               # bits: rows k0..k1 of the grid

Why the union is exact: every triangle keeps the coordinates of the whole grid (voxel
units from the grid's own origin, never a per-slab origin), the setup and its rounding
bounds are those of the whole grid, and a box only narrows which columns and depths are
evaluated (``surface_voxels_cpu(box=…)``, ``flip_starts_cpu(box=…)``). So every voxel
is decided by the same float operations as without a box. Parity is accumulated along
rows: along x (the solid) a row lies in one z-slab whole; along z (the vote's third
pass) the parity of the rows below a slab is *carried* from the slab before, and
crossings below the slab are dropped rather than recounted.

Only triangles that can reach a box are passed to it: their touched range per axis, and
for the parity passes the range where a crossing can land (the plane's height at a
column centre, with a bound on its rounding: a triangle nearly parallel to the rows may
land its crossing far from itself, exactly as the unsplit pass does, so it is passed to
every box its bound reaches). ``voxelize_box`` takes any integer box, so a sparse
(brick) voxelizer can call it per brick; ``voxelize_slabs`` is the z-slab driver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backend
from ..grid import GridSpec, bitgrid
from ..progress import report, scaled
from .solid import majority_vote_cpu, solid_voxels_cpu
from .surface import surface_voxels_cpu
from .triangles import check_inputs, to_voxel_units

CHUNK = 1 << 16  # triangles per pass while measuring ranges
CROSSING_BOUND = 2.0 ** -40  # ≥ 2⁹ times the rounding of a crossing's height (see _crossing_reach)
RANGE_BYTES_PER_TRIANGLE = 4 * 3 * 8 + 8  # the four (T, 3) range arrays and the triangle index


@dataclass
class SplitMesh:
    """A mesh in the voxel units of the whole grid, with each triangle's reach per axis:
    ``near`` = [⌊min⌋ − 1, ⌈max⌉ + 1] (every voxel or column centre it touches lies
    within), ``cross`` = where a parity crossing along that axis can land (empty when the
    triangle is parallel to the axis: it has no crossings)."""

    spec: GridSpec
    pv: np.ndarray  # (V, 3) float64 voxel units of the whole grid
    triangles: np.ndarray  # (T, 3) int64
    near_lo: np.ndarray  # (T, 3) float64
    near_hi: np.ndarray
    cross_lo: np.ndarray
    cross_hi: np.ndarray

    def __init__(self, vertices, triangles, spec: GridSpec):
        vertices = np.asarray(backend.to_numpy(vertices))
        triangles = np.asarray(backend.to_numpy(triangles)).astype(np.int64, copy=False)
        check_inputs(vertices, triangles)
        self.spec = spec
        self.pv = to_voxel_units(vertices, spec.origin, spec.voxel_size)
        self.triangles = triangles
        T = len(triangles)
        self.near_lo, self.near_hi = np.empty((T, 3)), np.empty((T, 3))
        self.cross_lo, self.cross_hi = np.empty((T, 3)), np.empty((T, 3))
        extent = float(max(spec.shape))
        for t0 in range(0, T, CHUNK):
            v = self.pv[triangles[t0:t0 + CHUNK]]  # (t, 3 corners, 3 axes)
            lo, hi = v.min(axis=1), v.max(axis=1)
            self.near_lo[t0:t0 + CHUNK] = np.floor(lo) - 1
            self.near_hi[t0:t0 + CHUNK] = np.ceil(hi) + 1
            delta = _crossing_reach(v, extent)
            with np.errstate(invalid="ignore"):
                self.cross_lo[t0:t0 + CHUNK] = np.where(np.isnan(delta), np.inf, np.floor(lo - delta) - 1)
                self.cross_hi[t0:t0 + CHUNK] = np.where(np.isnan(delta), -np.inf, np.ceil(hi + delta) + 1)

    def nbytes(self) -> int:
        return self.pv.nbytes + self.triangles.nbytes + 4 * self.near_lo.nbytes

    def for_surface(self, lo, hi):
        """Triangles whose touched box meets the box [lo, hi)."""
        return np.flatnonzero(((self.near_hi >= lo) & (self.near_lo < hi)).all(axis=1))

    def for_parity(self, axis: int, lo, hi, carried: bool):
        """Triangles a parity pass along *axis* needs for the box: columns meeting it
        across the axis, crossings before its end (and, when the parity before the box is
        *carried* in, not before its start: those are in the carry)."""
        others = [a for a in range(3) if a != axis]
        ok = ((self.near_hi[:, others] >= lo[others]) & (self.near_lo[:, others] < hi[others])).all(axis=1)
        ok &= self.cross_lo[:, axis] < hi[axis]
        if carried and lo[axis] > 0:
            ok &= self.cross_hi[:, axis] >= lo[axis]
        return np.flatnonzero(ok)


def _crossing_reach(v, extent):
    """Per triangle and axis a, how far beyond the triangle's own range along a its
    parity crossing q = (n·v0 − n_b c_b − n_c c_c) / n_a can land (NaN where n_a = 0 as
    the solid pass computes it: no crossings). The numerator's rounding, and the
    distance of the rounded normal's plane from the corners, are each below a few ulps
    of Σ (|n_k| + err_k)(R + 1), R the largest coordinate involved."""
    e0, e1 = v[:, 1] - v[:, 0], v[:, 2] - v[:, 1]
    n = np.stack([e0[:, 1] * e1[:, 2] - e0[:, 2] * e1[:, 1],
                  e0[:, 2] * e1[:, 0] - e0[:, 0] * e1[:, 2],
                  e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]], axis=1)
    err = np.stack([np.abs(e0[:, 1] * e1[:, 2]) + np.abs(e0[:, 2] * e1[:, 1]),
                    np.abs(e0[:, 2] * e1[:, 0]) + np.abs(e0[:, 0] * e1[:, 2]),
                    np.abs(e0[:, 0] * e1[:, 1]) + np.abs(e0[:, 1] * e1[:, 0])], axis=1)
    R = np.maximum(np.abs(v).max(axis=(1, 2)), extent) + 1.0
    scale = CROSSING_BOUND * ((np.abs(n) + err).sum(axis=1) * R)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = scale[:, None] / np.abs(n) + 1.0
    return np.where(n == 0, np.nan, delta)


def voxelize_box(mesh: SplitMesh, lo, hi, mode: str, *, vote: bool = False, carry=None, want_carry=False,
                 progress=None):
    """The packed bit grid of the box [lo, hi) (integer voxel corners of ``mesh.spec``,
    hi exclusive), equal to that box of ``voxelize`` on the whole grid.

    Solid modes with *vote*: *carry* (bool [y, x] over the box) is the z parity of the
    rows below the box, as the box below returned it; without it the triangles below
    are evaluated again. With *want_carry* returns ``(bits, carry for the box above)``.
    *progress* hears the passes' batches and may cancel (``kernels.progress``).
    """
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    both = mode == "solid+surface"
    solid_part = scaled(progress, 0.0, 0.5 if both else 1.0) if progress else None
    surface_part = scaled(progress, 0.5 if both else 0.0, 1.0) if progress else None
    shape = mesh.spec.shape
    box = (lo, hi)
    tri = mesh.triangles
    bits = top = None
    if mode in ("solid", "solid+surface"):
        if vote:
            passes = [tri[mesh.for_parity(a, lo, hi, carried=(a == 2 and carry is not None))] for a in range(3)]
            bits, top = majority_vote_cpu(mesh.pv, tri, shape, solid_part, box=box, carry=carry, meshes=passes)
        else:
            bits = solid_voxels_cpu(mesh.pv, tri[mesh.for_parity(0, lo, hi, carried=False)], shape, solid_part,
                                    box=box)
    if mode != "solid":
        surf = surface_voxels_cpu(mesh.pv, tri[mesh.for_surface(lo, hi)], shape, mode == "thin", surface_part,
                                  box=box)
        bits = surf if bits is None else (bits | surf)
    return (bits, top) if want_carry else bits


def slab_ranges(nz: int, layers: int):
    """[(k0, k1), ...] covering 0..nz in slabs of *layers* rows (the last may be thinner)."""
    layers = max(1, int(layers))
    return [(k0, min(nz, k0 + layers)) for k0 in range(0, nz, layers)]


def voxelize_slabs(mesh: SplitMesh, mode: str, layers: int, *, vote: bool = False, progress=None):
    """Yield ``(k0, k1, bits)`` for z-slabs of *layers* rows, bottom to top; the bits of
    each slab are rows k0..k1 of the unsplit grid's (x and y whole). The vote's z
    parity is carried from slab to slab."""
    nx, ny, nz = mesh.spec.shape
    carry = None
    for k0, k1 in slab_ranges(nz, layers):
        bits, top = voxelize_box(mesh, (0, 0, k0), (nx, ny, k1), mode, vote=vote, carry=carry, want_carry=True)
        carry = top
        yield k0, k1, bits
        report(progress, k1 / nz, f"voxelized rows {k1}/{nz}")


def voxelize_split(vertices, triangles, spec: GridSpec, mode: str, layers: int, *, vote: bool = False,
                   progress=None):
    """The whole packed bit grid, built slab by slab (bit-identical to ``voxelize``): for
    jobs whose bit grid fits but whose voxelization does not."""
    mesh = SplitMesh(vertices, triangles, spec)
    out = bitgrid.empty(spec.shape, xp=np)
    for k0, k1, bits in voxelize_slabs(mesh, mode, layers, vote=vote, progress=progress):
        out[k0:k1] = bits
    return out


def triangles_per_slab(mesh: SplitMesh, layers: int, vote: bool = False) -> int:
    """The most triangles any z-slab of *layers* rows is given (its setup's size)."""
    nz = mesh.spec.shape[2]
    if not len(mesh.triangles):
        return 0
    near_lo, near_hi = np.sort(mesh.near_lo[:, 2]), np.sort(mesh.near_hi[:, 2])
    k0 = np.arange(0, nz, max(1, int(layers)), dtype=np.float64)
    k1 = np.minimum(k0 + layers, nz)
    most = np.searchsorted(near_lo, k1, side="left") - np.searchsorted(near_hi, k0, side="left")
    if vote:  # the z pass also takes triangles whose crossing may land in the slab
        finite = np.isfinite(mesh.cross_lo[:, 2])
        c_lo, c_hi = np.sort(mesh.cross_lo[finite, 2]), np.sort(mesh.cross_hi[finite, 2])
        most = most + np.searchsorted(c_lo, k1, side="left") - np.searchsorted(c_hi, k0, side="left")
    return int(most.max())


def owners_box(mesh: SplitMesh, lo, hi, bits):
    """``attributes.owner_triangles`` for the set voxels of *bits* (the box [lo, hi)'s bit
    grid), in the box's linear order. The box must hold whole x rows (owners are filled
    along x rows), as z-slabs do."""
    from ..grid import bitgrid as bg
    from .attributes import fill_along_rows, smallest_owner

    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    if lo[0] != 0 or hi[0] != mesh.spec.shape[0]:
        raise ValueError("owners are filled along whole x rows: the box must span x")
    nx, ny, nz = (int(n) for n in hi - lo)
    ijk = bg.coordinates(np.asarray(bits), nx).astype(np.int64)
    linear = (ijk[:, 2] * ny + ijk[:, 1]) * nx + ijk[:, 0]
    sel = mesh.for_surface(lo, hi)
    hits = []
    surface_voxels_cpu(mesh.pv, mesh.triangles[sel], mesh.spec.shape, tri_ids=hits, box=(lo, hi))
    return fill_along_rows(smallest_owner(linear, hits, index=sel), linear // nx)


def slab_work_items(mesh: SplitMesh, layers: int, mode: str, vote: bool = False):
    """An upper bound on the work items of a z-slab's largest CPU batch of each pass
    (``work_items`` for a slab, a ``WorkItems``): per pass, the columns of the triangles
    reaching the slab, each with its z extent cut to *layers* rows, capped by the batch
    size (or one triangle's own)."""
    from . import WorkItems
    from .surface import CHUNK_ITEMS

    if not len(mesh.triangles):
        return WorkItems(0, 0)
    nz = mesh.spec.shape[2]
    lo, hi = mesh.near_lo, mesh.near_hi
    w = np.clip(np.minimum(hi, np.asarray(mesh.spec.shape)) - np.maximum(lo, 0), 0, None)
    wz = np.minimum(w[:, 2], layers)
    passes = []  # (kind, columns per triangle)
    if mode != "solid":  # columns across the dominant axis, bounded by the two larger extents
        passes.append(("surface", np.maximum(np.maximum(w[:, 0] * w[:, 1], w[:, 1] * wz), wz * w[:, 0])))
    if mode in ("solid", "solid+surface"):
        passes.append(("solid", w[:, 1] * wz))  # along x: (y, z) columns
        if vote:
            passes += [("solid", wz * w[:, 0]), ("solid", w[:, 0] * w[:, 1])]
    k0 = np.arange(0, nz, max(1, int(layers)), dtype=np.float64)
    k1 = np.minimum(k0 + layers, nz)
    by_lo, by_hi = np.argsort(lo[:, 2]), np.argsort(hi[:, 2])
    most = {"surface": 0, "solid": 0}
    for kind, cols in passes:  # Σ cols over triangles with lo < k1, less those with hi < k0
        sum_lo = np.concatenate([[0.0], np.cumsum(cols[by_lo])])
        sum_hi = np.concatenate([[0.0], np.cumsum(cols[by_hi])])
        per_slab = sum_lo[np.searchsorted(lo[by_lo, 2], k1, side="left")] \
            - sum_hi[np.searchsorted(hi[by_hi, 2], k0, side="left")]
        most[kind] = max(most[kind], min(int(per_slab.max()), CHUNK_ITEMS), int(cols.max()))
    return WorkItems(most["surface"], most["solid"])
