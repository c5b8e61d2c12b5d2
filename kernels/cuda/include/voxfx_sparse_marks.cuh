// SparseFlipGrid.update's marks of one pool cell (flip_sparse_transfer.cu mark_walls and
// flip_sparse_topology.cu topology_cell_tables write them): the faces that exist (a closed
// domain's face lattices, every active face when open) and the wall ring beyond a closed
// domain (solid = wall where no obstacle is).
#pragma once
#include "voxfx_sparse.cuh"

// Cell t of the pool (slot t >> 9, local t & 511): exists_u/v/w and wall, all 0 in a free slot.
__device__ __forceinline__ void sparse_wall_marks(const unsigned char* __restrict__ used,
                                                  const int* __restrict__ coords, long long t, int closed, int nx,
                                                  int ny, int nz, unsigned char& eu, unsigned char& ev,
                                                  unsigned char& ew, unsigned char& wl)
{
    const long long slot = t >> 9;
    const int l = (int)(t & (SPARSE_CELLS - 1));
    eu = ev = ew = wl = 0;
    if (!used[slot]) return;
    const int i = coords[3 * slot] * 8 + (l & 7), j = coords[3 * slot + 1] * 8 + ((l >> 3) & 7),
              k = coords[3 * slot + 2] * 8 + (l >> 6);
    if (closed) {
        const bool in_j = j >= 0 && j < ny, in_k = k >= 0 && k < nz, in_i = i >= 0 && i < nx;
        wl = !(in_i && in_j && in_k);
        eu = i >= 0 && i < nx + 1 && in_j && in_k;
        ev = in_i && j >= 0 && j < ny + 1 && in_k;
        ew = in_i && in_j && k >= 0 && k < nz + 1;
    } else {
        eu = ev = ew = 1;
    }
}

// sparse_wall_marks of cell t into the marks' arrays, solid = wall (no obstacle yet).
__device__ __forceinline__ void sparse_store_wall_marks(const unsigned char* __restrict__ used,
                                                        const int* __restrict__ coords, long long t, int closed, int nx,
                                                        int ny, int nz, unsigned char* __restrict__ exists_u,
                                                        unsigned char* __restrict__ exists_v,
                                                        unsigned char* __restrict__ exists_w,
                                                        unsigned char* __restrict__ wall,
                                                        unsigned char* __restrict__ solid)
{
    unsigned char eu, ev, ew, wl;
    sparse_wall_marks(used, coords, t, closed, nx, ny, nz, eu, ev, ew, wl);
    exists_u[t] = eu;
    exists_v[t] = ev;
    exists_w[t] = ew;
    wall[t] = wl;
    solid[t] = wl;
}
