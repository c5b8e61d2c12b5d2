// Sparse FLIP pressure (seed 003 §8, Alg. 2) on compacted unknowns: the PCG loop's vector
// kernels, the 7-point Laplacian read through a neighbour table, the union-find of the
// sealed-region labels and the multigrid tables (the "host" set-up's). The multigrid V-cycle
// (red-black Gauss-Seidel, residual, restriction, prolongation, the coarsest level in one
// block, the coarse levels' whole V-cycle in one block: mg_tail_vcycle) is
// flip_sparse_pressure_vcycle.cu. Launched by kernels/flip/sparse_pressure_gpu.py; the NumPy
// code of sparse_pressure.py and sparse_multigrid.py is the reference these kernels follow
// operation by operation (they are compiled without FMA contraction, so each value rounds as
// NumPy rounds it).
//
// Layout. A level's vectors hold its m unknowns — red (i + j + k even) in [0, m_red), black
// in [m_red, m) — and a sentinel at m that stays 0; buffers are `stride` entries long
// (≥ m + 1, fixed while the solver keeps its buffers, so a captured CUDA graph stays
// valid while m changes). Tables are row-major [rows][stride] int32: nbr (6 rows: −x, +x,
// −y, +y, −z, +z), up (8: prolongation to the level from the next coarser one), down (64:
// restriction into the level from the next finer one); an entry that is not an unknown is
// the sentinel. sizes[2·level] = m_red, sizes[2·level + 1] = m, on the device.
//
// Constants from Python, as -D options (kernels/flip/sparse_pressure_gpu.py, the same for
// both files): S_IT, S_STOPPED, S_CONVERGED, D_BB, D_THRESH, D_RR, D_RZ, D_ALPHA, D_BETA (the
// state[] and scalars[] layout of flip_pressure.cu, whose finish_* kernels close this loop's
// reductions; finish_init_warm here closes a warm start's) and D_COLD (the warm start's
// choice), PRE_MG, PRE_JACOBI, PRE_NONE (preconditioners), MG_SWEEPS (pre- and post-smoothing
// sweeps), MG_COARSE_SWEEPS (forward and as many backward sweeps on the coarsest level),
// KEY_BITS (bits per axis of a multigrid cell key).

#include "voxfx_mg_cell.cuh"  // compact_neighbour_sum, residual_value, the tables' columns: per unknown
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

// x += α d, r −= α q; partial ‖r‖²; Jacobi: z = r·(1/diag) and r·z (into rz).
__device__ __forceinline__ void update_solution_pass(float* __restrict__ x, float* __restrict__ r,
                                                     const float* __restrict__ d, const float* __restrict__ q,
                                                     float* __restrict__ z, const float* __restrict__ diag, int n,
                                                     int mode, float alpha, double& rr, double& rz)
{
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
}

// x += α d, r −= α q; partial ‖r‖²; Jacobi: z = r·(1/diag) and r·z; none: r·z = ‖r‖².
extern "C" __global__ void update_solution(float* __restrict__ x, float* __restrict__ r, const float* __restrict__ d,
                                           const float* __restrict__ q, float* __restrict__ z,
                                           const float* __restrict__ diag, const int* __restrict__ sizes, int mode,
                                           const double* __restrict__ scalars, double* __restrict__ partials,
                                           const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    double rr = 0.0, rz = 0.0;
    update_solution_pass(x, r, d, q, z, diag, sizes[1], mode, (float)scalars[D_ALPHA], rr, rz);
    if (mode == PRE_NONE) rz = rr;
    block_sum2(rr, rz, partials, mode == PRE_MG ? nullptr : partials + gridDim.x);
}

// Σ partials[0, n) in block_total's order on FINISH_THREADS threads (finish_beta's one block,
// sparse_pressure_gpu._finish), whatever this block's size: virtual thread t adds partials[t],
// [t + FINISH_THREADS], … in turn; then each warp's 32 such sums by warp_sum's tree (lane l takes
// l + 16, then l + 8, … 1), and the warps' sums by the same tree; the result in thread 0. Written
// out in shared memory, not by shuffles, so that a one-thread host harness runs the very same
// order (tests/unit/test_cuda_sparse_pcg_stop_host.py). Every thread of the block must call it.
__device__ double finish_order_total(const volatile double* partials, int n)
{
    __shared__ double v[FINISH_THREADS];
    for (int t = threadIdx.x; t < FINISH_THREADS; t += blockDim.x) {
        double s = 0.0;
        for (int i = t; i < n; i += FINISH_THREADS) s += partials[i];
        v[t] = s;
    }
    __syncthreads();
    for (int o = 16; o > 0; o >>= 1) {  // each warp: lane l += lane l + o (lanes l < o)
        for (int t = threadIdx.x; t < FINISH_THREADS; t += blockDim.x)
            if ((t & 31) < o) v[t] += v[t + o];
        __syncthreads();
    }
    for (int o = 16; o > 0; o >>= 1) {  // the warps' sums (lane 0 of each): warp w += warp w + o
        for (int w = threadIdx.x; w < o; w += blockDim.x) v[32 * w] += v[32 * (w + o)];
        __syncthreads();
    }
    return v[0];
}

// update_solution (MG: ‖r‖² partials alone), then the stopping test ahead of the V-cycle
// (VOXFX_SPARSE_PCG_EARLY_STOP, sparse_pressure_gpu.EARLY_STOP): the last block to finish (ticket,
// 0 between launches) totals the ‖r‖² partials as finish_beta will (finish_order_total) and, where
// finish_beta would stop the solve on this iteration — ‖r‖² not finite, ≤ tol²‖b‖², or the
// iteration limit — does its writes now: scalars[D_RR], state[S_IT], S_CONVERGED, S_STOPPED. The
// V-cycle's kernels, dot_rz, finish_beta and update_direction then return at their first line: x is
// final here, and the converging iteration's z, r·z and β are never read. Otherwise it writes
// nothing and finish_beta runs as before (the same total, the same writes): the same x, iterations,
// residual and flag bit for bit.
extern "C" __global__ void update_solution_stop(float* __restrict__ x, float* __restrict__ r,
                                                const float* __restrict__ d, const float* __restrict__ q,
                                                float* __restrict__ z, const float* __restrict__ diag,
                                                const int* __restrict__ sizes, int mode, double* __restrict__ scalars,
                                                double* __restrict__ partials, int* __restrict__ state,
                                                int* __restrict__ ticket)
{
    if (state[S_STOPPED]) return;
    double rr = 0.0, rz = 0.0;
    update_solution_pass(x, r, d, q, z, diag, sizes[1], mode, (float)scalars[D_ALPHA], rr, rz);
    if (mode == PRE_NONE) rz = rr;
    block_sum2(rr, rz, partials, mode == PRE_MG ? nullptr : partials + gridDim.x);  // thread 0 writes
    __shared__ int last;
    if (threadIdx.x == 0) {
#ifdef __CUDA_ARCH__  // a host harness's blocks run one after another
        __threadfence();
#endif
        last = atomicAdd(ticket, 1) == (int)gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    const double total = finish_order_total(partials, gridDim.x);
    if (threadIdx.x != 0) return;
    *ticket = 0;
    const int it = state[S_IT] + 1;
    const bool finite = isfinite(total), converged = finite && total <= scalars[D_THRESH];
    if (!finite || converged || it >= state[S_MAXIT]) {  // finish_beta's three stops, in its order
        scalars[D_RR] = total;
        state[S_IT] = it;
        if (converged) state[S_CONVERGED] = 1;
        state[S_STOPPED] = 1;
    }
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
