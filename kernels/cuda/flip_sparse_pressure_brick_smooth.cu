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
#include "voxfx_reduce.cuh"     // block_sum2
#include "voxfx_sparse.cuh"     // SPARSE_CELLS

#define BS_PAD 10      // cells a side of a brick with its halo
#define BS_THREADS 512 // the most threads a block (a thread a cell); fewer loop over the cells
#ifndef BRICK_SWEEPS   // sweeps inside a brick each way (sparse_multigrid_bricks.SWEEPS)
#define BRICK_SWEEPS MG_SWEEPS
#endif

struct BrickSmoothShared {
    float x[BS_PAD * BS_PAD * BS_PAD];  // the brick's x and its halo
    float b[SPARSE_CELLS], diag[SPARSE_CELLS];
    int unknown[SPARSE_CELLS];  // the cell's unknown, m where none
    int any;                    // whether the brick holds an unknown
};

// The shared place of brick cell l (x + 8y + 64z).
__device__ __forceinline__ int bs_place(int l)
{
    return (((l >> 6) + 1) * BS_PAD + ((l >> 3) & 7) + 1) * BS_PAD + (l & 7) + 1;
}

// The brick at *slot*: its cells' unknowns, b and diag, x (from x_in where given, else 0), the
// halo 0; sh.any. Ends with a barrier.
__device__ __forceinline__ void bs_load(BrickSmoothShared& sh, int slot, const int* __restrict__ position0,
                                        const float* __restrict__ b, const float* __restrict__ diag,
                                        const float* __restrict__ x_in, int m)
{
    if (threadIdx.x == 0) sh.any = 0;
    for (int i = threadIdx.x; i < BS_PAD * BS_PAD * BS_PAD; i += blockDim.x) sh.x[i] = 0.0f;
    __syncthreads();
    for (int l = threadIdx.x; l < SPARSE_CELLS; l += blockDim.x) {
        const int u = position0[slot * SPARSE_CELLS + l];
        const bool on = u < m;
        sh.unknown[l] = u;
        sh.b[l] = on ? b[u] : 0.0f;
        sh.diag[l] = on ? diag[u] : 1.0f;
        if (on) {
            sh.any = 1;
            if (x_in) sh.x[bs_place(l)] = x_in[u];
        }
    }
    __syncthreads();
}

// The halo from x_in: per face f (−x, +x, −y, +y, −z, +z) its 64 cells, the cell of the brick
// nbr27 names across the face (the coordinate 0 ↔ 7), 0 where none or not an unknown.
__device__ __forceinline__ void bs_halo(BrickSmoothShared& sh, int slot, const int* __restrict__ position0,
                                        const int* __restrict__ nbr27, const float* __restrict__ x_in, int m)
{
    for (int i = threadIdx.x; i < 6 * 64; i += blockDim.x) {
        const int f = i >> 6, axis = f >> 1, up = f & 1, p = i & 63, a = p & 7, c = p >> 3;
        const int o = axis == 0 ? 1 : (axis == 1 ? 3 : 9);
        const int s = nbr27[27 * slot + 13 + (up ? o : -o)];
        const int at = up ? 0 : 7;  // the neighbour's face cell coordinate along the axis
        const int lx = axis == 0 ? at : a, ly = axis == 1 ? at : (axis == 0 ? a : c), lz = axis == 2 ? at : c;
        const int hx = axis == 0 ? (up ? 8 : -1) : lx, hy = axis == 1 ? (up ? 8 : -1) : ly,
                  hz = axis == 2 ? (up ? 8 : -1) : lz;
        const int u = s < 0 ? m : position0[s * SPARSE_CELLS + ((lz << 6) | (ly << 3) | lx)];
        sh.x[((hz + 1) * BS_PAD + hy + 1) * BS_PAD + hx + 1] = u < m ? x_in[u] : 0.0f;
    }
    __syncthreads();
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
// on level 0's unknowns (its other entries untouched).
extern "C" __global__ void __launch_bounds__(BS_THREADS)
    mg_brick_pre_smooth(const float* __restrict__ b, const unsigned long long* __restrict__ ptrs,
                        const float* __restrict__ diag, const int* __restrict__ sizes, float* __restrict__ x,
                        const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ BrickSmoothShared sh;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (nbr27[27 * slot + 13] < 0) continue;  // a free slot: the same for the whole block
        bs_load(sh, slot, position0, b, diag, nullptr, m);
        if (!sh.any) {
            __syncthreads();  // sh.any read by all before the next brick's load resets it
            continue;
        }
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
// the partial Σ b·x_out (r·z where b is the CG residual) of the block into partials_rz[block]
// (launched on the reduction grid).
extern "C" __global__ void __launch_bounds__(BS_THREADS)
    mg_brick_post_smooth(const float* __restrict__ x_in, const float* __restrict__ b,
                         const unsigned long long* __restrict__ ptrs, const float* __restrict__ diag,
                         const int* __restrict__ sizes, float* __restrict__ x_out, double* __restrict__ partials_rz,
                         const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    __shared__ BrickSmoothShared sh;
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    double rz = 0.0;
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        if (nbr27[27 * slot + 13] < 0) continue;
        bs_load(sh, slot, position0, b, diag, x_in, m);
        if (!sh.any) {
            __syncthreads();
            continue;
        }
        bs_halo(sh, slot, position0, nbr27, x_in, m);
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
    block_sum2(rz, 0.0, partials_rz, nullptr);
}
