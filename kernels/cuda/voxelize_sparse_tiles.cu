// The sparse voxelizer's surface voxels one warp per tile (issue 11; seed 003 §5.1, seed 004
// §5): gpu_sparse.py's tile launches sparse_surface_tiles and sparse_surface_tiles3, over the
// triangle setups and candidate bricks of voxelize_sparse.cu (its head: brick numbers, bit
// layout, chunks). Every column is tested as voxelize.cu's column<D, false> tests it, so
// both set the bits of sparse_surface_columns. Compiled with --fmad=false, as voxelize.cu.

#include "voxfx_voxelize.cuh"  // the dense kernels' device functions (Setup, make_setup, the exact tests)
#include "voxfx_brick_pool.cuh"  // BrickIndex, find_brick, brick_word, brick_bit, set_voxel
#include "voxfx_reduce.cuh"      // warp_ballot: tiles3's owner search

// ------------------------------------------------------------------ surface voxels, tiles

// One warp per (triangle, tile): the 8 × 8 columns across the dominant axis D of one brick
// column of the triangle's touched box, two columns per lane, each tested as column<D,
// false> tests it. Set voxels are ORed into the warp's shared copy of DEPTH_BRICKS bricks
// along D (from the tile's lowest candidate depth); the warp then ORs each non-empty word
// into its brick once (a voxel outside that window goes to its brick directly).
#ifndef VOXFX_SPARSE_DEPTH_BRICKS
#define VOXFX_SPARSE_DEPTH_BRICKS 4
#endif
#define VOXFX_TILE_WORDS (16 * VOXFX_SPARSE_DEPTH_BRICKS)
#ifndef VOXFX_TILE_WARPS  // gpu_sparse.py: THREADS / 32, the warps of a block
#define VOXFX_TILE_WARPS 4
#endif
// Blocks resident per SM asked of the compiler: 4 of 128 threads caps the kernel at 128
// registers (130 without: 3 blocks, 12 warps to hide the setups' and bricks' latency).
#define VOXFX_TILE_BLOCKS (16 / VOXFX_TILE_WARPS)

struct TileWork {
    long long t;       // triangle of the chunk
    long long bu, bv;  // the tile's brick along U = (D + 1) mod 3 and V = (D + 2) mod 3
    long long bd;      // the window's first brick along the dominant axis D
};

// Brick coordinates (x, y, z) of brick (bu, bv, bd) of a tile across axis d.
__device__ __forceinline__ void tile_brick(int d, long long bu, long long bv, long long bd, long long& bx,
                                           long long& by, long long& bz)
{
    bx = d == 0 ? bd : (d == 1 ? bv : bu);
    by = d == 1 ? bd : (d == 2 ? bv : bu);
    bz = d == 2 ? bd : (d == 0 ? bv : bu);
}

// The window's first brick along D. Across the tile's columns (≤ 8 voxels each way from
// its centre, |n_U|, |n_V| ≤ |n_D|) the plane's depth stays within 8 of its depth dc at the
// centre, so every candidate depth (column_depths: one voxel of margin) lies in
// [dc − 10, dc + 10): inside the DEPTH_BRICKS = 4 bricks from floor(dc − 10) / 8. Slivers
// (s.wide) start at the box. Only a hint: a voxel outside the window is stored directly.
template <int D>
__device__ __forceinline__ long long tile_window(const Setup& s, long long bu, long long bv)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    long long first = s.lo[D] >> 3, last = s.hi[D] >> 3;
    if (s.wide) return first;
    const double* n = s.n;
    const double* v0 = s.v[0];
    double cu = (double)(8 * bu) + 4.0, cv = (double)(8 * bv) + 4.0;
    double nv0 = (n[0] * v0[0] + n[1] * v0[1]) + n[2] * v0[2];
    double dc = ((nv0 - n[U] * cu) - n[V] * cv) / n[D];
    double lo = floor((dc - 10.0) / 8.0);
    if (!(lo > (double)first)) return first;  // NaN-safe
    return lo < (double)last ? (long long)lo : last;
}

