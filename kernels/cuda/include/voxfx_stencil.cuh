// Shared 7-point stencil helpers of the pressure solvers (snow wind, FLIP).
#pragma once

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
