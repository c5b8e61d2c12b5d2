// The fused table update of the sparse FLIP topology (seed 003 §5.2; kernels/flip/sparse_topology_gpu.py
// launch_fused_update launches these kernels, with flip_sparse_topology.cu's options; Topology.update is
// the reference). flip_sparse_topology.cu holds the marking pipeline and the other updates; its
// reach_compare_table and count_unkept fill the flags, kept and claimed read here.
//
// The fused table update (`sparse_topology_gpu.update_topology_fused`, VOXFX_SPARSE_TOPOLOGY_UPDATE=
// fused): the table update's marks and places (flip_sparse_topology.cu) in three launches queued
// before the pipeline's one host read, with no size from the host: every output has room for the
// most it can hold (keys, slots, fresh, index: one an index entry; pool, freed: one a slot; the new
// `used`: a slot past the capacity for every entry), the pool's size comes from the flags on the
// device, and the host slices the outputs once it has read the flags. Each launch skips itself
// when the flags say no update (missed, beyond, or nothing added or freed). A block takes a tile
// of UPDATE_ITEMS items a thread (contiguous), blocks [0, pool_tiles) the pool's slots and the
// rest the index's entries:
//
//   topology_fused_counts   each tile's free and freed slots, or kept and added entries
//   topology_fused_pool     each slot tile's offset (the sums of the tiles before it), the
//                           free slots ascending (pool) and the freed ones, the kept slots' used,
//                           the slots' refill marks (freed)
//   topology_fused_place    each entry tile's offset, the new keys and slots (a kept brick keeps
//                           its slot, the r-th added takes pool[r], past the pool the slots after
//                           the capacity), fresh, the new brick index (the next topology's
//                           brick_index, no rebuild) and the added slots' used and refill marks
//
// refill (a byte a slot of the new pool): 1 where the slot is freed or added (a freed slot reused is
// both), 0 elsewhere: the slots retopologize fills with each kept channel's background, which
// topology_cell_tables fills with the tables (sparse_topology_tables.py, VOXFX_SPARSE_TOPOLOGY_FILL).

#include "voxfx_sparse.cuh"  // sparse_key_of_voxel: the new keys
#include "voxfx_bin.cuh"  // bin_block_inclusive: the block scans

#define UPDATE_ITEMS 8  // items a thread, contiguous: a block's tile is UPDATE_ITEMS · blockDim.x

// No update to write: a particle missed the topology, a brick lies beyond the index, or the
// bricks are the same (flags: missed, beyond, added, freed).
__device__ __forceinline__ bool update_skipped(const unsigned long long* __restrict__ flags)
{
    return flags[0] != 0ULL || flags[1] != 0ULL || (flags[2] == 0ULL && flags[3] == 0ULL);
}

// The first item of this thread's run in tile `tile` (of n items), and its end.
__device__ __forceinline__ long long tile_run(long long tile, long long n, long long& end)
{
    const long long first = min((tile * blockDim.x + threadIdx.x) * UPDATE_ITEMS, n);
    end = min(first + UPDATE_ITEMS, n);
    return first;
}

// Slot s after the update: free (not in use, or in use and not kept), freed (in use, not kept).
__device__ __forceinline__ void slot_marks(const unsigned char* __restrict__ used,
                                           const unsigned char* __restrict__ kept, long long s, int& free, int& freed)
{
    freed = used[s] && !kept[s];
    free = !used[s] || freed;
}

// Index entry `at` after the update: in the new topology (a slot kept, or claimed) and added.
__device__ __forceinline__ void entry_marks(const int* __restrict__ index, const unsigned char* __restrict__ kept,
                                            const unsigned int* __restrict__ claimed, long long at, int& in,
                                            int& added)
{
    const int s = index[at];
    added = s < 0 && claimed[at] != 0u;
    in = s >= 0 ? kept[s] != 0 : added;
}

// Σ totals[0..tile) over the block (every thread gets it): the tile's offset.
__device__ __forceinline__ int tiles_before(const int* __restrict__ totals, long long tile)
{
    int part = 0, total;
    for (long long i = threadIdx.x; i < tile; i += blockDim.x) part += totals[i];
    bin_block_inclusive(part, total);
    return total;
}

