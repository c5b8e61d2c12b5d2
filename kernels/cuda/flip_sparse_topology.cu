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
//
// The table update (a closed domain with a brick index, `sparse_gpu.update_topology_table`):
// no key list, no sort and no host read of its own. The index's order (z, y, x) is the keys'
// order (key = bz·2^2B + by·2^B + bx), so a scan over the index lists the new keys ascending.
//
//   reach_compare_table  reach_compare (flip_sparse_transfer.cu) over the index: a reached
//                        brick with a slot marks it kept; one without claims its index entry
//                        (atomicExch), so *added counts each added brick once: the flags the
//                        incremental pipeline reads anyway hold the new sizes
//   topology_table_marks per index entry: in the new topology (kept, or claimed) | added << 32,
//                        then one inclusive scan
//   topology_free, topology_pool as above; topology_table_place as topology_place

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

// ------------------------------------------------------------------------------ the table update

// One thread per (slot, offset o of the radius-R masks, R = radius): as reach_compare, over a
// closed domain's brick index (dims d, lowest brick l) only: a reached brick outside it (or
// past the key range) counts in *beyond (the caller builds on the array path). claimed: the
// index's size in words, zeroed first.
extern "C" __global__ void reach_compare_table(const unsigned int* __restrict__ mask, const int* __restrict__ coords,
                                               long long capacity, int radius, const int* __restrict__ index,
                                               int lx, int ly, int lz, int dx, int dy, int dz,
                                               unsigned char* __restrict__ kept, unsigned int* __restrict__ claimed,
                                               unsigned long long* __restrict__ added,
                                               unsigned long long* __restrict__ beyond)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int side = 2 * radius + 1, offsets = side * side * side, words = (offsets + 31) >> 5;
    if (t >= offsets * capacity) return;
    const long long slot = t / offsets;
    const int o = (int)(t - offsets * slot);
    if (!((mask[slot * words + (o >> 5)] >> (o & 31)) & 1u)) return;
    const long long bx = (long long)coords[3 * slot] + o % side - radius,
                    by = (long long)coords[3 * slot + 1] + (o / side) % side - radius,
                    bz = (long long)coords[3 * slot + 2] + o / (side * side) - radius;
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

// Per index entry: in the new topology (a brick with a slot that was kept, or one claimed)
// | added (claimed) << 32; then one inclusive scan.
extern "C" __global__ void topology_table_marks(const int* __restrict__ index, long long entries,
                                                const unsigned char* __restrict__ kept,
                                                const unsigned int* __restrict__ claimed, long long* __restrict__ marks)
{
    const long long at = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= entries) return;
    const int s = index[at];
    const bool added = s < 0 && claimed[at];
    marks[at] = (long long)(s >= 0 ? kept[s] != 0 : added) | ((long long)added << 32);
}

// marks: topology_table_marks', scanned; pool, capacity, fresh as topology_place. A kept brick
// keeps its slot, the r-th added brick (key order) takes pool[r].
extern "C" __global__ void topology_table_place(const long long* __restrict__ marks, const int* __restrict__ index,
                                                int lx, int ly, int lz, int dx, int dy, int dz,
                                                const int* __restrict__ pool, long long n_pool, long long capacity,
                                                long long* __restrict__ new_keys, int* __restrict__ new_slots,
                                                int* __restrict__ fresh)
{
    const long long at = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (long long)dx * dy * dz) return;
    const long long before = at ? marks[at - 1] : 0LL, here = marks[at];
    if (LOW32(here) == LOW32(before)) return;  // not in the new topology
    const long long to = LOW32(here) - 1;
    const long long x = at % dx, y = (at / dx) % dy, z = at / ((long long)dx * dy);
    new_keys[to] = sparse_key_of_voxel(8 * (x + lx), 8 * (y + ly), 8 * (z + lz));
    if ((here >> 32) != (before >> 32)) {
        const long long r = (here >> 32) - 1;
        const int s = r < n_pool ? pool[r] : (int)(capacity + (r - n_pool));
        new_slots[to] = s;
        fresh[r] = s;
    } else {
        new_slots[to] = index[at];
    }
}