// The tile of work item *item* of triangle t (ends/counts: the tile counts' scan of the chunk).
__device__ __forceinline__ TileWork tile_work_of(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                                 const long long* __restrict__ counts, long long t, long long item)
{
    TileWork w;
    w.t = t;
    const Setup& s = setups[w.t];
    long long local = item - (ends[w.t] - counts[w.t]);
    const int D = s.dom;
    const long long lu = D == 0 ? s.lo[1] : (D == 1 ? s.lo[2] : s.lo[0]);
    const long long hu = D == 0 ? s.hi[1] : (D == 1 ? s.hi[2] : s.hi[0]);
    const long long lv = D == 0 ? s.lo[2] : (D == 1 ? s.lo[0] : s.lo[1]);
    long long ntu = (hu >> 3) - (lu >> 3) + 1;
    w.bu = (lu >> 3) + local % ntu;
    w.bv = (lv >> 3) + local / ntu;
    switch (D) {
        case 0: w.bd = tile_window<0>(s, w.bu, w.bv); break;
        case 1: w.bd = tile_window<1>(s, w.bu, w.bv); break;
        default: w.bd = tile_window<2>(s, w.bu, w.bv); break;
    }
    return w;
}

__device__ __forceinline__ TileWork tile_work(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                              const long long* __restrict__ counts, long long n_tris, long long item)
{
    return tile_work_of(setups, ends, counts, owner_of(ends, n_tris, item), item);
}

__device__ __forceinline__ void tile_clear(unsigned int* buf, int lane)
{
    for (int k = lane; k < VOXFX_TILE_WORDS; k += 32) buf[k] = 0u;
}

// A set voxel q (depth d along the tile's axis) into the tile's window of bricks, or
// straight into its brick where it lies outside the window.
__device__ __forceinline__ void window_store(const double q[3], long long d, const TileWork& w, unsigned int* buf,
                                             BrickIndex& ix)
{
    long long i = (long long)q[0], j = (long long)q[1], k = (long long)q[2];
    long long at = (d >> 3) - w.bd;
    if (at >= 0 && at < VOXFX_SPARSE_DEPTH_BRICKS)
        atomicOr(buf + 16 * at + brick_word(j, k), brick_bit(i, j));
    else {
#ifdef VOXFX_SPARSE_DIRECT_HOOK  // the host harness counts these (tests/unit/test_cuda_sparse_host.py)
        VOXFX_SPARSE_DIRECT_HOOK();
#endif
        set_voxel(ix, i, j, k);
    }
}

template <int D>
__device__ __forceinline__ void tile_columns_along(const Setup& s, const TileWork& w, int lane, unsigned int* buf,
                                                   BrickIndex& ix)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    constexpr int pc = plane_of_axis(D);
    for (int c = lane; c < 64; c += 32) {
        long long cu = 8 * w.bu + (c & 7), cv = 8 * w.bv + (c >> 3);
        if (cu < s.lo[U] || cu > s.hi[U] || cv < s.lo[V] || cv > s.hi[V]) continue;
        double q[3];
        q[D] = 0.0;
        q[U] = (double)cu;
        q[V] = (double)cv;
        if (!projection_test<pc>(s, q)) continue;  // the column's own projection (depth-independent)
        long long dlo, dhi;
        column_depths<D>(s, cu, cv, dlo, dhi);
        for (long long d = dlo; d <= dhi; ++d) {
            q[D] = (double)d;
            if (!voxel_set<D>(s, q)) continue;
            window_store(q, d, w, buf, ix);
        }
    }
}

__device__ __forceinline__ void tile_columns(const Setup& s, const TileWork& w, int lane, unsigned int* buf,
                                             BrickIndex& ix)
{
    switch (s.dom) {
        case 0: tile_columns_along<0>(s, w, lane, buf, ix); break;
        case 1: tile_columns_along<1>(s, w, lane, buf, ix); break;
        default: tile_columns_along<2>(s, w, lane, buf, ix); break;
    }
}

// The window's non-empty words into their bricks (one atomic each, its result unused).
__device__ __forceinline__ void tile_flush(const Setup& s, const TileWork& w, int lane, const unsigned int* buf,
                                           BrickIndex& ix)
{
    for (int k = lane; k < VOXFX_TILE_WORDS; k += 32) {
        unsigned int bits = buf[k];
        if (!bits) continue;
        long long bx, by, bz;
        tile_brick(s.dom, w.bu, w.bv, w.bd + (k >> 4), bx, by, bz);
        long long slot = find_brick(ix, bx, by, bz);
        if (slot < 0) {
            atomicAdd(ix.missing, 1ull);
            continue;
        }
        atomicOr(ix.pool + slot * 16 + (k & 15), bits);
    }
}

