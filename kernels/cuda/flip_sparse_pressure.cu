// Sparse FLIP pressure (seed 003 §8, Alg. 2) on compacted unknowns: the PCG loop's vector
// kernels, the 7-point Laplacian read through a neighbour table, the multigrid V-cycle over
// the sparse hierarchy (red-black Gauss-Seidel, residual, restriction, prolongation, the
// coarsest level in one block, and the coarse levels' whole V-cycle in one block:
// mg_tail_vcycle) and the union-find of the sealed-region labels. Launched by
// kernels/flip/sparse_pressure_gpu.py; the NumPy code of sparse_pressure.py and
// sparse_multigrid.py is the reference these kernels follow operation by operation (they
// are compiled without FMA contraction, so each value rounds as NumPy rounds it).
//
// Layout. A level's vectors hold its m unknowns — red (i + j + k even) in [0, m_red), black
// in [m_red, m) — and a sentinel at m that stays 0; buffers are `stride` entries long
// (≥ m + 1, fixed while the solver keeps its buffers, so a captured CUDA graph stays
// valid while m changes). Tables are row-major [rows][stride] int32: nbr (6 rows: −x, +x,
// −y, +y, −z, +z), up (8: prolongation to the level from the next coarser one), down (64:
// restriction into the level from the next finer one); an entry that is not an unknown is
// the sentinel. sizes[2·level] = m_red, sizes[2·level + 1] = m, on the device.
//
// Constants from Python, as -D options (kernels/flip/sparse_pressure_gpu.py): S_IT,
// S_STOPPED, S_CONVERGED, D_BB, D_THRESH, D_RR, D_RZ, D_ALPHA, D_BETA (the state[] and
// scalars[] layout of flip_pressure.cu, whose finish_* kernels close this loop's
// reductions; finish_init_warm here closes a warm start's) and D_COLD (the warm start's choice), PRE_MG, PRE_JACOBI, PRE_NONE (preconditioners),
// MG_SWEEPS (pre- and post-smoothing sweeps), MG_COARSE_SWEEPS (forward and as many backward
// sweeps on the coarsest level), KEY_BITS
// (bits per axis of a multigrid cell key).

#include "voxfx_mg_cell.cuh"  // gs_value, residual_value, restrict_value, prolong_value, ...: per unknown
#include "voxfx_mg_keys.cuh"  // cell_key, key_cell, find_key: the multigrid cell keys
#include "voxfx_reduce.cuh"  // block_sum2: the fixed-order double sums

