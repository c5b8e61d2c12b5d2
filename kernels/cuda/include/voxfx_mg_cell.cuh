// The sparse multigrid's per-unknown values (kernels/cuda/flip_sparse_pressure.cu): each
// rule written once, called by the grid-wide launches of the V-cycle and by its one-block
// kernels (the coarsest level's solve, mg_tail_vcycle), so both round alike (the including
// module is compiled without FMA contraction). Layout as flip_sparse_pressure.cu's notes;
// MG_COARSE_SWEEPS and MG_OMEGA from the including module's -D options.
#pragma once

// Over-relaxation of the smoothing sweeps above the coarsest level (issue 24, i24m;
// sparse_multigrid.MG_OMEGA, VOXFX_SPARSE_MG_OMEGA): x_c ← x_c + ω·(g − x_c), g the
// Gauss-Seidel value (sparse_pressure_gpu passes -DMG_OMEGA where ω ≠ 1; default 1.3). 1 (no
// define): g itself, plain Gauss-Seidel's values and loads.
#ifndef MG_OMEGA
#define MG_OMEGA 1.0f
#endif

// x_old + ω·(g − x_old), rounded as sparse_multigrid.sweep (no FMA contraction); g where ω = 1.
__device__ __forceinline__ float relaxed(float x_old, float g) { return x_old + MG_OMEGA * (g - x_old); }

// A level's neighbours: per unknown c the six unknowns n[d], d = 0 … 5 (−x, +x, −y, +y, −z,
// +z), the sentinel m where the neighbour is none. Read from the level's table here
// (NeighbourTable: nbr[d·stride + c]); level 0's can also be found from the grid's bricks
// (flip_sparse_pressure_level0.cu's BrickNeighbours, sparse_pressure_gpu.NBR). The per-unknown
// rules below take either: the same indices in the same order give the same values bit for bit.
struct NeighbourTable {
    const int* __restrict__ nbr;
    int stride;
    struct Of {  // unknown c's six
        const int* __restrict__ nbr;
        int stride, c;
        __device__ __forceinline__ int operator[](int d) const { return nbr[d * stride + c]; }
    };
    __device__ __forceinline__ Of of(int c) const { return Of{nbr, stride, c}; }
};

// Σ x over the six neighbours n of an unknown, added −x, +x, −y, +y, −z, +z.
template <class Six>
__device__ __forceinline__ float neighbour_sum(const float* __restrict__ x, const Six& n)
{
    float s = x[n[0]];
    for (int d = 1; d < 6; ++d) s = s + x[n[d]];
    return s;
}

// Σ x over the six neighbours of unknown c (the level's table).
__device__ __forceinline__ float compact_neighbour_sum(const float* __restrict__ x, const int* __restrict__ nbr,
                                                       int stride, int c)
{
    return neighbour_sum(x, NeighbourTable{nbr, stride}.of(c));
}

// One unknown's Gauss-Seidel value (b_c + Σ x_n)/diag_c.
template <class Nbrs>
__device__ __forceinline__ float gs_value(const float* __restrict__ x, const float* __restrict__ b, const Nbrs& nbrs,
                                          const float* __restrict__ diag, int c)
{
    return (b[c] + neighbour_sum(x, nbrs.of(c))) / diag[c];
}

__device__ __forceinline__ float gs_value(const float* __restrict__ x, const float* __restrict__ b,
                                          const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                          int c)
{
    return gs_value(x, b, NeighbourTable{nbr, stride}, diag, c);
}

// A smoothing sweep's value of unknown c above the coarsest level: gs_value over-relaxed
// by MG_OMEGA (x[c] is read only where ω ≠ 1).
template <class Nbrs>
__device__ __forceinline__ float smooth_value(const float* __restrict__ x, const float* __restrict__ b,
                                              const Nbrs& nbrs, const float* __restrict__ diag, int c)
{
    const float g = gs_value(x, b, nbrs, diag, c);
    return MG_OMEGA == 1.0f ? g : relaxed(x[c], g);
}

__device__ __forceinline__ float smooth_value(const float* __restrict__ x, const float* __restrict__ b,
                                              const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                              int c)
{
    return smooth_value(x, b, NeighbourTable{nbr, stride}, diag, c);
}

// A red unknown's first-sweep value from x = 0: b/diag (over-relaxed from 0 where ω ≠ 1).
__device__ __forceinline__ float first_red_value(const float* __restrict__ b, const float* __restrict__ diag, int c)
{
    const float g = b[c] / diag[c];
    return MG_OMEGA == 1.0f ? g : relaxed(0.0f, g);
}

// The first sweep from x = 0, red and black at once: red b/diag, black (b + Σ b_n/diag_n)/diag
// (mg_smooth_first; each over-relaxed from 0 where ω ≠ 1; the sentinel's b 0 gives 0).
template <class Nbrs>
__device__ __forceinline__ float first_sweep_value(const float* __restrict__ b, const Nbrs& nbrs,
                                                   const float* __restrict__ diag, int m_red, int c)
{
    if (c < m_red) return first_red_value(b, diag, c);
    const auto six = nbrs.of(c);
    float s = first_red_value(b, diag, six[0]);
    for (int d = 1; d < 6; ++d) s = s + first_red_value(b, diag, six[d]);
    const float g = (b[c] + s) / diag[c];
    return MG_OMEGA == 1.0f ? g : relaxed(0.0f, g);
}

