// FLIP pressure projection (seed 003 §8, Alg. 2): divergence → matrix-free PCG on the
// 7-point Laplacian → pressure gradient to velocity. Launched by kernels/flip/pressure.py,
// which documents the problem, the units and the preconditioner; the NumPy code there is
// the reference these kernels follow operation by operation.
//
// Layout (x fastest):  u [nz][ny][nx+1]   v [nz][ny+1][nx]   w [nz+1][ny][nx]
//                      cells (cell type, diag, p, CG vectors) [nz][ny][nx]
// Cell types as in kernels/flip/grid.py; cells outside the grid are SOLID walls.
//
// The PCG loop keeps every scalar on the device (scalars[], double) and a state[] the
// host reads every check_every iterations (Alg. 2): each loop kernel first reads
// state[S_STOPPED] and returns if the solve has already converged or hit its limit, so a
// captured block of iterations can run past the end harmlessly. Dot products: each block
// of a fused kernel writes one partial sum (double) and a one-block finish_* kernel adds
// them in a fixed order (the same result every run).

// Constants from Python, as -D options (kernels/flip/pressure.py builds them):
//   AIR, FLUID, SOLID                     cell types (kernels/grid/mac.py)
//   state[]:   S_IT (iterations done), S_STOPPED (converged, iteration limit or breakdown),
//              S_CONVERGED (‖r‖² ≤ tol²‖b‖²), S_MAXIT (iteration limit)
//   scalars[]: D_BB (‖b‖²), D_THRESH (tol²‖b‖²), D_RR (‖r‖² of the latest iteration),
//              D_RZ (r·z), D_ALPHA, D_BETA
//   PRE_MG, PRE_JACOBI, PRE_NONE          preconditioners

#include "voxfx_mac.cuh"  // indices, red_black_cell, neighbour_sum, cell_face_sum, project_face

// ------------------------------------------------------------------------ reductions

#include "voxfx_reduce.cuh"  // block_sum2, block_total: the fixed-order double sums

// Grid-stride loop over n cells: the fused dot-product kernels run a fixed number of blocks.
#define GRID_STRIDE(c, n)                                                           \
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < (n); \
         c += (long long)gridDim.x * blockDim.x)

// ------------------------------------------------------------------------ faces
// The divergence and the projection are the grid core's (voxfx_mac.cuh: cell_face_sum,
// project_face), with FLUID the unknowns, SOLID cells and the domain walls fixed faces
// that carry the solid's velocity su, sv, sw.

// Divergence stage: out = scale·D per FLUID cell (D = Σ outgoing face velocities, faces
// touching SOLID or a wall taken from su, sv, sw), 0 elsewhere. scale = 1/h gives ∇·u.
// With crowd_on (the density correction, kernels/flip/density.py) a FLUID cell adds
// src_scale·s, s = max(crowd[c]·inv_n0 − one_tau, 0)·alpha_dt from its particle count, each
// operation rounded alone (__f*_rn: no contraction), as density.source and pressure_rhs.
extern "C" __global__ void divergence(const float* __restrict__ u, const float* __restrict__ v,
                                      const float* __restrict__ w, const float* __restrict__ su,
                                      const float* __restrict__ sv, const float* __restrict__ sw,
                                      const unsigned char* __restrict__ cell, int nx, int ny, int nz, float scale,
                                      float* __restrict__ out, const int* __restrict__ crowd, int crowd_on,
                                      float inv_n0, float one_tau, float alpha_dt, float src_scale)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)nx * ny * nz) return;
    if (cell[c] != FLUID) {
        out[c] = 0.0f;
        return;
    }
    int i, j, k;
    decode_cell(c, nx, ny, i, j, k);
    float b = cell_face_sum<true>(u, v, w, su, sv, sw, cell, SOLID, true, c, i, j, k, nx, ny, nz) * scale;
    if (crowd_on) {
        const float excess = fmaxf(__fsub_rn(__fmul_rn((float)crowd[c], inv_n0), one_tau), 0.0f);
        b = __fadd_rn(b, __fmul_rn(src_scale, __fmul_rn(excess, alpha_dt)));
    }
    out[c] = b;
}

// Pressure gradient to velocity: u = u* − c·(p_hi − p_lo), c = Δt/h, on faces between a
// FLUID cell and a FLUID or AIR cell (p_AIR = 0); faces touching SOLID or a wall get the
// solid's velocity; faces between two AIR cells are left alone. One thread per face over
// [u | v | w].
extern "C" __global__ void project(float* __restrict__ u, float* __restrict__ v, float* __restrict__ w,
                                   const float* __restrict__ su, const float* __restrict__ sv,
                                   const float* __restrict__ sw, const unsigned char* __restrict__ cell,
                                   const float* __restrict__ p, int nx, int ny, int nz, float c)
{
    int comp, i, j, k;
    long long id;  // within its component's array
    if (!decode_face((long long)blockIdx.x * blockDim.x + threadIdx.x, nx, ny, nz, comp, i, j, k, id)) return;
    project_face<true>(comp == 0 ? u : (comp == 1 ? v : w), comp == 0 ? su : (comp == 1 ? sv : sw), p, cell, FLUID,
                       SOLID, true, comp, i, j, k, id, nx, ny, nz, c);
}

