// The sparse FLIP solver's stages on bricks (seed 003 §5–7; kernels/flip/sparse_gpu.py
// launches them, kernels/flip/sparse_transfer.py and sparse_grid.py are the NumPy
// reference, mirrored term by term; compiled with --fmad=false so each float operation
// rounds as NumPy's does).
//
// Layout (kernels/grid/sparse_mac.py): every channel is flat over the pool, cell
// slot·512 + (lz·8 + ly)·8 + lx; a cell keeps the faces on its low sides. The brick tables
// (built once per topology by sparse.cu's brick_tables):
//   coords[3·slot]    brick coordinates of each pool slot (free slots: not read)
//   nbr27[27·slot + sparse_offset_index(dx, dy, dz)]  slot of the brick at offset
//                     (dx, dy, dz) ∈ {−1, 0, 1}³ (voxfx_sparse.cuh)
// so a stencil crosses a brick border with one table read, and a point finds its brick by a
// binary search on the sorted keys only when it lies beyond the bricks next to a known one.
// G2P and advection are flip_sparse_g2p.cu's.
//
// Constants from Python (-D): AIR, FLUID, SOLID (kernels/grid/mac.py), PUSH_EPSILON
// (kernels/flip/particles.py).

#include "voxfx_bin.cuh"  // the scatter's |q| bound, warp and block sums and scans
#include "voxfx_sparse.cuh"  // keys, slots, binary search
#include "voxfx_sparse_index.cuh"  // BRICK_INDEX_ARGS, INDEXED_SLOT: a closed domain's brick index

// One thread per key: its slot into the table (filled with −1 first); keys outside it skipped.
extern "C" __global__ void brick_index_fill(const long long* __restrict__ keys, const int* __restrict__ slots,
                                           long long n_keys, int* __restrict__ index, int lx, int ly, int lz,
                                           int dx, int dy, int dz)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_keys) return;
    const long long mask = (1LL << SPARSE_KEY_BITS) - 1, key = keys[t];
    const long long x = (key & mask) - SPARSE_OFFSET - lx, y = ((key >> SPARSE_KEY_BITS) & mask) - SPARSE_OFFSET - ly,
                    z = (key >> (2 * SPARSE_KEY_BITS)) - SPARSE_OFFSET - lz;
    if (x >= 0 && x < dx && y >= 0 && y < dy && z >= 0 && z < dz) index[(z * dy + y) * dx + x] = slots[t];
}

// ------------------------------------------------------------------------------ marks

// SparseFlipGrid.update's marks: the faces that exist (a closed domain's face lattices, all
// active faces when open), the wall ring beyond a closed domain, and solid = wall.
extern "C" __global__ void mark_walls(const unsigned char* __restrict__ used, const int* __restrict__ coords,
                                      long long cells, int closed, int nx, int ny, int nz,
                                      unsigned char* __restrict__ exists_u, unsigned char* __restrict__ exists_v,
                                      unsigned char* __restrict__ exists_w, unsigned char* __restrict__ wall,
                                      unsigned char* __restrict__ solid)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    const long long slot = t >> 9;
    const int l = (int)(t & (SPARSE_CELLS - 1));
    unsigned char eu = 0, ev = 0, ew = 0, wl = 0;
    if (used[slot]) {
        const int i = coords[3 * slot] * 8 + (l & 7), j = coords[3 * slot + 1] * 8 + ((l >> 3) & 7),
                  k = coords[3 * slot + 2] * 8 + (l >> 6);
        if (closed) {
            const bool in_j = j >= 0 && j < ny, in_k = k >= 0 && k < nz, in_i = i >= 0 && i < nx;
            wl = !(in_i && in_j && in_k);
            eu = i >= 0 && i < nx + 1 && in_j && in_k;
            ev = in_i && j >= 0 && j < ny + 1 && in_k;
            ew = in_i && in_j && k >= 0 && k < nz + 1;
        } else {
            eu = ev = ew = 1;
        }
    }
    exists_u[t] = eu;
    exists_v[t] = ev;
    exists_w[t] = ew;
    wall[t] = wl;
    solid[t] = wl;
}

