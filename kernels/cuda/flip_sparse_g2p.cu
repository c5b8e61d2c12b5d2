// G2P and advection of the sparse FLIP solver (seed 003 Alg. 1; kernels/flip/sparse_gpu.py
// g2p_advect launches them, kernels/flip/sparse_transfer.py g2p_advect is the NumPy
// reference, mirrored term by term; compiled with --fmad=false so each float operation rounds
// as NumPy's does). Layout and brick tables: flip_sparse_transfer.cu's notes.
//
// Two kernels, the same arithmetic and the same bits (sparse_gpu.G2P_KERNELS):
//   g2p_advect_bricks  (default) each corner's cell from the particle's home brick table with
//                      32-bit index arithmetic: per axis the corner's brick is the lower
//                      corner's or the next one (when the lower lies on the brick's last
//                      layer), so a sample looks up 1–8 distinct bricks (mostly 1) instead of
//                      walking 7 cell steps, each a table read, in 64-bit integers; the home
//                      brick from the brick index (closed) in one load, no bins' cell read.
//   g2p_advect_sparse  the earlier walk (corner_cells), kept for A/B timing.
//
// Constants from Python (-D): AIR, FLUID, SOLID (kernels/grid/mac.py), PUSH_EPSILON
// (kernels/flip/particles.py).

#include "voxfx_g2p_bricks.cuh"  // corner_axis, blend_corners (trilinear_blend: sample.blend's order)
#include "voxfx_g2p.cuh"  // g2p_velocity: the FLIP/PIC blend and APIC's C
#include "voxfx_push.cuh"  // nearest_free_point: the push-out's neighbour search
#include "voxfx_sparse.cuh"  // keys, slots, binary search
#include "voxfx_sparse_index.cuh"  // the brick index
#include "voxfx_sparse_walk.cuh"  // walk_axis, walk_corners: corner_cells' walk

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

// SparseMacGrid.sample's look-up on the lattice of box s (closed; else unbounded) at
// (fx, fy, fz): per axis closed c clamped to [0, s − 1], i0 = max(min(⌊c⌋, s − 2), 0),
// i1 = min(i0 + 1, s − 1); open c (NaN → 0), i0 = ⌊c⌋, i1 = i0 + 1; the 8 corner cells
// (−1: reads 0) walked from i0 by +x, +y, +z steps (a missing cell on the way stays
// missing, as grid.nbr's walk), and the fractions t.
__device__ void corner_cells(const Sampler& S, const int s[3], const float at[3], int idx[8], float t[3])
{
    long long i0[3];
    bool same[3];
    for (int a = 0; a < 3; ++a) walk_axis(at[a], S.closed, s[a], i0[a], same[a], t[a]);
    idx[0] = locate(S.b, i0[0], i0[1], i0[2], S.home, S.hb);
    walk_corners(S.b.nbr27, same, idx);
}

// SparseMacGrid.sample_faces: (u, v, w) at g (cell units), grad rows ∂u_a/∂(x, y, z); with
// old (three channels), also those at the same corners into out_old.
__device__ void sample_faces_brick(const float* __restrict__ u, const float* __restrict__ v,
                                   const float* __restrict__ w, const Sampler& S, const float g[3], float out[3],
                                   float* grad, const float* const* old = nullptr, float* out_old = nullptr)
{
    const float* const f[3] = {u, v, w};
    for (int a = 0; a < 3; ++a) {
        const int s[3] = {S.n[0] + (a == 0), S.n[1] + (a == 1), S.n[2] + (a == 2)};
        const float at[3] = {a == 0 ? g[0] : g[0] - 0.5f, a == 1 ? g[1] : g[1] - 0.5f, a == 2 ? g[2] : g[2] - 0.5f};
        int idx[8];
        float t[3];
        corner_cells(S, s, at, idx, t);
        out[a] = blend_corners(f[a], idx, t, grad ? grad + 3 * a : nullptr);
        if (old) out_old[a] = blend_corners(old[a], idx, t, nullptr);
    }
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
// not finite: back to `fallback`.
__device__ void push_out_brick(float x[3], const float fallback[3], const unsigned char* __restrict__ solid,
                               const Sampler& S, const float o[3], float h, float inv_h)
{
    if (!(isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]))) {
        for (int a = 0; a < 3; ++a) x[a] = fallback[a];
        return;
    }
    float g[3], gc[3];
    long long cell[3];
    bool moved = false;
    for (int a = 0; a < 3; ++a) {
        g[a] = (x[a] - o[a]) * inv_h;
        gc[a] = S.closed ? fminf(fmaxf(g[a], PUSH_EPSILON), (float)S.n[a] - PUSH_EPSILON) : g[a];
        moved = moved || gc[a] != g[a];
        cell[a] = (long long)floorf(gc[a]);
        if (S.closed) cell[a] = min(cell[a], (long long)S.n[a] - 1);
    }
    if (solid_at(solid, S, cell)) {
        float target[3];
        const bool found = nearest_free_point(gc, cell, [&](const long long* nb) {
            const bool in_box = nb[0] >= 0 && nb[0] < S.n[0] && nb[1] >= 0 && nb[1] < S.n[1] && nb[2] >= 0 &&
                                nb[2] < S.n[2];
            return (in_box || !S.closed) && !solid_at(solid, S, nb);
        }, target);
        if (!found) {
            for (int a = 0; a < 3; ++a) x[a] = fallback[a];
            return;
        }
        for (int a = 0; a < 3; ++a) gc[a] = target[a];
        moved = true;
    }
    if (moved)
        for (int a = 0; a < 3; ++a) x[a] = o[a] + gc[a] * h;
}

