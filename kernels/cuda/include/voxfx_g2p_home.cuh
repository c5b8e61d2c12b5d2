// The sparse G2P kernels' point look-ups (flip_sparse_g2p.cu g2p_advect_bricks and
// g2p_advect_sparse, flip_sparse_g2p_block.cu g2p_advect_block): the bricks and a point's
// home brick, a sample's corner cells from the home brick's table (corner_cells_fast) and
// the push-out (push_out_brick). kernels/flip/sparse_transfer.py g2p_advect is their NumPy
// reference; callers compile with --fmad=false and define PUSH_EPSILON.
#pragma once
#include "voxfx_g2p_bricks.cuh"  // corner_axis
#include "voxfx_push.cuh"  // push_out_point, nearest_free_point
#include "voxfx_sparse.cuh"  // keys, slots, binary search

// The active bricks for point look-ups: sorted keys, their slots, the neighbour table.
struct Bricks {
    const long long* __restrict__ keys;
    const int* __restrict__ slots;
    long long n;
    const int* __restrict__ nbr27;
};

// Pool slot of the brick (bx, by, bz): from the table of `home` (a slot whose brick is hb)
// when it is one of home's 27, else by binary search; −1 where inactive.
__device__ __forceinline__ int brick_slot(const Bricks& b, long long bx, long long by, long long bz, int home,
                                          const long long hb[3])
{
    const long long dx = bx - hb[0], dy = by - hb[1], dz = bz - hb[2];
    if (home >= 0 && dx >= -1 && dx <= 1 && dy >= -1 && dy <= 1 && dz >= -1 && dz <= 1)
        return b.nbr27[27LL * home + sparse_offset_index((int)dx, (int)dy, (int)dz)];
    return sparse_slot(b.keys, b.slots, b.n, sparse_key_of_voxel(8 * bx, 8 * by, 8 * bz));
}

// Flat index of lattice cell (i, j, k), −1 where its brick is inactive (grid.locate).
__device__ __forceinline__ int locate(const Bricks& b, long long i, long long j, long long k, int home,
                                      const long long hb[3])
{
    const int s = brick_slot(b, i >> 3, j >> 3, k >> 3, home, hb);
    return s < 0 ? -1 : s * SPARSE_CELLS + sparse_local(i, j, k);
}

// What a point samples on: the bricks, a closed domain's face lattices (or none), and the
// point's home brick (a hint for the look-ups of its corners).
struct Sampler {
    Bricks b;
    int closed;
    int n[3];
    int home;
    long long hb[3];
};

// Both kernels' Sampler for the point g (cell units): the bricks and the box, no home yet
// (−1), and hb = ⌊g⌋ >> 3 where g is finite (else 0). *finite*: g is; *inside*: also every
// ⌊g_a⌋ lies within the key range (g2p_advect_bricks takes a home only then). The caller
// sets S.home (the bins' cell, a binary search or the brick index).
__device__ __forceinline__ Sampler sampler_at(const long long* __restrict__ keys, const int* __restrict__ slots,
                                              long long n_keys, const int* __restrict__ nbr27, int closed, int nx,
                                              int ny, int nz, const float g[3], bool& finite, bool& inside)
{
    Sampler S;
    S.b = Bricks{keys, slots, n_keys, nbr27};
    S.closed = closed;
    S.n[0] = nx;
    S.n[1] = ny;
    S.n[2] = nz;
    S.home = -1;
    S.hb[0] = S.hb[1] = S.hb[2] = 0;
    finite = isfinite(g[0]) && isfinite(g[1]) && isfinite(g[2]);
    inside = finite;
    if (finite)
        for (int a = 0; a < 3; ++a) {
            const float f = floorf(g[a]);
            inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
            S.hb[a] = ((long long)f) >> 3;
        }
    return S;
}

// Solid at lattice cell c (an inactive brick is not solid).
__device__ __forceinline__ bool solid_at(const unsigned char* __restrict__ solid, const Sampler& S,
                                         const long long c[3])
{
    const int idx = locate(S.b, c[0], c[1], c[2], S.home, S.hb);
    return idx >= 0 && solid[idx];
}

// sparse_transfer.push_out: closed, clamped into the box PUSH_EPSILON cells inside; out of a
// SOLID cell to the nearest point, PUSH_EPSILON inside, of a free 26-neighbour (ties: first in
// z-y-x order; an inactive cell is free; closed, inside the box only); no free neighbour or
// not finite: back to `fallback` (voxfx_push.cuh push_out_point, with the Sampler's look-ups).
__device__ void push_out_brick(float x[3], const float fallback[3], const unsigned char* __restrict__ solid,
                               const Sampler& S, const float o[3], float h, float inv_h)
{
    push_out_point<long long>(x, fallback, S.closed, S.n, o, h, inv_h, [&](const long long* c) {
        return solid_at(solid, S, c);
    }, [&](const float* gc, const long long* cell, float* target) {
        return nearest_free_point(gc, cell, [&](const long long* nb) {
            const bool in_box = nb[0] >= 0 && nb[0] < S.n[0] && nb[1] >= 0 && nb[1] < S.n[1] && nb[2] >= 0 &&
                                nb[2] < S.n[2];
            return (in_box || !S.closed) && !solid_at(solid, S, nb);
        }, target);
    });
}

