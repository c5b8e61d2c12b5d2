// Sparse FLIP pressure (seed 003 §8, Alg. 2): the multigrid V-cycle over the sparse
// hierarchy — red-black Gauss-Seidel, residual, restriction, prolongation, the coarsest level
// in one block (its sweeps or its dense inverse). The coarse levels' whole V-cycle in one block
// or one cluster of blocks (mg_tail_*) is flip_sparse_pressure_vcycle_tail.cu. Moved out of
// flip_sparse_pressure.cu (its layout notes — levels, strides, tables, sizes[] — hold here too),
// compiled with the same options and -D constants; launched by
// kernels/flip/sparse_pressure_vcycle.py, following sparse_multigrid.VCycle operation by
// operation (no FMA contraction: each value rounds as NumPy rounds it).

#include "voxfx_mg_cell.cuh"  // smooth_value, residual_value, restrict_value, prolong_value, ...: per unknown
#include "voxfx_mg_dense.cuh"  // block_dense_inverse, block_dense_solve: the coarsest level by its inverse
#include "voxfx_reduce.cuh"  // block_sum2: the fixed-order double sums

// c over [lo, hi) with a grid-stride loop (launches are sized by the buffers, not by m).
#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// ------------------------------------------------------------------------ multigrid V-cycle

// One colour of Gauss-Seidel on a level, x_c = (b_c + Σ x_n)/diag_c over the colour's range
// (the other colour is all it reads). first = 1: the sweep from x = 0 — red b/diag, black 0,
// every unknown written, so no clearing pass is needed.
extern "C" __global__ void mg_smooth(float* __restrict__ x, const float* __restrict__ b, const int* __restrict__ nbr,
                                     const float* __restrict__ diag, int stride, const int* __restrict__ sizes,
                                     int level, int colour, int first, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    if (first) {
        RANGE(c, 0, m) x[c] = c < m_red ? first_red_value(b, diag, c) : 0.0f;
        return;
    }
    const int lo = colour ? m_red : 0, hi = colour ? m : m_red;
    RANGE(c, lo, hi) x[c] = smooth_value(x, b, nbr, diag, stride, c);
}

// The first pre-smoothing sweep from x = 0, red and black in one launch (the fused V-cycle): a
// red unknown takes b/diag, a black one (b + Σ b_n/diag_n)/diag over its neighbours, all red
// or the sentinel (b 0, diag 1: 0) — the values the red-then-black launches of mg_smooth
// (first = 1, then colour 1) give, rounded alike, without reading x.
extern "C" __global__ void mg_smooth_first(float* __restrict__ x, const float* __restrict__ b,
                                           const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                           const int* __restrict__ sizes, int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    RANGE(c, 0, m) x[c] = first_sweep_value(b, nbr, diag, stride, m_red, c);
}

// The first pre-smoothing sweep from x = 0 and the second sweep's red pass in one launch
// (VOXFX_SPARSE_MG_FIRST2): a black unknown takes its first-sweep value (as mg_smooth_first), a
// red one its value after the second sweep's red pass, computed from b through its black
// neighbours' first-sweep values (second_red_value) — what mg_smooth_first then mg_smooth
// (colour 0) leave, rounded alike. It reads b alone and writes x: no unknown waits for another.
extern "C" __global__ void mg_smooth_first2(float* __restrict__ x, const float* __restrict__ b,
                                            const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                            const int* __restrict__ sizes, int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    RANGE(c, 0, m)
    x[c] = c < m_red ? second_red_value(b, nbr, diag, stride, m_red, m, c)
                     : first_sweep_value(b, nbr, diag, stride, m_red, c);
}

// The last post-smoothing sweep of level 0 (red) and the partial r·z of the V-cycle's
// result z = x (the fused V-cycle: dot_rz folded in). Launched on the reduction grid over all m
// unknowns, so each thread adds the same products in the same order as dot_rz: red ones
// take their new value, black ones are read (the red sweep does not change them).
extern "C" __global__ void mg_smooth_red_dot(float* __restrict__ x, const float* __restrict__ b,
                                             const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                             const int* __restrict__ sizes, double* __restrict__ partials_rz,
                                             const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[0], m = sizes[1];
    double rz = 0.0;
    RANGE(c, 0, m)
    {
        float xc;
        if (c < m_red) {
            xc = smooth_value(x, b, nbr, diag, stride, c);
            x[c] = xc;
        } else {
            xc = x[c];
        }
        rz += (double)b[c] * xc;
    }
    block_sum2(rz, 0.0, partials_rz, nullptr);
}

// The last pre-smoothing sweep's black colour and the black unknowns' residual r = b − A x
// (the fused V-cycle: their x is in hand; mg_residual then does the red ones alone).
extern "C" __global__ void mg_smooth_black_residual(float* __restrict__ x, const float* __restrict__ b,
                                                    const int* __restrict__ nbr, const float* __restrict__ diag,
                                                    int stride, const int* __restrict__ sizes, int level,
                                                    float* __restrict__ r, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    RANGE(c, m_red, m)
    {
        const float s = compact_neighbour_sum(x, nbr, stride, c);  // red neighbours: not written here
        const float g = (b[c] + s) / diag[c];
        const float xc = MG_OMEGA == 1.0f ? g : relaxed(x[c], g);
        x[c] = xc;
        r[c] = b[c] - (diag[c] * xc - s);
    }
}

