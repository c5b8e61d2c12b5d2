// The sparse FLIP topology on the device (seed 003 §5.1–5.2; kernels/flip/sparse_topology_gpu.py
// launches these kernels; kernels/flip/sparse_grid.py topology_keys and kernels/grid/sparse.py
// Topology.update are the reference; compiled with --fmad=false, as the |v|² of the per-brick
// margins must round as NumPy's). First the marking pipeline: the bricks the particles' boxes
// reach (particle_brick_keys, mark_occupied, slot_margins, brick_reach, reach_keys,
// reach_compare, count_unkept); then the update of the topology to them.
//
// The update (sparse_topology_gpu.update_topology; Topology.update is the reference):
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
// The table update (a closed domain with a brick index, `sparse_topology_gpu.update_topology_table`):
// no key list, no sort and no host read of its own. The index's order (z, y, x) is the keys'
// order (key = bz·2^2B + by·2^B + bx), so a scan over the index lists the new keys ascending.
//
//   reach_compare_table  reach_compare (above) over the index: a reached
//                        brick with a slot marks it kept; one without claims its index entry
//                        (atomicExch), so *added counts each added brick once: the flags the
//                        incremental pipeline reads anyway hold the new sizes
//   topology_table_marks per index entry: in the new topology (kept, or claimed) | added << 32,
//                        then one inclusive scan
//   topology_free, topology_pool as above; topology_table_place as topology_place
//
// The fused table update (`sparse_topology_gpu.update_topology_fused`, the default) is
// flip_sparse_topology_fused.cu's: the table update's marks and places in three launches.

#include "voxfx_sparse.cuh"  // keys, slots, binary search
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS, INDEXED_SLOT: a closed domain's brick index
#include "voxfx_reduce.cuh"  // group_max_into: the per-slot speed maxima
#include "voxfx_sparse_marks.cuh"  // sparse_store_wall_marks: topology_cell_tables' marks
#include "voxfx_slot_margin.cuh"  // slot_margins' arithmetic (reach_slots' too)
#include "voxfx_join.cuh"  // topology_cell_tables' fills of the kept channels
#include "voxfx_topology_tables.cuh"  // the tables' per-thread work (the ahead kernels' too)
#include "voxfx_topology_mark.cuh"  // topology_cell, mark_particle: mark_occupied's work (the G2P marks' too)

// ------------------------------------------------------------------------------ topology (§5.1–5.2)

// A full build (§5.1) starts from the bricks that hold particles: each particle's brick key
// (its topology_cell's), −1 where not finite; a brick beyond the key range counts in
// *beyond. Their sorted unique keys are the topology that mark_occupied then marks.
extern "C" __global__ void particle_brick_keys(const float* __restrict__ pos, long long n, float ox, float oy,
                                               float oz, float inv_h, int closed, int nx, int ny, int nz,
                                               long long* __restrict__ keys, unsigned long long* __restrict__ beyond)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    long long c[3], key = -1;
    if (topology_cell(pos, p, ox, oy, oz, inv_h, closed, nx, ny, nz, c)) {
        key = sparse_key_of_voxel(c[0], c[1], c[2]);
        if (key < 0) atomicAdd(beyond, 1ULL);
    }
    keys[p] = key;
}

// Incremental topology, step 1 (§5.2): every particle marks its cell in the current
// topology (plain stores of 1: no race on the result). A particle whose cell has no brick
// there counts in *missed* (the caller then builds from scratch). Zero `occupied` first.
// With `speeds` (per-brick margins, sparse_grid.BrickReach): speed2[slot] ← the largest |v|²
// of its particles, (vx·vx + vy·vy) + vz·vz in float32 as NumPy sums it, as float bits by
// integer atomicMax (|v|² ≥ 0: the bits' integer order is the floats' order; a NaN's bits
// sort above +inf and make the margin past any radius). The plain read first skips the
// atomic once a faster particle holds the slot. speeds = 2 (sm_80+; sparse_topology_gpu.
// SPEED_MAXIMA "warp"; voxfx_reduce.cuh group_max_into): the lanes of a warp on one slot take
// their max and one atomic adds it — the particles keep their seeding's spatial
// order, so a warp's 32 lanes mostly share a brick and would otherwise queue 32 atomics on
// one address (H200, 8M: the plain atomics made the update 0.37 ms slower a substep).
// speeds = 3 ("uniform", group_max_into_uniform): a warp whose lanes share one slot skips the
// __match_any_sync (the same maxima; H100, 8M: no faster, 141.8 / 131.5 against 135.1 / 137.8 µs,
// so "warp" stays the default). Zero speed2 first.
extern "C" __global__ void mark_occupied(const float* __restrict__ pos, long long n, float ox, float oy, float oz,
                                         float inv_h, int closed, int nx, int ny, int nz,
                                         const long long* __restrict__ keys, const int* __restrict__ slots,
                                         long long n_keys, BRICK_INDEX_ARGS, unsigned char* __restrict__ occupied,
                                         unsigned long long* __restrict__ missed, const float* __restrict__ vel,
                                         unsigned int* __restrict__ speed2, int speeds)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    mark_particle(pos, p, ox, oy, oz, inv_h, closed, nx, ny, nz, keys, slots, n_keys, index, index_lx, index_ly,
                  index_lz, index_dx, index_dy, index_dz, occupied, missed, vel, speed2, speeds);
}

