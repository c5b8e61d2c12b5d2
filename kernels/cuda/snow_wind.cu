// Wind field: stable fluids on the staggered (MAC) grid of kernels/snow/domain.py
// (seed 002 §2.3.3, §2.4.2, §3.3.3). One kernel per stage, launched by
// kernels/snow/wind.py in the paper's order: advect → build_rhs → sor_sweep ×N (+ residual)
// → project, with balance_outflow between advect and build_rhs.
//
// Layout (x fastest):  u [nz][ny][nx+1]   v [nz][ny+1][nx]   w [nz+1][ny][nx]
//                      cells (p, rhs, diag, solid) [nz][ny][nx]
// Positions are in cell units c = (x - origin) / h: cell (i, j, k) is centred at
// (i+½, j+½, k+½), the u-face (i, j, k) sits at (i, j+½, k+½), v at (i+½, j, k+½),
// w at (i+½, j+½, k).
//
// Compiled with --fmad=false and IEEE division: each operation rounds as the NumPy
// reference does, in the same order, so both backends give the same numbers.

// Side bits, -D options from kernels/snow/wind.py: SIDE_WEST (x = 0), SIDE_EAST (x = nx),
// SIDE_SOUTH (y = 0), SIDE_NORTH (y = ny).

// ------------------------------------------------------------------------ look-ups

#include "voxfx_lattice.cuh"  // sample_face, sample_faces: the trilinear look-up
#include "voxfx_mac.cuh"  // indices, red_black_cell, neighbour_sum, cell_face_sum, project_face
#include "voxfx_reduce.cuh"  // warp_max_into: the residual maxima

// ------------------------------------------------------------------------ stages

// Semi-Lagrangian self-advection (seed 002 Eq. 2.31–2.32), with the boundary values written
// in the same pass (as §3.3.3 does): for each face x, F(x) = v(x - δt·v(x)), where v(x) is
// the full velocity interpolated at the face; c = δt/h. A backtrace that leaves the box
// through a Dirichlet side samples the inflow (ux, uy, uz): air that enters carries the
// inflow wind. Faces touching a solid get 0 (no flow through obstacles), Dirichlet side
// faces the inflow's normal component (time-varying Dirichlet inflow, §2.4.2), the bottom
// and top w-faces 0 (no-through ground, free-slip lid).
extern "C" __global__ void advect(const float* __restrict__ u0, const float* __restrict__ v0,
                                  const float* __restrict__ w0, const unsigned char* __restrict__ solid,
                                  float* __restrict__ u1, float* __restrict__ v1, float* __restrict__ w1, int nx,
                                  int ny, int nz, float c, float ux, float uy, float uz, int dirichlet)
{
    int comp, i, j, k;
    long long f;
    if (!decode_face((long long)blockIdx.x * blockDim.x + threadIdx.x, nx, ny, nz, comp, i, j, k, f)) return;
    float* out = comp == 0 ? u1 : (comp == 1 ? v1 : w1);

    bool lo_in, hi_in;
    long long lo, hi;
    face_cells(comp, i, j, k, nx, ny, nz, lo_in, hi_in, lo, hi);
    if (face_is_fixed(solid, 1, false, lo_in, hi_in, lo, hi)) {  // a solid on either side
        out[f] = 0.0f;
        return;
    }
    if (comp == 0 && ((i == 0 && (dirichlet & SIDE_WEST)) || (i == nx && (dirichlet & SIDE_EAST)))) {
        out[f] = ux;
        return;
    }
    if (comp == 1 && ((j == 0 && (dirichlet & SIDE_SOUTH)) || (j == ny && (dirichlet & SIDE_NORTH)))) {
        out[f] = uy;
        return;
    }
    if (comp == 2 && (k == 0 || k == nz)) {
        out[f] = 0.0f;
        return;
    }

    // the face position and the full velocity there (own component read directly)
    const float x = comp == 0 ? (float)i : (float)i + 0.5f;
    const float y = comp == 1 ? (float)j : (float)j + 0.5f;
    const float z = comp == 2 ? (float)k : (float)k + 0.5f;
    const float vx = comp == 0 ? u0[f] : sample_face(0, u0, nx, ny, nz, x, y, z);
    const float vy = comp == 1 ? v0[f] : sample_face(1, v0, nx, ny, nz, x, y, z);
    const float vz = comp == 2 ? w0[f] : sample_face(2, w0, nx, ny, nz, x, y, z);
    // Eq. 2.32: backtrace one Euler step
    const float bx = x - c * vx, by = y - c * vy, bz = z - c * vz;
    const bool from_inflow = (bx < 0.0f && (dirichlet & SIDE_WEST)) || (bx > (float)nx && (dirichlet & SIDE_EAST)) ||
                             (by < 0.0f && (dirichlet & SIDE_SOUTH)) || (by > (float)ny && (dirichlet & SIDE_NORTH));
    float value;
    if (comp == 0)
        value = from_inflow ? ux : sample_face(0, u0, nx, ny, nz, bx, by, bz);
    else if (comp == 1)
        value = from_inflow ? uy : sample_face(1, v0, nx, ny, nz, bx, by, bz);
    else
        value = from_inflow ? uz : sample_face(2, w0, nx, ny, nz, bx, by, bz);
    out[f] = value;
}