// G2P and advection fused, one thread per particle (sparse_transfer.g2p_advect):
//   G2P (seed 003 Alg. 1): v ← flip·(v + (u − u_old)(x)) + pic·u(x); APIC: C_a ← ∇u_a(x)/h.
//   Advection: RK2 midpoint x_mid = x + ½Δt·u(x), x' = x + Δt·u(x_mid), then push_out_brick.
// With P2G's bins of these positions (use_bins = 1: `order`, the counting sort, and
// `cell_of`, each particle's pool cell, `cells` where it has none) thread t updates
// particle order[t]: a warp's particles lie in a few neighbouring cells, so their ~100
// face and table reads each hit the same cache lines instead of random ones across the
// pool (the particles' 24 B read and written per particle scatter instead); and the home
// brick is cell_of's slot (count_particles_sparse found it from the same ⌊(x − o)/h⌋)
// instead of a binary search. Each particle's arithmetic is the same: the same bits.
extern "C" __global__ void g2p_advect_sparse(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ c,
                                             long long n, int apic, const float* __restrict__ u,
                                             const float* __restrict__ v, const float* __restrict__ w,
                                             const float* __restrict__ old_u, const float* __restrict__ old_v,
                                             const float* __restrict__ old_w, const unsigned char* __restrict__ solid,
                                             const long long* __restrict__ keys, const int* __restrict__ slots,
                                             long long n_keys, const int* __restrict__ nbr27, int closed, int nx,
                                             int ny, int nz, float ox, float oy, float oz, float h, float inv_h,
                                             float flip, float pic, float dt, float half_dt,
                                             const int* __restrict__ order, const int* __restrict__ cell_of,
                                             long long cells, int use_bins, int centred,
                                             const float* __restrict__ b_u, const float* __restrict__ b_v,
                                             const float* __restrict__ b_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const long long p = use_bins ? (long long)order[t] : t;
    const float o[3] = {ox, oy, oz};
    const float x0[3] = {pos[3 * p], pos[3 * p + 1], pos[3 * p + 2]};
    const float g[3] = {(x0[0] - ox) * inv_h, (x0[1] - oy) * inv_h, (x0[2] - oz) * inv_h};
    bool finite, inside;
    Sampler S = sampler_at(keys, slots, n_keys, nbr27, closed, nx, ny, nz, g, finite, inside);
    if (finite) {
        if (use_bins) {
            const int at = cell_of[p];
            S.home = at < cells ? at >> 9 : -1;
        } else {
            S.home = sparse_slot(keys, slots, n_keys, sparse_key_of_voxel(8 * S.hb[0], 8 * S.hb[1], 8 * S.hb[2]));
        }
    }
    float un[3], uo[3], grad[9];
    const float* const old[3] = {old_u, old_v, old_w};
    sample_faces_brick(u, v, w, S, g, un, apic ? grad : nullptr, old, uo);  // new and old at one look-up
    g2p_velocity(vel, c, p, apic, un, uo, grad, flip, pic, inv_h);  // seed 003 Alg. 1
    // centred (the time-centred advection, b = u_n): x_m = x + ½Δt·u_n(x),
    // x' = x + Δt·½(u_n + u_{n+1})(x_m)
    float xm[3], gm[3], v2[3], x1[3], b1[3], b2[3];
    const float* const before[3] = {b_u, b_v, b_w};
    if (centred) sample_faces_brick(b_u, b_v, b_w, S, g, b1, nullptr);
    for (int a = 0; a < 3; ++a) {
        xm[a] = x0[a] + half_dt * (centred ? b1[a] : un[a]);
        gm[a] = (xm[a] - o[a]) * inv_h;
    }
    sample_faces_brick(u, v, w, S, gm, v2, nullptr, centred ? before : nullptr, b2);
    if (centred)
        for (int a = 0; a < 3; ++a) v2[a] = 0.5f * (v2[a] + b2[a]);
    for (int a = 0; a < 3; ++a) x1[a] = x0[a] + dt * v2[a];
    push_out_brick(x1, x0, solid, S, o, h, inv_h);
    for (int a = 0; a < 3; ++a) pos[3 * p + a] = x1[a];
}


