// The sparse PCG iteration (seed 003 §8, Alg. 2) in fewer launches (VOXFX_SPARSE_PCG_FUSE=1,
// kernels/flip/sparse_pressure_gpu.py): the kernels of flip_sparse_pressure.cu and the
// one-block finish_alpha / finish_beta of flip_pressure.cu folded together.
//
//   direction_laplacian  d = z + β d_old (into the other direction buffer), q = A d, d·q;
//                        its last block: α = r·z / d·q                     (was 3 launches)
//   apply_laplacian_alpha  q = A d, d·q; its last block: α                 (was 2 launches)
//   update_solution_beta / dot_rz_beta / mg_smooth_red_dot_beta: as their namesakes, and
//                        their last block: β, ‖r‖² against tol²‖b‖², the limit (was 2)
//
// The last block is the one whose atomic on `counter` comes last (its partial sum and all
// the others' are then in memory, __threadfence before the atomic); it resets the counter.
// It adds the partial sums in the order finish_* does on its 1024 threads (total_as_finish),
// so α, β and the stopping test are the same doubles bit for bit, and every value of the
// loop with them. The neighbours' d in the Laplacian are computed as update_direction would
// write them (z_n + β d_old,n, the sentinel 0), rounded alike (compiled without FMA).
//
// Layout and constants as flip_sparse_pressure.cu's notes; S_IT, S_STOPPED, S_CONVERGED,
// S_MAXIT, D_THRESH, D_RR, D_RZ, D_ALPHA, D_BETA: flip_pressure.cu's state[] and scalars[].

#include "voxfx_mg_cell.cuh"  // compact_neighbour_sum, gs_value: per unknown
#include "voxfx_reduce.cuh"  // block_sum2, warp_sum: the fixed-order double sums

#define FINISH_THREADS 1024  // the block of flip_pressure.cu's finish_* kernels

#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// Σ partials[0..n) as block_total adds them on FINISH_THREADS threads (per virtual thread t
// the entries t, t + 1024, ...; per warp of 32 virtual threads warp_sum; warp_sum of the 32
// warps' sums), by a block of any multiple of 32 threads: the result in thread 0. __ldcg:
// the other blocks' partial sums from L2, not this block's L1.
__device__ double total_as_finish(const double* partials, int n)
{
    __shared__ double s[FINISH_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = max(1, (int)blockDim.x >> 5);
    for (int w = warp; w < FINISH_THREADS / 32; w += warps) {
        double v = 0.0;
        for (int t = w * 32 + lane; t < n; t += FINISH_THREADS) v += __ldcg(partials + t);
        v = warp_sum(v);
        if (lane == 0) s[w] = v;
    }
    __syncthreads();
    double v = 0.0;
    if (warp == 0) v = warp_sum(s[lane]);
    return v;
}

// Whether this block is the grid's last to arrive (every block calls it once, after its
// block_sum2; thread 0 wrote the block's partial sums).
__device__ bool last_block(unsigned int* counter)
{
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // this block's partial sums before its arrival
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last) __threadfence();  // the others' partial sums read after their arrivals
    return last;
}

// finish_beta (first = 0) in the last block: ‖r‖² = Σ partials[0..blocks), r·z_new = Σ
// partials[blocks..2 blocks).
__device__ void finish_beta_last(const double* partials, double* scalars, int* state, unsigned int* counter)
{
    if (!last_block(counter)) return;
    const int blocks = gridDim.x;
    const double rz_new = total_as_finish(partials + blocks, blocks);
    const double rr = total_as_finish(partials, blocks);
    if (threadIdx.x != 0) return;
    *counter = 0;
    scalars[D_RR] = rr;
    const int it = state[S_IT] + 1;
    state[S_IT] = it;
    if (!isfinite(rr)) {
        state[S_STOPPED] = 1;
    } else if (rr <= scalars[D_THRESH]) {
        state[S_CONVERGED] = 1;
        state[S_STOPPED] = 1;
    } else if (it >= state[S_MAXIT]) {
        state[S_STOPPED] = 1;
    }
    const double rz = scalars[D_RZ];
    scalars[D_BETA] = rz != 0.0 ? rz_new / rz : 0.0;
    scalars[D_RZ] = rz_new;
}

// finish_alpha in the last block: α = r·z / Σ partials[0..blocks).
__device__ void finish_alpha_last(const double* partials, double* scalars, unsigned int* counter)
{
    if (!last_block(counter)) return;
    const double total = total_as_finish(partials, gridDim.x);
    if (threadIdx.x != 0) return;
    *counter = 0;
    scalars[D_ALPHA] = total > 0.0 ? scalars[D_RZ] / total : 0.0;
}

// d_j = z_j + β d_old,j as update_direction writes it; the sentinel (j = n) stays 0.
__device__ __forceinline__ float direction_value(const float* __restrict__ z, const float* __restrict__ d_old,
                                                 float beta, int j, int n)
{
    return j < n ? z[j] + beta * d_old[j] : 0.0f;
}