// ------------------------------------------------------------------------------ topology (§5.1–5.2)

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
// SPEED_MAXIMA "warp"): the lanes of a warp on one slot (__match_any_sync) take their max
// (__reduce_max_sync) and one atomic adds it — the particles keep their seeding's spatial
// order, so a warp's 32 lanes mostly share a brick and would otherwise queue 32 atomics on
// one address (H200, 8M: the plain atomics made the update 0.37 ms slower a substep).
// Zero speed2 first.
extern "C" __global__ void mark_occupied(const float* __restrict__ pos, long long n, float ox, float oy, float oz,
                                         float inv_h, int closed, int nx, int ny, int nz,
                                         const long long* __restrict__ keys, const int* __restrict__ slots,
                                         long long n_keys, BRICK_INDEX_ARGS, unsigned char* __restrict__ occupied,
                                         unsigned long long* __restrict__ missed, const float* __restrict__ vel,
                                         unsigned int* __restrict__ speed2, int speeds)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
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
        unsigned int bits = __float_as_uint(vx * vx + vy * vy + vz * vz);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        if (speeds == 2) {  // warp-aggregated: the lanes of one slot take their max, the lowest adds it
            const unsigned int peers = __match_any_sync(__activemask(), s);
            bits = __reduce_max_sync(peers, bits);
            if ((int)(threadIdx.x & 31) != __ffs(peers) - 1) return;
        }
#endif
        if (bits > speed2[s]) atomicMax(speed2 + s, bits);
    }
}

// The float of bits b (the host harnesses build this file as host code).
__device__ __forceinline__ float float_of_bits(unsigned int b)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    __builtin_memcpy(&f, &b, sizeof f);
    return f;
#endif
}

// Step 1b, one thread per pool slot: its margin (sparse_grid.BrickReach.margins, the same
// float64 arithmetic) from the largest |v|² of the 27 bricks around it (nbr27; itself
// included), base + ⌈(s + |g|·dt)·dt/h⌉ with s = √(that |v|²) rounded to float32 as
// NumPy's sqrt does, then widened. A margin past 2^20 (or not finite) is written as 2^30:
// brick_reach then reports it beyond its radius.
extern "C" __global__ void slot_margins(const unsigned int* __restrict__ speed2, const unsigned char* __restrict__ used,
                                        const int* __restrict__ nbr27, long long capacity, double dt, double gdt,
                                        double h, int base, int* __restrict__ margins)
{
    const long long slot = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (slot >= capacity) return;
    unsigned int bits = 0;
    if (used[slot])
        for (int o = 0; o < 27; ++o) {
            const int s = nbr27[27 * slot + o];
            if (s >= 0 && speed2[s] > bits) bits = speed2[s];
        }
    const double reach = ((double)sqrtf(float_of_bits(bits)) + gdt) * dt / h;
    margins[slot] = reach <= 1048576.0 ? base + (int)ceil(reach) : 1 << 30;
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

// ------------------------------------------------------------------------------ binning (seed 003 §6)

// Counting sort by pool cell, step 1 (then flip_transfer.cu's place_particles,
// sort_cell_segments, copy_sorted_particles): each particle's cell ⌊(x − o)/h⌋ in the pool
// and its rank there; a particle without an active cell (or not finite) goes to the extra
// cell `cells`, which no stage reads. Zero count (cells + 1) first. The gathers that read
// the sorted particles are flip_sparse_gather.cu's.
// Particle p's pool cell, or `cells` (module notes above).
__device__ __forceinline__ long long bin_cell(const float* __restrict__ pos, long long p, float ox, float oy,
                                              float oz, float inv_h, const long long* __restrict__ keys,
                                              const int* __restrict__ slots, long long n_keys, BRICK_INDEX_ARGS,
                                              long long cells)
{
    const float gx = (pos[3 * p] - ox) * inv_h, gy = (pos[3 * p + 1] - oy) * inv_h, gz = (pos[3 * p + 2] - oz) * inv_h;
    long long c = cells;
    if (isfinite(gx) && isfinite(gy) && isfinite(gz)) {
        const long long i = (long long)floorf(gx), j = (long long)floorf(gy), k = (long long)floorf(gz);
        const int s = INDEXED_SLOT(i >> 3, j >> 3, k >> 3);
        if (s >= 0) c = (long long)s * SPARSE_CELLS + sparse_local(i, j, k);
    }
    return c;
}

extern "C" __global__ void count_particles_sparse(const float* __restrict__ pos, long long n, float ox, float oy,
                                                  float oz, float inv_h, const long long* __restrict__ keys,
                                                  const int* __restrict__ slots, long long n_keys, BRICK_INDEX_ARGS,
                                                  long long cells, int* __restrict__ count, int* __restrict__ cell_of,
                                                  int* __restrict__ rank)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const long long c = bin_cell(pos, p, ox, oy, oz, inv_h, keys, slots, n_keys, index, index_lx, index_ly, index_lz,
                                 index_dx, index_dy, index_dz, cells);
    cell_of[p] = (int)c;
    rank[p] = atomicAdd(count + c, 1);
}

