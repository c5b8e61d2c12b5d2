// G2P and advection of the sparse FLIP solver with the time-centred advection's u_n sampled
// on shared corners (seed 003 Alg. 1; issue 24, helper i24p; kernels/flip/sparse_gpu.py
// g2p_advect launches it for VOXFX_SPARSE_G2P_KERNEL=shared, kernels/flip/sparse_transfer.py
// g2p_advect is the NumPy reference; compiled with --fmad=false). flip_sparse_g2p.cu's
// g2p_advect_bricks operation for operation (its corner look-up, blends and push-out: the
// same bits), except that:
//   * the time-centred advection samples u_n at x on the corners already found for u_{n+1}
//     and u_old (g2p_advect_bricks looks x's corners up twice, the three components each);
//   * the fields are passed one by one: g2p_advect_bricks picks an array of pointers at run
//     time (`centred ? before : nullptr`), which puts that array in local memory.
// At the end of the substep (not centred) the work is g2p_advect_bricks'.
//
// H100 80GB HBM3, 8M dam break after 4 substeps (bench/flip_sparse_transfers_ab.py, the kernels
// alternating in one process, medians of 7): see sparse_gpu.py's module notes.
//
// Measured and not kept (same call, the same bits): a "lean" kernel with the binary searches
// and the push-out's rescue out of line and the corners' walk test as bit masks (PTX 11,100
// → 5,700 lines a variant): 1.327 against 0.908 ms at the end of the substep, 2.136 against
// 1.449 with APIC (ncu: 750M against 630M warp instructions, 64 registers with spills at 2
// blocks of 512 an SM, 79 and 1 block without: 1.524), 1.349 against 1.671 time-centred. Both
// G2P kernels issue-bound (IPC 2.6–2.8, the ALU pipe ~52% busy, L1 hits 85–92%), not bound
// by memory (27% of its throughput): fewer instructions a particle, not fewer bytes, is
// what speeds them.

#ifndef VOXFX_SPARSE_G2P_CU
#include "flip_sparse_g2p.cu"  // Home, Sampler, sampler_at, corner_cells_fast, blend_corners, push_out_brick
#endif

// corner_cells_fast (flip_sparse_g2p.cu) without its selects and branches per corner: the
// walk's rule (corner (x, y, z) exists where the bricks of corners (0, 0, 0), (x, 0, 0),
// (x, y, 0) and (x, y, z) are active) as bit arithmetic on a mask of the active corner
// bricks, the corner's brick slot by selects on the bits of q & cross (those q lacks fold
// away). The same cells.
__device__ __forceinline__ void corner_cells_masks(const Home& H, int closed, const int s[3], const float at[3],
                                                   int idx[8], float t[3])
{
    int i0[3], up[3];
    unsigned cross = 0u;  // bit a: the corners along a lie in two bricks
    bool inside = true;
#pragma unroll
    for (int a = 0; a < 3; ++a) {  // corner_cells_fast's i0, up and t
        float c = at[a];
        if (closed) {
            c = fminf(fmaxf(c, 0.0f), (float)(s[a] - 1));
            i0[a] = max(min((int)c, s[a] - 2), 0);
            up[a] = min(i0[a] + 1, s[a] - 1) != i0[a];
        } else {
            c = isfinite(c) ? c : 0.0f;
            const float f = floorf(c);
            inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
            i0[a] = inside ? (int)f : 0;
            up[a] = 1;
        }
        t[a] = c - (float)i0[a];
        if (!closed && !inside) t[a] = c - floorf(c);
        cross |= (unsigned)(up[a] && (i0[a] & 7) == 7) << a;
    }
    if (!inside) {
#pragma unroll
        for (int q = 0; q < 8; ++q) idx[q] = -1;
        return;
    }
    const int b[3] = {i0[0] >> 3, i0[1] >> 3, i0[2] >> 3};
    int slot[8];
    unsigned active = 0u;  // bit r: brick b + r's bits is active (r ⊆ cross)
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        slot[r] = -1;
        if ((r & cross) != (unsigned)r) continue;
        slot[r] = home_slot(H, b[0] + (r & 1), b[1] + ((r >> 1) & 1), b[2] + (r >> 2));
        active |= (unsigned)(slot[r] >= 0) << r;
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const unsigned r3 = q & cross, r2 = r3 & 3u, r1 = r3 & 1u;
        const unsigned walk = active & (active >> r1) & (active >> r2) & (active >> r3) & 1u;
        const int sx0 = (r3 & 1u) ? slot[1] : slot[0], sx1 = (r3 & 1u) ? slot[3] : slot[2],
                  sx2 = (r3 & 1u) ? slot[5] : slot[4], sx3 = (r3 & 1u) ? slot[7] : slot[6];
        const int sy0 = (r3 & 2u) ? sx1 : sx0, sy1 = (r3 & 2u) ? sx3 : sx2;
        const int s3 = (r3 & 4u) ? sy1 : sy0;
        const int i = i0[0] + ((q & 1) & up[0]), j = i0[1] + (((q >> 1) & 1) & up[1]), k = i0[2] + ((q >> 2) & up[2]);
        idx[q] = walk ? s3 * SPARSE_CELLS + (((k & 7) << 6) | ((j & 7) << 3) | (i & 7)) : -1;
    }
}