// A point's home brick hb (int: a lattice within the key range) and its slot (−1: none, or
// beyond the key range), for the look-ups of its corners.
struct Home {
    const long long* __restrict__ keys;
    const int* __restrict__ slots;
    long long n;
    const int* __restrict__ nbr27;
    int slot;
    int hb[3];
};

// Slot of brick (bx, by, bz): from home's table when it is one of home's 27, else by binary
// search; −1 where inactive (brick_slot's answer: either way the brick's own slot).
__device__ __forceinline__ int home_slot(const Home& H, int bx, int by, int bz)
{
    const int dx = bx - H.hb[0], dy = by - H.hb[1], dz = bz - H.hb[2];
    if (H.slot >= 0 && (unsigned)(dx + 1) <= 2u && (unsigned)(dy + 1) <= 2u && (unsigned)(dz + 1) <= 2u)
        return H.nbr27[27 * H.slot + sparse_offset_index(dx, dy, dz)];
    return sparse_slot(H.keys, H.slots, H.n, sparse_key_of_voxel(8LL * bx, 8LL * by, 8LL * bz));
}

// s[r] by selects (r ∈ [0, 8) known only at run time: an indexed load would put s in local memory).
__device__ __forceinline__ int pick8(const int s[8], int r)
{
    const int a = (r & 1) ? s[1] : s[0], b = (r & 1) ? s[3] : s[2], c = (r & 1) ? s[5] : s[4],
              d = (r & 1) ? s[7] : s[6];
    const int e = (r & 2) ? b : a, f = (r & 2) ? d : c;
    return (r & 4) ? f : e;
}

// corner_cells' cells and fractions without the walk. Per axis the corners are i0 and
// i1 = i0 + 1 (i0 itself on a one-sample side, `same`); i1 lies in the next brick only when
// i0 is on its brick's last layer, so the 8 corners lie in at most 2 × 2 × 2 bricks, each
// looked up once. The walk's rule, that a corner is missing when a cell on its path
// base → +x → +y → +z is, is per brick: corner (x, y, z) exists when the bricks of
// corners (0, 0, 0), (x, 0, 0), (x, y, 0) and (x, y, z) are active. Open: a ⌊c⌋ beyond the
// key range has no brick (all corners −1, as the walk's look-up answers).
__device__ __forceinline__ void corner_cells_fast(const Home& H, int closed, const int s[3], const float at[3],
                                                  int idx[8], float t[3])
{
    int i0[3], up[3], cross[3];
    bool inside = true;
    for (int a = 0; a < 3; ++a) {
        corner_axis(a, at, closed, s, inside, i0, up, t);
        cross[a] = up[a] && (i0[a] & 7) == 7;  // the upper corner in the next brick
    }
    if (!inside) {
        for (int q = 0; q < 8; ++q) idx[q] = -1;
        return;
    }
    const int b[3] = {i0[0] >> 3, i0[1] >> 3, i0[2] >> 3};
    int slot[8] = {-1, -1, -1, -1, -1, -1, -1, -1};  // slot[r]: brick b + (r & 1, r >> 1 & 1, r >> 2), crossed axes only
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int x = r & 1, y = (r >> 1) & 1, z = r >> 2;
        if ((x && !cross[0]) || (y && !cross[1]) || (z && !cross[2])) continue;
        slot[r] = home_slot(H, b[0] + x, b[1] + y, b[2] + z);
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const int x = q & 1, y = (q >> 1) & 1, z = q >> 2;
        const int rx = x & cross[0], ry = (y & cross[1]) << 1, rz = (z & cross[2]) << 2;
        if (pick8(slot, 0) < 0 || pick8(slot, rx) < 0 || pick8(slot, rx | ry) < 0 || pick8(slot, rx | ry | rz) < 0) {
            idx[q] = -1;
            continue;
        }
        const int i = i0[0] + (x & up[0]), j = i0[1] + (y & up[1]), k = i0[2] + (z & up[2]);
        idx[q] = pick8(slot, rx | ry | rz) * SPARSE_CELLS + (((k & 7) << 6) | ((j & 7) << 3) | (i & 7));
    }
}

// sample_faces_brick (flip_sparse_g2p.cu) with corner_cells_fast: the same corners, fractions and
// blends; with *old* (three channels) also those at the same corners into out_old (g2p_advect_bricks,
// the air band's kernels).
__device__ __forceinline__ void sample_faces_fast(const float* __restrict__ u, const float* __restrict__ v,
                                                  const float* __restrict__ w, const Home& H, int closed,
                                                  const int n[3], const float g[3], float out[3], float* grad,
                                                  const float* const* old = nullptr, float* out_old = nullptr)
{
    const float* const f[3] = {u, v, w};
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const int s[3] = {n[0] + (a == 0), n[1] + (a == 1), n[2] + (a == 2)};
        const float at[3] = {a == 0 ? g[0] : g[0] - 0.5f, a == 1 ? g[1] : g[1] - 0.5f, a == 2 ? g[2] : g[2] - 0.5f};
        int idx[8];
        float t[3];
        corner_cells_fast(H, closed, s, at, idx, t);
        out[a] = blend_corners(f[a], idx, t, grad ? grad + 3 * a : nullptr);
        if (old) out_old[a] = blend_corners(old[a], idx, t, nullptr);
    }
}