// ends/counts: the tile counts' scan of the chunk; 32 threads per item.
extern "C" __global__ void __launch_bounds__(32 * VOXFX_TILE_WARPS, VOXFX_TILE_BLOCKS) sparse_surface_tiles(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                                const long long* __restrict__ counts, long long n_tris,
                                                long long n_items, const long long* __restrict__ lin,
                                                const long long* __restrict__ row_start, long long nbx,
                                                long long nby, unsigned int* __restrict__ pool,
                                                unsigned long long* __restrict__ missing)
{
    __shared__ unsigned int windows[VOXFX_TILE_WARPS * VOXFX_TILE_WORDS];
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long item = thread >> 5;
    const int lane = (int)(thread & 31);
    if (item >= n_items) return;  // the whole warp: items are per warp
    unsigned int* buf = windows + (threadIdx.x >> 5) * VOXFX_TILE_WORDS;
    const TileWork w = tile_work(setups, ends, counts, n_tris, item);
    const Setup& s = setups[w.t];
    BrickIndex ix = {lin, row_start, nbx, nby, pool, missing, -1, 0};
    tile_clear(buf, lane);
    __syncwarp();
    tile_columns(s, w, lane, buf, ix);
    __syncwarp();
    tile_flush(s, w, lane, buf, ix);
}

// ------------------------------------------------------------------ surface voxels, tiles3

#ifndef VOXFX_TILE3_BLOCKS  // blocks per SM asked of nvcc for sparse_surface_tiles3 (registers: 65536 / (128 · this))
#define VOXFX_TILE3_BLOCKS VOXFX_TILE_BLOCKS
#endif
#ifndef VOXFX_TILE3_SHARED_SETUP  // 1: sparse_surface_tiles3 reads its setup from a shared copy
#define VOXFX_TILE3_SHARED_SETUP 0
#endif

// sparse_surface_tiles with less work per tile and per column (SURFACE_KERNEL "tiles3", auto's
// tile launch; the same bits; bunny 4096³ on an H200: 4.7 ms against 11.0 ms):
// * the warp finds its triangle together, 32 probes of the scan a round (4 dependent loads
//   for 10^5 triangles instead of owner_of's 17);
// * a column's candidate depths are the voxels whose closed box the plane can meet over the
//   column's square, not one voxel more each way: the plane's depth over the tile is the
//   linear d(u, v) = base − g_U·u − g_V·v (Eq. 1 solved for D, one reciprocal a lane), over
//   the square [u, u + 1] × [v, v + 1] it spans d_c ± (|g_U| + |g_V|) / 2 about the centre,
//   and voxel d's closed box [d, d + 1] meets it iff d ≤ d_max and d + 1 ≥ d_min: the
//   candidates are ceil(d_min − m) − 1 .. floor(d_max + m) with m above the depth's error.
//   That error is the plane function's (its float normal and evaluation, under pbound:
//   tier 1's own bound) over |n_D|, and this evaluation's few roundings (under 2^-30 voxels
//   at 16384³): m = 4·pbound / |n_D| + 2^-16 (non-wide: 8·pbound < |n_D|, so m < 1 and the
//   range lies inside column_depths'). About two candidates a column instead of four; the
//   exact tests (voxel_set) still decide every candidate, so the set bits are the tiles
//   launch's (tests/unit/test_cuda_sparse_host.py, tests/gpu/test_voxelize_sparse_kernels_gpu.py);
// * the tile's arithmetic in 32 bits, its window from the same depths (no division of its
//   own), the warp's setup copied once to shared memory (VOXFX_TILE3_SHARED_SETUP), 8
//   blocks a SM (64 registers; gpu_sparse.py TILE3_BLOCKS): each measured faster on an H200
//   (bench/voxelize_sparse_profile.py).

// The first lane whose bit is set (mask ≠ 0).
__device__ __forceinline__ int first_lane(unsigned int mask)
{
#ifdef __CUDA_ARCH__
    return __ffs(mask) - 1;
#else
    return __builtin_ffs((int)mask) - 1;
#endif
}

// Lane k's probe of a round: entry lo + (k + 1)·step − 1 of the owner range [lo, hi] (hi at most).
__device__ __forceinline__ long long probe_at(long long lo, long long step, long long hi, int k)
{
    long long p = lo + (long long)(k + 1) * step - 1;
    return p < hi ? p : hi;
}

