"""Segments → voxels (seed 001 §3.1): the conservative 3D DDA.

    from voxfx.kernels.voxelize.lines import voxelize_segments
    bits = voxelize_segments(starts, ends, spec)         # packed bit grid, NumPy
    bits = voxelize_segments(starts, ends, spec, words=surface_bits)   # OR into a grid

A voxel is set when the *closed* segment [start, end] meets the *closed* voxel box
[i, i+1]×[j, j+1]×[k, k+1] (voxel units): the 3D supercover, with touching counting as
in the triangle voxelizer (``mode="surface"`` gives the same voxels for the degenerate
triangle (start, end, end)). The tie rules follow from that one definition:

* a segment crossing a voxel face sets the voxels on both sides of the crossing point;
* one passing exactly through a voxel edge sets all 4 voxels sharing the edge, one
  through a voxel corner all 8;
* one lying in a face plane sets both layers of voxels beside it, one lying on an edge
  line all 4 columns around it;
* a zero-length segment is a point: 1 voxel inside, 2 on a face, 4 on an edge, 8 on a
  corner;
* voxels outside the grid are dropped (the segment is clipped, never clamped).

"Exactly" means in float64 voxel units, p = (x − origin) / voxel_size, computed once on
the host for both backends. The decision is a separating-axis test of the segment
against each candidate box, written without division (``touches``): it is exact
whenever its few products and sums are, e.g. for end points on a 2⁻ⁿ lattice, which is
what the tie rules above are tested on. Elsewhere it rounds identically on both
backends: the CUDA side is compiled with ``--fmad=false`` and mirrors this file term by
term, so NumPy and CuPy set the same voxels bit for bit.

The DDA (seed 001 §3.1, Fig. 5) steps one voxel at a time along the dominant axis D of
the segment, and every step is computed from the segment's start (x = x₀ + inc·i)
rather than from the previous step, so the steps are independent: on the GPU one
thread runs one step. A step owns the slab of voxels [X, X+1] along D; the segment's
other two coordinates change by at most one voxel across it, so the step has a 2×2
(at ties 3×3) block of candidate voxels, each decided by the exact test. Work is
load-balanced as in the triangle voxelizer: steps per segment → cumulative sum → one
thread per step finding its segment by binary search (``cuda/lines.cu``).
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec, bitgrid
from ..progress import report
from ..grid.launch import Double, Kernels
from .triangles import to_voxel_units

_CU = "lines.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: bit-identical voxels on both backends
_THREADS = 128

CHUNK_STEPS = 1 << 16  # DDA steps per NumPy batch: ~40 MB of candidates on the CPU path

# Farther than this (in voxels) from the grid origin, float64 keeps too few fractional
# bits for the candidate margin below; no real scene gets near it.
MAX_VOXEL_COORDINATE = 2.0 ** 40

# Candidate margin per unit of coordinate size. The rounding error of a coordinate
# p0 + d·t at a slab face is below 6·2⁻⁵³·(|p0| + |d|) (t has a relative error of
# 3·2⁻⁵³, then one product and one sum); this margin is ~2¹⁰ times that, so the
# candidate block always holds every voxel the exact test accepts.
_MARGIN = 2.0 ** -40

# Coordinate planes (a, b) of the three edge-cross-product separating axes.
_PLANES = ((0, 1), (1, 2), (2, 0))


def check_segments(starts, ends):
    """float64 (S, 3) starts and ends, with messages a user can act on."""
    starts = np.asarray(backend.to_numpy(starts))
    ends = np.asarray(backend.to_numpy(ends))
    if starts.ndim != 2 or starts.shape[1] != 3:
        raise InputError(f"segment starts must have shape (S, 3), not {tuple(starts.shape)}")
    if ends.shape != starts.shape:
        raise InputError(f"segment ends must have the shape of the starts {tuple(starts.shape)}, "
                         f"not {tuple(ends.shape)}")
    if not (np.issubdtype(starts.dtype, np.number) and np.issubdtype(ends.dtype, np.number)):
        raise InputError("segment end points must be numbers")
    starts = starts.astype(np.float64, copy=False)
    ends = ends.astype(np.float64, copy=False)
    bad = int((~np.isfinite(starts).all(axis=1) | ~np.isfinite(ends).all(axis=1)).sum())
    if bad:
        raise InputError(f"{bad} segments have non-finite end points (NaN/inf)")
    return starts, ends


def estimate_bytes(spec: GridSpec, n_segments: int) -> int:
    """Peak device memory of ``voxelize_segments`` (before allocating)."""
    # float64 end points (48 B), int64 steps and their scan (16 B) per segment.
    return int(bitgrid.nbytes(spec.shape) + 64 * n_segments)


def voxelize_segments(starts, ends, spec: GridSpec, *, xp=None, words=None, keep_on_device=False,
                      progress=None):
    """Conservative voxelization of segments start→end (world metres, (S, 3) each).

    Returns a packed bit grid (nz, ny, ceil(nx/32)) uint32. With *words* (an existing
    bit grid of this spec, NumPy or CuPy) the voxels are OR-ed into it in place and
    *words* itself is returned; otherwise a new NumPy grid (a CuPy one with
    *keep_on_device*). *xp* picks the backend: by default the one *words* lives on,
    else the current backend.
    """
    p0, p1 = check_segments(starts, ends)
    nx, ny, nz = spec.shape
    grid_shape = (nz, ny, bitgrid.words_along_x(nx))
    if words is not None:
        if tuple(words.shape) != grid_shape or words.dtype != np.uint32:
            raise InputError(f"the bit grid to OR into must be uint32 of shape {grid_shape} for this grid, "
                             f"not {words.dtype} {tuple(words.shape)}")
        if not words.flags.c_contiguous:
            raise InputError("the bit grid to OR into must be C-contiguous")
    xp = xp or (backend.array_module(words) if words is not None else backend.xp())
    backend.ensure_fits(estimate_bytes(spec, len(p0)), f"voxelizing {len(p0):,} segments into "
                        f"{'×'.join(map(str, spec.shape))} voxels", xp=xp)
    pv0 = to_voxel_units(p0, spec.origin, spec.voxel_size)
    pv1 = to_voxel_units(p1, spec.origin, spec.voxel_size)
    far = int((np.abs(pv0) > MAX_VOXEL_COORDINATE).any(axis=1).sum()
              + (np.abs(pv1) > MAX_VOXEL_COORDINATE).any(axis=1).sum())
    if far:
        raise InputError(f"{far} segment end points lie more than {MAX_VOXEL_COORDINATE:.0e} voxels from "
                         "the grid; remove them or use a larger voxel size")

    same_place = words is not None and backend.array_module(words) is xp
    work = words if same_place else (None if words is None else xp.asarray(backend.to_numpy(words)))
    report(progress, 0.0, "voxelizing segments")
    if xp is np:
        if work is None:
            work = bitgrid.empty(spec.shape, xp=np)
        segment_voxels_cpu(pv0, pv1, spec.shape, work, progress)
    else:
        if work is None:
            work = xp.zeros(grid_shape, dtype=xp.uint32)
        segment_voxels_gpu(xp.asarray(pv0), xp.asarray(pv1), spec.shape, work)
    report(progress, 1.0, "voxelized segments")
    if words is None:
        return work if (keep_on_device or xp is np) else xp.asnumpy(work)
    if not same_place:  # words lives on the other backend: copy the result back into it
        words[...] = backend.to_numpy(work) if backend.array_module(words) is np else \
            backend.array_module(words).asarray(work)
    return words


# ---------------------------------------------------------------------------------------
# The DDA, NumPy reference. cuda/lines.cu mirrors every expression below.


def dda_setup(p0, p1, shape):
    """Per segment: direction d, box lo/hi, dominant axis D, first slab and step count.

    The segment meets the closed slab [X, X+1] along D for X in ceil(lo_D)−1 …
    floor(hi_D) (exact: no arithmetic on the end points), clipped to the grid. A segment
    whose box misses the grid along any axis takes no steps.
    """
    n = np.asarray(shape, dtype=np.float64)
    d = p1 - p0
    lo = np.minimum(p0, p1)
    hi = np.maximum(p0, p1)
    D = np.argmax(np.abs(d), axis=1)  # seed 001 §3.1: Length = the largest |Δ| (first on ties)
    rows = np.arange(len(D))
    first = np.maximum(np.ceil(lo[rows, D]) - 1.0, 0.0)
    last = np.minimum(np.floor(hi[rows, D]), n[D] - 1.0)
    outside = ((np.ceil(lo) - 1.0 > n - 1.0) | (np.floor(hi) < 0.0)).any(axis=1)
    steps = np.where(outside, 0.0, np.maximum((last - first) + 1.0, 0.0)).astype(np.int64)
    return d, lo, hi, D, first, steps


def slab_parameters(p0_D, d_D, X):
    """Parameter range [t_lo, t_hi] ⊂ [0, 1] of the segment inside the slab [X, X+1]."""
    flat = d_D == 0.0  # only for points: D is the dominant axis
    safe = np.where(flat, 1.0, d_D)
    ta = (X - p0_D) / safe
    tb = ((X + 1.0) - p0_D) / safe
    t_lo = np.where(flat, 0.0, np.maximum(np.minimum(ta, tb), 0.0))
    t_hi = np.where(flat, 1.0, np.minimum(np.maximum(ta, tb), 1.0))
    return t_lo, t_hi


def candidate_range(p0_A, d_A, lo_A, hi_A, t_lo, t_hi, n_A):
    """Voxel range [c_lo, c_hi] along a non-dominant axis A for one step (float64).

    The coordinate at the slab faces, p0 + d·t (seed 001 §3.1: x = x0 + inc·i), widened
    by a margin that covers its rounding, then cut to the segment's box and the grid.
    """
    ua = p0_A + d_A * t_lo
    ub = p0_A + d_A * t_hi
    margin = ((1.0 + np.abs(p0_A)) + np.abs(d_A)) * _MARGIN
    c_lo = np.ceil(np.minimum(ua, ub) - margin) - 1.0
    c_hi = np.floor(np.maximum(ua, ub) + margin)
    c_lo = np.maximum(np.maximum(c_lo, np.ceil(lo_A) - 1.0), 0.0)
    c_hi = np.minimum(np.minimum(c_hi, np.floor(hi_A)), n_A - 1.0)
    return c_lo, c_hi


def touches(p0, d, lo, hi, q):
    """Closed segment p0 + t·d, t ∈ [0, 1], meets the closed unit box at min corner q.

    Separating axes (all arrays (N, 3)): the three box normals (the segment's box
    against the voxel's) and the three d × e_axis. On the axis d × e_c, in the plane
    (a, b), every point of the segment projects to 0 and the box corner q to
    f = d_a (q_b − p0_b) − d_b (q_a − p0_a); the box covers f + [min, max] of
    d_a·δ_b − d_b·δ_a over δ ∈ {0, 1}². Touching (0 at an end of that range) counts.
    """
    ok = ((lo <= q + 1.0) & (hi >= q)).all(axis=1)
    for a, b in _PLANES:
        f = d[:, a] * (q[:, b] - p0[:, b]) - d[:, b] * (q[:, a] - p0[:, a])
        f_max = (f + np.maximum(d[:, a], 0.0)) + np.maximum(-d[:, b], 0.0)
        f_min = (f + np.minimum(d[:, a], 0.0)) + np.minimum(-d[:, b], 0.0)
        ok &= (f_min <= 0.0) & (f_max >= 0.0)
    return ok


def _expand(counts):
    """(owner, local) for items laid out owner by owner, `counts[owner]` items each."""
    owner = np.repeat(np.arange(len(counts)), counts)
    starts = np.cumsum(counts) - counts
    local = np.arange(int(counts.sum()), dtype=np.int64) - starts[owner]
    return owner, local


def segment_voxels_cpu(p0, p1, shape, words, progress=None):
    """NumPy reference: OR the segments' voxels (voxel units, float64) into *words*."""
    flat = words.reshape(-1)
    for ijk in segment_voxel_batches(p0, p1, shape, progress):
        _or_voxels(flat, ijk, shape)
    return words


def segment_voxel_batches(p0, p1, shape, progress=None):
    """Yield (m, 3) int64 (i, j, k) of the segments' voxels (voxel units, float64), a
    batch of DDA steps at a time (a voxel may come twice: from two steps or segments)."""
    if len(p0) == 0:
        return
    n = np.asarray(shape, dtype=np.float64)
    d, lo, hi, D, first, steps = dda_setup(p0, p1, shape)
    ends = np.cumsum(steps)
    total = int(ends[-1])
    seg = 0
    while seg < len(p0):
        # Segments whose steps fit in this batch (at least one segment).
        base = ends[seg] - steps[seg]
        stop = max(seg + 1, int(np.searchsorted(ends, base + CHUNK_STEPS, side="right")))
        owner, local = _expand(steps[seg:stop])
        s = seg + owner  # one row per DDA step: its segment ...
        X = first[s] + local  # ... and its slab along D
        Ds = D[s]
        U, V = (Ds + 1) % 3, (Ds + 2) % 3
        rows = np.arange(len(s))
        t_lo, t_hi = slab_parameters(p0[s, Ds], d[s, Ds], X)
        ranges = [candidate_range(p0[s, A], d[s, A], lo[s, A], hi[s, A], t_lo, t_hi, n[A])
                  for A in (U, V)]
        (u_lo, u_hi), (v_lo, v_hi) = ranges
        nu = np.maximum(u_hi - u_lo + 1.0, 0.0).astype(np.int64)
        nv = np.maximum(v_hi - v_lo + 1.0, 0.0).astype(np.int64)
        step, cand = _expand(nu * nv)  # the candidate block of each step, u fastest
        q = np.empty((len(step), 3))
        r = rows[step]
        q[np.arange(len(step)), Ds[r]] = X[r]
        q[np.arange(len(step)), U[r]] = u_lo[r] + cand % nu[r]
        q[np.arange(len(step)), V[r]] = v_lo[r] + cand // nu[r]
        sc = s[step]
        hit = touches(p0[sc], d[sc], lo[sc], hi[sc], q)
        yield q[hit].astype(np.int64)
        report(progress, float(ends[stop - 1]) / max(total, 1), "voxelizing segments")
        seg = stop


def _or_voxels(flat_words, ijk, shape):
    nx, ny, nz = shape
    wx = bitgrid.words_along_x(nx)
    w = (ijk[:, 2] * ny + ijk[:, 1]) * wx + (ijk[:, 0] >> 5)
    bit = np.left_shift(np.uint32(1), (ijk[:, 0] & 31).astype(np.uint32))
    np.bitwise_or.at(flat_words, w, bit)


# ---------------------------------------------------------------------------------------
# CuPy launches of cuda/lines.cu


DEFINES = {"CANDIDATE_MARGIN": Double(_MARGIN)}  # lines.cu's constants, as -D options from here
_K = Kernels(_CU, _OPTIONS, _THREADS, defines=DEFINES)


def segment_voxels_gpu(p0, p1, shape, words):
    """CuPy: the same voxels as ``segment_voxels_cpu``, OR-ed into *words* with atomicOr."""
    import cupy as cp

    nx, ny, nz = (int(v) for v in shape)
    S = int(p0.shape[0])
    if S == 0:
        return words
    p0 = cp.ascontiguousarray(p0, dtype=cp.float64)
    p1 = cp.ascontiguousarray(p1, dtype=cp.float64)
    steps = cp.empty(S, dtype=cp.int64)
    _K.launch("segment_step_counts", S, (p0, p1, np.int64(S), np.int32(nx), np.int32(ny), np.int32(nz), steps))
    ends = cp.cumsum(steps)
    total = int(ends[-1])  # the one host sync: the launch size of the step pass
    if total:
        _K.launch("segment_steps", total, (p0, p1, ends, steps, np.int64(S), np.int64(total), np.int32(nx),
                                           np.int32(ny), np.int32(nz), words))
    return words