// c over [lo, hi) with a grid-stride loop (launches are sized by the buffers, not by m).
#define RANGE(c, lo, hi) \
    for (int c = (lo) + (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (hi); c += (int)(gridDim.x * blockDim.x))

// ------------------------------------------------------------------------ PCG (Alg. 2)

// x = 0, d = 0, r = b; partial ‖b‖²; Jacobi: z = b·(1/diag) and r·z; none: r·z = ‖b‖².
extern "C" __global__ void cg_init(const float* __restrict__ b, float* __restrict__ x, float* __restrict__ r,
                                   float* __restrict__ d, float* __restrict__ z, const float* __restrict__ diag,
                                   const int* __restrict__ sizes, int mode, double* __restrict__ partials)
{
    const int n = sizes[1];
    double bb = 0.0, rz = 0.0;
    RANGE(c, 0, n)
    {
        const float bc = b[c];
        x[c] = 0.0f;
        d[c] = 0.0f;
        r[c] = bc;
        bb += (double)bc * bc;
        if (mode == PRE_JACOBI) {
            const float zc = bc * (1.0f / diag[c]);
            z[c] = zc;
            rz += (double)bc * zc;
        }
    }
    if (mode == PRE_NONE) rz = bb;
    block_sum2(bb, rz, partials, partials + gridDim.x);
}

// A warm start from the x₀ in x (sparse_pressure's module notes): r = b − A x₀ (one
// Laplacian), d = 0; partial ‖b‖² and ‖r‖².
extern "C" __global__ void cg_init_warm(const float* __restrict__ b, const float* __restrict__ x,
                                        float* __restrict__ r, float* __restrict__ d, const int* __restrict__ nbr,
                                        const float* __restrict__ diag, int stride, const int* __restrict__ sizes,
                                        double* __restrict__ partials)
{
    const int n = sizes[1];
    double bb = 0.0, rr = 0.0;
    RANGE(c, 0, n)
    {
        const float bc = b[c];
        const float rc = residual_value(x, b, nbr, diag, stride, c);
        d[c] = 0.0f;
        r[c] = rc;
        bb += (double)bc * bc;
        rr += (double)rc * rc;
    }
    block_sum2(bb, rr, partials, partials + gridDim.x);
}

// finish_init for a warm start: ‖b‖², tol²‖b‖², iteration 0, and the start's ‖r‖² — x₀'s, or
// ‖b‖² where x₀ is no better than 0 (‖r‖² > ‖b‖² or not finite: scalars[D_COLD] = 1 and
// cg_warm_select starts from 0; a zero b so gives p = 0 at once).
extern "C" __global__ void finish_init_warm(const double* __restrict__ partials, int blocks,
                                            double* __restrict__ scalars, int* __restrict__ state, double tol)
{
    const double bb = block_total(partials, blocks);
    const double rr = block_total(partials + blocks, blocks);
    if (threadIdx.x != 0) return;
    const bool cold = !(rr <= bb);
    const double start = cold ? bb : rr;
    const double thresh = tol * tol * bb;
    scalars[D_BB] = bb;
    scalars[D_RR] = start;
    scalars[D_THRESH] = thresh;
    scalars[D_RZ] = 0.0;
    scalars[D_ALPHA] = 0.0;
    scalars[D_BETA] = 0.0;
    scalars[D_COLD] = cold ? 1.0 : 0.0;
    state[S_IT] = 0;
    if (!isfinite(bb)) {
        state[S_STOPPED] = 1;
    } else if (start <= thresh) {
        state[S_STOPPED] = 1;
        state[S_CONVERGED] = 1;
    }
}

// The warm start's choice: where finish_init_warm chose 0, x = 0 and r = b; then Jacobi:
// z = r·(1/diag) and partial r·z; none: partial ‖r‖² (cg_init's values on a cold start).
extern "C" __global__ void cg_warm_select(const float* __restrict__ b, float* __restrict__ x, float* __restrict__ r,
                                          float* __restrict__ z, const float* __restrict__ diag,
                                          const int* __restrict__ sizes, int mode, const double* __restrict__ scalars,
                                          double* __restrict__ partials_rz)
{
    const int n = sizes[1];
    const bool cold = scalars[D_COLD] != 0.0;
    double rz = 0.0;
    RANGE(c, 0, n)
    {
        float rc = r[c];
        if (cold) {
            rc = b[c];
            x[c] = 0.0f;
            r[c] = rc;
        }
        if (mode == PRE_JACOBI) {
            const float zc = rc * (1.0f / diag[c]);
            z[c] = zc;
            rz += (double)rc * zc;
        } else if (mode == PRE_NONE) {
            rz += (double)rc * rc;
        }
    }
    block_sum2(rz, 0.0, partials_rz, nullptr);
}

// q = A d (diag·d − Σ neighbours) and partial d·q.
extern "C" __global__ void apply_laplacian(const float* __restrict__ d, float* __restrict__ q,
                                           const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                           const int* __restrict__ sizes, double* __restrict__ partials,
                                           const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    double dq = 0.0;
    RANGE(c, 0, n)
    {
        const float dc = d[c];
        const float qc = diag[c] * dc - compact_neighbour_sum(d, nbr, stride, c);
        q[c] = qc;
        dq += (double)dc * qc;
    }
    block_sum2(dq, 0.0, partials, nullptr);
}

// x += α d, r −= α q; partial ‖r‖²; Jacobi: z = r·(1/diag) and r·z; none: r·z = ‖r‖².
extern "C" __global__ void update_solution(float* __restrict__ x, float* __restrict__ r, const float* __restrict__ d,
                                           const float* __restrict__ q, float* __restrict__ z,
                                           const float* __restrict__ diag, const int* __restrict__ sizes, int mode,
                                           const double* __restrict__ scalars, double* __restrict__ partials,
                                           const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    const float alpha = (float)scalars[D_ALPHA];
    double rr = 0.0, rz = 0.0;
    RANGE(c, 0, n)
    {
        x[c] = x[c] + alpha * d[c];
        const float rc = r[c] - alpha * q[c];
        r[c] = rc;
        rr += (double)rc * rc;
        if (mode == PRE_JACOBI) {
            const float zc = rc * (1.0f / diag[c]);
            z[c] = zc;
            rz += (double)rc * zc;
        }
    }
    if (mode == PRE_NONE) rz = rr;
    block_sum2(rr, rz, partials, mode == PRE_MG ? nullptr : partials + gridDim.x);
}

// partial r·z (after the V-cycle).
extern "C" __global__ void dot_rz(const float* __restrict__ r, const float* __restrict__ z,
                                  const int* __restrict__ sizes, double* __restrict__ partials_rz,
                                  const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    double rz = 0.0;
    RANGE(c, 0, n) rz += (double)r[c] * z[c];
    block_sum2(rz, 0.0, partials_rz, nullptr);
}

// d = z + β d
extern "C" __global__ void update_direction(float* __restrict__ d, const float* __restrict__ z,
                                            const int* __restrict__ sizes, const double* __restrict__ scalars,
                                            const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int n = sizes[1];
    const float beta = (float)scalars[D_BETA];
    RANGE(c, 0, n) d[c] = z[c] + beta * d[c];
}

// ------------------------------------------------------------------------ multigrid V-cycle

// One colour of Gauss-Seidel on a level, x_c = (b_c + Σ x_n)/diag_c over the colour's range
// (the other colour is all it reads). first = 1: the sweep from x = 0 — red b/diag, black 0,
// every unknown written, so no clearing pass is needed.
extern "C" __global__ void mg_smooth(float* __restrict__ x, const float* __restrict__ b, const int* __restrict__ nbr,
                                     const float* __restrict__ diag, int stride, const int* __restrict__ sizes,
                                     int level, int colour, int first, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    if (first) {
        RANGE(c, 0, m) x[c] = c < m_red ? b[c] / diag[c] : 0.0f;
        return;
    }
    const int lo = colour ? m_red : 0, hi = colour ? m : m_red;
    RANGE(c, lo, hi) x[c] = gs_value(x, b, nbr, diag, stride, c);
}

// The first pre-smoothing sweep from x = 0, red and black in one launch (the fused V-cycle): a
// red unknown takes b/diag, a black one (b + Σ b_n/diag_n)/diag over its neighbours, all red
// or the sentinel (b 0, diag 1: 0) — the values the red-then-black launches of mg_smooth
// (first = 1, then colour 1) give, rounded alike, without reading x.
extern "C" __global__ void mg_smooth_first(float* __restrict__ x, const float* __restrict__ b,
                                           const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                           const int* __restrict__ sizes, int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    RANGE(c, 0, m) x[c] = first_sweep_value(b, nbr, diag, stride, m_red, c);
}

// The last post-smoothing sweep of level 0 (red) and the partial r·z of the V-cycle's
// result z = x (the fused V-cycle: dot_rz folded in). Launched on the reduction grid over all m
// unknowns, so each thread adds the same products in the same order as dot_rz: red ones
// take their new value, black ones are read (the red sweep does not change them).
extern "C" __global__ void mg_smooth_red_dot(float* __restrict__ x, const float* __restrict__ b,
                                             const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                             const int* __restrict__ sizes, double* __restrict__ partials_rz,
                                             const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[0], m = sizes[1];
    double rz = 0.0;
    RANGE(c, 0, m)
    {
        float xc;
        if (c < m_red) {
            xc = gs_value(x, b, nbr, diag, stride, c);
            x[c] = xc;
        } else {
            xc = x[c];
        }
        rz += (double)b[c] * xc;
    }
    block_sum2(rz, 0.0, partials_rz, nullptr);
}

// The last pre-smoothing sweep's black colour and the black unknowns' residual r = b − A x
// (the fused V-cycle: their x is in hand; mg_residual then does the red ones alone).
extern "C" __global__ void mg_smooth_black_residual(float* __restrict__ x, const float* __restrict__ b,
                                                    const int* __restrict__ nbr, const float* __restrict__ diag,
                                                    int stride, const int* __restrict__ sizes, int level,
                                                    float* __restrict__ r, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    RANGE(c, m_red, m)
    {
        const float s = compact_neighbour_sum(x, nbr, stride, c);  // red neighbours: not written here
        const float xc = (b[c] + s) / diag[c];
        x[c] = xc;
        r[c] = b[c] - (diag[c] * xc - s);
    }
}

// r = b − A x on a level's unknowns (all_unknowns = 0: the red ones alone).
extern "C" __global__ void mg_residual(const float* __restrict__ x, const float* __restrict__ b,
                                       const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                       const int* __restrict__ sizes, int level, int all_unknowns,
                                       float* __restrict__ r, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + all_unknowns];
    RANGE(c, 0, m) r[c] = residual_value(x, b, nbr, diag, stride, c);
}

