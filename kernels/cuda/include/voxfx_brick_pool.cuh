// The sparse voxelizer's brick pool on the device (voxelize_sparse.cu's head gives the brick
// numbers and the 64-byte bit layout): the sorted candidate bricks and the look-up that ORs a
// set voxel into its brick, shared by the surface kernels of voxelize_sparse.cu (one thread a
// column) and voxelize_sparse_tiles.cu (one warp a tile).
#pragma once

#include "voxfx_search.cuh"  // lower_bound

// Sorted brick numbers, with the first index of each brick row (bz·nby + by) in row_start
// (nby·nbz + 1 entries): a brick is found by a short binary search inside its row.
struct BrickIndex {
    const long long* lin;
    const long long* row_start;
    long long nbx, nby;
    unsigned int* pool;           // 16 words per brick
    unsigned long long* missing;  // voxels whose brick is not listed (a bug: never expected)
    long long last_lin, last_slot;
};

// Slot of brick (bx, by, bz), or -1 where it is not listed: a search of its brick row.
__device__ __forceinline__ long long find_brick(const BrickIndex& ix, long long bx, long long by, long long bz)
{
    long long brow = bz * ix.nby + by, lin = brow * ix.nbx + bx;
    long long start = ix.row_start[brow], end = ix.row_start[brow + 1];
    long long at = start + lower_bound(ix.lin + start, end - start, lin);
    return (at < end && ix.lin[at] == lin) ? at : -1;
}

// Word and bit of voxel (i, j, k) inside its brick.
__device__ __forceinline__ unsigned int brick_word(long long j, long long k)
{
    return (unsigned int)((((k & 7) << 3) | (j & 7)) >> 2);
}

__device__ __forceinline__ unsigned int brick_bit(long long i, long long j)
{
    return 1u << ((((unsigned int)j & 3u) << 3) | (unsigned int)(i & 7));
}

__device__ __forceinline__ void set_voxel(BrickIndex& ix, long long i, long long j, long long k)
{
    long long lin = ((k >> 3) * ix.nby + (j >> 3)) * ix.nbx + (i >> 3);
    if (lin != ix.last_lin) {
        long long slot = find_brick(ix, i >> 3, j >> 3, k >> 3);
        if (slot < 0) {
            atomicAdd(ix.missing, 1ull);
            return;
        }
        ix.last_lin = lin;
        ix.last_slot = slot;
    }
    unsigned int bit = brick_bit(i, j);
    unsigned int* w = ix.pool + ix.last_slot * 16 + brick_word(j, k);
    if (!(*w & bit)) atomicOr(w, bit);
}
