// The P2G scatter's crowded warps (flip_sparse_scatter.cu with SCATTER_CROWD 1, the lean code's
// slot order: sparse_scatter.crowd_mode "on", helper h17d). After the splash a few cells hold
// hundreds to thousands of particles; the binning places a brick's particles cell by cell, so
// a warp's 32 lanes (spread 8 apart) then all lie in one cell and add their 24 terms into the
// same few shared words: one atomic instruction is up to 32 passes of the shared-memory unit
// (the atomics are the lean kernel's limit: its notes). Here the lanes whose particles have the
// same nodes for all 24 terms (the same cell and the same half-lattice nodes: key below) sum
// their terms first, by a binary tree of shuffles over the group's lanes (64-bit integers:
// wrap-around adds, any grouping gives the same sum), and the group's first lane adds the
// sums with the lean code's paired atomics: one add a group instead of one a lane. The sums
// in shared memory are the same integers (modulo 2^64: the lean kernel's), so the same faces
// and masks bit for bit. A warp whose largest group is smaller than SCATTER_CROWD_MIN lanes
// (expected of the warps before the splash, ~8 particles a cell) takes the lean code as before,
// after one match and one max.
// Included by flip_sparse_scatter.cu after voxfx_scatter_lean.cuh (its scatter_component_lean).
#pragma once

#include "voxfx_reduce.cuh"  // warp_lane, warp_match_any, warp_all_max_int, warp_shfl_u64

#ifndef SCATTER_CROWD_MIN  // the smallest largest group (lanes) for which a warp sums its groups first
#define SCATTER_CROWD_MIN 4
#endif

// The lane of mask's set bit of rank n (0: the lowest; n < popc(mask)): the largest lane with
// at most n set bits below it, by halving.
__device__ __forceinline__ int crowd_nth(unsigned int mask, int n)
{
    int lane = 0;
#pragma unroll
    for (int w = 16; w > 0; w >>= 1)
        if (__popc(mask & ((1u << (lane + w)) - 1u)) <= n) lane += w;
    return lane;
}

// A group's binary tree over its lanes in rank order (rank r: the group's lanes below this
// one): at step k a lane of rank r ≡ 0 (mod 2^(k+1)) adds the value of rank r + 2^k, where
// that rank exists; after `steps` (⌈log2⌉ of the warp's largest group: the same in every
// lane) rank 0 holds the group's sum. src: the lane read at step k in bits 5k…5k+4 (a lane
// that adds nothing reads itself), take: bit k where it adds.
struct CrowdTree {
    int steps;
    unsigned int src, take;
    bool first;  // rank 0: the lane that adds the group's sums
};

__device__ __forceinline__ CrowdTree crowd_tree(unsigned int group, unsigned int lane, int most)
{
    CrowdTree t;
    const int size = __popc(group), r = __popc(group & ((1u << lane) - 1u));
    t.steps = 0;
    while ((1 << t.steps) < most) ++t.steps;
    t.src = 0u;
    t.take = 0u;
    t.first = r == 0;
    for (int k = 0; k < t.steps; ++k) {
        int src = (int)lane;
        const int other = r + (1 << k);
#ifndef SCATTER_CROWD_MUTANT  // the host harness's mutant: the last step's adds dropped (its test must fail)
        if ((r & ((2 << k) - 1)) == 0 && other < size) {
#else
        if ((r & ((2 << k) - 1)) == 0 && other < size && k + 1 < t.steps) {
#endif
            src = crowd_nth(group, other);
            t.take |= 1u << k;
        }
        t.src |= (unsigned int)src << (5 * k);
    }
    return t;
}

// v summed over the group by t (every lane of the warp must call it: shuffles).
__device__ __forceinline__ unsigned long long crowd_sum(unsigned long long v, const CrowdTree& t)
{
#pragma unroll 1
    for (int k = 0; k < t.steps; ++k) {
        const unsigned long long other = warp_shfl_u64(v, (int)((t.src >> (5 * k)) & 31u));
        if ((t.take >> k) & 1u) v += other;
    }
    return v;
}

// scatter_component_lean's eight terms of one component (the same operations, so the same
// integers) for every lane of the warp, each term's two integers summed over the lane's group
// and added by the group's first lane (`first`: a particle, rank 0) where the term is taken
// (the window and face lattice: ok's bits; a lane alone in its group adds its own terms).
template <bool APIC>
__device__ __forceinline__ void scatter_component_crowd(int comp, const float f[3][2], const int base[3][2],
                                                        const float gl[3][2], const float nf[3][2], unsigned int ok,
                                                        unsigned int swap, float vq, float r0, float r1, float r2,
                                                        float h, float scale_q, float scale_w, const CrowdTree& tree,
                                                        bool first, unsigned int* acc)
{
    const int ex = comp == 0 ? 9 : 10, ey = comp == 1 ? 9 : 10;
    const int l0 = comp != 0, l1 = comp != 1, l2 = comp != 2;
    const int s0 = l0 & (int)swap, s1 = l1 & (int)(swap >> 1), s2 = l2 & (int)(swap >> 2);
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
        if (APIC) {
            nu0[u] = nf[0][l0] + (float)(u ^ s0);
            nu1[u] = nf[1][l1] + (float)(u ^ s1);
            nu2[u] = nf[2][l2] + (float)(u ^ s2);
        }
    }
#pragma unroll
    for (int u0 = 0; u0 < 2; ++u0)
#pragma unroll
        for (int u1 = 0; u1 < 2; ++u1) w01[u0][u1] = wt0[u0] * wt1[u1];
    const float sq = vq * scale_q;
#pragma unroll
    for (int corner = 0; corner < 8; ++corner) {
        const int u0 = corner & 1, u1 = (corner >> 1) & 1, u2 = corner >> 2;
        const unsigned int need = (1u << ((0 * 2 + l0) * 2 + u0)) | (1u << ((1 * 2 + l1) * 2 + u1)) |
                                  (1u << ((2 * 2 + l2) * 2 + u2));
        const float weight = w01[u0][u1] * wt2[u2];
        long long num;
        if (APIC) {
            const float d0 = (nu0[u0] - gl[0][l0]) * h, d1 = (nu1[u1] - gl[1][l1]) * h, d2 = (nu2[u2] - gl[2][l2]) * h;
            const float q = vq + (r0 * d0 + r1 * d1 + r2 * d2);
            num = scatter_round((weight * q) * scale_q);
        } else {
            num = scatter_round(weight * sq);
        }
        const unsigned long long n_sum = crowd_sum((unsigned long long)num, tree);
        const unsigned long long w_sum = crowd_sum((unsigned long long)scatter_round_up(weight * scale_w), tree);
        if (first && (ok & need) == need) {
            const int at = at2[u2] + at1[u1] + at0[u0];
            scatter_add_pair_lean(acc, at, (long long)n_sum, 3 * SCATTER_NODES + at, (long long)w_sum);
        }
    }
}

