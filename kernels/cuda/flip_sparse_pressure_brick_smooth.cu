// Level 0's smoothing brick by brick (issue 24, helper h19a; kernels/flip/sparse_multigrid_bricks.py,
// VOXFX_SPARSE_MG_SMOOTHER "brick"): a whole pre- or post-smoothing in one launch where the
// red-black sweeps take one a colour. A block a brick of the grid's pool (grid-stride over its
// slots, their count from the brick table: the loop is a captured graph, sized to capacities)
// holds the brick's 8³ cells and one layer of halo a face in shared memory (10³ floats, the
// place ((z + 1)·10 + y + 1)·10 + x + 1), the cells' unknowns, b and diag beside them, and runs
// BRICK_SWEEPS sweeps (default MG_SWEEPS) inside the brick — per cell sparse_multigrid.sweep's
// rule, x_c ← x_c + ω·((b_c + Σ x_n)/diag_c − x_c), the six added −x, +x, −y, +y, −z, +z
// (relaxed(), no FMA: compiled with the V-cycle's options) — the halo held at its value at the
// start: 0 before the coarse correction (mg_brick_pre_smooth, red then black, reads no other
// brick), the x after the prolongation after it (mg_brick_post_smooth, black then red: the
// adjoint, so the V-cycle stays symmetric; it reads x_in and writes x_out, another buffer, so no
// block reads a halo another has already smoothed, and folds the partial r·z, b·x_out, into
// block_sum2 on the reduction grid). Cells that are not unknowns hold 0. The same values as the
// NumPy reference bit for bit (tests/unit/test_cuda_sparse_brick_smooth_host.py; on the H100 the
// solver's z, tests/gpu/test_flip_sparse_mg_bricks_gpu.py).
//
// Each phase is a loop over the block's threads with a barrier after it (the host harness runs a
// block as one thread; a block of fewer than 512 threads loops over the cells).
//
// Measured (H100 80GB HBM3, driver 580.159.04, 8M dam break, bench/flip_mg_bricks_call.sh; 512
// threads a block on the 1024 blocks of the reduction grid): an event pair a launch gives
// mg_brick_pre_smooth 35 µs and mg_brick_post_smooth 40 µs (the red-black passes they replace:
// ~134 µs over 7 launches), yet the PCG loop's graph paces 222.3 → 216.3 µs an iteration: these
// two are latency-bound chains (position → b, diag, x; nbr27 → position → halo x) a brick, ~3
// bricks a block in turn, two waves of blocks. Not tuned yet (sparse_pressure_vcycle.SMOOTH_THREADS).

#include "voxfx_mg_bricks.cuh"  // BT_*: level 0's arrays
#include "voxfx_mg_cell.cuh"    // relaxed
#include "voxfx_reduce.cuh"     // block_sum2, warp_sum
#include "voxfx_sparse.cuh"     // SPARSE_CELLS

#define BS_PAD 10      // cells a side of a brick with its halo
#define BS_FACES 384   // the halo places the sweeps read: 6 faces of 64 (no edge, no corner)
#define BS_BATCH 4     // a thread's cells (and halo places) whose loads it issues together
#define BS_THREADS 512 // the most threads a block; fewer loop over the cells
#ifndef BRICK_SWEEPS   // sweeps inside a brick each way (sparse_multigrid_bricks.SWEEPS)
#define BRICK_SWEEPS MG_SWEEPS
#endif

struct BrickSmoothShared {
    float x[BS_PAD * BS_PAD * BS_PAD];  // the brick's x and its six faces' halo (edges and corners unused)
    float b[SPARSE_CELLS], diag[SPARSE_CELLS];
    int unknown[SPARSE_CELLS];  // the cell's unknown, m where none
};

// The shared place of brick cell l (x + 8y + 64z).
__device__ __forceinline__ int bs_place(int l)
{
    return (((l >> 6) + 1) * BS_PAD + ((l >> 3) & 7) + 1) * BS_PAD + (l & 7) + 1;
}

