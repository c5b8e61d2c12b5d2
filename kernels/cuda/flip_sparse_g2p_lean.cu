// G2P and advection of the sparse FLIP solver, lean build (seed 003 Alg. 1; issue 24, helper
// i24p; kernels/flip/sparse_g2p_gpu.py g2p_advect launches it for VOXFX_SPARSE_G2P_KERNEL=lean, and
// for the default "auto" on the time-centred advection without APIC; kernels/flip/
// sparse_transfer.py g2p_advect is the NumPy reference; compiled with --fmad=false). The
// arithmetic of flip_sparse_g2p.cu's g2p_advect_bricks operation for operation (the same
// corners, fractions, blends and push-out: the same bits); what differs is the code around it:
//   * the binary search for a brick beyond the home brick's 27 is one loop over the missed
//     corner bricks (g2p_advect_bricks inlines a search per corner brick, sample and
//     component: ~11,000 PTX lines), and the push-out's search of the 26 neighbours (only for
//     a point inside a SOLID cell) is out of line (__noinline__);
//   * a corner's "walk" test (its cell exists when the bricks of corners (0, 0, 0),
//     (x, 0, 0), (x, y, 0) and (x, y, z) do) is bit arithmetic on a mask of the active
//     corner bricks instead of four 8-way selects;
//   * the time-centred advection samples u_n at x on the corners already found for u_{n+1}
//     and u_old (g2p_advect_bricks looks them up twice), as a template instance of its own;
//   * no array of pointers is selected at run time (g2p_advect_bricks' `centred ? before :
//     nullptr` puts that array in local memory).
//
// Measured (H100 80GB HBM3, 8M dam break after 4 substeps, 8,000,033 particles, 3,258 bricks;
// bench/flip_sparse_transfers_ab.py, the kernels alternating in one process, medians of 7, the
// same bits every time), ms:
//
//   case                          g2p_advect_bricks   lean (2 blocks, 64 reg.)   lean, 1 block (79 reg.)
//   end of substep, FLIP 0.95           0.908               1.327                     1.524
//   time-centred, FLIP 0.95             1.671               1.349                     1.593
//   APIC, end of substep                1.449               2.136                     2.172
//
// So sparse_g2p_gpu's "auto" runs this kernel only time-centred without C. ncu (one launch each,
// end of substep): both kernels issue-bound, not memory-bound (bricks: 630M warp instructions,
// IPC 2.83, the ALU pipe 53% busy, 27% of the memory throughput, L1 hits 85%; lean: 750M
// instructions, IPC 2.64, 64 registers with 32 B of spill stores at 2 blocks of 512 an SM). The
// bit-mask walk and the search loop run more instructions than the selects they replace; what
// made the time-centred case faster is its one corner look-up for three fields (and no
// local-memory pointer array).
//
// Layout and brick tables: flip_sparse_transfer.cu's notes. Constants from Python (-D):
// AIR, FLUID, SOLID, PUSH_EPSILON.

#include "voxfx_g2p_bricks.cuh"  // corner_axis, blend_corners (trilinear_blend: sample.blend's order)
#include "voxfx_g2p.cuh"  // g2p_velocity: the FLIP/PIC blend and APIC's C
#include "voxfx_push.cuh"  // push_out_point, nearest_free_point: the push-out
#include "voxfx_sparse.cuh"  // keys, slots, binary search
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS

// Slot of brick (bx, by, bz) by binary search (−1: inactive or beyond the key range).
__device__ __forceinline__ int lean_search(const long long* __restrict__ keys, const int* __restrict__ slots,
                                        long long n, long long bx, long long by, long long bz)
{
    return sparse_slot(keys, slots, n, sparse_key_of_voxel(8 * bx, 8 * by, 8 * bz));
}

// A point's home brick: its slot (−1: none, or beyond the key range) and coordinates, and
// the tables for the other bricks.
struct LeanHome {
    const long long* __restrict__ keys;
    const int* __restrict__ slots;
    long long n;
    const int* __restrict__ nbr27;
    int slot;
    long long hb[3];
};

// Slot of brick (bx, by, bz): home's table when it is one of home's 27, else the search.
__device__ __forceinline__ int lean_slot(const LeanHome& H, long long bx, long long by, long long bz)
{
    const long long dx = bx - H.hb[0], dy = by - H.hb[1], dz = bz - H.hb[2];
    if (H.slot >= 0 && dx >= -1 && dx <= 1 && dy >= -1 && dy <= 1 && dz >= -1 && dz <= 1)
        return H.nbr27[27 * H.slot + sparse_offset_index((int)dx, (int)dy, (int)dz)];
    return lean_search(H.keys, H.slots, H.n, bx, by, bz);
}

