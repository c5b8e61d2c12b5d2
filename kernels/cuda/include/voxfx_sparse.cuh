// The sparse brick core's keys and index on the device (kernels/grid/sparse.py holds the
// design note; the constants here are checked against it by tests/unit/test_cuda_sources.py).
#pragma once
#include "voxfx_search.cuh"

#define SPARSE_BRICK_LOG2 3
#define SPARSE_BRICK 8
#define SPARSE_KEY_BITS 21
#define SPARSE_OFFSET 1048576LL  // 2^(KEY_BITS - 1)

// Key of the brick holding lattice voxel (i, j, k): z-major, as brick_keys() in Python;
// -1 when the brick lies outside the key range.
__device__ __forceinline__ long long sparse_key_of_voxel(long long i, long long j, long long k)
{
    long long bx = (i >> SPARSE_BRICK_LOG2) + SPARSE_OFFSET;
    long long by = (j >> SPARSE_BRICK_LOG2) + SPARSE_OFFSET;
    long long bz = (k >> SPARSE_BRICK_LOG2) + SPARSE_OFFSET;
    const long long limit = 1LL << SPARSE_KEY_BITS;
    if (bx < 0 || by < 0 || bz < 0 || bx >= limit || by >= limit || bz >= limit) return -1;
    return (bz << (2 * SPARSE_KEY_BITS)) | (by << SPARSE_KEY_BITS) | bx;
}

// Pool slot of the brick with *key* among n sorted keys (slots[] in key order), -1 if absent.
__device__ __forceinline__ int sparse_slot(const long long* __restrict__ keys, const int* __restrict__ slots,
                                           long long n, long long key)
{
    if (key < 0 || n <= 0) return -1;
    long long at = lower_bound(keys, n, key);
    return (at < n && keys[at] == key) ? slots[at] : -1;
}

// Offset of voxel (i, j, k) inside its brick's 8^3 block (z y x order).
__device__ __forceinline__ int sparse_local(long long i, long long j, long long k)
{
    return (int)((((k & 7) << 6) | ((j & 7) << 3)) | (i & 7));
}
