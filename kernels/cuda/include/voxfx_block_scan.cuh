// Block-wide sums and scans of ints by the Hillis–Steele steps in shared memory: the
// set-up's two-launch scan (flip_sparse_pressure_scan.cu) and the one-block tail of the
// coarse levels (flip_sparse_pressure_setup.cu's mgs_tail_levels), the same integers.
#pragma once

// Σ v over the block (every thread gets it).
__device__ __forceinline__ int scan_block_sum(int v)
{
    __shared__ int part[1024];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int half = 1; half < (int)blockDim.x; half <<= 1) {  // Hillis–Steele: part[t] = Σ part[0..t]
        const int add = (int)threadIdx.x >= half ? part[threadIdx.x - half] : 0;
        __syncthreads();
        part[threadIdx.x] += add;
        __syncthreads();
    }
    const int total = part[blockDim.x - 1];
    __syncthreads();  // part is read again by the next call
    return total;
}

// The inclusive scan of v over the block's threads; *total: the block's sum.
__device__ __forceinline__ int scan_block_inclusive(int v, int* total)
{
    __shared__ int part[1024];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int half = 1; half < (int)blockDim.x; half <<= 1) {
        const int add = (int)threadIdx.x >= half ? part[threadIdx.x - half] : 0;
        __syncthreads();
        part[threadIdx.x] += add;
        __syncthreads();
    }
    const int mine = part[threadIdx.x];
    *total = part[blockDim.x - 1];
    __syncthreads();
    return mine;
}

// o[i] = carry + Σ a[lo..i] for i in [lo, hi), by the whole block (every thread calls it).
__device__ __forceinline__ void scan_range(const int* __restrict__ a, int lo, int hi, int carry, int* __restrict__ o)
{
    for (int at = lo; at < hi; at += (int)blockDim.x) {
        const int i = at + (int)threadIdx.x;
        int chunk;
        const int v = scan_block_inclusive(i < hi ? a[i] : 0, &chunk);
        if (i < hi) o[i] = carry + v;
        carry += chunk;
    }
}