// ------------------------------------------------------------------------------ g2p_advect_bricks

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

// sample_faces_brick with corner_cells_fast: the same corners, fractions and blends.
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

// g2p_advect_sparse's update with corner_cells_fast (file notes): one thread per particle,
// thread t on particle order[t] where use_order (P2G's counting sort: a warp's particles in
// a few neighbouring cells, so their face reads share cache lines), else t. The home brick
// is ⌊(x − o)/h⌋'s, its slot from the brick index (one load, closed) or a binary search.
// The push-out is push_out_brick's, on the same home.
extern "C" __global__ void g2p_advect_bricks(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ c,
                                             long long n, int apic, const float* __restrict__ u,
                                             const float* __restrict__ v, const float* __restrict__ w,
                                             const float* __restrict__ old_u, const float* __restrict__ old_v,
                                             const float* __restrict__ old_w, const unsigned char* __restrict__ solid,
                                             const long long* __restrict__ keys, const int* __restrict__ slots,
                                             long long n_keys, const int* __restrict__ nbr27, BRICK_INDEX_ARGS,
                                             int closed, int nx, int ny, int nz, float ox, float oy, float oz,
                                             float h, float inv_h, float flip, float pic, float dt, float half_dt,
                                             const int* __restrict__ order, int use_order, int centred,
                                             const float* __restrict__ b_u, const float* __restrict__ b_v,
                                             const float* __restrict__ b_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const long long p = use_order ? (long long)order[t] : t;
    const float o[3] = {ox, oy, oz};
    const float x0[3] = {pos[3 * p], pos[3 * p + 1], pos[3 * p + 2]};
    const float g[3] = {(x0[0] - ox) * inv_h, (x0[1] - oy) * inv_h, (x0[2] - oz) * inv_h};
    const int dims[3] = {nx, ny, nz};
    Home H{keys, slots, n_keys, nbr27, -1, {0, 0, 0}};
    bool finite, inside;  // push_out_brick's Sampler: the same home
    Sampler S = sampler_at(keys, slots, n_keys, nbr27, closed, nx, ny, nz, g, finite, inside);
    if (inside) {  // (beyond the key range: no brick, every look-up searches and misses)
        for (int a = 0; a < 3; ++a) H.hb[a] = (int)S.hb[a];
        H.slot = S.home = INDEXED_SLOT(S.hb[0], S.hb[1], S.hb[2]);
    }
    float un[3], uo[3], grad[9];
    const float* const old[3] = {old_u, old_v, old_w};
    sample_faces_fast(u, v, w, H, closed, dims, g, un, apic ? grad : nullptr, old, uo);  // new and old at one look-up
    g2p_velocity(vel, c, p, apic, un, uo, grad, flip, pic, inv_h);  // seed 003 Alg. 1
    float xm[3], gm[3], v2[3], x1[3], b1[3], b2[3];  // centred: as g2p_advect_sparse
    const float* const before[3] = {b_u, b_v, b_w};
    if (centred) sample_faces_fast(b_u, b_v, b_w, H, closed, dims, g, b1, nullptr);
    for (int a = 0; a < 3; ++a) {
        xm[a] = x0[a] + half_dt * (centred ? b1[a] : un[a]);
        gm[a] = (xm[a] - o[a]) * inv_h;
    }
    sample_faces_fast(u, v, w, H, closed, dims, gm, v2, nullptr, centred ? before : nullptr, b2);
    if (centred)
        for (int a = 0; a < 3; ++a) v2[a] = 0.5f * (v2[a] + b2[a]);
    for (int a = 0; a < 3; ++a) x1[a] = x0[a] + dt * v2[a];
    push_out_brick(x1, x0, solid, S, o, h, inv_h);
    for (int a = 0; a < 3; ++a) pos[3 * p + a] = x1[a];
}
