// The steps the sparse G2P kernels share (flip_sparse_g2p.cu g2p_advect_bricks and
// g2p_advect_sparse, flip_sparse_g2p_lean.cu g2p_advect_lean): a face lattice's corner base
// per axis and the blend at the corners. kernels/flip/sparse_transfer.py
// g2p_advect is their NumPy reference; callers compile with --fmad=false.
#pragma once
#include "voxfx_lattice.cuh"  // trilinear_blend: sample.blend's operation order

#define LATTICE_LIMIT 8388608.0f  // 2^23: |voxel index| bound of the keys (kernels/grid/sparse.py LIMIT)

// Axis a of a corner look-up at c = at[a] on a lattice of size s[a] (SparseMacGrid.sample):
// closed, c clamped to [0, s − 1], i0 = max(min(⌊c⌋, s − 2), 0) and up = (i0 + 1 clamped ≠ i0);
// open, c (NaN → 0), i0 = ⌊c⌋ while every axis so far lies within the key range (inside; else
// i0 = 0) and up = 1. t = c − i0 (beyond the range c − ⌊c⌋: no cell there, every corner reads 0
// whatever t is).
__device__ __forceinline__ void corner_axis(int a, const float at[3], int closed, const int s[3], bool& inside,
                                            int i0[3], int up[3], float t[3])
{
    float c = at[a];
    if (closed) {
        c = fminf(fmaxf(c, 0.0f), (float)(s[a] - 1));
        i0[a] = max(min((int)c, s[a] - 2), 0);
        up[a] = min(i0[a] + 1, s[a] - 1) != i0[a];
    } else {
        c = isfinite(c) ? c : 0.0f;
        const float f = floorf(c);
        inside = inside && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
        i0[a] = inside ? (int)f : 0;
        up[a] = 1;
    }
    t[a] = c - (float)i0[a];
    if (!closed && !inside) t[a] = c - floorf(c);
}

// The trilinear blend of channel f at the corners idx (−1 reads 0; sample.blend's order), with
// grad its partial derivatives.
__device__ __forceinline__ float blend_corners(const float* __restrict__ f, const int idx[8], const float t[3],
                                               float* grad)
{
    float p[8];
    for (int q = 0; q < 8; ++q) p[q] = idx[q] >= 0 ? f[idx[q]] : 0.0f;
    return trilinear_blend(p, t[0], t[1], t[2], grad);
}