// Step 1b, one thread per pool slot: its margin (sparse_grid.BrickReach.margins, the same
// float64 arithmetic) from the largest |v|² of the 27 bricks around it (nbr27; itself
// included), base + ⌈(s + |g|·dt)·dt/h⌉ with s = √(that |v|²) rounded to float32 as
// NumPy's sqrt does, then widened. A margin past 2^20 (or not finite) is written as 2^30:
// brick_reach then reports it beyond its radius. With `most` (else null): *most ← the largest
// |v|² bits of all (the fastest brick's margin is the global one: sparse_topology_gpu's device
// margin learns it with the pipeline's one host read; plain read first, then atomicMax).
extern "C" __global__ void slot_margins(const unsigned int* __restrict__ speed2, const unsigned char* __restrict__ used,
                                        const int* __restrict__ nbr27, long long capacity, double dt, double gdt,
                                        double h, int base, int* __restrict__ margins,
                                        unsigned long long* __restrict__ most)
{
    const long long slot = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (slot >= capacity) return;
    const unsigned int bits = slot_speed_bits(speed2, used, nbr27, slot);
    if (most && bits > *most) atomicMax(most, (unsigned long long)bits);
    margins[slot] = slot_margin_of_bits(bits, dt, gdt, h, base);
}

// Brick offsets within `radius` bricks (R = 1: the 27 around a brick; R = 2: 125, for a
// margin of 9–16 cells; … R = 8: 4,913, up to 64 cells, sparse_topology_gpu.MAX_MARGIN):
// offset (dx, dy, dz) ∈ [−R, R]³ has index ((dz + R)·(2R + 1) + dy + R)·(2R + 1) + dx + R
// (R = 1: sparse_offset_index), and a slot's mask is reach_words(R) words.
__device__ __forceinline__ int reach_side(int radius) { return 2 * radius + 1; }
__device__ __forceinline__ int reach_offsets(int radius) { return reach_side(radius) * reach_side(radius) * reach_side(radius); }
__device__ __forceinline__ int reach_words(int radius) { return (reach_offsets(radius) + 31) >> 5; }

// The lowest and highest set bit of x ≠ 0 (the host harnesses build this file as host code).
__device__ __forceinline__ int reach_low_bit(unsigned int x)
{
#ifdef __CUDA_ARCH__
    return __ffs(x) - 1;
#else
    return __builtin_ctz(x);
#endif
}
__device__ __forceinline__ int reach_high_bit(unsigned int x)
{
#ifdef __CUDA_ARCH__
    return 31 - __clz(x);
#else
    return 31 - __builtin_clz(x);
#endif
}

// Bits (off + R) of the brick offsets off ∈ [−R, R] that the box c ± margin of lattice cell
// c = 8·b + l reaches along one axis (closed: clipped to [−1, n], the box and its wall ring).
// margin ≤ 8·R, so the box never reaches more than R bricks away; the bits are one run
// holding bit R (the box holds c, in brick b).
__device__ __forceinline__ unsigned int axis_reach(long long b, int l, int margin, int closed, int n, int radius)
{
    const long long c = 8 * b + l;
    long long lo = c - margin, hi = c + margin;
    if (closed) {
        lo = max(lo, -1LL);
        hi = min(hi, (long long)n);
    }
    const int first = (int)((lo >> 3) - b) + radius, last = (int)((hi >> 3) - b) + radius;
    return (last >= 31 ? 0xFFFFFFFFu : (1u << (last + 1)) - 1u) & ~((1u << first) - 1u);
}