// totals[b]: block b's tile's free slots | freed slots (b < pool_tiles) or entries in the new
// topology | added (after it), as two ints (totals, totals + tiles). With `freed` (the merged
// pipeline, sparse_topology_gpu: no count_unkept launch; else null): the flags' freed count is
// made here, each slot tile adding its freed slots to *freed (flags[3], zero before), so only a
// missed particle or a brick beyond skips the counts (the freed count is not known yet).
extern "C" __global__ void topology_fused_counts(const unsigned long long* __restrict__ flags,
                                                 const unsigned char* __restrict__ used,
                                                 const unsigned char* __restrict__ kept, long long capacity,
                                                 const int* __restrict__ index, const unsigned int* __restrict__ claimed,
                                                 long long entries, long long pool_tiles, long long tiles,
                                                 int* __restrict__ totals, unsigned long long* freed)
{
    if (freed ? flags[0] != 0ULL || flags[1] != 0ULL : update_skipped(flags)) return;
    const long long b = blockIdx.x;
    const bool pool = b < pool_tiles;
    long long end;
    const long long first = tile_run(pool ? b : b - pool_tiles, pool ? capacity : entries, end);
    int a = 0, c = 0;
    for (long long i = first; i < end; ++i) {
        int x, y;
        if (pool) slot_marks(used, kept, i, x, y);
        else entry_marks(index, kept, claimed, i, x, y);
        a += x;
        c += y;
    }
    int sum_a, sum_c;
    bin_block_inclusive(a, sum_a);
    bin_block_inclusive(c, sum_c);
    if (threadIdx.x == 0) {
        totals[b] = sum_a;
        totals[tiles + b] = sum_c;
        if (freed && pool && sum_c) atomicAdd(freed, (unsigned long long)sum_c);
    }
}

// The pool (free slots ascending), the freed slots ascending, and new_used (used and kept) and
// refill (freed) of the slots below the capacity; totals: topology_fused_counts' (the slot tiles first).
extern "C" __global__ void topology_fused_pool(const unsigned long long* __restrict__ flags,
                                               const unsigned char* __restrict__ used,
                                               const unsigned char* __restrict__ kept, long long capacity,
                                               const int* __restrict__ totals, long long tiles,
                                               int* __restrict__ pool, int* __restrict__ freed,
                                               unsigned char* __restrict__ new_used, unsigned char* __restrict__ refill)
{
    if (update_skipped(flags)) return;
    const long long b = blockIdx.x;
    int at_free = tiles_before(totals, b), at_freed = tiles_before(totals + tiles, b);
    long long end;
    const long long first = tile_run(b, capacity, end);
    int a = 0, c = 0;
    for (long long s = first; s < end; ++s) {
        int x, y;
        slot_marks(used, kept, s, x, y);
        a += x;
        c += y;
    }
    int total;
    at_free += bin_block_inclusive(a, total) - a;
    at_freed += bin_block_inclusive(c, total) - c;
    for (long long s = first; s < end; ++s) {
        int x, y;
        slot_marks(used, kept, s, x, y);
        if (x) pool[at_free++] = (int)s;
        if (y) freed[at_freed++] = (int)s;
        new_used[s] = used[s] && kept[s];
        refill[s] = (unsigned char)y;
    }
}

// The new keys and slots in key order (the index's order), fresh (the r-th added brick's slot),
// the new brick index (its slot, −1 elsewhere) and new_used and refill of the added slots. n_keys: the
// current topology's count; the pool holds capacity − n_keys + freed slots (flags[3]).
extern "C" __global__ void topology_fused_place(const unsigned long long* __restrict__ flags,
                                                const int* __restrict__ index, int lx, int ly, int lz, int dx,
                                                int dy, int dz, const unsigned char* __restrict__ kept,
                                                const unsigned int* __restrict__ claimed, long long capacity,
                                                long long n_keys, const int* __restrict__ totals,
                                                long long pool_tiles, long long tiles, const int* __restrict__ pool,
                                                long long* __restrict__ new_keys, int* __restrict__ new_slots,
                                                int* __restrict__ fresh, int* __restrict__ new_index,
                                                unsigned char* __restrict__ new_used, unsigned char* __restrict__ refill)
{
    if (update_skipped(flags)) return;
    const long long entries = (long long)dx * dy * dz, b = blockIdx.x, n_pool = capacity - n_keys + (long long)flags[3];
    int to = tiles_before(totals + pool_tiles, b), rank = tiles_before(totals + tiles + pool_tiles, b);
    long long end;
    const long long first = tile_run(b, entries, end);
    int a = 0, c = 0;
    for (long long at = first; at < end; ++at) {
        int x, y;
        entry_marks(index, kept, claimed, at, x, y);
        a += x;
        c += y;
    }
    int total;
    to += bin_block_inclusive(a, total) - a;
    rank += bin_block_inclusive(c, total) - c;
    for (long long at = first; at < end; ++at) {
        int in, added;
        entry_marks(index, kept, claimed, at, in, added);
        if (!in) {
            new_index[at] = -1;
            continue;
        }
        const long long x = at % dx, y = (at / dx) % dy, z = at / ((long long)dx * dy);
        int s = index[at];
        if (added) {
            const long long r = rank++;
            s = r < n_pool ? pool[r] : (int)(capacity + (r - n_pool));
            fresh[r] = s;
            new_used[s] = 1;
            refill[s] = 1;
        }
        new_keys[to] = sparse_key_of_voxel(8 * (x + lx), 8 * (y + ly), 8 * (z + lz));
        new_slots[to++] = s;
        new_index[at] = s;
    }
}
