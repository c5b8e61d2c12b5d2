// A pool slot's topology margin from the particles' speeds (seed 003 §5.2, per-brick margins:
// sparse_grid.BrickReach.margins is the reference): flip_sparse_topology.cu's slot_margins and
// flip_sparse_reach.cu's reach_slots (the merged pipeline) compute it here, so the two are the
// same arithmetic (both files compiled with --fmad=false).
#pragma once

// The float of bits b (the host harnesses build the kernel files as host code).
__device__ __forceinline__ float float_of_bits(unsigned int b)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    __builtin_memcpy(&f, &b, sizeof f);
    return f;
#endif
}

// The largest |v|² bits (mark_occupied's speed2) of the 27 bricks around a used slot (nbr27; itself
// included); 0 for a slot not in use.
__device__ __forceinline__ unsigned int slot_speed_bits(const unsigned int* __restrict__ speed2,
                                                        const unsigned char* __restrict__ used,
                                                        const int* __restrict__ nbr27, long long slot)
{
    unsigned int bits = 0;
    if (used[slot])
        for (int o = 0; o < 27; ++o) {
            const int s = nbr27[27 * slot + o];
            if (s >= 0 && speed2[s] > bits) bits = speed2[s];
        }
    return bits;
}

// The margin of a slot whose largest |v|² has the bits `bits`: base + ⌈(s + |g|·dt)·dt/h⌉ with
// s = √(that |v|²) rounded to float32 as NumPy's sqrt does, then widened; past 2^20 cells (or
// not finite) 2^30, which every reach then reports beyond.
__device__ __forceinline__ int slot_margin_of_bits(unsigned int bits, double dt, double gdt, double h, int base)
{
    const double reach = ((double)sqrtf(float_of_bits(bits)) + gdt) * dt / h;
    return reach <= 1048576.0 ? base + (int)ceil(reach) : 1 << 30;
}