// Halo place i (0 ≤ i < 384): face f = i / 64 (−x, +x, −y, +y, −z, +z), its 64 cells; *place* its
// shared place, *dir* the nbr27 entry of the brick across the face, *cell* the cell of that brick
// it mirrors (the coordinate across the face 0 ↔ 7).
__device__ __forceinline__ void bs_face(int i, int& place, int& dir, int& cell)
{
    const int f = i >> 6, axis = f >> 1, up = f & 1, p = i & 63, a = p & 7, c = p >> 3;
    const int o = axis == 0 ? 1 : (axis == 1 ? 3 : 9);
    dir = 13 + (up ? o : -o);
    const int at = up ? 0 : 7;
    const int lx = axis == 0 ? at : a, ly = axis == 1 ? at : (axis == 0 ? a : c), lz = axis == 2 ? at : c;
    cell = (lz << 6) | (ly << 3) | lx;
    const int hx = axis == 0 ? (up ? 8 : -1) : lx, hy = axis == 1 ? (up ? 8 : -1) : ly,
              hz = axis == 2 ? (up ? 8 : -1) : lz;
    place = ((hz + 1) * BS_PAD + hy + 1) * BS_PAD + hx + 1;
}

// The brick at *slot* into shared memory: its cells' unknowns, b, diag and x (x_in's where given,
// else 0), the six faces' halo (x_in's across each face where *halo*, else 0); every load of a
// batch of a thread's cells issued before its values are used (the chains position → b, diag,
// x and nbr27 → position → x overlap). A free slot (nbr27's centre −1: its positions are not
// read as unknowns) holds none. Ends with a barrier; whether the brick holds an unknown.
__device__ __forceinline__ bool bs_load(BrickSmoothShared& sh, int slot, const int* __restrict__ position0,
                                        const int* __restrict__ nbr27, const float* __restrict__ b,
                                        const float* __restrict__ diag, const float* __restrict__ x_in, bool halo,
                                        int m)
{
    const int T = blockDim.x, t = threadIdx.x;
    const bool live = nbr27[27 * slot + 13] >= 0;
    const int* pos = position0 + (size_t)slot * SPARSE_CELLS;
    int any = 0;
    for (int j0 = 0; j0 * T < SPARSE_CELLS; j0 += BS_BATCH) {
        int u[BS_BATCH], s[BS_BATCH];
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int l = t + (j0 + k) * T, i = l;
            u[k] = l < SPARSE_CELLS ? pos[l] : m;
            s[k] = -1;
            if (halo && i < BS_FACES) {
                int place, dir, cell;
                bs_face(i, place, dir, cell);
                s[k] = nbr27[27 * slot + dir];
            }
        }
        float bv[BS_BATCH], dv[BS_BATCH], xv[BS_BATCH];
        int h[BS_BATCH];
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int i = t + (j0 + k) * T;
            if (!live) u[k] = m;
            const bool on = u[k] < m;
            bv[k] = on ? b[u[k]] : 0.0f;
            dv[k] = on ? diag[u[k]] : 1.0f;
            xv[k] = on && x_in ? x_in[u[k]] : 0.0f;
            h[k] = m;
            if (live && s[k] >= 0 && i < BS_FACES) {
                int place, dir, cell;
                bs_face(i, place, dir, cell);
                h[k] = position0[(size_t)s[k] * SPARSE_CELLS + cell];
            }
        }
        float hv[BS_BATCH];
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) hv[k] = h[k] < m ? x_in[h[k]] : 0.0f;
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int l = t + (j0 + k) * T;
            if (l < SPARSE_CELLS) {
                sh.unknown[l] = u[k];
                sh.b[l] = bv[k];
                sh.diag[l] = dv[k];
                sh.x[bs_place(l)] = xv[k];
                any |= u[k] < m;
            }
        }
#pragma unroll
        for (int k = 0; k < BS_BATCH; ++k) {
            const int i = t + (j0 + k) * T;
            if (i < BS_FACES) {
                int place, dir, cell;
                bs_face(i, place, dir, cell);
                sh.x[place] = hv[k];
            }
        }
    }
    return __syncthreads_or(any);
}

// One colour inside the brick (red: unknown < m_red), then a barrier.
__device__ __forceinline__ void bs_sweep(BrickSmoothShared& sh, int colour, int m_red, int m)
{
    for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
        const int u = sh.unknown[l];
        if (u >= m || (u >= m_red) != (colour == 1)) continue;
        const int p = bs_place(l);
        float s = sh.x[p - 1];
        s = s + sh.x[p + 1];
        s = s + sh.x[p - BS_PAD];
        s = s + sh.x[p + BS_PAD];
        s = s + sh.x[p - BS_PAD * BS_PAD];
        s = s + sh.x[p + BS_PAD * BS_PAD];
        const float g = (sh.b[l] + s) / sh.diag[l];
        sh.x[p] = MG_OMEGA == 1.0f ? g : relaxed(sh.x[p], g);
    }
    __syncthreads();
}

