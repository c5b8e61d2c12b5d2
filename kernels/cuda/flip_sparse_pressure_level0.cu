// Level 0's passes of the sparse PCG without its neighbour table (issue 24, i24n1;
// sparse_pressure_vcycle.NBR, VOXFX_SPARSE_MG_NBR "bricks", the default). Each of the loop's ~10
// passes over level 0 (the V-cycle's sweeps and residuals, the Laplacian) read its unknowns' six rows of
// nbr (6 × 4 B an unknown: ~120 MB an iteration at 8M, half of a pass's bytes); here an unknown
// reads its flat cell (cells0, 8 B) and finds its six neighbours as unk_tables found them —
// the cell one step along each axis in its 8³ brick or, across a face, in the brick nbr27 names
// (sparse_cell_step's cell: grid.nbr's), then position0 (flat cell → unknown, the sentinel m
// where none; 6.5 MB at 8M, small enough for L2, a warp's look-ups a few lines) — so the same
// unknowns in the same order: the kernels of flip_sparse_pressure_vcycle.cu and
// flip_sparse_pressure.cu with the per-unknown rules of voxfx_mg_cell.cuh over these
// neighbours, every value bit for bit (tests/unit/test_cuda_sparse_level0_host.py).
//
// Measured (H100 80GB HBM3, 8M dam break; kernels/flip/sparse_pressure_vcycle.py's NBR notes):
// the PCG loop's iteration 232.6 → 230.6 µs, the same bits and CG iterations — two thirds of the
// table's bytes gone (24 → 8 B an unknown) buys ~1%, so those bytes were not what bounded the passes.
//
// Each kernel takes the brick transfers' table ptrs (voxfx_mg_bricks.cuh: position0, cells0,
// nbr27 of this set-up) where its table twin takes nbr and stride, its other arguments alike.
// Compiled with flip_sparse_pressure_vcycle.cu's options and -D constants (no FMA contraction).

#include "voxfx_mg_bricks.cuh"  // BT_*: level 0's arrays
#include "voxfx_mg_cell.cuh"    // smooth_value, residual_value, first_sweep_value, ...: per unknown
#include "voxfx_reduce.cuh"     // block_sum2: the fixed-order double sums
#include "voxfx_sparse.cuh"     // SPARSE_CELLS

#ifndef RANGE
#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))
#endif

// Level 0's neighbours from the grid's bricks (voxfx_mg_cell.cuh's NeighbourTable's twin).
struct BrickNeighbours {
    const int* __restrict__ position;   // flat cell → unknown (m where none)
    const long long* __restrict__ cells;  // unknown → flat cell
    const int* __restrict__ nbr27;      // per slot the 27 slots around it (−1 inactive)
    int m;
    struct Of {  // the unknown at flat cell `cell`'s six
        const int* __restrict__ position;
        const int* __restrict__ nbr27;
        int m, cell;
        // d = 2·axis + (1 for +): the cell one step along the axis (sparse_cell_step), its unknown
        __device__ __forceinline__ int operator[](int d) const
        {
            const int axis = d >> 1, shift = 3 * axis, l = cell & (SPARSE_CELLS - 1);
            const int at = (l >> shift) & 7, up = d & 1;
            int nb;
            if (up ? at < 7 : at > 0) {
                nb = up ? cell + (1 << shift) : cell - (1 << shift);
            } else {  // across the face: nbr27's brick at offset ±(1, 3, 9), the coordinate 7 ↔ 0
                const int o = axis == 0 ? 1 : (axis == 1 ? 3 : 9);
                const int s = nbr27[27 * (cell >> 9) + 13 + (up ? o : -o)];
                nb = s < 0 ? -1 : s * SPARSE_CELLS + (l ^ (7 << shift));
            }
            return nb < 0 ? m : position[nb];
        }
    };
    __device__ __forceinline__ Of of(int c) const { return Of{position, nbr27, m, (int)cells[c]}; }
};

__device__ __forceinline__ BrickNeighbours brick_neighbours(const unsigned long long* __restrict__ ptrs, int m)
{
    return BrickNeighbours{(const int*)ptrs[BT_POSITION0], (const long long*)ptrs[BT_CELLS0],
                           (const int*)ptrs[BT_NBR27], m};
}

// mg_smooth on level 0 (`level` 0: sizes[0], sizes[1]).
extern "C" __global__ void mg_smooth_nb(float* __restrict__ x, const float* __restrict__ b,
                                        const unsigned long long* __restrict__ ptrs, const float* __restrict__ diag,
                                        const int* __restrict__ sizes, int level, int colour, int first,
                                        const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    if (first) {
        RANGE(c, 0, m) x[c] = c < m_red ? first_red_value(b, diag, c) : 0.0f;
        return;
    }
    const BrickNeighbours nbrs = brick_neighbours(ptrs, m);
    const int lo = colour ? m_red : 0, hi = colour ? m : m_red;
    RANGE(c, lo, hi) x[c] = smooth_value(x, b, nbrs, diag, c);
}

