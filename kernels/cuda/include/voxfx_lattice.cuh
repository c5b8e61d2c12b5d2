// Trilinear look-up shared by the wind (snow_wind.cu) and the flakes (snow_flakes.cu);
// kernels/snow/wind.py `sample_lattice` is the NumPy reference of the same arithmetic.
#pragma once

__device__ __forceinline__ float lerp(float a, float b, float t) { return a + t * (b - a); }

// Trilinear sample of a lattice f[sz][sy][sx] (every size ≥ 2) at lattice coordinate
// (fx, fy, fz), clamped to the lattice (zero-gradient outside; NaN → 0 as fminf/fmaxf do):
// i = min(⌊fx⌋, sx − 2), t = fx − i ∈ [0, 1], interpolated along x, then y, then z.
__device__ __forceinline__ float sample_lattice(const float* __restrict__ f, int sx, int sy, int sz, float fx,
                                                float fy, float fz)
{
    fx = fminf(fmaxf(fx, 0.0f), (float)(sx - 1));
    fy = fminf(fmaxf(fy, 0.0f), (float)(sy - 1));
    fz = fminf(fmaxf(fz, 0.0f), (float)(sz - 1));
    const int i = min((int)fx, sx - 2), j = min((int)fy, sy - 2), k = min((int)fz, sz - 2);
    const float tx = fx - (float)i, ty = fy - (float)j, tz = fz - (float)k;
    const long long row = sx, plane = (long long)sx * sy;
    const float* q = f + (long long)k * plane + (long long)j * row + i;
    const float c00 = lerp(q[0], q[1], tx);
    const float c10 = lerp(q[row], q[row + 1], tx);
    const float c01 = lerp(q[plane], q[plane + 1], tx);
    const float c11 = lerp(q[plane + row], q[plane + row + 1], tx);
    return lerp(lerp(c00, c10, ty), lerp(c01, c11, ty), tz);
}