// owner_of(ends, n_owners, item) found by the whole warp (every lane calls it with the same
// item; all 32 lanes active). Invariant: the owner lies in [lo, hi] and ends[hi] > item.
// Each round the 32 probes cut the range to one step, ceil((hi − lo + 1) / 32) entries.
__device__ __forceinline__ long long warp_owner_of(const long long* __restrict__ ends, long long n_owners,
                                                   long long item, int lane)
{
    long long lo = 0, hi = n_owners - 1;
    while (lo < hi) {
        const long long step = (hi - lo + 32) >> 5;
#ifdef __CUDA_ARCH__
        const unsigned int mask = warp_ballot(ends[probe_at(lo, step, hi, lane)] > item);
#else  // the host harness: the warp's 32 probes one after the other
        unsigned int mask = 0u;
        for (int k = 0; k < 32; ++k) mask |= (unsigned int)(ends[probe_at(lo, step, hi, k)] > item) << k;
#endif
        const int f = first_lane(mask);  // lane 31 probes hi: some bit is set
        const long long next_hi = probe_at(lo, step, hi, f);
        if (f) lo += (long long)f * step;  // probe f − 1 (< hi: its bit is clear) + 1
        hi = next_hi;
    }
    return lo;
}

// The plane's depth along D over a tile: d(u, v) = base − gU·u − gV·v, its half spread over
// a column's square, and the margin m for its error (only for non-wide setups).
struct TileDepths {
    double base, gU, gV, reach;  // reach: the half spread + m
};

template <int D>
__device__ __forceinline__ TileDepths tile_depths(const Setup& s)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    TileDepths t;
    const double rD = 1.0 / s.n[D];
    const double nv0 = (s.n[0] * s.v[0][0] + s.n[1] * s.v[0][1]) + s.n[2] * s.v[0][2];
    t.base = nv0 * rD;
    t.gU = s.n[U] * rD;
    t.gV = s.n[V] * rD;
    t.reach = 0.5 * (fabs(t.gU) + fabs(t.gV)) + (4.0 * s.pbound * fabs(rD) + 0x1p-16);
    return t;
}

// A tile of tiles3: its work (as tile_work_of) and its plane's depths.
struct Tile3 {
    TileWork w;
    TileDepths t;
};

// tile_work_of in 32-bit tile arithmetic (a triangle has under 2^31 tiles), the window's
// first brick from the depths' plane at the tile's centre as tile_window finds it (only a
// hint: a voxel outside the window is stored directly), without a division of its own.
template <int D>
__device__ __forceinline__ Tile3 tile3_work_along(const Setup& s, long long tri, long long local)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    Tile3 r;
    r.w.t = tri;
    const unsigned int ntu = (unsigned int)((s.hi[U] >> 3) - (s.lo[U] >> 3) + 1), l = (unsigned int)local;
    r.w.bu = (s.lo[U] >> 3) + (long long)(l % ntu);
    r.w.bv = (s.lo[V] >> 3) + (long long)(l / ntu);
    r.t = tile_depths<D>(s);
    const long long first = s.lo[D] >> 3, last = s.hi[D] >> 3;
    r.w.bd = first;
    if (!s.wide) {  // slivers start at the box (n_D may be 0)
        const double dc = (r.t.base - r.t.gU * (double)(8 * r.w.bu + 4)) - r.t.gV * (double)(8 * r.w.bv + 4);
        const double lo = floor((dc - 10.0) * 0.125);
        if (lo > (double)first) r.w.bd = lo < (double)last ? (long long)lo : last;
    }
    return r;
}

__device__ __forceinline__ Tile3 tile3_work(const Setup& s, const long long* __restrict__ ends,
                                            const long long* __restrict__ counts, long long tri, long long item)
{
    const long long local = item - (ends[tri] - counts[tri]);
    switch (s.dom) {
        case 0: return tile3_work_along<0>(s, tri, local);
        case 1: return tile3_work_along<1>(s, tri, local);
        default: return tile3_work_along<2>(s, tri, local);
    }
}

// window_store of voxel (i, j, k), depth d along the tile's axis, in 32-bit arithmetic.
__device__ __forceinline__ void window_store3(int i, int j, int k, int d, const TileWork& w, unsigned int* buf,
                                              BrickIndex& ix)
{
    const int at = (d >> 3) - (int)w.bd;
    if (at >= 0 && at < VOXFX_SPARSE_DEPTH_BRICKS)
        atomicOr(buf + 16 * at + (((k & 7) << 3 | (j & 7)) >> 2), 1u << (((j & 3) << 3) | (i & 7)));
    else {
#ifdef VOXFX_SPARSE_DIRECT_HOOK
        VOXFX_SPARSE_DIRECT_HOOK();
#endif
        set_voxel(ix, i, j, k);
    }
}