// Restriction into coarse level `level`: b_c = ½·Σ_row w_row·r_f[down[row][c]], rows
// (iz·4 + iy)·4 + ix added in order (Pᵀ of mg_prolong_add, times ½: the average Pᵀ/8 scaled
// by (2h/h)² for the unscaled coarse operator).
extern "C" __global__ void mg_restrict(const float* __restrict__ rf, const int* __restrict__ down, int stride,
                                       const int* __restrict__ sizes, int level, float* __restrict__ bc,
                                       const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + 1];
    RANGE(c, 0, m) bc[c] = restrict_value(rf, down, stride, c);
}

// Prolongation onto fine level `level`: x_f += Σ_row w_row·x_c[up[row][f]], rows
// (oz·2 + oy)·2 + ox: per axis ¾ of the parent (o = 0) and ¼ of its neighbour on the
// child's side (o = 1). all_unknowns = 0 (the fused V-cycle): the red unknowns alone — the
// black sweep that follows overwrites every black value without reading it.
extern "C" __global__ void mg_prolong_add(const float* __restrict__ xc, const int* __restrict__ up, int stride,
                                          const int* __restrict__ sizes, int level, int all_unknowns,
                                          float* __restrict__ xf, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m = sizes[2 * level + all_unknowns];
    RANGE(f, 0, m) xf[f] = xf[f] + prolong_value(xc, up, stride, f);
}