// The scatter's binning (sparse_gpu.bin_particles_order), step 1: count_particles_sparse
// with the scatter's bound on |q| fused in (flip_sparse_scatter.cu's scatter_bounds, the
// same bits: a max does not depend on the order): per warp the max of scatter_q_bits, one
// atomicMax into bounds[0] where it beats the value there (bounds zeroed first).
// bounds[1], the max particles a cell, comes from the scan (bin_scan_sums). Then
// bin_scan_sums + bin_scan (start), flip_transfer.cu's place_particles (order); no
// per-cell sort and no sorted copies: the scatter reads the particles through order.
// H200, 8M particles: 0.162 ms against count_particles_sparse's 0.103 + scatter_bounds' 0.040
// (the fusion saves a launch, not time); the scan 0.031 against cupy.cumsum's 0.049.
extern "C" __global__ void count_particles_bounds(const float* __restrict__ pos, const float* __restrict__ vel,
                                                  const float* __restrict__ c, int apic, long long n, float ox,
                                                  float oy, float oz, float inv_h, float h,
                                                  const long long* __restrict__ keys, const int* __restrict__ slots,
                                                  long long n_keys, BRICK_INDEX_ARGS, long long cells,
                                                  int* __restrict__ count, int* __restrict__ cell_of,
                                                  int* __restrict__ rank, unsigned int* __restrict__ bounds)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float q = 0.0f;
    if (p < n) {
        const long long cell = bin_cell(pos, p, ox, oy, oz, inv_h, keys, slots, n_keys, index, index_lx, index_ly,
                                        index_lz, index_dx, index_dy, index_dz, cells);
        cell_of[p] = (int)cell;
        rank[p] = atomicAdd(count + cell, 1);
        q = scatter_q_bound(vel, c, apic, p, h);
    }
    const unsigned int bits = warp_all_max(scatter_q_bits(q));  // every lane present: no return above
    if ((threadIdx.x & 31) == 0 && bits > *(volatile unsigned int*)bounds) atomicMax(bounds, bits);
}

// Step 2, the exclusive scan of count (n = cells + 1 entries) in two launches over tiles of
// `tile` entries: sums[b] = Σ of tile b, and bounds[1] = max count over the pool's cells
// (i < cells: the last bin, particles without an active cell, is not scattered).
extern "C" __global__ void bin_scan_sums(const int* __restrict__ count, int n, int tile, int cells,
                                         int* __restrict__ sums, unsigned int* __restrict__ bounds)
{
    const int lo = (int)blockIdx.x * tile, hi = min(n, lo + tile);
    int sum = 0;
    unsigned int most = 0u;
    for (int i = lo + (int)threadIdx.x; i < hi; i += (int)blockDim.x) {
        const int k = count[i];
        sum += k;
        if (i < cells) most = max(most, (unsigned int)max(k, 0));
    }
    bin_block_sum_max(sum, most);
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = sum;
        if (most) atomicMax(bounds + 1, most);
    }
}