extern "C" __global__ void clear_stats(float* stats, int first, int count)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < count) stats[first + t] = 0.0f;
}

// Right-hand side of the pressure Poisson equation Δp = ∇·F / δt (Eq. 2.28), written as
// (diag·p − Σ p_neighbour) = b with b = −h²(∇·F)/δt = coef·Σ(outgoing face velocities),
// coef = −h/δt. Cells outside the solve (solid, or with no fluid neighbour: diag = 0) get 0.
// stats[0] ← max |b| (the scale of the relative residual).
extern "C" __global__ void build_rhs(const float* __restrict__ u, const float* __restrict__ v,
                                     const float* __restrict__ w, const unsigned char* __restrict__ diag,
                                     float* __restrict__ rhs, int nx, int ny, int nz, float coef,
                                     float* __restrict__ stats)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long cells = (long long)nx * ny * nz;
    float b = 0.0f;
    if (c < cells && diag[c]) {
        int i, j, k;
        decode_cell(c, nx, ny, i, j, k);
        b = cell_face_sum<false>(u, v, w, nullptr, nullptr, nullptr, nullptr, 1, false, c, i, j, k, nx, ny, nz) * coef;
    }
    if (c < cells) rhs[c] = b;
    warp_max_into(&stats[0], fabsf(b));
}

// One colour of a red-black SOR sweep (Eq. 2.17 with Eq. 2.19): p ← p + ω(p̄ − p),
// p̄ = (b + Σ p_n)/diag, diag = number of fluid neighbours inside the grid.
// Colour 0 updates cells with i+j+k even. Threads cover every other cell of a row.
extern "C" __global__ void sor_sweep(float* __restrict__ p, const float* __restrict__ rhs,
                                     const unsigned char* __restrict__ diag, int nx, int ny, int nz, int color,
                                     float omega)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int i, j, k;
    if (!red_black_cell(t, color, nx, ny, nz, i, j, k)) return;
    const long long c = cell_index(i, j, k, nx, ny);
    const unsigned char d = diag[c];
    if (!d) return;
    const float s = neighbour_sum(p, c, i, j, k, nx, ny, nz);
    const float pc = p[c];
    p[c] = pc + omega * ((rhs[c] + s) / (float)d - pc);
}

// stats[1] ← max |b − (diag·p − Σ p_n)| over the cells of the solve. Since the
// post-projection divergence of a cell is −(δt/h²)·r, this bounds the divergence left.
extern "C" __global__ void residual(const float* __restrict__ p, const float* __restrict__ rhs,
                                    const unsigned char* __restrict__ diag, int nx, int ny, int nz,
                                    float* __restrict__ stats)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long cells = (long long)nx * ny * nz;
    float r = 0.0f;
    if (c < cells && diag[c]) {
        int i, j, k;
        decode_cell(c, nx, ny, i, j, k);
        const float s = neighbour_sum(p, c, i, j, k, nx, ny, nz);
        r = fabsf(rhs[c] - ((float)diag[c] * p[c] - s));
    }
    warp_max_into(&stats[1], r);
}

