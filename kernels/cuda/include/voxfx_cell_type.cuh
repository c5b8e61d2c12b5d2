// A pool cell's type from the binning's count (sparse_transfer.classify on the device): one
// copy for flip_sparse_transfer.cu's classify_counts_sparse and flip_sparse_scatter.cu's
// p2g_scatter_finish_cells (the division and the types in one pass, helper i24p8). Needs the
// AIR, FLUID and SOLID defines (kernels/grid/mac.py CELL_TYPES).
#pragma once
#include "voxfx_sparse.cuh"

// FLUID where cell t holds a particle (count, the bins of the positions classify is given),
// is not solid and (closed) lies inside the box; else SOLID where solid, AIR elsewhere. A
// cell with particles lies in an active slot (count_particles_sparse bins nothing else).
__device__ __forceinline__ unsigned char sparse_cell_type(const int* __restrict__ count,
                                                          const unsigned char* __restrict__ solid,
                                                          const int* __restrict__ coords, long long t, int closed,
                                                          int nx, int ny, int nz)
{
    unsigned char type = solid[t] ? SOLID : AIR;
    if (type == AIR && count[t] > 0) {
        const long long slot = t >> 9;
        const int l = (int)(t & (SPARSE_CELLS - 1));
        const long long i = 8LL * coords[3 * slot] + (l & 7), j = 8LL * coords[3 * slot + 1] + ((l >> 3) & 7),
                        k = 8LL * coords[3 * slot + 2] + (l >> 6);
        if (!closed || (i >= 0 && i < nx && j >= 0 && j < ny && k >= 0 && k < nz)) type = FLUID;
    }
    return type;
}
