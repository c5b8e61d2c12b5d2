// The sparse FLIP's binning for the P2G scatter (flip_sparse_transfer.cu's
// count_particles_bounds and bin_scan_*, flip_sparse_scatter.cu's scatter_bounds): the
// scatter's per-particle bound on |q| (one copy: the fused count and the separate bounds
// give the same bits) and the warp / block sums, maxima and scans of the two-launch scan.
// Warp functions need all 32 lanes present (blockDim a multiple of 32); on the host harness
// (tests/unit/test_cuda_sparse_scatter_host.py: one thread a block) a warp is that thread.
#pragma once

#include "voxfx_reduce.cuh"  // warp_all_sum, warp_all_max, warp_inclusive_scan

#ifdef __CUDA_ARCH__
__device__ __forceinline__ unsigned int scatter_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float scatter_float(unsigned int x) { return __uint_as_float(x); }
#else
__device__ __forceinline__ unsigned int scatter_bits(float x) { unsigned int u; memcpy(&u, &x, 4); return u; }
__device__ __forceinline__ float scatter_float(unsigned int x) { float f; memcpy(&f, &x, 4); return f; }
#endif

// Particle t's bound on |q| of every term the scatter admits (|d_b| < 2h): max_a |v_a| +
// 2h·Σ_b |C_ab| (APIC); a NaN term is dropped by fmaxf.
__device__ __forceinline__ float scatter_q_bound(const float* __restrict__ vel, const float* __restrict__ c,
                                                 int apic, long long t, float h)
{
    float q = 0.0f;
    for (int a = 0; a < 3; ++a) {
        float b = fabsf(vel[3 * t + a]);
        if (apic) b += 2.0f * h * (fabsf(c[9 * t + 3 * a]) + fabsf(c[9 * t + 3 * a + 1]) + fabsf(c[9 * t + 3 * a + 2]));
        q = fmaxf(q, b);
    }
    return q;
}

// The bits of bounds[0] for a (max) q: q · (1 + 2^-10) against the rounding of the terms.
// Rounding is monotonic, so the max of the scaled bits is the scaled bits of the max.
__device__ __forceinline__ unsigned int scatter_q_bits(float q) { return scatter_bits(q * (1.0f + 1.0f / 1024.0f)); }

// The fused count's share of bounds[0] (flip_sparse_transfer.cu's count_particles_bounds and
// count_particles_grouped): the warp's max of scatter_q_bits(q), one atomicMax by lane 0
// where it beats the value there. Every lane must call it (no return before).
__device__ __forceinline__ void bin_warp_q_max(float q, unsigned int* __restrict__ bounds)
{
    const unsigned int bits = warp_all_max(scatter_q_bits(q));
    if ((threadIdx.x & 31) == 0 && bits > *(volatile unsigned int*)bounds) atomicMax(bounds, bits);
}

// Block-wide sum and max (every thread gets both; every thread must call it).
__device__ __forceinline__ void bin_block_sum_max(int& sum, unsigned int& most)
{
    __shared__ int part_sum[32];
    __shared__ unsigned int part_max[32];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)((blockDim.x + 31) >> 5);
    const int s = warp_all_sum(sum);
    const unsigned int m = warp_all_max(most);
    __syncthreads();  // the parts may still be read by a previous call
    if (lane == 0) {
        part_sum[warp] = s;
        part_max[warp] = m;
    }
    __syncthreads();
    sum = 0;
    most = 0u;
    for (int k = 0; k < warps; ++k) {
        sum += part_sum[k];
        most = max(most, part_max[k]);
    }
}

// Block-wide inclusive scan of v in thread order; *total: the block's sum.
__device__ __forceinline__ int bin_block_inclusive(int v, int& total)
{
    __shared__ int part[32];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)((blockDim.x + 31) >> 5);
    const int x = warp_inclusive_scan(v);
    __syncthreads();
    if (lane == 31 || threadIdx.x + 1 == blockDim.x) part[warp] = x;
    __syncthreads();
    int before = 0;
    total = 0;
    for (int k = 0; k < warps; ++k) {
        if (k < warp) before += part[k];
        total += part[k];
    }
    return before + x;
}
