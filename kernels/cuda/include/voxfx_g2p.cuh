// The G2P velocity update of the FLIP/PIC blend and APIC's affine matrix (seed 003 Alg. 1),
// shared by the dense (flip_transfer.cu g2p_advect) and the sparse G2P kernels
// (flip_sparse_g2p.cu, flip_sparse_g2p_lean.cu); kernels/flip/transfer.py and
// sparse_transfer.py are their NumPy references. Callers compile with --fmad=false.
#pragma once

// Particle p: v ← flip·(v + (u − u_old)(x)) + pic·u(x) from un = u(x) and uo = u_old(x);
// APIC: C ← ∇u(x)/h (grad in cell units, rows ∂u_a/∂(x, y, z)).
__device__ __forceinline__ void g2p_velocity(float* __restrict__ vel, float* __restrict__ c, long long p, int apic,
                                             const float un[3], const float uo[3], const float grad[9], float flip,
                                             float pic, float inv_h)
{
    for (int a = 0; a < 3; ++a) vel[3 * p + a] = flip * (vel[3 * p + a] + (un[a] - uo[a])) + pic * un[a];
    if (apic)
        for (int a = 0; a < 9; ++a) c[9 * p + a] = grad[a] * inv_h;
}