// ------------------------------------------------------------------------ set-up

// diag = number of non-SOLID neighbours inside the grid for a FLUID cell, 0 otherwise
// (0 marks "not an unknown" everywhere below).
extern "C" __global__ void build_diag(const unsigned char* __restrict__ kind, unsigned char* __restrict__ diag,
                                      int nx, int ny, int nz)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)nx * ny * nz) return;
    if (kind[c] != FLUID) {
        diag[c] = 0;
        return;
    }
    int i, j, k;
    decode_cell(c, nx, ny, i, j, k);
    const long long plane = (long long)nx * ny;
    int d = 0;
    d += i > 0 && kind[c - 1] != SOLID;
    d += i < nx - 1 && kind[c + 1] != SOLID;
    d += j > 0 && kind[c - nx] != SOLID;
    d += j < ny - 1 && kind[c + nx] != SOLID;
    d += k > 0 && kind[c - plane] != SOLID;
    d += k < nz - 1 && kind[c + plane] != SOLID;
    diag[c] = (unsigned char)d;
}

// Coarse cell types (multigrid): AIR if any of the 2×2×2 children is AIR, else FLUID if
// any is FLUID, else SOLID; children outside the fine grid do not count.
extern "C" __global__ void coarsen_kind(const unsigned char* __restrict__ kf, unsigned char* __restrict__ kc,
                                        int fx, int fy, int fz, int cx, int cy, int cz)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)cx * cy * cz) return;
    int I, J, K;
    decode_cell(c, cx, cy, I, J, K);
    bool air = false, fluid = false;
    for (int dk = 0; dk < 2; ++dk)
        for (int dj = 0; dj < 2; ++dj)
            for (int di = 0; di < 2; ++di) {
                const int i = 2 * I + di, j = 2 * J + dj, k = 2 * K + dk;
                if (i >= fx || j >= fy || k >= fz) continue;
                const unsigned char t = kf[cell_index(i, j, k, fx, fy)];
                air |= t == AIR;
                fluid |= t == FLUID;
            }
    kc[c] = air ? AIR : (fluid ? FLUID : SOLID);
}

// ------------------------------------------------------------------------ PCG (Alg. 2)

// x = 0, d = 0, r = b; partial ‖b‖²; for Jacobi z = b/diag, for none z ≡ r, with r·z.
extern "C" __global__ void cg_init(const float* __restrict__ b, float* __restrict__ x, float* __restrict__ r,
                                   float* __restrict__ d, float* __restrict__ z,
                                   const unsigned char* __restrict__ diag, long long n, int mode,
                                   double* __restrict__ partials)
{
    double bb = 0.0, rz = 0.0;
    GRID_STRIDE(c, n)
    {
        const float bc = b[c];
        x[c] = 0.0f;
        d[c] = 0.0f;
        r[c] = bc;
        bb += (double)bc * bc;
        if (mode == PRE_JACOBI) {
            const float zc = diag[c] ? bc / (float)diag[c] : 0.0f;
            z[c] = zc;
            rz += (double)bc * zc;
        }
    }
    if (mode == PRE_NONE) rz = bb;
    block_sum2(bb, rz, partials, partials + gridDim.x);
}

// ‖b‖², the threshold tol²‖b‖², iteration 0; a zero b is solved by p = 0 at once.
extern "C" __global__ void finish_init(const double* __restrict__ partials, int blocks, double* __restrict__ scalars,
                                       int* __restrict__ state, double tol)
{
    const double bb = block_total(partials, blocks);
    if (threadIdx.x != 0) return;
    const double thresh = tol * tol * bb;
    scalars[D_BB] = bb;
    scalars[D_RR] = bb;
    scalars[D_THRESH] = thresh;
    scalars[D_RZ] = 0.0;
    scalars[D_ALPHA] = 0.0;
    scalars[D_BETA] = 0.0;
    state[S_IT] = 0;
    if (!isfinite(bb)) {
        state[S_STOPPED] = 1;
    } else if (bb <= thresh) {
        state[S_STOPPED] = 1;
        state[S_CONVERGED] = 1;
    }
}