// corner_cells_fast (flip_sparse_g2p.cu) with a short way for the usual case:
// when no axis crosses into the next brick, the 8 corners lie in one brick, and exist
// exactly where that brick is active (the walk's rule), so they are its slot's cells
// base + offset, one table look-up and no selects. Otherwise corner_cells_fast itself.
template <bool MASKS>  // the other case: corner_cells_masks, else corner_cells_fast
__device__ __forceinline__ void corner_cells_quick(const Home& H, int closed, const int s[3], const float at[3],
                                                   int idx[8], float t[3])
{
    int i0[3], up[3];
    bool inside = true, cross = false;
#pragma unroll
    for (int a = 0; a < 3; ++a) {  // corner_cells_fast's i0, up and t
        float c = at[a];
        if (closed) {
            c = fminf(fmaxf(c, 0.0f), (float)(s[a] - 1));
            i0[a] = max(min((int)c, s[a] - 2), 0);
            up[a] = min(i0[a] + 1, s[a] - 1) != i0[a];
        } else {
            c = isfinite(c) ? c : 0.0f;
            const float f = floorf(c);
            inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
            i0[a] = inside ? (int)f : 0;
            up[a] = 1;
        }
        t[a] = c - (float)i0[a];
        if (!closed && !inside) t[a] = c - floorf(c);
        cross = cross || (up[a] && (i0[a] & 7) == 7);
    }
    if (!inside || cross) {  // (t as computed here: the same operations)
        float unused[3];
        if (MASKS)
            corner_cells_masks(H, closed, s, at, idx, unused);
        else
            corner_cells_fast(H, closed, s, at, idx, unused);
        return;
    }
    const int bx = i0[0] >> 3, by = i0[1] >> 3, bz = i0[2] >> 3;  // home's own brick: its slot, no table read
    const int slot = H.slot >= 0 && bx == H.hb[0] && by == H.hb[1] && bz == H.hb[2] ? H.slot : home_slot(H, bx, by, bz);
    const int base = slot * SPARSE_CELLS + (((i0[2] & 7) << 6) | ((i0[1] & 7) << 3) | (i0[0] & 7));
#pragma unroll
    for (int q = 0; q < 8; ++q)
        idx[q] = slot < 0 ? -1 : base + ((q & 1) & up[0]) + ((((q >> 1) & 1) & up[1]) << 3) + (((q >> 2) & up[2]) << 6);
}

// sample_faces_fast's (u, v, w) at g into out (grad unless null), and where `second` the
// faces (u2, v2, w2) at the same corners into out2, where `third` (u3, v3, w3) into out3;
// CORNERS: the corners by corner_cells_fast (0), _quick (1), _masks (2) or _quick<masks> (3):
// the same cells.
template <int CORNERS>
__device__ __forceinline__ void sample_shared(const Home& H, int closed, const int n[3], const float g[3],
                                              const float* __restrict__ u, const float* __restrict__ v,
                                              const float* __restrict__ w, float out[3], float* grad, bool second,
                                              const float* __restrict__ u2, const float* __restrict__ v2,
                                              const float* __restrict__ w2, float out2[3], bool third,
                                              const float* __restrict__ u3, const float* __restrict__ v3,
                                              const float* __restrict__ w3, float out3[3])
{
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const int s[3] = {n[0] + (a == 0), n[1] + (a == 1), n[2] + (a == 2)};
        const float at[3] = {a == 0 ? g[0] : g[0] - 0.5f, a == 1 ? g[1] : g[1] - 0.5f, a == 2 ? g[2] : g[2] - 0.5f};
        int idx[8];
        float t[3];
        if (CORNERS == 1)
            corner_cells_quick<false>(H, closed, s, at, idx, t);
        else if (CORNERS == 2)
            corner_cells_masks(H, closed, s, at, idx, t);
        else if (CORNERS == 3)
            corner_cells_quick<true>(H, closed, s, at, idx, t);
        else
            corner_cells_fast(H, closed, s, at, idx, t);
        out[a] = blend_corners(a == 0 ? u : a == 1 ? v : w, idx, t, grad ? grad + 3 * a : nullptr);
        if (second) out2[a] = blend_corners(a == 0 ? u2 : a == 1 ? v2 : w2, idx, t, nullptr);
        if (third) out3[a] = blend_corners(a == 0 ? u3 : a == 1 ? v3 : w3, idx, t, nullptr);
    }
}