// scatter_particle_lean for a warp (every lane must call it; p < 0: no particle, an empty
// lane of the brick's last rows): the particle's state as scatter_particle_lean's, its key
// (its cell's and half lattices' first nodes, brick-local: equal keys, equal nodes for all
// 24 terms; a lane with no particle or a term outside the window or face lattice is a group of
// its own), the groups by one match, and the lean code where no group has SCATTER_CROWD_MIN
// lanes, else scatter_component_crowd.
template <bool APIC>
__device__ __forceinline__ void scatter_particle_crowd(const float* __restrict__ spos, const float* __restrict__ svel,
                                                       const float* __restrict__ sc, int p, const int brick[3],
                                                       int closed, const int n[3], const float o[3], float h,
                                                       float inv_h, float scale_q, float scale_w, unsigned int* acc)
{
    const unsigned int lane = warp_lane();
    float f[3][2], gl[3][2], nf[3][2];
    int base[3][2];
    unsigned int ok = 0u, swap = 0u;
#pragma unroll
    for (int a = 0; a < 3; ++a) {  // scatter_particle_lean's operations
        const float g = p >= 0 ? (spos[3LL * p + a] - o[a]) * inv_h : 0.0f;
        const int cell = (int)floorf(g);
#pragma unroll
        for (int L = 0; L < 2; ++L) {
            gl[a][L] = L ? g - 0.5f : g;
            float x = gl[a][L];
            if (closed) x = fminf(fmaxf(x, -2.0f), (float)(n[a] + 2));
            const float b = floorf(x);
            f[a][L] = x - b;
            base[a][L] = (int)b - brick[a];
            nf[a][L] = (float)(int)b;
            const int s = SCATTER_FLIP && L && (int)b < cell;
            swap |= (unsigned int)s << a;
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int node = (int)b + u, r = node - cell;
                const bool take = (L ? (r >= -1 && r <= 1) : (r == 0 || r == 1)) &&
                                  (!closed || (node >= 0 && node < n[a] + 1 - L));
                ok |= (unsigned int)take << ((a * 2 + L) * 2 + (u ^ s));
            }
        }
    }
    unsigned int key = 0x80000000u | lane;  // a group of its own
    if (p >= 0 && ok == 0xfffu) {
        unsigned int packed = 0u;
        bool fits = true;
#pragma unroll
        for (int a = 0; a < 3; ++a)
#pragma unroll
            for (int L = 0; L < 2; ++L) {
                const int b = base[a][L] + 2;  // −2 … 13 fit four bits (a window inside the brick's halo)
                fits = fits && b >= 0 && b < 16;
                packed |= (unsigned int)(b & 15) << (4 * (a * 2 + L));
            }
        if (fits) key = packed;  // swap follows from base (a half lattice's first node below the cell's)
    }
    const unsigned int group = warp_match_any(key);
    const int most = warp_all_max_int(__popc(group));
    if (most < SCATTER_CROWD_MIN) {  // the same in every lane: the lean code
        if (p < 0) return;
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
        return;
    }
    const CrowdTree tree = crowd_tree(group, lane, most);
    const bool first = p >= 0 && tree.first;
#pragma unroll
    for (int comp = 0; comp < 3; ++comp) {
        float r0 = 0.0f, r1 = 0.0f, r2 = 0.0f;
        if (APIC && p >= 0) {
            r0 = sc[9LL * p + 3 * comp];
            r1 = sc[9LL * p + 3 * comp + 1];
            r2 = sc[9LL * p + 3 * comp + 2];
        }
        scatter_component_crowd<APIC>(comp, f, base, gl, nf, ok, swap, p >= 0 ? svel[3LL * p + comp] : 0.0f, r0, r1,
                                      r2, h, scale_q, scale_w, tree, first, acc);
    }
}