// q = A d (the matrix-free 7-point Laplacian) and partial d·q.
extern "C" __global__ void apply_laplacian(const float* __restrict__ d, float* __restrict__ q,
                                           const unsigned char* __restrict__ diag, int nx, int ny, int nz,
                                           double* __restrict__ partials, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    double dq = 0.0;
    GRID_STRIDE(c, (long long)nx * ny * nz)
    {
        float qc = 0.0f;
        const unsigned char dg = diag[c];
        if (dg) {
            int i, j, k;
            decode_cell(c, nx, ny, i, j, k);
            qc = (float)dg * d[c] - neighbour_sum(d, c, i, j, k, nx, ny, nz);
        }
        q[c] = qc;
        dq += (double)d[c] * qc;
    }
    block_sum2(dq, 0.0, partials, nullptr);
}

// α = r·z / d·q
extern "C" __global__ void finish_alpha(const double* __restrict__ partials, int blocks, double* __restrict__ scalars,
                                        const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const double dq = block_total(partials, blocks);
    if (threadIdx.x == 0) scalars[D_ALPHA] = dq > 0.0 ? scalars[D_RZ] / dq : 0.0;
}

// x += α d, r −= α q; partial ‖r‖²; Jacobi: z = r/diag and r·z; none: r·z = ‖r‖².
extern "C" __global__ void update_solution(float* __restrict__ x, float* __restrict__ r, const float* __restrict__ d,
                                           const float* __restrict__ q, float* __restrict__ z,
                                           const unsigned char* __restrict__ diag, long long n, int mode,
                                           const double* __restrict__ scalars, double* __restrict__ partials,
                                           const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const float alpha = (float)scalars[D_ALPHA];
    double rr = 0.0, rz = 0.0;
    GRID_STRIDE(c, n)
    {
        x[c] = x[c] + alpha * d[c];
        const float rc = r[c] - alpha * q[c];
        r[c] = rc;
        rr += (double)rc * rc;
        if (mode == PRE_JACOBI) {
            const float zc = diag[c] ? rc / (float)diag[c] : 0.0f;
            z[c] = zc;
            rz += (double)rc * zc;
        }
    }
    if (mode == PRE_NONE) rz = rr;
    block_sum2(rr, rz, partials, mode == PRE_MG ? nullptr : partials + gridDim.x);
}

// partial r·z (after the V-cycle).
extern "C" __global__ void dot_rz(const float* __restrict__ r, const float* __restrict__ z, long long n,
                                  double* __restrict__ partials_rz, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    double rz = 0.0;
    GRID_STRIDE(c, n) rz += (double)r[c] * z[c];
    block_sum2(rz, 0.0, partials_rz, nullptr);
}

// End of an iteration: ‖r‖² against tol²‖b‖² (the device side of Alg. 2's residual
// check: the first passing iteration is latched), the iteration limit, β = r·z_new / r·z.
// first = 1: only r·z of the initial residual (β = 0, no iteration counted).
extern "C" __global__ void finish_beta(const double* __restrict__ partials, int blocks, double* __restrict__ scalars,
                                       int* __restrict__ state, int first)
{
    if (state[S_STOPPED]) return;
    const double rz_new = block_total(partials + blocks, blocks);
    const double rr = first ? 0.0 : block_total(partials, blocks);
    if (threadIdx.x != 0) return;
    if (first) {
        scalars[D_RZ] = rz_new;
        scalars[D_BETA] = 0.0;
        return;
    }
    scalars[D_RR] = rr;
    const int it = state[S_IT] + 1;
    state[S_IT] = it;
    if (!isfinite(rr)) {
        state[S_STOPPED] = 1;
    } else if (rr <= scalars[D_THRESH]) {
        state[S_CONVERGED] = 1;
        state[S_STOPPED] = 1;
    } else if (it >= state[S_MAXIT]) {
        state[S_STOPPED] = 1;
    }
    const double rz = scalars[D_RZ];
    scalars[D_BETA] = rz != 0.0 ? rz_new / rz : 0.0;
    scalars[D_RZ] = rz_new;
}

// d = z + β d
extern "C" __global__ void update_direction(float* __restrict__ d, const float* __restrict__ z, long long n,
                                            const double* __restrict__ scalars, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const float beta = (float)scalars[D_BETA];
    GRID_STRIDE(c, n) d[c] = z[c] + beta * d[c];
}

// ------------------------------------------------------------------------ multigrid V-cycle