// d = z + β d_old; q = A d (diag·d − Σ neighbours, added as compact_neighbour_sum); partial
// d·q; the last block: α = r·z / d·q (finish_alpha).
extern "C" __global__ void direction_laplacian(const float* __restrict__ z, const float* __restrict__ d_old,
                                               float* __restrict__ d, float* __restrict__ q,
                                               const int* __restrict__ nbr, const float* __restrict__ diag,
                                               int stride, const int* __restrict__ sizes, double* __restrict__ partials,
                                               double* __restrict__ scalars, const int* __restrict__ state,
                                               unsigned int* __restrict__ counter)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    const float beta = (float)scalars[D_BETA];
    double dq = 0.0;
    RANGE(c, 0, n)
    {
        const float dc = z[c] + beta * d_old[c];
        d[c] = dc;
        float s = direction_value(z, d_old, beta, nbr[c], n);
        for (int k = 1; k < 6; ++k) s = s + direction_value(z, d_old, beta, nbr[k * stride + c], n);
        const float qc = diag[c] * dc - s;
        q[c] = qc;
        dq += (double)dc * qc;
    }
    block_sum2(dq, 0.0, partials, nullptr);
    finish_alpha_last(partials, scalars, counter);
}

// apply_laplacian (q = A d, partial d·q) and α in its last block (FUSE "finish": the
// direction update stays its own launch).
extern "C" __global__ void apply_laplacian_alpha(const float* __restrict__ d, float* __restrict__ q,
                                                 const int* __restrict__ nbr, const float* __restrict__ diag,
                                                 int stride, const int* __restrict__ sizes,
                                                 double* __restrict__ partials, double* __restrict__ scalars,
                                                 const int* __restrict__ state, unsigned int* __restrict__ counter)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    double dq = 0.0;
    RANGE(c, 0, n)
    {
        const float dc = d[c];
        const float qc = diag[c] * dc - compact_neighbour_sum(d, nbr, stride, c);
        q[c] = qc;
        dq += (double)dc * qc;
    }
    block_sum2(dq, 0.0, partials, nullptr);
    finish_alpha_last(partials, scalars, counter);
}

// update_solution (Jacobi or none: z and r·z with it) and the iteration's end in its last block.
extern "C" __global__ void update_solution_beta(float* __restrict__ x, float* __restrict__ r,
                                                const float* __restrict__ d, const float* __restrict__ q,
                                                float* __restrict__ z, const float* __restrict__ diag,
                                                const int* __restrict__ sizes, int mode, double* __restrict__ scalars,
                                                double* __restrict__ partials, int* __restrict__ state,
                                                unsigned int* __restrict__ counter)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    const float alpha = (float)scalars[D_ALPHA];
    double rr = 0.0, rz = 0.0;
    RANGE(c, 0, n)
    {
        x[c] = x[c] + alpha * d[c];
        const float rc = r[c] - alpha * q[c];
        r[c] = rc;
        rr += (double)rc * rc;
        if (mode == PRE_JACOBI) {
            const float zc = rc * (1.0f / diag[c]);
            z[c] = zc;
            rz += (double)rc * zc;
        }
    }
    if (mode == PRE_NONE) rz = rr;
    block_sum2(rr, rz, partials, partials + gridDim.x);
    finish_beta_last(partials, scalars, state, counter);
}

// dot_rz (after the split V-cycle, or one level's) and the iteration's end in its last block.
extern "C" __global__ void dot_rz_beta(const float* __restrict__ r, const float* __restrict__ z,
                                       const int* __restrict__ sizes, double* __restrict__ partials,
                                       double* __restrict__ scalars, int* __restrict__ state,
                                       unsigned int* __restrict__ counter)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    double rz = 0.0;
    RANGE(c, 0, n) rz += (double)r[c] * z[c];
    block_sum2(rz, 0.0, partials + gridDim.x, nullptr);
    finish_beta_last(partials, scalars, state, counter);
}

// mg_smooth_red_dot (level 0's last red sweep and r·z, the fused V-cycle) and the
// iteration's end in its last block.
extern "C" __global__ void mg_smooth_red_dot_beta(float* __restrict__ x, const float* __restrict__ b,
                                                  const int* __restrict__ nbr, const float* __restrict__ diag,
                                                  int stride, const int* __restrict__ sizes,
                                                  double* __restrict__ partials, double* __restrict__ scalars,
                                                  int* __restrict__ state, unsigned int* __restrict__ counter)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[0], m = sizes[1];
    double rz = 0.0;
    RANGE(c, 0, m)
    {
        float xc;
        if (c < m_red) {
            xc = gs_value(x, b, nbr, diag, stride, c);
            x[c] = xc;
        } else {
            xc = x[c];
        }
        rz += (double)b[c] * xc;
    }
    block_sum2(rz, 0.0, partials + gridDim.x, nullptr);
    finish_beta_last(partials, scalars, state, counter);
}
