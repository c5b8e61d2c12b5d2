"""Solid voxelization by parity along x (seed 004 §4.1), and a 3-axis majority vote for
meshes that are not closed.

For every voxel column (j, k) whose centre lies inside a triangle's yz projection (edge
functions evaluated from each edge's endpoints in a canonical order, with the top-left
fill rule, so a centre on or within rounding of a shared edge counts for exactly one
triangle), the centre is projected along x onto the triangle's plane at q, and all
voxels i ≥ q̄ = ⌊q + ½⌋ flip. Instead of flipping every voxel to the end of the row
with atomic xor (bandwidth-heavy, as §4.1 notes), a *flip-start* bit is toggled at q̄
and a prefix-xor along each row turns starts into spans: the same parity, one pass over
the grid. Voxels whose centre is inside the closed mesh end up set.
"""

from __future__ import annotations

import numpy as np

from ..grid import bitgrid
from ..memory import trim_heap
from ..progress import report, scaled
from .surface import _expand, batches

Y, Z = 1, 2


def _yz_setup(v):
    """n_x, n·v0, and per yz edge its endpoints in canonical order, a sign and the
    top-left flag.

    Edge i runs v[i] → v[i+1]. Its edge function at a column centre c is
    E = sign · ((q_y − p_y)(c_z − p_z) − (q_z − p_z)(c_y − p_y)) with (p, q) the endpoints
    ordered by (y, z): the two triangles that share an edge traverse it in opposite
    directions, and with their own start vertex they rounded E differently, so a centre
    within rounding of the edge could count for both or for neither (a whole x-row
    wrong, issue 22 §2). Computed from the same (p, q) both get exactly ±F, and the
    top-left rule decides E = 0 for exactly one (seed 004 §4.1). sign = s·(−1 if
    swapped) keeps E > 0 inside for n_x of either sign (s = sign of n_x)."""
    v0, v1, v2 = v[:, 0], v[:, 1], v[:, 2]
    e = np.stack([v1 - v0, v2 - v1, v0 - v2], axis=1)
    e0, e1 = e[:, 0], e[:, 1]
    nx = e0[:, 1] * e1[:, 2] - e0[:, 2] * e1[:, 1]
    ny = e0[:, 2] * e1[:, 0] - e0[:, 0] * e1[:, 2]
    nz = e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]
    nv0 = (nx * v0[:, 0] + ny * v0[:, 1]) + nz * v0[:, 2]
    s = np.where(nx >= 0, 1.0, -1.0)
    na = (-e[:, :, Z]) * s[:, None]  # (T, 3): yz plane, a = y, b = z
    nb = e[:, :, Y] * s[:, None]
    top_left = (na > 0) | ((na == 0) & (nb < 0))
    a, b = v, v[:, [1, 2, 0]]  # edge i: a[i] → b[i]
    swap = (b[:, :, Y] < a[:, :, Y]) | ((b[:, :, Y] == a[:, :, Y]) & (b[:, :, Z] < a[:, :, Z]))
    p = np.where(swap[:, :, None], b, a)
    q = np.where(swap[:, :, None], a, b)
    sign = s[:, None] * np.where(swap, -1.0, 1.0)
    return nx, ny, nz, nv0, p, q, sign, top_left


def edge_function(p, q, sign, yc, zc):
    """E of one edge (``_yz_setup``) at column centres (yc, zc), in the order the CUDA
    source evaluates it."""
    return sign * ((q[..., Y] - p[..., Y]) * (zc - p[..., Z]) - (q[..., Z] - p[..., Z]) * (yc - p[..., Y]))


def flip_starts_cpu(pv, triangles, shape, progress=None, box=None, carry=None):
    """Bit grid with a toggled bit at (q̄, j, k) for every column crossing (mod 2).

    *box* ``(lo, hi)``: only the box's rows, in the box's own bit grid. Crossings before
    the box along the row (q̄ < lo_x) start at its first voxel, so the parity inside is
    that of the whole row. With *carry* (bool [k, j] over the box's rows: the parity of
    every crossing before the box, as the previous box along x left it) those crossings
    are taken from *carry* instead and the ones computed here are dropped, so the caller
    need only pass the triangles that reach the box (``slabs.py``).
    """
    from .surface import box_bounds

    lo, hi = box_bounds(shape, box)
    out_shape = tuple(int(n) for n in hi - lo)
    words = bitgrid.empty(out_shape, xp=np)
    flat = words.reshape(-1)
    if carry is not None:
        words[..., 0] ^= np.asarray(carry, dtype=np.uint32).reshape(out_shape[2], out_shape[1])
    if len(triangles) == 0:
        return words
    drop_before = carry is not None and lo[0] > 0
    v = np.stack([pv[triangles[:, 0]], pv[triangles[:, 1]], pv[triangles[:, 2]]], axis=1)
    n_x, n_y, n_z, nv0, ep, eq, sign, top_left = _yz_setup(v)
    # Column centres (j + ½, k + ½) inside the yz bounding box; none for triangles ∥ x.
    ymin, ymax = v[:, :, Y].min(axis=1), v[:, :, Y].max(axis=1)
    zmin, zmax = v[:, :, Z].min(axis=1), v[:, :, Z].max(axis=1)
    jlo = np.maximum(np.ceil(ymin - 0.5).astype(np.int64), lo[1])
    jhi = np.minimum(np.floor(ymax - 0.5).astype(np.int64), hi[1] - 1)
    klo = np.maximum(np.ceil(zmin - 0.5).astype(np.int64), lo[2])
    khi = np.minimum(np.floor(zmax - 0.5).astype(np.int64), hi[2] - 1)
    wj = np.maximum(jhi - jlo + 1, 0)
    counts = np.where(n_x != 0, wj * np.maximum(khi - klo + 1, 0), 0)
    for first, last, done in batches(counts):
        owner, local = _expand(counts[first:last])
        t = first + owner
        j = jlo[t] + local % wj[t]
        k = klo[t] + local // wj[t]
        yc, zc = j + 0.5, k + 0.5
        inside = np.ones(len(t), dtype=bool)
        for i in range(3):
            E = edge_function(ep[t, i], eq[t, i], sign[t, i], yc, zc)
            inside &= (E > 0) | ((E == 0) & top_left[t, i])
        t, j, k, yc, zc = t[inside], j[inside], k[inside], yc[inside], zc[inside]
        q = ((nv0[t] - n_y[t] * yc) - n_z[t] * zc) / n_x[t]
        qbar = np.floor(q + 0.5)
        start = np.clip(qbar, lo[0], hi[0]).astype(np.int64)  # a start at the row's end flips nothing
        keep = start < hi[0]
        if drop_before:  # in *carry* already
            keep &= qbar >= lo[0]
        _toggle_bits(flat, start[keep] - lo[0], j[keep] - lo[1], k[keep] - lo[2], out_shape)
        report(progress, done, "solid: column crossings")
    return words


