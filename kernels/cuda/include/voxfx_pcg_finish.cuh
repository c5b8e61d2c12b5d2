// The sparse PCG's scalar steps folded into the kernel whose partial sums they close
// (sparse_pressure_gpu.FUSE, issue 24): the grid's last block to finish — a ticket taken after
// each block's partial is written — adds the partials and does what flip_pressure.cu's
// finish_alpha / finish_beta do, in the same order, so α, β and the state come out bit for bit
// as the separate one-block launches give them (one launch fewer each). Constants (D_*, S_*) from
// the including module's -D options, as flip_pressure.cu's.
#pragma once

#include "voxfx_reduce.cuh"  // warp_sum, block_total

// Loads of other blocks' partials: past the L1 (written by other SMs in this launch).
#ifdef __CUDA_ARCH__
#define PARTIAL_LOAD(p) __ldcg(p)
#else
#define PARTIAL_LOAD(p) (*(p))
#endif

// True in every thread of the grid's last block to get here, false elsewhere; call after the
// block's partial sums are written (block_sum2), by every thread of the block. *ticket* is 0
// before the launch and 0 again after it (atomicInc wraps at gridDim.x − 1).
__device__ __forceinline__ bool last_block_done(unsigned int* ticket)
{
#ifdef __CUDA_ARCH__
    __shared__ bool last;
    __threadfence();  // this block's partial, written by thread 0, before its ticket
    __syncthreads();
    if (threadIdx.x == 0) last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
#else  // a host harness's one-thread blocks, run one after another
    const unsigned int old = *ticket;
    *ticket = old >= gridDim.x - 1 ? 0u : old + 1u;
    return old == gridDim.x - 1;
#endif
}

// Σ partials[0..n) (n ≤ 1024) as block_total adds them in a block of 1024 threads (the
// finish_* launches'), by a block of any multiple of 32 threads: thread t's value partials[t]
// (0 + it), each warp of 32 values summed by warp_sum, then the 32 warps' sums by warp_sum in
// warp 0. The result in thread 0. On the host (a harness's one-thread blocks) block_total.
__device__ double block_total_as_1024(const double* __restrict__ partials, int n)
{
#ifdef __CUDA_ARCH__
    __shared__ double s[32];
    const int lane = threadIdx.x & 31, warps = (int)(blockDim.x >> 5);
    for (int w = threadIdx.x >> 5; w < 32; w += warps) {
        const int t = 32 * w + lane;
        double v = 0.0;
        if (t < n) v += PARTIAL_LOAD(partials + t);
        v = warp_sum(v);
        if (lane == 0) s[w] = v;
    }
    __syncthreads();
    double v = 0.0;
    if (threadIdx.x < 32) v = warp_sum(s[lane]);
    return v;
#else
    return block_total(partials, n);
#endif
}

// finish_alpha's step: α = r·z / d·q (0 where d·q ≤ 0), d·q the total of the G partials.
__device__ __forceinline__ void finish_alpha_step(const double* partials, int blocks, double* scalars)
{
    const double dq = block_total_as_1024(partials, blocks);
    if (threadIdx.x == 0) scalars[D_ALPHA] = dq > 0.0 ? scalars[D_RZ] / dq : 0.0;
}

// finish_beta's step: rz_new and (but on the first) ‖r‖² from partials[G..2G) and [0..G), the
// iteration count, the stopping tests, β = rz_new / rz.
__device__ __forceinline__ void finish_beta_step(const double* partials, int blocks, double* scalars, int* state,
                                                 int first)
{
    const double rz_new = block_total_as_1024(partials + blocks, blocks);
    __syncthreads();  // s[] of the first total read before the second writes it
    const double rr = first ? 0.0 : block_total_as_1024(partials, blocks);
    if (threadIdx.x != 0) return;
    if (first) {
        scalars[D_RZ] = rz_new;
        scalars[D_BETA] = 0.0;
        return;
    }
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