// The coarsest level in one block: x = 0, then MG_COARSE_SWEEPS sweeps red → black and as
// many black → red, the block synchronised between colours (one launch, not 4·sweeps).
extern "C" __global__ void mg_coarse_solve(float* __restrict__ x, const float* __restrict__ b,
                                           const int* __restrict__ nbr, const float* __restrict__ diag, int stride,
                                           const int* __restrict__ sizes, int level, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    for (int c = threadIdx.x; c < m; c += blockDim.x) x[c] = 0.0f;
    __syncthreads();
    block_coarse_sweeps(x, b, nbr, diag, stride, m_red, m);
}

// The restriction into the coarsest level (as mg_restrict) and its solve (as
// mg_coarse_solve) in one block (the fused V-cycle): the coarsest level has a few dozen unknowns.
extern "C" __global__ void mg_restrict_coarse_solve(const float* __restrict__ rf, const int* __restrict__ down,
                                                    float* __restrict__ x, float* __restrict__ b,
                                                    const int* __restrict__ nbr, const float* __restrict__ diag,
                                                    int stride, const int* __restrict__ sizes, int level,
                                                    const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const int m_red = sizes[2 * level], m = sizes[2 * level + 1];
    for (int c = threadIdx.x; c < m; c += blockDim.x) {
        b[c] = restrict_value(rf, down, stride, c);
        x[c] = 0.0f;
    }
    __syncthreads();
    block_coarse_sweeps(x, b, nbr, diag, stride, m_red, m);
}

