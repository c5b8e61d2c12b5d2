// The divergence-free air band's particle stages on bricks (issue 24, accuracy;
// kernels/flip/sparse_air_band_gpu.py launches them, kernels/flip/sparse_air_band.py is the
// NumPy reference, mirrored term by term; compiled with --fmad=false so each float operation
// rounds as NumPy's does). Layout and brick tables: flip_sparse_transfer.cu's notes.
//
//   band_update_velocity  sparse_transfer.update_velocity: the FLIP/PIC blend (or APIC's C)
//                         from the liquid's faces, before the band is projected (the first
//                         half of flip_sparse_g2p.cu's g2p_advect_bricks, alone).
//   band_advect           sparse_air_band.advect: RK2 (midpoint) sub-steps through the
//                         band-projected faces, u_n blended in time where `centred`
//                         (u(t) = u_n + s·(u_{n+1} − u_n), s the fraction of the substep),
//                         then the push-out of solids and walls to the substep's start.
//
// A particle crosses up to ~20 cells a substep here, so every sample finds its own home brick
// (⌊g⌋ >> 3, its slot by binary search): corner_cells_fast's corners do not depend on the
// home, which only saves look-ups (the same bits either way).
//
// Constants from Python (-D): AIR, FLUID, SOLID (kernels/grid/mac.py), PUSH_EPSILON
// (kernels/flip/particles.py).

#include "voxfx_g2p_bricks.cuh"  // corner_axis, blend_corners, LATTICE_LIMIT
#include "voxfx_g2p.cuh"  // g2p_velocity: the FLIP/PIC blend and APIC's C
#include "voxfx_g2p_home.cuh"  // Home, corner_cells_fast, sample_faces_fast, Sampler, sampler_at, push_out_brick
#include "voxfx_sparse.cuh"  // keys, slots, binary search

// The home brick of the point g (cell units): ⌊g⌋ >> 3 and its slot where g is finite and
// within the key range, else none (every look-up searches).
__device__ __forceinline__ Home band_home(const long long* __restrict__ keys, const int* __restrict__ slots,
                                          long long n_keys, const int* __restrict__ nbr27, const float g[3])
{
    Home H{keys, slots, n_keys, nbr27, -1, {0, 0, 0}};
    bool inside = true;
    int b[3] = {0, 0, 0};
    for (int a = 0; a < 3; ++a) {
        const float f = floorf(g[a]);
        inside = inside && isfinite(g[a]) && f >= -LATTICE_LIMIT && f < LATTICE_LIMIT;
        if (inside) b[a] = ((int)f) >> 3;
    }
    if (inside) {
        for (int a = 0; a < 3; ++a) H.hb[a] = b[a];
        H.slot = sparse_slot(keys, slots, n_keys, sparse_key_of_voxel(8LL * b[0], 8LL * b[1], 8LL * b[2]));
    }
    return H;
}

// SparseMacGrid.sample_faces: sample_faces_fast (voxfx_g2p_home.cuh), as g2p_advect_bricks.

// sparse_transfer.update_velocity, one thread per particle: v ← flip·(v + (u − u_old)(x)) +
// pic·u(x), or APIC's C ← ∇u(x)/h (seed 003 Alg. 1); positions untouched.
extern "C" __global__ void band_update_velocity(const float* __restrict__ pos, float* __restrict__ vel,
                                                float* __restrict__ c, long long n, int apic,
                                                const float* __restrict__ u, const float* __restrict__ v,
                                                const float* __restrict__ w, const float* __restrict__ old_u,
                                                const float* __restrict__ old_v, const float* __restrict__ old_w,
                                                const long long* __restrict__ keys, const int* __restrict__ slots,
                                                long long n_keys, const int* __restrict__ nbr27, int closed, int nx,
                                                int ny, int nz, float ox, float oy, float oz, float inv_h, float flip,
                                                float pic)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const int dims[3] = {nx, ny, nz};
    const float g[3] = {(pos[3 * p] - ox) * inv_h, (pos[3 * p + 1] - oy) * inv_h, (pos[3 * p + 2] - oz) * inv_h};
    const Home H = band_home(keys, slots, n_keys, nbr27, g);
    float un[3], uo[3], grad[9];
    const float* const old[3] = {old_u, old_v, old_w};
    sample_faces_fast(u, v, w, H, closed, dims, g, un, apic ? grad : nullptr, old, uo);
    g2p_velocity(vel, c, p, apic, un, uo, grad, flip, pic, inv_h);
}