// Step 2, one thread per (pool slot, row (y, z) of its cells): mask bit o of the slot's
// reach_words(R) words set where some occupied cell's box (cell ± the slot's margin) reaches
// the brick at offset o — the union over cells of products of per-axis runs: the row's
// x-runs merge into one run (each holds bit R), so for every set bit of the z and y runs the
// reached offsets are one run of ≤ 2R + 1 ≤ 17 bits, at most two words. Those are OR-ed into a
// word held in a register, flushed by an integer atomicOr when the word changes (the offsets
// only grow along the walk): no per-radius register array, any radius up to 8 (the mask
// words of R = 8 are 154). A margin past 8·R (the caller's radius is too small: sparse_
// topology_gpu then builds on the array path) counts in *beyond. Zero mask first.
extern "C" __global__ void brick_reach(const unsigned char* __restrict__ occupied,
                                       const unsigned char* __restrict__ used,
                                       const int* __restrict__ coords, long long capacity,
                                       const int* __restrict__ margins, int closed, int nx, int ny, int nz,
                                       int radius, unsigned int* __restrict__ mask,
                                       unsigned long long* __restrict__ beyond)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 64 * capacity) return;
    const long long slot = t >> 6;
    const int row = (int)(t & 63);
    if (!used[slot]) return;
    const unsigned long long bytes = reinterpret_cast<const unsigned long long*>(occupied + slot * SPARSE_CELLS)[row];
    if (!bytes) return;
    const int margin = margins[slot];
    if (margin < 0 || margin > 8 * radius) {
        atomicAdd(beyond, 1ULL);
        return;
    }
    const long long b[3] = {coords[3 * slot], coords[3 * slot + 1], coords[3 * slot + 2]};
    unsigned int rx = 0;
    for (int lx = 0; lx < 8; ++lx)
        if ((bytes >> (8 * lx)) & 0xFFull) rx |= axis_reach(b[0], lx, margin, closed, nx, radius);
    const unsigned int ry = axis_reach(b[1], row & 7, margin, closed, ny, radius);
    const unsigned int rz = axis_reach(b[2], row >> 3, margin, closed, nz, radius);
    const int side = reach_side(radius), x0 = reach_low_bit(rx), run = reach_high_bit(rx) - x0 + 1;
    unsigned int* const out = mask + slot * reach_words(radius);
    int word = -1;
    unsigned int held = 0u;
    for (unsigned int zs = rz; zs; zs &= zs - 1u)
        for (unsigned int ys = ry; ys; ys &= ys - 1u) {
            const int o = (reach_low_bit(zs) * side + reach_low_bit(ys)) * side + x0;  // offsets o … o + run − 1
            for (int at = o, left = run; left > 0;) {
                const int w = at >> 5, bit = at & 31, take = min(left, 32 - bit);
                const unsigned int piece = (take == 32 ? 0xFFFFFFFFu : (1u << take) - 1u) << bit;
                if (w != word) {
                    if (held) atomicOr(out + word, held);
                    word = w;
                    held = 0u;
                }
                held |= piece;
                at += take;
                left -= take;
            }
        }
    if (held) atomicOr(out + word, held);
}

// The brick at offset o of `slot` for R = radius, and whether the slot's mask reaches it.
__device__ __forceinline__ bool reached_brick(const unsigned int* __restrict__ mask, const int* __restrict__ coords,
                                              long long slot, int o, int radius, long long b[3])
{
    const int side = reach_side(radius);
    if (!((mask[slot * reach_words(radius) + (o >> 5)] >> (o & 31)) & 1u)) return false;
    b[0] = (long long)coords[3 * slot] + o % side - radius;
    b[1] = (long long)coords[3 * slot + 1] + (o / side) % side - radius;
    b[2] = (long long)coords[3 * slot + 2] + o / (side * side) - radius;
    return true;
}

// Step 3, one thread per (slot, offset): the key of each reached brick, −1 elsewhere; a
// brick beyond the key range sets *beyond (the caller's array path reports it).
extern "C" __global__ void reach_keys(const unsigned int* __restrict__ mask, const int* __restrict__ coords,
                                      long long capacity, int radius, long long* __restrict__ out,
                                      unsigned long long* __restrict__ beyond)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int offsets = reach_offsets(radius);
    if (t >= offsets * capacity) return;
    const long long slot = t / offsets;
    long long key = -1, b[3];
    if (reached_brick(mask, coords, slot, (int)(t - offsets * slot), radius, b)) {
        key = sparse_key_of_voxel(8 * b[0], 8 * b[1], 8 * b[2]);
        if (key < 0) atomicAdd(beyond, 1ULL);
    }
    out[t] = key;
}

