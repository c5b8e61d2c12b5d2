// The sparse voxelizer on the device (issue 11; seed 003 §5.1, seed 004 §5): every voxel is
// decided by the exact device functions of voxelize.cu (make_setup, projection_test,
// plane_test, thin_test, make_yz_setup), over the whole grid's columns as the dense kernels
// test them; only where a set bit is stored differs: an 8³ brick of a sorted list of bricks
// instead of a dense bit grid. Compiled with --fmad=false, as voxelize.cu.
//
// Bricks are numbered lin = (bz·nby + by)·nbx + bx over the grid's nbx × nby × nbz bricks
// (sorted lin = sorted SparseGrid keys). A brick's bits are 64 bytes: byte (z·8 + y), bit x;
// as uint32 words, word (z·8 + y) / 4, bit 8·((z·8 + y) mod 4) + x (little-endian).
//
// Triangles go in chunks (gpu_sparse.py): the setups of a chunk are built once into device
// memory and every kernel of the surface reads them (a Setup is large: built per thread it
// lives in local memory, a 2 KB stack frame at 255 registers).

#include "voxelize.cu"
#include "voxfx_reduce.cuh"

// ------------------------------------------------------------------ triangle setups

// make_setup cut to the grid (as the dense launch of the whole grid cuts it) for triangles
// first .. first + n - 1, into setups[0 .. n); a triangle with a bad index gets an empty box.
extern "C" __global__ void sparse_surface_setups(const double* __restrict__ pv, const int* __restrict__ tris,
                                                 long long first, long long n, long long n_vertices, int nx, int ny,
                                                 int nz, int thin, Setup* __restrict__ setups,
                                                 unsigned long long* __restrict__ flags)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (!valid_triangle(tris, first + i, n_vertices, flags)) {  // no work: only its box is read
        for (int a = 0; a < 3; ++a) { setups[i].lo[a] = 0; setups[i].hi[a] = -1; }
        setups[i].dom = 0;
        return;
    }
    Setup s;
    make_setup(pv, tris, first + i, nx, ny, nz, thin, s);
    clip_to_box(s, make_box(0, 0, 0, nx, ny, nz));
    setups[i] = s;
}

extern "C" __global__ void sparse_setup_size(long long* __restrict__ out)
{
    out[0] = (long long)sizeof(Setup);
}

// Per triangle of a chunk, the work of its touched box: the bricks of its brick range (the
// candidates' items), the 8 × 8 column tiles across its dominant axis (sparse_surface_tiles'
// items) and its columns (sparse_surface_columns' items, as surface_column_counts).
extern "C" __global__ void sparse_surface_counts(const Setup* __restrict__ setups, long long n,
                                                 long long* __restrict__ bricks, long long* __restrict__ tiles,
                                                 long long* __restrict__ columns)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Setup& s = setups[i];
    long long w[3], b[3];
    bool empty = false;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        w[a] = s.hi[a] - s.lo[a] + 1;
        b[a] = (s.hi[a] >> 3) - (s.lo[a] >> 3) + 1;
        empty |= w[a] <= 0;
    }
    if (empty) {  // outside the grid, or a bad index
        bricks[i] = tiles[i] = columns[i] = 0;
        return;
    }
    const int d = s.dom;  // across it: U = (d + 1) mod 3, V = (d + 2) mod 3
    bricks[i] = b[0] * b[1] * b[2];
    tiles[i] = d == 0 ? b[1] * b[2] : (d == 1 ? b[2] * b[0] : b[0] * b[1]);
    columns[i] = d == 0 ? w[1] * w[2] : (d == 1 ? w[2] * w[0] : w[0] * w[1]);
}

// ------------------------------------------------------------------ surface topology

// Margin of the conservative brick test over the tier-1 bounds of voxelize.cu (pbound,
// ebound): those bound the rounding of Eq. 1 and Eq. 2 anywhere in the touched box, so a
// brick whose best voxel is SLACK bounds on the wrong side holds no voxel the exact tests
// could set (a voxel there fails tier 1 already).
#define VOXFX_CULL_SLACK 1024.0