// corner_cells_fast (flip_sparse_g2p.cu) on component a's lattice of box s at `at`: the 8
// corner cells (−1 reads 0) and the fractions t.
__device__ __forceinline__ void lean_corners(const LeanHome& H, int closed, const int s[3], const float at[3],
                                             int idx[8], float t[3])
{
    int i0[3], up[3];
    unsigned cross = 0u;  // bit a: the corners along a lie in two bricks
    bool inside = true;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        corner_axis(a, at, closed, s, inside, i0, up, t);
        cross |= (unsigned)(up[a] && (i0[a] & 7) == 7) << a;
    }
    if (!inside) {
#pragma unroll
        for (int q = 0; q < 8; ++q) idx[q] = -1;
        return;
    }
    const int b[3] = {i0[0] >> 3, i0[1] >> 3, i0[2] >> 3};
    int slot[8];
    unsigned miss = 0u;  // bit r: brick b + r's bits (r ⊆ cross) is not in home's table
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        slot[r] = -1;
        if ((r & cross) != (unsigned)r) continue;
        const int dx = b[0] + (r & 1) - (int)H.hb[0], dy = b[1] + ((r >> 1) & 1) - (int)H.hb[1],
                  dz = b[2] + (r >> 2) - (int)H.hb[2];
        if (H.slot >= 0 && (unsigned)(dx + 1) <= 2u && (unsigned)(dy + 1) <= 2u && (unsigned)(dz + 1) <= 2u)
            slot[r] = H.nbr27[27 * H.slot + sparse_offset_index(dx, dy, dz)];
        else
            miss |= 1u << r;
    }
#pragma unroll 1
    for (int r = 0; r < 8; ++r) {  // the rare searches: one copy of the search, not one per brick
        if (!((miss >> r) & 1u)) continue;
        const int s = lean_search(H.keys, H.slots, H.n, b[0] + (r & 1), b[1] + ((r >> 1) & 1), b[2] + (r >> 2));
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (k == r) slot[k] = s;  // (no indexed store: slot stays in registers)
    }
    unsigned active = 0u;  // bit r: brick b + r's bits is active
#pragma unroll
    for (int r = 0; r < 8; ++r) active |= (unsigned)(slot[r] >= 0) << r;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const unsigned r1 = q & cross & 1u, r2 = q & cross & 3u, r3 = q & cross;
        const unsigned walk = active & (active >> r1) & (active >> r2) & (active >> r3) & 1u;
        // slot[r3] by selects on r3's bits (the bits q lacks are known 0: the selects fold)
        const int sx0 = (r3 & 1u) ? slot[1] : slot[0], sx1 = (r3 & 1u) ? slot[3] : slot[2],
                  sx2 = (r3 & 1u) ? slot[5] : slot[4], sx3 = (r3 & 1u) ? slot[7] : slot[6];
        const int sy0 = (r3 & 2u) ? sx1 : sx0, sy1 = (r3 & 2u) ? sx3 : sx2;
        const int s3 = (r3 & 4u) ? sy1 : sy0;
        const int i = i0[0] + ((q & 1) & up[0]), j = i0[1] + (((q >> 1) & 1) & up[1]),
                  k = i0[2] + ((q >> 2) & up[2]);
        idx[q] = walk ? s3 * SPARSE_CELLS + (((k & 7) << 6) | ((j & 7) << 3) | (i & 7)) : -1;
    }
}