// Step 4, against the current topology, straight from the masks (no key list written):
// one thread per (slot, offset); each reached brick that is active marks its slot kept,
// *added counts those that are not, *beyond those past the key range; then count_unkept.
// All zero: no brick changes (reach_keys then lists the keys only when they do).
extern "C" __global__ void reach_compare(const unsigned int* __restrict__ mask, const int* __restrict__ coords,
                                         long long capacity, int radius, const long long* __restrict__ keys,
                                         const int* __restrict__ slots, long long n_keys, BRICK_INDEX_ARGS,
                                         unsigned char* __restrict__ kept, unsigned long long* __restrict__ added,
                                         unsigned long long* __restrict__ beyond)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int offsets = reach_offsets(radius);
    if (t >= offsets * capacity) return;
    const long long slot = t / offsets;
    long long b[3];
    if (!reached_brick(mask, coords, slot, (int)(t - offsets * slot), radius, b)) return;
    if (sparse_key_of_voxel(8 * b[0], 8 * b[1], 8 * b[2]) < 0) {
        atomicAdd(beyond, 1ULL);
        return;
    }
    const int s = INDEXED_SLOT(b[0], b[1], b[2]);
    if (s < 0) atomicAdd(added, 1ULL);
    else kept[s] = 1;
}

// *freed += the active slots that no reached brick kept.
extern "C" __global__ void count_unkept(const unsigned char* __restrict__ used, const unsigned char* __restrict__ kept,
                                        long long capacity, unsigned long long* __restrict__ freed)
{
    const long long slot = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (slot < capacity && used[slot] && !kept[slot]) atomicAdd(freed, 1ULL);
}

// ------------------------------------------------------------------------------ the update (§5.2)

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
    reach_mark_indexed(bx, by, bz, index, lx, ly, lz, dx, dy, dz, kept, claimed, added, beyond);
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

// ------------------------------------------------------------------------------ the tables after an update

// The fused tables (`sparse_topology_tables.fused_tables`, VOXFX_SPARSE_TOPOLOGY_TABLES=fused): the
// new topology's slot tables, then its cell neighbours and marks, in two launches with no
// memset (sparse.cu's brick_tables and cell_neighbours, flip_sparse_transfer.cu's mark_walls
// and the zeroed solid faces of SparseFlipGrid._solid_faces: the same values).
//
// Slot tables: threads [0, 27·n) as brick_tables (key q's slot gets its coordinates and the
// slots of its 27 neighbours, found in the new topology's brick index, by search outside it),
// threads [27·n, 27·(n + capacity)) write a free slot's row (coordinates 0, neighbours −1):
// every entry once, so the tables need no fill first. used: the new topology's slots.
extern "C" __global__ void topology_slot_tables(const long long* __restrict__ keys, const int* __restrict__ slots,
                                                long long n_keys, BRICK_INDEX_ARGS,
                                                const unsigned char* __restrict__ used, long long capacity,
                                                int* __restrict__ coords, int* __restrict__ nbr27)
{
    topology_slot_table_entry(keys, slots, n_keys, index, index_lx, index_ly, index_lz, index_dx, index_dy, index_dz,
                              used, capacity, coords, nbr27);
}

// One thread per pool cell: its six face neighbours (grid.nbr, cell_neighbours') and, with
// `marks`, its marks (mark_walls') with solid = wall and the solid faces 0 (a grid without
// obstacles). With `refill` (the fused update's refill marks, a byte a slot; else null): the n kept
// channels c_i (include/voxfx_join.cuh) ← their backgrounds' bits v_i in the cells of the marked
// slots (retopologize's fill of the added and freed slots, sparse_topology_tables.fills_with_tables).
extern "C" __global__ void topology_cell_tables(const int* __restrict__ nbr27, const unsigned char* __restrict__ used,
                                                const int* __restrict__ coords, long long cells, int closed, int nx,
                                                int ny, int nz, int* __restrict__ nbr, int marks,
                                                unsigned char* __restrict__ exists_u,
                                                unsigned char* __restrict__ exists_v,
                                                unsigned char* __restrict__ exists_w, unsigned char* __restrict__ wall,
                                                unsigned char* __restrict__ solid, float* __restrict__ solid_u,
                                                float* __restrict__ solid_v, float* __restrict__ solid_w,
                                                const unsigned char* __restrict__ refill, int n, int bytes,
                                                JOIN_POINTERS(c, void*), JOIN_POINTERS(v, unsigned int))
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    for (int d = 0; d < 6; ++d) nbr[d * cells + t] = sparse_cell_step(nbr27, (int)t, d);
    if (refill && refill[t >> 9]) {
        void* const c[JOIN_CHANNELS] = JOIN_LIST(c);
        const unsigned int v[JOIN_CHANNELS] = JOIN_LIST(v);
        join_store(c, v, n, bytes, t);
    }
    if (marks) topology_cell_marks(used, coords, t, closed, nx, ny, nz, exists_u, exists_v, exists_w, wall, solid,
                                   solid_u, solid_v, solid_w);
}