def _toggle_bits(flat_words, i, j, k, shape):
    """XOR one bit per (i, j, k), repeated entries cancelling in pairs."""
    nx, ny, nz = shape
    linear = (k * ny + j) * nx + i
    uniq, times = np.unique(linear, return_counts=True)
    odd = uniq[times % 2 == 1]
    ii = odd % nx
    row = odd // nx
    w = row * bitgrid.words_along_x(nx) + (ii >> 5)
    bit = (np.uint32(1) << (ii & 31).astype(np.uint32)).astype(np.uint32)
    np.bitwise_xor.at(flat_words, w, bit)


def prefix_xor_rows(words, nx: int):
    """Turn flip-start bits into spans: bit i of a row becomes the xor of bits 0..i.

    Within a word a shift-xor ladder gives the prefix; across words, a word is inverted
    when the bits before it have odd parity. Padding bits past nx are cleared.
    """
    w = words.astype(np.uint32, copy=True)
    for shift in (1, 2, 4, 8, 16):
        w ^= w << np.uint32(shift)
    # Parity carried into each word = top bit of the previous words' prefixes, xor-summed.
    top = (w >> np.uint32(31)) & np.uint32(1)
    carry = np.cumsum(top, axis=-1, dtype=np.uint32) - top
    w ^= (np.uint32(0) - (carry & np.uint32(1))).astype(np.uint32)  # all ones where odd
    tail = nx % 32
    if tail:
        w[..., -1] &= np.uint32((1 << tail) - 1)
    return w


def solid_voxels_cpu(pv, triangles, shape, progress=None, box=None, carry=None):
    """NumPy reference: voxels whose centre is inside the (closed) mesh (of *box* only,
    with the parity *carry* from before it: ``flip_starts_cpu``)."""
    nx = shape[0] if box is None else int(box[1][0]) - int(box[0][0])
    return prefix_xor_rows(flip_starts_cpu(pv, triangles, shape, progress, box, carry), nx)


# The vote's passes: (axis order of the relabelled mesh, axes of its unpacked grid back to [k, j, i]).
VOTE_AXES = (((0, 1, 2), (0, 1, 2)), ((1, 2, 0), (1, 2, 0)), ((2, 0, 1), (2, 0, 1)))


def majority_vote_cpu(pv, triangles, shape, progress=None, box=None, carry=None, meshes=None):
    """Parity along x, y and z; a voxel is inside when at least two agree. For meshes
    with small holes a hole corrupts whole rows along one axis only, which the other two
    outvote.

    *box* ``(lo, hi)``: only its voxels. Parity along z is then carried into the box:
    by *carry* (bool [y, x] over the box: parity of the crossings below it, see
    ``flip_starts_cpu``) where given, else from the triangles below it. *meshes* gives
    each pass its own triangles (x, y, z; default *triangles* for all three). Returns
    the packed grid; with a box, also the z parity of the box's top layer (the next
    box's carry) as ``(bits, carry)``.
    """
    from .surface import box_bounds

    lo, hi = box_bounds(shape, box)
    dims = tuple(int(n) for n in hi - lo)
    votes = None
    top = None
    for axis, (order, back) in enumerate(VOTE_AXES):
        tri = triangles if meshes is None else meshes[axis]
        part = None if box is None else (tuple(lo[list(order)]), tuple(hi[list(order)]))
        relabelled = tuple(shape[a] for a in order)
        c = carry if axis == 2 else None
        bits = solid_voxels_cpu(pv[:, list(order)] if axis else pv, tri, relabelled,
                                scaled(progress, axis / 3, (axis + 1) / 3), box=part, carry=c)
        # the pass's freed batches (heap chunks below glibc's mmap threshold) would stay in
        # the RSS under the unpacked axis: Suzanne 256's 30-row coverage slabs grew 307 MiB
        # where the arrays peak at 252 (256 with the trim; bench/memory.py --coverage-slabs)
        trim_heap()
        one = bitgrid.unpack(bits, dims[order[0]])  # indexed [order[2], order[1], order[0]]
        del bits
        if axis == 2:
            top = one[:, :, -1].copy()  # [y, x]: z parity at the box's top layer
        one = one.transpose(back) if axis else one
        if votes is None:
            votes = one.astype(np.uint8)
        else:
            votes += one
        del one  # one unpacked grid at a time: the peak is votes + one axis (estimate_bytes)
        report(progress, (axis + 1) / 3, f"solid: vote along {'xyz'[axis]}")
    bits = bitgrid.pack(votes >= 2)
    return bits if box is None else (bits, top)