// The velocity of faces (u, v, w) at g (cell units) into out, with grad (rows ∂u_a/∂(x, y,
// z)) unless null; with SECOND, also faces (u2, v2, w2) at the same corners into out2, with
// THIRD (u3, v3, w3) into out3.
template <bool SECOND, bool THIRD>
__device__ __forceinline__ void lean_sample(const LeanHome& H, int closed, const int n[3], const float g[3],
                                            const float* __restrict__ u, const float* __restrict__ v,
                                            const float* __restrict__ w, float out[3], float grad[9],
                                            const float* __restrict__ u2, const float* __restrict__ v2,
                                            const float* __restrict__ w2, float out2[3],
                                            const float* __restrict__ u3, const float* __restrict__ v3,
                                            const float* __restrict__ w3, float out3[3])
{
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const int s[3] = {n[0] + (a == 0), n[1] + (a == 1), n[2] + (a == 2)};
        const float at[3] = {a == 0 ? g[0] : g[0] - 0.5f, a == 1 ? g[1] : g[1] - 0.5f, a == 2 ? g[2] : g[2] - 0.5f};
        int idx[8];
        float t[3];
        lean_corners(H, closed, s, at, idx, t);
        out[a] = blend_corners(a == 0 ? u : a == 1 ? v : w, idx, t, grad ? grad + 3 * a : nullptr);
        if (SECOND) out2[a] = blend_corners(a == 0 ? u2 : a == 1 ? v2 : w2, idx, t, nullptr);
        if (THIRD) out3[a] = blend_corners(a == 0 ? u3 : a == 1 ? v3 : w3, idx, t, nullptr);
    }
}

// Solid at lattice cell c (an inactive brick is not solid).
__device__ __forceinline__ bool lean_solid(const unsigned char* __restrict__ solid, const LeanHome& H,
                                           const long long c[3])
{
    const int s = lean_slot(H, c[0] >> 3, c[1] >> 3, c[2] >> 3);
    return s >= 0 && solid[s * SPARSE_CELLS + sparse_local(c[0], c[1], c[2])];
}

// push_out_brick's way out of a SOLID cell (flip_sparse_g2p.cu): the nearest free point of
// the 26 neighbours into gc; false where none is free. Out of line: rarely reached.
__device__ __noinline__ bool lean_rescue(const unsigned char* __restrict__ solid, LeanHome H, int closed, int nx,
                                         int ny, int nz, float gc0, float gc1, float gc2, long long c0,
                                         long long c1, long long c2, float* target)
{
    const float gc[3] = {gc0, gc1, gc2};
    const long long cell[3] = {c0, c1, c2};
    return nearest_free_point(gc, cell, [&](const long long* nb) {
        const bool in_box = nb[0] >= 0 && nb[0] < nx && nb[1] >= 0 && nb[1] < ny && nb[2] >= 0 && nb[2] < nz;
        return (in_box || !closed) && !lean_solid(solid, H, nb);
    }, target);
}

// push_out_brick (flip_sparse_g2p.cu): closed, clamped PUSH_EPSILON cells inside the box;
// out of a SOLID cell (lean_rescue); not finite or no free neighbour: back to fallback
// (voxfx_push.cuh push_out_point, with the lean home's look-ups).
__device__ __forceinline__ void lean_push_out(float x[3], const float fallback[3],
                                              const unsigned char* __restrict__ solid, const LeanHome& H,
                                              int closed, const int n[3], const float o[3], float h, float inv_h)
{
    push_out_point<long long>(x, fallback, closed, n, o, h, inv_h, [&](const long long* c) {
        return lean_solid(solid, H, c);
    }, [&](const float* gc, const long long* cell, float* target) {
        return lean_rescue(solid, H, closed, n[0], n[1], n[2], gc[0], gc[1], gc[2], cell[0], cell[1], cell[2], target);
    });
}