// The fused V-cycle's levels first..last (first ≥ 1, their unknowns few) in one block of
// threads, synchronised between the passes that each launch of sparse_pressure_gpu's
// _vcycle_fused makes on these levels, in the same order and with the same per-unknown values
// (so z is the same bit for bit; one launch instead of ~10 per level). Level l's buffers are
// at ptrs[TAIL_PTRS·l + k]: x, b, r, nbr, diag, up (onto l from l + 1), down (into l + 1);
// strides[l] their row length. On entry level first's b holds the restricted residual; on
// exit its x the post-smoothed correction.
#define TAIL_PTRS 7
#define TAIL_F(l, k) ((float*)ptrs[TAIL_PTRS * (l) + (k)])
#define TAIL_I(l, k) ((const int*)ptrs[TAIL_PTRS * (l) + (k)])
#define BLOCK_RANGE(c, lo, hi) for (int c = (lo) + (int)threadIdx.x; c < (hi); c += (int)blockDim.x)
extern "C" __global__ void __launch_bounds__(1024) mg_tail_vcycle(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides,
                                          int first, int last, const int* __restrict__ sizes,
                                          const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    for (int l = first; l < last; ++l) {  // down: pre-smoothing, residual, restriction
        float *x = TAIL_F(l, 0), *b = TAIL_F(l, 1), *r = TAIL_F(l, 2);
        const int* nbr = TAIL_I(l, 3);
        const float* diag = TAIL_F(l, 4);
        const int stride = strides[l], m_red = sizes[2 * l], m = sizes[2 * l + 1];
        BLOCK_RANGE(c, 0, m) x[c] = first_sweep_value(b, nbr, diag, stride, m_red, c);  // mg_smooth_first
        __syncthreads();
        for (int sweep = 1; sweep < MG_SWEEPS; ++sweep) {
            BLOCK_RANGE(c, 0, m_red) x[c] = gs_value(x, b, nbr, diag, stride, c);
            __syncthreads();
            if (sweep < MG_SWEEPS - 1) {
                BLOCK_RANGE(c, m_red, m) x[c] = gs_value(x, b, nbr, diag, stride, c);
            } else {  // mg_smooth_black_residual
                BLOCK_RANGE(c, m_red, m)
                {
                    const float s = compact_neighbour_sum(x, nbr, stride, c);
                    const float xc = (b[c] + s) / diag[c];
                    x[c] = xc;
                    r[c] = b[c] - (diag[c] * xc - s);
                }
            }
            __syncthreads();
        }
        BLOCK_RANGE(c, 0, MG_SWEEPS == 1 ? m : m_red) r[c] = residual_value(x, b, nbr, diag, stride, c);
        __syncthreads();
        if (l + 1 < last) {  // mg_restrict into l + 1
            float* bc = TAIL_F(l + 1, 1);
            const int* down = TAIL_I(l, 6);
            const int cstride = strides[l + 1];
            BLOCK_RANGE(c, 0, sizes[2 * (l + 1) + 1]) bc[c] = restrict_value(r, down, cstride, c);
            __syncthreads();
        }
    }
    {  // mg_restrict_coarse_solve
        float *x = TAIL_F(last, 0), *b = TAIL_F(last, 1);
        const float* rf = TAIL_F(last - 1, 2);
        const int* down = TAIL_I(last - 1, 6);
        const int stride = strides[last], m_red = sizes[2 * last], m = sizes[2 * last + 1];
        BLOCK_RANGE(c, 0, m)
        {
            b[c] = restrict_value(rf, down, stride, c);
            x[c] = 0.0f;
        }
        __syncthreads();
        block_coarse_sweeps(x, b, TAIL_I(last, 3), TAIL_F(last, 4), stride, m_red, m);
    }
    for (int l = last - 1; l >= first; --l) {  // up: prolongation (red), post-smoothing black, red
        float *x = TAIL_F(l, 0), *b = TAIL_F(l, 1);
        const float* xc = TAIL_F(l + 1, 0);
        const int* nbr = TAIL_I(l, 3);
        const int* up = TAIL_I(l, 5);
        const float* diag = TAIL_F(l, 4);
        const int stride = strides[l], m_red = sizes[2 * l], m = sizes[2 * l + 1];
        BLOCK_RANGE(f, 0, m_red) x[f] = x[f] + prolong_value(xc, up, stride, f);
        __syncthreads();
        for (int sweep = 0; sweep < MG_SWEEPS; ++sweep) {
            BLOCK_RANGE(c, m_red, m) x[c] = gs_value(x, b, nbr, diag, stride, c);
            __syncthreads();
            BLOCK_RANGE(c, 0, m_red) x[c] = gs_value(x, b, nbr, diag, stride, c);
            __syncthreads();
        }
    }
}