#define SHARED_G2P_PARAMS                                                                                         \
    float *__restrict__ pos, float *__restrict__ vel, float *__restrict__ c, long long n, int apic,              \
        const float *__restrict__ u, const float *__restrict__ v, const float *__restrict__ w,                   \
        const float *__restrict__ old_u, const float *__restrict__ old_v, const float *__restrict__ old_w,       \
        const unsigned char *__restrict__ solid, const long long *__restrict__ keys,                             \
        const int *__restrict__ slots, long long n_keys, const int *__restrict__ nbr27, BRICK_INDEX_ARGS,        \
        int closed, int nx, int ny, int nz, float ox, float oy, float oz, float h, float inv_h, float flip,      \
        float pic, float dt, float half_dt, const int *__restrict__ order, int use_order, int centred,           \
        const float *__restrict__ b_u, const float *__restrict__ b_v, const float *__restrict__ b_w
#define SHARED_G2P_ARGS                                                                                          \
    pos, vel, c, n, apic, u, v, w, old_u, old_v, old_w, solid, keys, slots, n_keys, nbr27, index, index_lx,    \
        index_ly, index_lz, index_dx, index_dy, index_dz, closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic,  \
        dt, half_dt, order, use_order, centred, b_u, b_v, b_w

// g2p_advect_bricks' arguments and results: one thread per particle, on order[t] where
// use_order, else t.
template <int CORNERS>
__device__ __forceinline__ void g2p_shared(SHARED_G2P_PARAMS)
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
    if (inside) {
        for (int a = 0; a < 3; ++a) H.hb[a] = (int)S.hb[a];
        H.slot = S.home = INDEXED_SLOT(S.hb[0], S.hb[1], S.hb[2]);
    }
    // G2P (seed 003 Alg. 1): u_{n+1} and u_old at x, and centred u_n, on one look-up of x's corners
    float un[3], uo[3], b1[3], grad[9];
    sample_shared<CORNERS>(H, closed, dims, g, u, v, w, un, apic ? grad : nullptr, true, old_u, old_v, old_w, uo,
                         centred, b_u, b_v, b_w, b1);
    for (int a = 0; a < 3; ++a) vel[3 * p + a] = flip * (vel[3 * p + a] + (un[a] - uo[a])) + pic * un[a];
    if (apic)
        for (int a = 0; a < 9; ++a) c[9 * p + a] = grad[a] * inv_h;
    // RK2: x_m = x + ½Δt·u(x), x' = x + Δt·u(x_m); centred (u_n): x_m = x + ½Δt·u_n(x),
    // x' = x + Δt·½(u_n + u_{n+1})(x_m)
    float xm[3], gm[3], v2[3], x1[3], b2[3];
    for (int a = 0; a < 3; ++a) {
        xm[a] = x0[a] + half_dt * (centred ? b1[a] : un[a]);
        gm[a] = (xm[a] - o[a]) * inv_h;
    }
    sample_shared<CORNERS>(H, closed, dims, gm, u, v, w, v2, nullptr, centred, b_u, b_v, b_w, b2, false, nullptr,
                         nullptr, nullptr, nullptr);
    if (centred)
        for (int a = 0; a < 3; ++a) v2[a] = 0.5f * (v2[a] + b2[a]);
    for (int a = 0; a < 3; ++a) x1[a] = x0[a] + dt * v2[a];
    push_out_brick(x1, x0, solid, S, o, h, inv_h);
    for (int a = 0; a < 3; ++a) pos[3 * p + a] = x1[a];
}

// sparse_gpu.G2P_KERNELS "shared" (corner_cells_fast), "quick" (corner_cells_quick), "masks"
// (corner_cells_masks), "quickmasks" (corner_cells_quick<true>): the same bits.
#ifndef SHARED_THREADS  // sparse_gpu.G2P_THREADS: 2 blocks of them an SM (64 registers at most)
#define SHARED_THREADS 512
#endif
#define SHARED_BOUNDS __launch_bounds__(SHARED_THREADS, 2)
extern "C" __global__ void SHARED_BOUNDS g2p_advect_shared(SHARED_G2P_PARAMS) { g2p_shared<0>(SHARED_G2P_ARGS); }
extern "C" __global__ void SHARED_BOUNDS g2p_advect_quick(SHARED_G2P_PARAMS) { g2p_shared<1>(SHARED_G2P_ARGS); }
extern "C" __global__ void SHARED_BOUNDS g2p_advect_masks(SHARED_G2P_PARAMS) { g2p_shared<2>(SHARED_G2P_ARGS); }
extern "C" __global__ void SHARED_BOUNDS g2p_advect_quickmasks(SHARED_G2P_PARAMS) { g2p_shared<3>(SHARED_G2P_ARGS); }
