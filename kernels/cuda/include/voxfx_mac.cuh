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