// Mass balance of the open sides, before the pressure solve. Every boundary face is a
// Neumann face for pressure, so the fluid must already carry out what the Dirichlet sides
// bring in: the open faces (advected, zero-gradient) are scaled to the target outward flux
// q_target (counted in face units, h² dropped) when their own flux q = *flux is at least
// half of it, which keeps a uniform wind uniform through gusts; otherwise the deficit is
// spread evenly over the n_open open faces. Faces touching a solid stay 0.
// Threads: [west ny·nz | east ny·nz | south nx·nz | north nx·nz].
extern "C" __global__ void balance_outflow(float* __restrict__ u, float* __restrict__ v,
                                           const unsigned char* __restrict__ solid, int nx, int ny, int nz, int open,
                                           const double* __restrict__ flux, double q_target, double n_open)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nyz = (long long)ny * nz, nxz = (long long)nx * nz;
    int side;
    long long r;
    if (t < 2 * nyz) {
        side = t < nyz ? SIDE_WEST : SIDE_EAST;
        r = t % nyz;
    } else if (t < 2 * nyz + 2 * nxz) {
        side = t - 2 * nyz < nxz ? SIDE_SOUTH : SIDE_NORTH;
        r = (t - 2 * nyz) % nxz;
    } else {
        return;
    }
    if (!(open & side)) return;
    float* vel;
    long long f, cell;
    if (side == SIDE_WEST || side == SIDE_EAST) {
        const int j = (int)(r % ny), k = (int)(r / ny);
        const int i = side == SIDE_WEST ? 0 : nx;
        f = ((long long)k * ny + j) * (nx + 1) + i;
        cell = cell_index(side == SIDE_WEST ? 0 : nx - 1, j, k, nx, ny);
        vel = u;
    } else {
        const int i = (int)(r % nx), k = (int)(r / nx);
        const int j = side == SIDE_SOUTH ? 0 : ny;
        f = ((long long)k * (ny + 1) + j) * nx + i;
        cell = cell_index(i, side == SIDE_SOUTH ? 0 : ny - 1, k, nx, ny);
        vel = v;
    }
    if (solid[cell]) return;
    const double q = flux[0];
    if (q_target > 0.0 && q > 0.5 * q_target) {
        vel[f] = vel[f] * (float)(q_target / q);
    } else {
        const float d = (float)((q_target - q) / n_open);  // along the outward normal
        vel[f] = (side == SIDE_EAST || side == SIDE_NORTH) ? vel[f] + d : vel[f] - d;
    }
}

// Projection v = F − δt ∇p (Eq. 2.14 with ρ = 1), c = δt/h: the grid core's project_face
// with the air (solid = 0) the unknowns and the solid cells (1) fixed at 0; wall faces are
// not fixed, they keep the value advect / balance_outflow gave them (the Neumann faces of
// the pressure solve) unless they touch a solid.
extern "C" __global__ void project(float* __restrict__ u, float* __restrict__ v, float* __restrict__ w,
                                   const float* __restrict__ p, const unsigned char* __restrict__ solid, int nx,
                                   int ny, int nz, float c)
{
    int comp, i, j, k;
    long long f;
    if (!decode_face((long long)blockIdx.x * blockDim.x + threadIdx.x, nx, ny, nz, comp, i, j, k, f)) return;
    project_face<false>(comp == 0 ? u : (comp == 1 ? v : w), nullptr, p, solid, 0, 1, false, comp, i, j, k, f, nx, ny,
                        nz, c);
}

// The wind at world points (flakes' convention): c = (x − origin)·(1/h), then each component
// sampled on its own lattice, clamped (sample_faces).
extern "C" __global__ void sample_wind(const float* __restrict__ u, const float* __restrict__ v,
                                       const float* __restrict__ w, int nx, int ny, int nz, float ox, float oy,
                                       float oz, float inv_h, const float* __restrict__ points,
                                       float* __restrict__ out, long long n)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const float x = (points[3 * t] - ox) * inv_h;
    const float y = (points[3 * t + 1] - oy) * inv_h;
    const float z = (points[3 * t + 2] - oz) * inv_h;
    sample_faces(u, v, w, nx, ny, nz, x, y, z, out + 3 * t);
}