// One colour of red-black Gauss-Seidel on level A x = b: x_c = (b_c + Σ x_n)/diag_c for
// cells with (i+j+k) mod 2 = colour; one thread per cell of the colour (every other cell
// of a row). first = 1: the sweep from x = 0, one thread per cell, every cell written
// (b/diag on the colour, 0 elsewhere), so no clearing pass is needed.
extern "C" __global__ void mg_smooth(float* __restrict__ x, const float* __restrict__ b,
                                     const unsigned char* __restrict__ diag, int nx, int ny, int nz, int colour,
                                     int first, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (first) {
        if (t >= (long long)nx * ny * nz) return;
        int i, j, k;
        decode_cell(t, nx, ny, i, j, k);
        const unsigned char dg = diag[t];
        x[t] = (((i + j + k) & 1) == colour && dg) ? b[t] / (float)dg : 0.0f;
        return;
    }
    int i, j, k;
    if (!red_black_cell(t, colour, nx, ny, nz, i, j, k)) return;
    const long long c = cell_index(i, j, k, nx, ny);
    const unsigned char dg = diag[c];
    if (!dg) return;
    x[c] = (b[c] + neighbour_sum(x, c, i, j, k, nx, ny, nz)) / (float)dg;
}

// r = b − A x on the unknowns, 0 elsewhere.
extern "C" __global__ void mg_residual(const float* __restrict__ x, const float* __restrict__ b,
                                       const unsigned char* __restrict__ diag, float* __restrict__ r, int nx, int ny,
                                       int nz, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)nx * ny * nz) return;
    const unsigned char dg = diag[c];
    if (!dg) {
        r[c] = 0.0f;
        return;
    }
    int i, j, k;
    decode_cell(c, nx, ny, i, j, k);
    r[c] = b[c] - ((float)dg * x[c] - neighbour_sum(x, c, i, j, k, nx, ny, nz));
}

// Weight of fine index 2I + o (o = −1..2) for coarse index I: ¾ for its own two
// children, ¼ for the next ones (cell-centred linear interpolation).
__device__ __forceinline__ float mg_weight(int o) { return (o == 0 || o == 1) ? 0.75f : 0.25f; }

// Restriction: b_c = ½·Σ P_fc r_f on coarse unknowns (Pᵀ of mg_prolong_add, times ½ =
// the average Pᵀ/8 scaled by (2h/h)² for the unscaled coarse operator).
extern "C" __global__ void mg_restrict(const float* __restrict__ rf, float* __restrict__ bc,
                                       const unsigned char* __restrict__ diagc, int fx, int fy, int fz, int cx,
                                       int cy, int cz, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)cx * cy * cz) return;
    if (!diagc[c]) {
        bc[c] = 0.0f;
        return;
    }
    int I, J, K;
    decode_cell(c, cx, cy, I, J, K);
    float s = 0.0f;
    for (int ok = -1; ok <= 2; ++ok) {
        const int k = 2 * K + ok;
        if (k < 0 || k >= fz) continue;
        float sk = 0.0f;
        for (int oj = -1; oj <= 2; ++oj) {
            const int j = 2 * J + oj;
            if (j < 0 || j >= fy) continue;
            float sj = 0.0f;
            for (int oi = -1; oi <= 2; ++oi) {
                const int i = 2 * I + oi;
                if (i < 0 || i >= fx) continue;
                sj += mg_weight(oi) * rf[cell_index(i, j, k, fx, fy)];
            }
            sk += mg_weight(oj) * sj;
        }
        s += mg_weight(ok) * sk;
    }
    bc[c] = 0.5f * s;
}

// Prolongation: x_f += Σ P_fc x_c on fine unknowns; fine index i takes ¾ of coarse i/2 and
// ¼ of its neighbour on i's side (coarse cells outside the grid count 0).
extern "C" __global__ void mg_prolong_add(const float* __restrict__ xc, float* __restrict__ xf,
                                          const unsigned char* __restrict__ diagf, int fx, int fy, int fz, int cx,
                                          int cy, int cz, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    const long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= (long long)fx * fy * fz) return;
    if (!diagf[f]) return;
    int i, j, k;
    decode_cell(f, fx, fy, i, j, k);
    const int I[2] = {i >> 1, (i & 1) ? (i >> 1) + 1 : (i >> 1) - 1};
    const int J[2] = {j >> 1, (j & 1) ? (j >> 1) + 1 : (j >> 1) - 1};
    const int K[2] = {k >> 1, (k & 1) ? (k >> 1) + 1 : (k >> 1) - 1};
    const float w[2] = {0.75f, 0.25f};
    float s = 0.0f;
    for (int a = 0; a < 2; ++a) {
        if (K[a] < 0 || K[a] >= cz) continue;
        for (int b = 0; b < 2; ++b) {
            if (J[b] < 0 || J[b] >= cy) continue;
            for (int e = 0; e < 2; ++e) {
                if (I[e] < 0 || I[e] >= cx) continue;
                s += w[a] * w[b] * w[e] * xc[cell_index(I[e], J[b], K[a], cx, cy)];
            }
        }
    }
    xf[f] = xf[f] + s;
}