template <int D>
__device__ __forceinline__ void tile3_columns_along(const Setup& s, const Tile3& k3, int lane, unsigned int* buf,
                                                    BrickIndex& ix)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    constexpr int pc = plane_of_axis(D);
    const TileDepths& t = k3.t;
    const int lu = (int)s.lo[U], hu = (int)s.hi[U], lv = (int)s.lo[V], hv = (int)s.hi[V];
    const int ld = (int)s.lo[D], hd = (int)s.hi[D];
    for (int c = lane; c < 64; c += 32) {
        const int cu = 8 * (int)k3.w.bu + (c & 7), cv = 8 * (int)k3.w.bv + (c >> 3);
        if (cu < lu || cu > hu || cv < lv || cv > hv) continue;
        double q[3];
        q[D] = 0.0;
        q[U] = (double)cu;
        q[V] = (double)cv;
        if (!projection_test<pc>(s, q)) continue;  // the column's own projection (depth-independent)
        int dlo = ld, dhi = hd;
        if (!s.wide) {  // else (slivers): every voxel of the box's column, as column_depths
            const double dc = (t.base - t.gU * ((double)cu + 0.5)) - t.gV * ((double)cv + 0.5);
            const long long a = (long long)ceil(dc - t.reach) - 1, b = (long long)floor(dc + t.reach);
            dlo = a > dlo ? (int)a : dlo;
            dhi = b < dhi ? (int)b : dhi;
        }
        int x[3];
        x[U] = cu;
        x[V] = cv;
        for (int d = dlo; d <= dhi; ++d) {
            q[D] = (double)d;
            if (!voxel_set<D>(s, q)) continue;
            x[D] = d;
            window_store3(x[0], x[1], x[2], d, k3.w, buf, ix);
        }
    }
}

__device__ __forceinline__ void tile3_columns(const Setup& s, const Tile3& k3, int lane, unsigned int* buf,
                                              BrickIndex& ix)
{
    switch (s.dom) {
        case 0: tile3_columns_along<0>(s, k3, lane, buf, ix); break;
        case 1: tile3_columns_along<1>(s, k3, lane, buf, ix); break;
        default: tile3_columns_along<2>(s, k3, lane, buf, ix); break;
    }
}

// As sparse_surface_tiles (ends/counts: the tile counts' scan of the chunk; 32 threads per item).
extern "C" __global__ void __launch_bounds__(32 * VOXFX_TILE_WARPS, VOXFX_TILE3_BLOCKS) sparse_surface_tiles3(
    const Setup* __restrict__ setups, const long long* __restrict__ ends, const long long* __restrict__ counts,
    long long n_tris, long long n_items, const long long* __restrict__ lin, const long long* __restrict__ row_start,
    long long nbx, long long nby, unsigned int* __restrict__ pool, unsigned long long* __restrict__ missing)
{
    __shared__ unsigned int windows[VOXFX_TILE_WARPS * VOXFX_TILE_WORDS];
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long item = thread >> 5;
    const int lane = (int)(thread & 31);
    if (item >= n_items) return;  // the whole warp: items are per warp
    unsigned int* buf = windows + (threadIdx.x >> 5) * VOXFX_TILE_WORDS;
    const long long tri = warp_owner_of(ends, n_tris, item, lane);
#if VOXFX_TILE3_SHARED_SETUP  // the warp's setup copied to shared memory once (8-byte words, lane by lane)
    __shared__ Setup shared_setups[VOXFX_TILE_WARPS];
    Setup* own = shared_setups + (threadIdx.x >> 5);
    {
        const unsigned long long* from = (const unsigned long long*)(setups + tri);
        unsigned long long* to = (unsigned long long*)own;
        for (int k = lane; k < (int)(sizeof(Setup) / 8); k += 32) to[k] = from[k];
    }
    __syncwarp();
    const Setup& s = *own;
#else
    const Setup& s = setups[tri];
#endif
    const Tile3 k3 = tile3_work(s, ends, counts, tri, item);
    BrickIndex ix = {lin, row_start, nbx, nby, pool, missing, -1, 0};
    tile_clear(buf, lane);
    __syncwarp();
    tile3_columns(s, k3, lane, buf, ix);
    __syncwarp();
    tile_flush(s, k3.w, lane, buf, ix);
}
