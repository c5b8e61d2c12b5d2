// The GPU half of kernels/rng.py's uniform(): one float per (id, counter) under a seed.
#include "voxfx_rng.cuh"

extern "C" __global__ void rng_uniforms(const unsigned int* __restrict__ ids, const unsigned int* __restrict__ counter,
                                        long long n, unsigned int seed_key, unsigned int stream,
                                        float* __restrict__ out)
{
    long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= n) return;
    out[f] = rng_uniform(rng_key(seed_key, ids[f], counter[f]), stream);
}
