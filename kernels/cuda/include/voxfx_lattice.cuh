// Trilinear sampling of lattices and of the MAC faces: the one sampler of the FLIP
// transfers (flip_transfer.cu), the wind (snow_wind.cu) and the flakes (snow_flakes.cu).
// kernels/grid/sample.py is the NumPy reference of the same arithmetic, operation for
// operation; callers compile with --fmad=false so that both round alike.
#pragma once

__device__ __forceinline__ float lerp(float a, float b, float t) { return a + t * (b - a); }

// The trilinear interpolant of 8 corners p[8] (p000, p100, p010, p110, p001, p101, p011,
// p111: x fastest) at fractions (tx, ty, tz), in sample.blend's operation order (every
// sampler, dense or on bricks, rounds alike); with grad also its partial derivatives.
__device__ __forceinline__ float trilinear_blend(const float p[8], float tx, float ty, float tz,
                                                 float* grad = nullptr)
{
    const float dx00 = p[1] - p[0], dx10 = p[3] - p[2], dx01 = p[5] - p[4], dx11 = p[7] - p[6];
    const float c00 = p[0] + tx * dx00, c10 = p[2] + tx * dx10, c01 = p[4] + tx * dx01, c11 = p[6] + tx * dx11;
    const float c0 = c00 + ty * (c10 - c00);
    const float c1 = c01 + ty * (c11 - c01);
    if (grad) {
        const float e0 = dx00 + ty * (dx10 - dx00);
        const float e1 = dx01 + ty * (dx11 - dx01);
        const float d0 = c10 - c00;
        grad[0] = e0 + tz * (e1 - e0);
        grad[1] = d0 + tz * ((c11 - c01) - d0);
        grad[2] = c1 - c0;
    }
    return c0 + tz * (c1 - c0);
}

// Trilinear sample of a lattice f[sz][sy][sx] at lattice coordinate (fx, fy, fz), clamped
// to the lattice (zero-gradient outside; NaN → 0 as fminf/fmaxf do): per axis
// i = max(min(⌊f⌋, s − 2), 0), t = f − i, interpolated along x, then y, then z. With grad,
// also ∂/∂(fx, fy, fz) of the interpolant (per lattice spacing).
__device__ __forceinline__ float sample_lattice(const float* __restrict__ f, int sx, int sy, int sz, float fx,
                                                float fy, float fz, float* grad = nullptr)
{
    fx = fminf(fmaxf(fx, 0.0f), (float)(sx - 1));
    fy = fminf(fmaxf(fy, 0.0f), (float)(sy - 1));
    fz = fminf(fmaxf(fz, 0.0f), (float)(sz - 1));
    const int i0 = max(min((int)fx, sx - 2), 0), j0 = max(min((int)fy, sy - 2), 0), k0 = max(min((int)fz, sz - 2), 0);
    const int i1 = min(i0 + 1, sx - 1), j1 = min(j0 + 1, sy - 1), k1 = min(k0 + 1, sz - 1);
    const long long r0 = (long long)j0 * sx, r1 = (long long)j1 * sx;
    const long long s0 = (long long)k0 * sy * sx, s1 = (long long)k1 * sy * sx;
    const float p[8] = {f[s0 + r0 + i0], f[s0 + r0 + i1], f[s0 + r1 + i0], f[s0 + r1 + i1],
                        f[s1 + r0 + i0], f[s1 + r0 + i1], f[s1 + r1 + i0], f[s1 + r1 + i1]};
    return trilinear_blend(p, fx - (float)i0, fy - (float)j0, fz - (float)k0, grad);
}

// Component comp (0 = u, 1 = v, 2 = w; its face array f) of an nx × ny × nz MAC grid at
// (x, y, z) in cell units: its own lattice, ½ off along the two other axes.
__device__ __forceinline__ float sample_face(int comp, const float* __restrict__ f, int nx, int ny, int nz, float x,
                                             float y, float z, float* grad = nullptr)
{
    return sample_lattice(f, nx + (comp == 0), ny + (comp == 1), nz + (comp == 2), comp == 0 ? x : x - 0.5f,
                          comp == 1 ? y : y - 0.5f, comp == 2 ? z : z - 0.5f, grad);
}

// The velocity (u, v, w) at (x, y, z) in cell units; with grad (3×3, row a = ∂u_a/∂(x, y, z)),
// its gradient.
__device__ __forceinline__ void sample_faces(const float* __restrict__ u, const float* __restrict__ v,
                                             const float* __restrict__ w, int nx, int ny, int nz, float x, float y,
                                             float z, float out[3], float* grad = nullptr)
{
    out[0] = sample_face(0, u, nx, ny, nz, x, y, z, grad);
    out[1] = sample_face(1, v, nx, ny, nz, x, y, z, grad ? grad + 3 : nullptr);
    out[2] = sample_face(2, w, nx, ny, nz, x, y, z, grad ? grad + 6 : nullptr);
}
