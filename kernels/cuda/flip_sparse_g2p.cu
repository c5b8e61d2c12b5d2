// G2P and advection of the sparse FLIP solver (seed 003 Alg. 1; kernels/flip/sparse_g2p_gpu.py
// g2p_advect launches them, kernels/flip/sparse_transfer.py g2p_advect is the NumPy
// reference, mirrored term by term; compiled with --fmad=false so each float operation rounds
// as NumPy's does). Layout and brick tables: flip_sparse_transfer.cu's notes.
//
// Two kernels, the same arithmetic and the same bits (sparse_g2p_gpu.G2P_KERNELS):
//   g2p_advect_bricks  (the default before flip_sparse_g2p_block.cu) each corner's cell from
//                      the particle's home brick table with 32-bit index arithmetic: per
//                      axis the corner's brick is the lower corner's or the next one (when the lower lies on the brick's last
//                      layer), so a sample looks up 1–8 distinct bricks (mostly 1) instead of
//                      walking 7 cell steps, each a table read, in 64-bit integers; the home
//                      brick from the brick index (closed) in one load, no bins' cell read.
//   g2p_advect_sparse  the earlier walk (corner_cells), kept for A/B timing.
//
// Constants from Python (-D): AIR, FLUID, SOLID (kernels/grid/mac.py), PUSH_EPSILON
// (kernels/flip/particles.py).

#include "voxfx_g2p_bricks.cuh"  // corner_axis, blend_corners (trilinear_blend: sample.blend's order)
#include "voxfx_g2p.cuh"  // g2p_velocity: the FLIP/PIC blend and APIC's C
#include "voxfx_g2p_home.cuh"  // Sampler, push_out_brick, Home, corner_cells_fast
#include "voxfx_push.cuh"  // nearest_free_point: the push-out's neighbour search
#include "voxfx_sparse.cuh"  // keys, slots, binary search
#include "voxfx_sparse_index.cuh"  // the brick index
#include "voxfx_sparse_walk.cuh"  // walk_axis, walk_corners: corner_cells' walk

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

// sample_faces_fast: voxfx_g2p_home.cuh (the air band's kernels sample with it too).

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