// Whether any voxel q of the range qlo .. qhi (inclusive, inside the touched box) may pass
// the exact test: Eq. 1 over the union of their closed boxes [qlo, qhi + 1], and Eq. 3's
// edges in the three planes at the range's best corner. False only where none can.
__device__ __forceinline__ bool range_may_hold(const Setup& s, const long long* qlo, const long long* qhi)
{
    if (s.orient[0] || s.orient[1] || s.orient[2]) {  // no normal: plane_test passes everywhere
        double fmax = 0.0, fmin = 0.0;
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            double hi = (double)(qhi[k] + 1) - s.v[0][k], lo = (double)qlo[k] - s.v[0][k];
            fmax += s.n[k] * (s.n[k] > 0 ? hi : lo);
            fmin += s.n[k] * (s.n[k] > 0 ? lo : hi);
        }
        const double m = VOXFX_CULL_SLACK * s.pbound;
        if (fmax < -m || fmin > m) return false;
    }
#pragma unroll
    for (int p = 0; p < 3; ++p) {
        const int a = PA(p), b = PB(p);
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            const double na = s.ne[p][i][0], nb = s.ne[p][i][1];
            double E = (na * (double)(na > 0 ? qhi[a] : qlo[a]) + nb * (double)(nb > 0 ? qhi[b] : qlo[b])) + s.de[p][i];
            if (E < -VOXFX_CULL_SLACK * s.ebound[p][i]) return false;
        }
    }
    return true;
}

// (brick, triangle) items of a chunk (ends/counts: the brick counts' scan), items first ..
// first + n_items - 1: each brick of the triangle's brick range that may hold one of its
// voxels adds its brick number to out (write = 1) or only counts (write = 0; n_out). Brick
// numbers of type K: 32-bit where the grid has under 2^32 bricks (half the bytes to sort).
template <typename K>
__device__ __forceinline__ void surface_bricks(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                               const long long* __restrict__ counts, long long n_tris,
                                               long long first, long long n_items, long long nbx, long long nby,
                                               int write, K* __restrict__ out, unsigned long long* __restrict__ n_out)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    item += first;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    const Setup& s = setups[t];
    long long b0 = s.lo[0] >> 3, b1 = s.lo[1] >> 3, b2 = s.lo[2] >> 3;
    long long ex = (s.hi[0] >> 3) - b0 + 1, ey = (s.hi[1] >> 3) - b1 + 1;
    long long b[3] = {b0 + local % ex, b1 + (local / ex) % ey, b2 + local / (ex * ey)};
    long long qlo[3], qhi[3];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        qlo[a] = 8 * b[a] > s.lo[a] ? 8 * b[a] : s.lo[a];
        qhi[a] = 8 * b[a] + 7 < s.hi[a] ? 8 * b[a] + 7 : s.hi[a];
    }
    if (!range_may_hold(s, qlo, qhi)) return;
    unsigned long long at = atomicAdd(n_out, 1ull);
    if (write) out[at] = (K)((b[2] * nby + b[1]) * nbx + b[0]);
}

extern "C" __global__ void sparse_surface_bricks(const Setup* __restrict__ setups, const long long* __restrict__ ends,
                                                 const long long* __restrict__ counts, long long n_tris,
                                                 long long first, long long n_items, long long nbx, long long nby,
                                                 int write, long long* __restrict__ out,
                                                 unsigned long long* __restrict__ n_out)
{
    surface_bricks<long long>(setups, ends, counts, n_tris, first, n_items, nbx, nby, write, out, n_out);
}

extern "C" __global__ void sparse_surface_bricks32(const Setup* __restrict__ setups,
                                                   const long long* __restrict__ ends,
                                                   const long long* __restrict__ counts, long long n_tris,
                                                   long long first, long long n_items, long long nbx, long long nby,
                                                   int write, unsigned int* __restrict__ out,
                                                   unsigned long long* __restrict__ n_out)
{
    surface_bricks<unsigned int>(setups, ends, counts, n_tris, first, n_items, nbx, nby, write, out, n_out);
}

// ------------------------------------------------------------------ surface voxels

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

// Slot of brick (bx, by, bz), or -1 where it is not listed.
__device__ __forceinline__ long long find_brick(const BrickIndex& ix, long long bx, long long by, long long bz)
{
    long long brow = bz * ix.nby + by, lin = brow * ix.nbx + bx;
    long long lo = ix.row_start[brow], end = ix.row_start[brow + 1], hi = end;
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (ix.lin[mid] < lin) lo = mid + 1; else hi = mid;
    }
    return (lo < end && ix.lin[lo] == lin) ? lo : -1;
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

