// The P2G scatter's shared accumulators and a particle's terms (flip_sparse_scatter.cu's notes; a part of that
// file kept apart for its length, issue 24: modules under ~500 lines, helper s23g): a 64-bit integer added as two
// 32-bit words (scatter_add, scatter_add_pair), a sum read back (scatter_word), a node's place (scatter_node) and
// the default code's particle (scatter_particle). Included by flip_sparse_scatter.cu after its SCATTER_NODES,
// SCATTER_PAIRED and scatter_round / scatter_round_up, before voxfx_scatter_lean.cuh, which uses these names.
// Compiled with --fmad=false as the kernel file.
#pragma once

// A 64-bit integer added to a shared accumulator kept as two 32-bit words (lo, hi =
// lo + SCATTER_WORDS): 64-bit shared atomicAdd is a compare-and-swap loop on sm_90
// (ATOMS.CAST.SPIN.64, measured 2.14 ms at 8M particles), 32-bit adds are native. The low
// word's old value gives the carry, added with the high word: Σ (hi·2^32 + lo) is the sum
// modulo 2^64 whatever the order, as with one 64-bit word.
#define SCATTER_WORDS (6 * SCATTER_NODES)

__device__ __forceinline__ void scatter_add(unsigned int* acc, int at, long long x)
{
    const unsigned int lo = (unsigned int)(unsigned long long)x, hi = (unsigned int)((unsigned long long)x >> 32);
    const unsigned int old = atomicAdd(acc + at, lo);
    atomicAdd(acc + SCATTER_WORDS + at, hi + (old + lo < old ? 1u : 0u));
}

// Two such adds with both low words first (SCATTER_PAIRED, sparse_scatter.atomics_mode
// "paired", the default): two atomics in flight before either high word waits on its carry.
// The same sums: integer adds in another order. H100, 8M: 552 against 559–562 µs (ncu).
__device__ __forceinline__ void scatter_add_pair(unsigned int* acc, int at_x, long long x, int at_y, long long y)
{
    const unsigned int lo_x = (unsigned int)(unsigned long long)x, hi_x = (unsigned int)((unsigned long long)x >> 32);
    const unsigned int lo_y = (unsigned int)(unsigned long long)y, hi_y = (unsigned int)((unsigned long long)y >> 32);
    const unsigned int old_x = atomicAdd(acc + at_x, lo_x);
    const unsigned int old_y = atomicAdd(acc + at_y, lo_y);
    atomicAdd(acc + SCATTER_WORDS + at_x, hi_x + (old_x + lo_x < old_x ? 1u : 0u));
    atomicAdd(acc + SCATTER_WORDS + at_y, hi_y + (old_y + lo_y < old_y ? 1u : 0u));
}

__device__ __forceinline__ unsigned long long scatter_word(const unsigned int* acc, int at)
{
    return ((unsigned long long)acc[SCATTER_WORDS + at] << 32) | acc[at];
}

// Shared-memory node of component comp at brick-local (x, y, z): x ∈ [0, 9) along comp,
// [−1, 9) across.
__device__ __forceinline__ int scatter_node(int comp, int x, int y, int z)
{
    const int ex = comp == 0 ? 9 : 10, ey = comp == 1 ? 9 : 10;
    return comp * SCATTER_NODES + ((z + (comp != 2)) * ey + (y + (comp != 1))) * ex + (x + (comp != 0));
}

// One particle's 24 terms into the shared accumulators (acc: num then den, 3·SCATTER_NODES
// each, as scatter_add's two words). Per axis a, lattice L (0: the component's own, g; 1:
// half-shifted, g − ½) and node u ∈ {0, 1} of the hat (hat_weight's operations: closed, the
// coordinate clamped to [−2, n + 2]; base ⌊·⌋, weights 1 − f and f) the weight, the node's
// brick-local coordinate and whether it may take the term (the window, the closed face
// lattice) are computed once; a term is then three of each. Terms are scaled in float32
// (w·q and w times a power of two: exact) and rounded to integers (nearest; w up).
template <bool APIC>
__device__ __forceinline__ void scatter_particle(const float* __restrict__ spos, const float* __restrict__ svel,
                                                 const float* __restrict__ sc, int p, const int brick[3],
                                                 int closed, const int n[3], const float o[3], float h, float inv_h,
                                                 float scale_q, float scale_w, unsigned int* acc)
{
    float g[3], wt[3][2][2], node_f[3][2][2];
    int local[3][2][2];
    bool ok[3][2][2];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        g[a] = (spos[3LL * p + a] - o[a]) * inv_h;
        const int cell = (int)floorf(g[a]);  // its bin (count_particles_sparse)
#pragma unroll
        for (int L = 0; L < 2; ++L) {
            float x = L ? g[a] - 0.5f : g[a];
            if (closed) x = fminf(fmaxf(x, -2.0f), (float)(n[a] + 2));
            const float b = floorf(x), f = x - b;
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int node = (int)b + u, r = node - cell;
                wt[a][L][u] = u ? f : 1.0f - f;
                local[a][L][u] = node - brick[a];
                node_f[a][L][u] = (float)node;
                ok[a][L][u] = (L ? (r >= -1 && r <= 1) : (r == 0 || r == 1)) &&  // the gathers' window
                              (!closed || (node >= 0 && node < n[a] + 1 - L));    // the face lattice
            }
        }
    }
#pragma unroll
    for (int comp = 0; comp < 3; ++comp) {
        const float vq = svel[3LL * p + comp];
        const int ex = comp == 0 ? 9 : 10, ey = comp == 1 ? 9 : 10;
        const int l0 = comp != 0, l1 = comp != 1, l2 = comp != 2;  // each axis' lattice
#pragma unroll
        for (int corner = 0; corner < 8; ++corner) {
            const int u0 = corner & 1, u1 = (corner >> 1) & 1, u2 = corner >> 2;
            if (!(ok[0][l0][u0] && ok[1][l1][u1] && ok[2][l2][u2])) continue;
            const float weight = wt[0][l0][u0] * wt[1][l1][u1] * wt[2][l2][u2];
            if (weight == 0.0f) continue;  // adds nothing to either sum
            float q = vq;
            if (APIC) {
                const float* r = sc + 9LL * p + 3 * comp;
                const float d0 = (node_f[0][l0][u0] - (l0 ? g[0] - 0.5f : g[0])) * h,
                            d1 = (node_f[1][l1][u1] - (l1 ? g[1] - 0.5f : g[1])) * h,
                            d2 = (node_f[2][l2][u2] - (l2 ? g[2] - 0.5f : g[2])) * h;
                q = q + (r[0] * d0 + r[1] * d1 + r[2] * d2);
            }
            const float term = weight * q;
            const int at = comp * SCATTER_NODES + ((local[2][l2][u2] + l2) * ey + (local[1][l1][u1] + l1)) * ex +
                           (local[0][l0][u0] + l0);
#if SCATTER_PAIRED
            scatter_add_pair(acc, at, scatter_round(term * scale_q), 3 * SCATTER_NODES + at,
                             scatter_round_up(weight * scale_w));
#else
            scatter_add(acc, at, scatter_round(term * scale_q));
            scatter_add(acc, 3 * SCATTER_NODES + at, scatter_round_up(weight * scale_w));
#endif
        }
    }
}