// ------------------------------------------------------------------------ sealed regions

// Root of v's tree (parents only ever point to smaller indices). Reads through volatile:
// other threads hook roots meanwhile.
__device__ __forceinline__ int find_root(const int* parent, int v)
{
    const volatile int* p = parent;
    int up = p[v];
    while (up != v) {
        v = up;
        up = p[v];
    }
    return v;
}

// Union-find over the links of n cells (links[d·n + v], d = +x, +y, +z: the linked cell or
// −1), parent[v] = v on entry: each link joins two trees by hooking the larger root under
// the smaller (atomicCAS; a lost race retries from the new roots), so a component's root
// ends as its lowest index, whatever the order the threads run in.
extern "C" __global__ void label_hook(const int* __restrict__ links, int n, int* parent)
{
    RANGE(v, 0, n)
    {
        for (int d = 0; d < 3; ++d) {
            const int u = links[d * n + v];
            if (u < 0) continue;
            int a = find_root(parent, v), b = find_root(parent, u);
            while (a != b) {
                if (a < b) {
                    const int t = a;
                    a = b;
                    b = t;
                }
                const int old = atomicCAS(&parent[a], a, b);
                if (old == a) break;
                a = find_root(parent, old);
                b = find_root(parent, b);
            }
        }
    }
}

// parent[v] = the root of v: each cell's component label.
extern "C" __global__ void label_flatten(int* parent, int n)
{
    RANGE(v, 0, n) parent[v] = find_root(parent, v);
}

// ------------------------------------------------------------------------ multigrid tables
// The tables of sparse_multigrid.TableBuilder, kernel by kernel (its xp code is the
// reference). A level's non-AIR cells are sorted keys ((k − bz)·2^2B + (j − by)·2^B + i − bx,
// B = KEY_BITS, every axis inside its field: the base sits below the liquid with a margin)
// with a fluid flag; a cell that is not in the set is AIR.

// Per fine cell: 0, or — for the cell with even (i, j, k) of a 2×2×2 block whose 8 cells are
// all in the set — 1 (a SOLID coarse cell) or 2 (FLUID: a child is FLUID). The flagged
// cells, in order, are the coarse level's cells in key order.
extern "C" __global__ void mg_coarsen(const long long* __restrict__ keys, const unsigned char* __restrict__ fluid,
                                      int n, int bx, int by, int bz, unsigned char* __restrict__ flag)
{
    RANGE(c, 0, n) flag[c] = coarse_flag(keys, fluid, n, c, bx, by, bz);
}

