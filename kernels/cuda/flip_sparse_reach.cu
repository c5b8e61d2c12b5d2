// The sparse FLIP topology's reach by classes (seed 003 §5.2; kernels/flip/sparse_topology_gpu.py
// `_reach` launches these where VOXFX_SPARSE_REACH picks them; SparseFlipGrid.topology_keys is the
// reference, flip_sparse_topology.cu's brick_reach + reach_compare_table the masks' way): which
// bricks the occupied cells' boxes (cell ± the brick's margin) reach, for margins of any size, with
// 27 bits a brick instead of a mask of (2R + 1)³ bits (154 words at R = 8, 1,123 at R = 16).
//
// Along one axis a margin m = 8q + r (0 ≤ r < 8) takes the cell of local coordinate l ∈ [0, 8) of
// brick b to the bricks b + [−q − (l < r), q + (l + r ≥ 8)] (brick_reach's axis_reach, unclipped):
// every cell reaches the core [−q, q]; the low brick −q − 1 only from l < r, the high brick q + 1
// only from l ≥ 8 − r. A cell's box is the product of its three axes' runs, so the bricks a brick
// reaches are the union, over the products of classes {core, low, high}³ that some occupied cell
// has, of the products of the classes' offsets: 27 bits a brick (bit (cz·3 + cy)·3 + cx, class 0
// core, 1 low, 2 high) hold it exactly. A closed domain clips every box to [−1, n] cells: the
// brick offsets to [−1 − b, ⌊n/8⌋ − b] (⌊max(c − m, −1)/8⌋ = max(⌊(c − m)/8⌋, −1), likewise above), the
// same for every cell of the brick, so the clip is applied to the union.
//
//   reach_classes          one thread per (slot, row of its cells), as brick_reach: the row's class
//                          products OR-ed into the slot's word (one atomicOr a row that adds bits)
//   reach_compare_classes  REACH_LANES threads a slot walk the slot's own (2q + 3)³ offsets (clipped),
//                          a reached brick with a slot marks it kept, one without claims its index
//                          entry (reach_compare_table's, the same kept, claimed and added)
//   reach_slots            slot_margins, reach_classes and reach_compare_classes in one launch (the
//                          merged pipeline: a slot's margin, word and walk need only its own cells and
//                          its neighbours' speeds; below)
//
// So the work is the bricks each slot's own margin reaches (no global radius, no mask memory) and
// the table update after is unchanged.
#include "voxfx_sparse_index.cuh"  // SPARSE_CELLS, reach_mark_indexed
#include "voxfx_slot_margin.cuh"  // reach_slots: slot_margins' arithmetic
#include "voxfx_reduce.cuh"  // warp_all_or: reach_slots' class word

#ifndef REACH_LANES
#define REACH_LANES 128  // sparse_topology_gpu.REACH_LANES: threads a slot in reach_compare_classes
#endif

// Class bits along one axis of cells at the local coordinates `locals` (bit l: some occupied cell
// has l) for a margin with remainder r = m mod 8: 1 core, 2 low (some l < r), 4 high (some l ≥ 8 − r).
__device__ __forceinline__ unsigned int reach_axis_classes(unsigned int locals, int r)
{
    if (!locals) return 0u;
    unsigned int c = 1u;
    if (locals & ((1u << r) - 1u)) c |= 2u;
    if (r && (locals >> (8 - r))) c |= 4u;
    return c;
}

// The class products of one row (y, z) = (row & 7, row >> 3) of a slot's cells, `bytes` its eight
// occupied bytes, for a margin with remainder r: 0 for an empty row.
__device__ __forceinline__ unsigned int reach_row_classes(unsigned long long bytes, int row, int r)
{
    if (!bytes) return 0u;
    unsigned int xs = 0u;
    for (int lx = 0; lx < 8; ++lx)
        if ((bytes >> (8 * lx)) & 0xFFull) xs |= 1u << lx;
    const unsigned int cx = reach_axis_classes(xs, r), cy = reach_axis_classes(1u << (row & 7), r),
                       cz = reach_axis_classes(1u << (row >> 3), r);
    unsigned int bits = 0u;
    for (int z = 0; z < 3; ++z)
        for (int y = 0; y < 3; ++y)
            if (((cz >> z) & 1u) && ((cy >> y) & 1u)) bits |= cx << (3 * (3 * z + y));
    return bits;
}