__device__ __forceinline__ float first_sweep_value(const float* __restrict__ b, const int* __restrict__ nbr,
                                                   const float* __restrict__ diag, int stride, int m_red, int c)
{
    return first_sweep_value(b, NeighbourTable{nbr, stride}, diag, m_red, c);
}

// The second sweep's red value from x = 0, from b alone (mg_smooth_first2): gs_value over the
// x that mg_smooth_first leaves — red unknown c's neighbours (black, or the sentinel m, whose
// x stays 0) at their first-sweep values, added in compact_neighbour_sum's order.
template <class Nbrs>
__device__ __forceinline__ float second_red_value(const float* __restrict__ b, const Nbrs& nbrs,
                                                  const float* __restrict__ diag, int m_red, int m, int c)
{
    const auto six = nbrs.of(c);
    int n = six[0];
    float s = n < m ? first_sweep_value(b, nbrs, diag, m_red, n) : 0.0f;
    for (int d = 1; d < 6; ++d) {
        n = six[d];
        s = s + (n < m ? first_sweep_value(b, nbrs, diag, m_red, n) : 0.0f);
    }
    const float g = (b[c] + s) / diag[c];
    return MG_OMEGA == 1.0f ? g : relaxed(first_red_value(b, diag, c), g);
}

__device__ __forceinline__ float second_red_value(const float* __restrict__ b, const int* __restrict__ nbr,
                                                  const float* __restrict__ diag, int stride, int m_red, int m,
                                                  int c)
{
    return second_red_value(b, NeighbourTable{nbr, stride}, diag, m_red, m, c);
}

// r_c = b_c − A x at unknown c.
template <class Nbrs>
__device__ __forceinline__ float residual_value(const float* __restrict__ x, const float* __restrict__ b,
                                                const Nbrs& nbrs, const float* __restrict__ diag, int c)
{
    return b[c] - (diag[c] * x[c] - neighbour_sum(x, nbrs.of(c)));
}

__device__ __forceinline__ float residual_value(const float* __restrict__ x, const float* __restrict__ b,
                                                const int* __restrict__ nbr, const float* __restrict__ diag,
                                                int stride, int c)
{
    return residual_value(x, b, NeighbourTable{nbr, stride}, diag, c);
}

// Per axis the weight of fine cell 2I + o for coarse cell I, by a = o + 1 (o = −1, 0, 1, 2):
// ¾ for its own two children, ¼ for the next ones (cell-centred linear interpolation).
__device__ __forceinline__ float axis_weight(int a) { return (a == 1 || a == 2) ? 0.75f : 0.25f; }

// ½·Σ_row w_row·r_f[down[row][c]] (mg_restrict's value for coarse unknown c).
__device__ __forceinline__ float restrict_value(const float* __restrict__ rf, const int* __restrict__ down, int stride,
                                                int c)
{
    float s = axis_weight(0) * axis_weight(0) * axis_weight(0) * rf[down[c]];
    for (int row = 1; row < 64; ++row)
        s = s + axis_weight(row & 3) * axis_weight((row >> 2) & 3) * axis_weight(row >> 4) * rf[down[row * stride + c]];
    return 0.5f * s;
}

// Σ_row w_row·x_c[up[row][f]] (mg_prolong_add's increment for fine unknown f).
__device__ __forceinline__ float prolong_value(const float* __restrict__ xc, const int* __restrict__ up, int stride,
                                               int f)
{
    float s = 0.75f * 0.75f * 0.75f * xc[up[f]];
    for (int row = 1; row < 8; ++row) {
        const float w = ((row & 1) ? 0.25f : 0.75f) * ((row & 2) ? 0.25f : 0.75f) * ((row & 4) ? 0.25f : 0.75f);
        s = s + w * xc[up[row * stride + f]];
    }
    return s;
}

// MG_COARSE_SWEEPS sweeps red → black and as many black → red by one block, synchronised
// between colours (the coarsest level's solve from x = 0).
__device__ __forceinline__ void block_coarse_sweeps(float* __restrict__ x, const float* __restrict__ b,
                                                    const int* __restrict__ nbr, const float* __restrict__ diag,
                                                    int stride, int m_red, int m)
{
    for (int pass = 0; pass < 4 * MG_COARSE_SWEEPS; ++pass) {
        const int colour = (pass & 1) ^ (pass >= 2 * MG_COARSE_SWEEPS);  // forward red, black; backward black, red
        const int lo = colour ? m_red : 0, hi = colour ? m : m_red;
        for (int c = lo + threadIdx.x; c < hi; c += blockDim.x) x[c] = gs_value(x, b, nbr, diag, stride, c);
        __syncthreads();
    }
}