// The coarse keys of the flagged fine cells (their parents).
extern "C" __global__ void mg_parent_keys(const long long* __restrict__ keys, const long long* __restrict__ picked,
                                          int n, int bx, int by, int bz, int cbx, int cby, int cbz,
                                          long long* __restrict__ parents)
{
    RANGE(c, 0, n)
    {
        int i, j, k;
        key_cell(keys[picked[c]], bx, by, bz, i, j, k);
        parents[c] = cell_key(i >> 1, j >> 1, k >> 1, cbx, cby, cbz);
    }
}

// Per cell of a level's set: for FLUID cells the set index of each of the 6 neighbours (−1:
// AIR) and the diagonal (6 − SOLID neighbours); the class 0 (not an unknown), 1 (red
// unknown), 2 (black unknown).
extern "C" __global__ void mg_level_cells(const long long* __restrict__ keys, const unsigned char* __restrict__ fluid,
                                          int n, int bx, int by, int bz, int* __restrict__ around,
                                          unsigned char* __restrict__ diag, unsigned char* __restrict__ cls)
{
    RANGE(c, 0, n) cls[c] = fluid[c] ? fluid_cell(keys, fluid, n, c, bx, by, bz, around, n, diag) : 0;
}

// The level's nbr (6, m + 1) and diag (m + 1) in compact order (order[u]: the set index of
// unknown u; position: set index → unknown, m where none); the sentinel column m.
extern "C" __global__ void mg_level_tables(const long long* __restrict__ order, int m, const int* __restrict__ around,
                                           int n, const int* __restrict__ position,
                                           const unsigned char* __restrict__ diag8, int* __restrict__ nbr,
                                           float* __restrict__ diag)
{
    RANGE(u, 0, m + 1) level_table_column(u, m, u < m ? (int)order[u] : 0, around, n, position, diag8, nbr, m + 1, diag);
}

// up (8, m_f + 1): per fine unknown (keys fkeys) the coarse parent and its neighbours on the
// child's side, row (oz·2 + oy)·2 + ox; the coarse sentinel mc where not an unknown.
extern "C" __global__ void mg_prolong_table(const long long* __restrict__ fkeys, int mf, int bx, int by, int bz,
                                            const long long* __restrict__ ckeys, int nc,
                                            const int* __restrict__ cposition, int cbx, int cby, int cbz, int mc,
                                            int* __restrict__ up)
{
    RANGE(f, 0, mf + 1) prolong_column(f, mf, fkeys, bx, by, bz, ckeys, nc, cposition, cbx, cby, cbz, mc, up, mf + 1);
}

// down (64, m_c + 1): per coarse unknown (keys ckeys) the fine cells 2I + (−1, 0, 1, 2) per
// axis, row (iz·4 + iy)·4 + ix; the fine sentinel mf where not an unknown.
extern "C" __global__ void mg_restrict_table(const long long* __restrict__ ckeys, int mc, int cbx, int cby, int cbz,
                                             const long long* __restrict__ fkeys, int nf,
                                             const int* __restrict__ fposition, int bx, int by, int bz, int mf,
                                             int* __restrict__ down)
{
    RANGE(c, 0, mc + 1) restrict_column(c, mc, ckeys, cbx, cby, cbz, fkeys, nf, fposition, bx, by, bz, mf, down, mc + 1);
}

// span[0..2] = max, span[3..5] = −min of the key fields of keys[0, m) (span on entry: 0 and
// −2^31 + 1): the unknowns' extent per axis.
extern "C" __global__ void mg_key_span(const long long* __restrict__ keys, int m, int* span)
{
    RANGE(c, 0, m) widen_span(keys[c], span);
}