// Step 2 by classes, one thread per (pool slot, row (y, z) of its cells): the class products of the
// row's occupied cells into classes[slot] (zeroed first). A margin past `limit` (or negative) counts
// in *beyond (the caller builds on the array path).
extern "C" __global__ void reach_classes(const unsigned char* __restrict__ occupied,
                                         const unsigned char* __restrict__ used, long long capacity,
                                         const int* __restrict__ margins, int limit,
                                         unsigned int* __restrict__ classes, unsigned long long* __restrict__ beyond)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 64 * capacity) return;
    const long long slot = t >> 6;
    const int row = (int)(t & 63);
    if (!used[slot]) return;
    const unsigned long long bytes = reinterpret_cast<const unsigned long long*>(occupied + slot * SPARSE_CELLS)[row];
    if (!bytes) return;
    const int margin = margins[slot];
    if (margin < 0 || margin > limit) {
        atomicAdd(beyond, 1ULL);
        return;
    }
    const unsigned int bits = reach_row_classes(bytes, row, margin & 7);
    if ((classes[slot] & bits) != bits) atomicOr(classes + slot, bits);
}

// The class of brick offset o along an axis for q = m div 8: 0 core, 1 low (−q − 1), 2 high (q + 1).
__device__ __forceinline__ int reach_offset_class(int o, int q) { return o < -q ? 1 : o > q ? 2 : 0; }

// The offsets [lo, hi] along an axis of brick b that a margin of q whole bricks (plus its remainder)
// may reach: [−q − 1, q + 1], clipped to the box and its wall ring [−1, ⌊n/8⌋] when closed.
__device__ __forceinline__ void reach_axis_span(long long b, int q, int closed, int n, int& lo, int& hi)
{
    lo = -q - 1;
    hi = q + 1;
    if (closed) {
        lo = (int)max((long long)lo, -1LL - b);
        hi = (int)min((long long)hi, (long long)(n >> 3) - b);
    }
}

// A slot's walk (reach_compare_classes' body, lane `lane` of REACH_LANES): its (2q + 3)³ offsets
// clipped to the box, those whose class product is set in `bits` marked over the index.
__device__ __forceinline__ void reach_walk_slot(unsigned int bits, int q, const int* __restrict__ coords,
                                                long long slot, int lane, int closed, int nx, int ny, int nz,
                                                const int* __restrict__ index, int lx, int ly, int lz, int dx, int dy,
                                                int dz, unsigned char* __restrict__ kept,
                                                unsigned int* __restrict__ claimed,
                                                unsigned long long* __restrict__ added,
                                                unsigned long long* __restrict__ beyond)
{
    const long long b[3] = {coords[3 * slot], coords[3 * slot + 1], coords[3 * slot + 2]};
    int lo[3], hi[3];
    reach_axis_span(b[0], q, closed, nx, lo[0], hi[0]);
    reach_axis_span(b[1], q, closed, ny, lo[1], hi[1]);
    reach_axis_span(b[2], q, closed, nz, lo[2], hi[2]);
    const int ex = hi[0] - lo[0] + 1, ey = hi[1] - lo[1] + 1, ez = hi[2] - lo[2] + 1;
    if (ex <= 0 || ey <= 0 || ez <= 0) return;
    const long long total = (long long)ex * ey * ez;
    for (long long k = lane; k < total; k += REACH_LANES) {
        const int ox = lo[0] + (int)(k % ex), oy = lo[1] + (int)((k / ex) % ey), oz = lo[2] + (int)(k / ((long long)ex * ey));
        const int c = (3 * reach_offset_class(oz, q) + reach_offset_class(oy, q)) * 3 + reach_offset_class(ox, q);
        if (!((bits >> c) & 1u)) continue;
        reach_mark_indexed(b[0] + ox, b[1] + oy, b[2] + oz, index, lx, ly, lz, dx, dy, dz, kept, claimed, added,
                           beyond);
    }
}

// Step 4 by classes over a closed domain's brick index (dims d, lowest brick l): REACH_LANES threads
// a slot; each reached brick (its class product set in the slot's word) that has a slot marks it
// kept, one without claims its index entry (atomicExch: *added counts it once), one outside the
// index or past the key range counts in *beyond. claimed: the index's size in words, zeroed first.
extern "C" __global__ void reach_compare_classes(const unsigned int* __restrict__ classes,
                                                 const unsigned char* __restrict__ used,
                                                 const int* __restrict__ coords, long long capacity,
                                                 const int* __restrict__ margins, int closed, int nx, int ny, int nz,
                                                 const int* __restrict__ index, int lx, int ly, int lz, int dx,
                                                 int dy, int dz, unsigned char* __restrict__ kept,
                                                 unsigned int* __restrict__ claimed,
                                                 unsigned long long* __restrict__ added,
                                                 unsigned long long* __restrict__ beyond)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= REACH_LANES * capacity) return;
    const long long slot = t / REACH_LANES;
    const int lane = (int)(t - REACH_LANES * slot);
    if (!used[slot]) return;
    const unsigned int bits = classes[slot];
    if (!bits) return;
    reach_walk_slot(bits, margins[slot] >> 3, coords, slot, lane, closed, nx, ny, nz, index, lx, ly, lz, dx, dy, dz,
                    kept, claimed, added, beyond);
}

