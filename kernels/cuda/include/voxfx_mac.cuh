// The staggered (MAC) grid on the device: cell and face indices, the two cells of a face,
// red-black order and the 7-point neighbour sum; shared by the FLIP liquid and the snow
// wind. kernels/grid/mac.py holds the same ideas for NumPy and CuPy array code.
//
// Layout (x fastest):  u [nz][ny][nx+1]   v [nz][ny+1][nx]   w [nz+1][ny][nx]
//                      cells [nz][ny][nx]
// Face (i, j, k) of component a separates cell (i, j, k) − e_a ("lo") from (i, j, k) ("hi").
#pragma once

// Linear index of cell (i, j, k) in an x-fastest nx × ny × nz array.
__device__ __forceinline__ long long cell_index(int i, int j, int k, int nx, int ny)
{
    return ((long long)k * ny + j) * nx + i;
}

// (i, j, k) of the cell with linear index c.
__device__ __forceinline__ void decode_cell(long long c, int nx, int ny, int& i, int& j, int& k)
{
    i = (int)(c % nx);
    const long long r = c / nx;
    j = (int)(r % ny);
    k = (int)(r / ny);
}

// Linear indices of the u-face and the v-face (i, j, k): the −x and −y faces of cell (i, j, k)
// (its −z face has the cell's own index in w).
__device__ __forceinline__ long long u_face_index(int i, int j, int k, int nx, int ny)
{
    return ((long long)k * ny + j) * (nx + 1) + i;
}
__device__ __forceinline__ long long v_face_index(int i, int j, int k, int nx, int ny)
{
    return ((long long)k * (ny + 1) + j) * nx + i;
}

// A global face index over [u | v | w] → component (0, 1, 2), (i, j, k) on its lattice and
// the index within that component's array. False past the last face.
__device__ __forceinline__ bool decode_face(long long id, int nx, int ny, int nz, int& comp, int& i, int& j,
                                            int& k, long long& local)
{
    const long long nu = (long long)(nx + 1) * ny * nz;
    const long long nv = (long long)nx * (ny + 1) * nz;
    const long long nw = (long long)nx * ny * (nz + 1);
    if (id < nu) {
        comp = 0;
    } else if (id < nu + nv) {
        comp = 1;
        id -= nu;
    } else if (id < nu + nv + nw) {
        comp = 2;
        id -= nu + nv;
    } else {
        return false;
    }
    local = id;
    const int sx = nx + (comp == 0), sy = ny + (comp == 1);
    i = (int)(id % sx);
    const long long r = id / sx;
    j = (int)(r % sy);
    k = (int)(r / sy);
    return true;
}

// The two cells a face separates, along its axis: `lo` = (i,j,k) − e_comp, `hi` = (i,j,k);
// either may lie outside the grid (lo_in / hi_in false; the index is then not to be read).
__device__ __forceinline__ void face_cells(int comp, int i, int j, int k, int nx, int ny, int nz, bool& lo_in,
                                           bool& hi_in, long long& lo, long long& hi)
{
    const int n = comp == 0 ? nx : (comp == 1 ? ny : nz);
    const int a = comp == 0 ? i : (comp == 1 ? j : k);
    lo_in = a > 0;
    hi_in = a < n;
    hi = cell_index(min(i, nx - 1), min(j, ny - 1), min(k, nz - 1), nx, ny);
    lo = cell_index(i - (comp == 0), j - (comp == 1), k - (comp == 2), nx, ny);
}

// Red-black ordering: thread t of a half-size launch ((nx + 1) / 2 · ny · nz threads)
// takes the cell of its row whose i + j + k has the parity of `colour`. False when t is
// past the grid or the row has no such cell (odd nx).
__device__ __forceinline__ bool red_black_cell(long long t, int colour, int nx, int ny, int nz, int& i, int& j,
                                               int& k)
{
    const int half = (nx + 1) / 2;
    if (t >= (long long)half * ny * nz) return false;
    const int ii = (int)(t % half);
    const long long r = t / half;
    j = (int)(r % ny);
    k = (int)(r / ny);
    i = 2 * ii + ((j + k + colour) & 1);
    return i < nx;
}

// Σ x_n over the six neighbours of cell c = (i, j, k) that lie inside the grid. Callers
// keep x = 0 on cells that are not unknowns, so Dirichlet neighbours add 0 and Neumann
// (solid, wall) neighbours drop out, as they drop out of the diagonal.
__device__ __forceinline__ float neighbour_sum(const float* __restrict__ x, long long c, int i, int j, int k, int nx,
                                               int ny, int nz)
{
    const long long plane = (long long)nx * ny;
    float s = 0.0f;
    if (i > 0) s += x[c - 1];
    if (i < nx - 1) s += x[c + 1];
    if (j > 0) s += x[c - nx];
    if (j < ny - 1) s += x[c + nx];
    if (k > 0) s += x[c - plane];
    if (k < nz - 1) s += x[c + plane];
    return s;
}

