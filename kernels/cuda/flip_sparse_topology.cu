// The sparse FLIP topology's update on the device (seed 003 §5.2; kernels/flip/sparse_gpu.py
// update_topology launches them; kernels/grid/sparse.py Topology.update is the reference):
// the new topology from the incremental pipeline's reached keys (reach_keys: a key per
// (slot, offset), −1 where not reached, repeats) and its per-slot `kept` marks
// (reach_compare), with one host read (how many bricks are added) instead of
// Topology.update's unique, look-ups, boolean selections and their host syncs.
//
//   sort the reached keys (CuPy: CUB radix sort; the −1s come first)
//   topology_heads   per sorted key: head (first of its run, not −1) | added (a head not in
//                    the current keys) << 32, then one inclusive scan: each head's place in
//                    the new keys and each added brick's rank, in key order
//   topology_free    per pool slot: free after the update (not in use, or in use and not
//                    kept) | freed (in use and not kept) << 32, then one inclusive scan
//   topology_pool    the free slots ascending (the pool Topology.update sorts) and the freed
//                    ones ascending
//   topology_place   the new keys and slots: a kept brick keeps its slot, the r-th added brick
//                    (key order) takes pool[r], past the pool the slots after the capacity
//
// The same keys, slots, capacity and free list as Topology.update (freed ascending: the
// reference lists them in key order; only the set is used).

#include "voxfx_sparse.cuh"  // keys, slots, binary search

#define LOW32(x) ((x) & 0xFFFFFFFFLL)

extern "C" __global__ void topology_heads(const long long* __restrict__ sorted, long long m,
                                          const long long* __restrict__ keys, const int* __restrict__ slots,
                                          long long n_keys, long long* __restrict__ marks)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const long long key = sorted[i];
    const bool head = key >= 0 && (i == 0 || sorted[i - 1] != key);
    const bool added = head && sparse_slot(keys, slots, n_keys, key) < 0;
    marks[i] = (long long)head | ((long long)added << 32);
}

extern "C" __global__ void topology_free(const unsigned char* __restrict__ used, const unsigned char* __restrict__ kept,
                                         long long capacity, long long* __restrict__ marks)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= capacity) return;
    const bool freed = used[s] && !kept[s];
    marks[s] = (long long)(!used[s] || freed) | ((long long)freed << 32);
}

// marks: topology_free's, scanned.
extern "C" __global__ void topology_pool(const long long* __restrict__ marks, long long capacity,
                                         int* __restrict__ pool, int* __restrict__ freed)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= capacity) return;
    const long long before = s ? marks[s - 1] : 0LL, here = marks[s];
    if (LOW32(here) != LOW32(before)) pool[LOW32(here) - 1] = (int)s;
    if ((here >> 32) != (before >> 32)) freed[(here >> 32) - 1] = (int)s;
}

// marks: topology_heads', scanned; pool: n_pool free slots ascending; slots past it start at
// `capacity`. fresh[r]: the r-th added brick's slot (Topology.update's `fresh`).
extern "C" __global__ void topology_place(const long long* __restrict__ sorted, long long m,
                                          const long long* __restrict__ marks, const long long* __restrict__ keys,
                                          const int* __restrict__ slots, long long n_keys,
                                          const int* __restrict__ pool, long long n_pool, long long capacity,
                                          long long* __restrict__ new_keys, int* __restrict__ new_slots,
                                          int* __restrict__ fresh)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const long long before = i ? marks[i - 1] : 0LL, here = marks[i];
    if (LOW32(here) == LOW32(before)) return;  // not a head
    const long long at = LOW32(here) - 1;
    new_keys[at] = sorted[i];
    if ((here >> 32) != (before >> 32)) {  // added
        const long long r = (here >> 32) - 1;
        const int s = r < n_pool ? pool[r] : (int)(capacity + (r - n_pool));
        new_slots[at] = s;
        fresh[r] = s;
    } else {
        new_slots[at] = sparse_slot(keys, slots, n_keys, sorted[i]);
    }
}
