"""Texture colours on the GPU (``texture``'s CuPy path): one CUDA thread per voxel,
the same float32 arithmetic in the same order as the NumPy reference. The per-voxel
function is host-and-device, so tests/unit/test_cuda_texture_host.py runs it on the CPU
without a GPU; compiled without fused multiply-add (``_OPTIONS``)."""

from __future__ import annotations

import numpy as np

_SOURCE = r"""
#ifndef VOXFX_HD
#define VOXFX_HD __host__ __device__
#endif

VOXFX_HD inline float dot3(const float* a, const float* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

// Barycentrics (u, v, w) of the point of triangle abc closest to p (Ericson 5.1.5).
VOXFX_HD inline void closest_barycentrics(const float* p, const float* a, const float* b, const float* c,
                                          float* u, float* v, float* w) {
    float ab[3], ac[3], ap[3], bp[3], cp[3];
    for (int k = 0; k < 3; ++k) {
        ab[k] = b[k] - a[k]; ac[k] = c[k] - a[k]; ap[k] = p[k] - a[k]; bp[k] = p[k] - b[k]; cp[k] = p[k] - c[k];
    }
    float d1 = dot3(ab, ap), d2 = dot3(ac, ap), d3 = dot3(ab, bp), d4 = dot3(ac, bp);
    float d5 = dot3(ab, cp), d6 = dot3(ac, cp);
    float vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
    *u = 1.0f; *v = 0.0f; *w = 0.0f;
    if (d1 <= 0.0f && d2 <= 0.0f) return;                                   // vertex a
    if (d3 >= 0.0f && d4 <= d3) { *u = 0.0f; *v = 1.0f; return; }           // vertex b
    if (vc <= 0.0f && d1 >= 0.0f && d3 <= 0.0f) {                           // edge ab
        float t = d1 / (d1 - d3); *u = 1.0f - t; *v = t; return;
    }
    if (d6 >= 0.0f && d5 <= d6) { *u = 0.0f; *w = 1.0f; return; }           // vertex c
    if (vb <= 0.0f && d2 >= 0.0f && d6 <= 0.0f) {                           // edge ac
        float t = d2 / (d2 - d6); *u = 1.0f - t; *w = t; return;
    }
    if (va <= 0.0f && d4 - d3 >= 0.0f && d5 - d6 >= 0.0f) {                 // edge bc
        float t = (d4 - d3) / ((d4 - d3) + (d5 - d6)); *u = 0.0f; *v = 1.0f - t; *w = t; return;
    }
    float sum = va + vb + vc;
    if (!(sum > 0.0f)) return;                                              // zero area: vertex a
    *v = vb / sum; *w = vc / sum; *u = 1.0f - *v - *w;                      // inside the face
}

// Squared distance from p to triangle q (9 floats), with the closest point's barycentrics.
VOXFX_HD inline float distance2_to(const float* p, const float* q, float* u, float* v, float* w) {
    closest_barycentrics(p, q, q + 3, q + 6, u, v, w);
    float d[3];
    for (int k = 0; k < 3; ++k) d[k] = p[k] - (*u * q[k] + *v * q[3 + k] + *w * q[6 + k]);
    return d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
}

// Texel i of n along one axis under the Image Texture extension (0 Repeat, 1 Extend,
// 2 Clip, 3 Mirror); -1: past the image under Clip (transparent black).
VOXFX_HD inline long long texel_index(long long i, long long n, int extension) {
    if (extension == 1) return i < 0 ? 0 : (i >= n ? n - 1 : i);
    if (extension == 2) return (i < 0 || i >= n) ? -1 : i;
    if (extension == 3) {
        long long m = (i < 0 ? -i - 1 : i) % (2 * n);
        return m >= n ? 2 * n - 1 - m : m;
    }
    return ((i % n) + n) % n;
}

VOXFX_HD inline float texel(const float* px, long long W, long long i, long long j, int k) {
    return (i < 0 || j < 0) ? 0.0f : px[4 * (j * W + i) + k];
}

// The colour at (s, r) of a W × H RGBA image px, as sampler (bit 0: Closest, else
// Linear; bits 1-2: extension) samples it, into out[0..3].
VOXFX_HD inline void sample_image(float s, float r, int sampler, long long W, long long H, const float* px,
                                  float* out) {
    int extension = sampler >> 1;
    if (sampler & 1) {  // Closest: the texel under (s W, r H)
        float x = floorf(s * (float)W), y = floorf(r * (float)H);
        long long i = texel_index((long long)x, W, extension), j = texel_index((long long)y, H, extension);
        for (int k = 0; k < 4; ++k) out[k] = texel(px, W, i, j, k);
        return;
    }
    float x = s * (float)W - 0.5f, y = r * (float)H - 0.5f;  // Linear: texel centres at (i + 1/2) / W
    float x0 = floorf(x), y0 = floorf(y);
    float fx = x - x0, fy = y - y0;
    long long i0 = texel_index((long long)x0, W, extension), i1 = texel_index((long long)x0 + 1, W, extension);
    long long j0 = texel_index((long long)y0, H, extension), j1 = texel_index((long long)y0 + 1, H, extension);
    for (int k = 0; k < 4; ++k) {
        float p00 = texel(px, W, i0, j0, k), p10 = texel(px, W, i1, j0, k);
        float p01 = texel(px, W, i0, j1, k), p11 = texel(px, W, i1, j1, k);
        float low = (1.0f - fx) * p00 + fx * p10, high = (1.0f - fx) * p01 + fx * p11;
        out[k] = (1.0f - fy) * low + fy * high;
    }
}

// Colour of voxel i into out[4 i .. 4 i + 3]; returns whether it had a texture.
VOXFX_HD inline bool texture_color_of(long long i, const float* centres, const int* owner, const float* corners,
                                      const int* triangles, const long long* ring_start, const int* ring,
                                      const float* uvs, const int* image_of_triangle, const long long* image_start,
                                      const int* image_width, const int* image_height, const int* samplers,
                                      const float* pixels, float* out) {
    int t = owner[i];
    int image = t >= 0 ? image_of_triangle[t] : -1;
    if (image < 0) {
        for (int k = 0; k < 4; ++k) out[4 * i + k] = nanf("");
        return false;
    }
    const float* p = centres + 3 * i;
    float u, v, w;
    float best = distance2_to(p, corners + 9 * (long long)t, &u, &v, &w);
    int owner_t = t;
    for (int c = 0; c < 3; ++c) {  // the triangles around the owner's corners
        int vertex = triangles[3 * (long long)owner_t + c];
        for (long long r = ring_start[vertex]; r < ring_start[vertex + 1]; ++r) {
            int other = ring[r];
            if (other == owner_t || image_of_triangle[other] != image) continue;
            float ou, ov, ow;
            float d = distance2_to(p, corners + 9 * (long long)other, &ou, &ov, &ow);
            if (d < best || (d == best && other < t)) { best = d; t = other; u = ou; v = ov; w = ow; }
        }
    }
    const float* uv = uvs + 6 * (long long)t;
    float s = u * uv[0] + v * uv[2] + w * uv[4];
    float r = u * uv[1] + v * uv[3] + w * uv[5];
    sample_image(s, r, samplers[image], image_width[image], image_height[image], pixels + image_start[image],
                 out + 4 * i);
    return true;
}

#ifndef VOXFX_HOST_ONLY
extern "C" __global__ void texture_colors(const float* centres, const int* owner, const float* corners,
                                          const int* triangles, const long long* ring_start, const int* ring,
                                          const float* uvs, const int* image_of_triangle,
                                          const long long* image_start, const int* image_width,
                                          const int* image_height, const int* samplers, const float* pixels,
                                          float* out, bool* textured, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    textured[i] = texture_color_of(i, centres, owner, corners, triangles, ring_start, ring, uvs, image_of_triangle,
                                   image_start, image_width, image_height, samplers, pixels, out);
}
#endif
"""

_OPTIONS = ("--fmad=false", "--std=c++14")
_THREADS = 256


def _texture_colors_cupy(cp, centres, owner, mesh, uvs, image_of_triangle, packed):
    n = len(owner)
    out = cp.empty((n, 4), cp.float32)
    textured = cp.empty(n, cp.bool_)
    if n == 0:
        return out, textured
    corners, tris, ring_start, ring = (cp.asarray(a) for a in mesh)
    start, width, height, samplers, pixels = (cp.asarray(a) for a in packed)  # no copy when already there
    kernel = cp.RawKernel(_SOURCE, "texture_colors", options=_OPTIONS)
    args = (cp.ascontiguousarray(cp.asarray(centres, cp.float32)), cp.ascontiguousarray(cp.asarray(owner, cp.int32)),
            corners, tris, ring_start, ring, cp.ascontiguousarray(cp.asarray(uvs, cp.float32)),
            cp.ascontiguousarray(cp.asarray(image_of_triangle, cp.int32)), start, width, height, samplers, pixels,
            out, textured, np.int64(n))
    kernel(((n + _THREADS - 1) // _THREADS,), (_THREADS,), args)
    return out, textured