// mg_smooth_first on level 0.
extern "C" __global__ void mg_smooth_first_nb(float* __restrict__ x, const float* __restrict__ b,
                                              const unsigned long long* __restrict__ ptrs,
                                              const float* __restrict__ diag, const int* __restrict__ sizes, int level,
                                              const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, m);
    RANGE(c, 0, m) x[c] = first_sweep_value(b, nbrs, diag, m_red, c);
}

// mg_smooth_first2 on level 0.
extern "C" __global__ void mg_smooth_first2_nb(float* __restrict__ x, const float* __restrict__ b,
                                               const unsigned long long* __restrict__ ptrs,
                                               const float* __restrict__ diag, const int* __restrict__ sizes,
                                               int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, m);
    RANGE(c, 0, m)
    x[c] = c < m_red ? second_red_value(b, nbrs, diag, m_red, m, c) : first_sweep_value(b, nbrs, diag, m_red, c);
}

// mg_smooth_red_dot on level 0: the last post-smoothing sweep (red) and the partial r·z, on the
// reduction grid over all m unknowns (dot_rz's products in dot_rz's order).
extern "C" __global__ void mg_smooth_red_dot_nb(float* __restrict__ x, const float* __restrict__ b,
                                                const unsigned long long* __restrict__ ptrs,
                                                const float* __restrict__ diag, const int* __restrict__ sizes,
                                                double* __restrict__ partials_rz, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[0], m = sizes[1];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, m);
    double rz = 0.0;
    RANGE(c, 0, m)
    {
        float xc;
        if (c < m_red) {
            xc = smooth_value(x, b, nbrs, diag, c);
            x[c] = xc;
        } else {
            xc = x[c];
        }
        rz += (double)b[c] * xc;
    }
    block_sum2(rz, 0.0, partials_rz, nullptr);
}

// mg_smooth_black_residual on level 0: the last pre-smoothing sweep's black colour and the black
// unknowns' residual (their x in hand).
extern "C" __global__ void mg_smooth_black_residual_nb(float* __restrict__ x, const float* __restrict__ b,
                                                       const unsigned long long* __restrict__ ptrs,
                                                       const float* __restrict__ diag, const int* __restrict__ sizes,
                                                       int level, float* __restrict__ r,
                                                       const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, m);
    RANGE(c, m_red, m)
    {
        const float s = neighbour_sum(x, nbrs.of(c));  // red neighbours: not written here
        const float g = (b[c] + s) / diag[c];
        const float xc = MG_OMEGA == 1.0f ? g : relaxed(x[c], g);
        x[c] = xc;
        r[c] = b[c] - (diag[c] * xc - s);
    }
}

// mg_residual on level 0 (all_unknowns = 0: the red ones alone).
extern "C" __global__ void mg_residual_nb(const float* __restrict__ x, const float* __restrict__ b,
                                          const unsigned long long* __restrict__ ptrs, const float* __restrict__ diag,
                                          const int* __restrict__ sizes, int level, int all_unknowns,
                                          float* __restrict__ r, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + all_unknowns];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, sizes[2 * level + 1]);
    RANGE(c, 0, m) r[c] = residual_value(x, b, nbrs, diag, c);
}

// The PCG's q = A d (diag·d − Σ neighbours) and partial d·q (flip_sparse_pressure.cu's
// apply_laplacian) on level 0's unknowns.
extern "C" __global__ void apply_laplacian_nb(const float* __restrict__ d, float* __restrict__ q,
                                              const unsigned long long* __restrict__ ptrs,
                                              const float* __restrict__ diag, const int* __restrict__ sizes,
                                              double* __restrict__ partials, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, n);
    double dq = 0.0;
    RANGE(c, 0, n)
    {
        const float dc = d[c];
        const float qc = diag[c] * dc - neighbour_sum(d, nbrs.of(c));
        q[c] = qc;
        dq += (double)dc * qc;
    }
    block_sum2(dq, 0.0, partials, nullptr);
}

// A warm start's r = b − A x₀, d = 0, partial ‖b‖² and ‖r‖² (flip_sparse_pressure.cu's
// cg_init_warm) on level 0's unknowns.
extern "C" __global__ void cg_init_warm_nb(const float* __restrict__ b, const float* __restrict__ x,
                                           float* __restrict__ r, float* __restrict__ d,
                                           const unsigned long long* __restrict__ ptrs, const float* __restrict__ diag,
                                           const int* __restrict__ sizes, double* __restrict__ partials)
{
    const int n = sizes[1];
    const BrickNeighbours nbrs = brick_neighbours(ptrs, n);
    double bb = 0.0, rr = 0.0;
    RANGE(c, 0, n)
    {
        const float bc = b[c];
        const float rc = residual_value(x, b, nbrs, diag, c);
        d[c] = 0.0f;
        r[c] = rc;
        bb += (double)bc * bc;
        rr += (double)rc * rc;
    }
    block_sum2(bb, rr, partials, partials + gridDim.x);
}