// The tests of voxel q of a column along D whose own projection passed (voxelize.cu's
// column<D, false>: the same tests in the same order).
template <int D>
__device__ __forceinline__ bool voxel_set(const Setup& s, const double* q)
{
    constexpr int pc = plane_of_axis(D), p1 = (pc + 1) % 3, p2 = (pc + 2) % 3;
    if (!projection_test<p1>(s, q) || !projection_test<p2>(s, q)) return false;
    if (s.thin && !thin_test(s, q)) return false;
    return plane_test(s, q);
}

// voxelize.cu's column<D, false> over the whole grid, storing into bricks: the same
// candidates and the same tests, in the same order.
template <int D>
__device__ __forceinline__ void sparse_column(const Setup& s, long long local, BrickIndex& ix)
{
    constexpr int U = (D + 1) % 3, V = (D + 2) % 3;
    constexpr int pc = plane_of_axis(D);
    long long wu = s.hi[U] - s.lo[U] + 1;
    long long cu = s.lo[U] + local % wu;
    long long cv = s.lo[V] + local / wu;
    double q[3];
    q[D] = 0.0;
    q[U] = (double)cu;
    q[V] = (double)cv;
    if (!projection_test<pc>(s, q)) return;
    long long dlo, dhi;
    column_depths<D>(s, cu, cv, dlo, dhi);
    for (long long d = dlo; d <= dhi; ++d) {
        q[D] = (double)d;
        if (voxel_set<D>(s, q)) set_voxel(ix, (long long)q[0], (long long)q[1], (long long)q[2]);
    }
}

// One thread per column of a chunk (ends/counts: the column counts' scan).
extern "C" __global__ void sparse_surface_columns(const Setup* __restrict__ setups,
                                                  const long long* __restrict__ ends,
                                                  const long long* __restrict__ counts, long long n_tris,
                                                  long long n_items, const long long* __restrict__ lin,
                                                  const long long* __restrict__ row_start, long long nbx,
                                                  long long nby, unsigned int* __restrict__ pool,
                                                  unsigned long long* __restrict__ missing)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    const Setup& s = setups[t];
    long long local = item - (ends[t] - counts[t]);
    BrickIndex ix = {lin, row_start, nbx, nby, pool, missing, -1, 0};
    switch (s.dom) {
        case 0: sparse_column<0>(s, local, ix); break;
        case 1: sparse_column<1>(s, local, ix); break;
        default: sparse_column<2>(s, local, ix); break;
    }
}

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

// ------------------------------------------------------------------ solid (§4.1, §5)

// Crossing keys. A flip start at voxel (x, j, k) of brick slice bz = k / 8, brick row
// by = j / 8, row r = (k mod 8)·8 + (j mod 8) inside the brick row, is the key
//   (((bz − z0) << ybits | by) << (xbits + 6)) | (x << 6) | r
// (ybits: the bits of nby − 1, xbits: of nx − 1), z0 the first slice of the key's sort group
// (gpu_sparse.py sorts the keys a group of whole slices at a time; slices are in key order).
// 64-bit keys take z0 = 0 (one group); 32-bit keys (half the memory) hold a group of up to
// 2^(32 − ybits − xbits − 6) slices, z0 from slice_z0. A key's group is found in gstart (the
// groups' first keys, then n) and gz0 (their z0).
template <typename K>
__device__ __forceinline__ K crossing_key(long long bz, long long z0, long long by, long long x, long long r,
                                          int xbits, int ybits)
{
    return (K)((((((bz - z0) << ybits) | by) << (xbits + 6)) | (x << 6)) | r);
}