// r = b − A x on a level's unknowns (all_unknowns = 0: the red ones alone).
extern "C" __global__ void mg_residual(const float* __restrict__ x, const float* __restrict__ b,
                                       const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                       const int* __restrict__ sizes, int level, int all_unknowns,
                                       float* __restrict__ r, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + all_unknowns];
    RANGE(c, 0, m) r[c] = residual_value(x, b, nbr, diag, stride, c);
}

// Restriction into coarse level `level`: b_c = ½·Σ_row w_row·r_f[down[row][c]], rows
// (iz·4 + iy)·4 + ix added in order (Pᵀ of mg_prolong_add, times ½: the average Pᵀ/8 scaled
// by (2h/h)² for the unscaled coarse operator).
extern "C" __global__ void mg_restrict(const float* __restrict__ rf, const int* __restrict__ down, int stride,
                                       const int* __restrict__ sizes, int level, float* __restrict__ bc,
                                       const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + 1];
    RANGE(c, 0, m) bc[c] = restrict_value(rf, down, stride, c);
}

// Prolongation onto fine level `level`: x_f += Σ_row w_row·x_c[up[row][f]], rows
// (oz·2 + oy)·2 + ox: per axis ¾ of the parent (o = 0) and ¼ of its neighbour on the
// child's side (o = 1). all_unknowns = 0 (the fused V-cycle): the red unknowns alone — the
// black sweep that follows overwrites every black value without reading it.
extern "C" __global__ void mg_prolong_add(const float* __restrict__ xc, const int* __restrict__ up, int stride,
                                          const int* __restrict__ sizes, int level, int all_unknowns,
                                          float* __restrict__ xf, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + all_unknowns];
    RANGE(f, 0, m) xf[f] = xf[f] + prolong_value(xc, up, stride, f);
}

// The coarsest level in one block: x = 0, then MG_COARSE_SWEEPS sweeps red → black and as
// many black → red, the block synchronised between colours (one launch, not 4·sweeps).
extern "C" __global__ void mg_coarse_solve(float* __restrict__ x, const float* __restrict__ b,
                                           const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                           const int* __restrict__ sizes, int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    for (int c = threadIdx.x; c < m; c += blockDim.x) x[c] = 0.0f;
    __syncthreads();
    block_coarse_sweeps(x, b, nbr, diag, stride, m_red, m);
}

// The restriction into the coarsest level (as mg_restrict) and its solve (as
// mg_coarse_solve) in one block (the fused V-cycle): the coarsest level has a few dozen unknowns.
extern "C" __global__ void mg_restrict_coarse_solve(const float* __restrict__ rf, const int* __restrict__ down,
                                                    float* __restrict__ x, float* __restrict__ b,
                                                    const int* __restrict__ nbr, const float* __restrict__ diag,
                                                    int stride, const int* __restrict__ sizes, int level,
                                                    const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    for (int c = threadIdx.x; c < m; c += blockDim.x) {
        b[c] = restrict_value(rf, down, stride, c);
        x[c] = 0.0f;
    }
    __syncthreads();
    block_coarse_sweeps(x, b, nbr, diag, stride, m_red, m);
}

// The coarsest level's dense inverse G (sparse_multigrid.MG_DENSE, i24p4), once a solve (the
// solver's start), by one block: block_dense_inverse (voxfx_mg_dense.cuh) on level `level`'s
// tables, its scratch `work` (m² + 2m doubles of global memory) or, work nullptr, the launch's
// dynamic shared memory (stride² + 2·stride doubles, where they fit the device's limit per block).
#ifndef DENSE_SHARED_ARRAY
#if defined(__CUDA_ARCH__) && !defined(__syncthreads)
#define DENSE_SHARED_ARRAY(name) extern __shared__ double name[]
#else  // the host pass, or a host harness: it passes work
#define DENSE_SHARED_ARRAY(name) double* name = nullptr
#endif
#endif
extern "C" __global__ void __launch_bounds__(1024)
    mg_dense_inverse(const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                     const int* __restrict__ sizes, int level, double* work, float* __restrict__ dense,
                     const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    DENSE_SHARED_ARRAY(scratch);
    block_dense_inverse(nbr, diag, stride, sizes[2 * level + 1], work ? work : scratch, dense);
}

// mg_coarse_solve and mg_restrict_coarse_solve with the coarsest level's dense inverse
// (mg_dense_inverse) for the sweeps: one mat-vec pass.
extern "C" __global__ void mg_coarse_dense(float* __restrict__ x, const float* __restrict__ b,
                                           const float* __restrict__ dense, int stride,
                                           const int* __restrict__ sizes, int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    block_dense_solve(x, b, dense, stride, sizes[2 * level + 1]);
}

extern "C" __global__ void mg_restrict_coarse_dense(const float* __restrict__ rf, const int* __restrict__ down,
                                                    float* __restrict__ x, float* __restrict__ b,
                                                    const float* __restrict__ dense, int stride,
                                                    const int* __restrict__ sizes, int level,
                                                    const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + 1];
    for (int c = threadIdx.x; c < m; c += blockDim.x) b[c] = restrict_value(rf, down, stride, c);
    __syncthreads();
    block_dense_solve(x, b, dense, stride, m);
}
