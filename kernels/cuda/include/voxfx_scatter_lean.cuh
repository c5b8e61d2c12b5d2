// The P2G scatter's lean code (flip_sparse_scatter.cu with SCATTER_LEAN 1: sparse_scatter.kernel_mode
// "lean"): the carries by the add's carry flag, a component's eight terms without a branch a
// term, and a particle's three components. Included by flip_sparse_scatter.cu where SCATTER_LEAN
// is 1, after its SCATTER_NODES and voxfx_scatter_terms.cuh's scatter_word / SCATTER_WORDS (a part of that
// file kept apart for its length, issue 24: modules under ~500 lines; no include guard of its own).
#pragma once

// The high word of a 64-bit add whose low word's atomic returned old: hi + the carry of
// old + lo, by the add's carry flag (add.cc / addc: two instructions) instead of a compare
// and a select. The same words as scatter_add's.
__device__ __forceinline__ unsigned int scatter_carry_hi(unsigned int old, unsigned int lo, unsigned int hi)
{
#ifdef __CUDA_ARCH__
    unsigned int out;
    asm("{\n\t.reg .u32 s;\n\tadd.cc.u32 s, %1, %2;\n\taddc.u32 %0, %3, 0;\n\t}"
        : "=r"(out) : "r"(old), "r"(lo), "r"(hi));
    return out;
#else
    return hi + (old + lo < old ? 1u : 0u);
#endif
}

// scatter_add_pair with the carries by scatter_carry_hi: the same four atomics, the same sums.
__device__ __forceinline__ void scatter_add_pair_lean(unsigned int* acc, int at_x, long long x, int at_y, long long y)
{
    const unsigned int lo_x = (unsigned int)(unsigned long long)x, hi_x = (unsigned int)((unsigned long long)x >> 32);
    const unsigned int lo_y = (unsigned int)(unsigned long long)y, hi_y = (unsigned int)((unsigned long long)y >> 32);
    const unsigned int old_x = atomicAdd(acc + at_x, lo_x);
    const unsigned int old_y = atomicAdd(acc + at_y, lo_y);
    atomicAdd(acc + SCATTER_WORDS + at_x, scatter_carry_hi(old_x, lo_x, hi_x));
    atomicAdd(acc + SCATTER_WORDS + at_y, scatter_carry_hi(old_y, lo_y, hi_y));
}

// One component's eight terms of a particle (scatter_particle_lean's state: per axis a and
// lattice L the fraction f, the first node's brick-local coordinate base, with APIC the
// coordinate gl and the first node as a float; ok: bit (a·2 + L)·2 + slot). CHECK: test each
// term's window and face lattice; without it every term is added (all twelve bits set). A
// term of weight 0 is added too: it adds 0 to both sums (scatter_particle skips it). swap
// (SCATTER_FLIP): bit a set, axis a's half lattice takes its nodes in slot order (1, 0), so
// that slot 0 is the particle's own cell (the node the warp's other lanes take for their
// cells too: fewer lanes on one address or bank). Each node's term is the same operations
// whatever its slot, so the same integers.
template <bool APIC, bool CHECK>
__device__ __forceinline__ void scatter_component_lean(int comp, const float f[3][2], const int base[3][2],
                                                       const float gl[3][2], const float nf[3][2], unsigned int ok,
                                                       unsigned int swap, float vq, const float* __restrict__ r,
                                                       float h, float scale_q, float scale_w, unsigned int* acc)
{
    const int ex = comp == 0 ? 9 : 10, ey = comp == 1 ? 9 : 10;
    const int l0 = comp != 0, l1 = comp != 1, l2 = comp != 2;  // each axis' lattice
    // the node of slot u along axis a is u ^ s_a past the first (s_a: a half lattice's swap)
    const int s0 = l0 & (int)swap, s1 = l1 & (int)(swap >> 1), s2 = l2 & (int)(swap >> 2);
    // scatter_node's index as three parts, one per axis and slot
    int at0[2], at1[2], at2[2];
    float wt0[2], wt1[2], wt2[2], w01[2][2], nu0[2], nu1[2], nu2[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        at0[u] = base[0][l0] + (u ^ s0) + l0;
        at1[u] = (base[1][l1] + (u ^ s1) + l1) * ex;
        at2[u] = comp * SCATTER_NODES + (base[2][l2] + (u ^ s2) + l2) * (ey * ex);
        wt0[u] = (u ^ s0) ? f[0][l0] : 1.0f - f[0][l0];
        wt1[u] = (u ^ s1) ? f[1][l1] : 1.0f - f[1][l1];
        wt2[u] = (u ^ s2) ? f[2][l2] : 1.0f - f[2][l2];
        if (APIC) {  // the node as a float: the first node's + 0 or 1 (exact), as before
            nu0[u] = nf[0][l0] + (float)(u ^ s0);
            nu1[u] = nf[1][l1] + (float)(u ^ s1);
            nu2[u] = nf[2][l2] + (float)(u ^ s2);
        }
    }
#pragma unroll
    for (int u0 = 0; u0 < 2; ++u0)
#pragma unroll
        for (int u1 = 0; u1 < 2; ++u1) w01[u0][u1] = wt0[u0] * wt1[u1];  // the weight's first product
    // FLIP: w·q·2^k_q as w·(q·2^k_q), one product a term. Both are rn(w·q)·2^k_q wherever
    // q·2^k_q and w·q are normal floats (scaling by a power of two is exact there and
    // commutes with rounding); where w·q is subnormal, |w·q·2^k_q| < 2^-126·2^116 (k_q ≤
    // 61 − 5 + 60) rounds to the integer 0 both ways, and q·2^k_q is exact unless k_q < 0
    // (a bound Q over 2^52 m/s) while w·q·2^k_q is then below 2^-126 (0 both ways again).
    const float sq = vq * scale_q;
    float r0 = 0.0f, r1 = 0.0f, r2 = 0.0f;
    if (APIC) {
        r0 = r[0];
        r1 = r[1];
        r2 = r[2];
    }
#pragma unroll
    for (int corner = 0; corner < 8; ++corner) {
        const int u0 = corner & 1, u1 = (corner >> 1) & 1, u2 = corner >> 2;
        if (CHECK) {
            const unsigned int need = (1u << ((0 * 2 + l0) * 2 + u0)) | (1u << ((1 * 2 + l1) * 2 + u1)) |
                                      (1u << ((2 * 2 + l2) * 2 + u2));
            if ((ok & need) != need) continue;
        }
        const float weight = w01[u0][u1] * wt2[u2];
        long long num;
        if (APIC) {  // scatter_particle's d_b and q, the same operations
            const float d0 = (nu0[u0] - gl[0][l0]) * h, d1 = (nu1[u1] - gl[1][l1]) * h, d2 = (nu2[u2] - gl[2][l2]) * h;
            const float q = vq + (r0 * d0 + r1 * d1 + r2 * d2);
            num = scatter_round((weight * q) * scale_q);
        } else {
            num = scatter_round(weight * sq);
        }
        const int at = at2[u2] + at1[u1] + at0[u0];
        scatter_add_pair_lean(acc, at, num, 3 * SCATTER_NODES + at, scatter_round_up(weight * scale_w));
    }
}