// The group of key index i: the last g with gstart[g] ≤ i (a handful of groups).
__device__ __forceinline__ long long key_group(const long long* __restrict__ gstart, long long n_groups, long long i)
{
    long long lo = 0, hi = n_groups - 1;
    while (lo < hi) {
        long long mid = (lo + hi + 1) >> 1;
        if (gstart[mid] <= i) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// solid_flip_starts over the whole grid (no box, nothing dropped), appending each flip
// start as one key. At most one key per work item. Keys are grouped by brick slice bz:
// slice_at[bz] counts the slice's keys (write = 0), or holds where its next key goes
// (write = 1: the counts' exclusive scan), so that the list is allocated at its size and
// sorted a group of slices at a time.
template <typename K>
__device__ __forceinline__ void solid_crossings(const double* __restrict__ pv, const int* __restrict__ tris,
                                                const long long* __restrict__ ends,
                                                const long long* __restrict__ counts, long long n_tris,
                                                long long n_items, int nx, int ny, int nz, int xbits, int ybits,
                                                const long long* __restrict__ slice_z0, int write,
                                                unsigned long long* __restrict__ slice_at, K* __restrict__ out)
{
    long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_items) return;
    long long t = owner_of(ends, n_tris, item);
    long long local = item - (ends[t] - counts[t]);
    YZSetup s;
    make_yz_setup(pv, tris, t, 0, 0, ny, nz, s);
    long long wj = s.jhi - s.jlo + 1;
    long long j = s.jlo + local % wj, k = s.klo + local / wj;
    double yc = (double)j + 0.5, zc = (double)k + 0.5;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        double E = s.sign[i] * ((s.q[i][0] - s.p[i][0]) * (zc - s.p[i][1]) - (s.q[i][1] - s.p[i][1]) * (yc - s.p[i][0]));
        if (!(E > 0 || (E == 0 && s.tl[i]))) return;
    }
    double q = ((s.nv0 - s.ny * yc) - s.nz * zc) / s.nx;
    double qbar = floor(q + 0.5);
    if (qbar >= (double)nx) return;
    long long x = qbar < 0.0 ? 0 : (long long)qbar;
    unsigned long long at = atomicAdd(slice_at + (k >> 3), 1ull);
    if (write)
        out[at] = crossing_key<K>(k >> 3, slice_z0[k >> 3], j >> 3, x, ((k & 7) << 3) | (j & 7), xbits, ybits);
}

// The index of every sorted key that starts a new brick row (the first key of each group
// too), appended to seg in any order (n_seg: how many; gpu_sparse.py sorts the few).
template <typename K>
__device__ __forceinline__ void row_segments(const K* __restrict__ keys, long long n, int xbits,
                                             const long long* __restrict__ gstart, long long n_groups,
                                             long long* __restrict__ seg, unsigned long long* __restrict__ n_seg)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool first = i == 0 || (keys[i] >> (xbits + 6)) != (keys[i - 1] >> (xbits + 6));
    if (!first && n_groups > 1) first = gstart[key_group(gstart, n_groups, i)] == i;
    if (first) seg[atomicAdd(n_seg, 1ull)] = i;
}

// One thread per brick row (its sorted crossings keys[seg[g] .. seg[g + 1])): walk along x
// with the parity of its 64 rows as a mask (§4.1's prefix xor, a brick at a time). A brick
// where crossings land is stored bit by bit; between such bricks every row is constant:
// all set → one run of full bricks (a tile record), mixed → each brick stored, none → nothing.
// write = 0 counts bricks and runs per row; write = 1 writes them at the scanned offsets.
__device__ __forceinline__ unsigned int row_byte(unsigned long long mask, int r)
{
    return ((mask >> r) & 1ull) ? 0xffu : 0u;
}