// ------------------------------------------------------------------------ projection
// The one projection of a cell-typed MAC grid (the FLIP liquid and the snow wind), twin of
// mac.fixed_faces / mac.project. `cell` holds a type per cell; `fluid` is the type whose
// pressure is solved for, `solid` the type whose faces are fixed. A face is fixed when a
// cell of type `solid` lies on either side or, with walls_fixed, when it lies on the domain
// wall; a fixed face takes fixed[f] (FIXED false: 0, fixed not read). FIXED is a template
// argument so that each caller compiles only its own case.

// Whether the face between lo and hi (face_cells) is fixed.
__device__ __forceinline__ bool face_is_fixed(const unsigned char* __restrict__ cell, unsigned char solid,
                                              bool walls_fixed, bool lo_in, bool hi_in, long long lo, long long hi)
{
    if (!lo_in || !hi_in) return walls_fixed || cell[lo_in ? lo : hi] == solid;
    return cell[lo] == solid || cell[hi] == solid;
}

// D of cell c = (i, j, k), a cell not itself of type `solid`: the sum of its outgoing face
// velocities, (x + y) + z, no 1/h. FIXED: the fixed faces read su, sv, sw (the faces as the
// projection sees them); otherwise u, v, w as they are (su, sv, sw, cell not read).
template <bool FIXED>
__device__ __forceinline__ float cell_face_sum(const float* __restrict__ u, const float* __restrict__ v,
                                               const float* __restrict__ w, const float* __restrict__ su,
                                               const float* __restrict__ sv, const float* __restrict__ sw,
                                               const unsigned char* __restrict__ cell, unsigned char solid,
                                               bool walls_fixed, long long c, int i, int j, int k, int nx, int ny,
                                               int nz)
{
    const long long plane = (long long)nx * ny;
    const long long fu = u_face_index(i, j, k, nx, ny);
    const long long fv = v_face_index(i, j, k, nx, ny);
    const long long fw = c;
    if (!FIXED) {
        const float du = u[fu + 1] - u[fu];
        const float dv = v[fv + nx] - v[fv];
        const float dw = w[fw + plane] - w[fw];
        return (du + dv) + dw;
    }
    const float u0 = ((i == 0) ? walls_fixed : cell[c - 1] == solid) ? su[fu] : u[fu];
    const float u1 = ((i == nx - 1) ? walls_fixed : cell[c + 1] == solid) ? su[fu + 1] : u[fu + 1];
    const float v0 = ((j == 0) ? walls_fixed : cell[c - nx] == solid) ? sv[fv] : v[fv];
    const float v1 = ((j == ny - 1) ? walls_fixed : cell[c + nx] == solid) ? sv[fv + nx] : v[fv + nx];
    const float w0 = ((k == 0) ? walls_fixed : cell[c - plane] == solid) ? sw[fw] : w[fw];
    const float w1 = ((k == nz - 1) ? walls_fixed : cell[c + plane] == solid) ? sw[fw + plane] : w[fw + plane];
    return ((u1 - u0) + (v1 - v0)) + (w1 - w0);
}

// The projection u ← u − c·(p_hi − p_lo) (c = Δt/h, ρ = 1) of face (comp, i, j, k), index f
// in vel: a fixed face takes fixed[f] (FIXED false: 0); a face between two cells of the
// grid of which one at least is `fluid` loses c·(p_hi − p_lo), p of a non-fluid cell
// counted 0; every other face keeps its value.
template <bool FIXED>
__device__ __forceinline__ void project_face(float* __restrict__ vel, const float* __restrict__ fixed,
                                             const float* __restrict__ p, const unsigned char* __restrict__ cell,
                                             unsigned char fluid, unsigned char solid, bool walls_fixed, int comp,
                                             int i, int j, int k, long long f, int nx, int ny, int nz, float c)
{
    bool lo_in, hi_in;
    long long lo, hi;
    face_cells(comp, i, j, k, nx, ny, nz, lo_in, hi_in, lo, hi);
    if (face_is_fixed(cell, solid, walls_fixed, lo_in, hi_in, lo, hi)) {
        vel[f] = FIXED ? fixed[f] : 0.0f;
        return;
    }
    if (!lo_in || !hi_in) return;  // a wall face that is not fixed keeps its value
    const unsigned char tlo = cell[lo], thi = cell[hi];
    if (tlo == fluid || thi == fluid) {
        const float plo = tlo == fluid ? p[lo] : 0.0f;
        const float phi = thi == fluid ? p[hi] : 0.0f;
        vel[f] = vel[f] - c * (phi - plo);
    }
}