// One particle's update: g2p_advect_bricks' (flip_sparse_g2p.cu) step by step.
template <bool CENTRED>
__device__ __forceinline__ void lean_particle(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ c,
                                              long long p, int apic, const float* __restrict__ u,
                                              const float* __restrict__ v, const float* __restrict__ w,
                                              const float* __restrict__ old_u, const float* __restrict__ old_v,
                                              const float* __restrict__ old_w, const unsigned char* __restrict__ solid,
                                              LeanHome H, int closed, const int dims[3], const float o[3], float h,
                                              float inv_h, float flip, float pic, float dt, float half_dt,
                                              const float* __restrict__ b_u, const float* __restrict__ b_v,
                                              const float* __restrict__ b_w)
{
    const float x0[3] = {pos[3 * p], pos[3 * p + 1], pos[3 * p + 2]};
    const float g[3] = {(x0[0] - o[0]) * inv_h, (x0[1] - o[1]) * inv_h, (x0[2] - o[2]) * inv_h};
    float un[3], uo[3], b1[3], grad[9];
    // G2P (seed 003 Alg. 1): u_{n+1}, u_old (and u_n, centred) at one look-up of x's corners
    lean_sample<true, CENTRED>(H, closed, dims, g, u, v, w, un, apic ? grad : nullptr, old_u, old_v, old_w, uo, b_u,
                               b_v, b_w, b1);
    g2p_velocity(vel, c, p, apic, un, uo, grad, flip, pic, inv_h);  // seed 003 Alg. 1
    // RK2: x_m = x + ½Δt·u(x), x' = x + Δt·u(x_m); centred (b = u_n): x_m = x + ½Δt·u_n(x),
    // x' = x + Δt·½(u_n + u_{n+1})(x_m)
    float gm[3], v2[3], b2[3], x1[3];
    for (int a = 0; a < 3; ++a) gm[a] = (x0[a] + half_dt * (CENTRED ? b1[a] : un[a]) - o[a]) * inv_h;
    lean_sample<CENTRED, false>(H, closed, dims, gm, u, v, w, v2, nullptr, b_u, b_v, b_w, b2, nullptr,
                                       nullptr, nullptr, nullptr);
    if (CENTRED)
        for (int a = 0; a < 3; ++a) v2[a] = 0.5f * (v2[a] + b2[a]);
    for (int a = 0; a < 3; ++a) x1[a] = x0[a] + dt * v2[a];
    lean_push_out(x1, x0, solid, H, closed, dims, o, h, inv_h);
    for (int a = 0; a < 3; ++a) pos[3 * p + a] = x1[a];
}

// g2p_advect_bricks' arguments and results (flip_sparse_g2p.cu): one thread per particle,
// thread t on particle order[t] where use_order, else t.
#ifndef LEAN_MIN_BLOCKS  // blocks of G2P_THREADS an SM (sparse_g2p_gpu.G2P_LEAN_MIN_BLOCKS): registers ≤ 64 at 2
#define LEAN_MIN_BLOCKS 2
#endif
#ifndef LEAN_THREADS  // sparse_g2p_gpu.G2P_THREADS
#define LEAN_THREADS 512
#endif

extern "C" __global__ void __launch_bounds__(LEAN_THREADS, LEAN_MIN_BLOCKS) g2p_advect_lean(float* __restrict__ pos, float* __restrict__ vel, float* __restrict__ c,
                                           long long n, int apic, const float* __restrict__ u,
                                           const float* __restrict__ v, const float* __restrict__ w,
                                           const float* __restrict__ old_u, const float* __restrict__ old_v,
                                           const float* __restrict__ old_w, const unsigned char* __restrict__ solid,
                                           const long long* __restrict__ keys, const int* __restrict__ slots,
                                           long long n_keys, const int* __restrict__ nbr27, BRICK_INDEX_ARGS,
                                           int closed, int nx, int ny, int nz, float ox, float oy, float oz, float h,
                                           float inv_h, float flip, float pic, float dt, float half_dt,
                                           const int* __restrict__ order, int use_order, int centred,
                                           const float* __restrict__ b_u, const float* __restrict__ b_v,
                                           const float* __restrict__ b_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const long long p = use_order ? (long long)order[t] : t;
    const float o[3] = {ox, oy, oz};
    const int dims[3] = {nx, ny, nz};
    LeanHome H{keys, slots, n_keys, nbr27, -1, {0, 0, 0}};
    // sampler_at's home (flip_sparse_g2p.cu): ⌊g⌋ >> 3 where g is finite, a slot only where
    // every ⌊g_a⌋ lies within the key range
    const float g[3] = {(pos[3 * p] - ox) * inv_h, (pos[3 * p + 1] - oy) * inv_h, (pos[3 * p + 2] - oz) * inv_h};
    bool inside = isfinite(g[0]) && isfinite(g[1]) && isfinite(g[2]);
    if (inside)
        for (int a = 0; a < 3; ++a) {
            const float f = floorf(g[a]);
            inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
            H.hb[a] = ((long long)f) >> 3;
        }
    if (inside) H.slot = INDEXED_SLOT(H.hb[0], H.hb[1], H.hb[2]);  // the brick index (one load), else the search
    if (centred)
        lean_particle<true>(pos, vel, c, p, apic, u, v, w, old_u, old_v, old_w, solid, H, closed, dims, o, h, inv_h,
                            flip, pic, dt, half_dt, b_u, b_v, b_w);
    else
        lean_particle<false>(pos, vel, c, p, apic, u, v, w, old_u, old_v, old_w, solid, H, closed, dims, o, h, inv_h,
                             flip, pic, dt, half_dt, b_u, b_v, b_w);
}