// Pre-smoothing from x = 0: BRICK_SWEEPS × (red, black) inside each brick, the halo 0; x written
// on level 0's unknowns (its other entries untouched). Any grid (grid-stride over the slots).
__device__ __forceinline__ void bs_pre(const float* __restrict__ b, const unsigned long long* __restrict__ ptrs,
                                       const float* __restrict__ diag, const int* __restrict__ sizes,
                                       float* __restrict__ x, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ BrickSmoothShared sh;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (!bs_load(sh, slot, position0, nbr27, b, diag, nullptr, false, m)) continue;
        for (int sweep = 0; sweep < BRICK_SWEEPS; ++sweep) {
            bs_sweep(sh, 0, m_red, m);
            bs_sweep(sh, 1, m_red, m);
        }
        for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
            const int u = sh.unknown[l];
            if (u < m) x[u] = sh.x[bs_place(l)];
        }
        __syncthreads();
    }
}

// Post-smoothing: x_out = BRICK_SWEEPS × (black, red) inside each brick from x_in, the halo x_in;
// r·z = Σ b·x_out (b the CG residual) into partials_rz[0], partials_rz[1..reduce_blocks) 0 (the
// layout finish_beta sums). Any grid: each block's partial into block_rz[block]; the last block
// to finish (ticket, 0 between launches) sums them in block order — the same total for the same
// grid and block every run.
__device__ __forceinline__ void bs_post(const float* __restrict__ x_in, const float* __restrict__ b,
                                        const unsigned long long* __restrict__ ptrs, const float* __restrict__ diag,
                                        const int* __restrict__ sizes, float* __restrict__ x_out,
                                        double* __restrict__ block_rz, int* __restrict__ ticket,
                                        double* __restrict__ partials_rz, int reduce_blocks,
                                        const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ BrickSmoothShared sh;
    __shared__ int last;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    double rz = 0.0;
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (!bs_load(sh, slot, position0, nbr27, b, diag, x_in, true, m)) continue;
        for (int sweep = 0; sweep < BRICK_SWEEPS; ++sweep) {
            bs_sweep(sh, 1, m_red, m);
            bs_sweep(sh, 0, m_red, m);
        }
        for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
            const int u = sh.unknown[l];
            if (u < m) {
                const float xc = sh.x[bs_place(l)];
                x_out[u] = xc;
                rz += (double)sh.b[l] * xc;
            }
        }
        __syncthreads();
    }
    block_sum2(rz, 0.0, block_rz, nullptr);  // thread 0 writes block_rz[blockIdx.x]
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(ticket, 1) == (int)gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    const volatile double* all = block_rz;
    double v = 0.0;
    for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x) v += all[i];
    __shared__ double warps_rz[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) warps_rz[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? warps_rz[lane] : 0.0;
        v = warp_sum(v);  // the total in thread 0, which writes partials_rz[0]
    }
    for (int i = threadIdx.x; i < reduce_blocks; i += blockDim.x) partials_rz[i] = i ? 0.0 : v;
    if (threadIdx.x == 0) *ticket = 0;
}

// The entries: any block of at most 512 threads (a multiple of 32); the _16 ones 128 threads, their
// registers bounded so that 16 blocks fit an SM (32 a thread: sparse_pressure_vcycle.SMOOTH_THREADS
// "128x16").
#define BS_PRE_ARGS                                                                                          \
    const float *__restrict__ b, const unsigned long long *__restrict__ ptrs, const float *__restrict__ diag, \
        const int *__restrict__ sizes, float *__restrict__ x, const int *__restrict__ state
#define BS_POST_ARGS                                                                                            \
    const float *__restrict__ x_in, const float *__restrict__ b, const unsigned long long *__restrict__ ptrs,    \
        const float *__restrict__ diag, const int *__restrict__ sizes, float *__restrict__ x_out,               \
        double *__restrict__ block_rz, int *__restrict__ ticket, double *__restrict__ partials_rz, int reduce_blocks, \
        const int *__restrict__ state

extern "C" __global__ void __launch_bounds__(BS_THREADS) mg_brick_pre_smooth(BS_PRE_ARGS)
{
    bs_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(128, 16) mg_brick_pre_smooth_16(BS_PRE_ARGS)
{
    bs_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(BS_THREADS) mg_brick_post_smooth(BS_POST_ARGS)
{
    bs_post(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}

extern "C" __global__ void __launch_bounds__(128, 16) mg_brick_post_smooth_16(BS_POST_ARGS)
{
    bs_post(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}