// start[i] = Σ count[0..i) from the earlier tiles' sums and a block scan of the tile.
extern "C" __global__ void bin_scan(const int* __restrict__ count, int n, int tile, const int* __restrict__ sums,
                                    int* __restrict__ start)
{
    int carry = 0;
    unsigned int unused = 0u;
    for (int t = (int)threadIdx.x; t < (int)blockIdx.x; t += (int)blockDim.x) carry += sums[t];
    bin_block_sum_max(carry, unused);
    const int lo = (int)blockIdx.x * tile, hi = min(n, lo + tile);
    for (int at = lo; at < hi; at += (int)blockDim.x) {  // the same trip count in every thread
        const int i = at + (int)threadIdx.x;
        const int v = i < hi ? count[i] : 0;
        int chunk;
        const int x = bin_block_inclusive(v, chunk);
        if (i < hi) start[i] = carry + x - v;
        carry += chunk;
    }
}

// ------------------------------------------------------------------------------ cell types, boundaries

// sparse_transfer.classify, step 1: SOLID where solid, else AIR.
extern "C" __global__ void cells_from_solid_sparse(const unsigned char* __restrict__ solid,
                                                   unsigned char* __restrict__ cell, long long cells)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < cells) cell[t] = solid[t] ? SOLID : AIR;
}

// Step 2: every particle in an active cell (closed: inside the box) marks it FLUID unless
// it is solid (all writers store the same value).
extern "C" __global__ void mark_fluid_sparse(const float* __restrict__ pos, long long n, float ox, float oy, float oz,
                                             float inv_h, int closed, int nx, int ny, int nz,
                                             const long long* __restrict__ keys, const int* __restrict__ slots,
                                             long long n_keys, const unsigned char* __restrict__ solid,
                                             unsigned char* __restrict__ cell)
{
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const float gx = (pos[3 * p] - ox) * inv_h, gy = (pos[3 * p + 1] - oy) * inv_h, gz = (pos[3 * p + 2] - oz) * inv_h;
    if (!(isfinite(gx) && isfinite(gy) && isfinite(gz))) return;
    const long long i = (long long)floorf(gx), j = (long long)floorf(gy), k = (long long)floorf(gz);
    if (closed && !(i >= 0 && i < nx && j >= 0 && j < ny && k >= 0 && k < nz)) return;
    const int s = sparse_slot(keys, slots, n_keys, sparse_key_of_voxel(i, j, k));
    if (s < 0) return;
    const long long c = (long long)s * SPARSE_CELLS + sparse_local(i, j, k);
    if (!solid[c]) cell[c] = FLUID;
}

// classify in one pass over the pool from the binning (bin_particles' count per pool cell:
// count_particles_sparse puts a particle in the cell ⌊(x − o)/h⌋ that mark_fluid_sparse
// marks, finite and active alike): FLUID where the cell holds a particle, is not solid and
// (closed) lies inside the box; else SOLID where solid, AIR elsewhere. No pass over the
// particles and no brick search per particle.
extern "C" __global__ void classify_counts_sparse(const int* __restrict__ count,
                                                  const unsigned char* __restrict__ solid,
                                                  const int* __restrict__ coords, long long cells, int closed,
                                                  int nx, int ny, int nz, unsigned char* __restrict__ cell)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    unsigned char type = solid[t] ? SOLID : AIR;
    if (type == AIR && count[t] > 0) {  // a cell with particles lies in an active slot
        const long long slot = t >> 9;
        const int l = (int)(t & (SPARSE_CELLS - 1));
        const long long i = 8LL * coords[3 * slot] + (l & 7), j = 8LL * coords[3 * slot + 1] + ((l >> 3) & 7),
                        k = 8LL * coords[3 * slot + 2] + (l >> 6);
        if (!closed || (i >= 0 && i < nx && j >= 0 && j < ny && k >= 0 && k < nz)) type = FLUID;
    }
    cell[t] = type;
}

