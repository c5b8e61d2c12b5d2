// The fused topology tables' per-thread work, written once for flip_sparse_topology.cu's topology_slot_tables /
// topology_cell_tables (sizes from the host) and flip_sparse_topology_tables_ahead.cu's kernels (sizes from the
// flags on the device, VOXFX_SPARSE_TABLES_AHEAD).
#pragma once

#include "voxfx_sparse.cuh"  // sparse_table_thread
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS, INDEXED_SLOT
#include "voxfx_sparse_marks.cuh"  // sparse_store_wall_marks

// This thread (t) of the slot tables: t < 27·n_keys a key's neighbour o (coords from its key), then the free slots'
// rows of the pool of `capacity` slots (nbr27 −1, coords 0); every entry once, so no fill first.
__device__ __forceinline__ void topology_slot_table_entry(const long long* __restrict__ keys,
                                                          const int* __restrict__ slots, long long n_keys,
                                                          BRICK_INDEX_ARGS, const unsigned char* __restrict__ used,
                                                          long long capacity, int* __restrict__ coords,
                                                          int* __restrict__ nbr27)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < 27 * n_keys) {
        int s, o;
        long long bx, by, bz;  // the neighbour at o
        sparse_table_thread(t, keys, slots, coords, s, o, bx, by, bz);
        nbr27[27LL * s + o] = INDEXED_SLOT(bx, by, bz);
        return;
    }
    if (t >= 27 * (n_keys + capacity)) return;
    const long long slot = (t - 27 * n_keys) / 27;
    const int o = (int)(t - 27 * n_keys - 27 * slot);
    if (used[slot]) return;
    nbr27[27 * slot + o] = -1;
    if (o < 3) coords[3 * slot + o] = 0;
}

// Pool cell t's marks (mark_walls') with solid = wall and the solid faces 0 (a grid without obstacles).
__device__ __forceinline__ void topology_cell_marks(const unsigned char* __restrict__ used,
                                                    const int* __restrict__ coords, long long t, int closed, int nx,
                                                    int ny, int nz, unsigned char* __restrict__ exists_u,
                                                    unsigned char* __restrict__ exists_v,
                                                    unsigned char* __restrict__ exists_w,
                                                    unsigned char* __restrict__ wall, unsigned char* __restrict__ solid,
                                                    float* __restrict__ solid_u, float* __restrict__ solid_v,
                                                    float* __restrict__ solid_w)
{
    sparse_store_wall_marks(used, coords, t, closed, nx, ny, nz, exists_u, exists_v, exists_w, wall, solid);
    solid_u[t] = 0.0f;
    solid_v[t] = 0.0f;
    solid_w[t] = 0.0f;
}
