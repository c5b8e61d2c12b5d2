// One particle's mark in the current sparse topology (flip_sparse_topology.cu's mark_occupied, and the
// block G2P's marks of the moved particles with G2P_MARKS, flip_sparse_g2p_block.cu, helper s23j): its
// lattice cell (topology_cell), the cell's occupied flag, *missed where the cell has no brick, and its
// brick's largest |v|² (speed2). Moved here verbatim from flip_sparse_topology.cu so that both kernels
// run the very same code (the same flags, maxima and count: tests/unit/test_cuda_g2p_marks_host.py).
#pragma once
#include "voxfx_reduce.cuh"  // group_max_into: the per-slot speed maxima
#include "voxfx_sparse.cuh"  // sparse_local, SPARSE_CELLS
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS, INDEXED_SLOT

// The lattice cell of a particle for the topology (SparseFlipGrid.topology_keys): ⌊(x − o)/h⌋,
// clamped into the box when closed; false for a position that is not finite.
__device__ __forceinline__ bool topology_cell(const float* __restrict__ pos, long long p, float ox, float oy,
                                             float oz, float inv_h, int closed, int nx, int ny, int nz,
                                             long long c[3])
{
    const float g[3] = {(pos[3 * p] - ox) * inv_h, (pos[3 * p + 1] - oy) * inv_h, (pos[3 * p + 2] - oz) * inv_h};
    if (!(isfinite(g[0]) && isfinite(g[1]) && isfinite(g[2]))) return false;
    const int n[3] = {nx, ny, nz};
    for (int a = 0; a < 3; ++a) {
        c[a] = (long long)floorf(g[a]);
        if (closed) c[a] = min(max(c[a], 0LL), (long long)(n[a] - 1));
    }
    return true;
}

// mark_occupied's work for particle p (its notes, flip_sparse_topology.cu): nothing for a position that
// is not finite; *missed + 1 where its cell has no brick; else its cell's flag 1 and, with speeds, its
// slot's largest |v|² bits (speeds 2: the warp's lanes of a slot grouped; 3: uniform warps first).
__device__ __forceinline__ void mark_particle(const float* __restrict__ pos, long long p, float ox, float oy,
                                              float oz, float inv_h, int closed, int nx, int ny, int nz,
                                              const long long* __restrict__ keys, const int* __restrict__ slots,
                                              long long n_keys, BRICK_INDEX_ARGS,
                                              unsigned char* __restrict__ occupied,
                                              unsigned long long* __restrict__ missed,
                                              const float* __restrict__ vel, unsigned int* __restrict__ speed2,
                                              int speeds)
{
    long long c[3];
    if (!topology_cell(pos, p, ox, oy, oz, inv_h, closed, nx, ny, nz, c)) return;
    const int s = INDEXED_SLOT(c[0] >> 3, c[1] >> 3, c[2] >> 3);
    if (s < 0) {
        atomicAdd(missed, 1ULL);
        return;
    }
    occupied[(long long)s * SPARSE_CELLS + sparse_local(c[0], c[1], c[2])] = 1;
    if (speeds) {
        const float vx = vel[3 * p], vy = vel[3 * p + 1], vz = vel[3 * p + 2];
        const unsigned int bits = __float_as_uint(vx * vx + vy * vy + vz * vz);
        if (speeds == 3) group_max_into_uniform(speed2 + s, bits, s);
        else group_max_into(speed2 + s, bits, s, speeds == 2);
    }
}