// scatter_particle's 24 terms, the same integers (sparse_scatter.kernel_mode "lean"): the
// node index from per-axis parts, the weight's first product once for two terms, the
// carries by the add's flag, no test of w = 0, and the window and face lattice tested once
// a particle (a particle whose twelve (axis, lattice, node) pass adds its 24 terms without
// a test each). The node's float is the first node's + u (exact: nodes are below 2^24).
template <bool APIC>
__device__ __forceinline__ void scatter_particle_lean(const float* __restrict__ spos, const float* __restrict__ svel,
                                                      const float* __restrict__ sc, int p, const int brick[3],
                                                      int closed, const int n[3], const float o[3], float h,
                                                      float inv_h, float scale_q, float scale_w, unsigned int* acc)
{
    float f[3][2], gl[3][2], nf[3][2];
    int base[3][2];
    unsigned int ok = 0u, swap = 0u;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const float g = (spos[3LL * p + a] - o[a]) * inv_h;
        const int cell = (int)floorf(g);  // its bin (count_particles_sparse)
#pragma unroll
        for (int L = 0; L < 2; ++L) {
            gl[a][L] = L ? g - 0.5f : g;
            float x = gl[a][L];
            if (closed) x = fminf(fmaxf(x, -2.0f), (float)(n[a] + 2));
            const float b = floorf(x);
            f[a][L] = x - b;
            base[a][L] = (int)b - brick[a];
            nf[a][L] = (float)(int)b;
            // SCATTER_FLIP: the half lattice's nodes b, b + 1 in the order (cell, other)
            const int s = SCATTER_FLIP && L && (int)b < cell;
            swap |= (unsigned int)s << a;
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int node = (int)b + u, r = node - cell;
                const bool take = (L ? (r >= -1 && r <= 1) : (r == 0 || r == 1)) &&  // the gathers' window
                                  (!closed || (node >= 0 && node < n[a] + 1 - L));    // the face lattice
                ok |= (unsigned int)take << ((a * 2 + L) * 2 + (u ^ s));  // bit of the node's slot
            }
        }
    }
    if (ok == 0xfffu) {
#pragma unroll
        for (int comp = 0; comp < 3; ++comp)
            scatter_component_lean<APIC, false>(comp, f, base, gl, nf, ok, swap, svel[3LL * p + comp],
                                                sc + 9LL * p + 3 * comp, h, scale_q, scale_w, acc);
    } else {
#pragma unroll
        for (int comp = 0; comp < 3; ++comp)
            scatter_component_lean<APIC, true>(comp, f, base, gl, nf, ok, swap, svel[3LL * p + comp],
                                               sc + 9LL * p + 3 * comp, h, scale_q, scale_w, acc);
    }
}
