// The sparse FLIP solver's P2G gathers' shared arithmetic (seed 003 §7): the hat weight,
// the frame, one pool cell's three faces from the particles of its 27 cells (gather_cell)
// and the brick's 10³ halo index. Used by flip_sparse_gather.cu (p2g_gather_sparse,
// p2g_gather_brick) and flip_sparse_gather_staged.cu (p2g_gather_staged and its fallback
// for a layer that does not fit): one copy, so every gather sums the same terms in the same
// order, the same bits. Compiled with --fmad=false by both modules.
//
// Layout (kernels/grid/sparse_mac.py; flip_sparse_transfer.cu's notes): cell slot·512 +
// (lz·8 + ly)·8 + lx, a cell keeps the faces on its low sides; coords[3·slot] are the
// bricks' coordinates and nbr27[27·slot + o] the slots of the 27 bricks around each.
#pragma once

#include "voxfx_sparse.cuh"  // SPARSE_CELLS

// The hat weight of lattice node `node` for a particle at node coordinate g
// (sparse_transfer.particles_to_grid: closed, g clamped to [−2, n + 2] first; base = ⌊g⌋,
// f = g − base, weights (1 − f, f)); false where the node is not one of its two.
__device__ __forceinline__ bool hat_weight(float g, int closed, int n, long long node, float& w)
{
    if (closed) g = fminf(fmaxf(g, -2.0f), (float)(n + 2));
    const float b = floorf(g);
    const float f = g - b;
    const long long a = node - (long long)b;
    if (a == 0) w = 1.0f - f;
    else if (a == 1) w = f;
    else return false;
    return true;
}

// Gather (seed 003 §7): pool cell t = slot·512 + l computes its u, v and w faces from the
// sorted particles of the 3×3×3 cells around it (the only cells whose particles reach
// them), summing w·q and w in double, cells z-y-x then particles in sorted order: no
// atomics, the same bits every run. q = v_a, or with APIC v_a + C_a·(x_f − x_p). Faces with
// Σw = 0 (and faces beyond a closed domain's face lattices, and free slots) get 0 and are
// invalid. `span(x, y, z)` gives the [first, last) particles of the neighbourhood's local
// cell (x, y, z) ∈ [−1, 8]³: from global memory (p2g_gather_sparse) or from the brick's
// table in shared memory (p2g_gather_brick); the arithmetic is this one function's, so both
// kernels give the same bits.
struct GatherFrame {
    int apic, closed, n[3];
    float o[3], h, inv_h;
};

template <class Span>
__device__ __forceinline__ void gather_cell(const float* __restrict__ spos, const float* __restrict__ svel,
                                            const float* __restrict__ sc, const GatherFrame& F,
                                            const int* __restrict__ coords, int slot, bool active, long long t,
                                            const Span& span, float* __restrict__ u, float* __restrict__ v,
                                            float* __restrict__ w, unsigned char* __restrict__ valid_u,
                                            unsigned char* __restrict__ valid_v,
                                            unsigned char* __restrict__ valid_w)
{
    const int l = (int)(t & (SPARSE_CELLS - 1));
    const int lx = l & 7, ly = (l >> 3) & 7, lz = l >> 6;
    double num[3] = {0.0, 0.0, 0.0}, den[3] = {0.0, 0.0, 0.0};
    bool has[3] = {false, false, false};
    if (active) {
        const long long node[3] = {8LL * coords[3 * slot] + lx, 8LL * coords[3 * slot + 1] + ly,
                                   8LL * coords[3 * slot + 2] + lz};
        for (int a = 0; a < 3; ++a) {  // closed: the face lattices (n + 1 along a, n across)
            has[a] = true;
            if (F.closed)
                for (int b = 0; b < 3; ++b) has[a] = has[a] && node[b] >= 0 && node[b] < F.n[b] + (a == b);
        }
        for (int dz = -1; dz <= 1; ++dz)
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    int first, last;
                    span(lx + dx, ly + dy, lz + dz, first, last);
                    for (int s = first; s < last; ++s) {
                        const float g[3] = {(spos[3 * s] - F.o[0]) * F.inv_h, (spos[3 * s + 1] - F.o[1]) * F.inv_h,
                                            (spos[3 * s + 2] - F.o[2]) * F.inv_h};
                        // the hat weights of this node along each axis, on the component's own
                        // lattice (g) and on the half-shifted ones (g − ½): shared by u, v, w
                        float w_own[3] = {0.0f, 0.0f, 0.0f}, w_half[3] = {0.0f, 0.0f, 0.0f};
                        bool own[3], half[3];
                        for (int a = 0; a < 3; ++a) {
                            own[a] = hat_weight(g[a], F.closed, F.n[a], node[a], w_own[a]);
                            half[a] = hat_weight(g[a] - 0.5f, F.closed, F.n[a], node[a], w_half[a]);
                        }
                        const int d[3] = {dx, dy, dz};
                        for (int comp = 0; comp < 3; ++comp) {
                            // a particle one cell beyond the face along its axis has both its
                            // nodes past it: only offsets −1 and 0 along comp's axis reach
                            if (!has[comp] || d[comp] > 0) continue;
                            float f[3], wt[3];  // the particle on comp's face lattice
                            bool touches = true;
                            for (int a = 0; a < 3; ++a) {
                                f[a] = a == comp ? g[a] : g[a] - 0.5f;
                                wt[a] = a == comp ? w_own[a] : w_half[a];
                                touches = touches && (a == comp ? own[a] : half[a]);
                            }
                            if (!touches) continue;
                            const float weight = wt[0] * wt[1] * wt[2];
                            float q = svel[3 * s + comp];
                            if (F.apic) {
                                const float* r = sc + 9LL * s + 3 * comp;
                                const float d0 = ((float)node[0] - f[0]) * F.h, d1 = ((float)node[1] - f[1]) * F.h,
                                            d2 = ((float)node[2] - f[2]) * F.h;
                                q = q + (r[0] * d0 + r[1] * d1 + r[2] * d2);
                            }
                            num[comp] += (double)(weight * q);
                            den[comp] += (double)weight;
                        }
                    }
                }
    }
    float* const out[3] = {u, v, w};
    unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    for (int a = 0; a < 3; ++a) {
        const bool ok = den[a] > 0.0;
        out[a][t] = ok ? (float)(num[a] / den[a]) : 0.0f;
        valid[a][t] = ok;
    }
}

// The brick's 10³ halo cells (x, y, z) ∈ [−1, 8]³ at (z + 1)·100 + (y + 1)·10 + (x + 1).
#define GATHER_HALO 1000

__device__ __forceinline__ int halo_index(int x, int y, int z) { return (z + 1) * 100 + (y + 1) * 10 + (x + 1); }
