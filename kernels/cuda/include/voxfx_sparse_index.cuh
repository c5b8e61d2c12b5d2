// A closed domain's dense brick index on the device (kernels/flip/sparse_gpu.py brick_index):
// the particle passes of flip_sparse_transfer.cu and the G2P of flip_sparse_g2p.cu find a
// point's brick with one load instead of a binary search.
#pragma once
#include "voxfx_sparse.cuh"

// A closed domain's brick index: table[(z·dy + y)·dx + x] = the slot of brick
// (lo + x, lo + y, lo + z) or −1, over the box's bricks and its wall ring (lo = −1,
// d = ⌊n/8⌋ + 2: cells −1 … n), so a point finds its brick with one load instead of a
// binary search; dims 0 (open domains, a temporary topology): no table. A brick outside
// the table is looked up by search, so the table only has to hold the bricks in its box.
#define BRICK_INDEX_ARGS                                                                                    \
    const int *__restrict__ index, int index_lx, int index_ly, int index_lz, int index_dx, int index_dy, \
        int index_dz

__device__ __forceinline__ int indexed_slot(const int* __restrict__ index, int lx, int ly, int lz, int dx, int dy,
                                            int dz, const long long* __restrict__ keys,
                                            const int* __restrict__ slots, long long n_keys, long long bx,
                                            long long by, long long bz)
{
    const long long x = bx - lx, y = by - ly, z = bz - lz;
    if (dx > 0 && x >= 0 && x < dx && y >= 0 && y < dy && z >= 0 && z < dz) return index[(z * dy + y) * dx + x];
    return sparse_slot(keys, slots, n_keys, sparse_key_of_voxel(8 * bx, 8 * by, 8 * bz));
}

#define INDEXED_SLOT(bx, by, bz) \
    indexed_slot(index, index_lx, index_ly, index_lz, index_dx, index_dy, index_dz, keys, slots, n_keys, bx, by, bz)


// A brick the topology's reach marks over a closed domain's brick index (lowest brick l, dims d;
// flip_sparse_topology.cu's reach_compare_table, flip_sparse_reach.cu's reach_compare_classes): a
// brick with a slot marks it kept, one without claims its index entry (atomicExch: *added counts it
// once), one outside the index or past the key range counts in *beyond.
__device__ __forceinline__ void reach_mark_indexed(long long bx, long long by, long long bz,
                                                   const int* __restrict__ index, int lx, int ly, int lz, int dx,
                                                   int dy, int dz, unsigned char* __restrict__ kept,
                                                   unsigned int* __restrict__ claimed,
                                                   unsigned long long* __restrict__ added,
                                                   unsigned long long* __restrict__ beyond)
{
    const long long x = bx - lx, y = by - ly, z = bz - lz;
    if (sparse_key_of_voxel(8 * bx, 8 * by, 8 * bz) < 0 || x < 0 || x >= dx || y < 0 || y >= dy || z < 0 ||
        z >= dz) {
        atomicAdd(beyond, 1ULL);
        return;
    }
    const long long at = (z * dy + y) * dx + x;
    const int s = index[at];
    if (s >= 0) kept[s] = 1;
    else if (atomicExch(claimed + at, 1u) == 0u) atomicAdd(added, 1ULL);
}