template <typename K>
__device__ __forceinline__ void solid_rows(const K* __restrict__ keys, const long long* __restrict__ seg,
                                           long long n_segs, int xbits, int ybits,
                                           const long long* __restrict__ gstart, const long long* __restrict__ gz0,
                                           long long n_groups, long long nbx, long long nby, int write,
                                           long long* __restrict__ n_bricks, long long* __restrict__ n_runs,
                                           long long* __restrict__ brick_lin, unsigned char* __restrict__ brick_rows,
                                           long long* __restrict__ runs)
{
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_segs) return;
    const long long s0 = seg[g], e = seg[g + 1];
    const long long xmask = (1ll << xbits) - 1;
    const long long row = (long long)(keys[s0] >> (xbits + 6));
    const long long by = row & ((1ll << ybits) - 1);
    const long long bz = gz0[key_group(gstart, n_groups, s0)] + (row >> ybits);
    const long long brow = bz * nby + by;
    long long nb = 0, nr = 0;
    long long b_at = write ? n_bricks[g] : 0, r_at = write ? n_runs[g] : 0;
    unsigned long long mask = 0ull;
    long long cursor = 0, i = s0;
    while (true) {
        long long bx = i < e ? ((long long)(keys[i] >> 6) & xmask) >> 3 : nbx;
        if (bx > cursor && mask) {  // bricks cursor .. bx - 1: every row constant
            if (mask == ~0ull) {
                if (write) {
                    long long* o = runs + 4 * (r_at + nr);
                    o[0] = cursor; o[1] = bx; o[2] = by; o[3] = bz;
                }
                ++nr;
            } else {
                for (long long b = cursor; b < bx; ++b, ++nb) {
                    if (!write) continue;
                    brick_lin[b_at + nb] = brow * nbx + b;
                    unsigned char* o = brick_rows + 64 * (b_at + nb);
                    for (int r = 0; r < 64; ++r) o[r] = (unsigned char)row_byte(mask, r);
                }
            }
        }
        if (i >= e) break;
        unsigned long long flip[8] = {0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull};  // byte r: starts in row r
        for (; i < e && ((((long long)(keys[i] >> 6)) & xmask) >> 3) == bx; ++i) {
            int r = (int)(keys[i] & 63);
            long long x = (long long)(keys[i] >> 6) & xmask;
            flip[r >> 3] ^= 1ull << (((r & 7) << 3) | (int)(x & 7));
        }
        // Twice: is any bit set (a brick whose rows all end unset is not stored), then write.
        for (int pass = 0; pass < 2; ++pass) {
            unsigned int any = 0u;
            for (int r = 0; r < 64; ++r) {  // prefix xor of the flips inside the brick, from the row's parity
                unsigned int f = (unsigned int)(flip[r >> 3] >> ((r & 7) << 3)) & 0xffu;
                unsigned int p = f;
                p ^= p << 1; p ^= p << 2; p ^= p << 4;
                p = (p ^ row_byte(mask, r)) & 0xffu;
                any |= p;
                if (pass) {
                    if (write) brick_rows[64 * (b_at + nb) + r] = (unsigned char)p;
                    mask ^= (unsigned long long)(__popc(f) & 1) << r;
                }
            }
            if (!pass && !any) {  // nothing stored; the parity still changes
                for (int r = 0; r < 64; ++r)
                    mask ^= (unsigned long long)(__popc((unsigned int)(flip[r >> 3] >> ((r & 7) << 3)) & 0xffu) & 1) << r;
                break;
            }
            if (pass) {
                if (write) brick_lin[b_at + nb] = brow * nbx + bx;
                ++nb;
            }
        }
        cursor = bx + 1;
    }
    if (!write) {
        n_bricks[g] = nb;
        n_runs[g] = nr;
    }
}

// The launches, for 64-bit keys and (suffix 32) for 32-bit keys.
#define VOXFX_SOLID_LAUNCHES(SUFFIX, K)                                                                              \
    extern "C" __global__ void sparse_solid_crossings##SUFFIX(                                                       \
        const double* __restrict__ pv, const int* __restrict__ tris, const long long* __restrict__ ends,             \
        const long long* __restrict__ counts, long long n_tris, long long n_items, int nx, int ny, int nz,           \
        int xbits, int ybits, const long long* __restrict__ slice_z0, int write,                                     \
        unsigned long long* __restrict__ slice_at, K* __restrict__ out)                                              \
    {                                                                                                                \
        solid_crossings<K>(pv, tris, ends, counts, n_tris, n_items, nx, ny, nz, xbits, ybits, slice_z0, write,       \
                           slice_at, out);                                                                           \
    }                                                                                                                \
    extern "C" __global__ void sparse_row_segments##SUFFIX(                                                          \
        const K* __restrict__ keys, long long n, int xbits, const long long* __restrict__ gstart,                    \
        long long n_groups, long long* __restrict__ seg, unsigned long long* __restrict__ n_seg)                     \
    {                                                                                                                \
        row_segments<K>(keys, n, xbits, gstart, n_groups, seg, n_seg);                                               \
    }                                                                                                                \
    extern "C" __global__ void sparse_solid_rows##SUFFIX(                                                            \
        const K* __restrict__ keys, const long long* __restrict__ seg, long long n_segs, int xbits, int ybits,       \
        const long long* __restrict__ gstart, const long long* __restrict__ gz0, long long n_groups, long long nbx,  \
        long long nby, int write, long long* __restrict__ n_bricks, long long* __restrict__ n_runs,                  \
        long long* __restrict__ brick_lin, unsigned char* __restrict__ brick_rows, long long* __restrict__ runs)      \
    {                                                                                                                \
        solid_rows<K>(keys, seg, n_segs, xbits, ybits, gstart, gz0, n_groups, nbx, nby, write, n_bricks, n_runs,     \
                      brick_lin, brick_rows, runs);                                                                  \
    }

VOXFX_SOLID_LAUNCHES(, long long)
VOXFX_SOLID_LAUNCHES(32, unsigned int)