// Steps 1b, 2 and 4 in one launch (sparse_topology_gpu's merged pipeline, VOXFX_SPARSE_TOPOLOGY_PIPELINE=
// merged): REACH_LANES threads a slot, each slot's work needing only its own cells and its 27 neighbours'
// speeds (complete after mark_occupied), so the three launches' grid-wide order is not needed. Every lane:
//   the slot's margin: `fixed` (≥ 0: one margin for every brick) or slot_margins' (voxfx_slot_margin.cuh,
//     the same arithmetic) from speed2; lane 0 writes margins[slot] (every slot, as slot_margins) and
//     *most ← the largest |v|² bits (with `most`, else null);
//   the slot's class word: each warp's 32 lanes take two rows each (row w and w + 32) and OR their class
//     products across the warp (reach_classes' products; lane 0 writes classes[slot]); a margin past
//     `limit` (or negative) adds the slot's occupied rows to *beyond (lanes of the first warp) and
//     nothing is reached, as reach_classes;
//   the walk of reach_compare_classes (reach_walk_slot): the same kept, claimed, *added and *beyond.
// A slot not in use stops after its margin. The host harnesses (one "thread" at a time) OR the 64 rows
// in each lane instead of the warp's shuffles.
extern "C" __global__ void reach_slots(const unsigned char* __restrict__ occupied,
                                       const unsigned char* __restrict__ used, const int* __restrict__ coords,
                                       long long capacity, const unsigned int* __restrict__ speed2,
                                       const int* __restrict__ nbr27, int fixed, double dt, double gdt, double h,
                                       int base, int limit, int closed, int nx, int ny, int nz,
                                       const int* __restrict__ index, int lx, int ly, int lz, int dx, int dy, int dz,
                                       int* __restrict__ margins, unsigned int* __restrict__ classes,
                                       unsigned char* __restrict__ kept, unsigned int* __restrict__ claimed,
                                       unsigned long long* __restrict__ added, unsigned long long* __restrict__ beyond,
                                       unsigned long long* __restrict__ most)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= REACH_LANES * capacity) return;  // whole warps: REACH_LANES and the block are multiples of 32
    const long long slot = t / REACH_LANES;
    const int lane = (int)(t - REACH_LANES * slot);
    int margin = fixed;
    if (fixed < 0) {
        const unsigned int bits = slot_speed_bits(speed2, used, nbr27, slot);
        if (lane == 0 && most && bits > *most) atomicMax(most, (unsigned long long)bits);
        margin = slot_margin_of_bits(bits, dt, gdt, h, base);
    }
    if (lane == 0) margins[slot] = margin;
    if (!used[slot]) return;  // the slot's every lane: whole warps
    const bool within = margin >= 0 && margin <= limit;
    const int r = margin & 7;
    const unsigned long long* rows = reinterpret_cast<const unsigned long long*>(occupied + slot * SPARSE_CELLS);
    unsigned int word = 0u;
    unsigned long long filled = 0ULL;  // occupied rows this lane took (the first warp's count for *beyond)
#ifdef __CUDA_ARCH__
    static_assert(REACH_LANES % 32 == 0, "reach_slots: a slot's lanes are whole warps");
    const int w = lane & 31;
    const unsigned long long b0 = rows[w], b1 = rows[w + 32];
    filled = (b0 != 0ULL) + (b1 != 0ULL);
    if (within) word = reach_row_classes(b0, w, r) | reach_row_classes(b1, w + 32, r);
    word = warp_all_or(word);
    const bool counts = lane < 32;
#else
    for (int row = 0; row < 64; ++row) {
        filled += rows[row] != 0ULL;
        if (within) word |= reach_row_classes(rows[row], row, r);
    }
    const bool counts = lane == 0;
#endif
    if (!within) {
        if (counts && filled) atomicAdd(beyond, filled);
        return;
    }
    if (lane == 0) classes[slot] = word;
    if (!word) return;
    reach_walk_slot(word, margin >> 3, coords, slot, lane, closed, nx, ny, nz, index, lx, ly, lz, dx, dy, dz, kept,
                    claimed, added, beyond);
}