// sparse_air_band.advect's velocity at x and the fraction s of the substep: u_{n+1}(x), or
// with `centred` u_n(x) + s·(u_{n+1}(x) − u_n(x)) (both sampled at one set of corners).
__device__ __forceinline__ void band_velocity(const float* const* faces, const float* const* before, int centred,
                                              const long long* __restrict__ keys, const int* __restrict__ slots,
                                              long long n_keys, const int* __restrict__ nbr27, int closed,
                                              const int dims[3], const float o[3], float inv_h, const float x[3],
                                              float s, float out[3])
{
    const float g[3] = {(x[0] - o[0]) * inv_h, (x[1] - o[1]) * inv_h, (x[2] - o[2]) * inv_h};
    const Home H = band_home(keys, slots, n_keys, nbr27, g);
    float old[3];
    sample_faces_fast(faces[0], faces[1], faces[2], H, closed, dims, g, out, nullptr, centred ? before : nullptr, old);
    if (centred)
        for (int a = 0; a < 3; ++a) out[a] = old[a] + s * (out[a] - old[a]);
}

// sparse_air_band.advect, one thread per particle: `steps` RK2 sub-steps of `step` seconds,
// x_m = x + (½·step)·u(x, i/steps), x ← x + step·u(x_m, (i + ½)/steps) (the fractions rounded
// from double, as NumPy's float32(i / n)), then push_out_brick to the substep's start.
extern "C" __global__ void band_advect(float* __restrict__ pos, long long n, const float* __restrict__ u,
                                       const float* __restrict__ v, const float* __restrict__ w, int centred,
                                       const float* __restrict__ b_u, const float* __restrict__ b_v,
                                       const float* __restrict__ b_w, const unsigned char* __restrict__ solid,
                                       const long long* __restrict__ keys, const int* __restrict__ slots,
                                       long long n_keys, const int* __restrict__ nbr27, int closed, int nx, int ny,
                                       int nz, float ox, float oy, float oz, float h, float inv_h, int steps,
                                       float step, float half_step)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const int dims[3] = {nx, ny, nz};
    const float o[3] = {ox, oy, oz};
    const float* const faces[3] = {u, v, w};
    const float* const before[3] = {b_u, b_v, b_w};
    const float x0[3] = {pos[3 * p], pos[3 * p + 1], pos[3 * p + 2]};
    float x[3] = {x0[0], x0[1], x0[2]};
    for (int i = 0; i < steps; ++i) {
        float v1[3], xm[3], v2[3];
        const float s1 = (float)((double)i / (double)steps), s2 = (float)(((double)i + 0.5) / (double)steps);
        band_velocity(faces, before, centred, keys, slots, n_keys, nbr27, closed, dims, o, inv_h, x, s1, v1);
        for (int a = 0; a < 3; ++a) xm[a] = x[a] + half_step * v1[a];
        band_velocity(faces, before, centred, keys, slots, n_keys, nbr27, closed, dims, o, inv_h, xm, s2, v2);
        for (int a = 0; a < 3; ++a) x[a] = x[a] + step * v2[a];
    }
    const float g0[3] = {(x0[0] - ox) * inv_h, (x0[1] - oy) * inv_h, (x0[2] - oz) * inv_h};
    bool finite, inside;
    const Sampler S = sampler_at(keys, slots, n_keys, nbr27, closed, nx, ny, nz, g0, finite, inside);  // home: none
    push_out_brick(x, x0, solid, S, o, h, inv_h);
    for (int a = 0; a < 3; ++a) pos[3 * p + a] = x[a];
}
