// Counter-based random numbers shared by the flake and FLIP seeding kernels. Mirrors
// kernels/rng.py bit for bit (uint32 arithmetic with wraparound), so CPU and GPU
// draw the same numbers for the same (seed, id, slot, stream).
#pragma once

__device__ __forceinline__ unsigned int mix32(unsigned int x)  // MurmurHash3 finalizer
{
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

// Key of one (id, slot) under a seed: a flake's life (id, spawn) or a seeded cell's slot.
__device__ __forceinline__ unsigned int rng_key(unsigned int seed_key, unsigned int id, unsigned int slot)
{
    return mix32(mix32(id ^ seed_key) ^ slot);
}

// Uniform float in [0, 1) from the top 24 bits: exact on every device.
__device__ __forceinline__ float rng_uniform(unsigned int key, unsigned int stream)
{
    unsigned int h = mix32(mix32(key ^ (stream * 0x9E3779B9u)));
    return (float)(h >> 8) * 5.9604644775390625e-08f;  // 2^-24
}