// sparse_transfer.enforce_boundaries with the body force fused (sim's gravity step): every
// face adds add_u/v/w when `add` (the reference adds to every face, then overwrites the
// boundary faces: the same values), and a face with a solid cell on either side, or that
// does not exist, takes the solid's velocity (walls 0).
extern "C" __global__ void enforce_boundaries_sparse(float* __restrict__ u, float* __restrict__ v,
                                                     float* __restrict__ w, const float* __restrict__ solid_u,
                                                     const float* __restrict__ solid_v,
                                                     const float* __restrict__ solid_w,
                                                     const unsigned char* __restrict__ solid,
                                                     const unsigned char* __restrict__ exists_u,
                                                     const unsigned char* __restrict__ exists_v,
                                                     const unsigned char* __restrict__ exists_w,
                                                     const int* __restrict__ nbr27, long long cells, int add,
                                                     float add_u, float add_v, float add_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    float* const face[3] = {u, v, w};
    const float* const fixed[3] = {solid_u, solid_v, solid_w};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    const float force[3] = {add_u, add_v, add_w};
    const bool here = solid[t] != 0;
    for (int a = 0; a < 3; ++a) {
        const int lo = sparse_cell_step(nbr27, (int)t, 2 * a);
        if (here || (lo >= 0 && solid[lo]) || !exists[a][t]) face[a][t] = fixed[a][t];
        else if (add) face[a][t] = face[a][t] + force[a];
    }
}

// sparse_transfer.fluid_faces: faces with a FLUID cell on either side.
extern "C" __global__ void fluid_faces_sparse(const unsigned char* __restrict__ cell, const int* __restrict__ nbr27,
                                              long long cells, unsigned char* __restrict__ valid_u,
                                              unsigned char* __restrict__ valid_v, unsigned char* __restrict__ valid_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    for (int a = 0; a < 3; ++a) {
        const int lo = sparse_cell_step(nbr27, (int)t, 2 * a);
        valid[a][t] = cell[t] == FLUID || (lo >= 0 && cell[lo] == FLUID);
    }
}

// One ring of sparse_transfer.extrapolate for the three components: a face that exists and
// is not valid, with valid neighbours (same component, −x, +x, −y, +y, −z, +z, summed in that
// order), takes their mean and becomes valid. valid means valid and existing.
extern "C" __global__ void extrapolate_sparse(const float* __restrict__ su, const float* __restrict__ sv,
                                              const float* __restrict__ sw, const unsigned char* __restrict__ mu,
                                              const unsigned char* __restrict__ mv,
                                              const unsigned char* __restrict__ mw,
                                              const unsigned char* __restrict__ exists_u,
                                              const unsigned char* __restrict__ exists_v,
                                              const unsigned char* __restrict__ exists_w,
                                              const int* __restrict__ nbr27, long long cells, float* __restrict__ du,
                                              float* __restrict__ dv, float* __restrict__ dw,
                                              unsigned char* __restrict__ nu, unsigned char* __restrict__ nv,
                                              unsigned char* __restrict__ nw)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    const float* const src[3] = {su, sv, sw};
    const unsigned char* const mask[3] = {mu, mv, mw};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    float* const dst[3] = {du, dv, dw};
    unsigned char* const out[3] = {nu, nv, nw};
    int nb[6];
    for (int d = 0; d < 6; ++d) nb[d] = sparse_cell_step(nbr27, (int)t, d);
    for (int a = 0; a < 3; ++a) {
        const bool here = mask[a][t] && exists[a][t];
        float value = src[a][t];
        bool grow = false;
        if (!here && exists[a][t]) {
            float total = 0.0f;
            int count = 0;
            for (int d = 0; d < 6; ++d)
                if (nb[d] >= 0 && mask[a][nb[d]] && exists[a][nb[d]]) {
                    total += src[a][nb[d]];
                    ++count;
                }
            if (count) {
                value = total / (float)count;
                grow = true;
            }
        }
        dst[a][t] = value;
        out[a][t] = here || grow;
    }
}
