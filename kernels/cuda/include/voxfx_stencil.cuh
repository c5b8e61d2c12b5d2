// Shared MAC-grid indexing and 7-point stencil helpers of the pressure solvers (snow wind, FLIP).
#pragma once

// Linear index of cell (i, j, k) in an x-fastest nx × ny × nz array.
__device__ __forceinline__ long long cell_index(int i, int j, int k, int nx, int ny)
{
    return ((long long)k * ny + j) * nx + i;
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
