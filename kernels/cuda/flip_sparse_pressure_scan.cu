// The sparse pressure set-up's prefix sums (sparse_pressure_setup.inclusive_scan): the
// compactions of its unknowns and multigrid levels scan 0/1 flags, row by row. Moved out of
// flip_sparse_pressure_setup.cu (its tables' kernels), which includes the block scans too.

#include "voxfx_block_scan.cuh"  // scan_block_sum, scan_range: the two-launch scan
#include "voxfx_reduce.cuh"      // warp_all, warp_ballot, warp_all_sum, warp_inclusive_scan: scan_lookback

// ---- Inclusive prefix sums of int rows (cupy.cumsum(a, axis=1) of a (rows, n) array, the
// same integers) in two launches over a grid (tiles, rows) whatever n: cupy's scan along an
// axis takes one launch per doubling of the distance (~20 at a million cells), and the
// set-up scans twice a level. Each block owns `tile` items of its row (blockIdx.y); the
// first launch sums every tile, the second adds the earlier tiles' sums of its row to a
// running scan of its own tile, blockDim.x items at a time.

// sums[row · gridDim.x + tile] = Σ of the tile's items of its row.
extern "C" __global__ void scan_tile_sums(const int* __restrict__ in, int n, int tile, int* __restrict__ sums)
{
    const int* a = in + (size_t)blockIdx.y * n;
    const int lo = (int)blockIdx.x * tile, hi = min(n, lo + tile);
    int s = 0;
    for (int i = lo + (int)threadIdx.x; i < hi; i += (int)blockDim.x) s += a[i];
    s = scan_block_sum(s);
    if (threadIdx.x == 0) sums[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = s;
}

// out[row][i] = Σ in[row][0..i], from the tile sums of scan_tile_sums.
extern "C" __global__ void scan_tiles(const int* __restrict__ in, int n, int tile, const int* __restrict__ sums,
                                      int* __restrict__ out)
{
    const int* a = in + (size_t)blockIdx.y * n;
    int* o = out + (size_t)blockIdx.y * n;
    const int* row_sums = sums + (size_t)blockIdx.y * gridDim.x;
    int before = 0;
    for (int t = (int)threadIdx.x; t < (int)blockIdx.x; t += (int)blockDim.x) before += row_sums[t];
    const int lo = (int)blockIdx.x * tile;
    scan_range(a, lo, min(n, lo + tile), scan_block_sum(before), o);
}

// ---- The same prefix sums in one launch (sparse_pressure_setup.SCAN "lookback"): a
// single-pass scan with decoupled look-back (Merrill & Garland 2016). Each block takes the
// next tile by a ticket (tickets follow the order blocks start in, so every tile a block
// waits for belongs to a block already running), sums its tile, publishes that aggregate,
// then its first warp walks back over the tiles before it, adding aggregates until a tile
// that has published its inclusive prefix, publishes its own prefix and writes its tile's
// scan from that carry. Integer sums: the same integers as the two launches in any order.
// Two ways of a tile (sparse_pressure_scan.SCAN_WAY, VOXFX_SPARSE_SCAN_WAY), one body
// (scan_lookback_tile) that every entry calls:
// - "0" (scan_lookback, scan_lookback_pair): the tile read twice — summed with one item a
//   thread, then scanned in chunks of SCAN_ITEMS consecutive items a thread — and a look-back
//   window of 32 tiles (a lane each).
// - "1" (scan_lookback_wide, scan_lookback_pair_wide; session 22, s22a): the tile read once,
//   SCAN_VECS int4 vectors a thread held in registers (coalesced 16-byte loads and stores
//   where the row is 16-byte aligned, else the same items one by one), and a window of
//   SCAN_WINDOW · 32 tiles a look-back step (four words a lane read together). Its tile is
//   SCAN_VECS · 4 items a thread (4,096 at 256 threads). Why: "0" ran level 0's 3 × 1.74M
//   items (8M row, H100) at 0.068 ms, ~620 GB/s of its 41.8 MB: the second read, the
//   chunk's 8 scalar stores a thread 32 B apart (8 store instructions a warp for 1 KB), and
//   2,553 tiles whose look-back walks 32 tiles a step. "1" there: 0.025 ms (~1.65 TB/s; the
//   kernel alone 69.6 → 25.6 µs; SCAN_VECS 2 / 8: 32.5 / 24.2 µs, SCAN_WINDOW 1: 24.5 µs,
//   SCAN_WIDE_BLOCKS 5: 24.8 µs — within ~1 µs, the coarse levels' small scans the other way).
//
// status[row · tiles + tile]: epoch << 33 | is-prefix << 32 | value (a 32-bit count).
// ctrl (device, int32 × 3, kept between launches): the epoch of this launch, the next
// ticket, the blocks done. A word of another epoch is not yet published; the last block
// to finish sets the ticket and done count back to 0 and moves the epoch on (1 … 2^31 − 1,
// never 0: a zeroed status array holds nothing), so the next launch — from the host or a
// graph replay — finds its words unpublished without clearing them.
#define SCAN_ITEMS 8
#ifndef SCAN_VECS  // "1": int4 vectors a thread (-D: bench/flip_scan_ways.py's variants)
#define SCAN_VECS 4
#endif
#ifndef SCAN_WINDOW  // "1": status words a lane a look-back step
#define SCAN_WINDOW 4
#endif
#ifndef SCAN_WIDE_BLOCKS  // "1": blocks of 256 an SM, __launch_bounds__ (sm_90: 4 → 63 registers, 5 → 48; none spilled)
#define SCAN_WIDE_BLOCKS 4
#endif

__device__ __forceinline__ unsigned long long scan_word(unsigned int epoch, bool prefix, int value)
{
    return ((unsigned long long)epoch << 33) | ((unsigned long long)(prefix ? 1u : 0u) << 32) | (unsigned int)value;
}

// The look-back's lowest lane and 64-bit publication; on the host harness (one thread a
// block, blocks in turn: tests/unit/test_cuda_sparse_pressure_setup_host.py) the one lane's
// and a plain store.
__device__ __forceinline__ int scan_first_lane(unsigned int bits)  // the lowest set bit's lane (bits ≠ 0)
{
#ifdef __CUDA_ARCH__
    return __ffs((int)bits) - 1;
#else
    return __builtin_ffs((int)bits) - 1;
#endif
}

__device__ __forceinline__ void scan_publish(unsigned long long* word, unsigned long long value)
{
#ifdef __CUDA_ARCH__
    atomicExch(word, value);  // one 64-bit store a reader sees whole
#else
    *word = value;
#endif
}

__device__ __forceinline__ void scan_fence()
{
#ifdef __CUDA_ARCH__
    __threadfence();
#endif
}

// Σ v over the block (every thread gets it): warp sums, then the warps' sums.
__device__ __forceinline__ int scan_block_total(int v)
{
    __shared__ int part[32];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)((blockDim.x + 31) >> 5);
    v = warp_all_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    int total = 0;
    for (int k = 0; k < warps; ++k) total += part[k];
    __syncthreads();  // part is written again by the next call
    return total;
}

// The exclusive prefix of tile t of its row (status row st), by the block's first warp; lane 0
// has it. A step reads WORDS words a lane — lane k word q: tile at − k − q · lanes, so the
// step's tiles lie at distances k + q · lanes, nearest first in (q, k) order — waits until
// each has published something (a tile before 0 counts as a published prefix of 0), adds the
// aggregates up to the nearest published prefix (that one included) and stops there, else
// steps on.
template <int WORDS>
__device__ __forceinline__ int scan_look_back(const unsigned long long* st, int t, unsigned int epoch)
{
    const int lane = (int)(threadIdx.x & 31), lanes = min(32, (int)blockDim.x);
    int before = 0;
    for (int at = t - 1; at >= 0; at -= WORDS * lanes) {
        unsigned long long w[WORDS];
        while (true) {  // until every tile of the window has published something
            bool ready = true;
#pragma unroll
            for (int q = 0; q < WORDS; ++q) {
                const int j = at - lane - q * lanes;
                w[q] = j >= 0 ? *(volatile const unsigned long long*)(st + j) : 0ull;
                ready = ready && (j < 0 || (unsigned int)(w[q] >> 33) == epoch);
            }
            if (warp_all(ready)) break;
        }
        int mine = 0;
        bool found = false;  // the same in every lane (a ballot's)
#pragma unroll
        for (int q = 0; q < WORDS; ++q) {
            if (!found) {
                const int j = at - lane - q * lanes;
                const unsigned int bits = warp_ballot(j < 0 || ((w[q] >> 32) & 1u));
                const int nearest = bits ? scan_first_lane(bits) : lanes;  // the nearest tile with a prefix
                mine += lane <= nearest && j >= 0 ? (int)(unsigned int)w[q] : 0;
                found = bits != 0u;
            }
        }
        before += warp_all_sum(mine);
        if (found) break;
    }
    return before;
}

// The tile's aggregate published (tile 0: its prefix), the look-back by the first warp, the
// prefix published: the carry before the tile, every thread gets it.
template <int WORDS>
__device__ __forceinline__ int scan_tile_carry(unsigned long long* st, int t, unsigned int epoch, int total)
{
    __shared__ int s_before;
    if (threadIdx.x == 0) scan_publish(st + t, scan_word(epoch, t == 0, total));  // where the tiles after see it
    if (threadIdx.x < 32) {
        const int before = t == 0 ? 0 : scan_look_back<WORDS>(st, t, epoch);
        if (threadIdx.x == 0) {
            if (t > 0) scan_publish(st + t, scan_word(epoch, true, before + total));
            s_before = before;
        }
    }
    __syncthreads();
    return s_before;
}

// "0": out[lo, hi) = carry + the running sums of in, the tile summed, then scanned in chunks.
__device__ __forceinline__ void scan_tile_chunks(const int* __restrict__ a, int* __restrict__ o,
                                                 unsigned long long* st, int lo, int hi, int t, unsigned int epoch)
{
    int s = 0;
    for (int i = lo + (int)threadIdx.x; i < hi; i += (int)blockDim.x) s += a[i];
    int carry = scan_tile_carry<1>(st, t, epoch, scan_block_total(s));
    const int chunk = SCAN_ITEMS * (int)blockDim.x;
    for (int at = lo; at < hi; at += chunk) {  // SCAN_ITEMS consecutive items a thread
        const int first = at + SCAN_ITEMS * (int)threadIdx.x;
        int v[SCAN_ITEMS], mine = 0;
#pragma unroll
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            v[k] = first + k < hi ? a[first + k] : 0;
            mine += v[k];
        }
        const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
        const int warps = (int)((blockDim.x + 31) >> 5);
        __shared__ int part[32];
        const int x = warp_inclusive_scan(mine);
        if (lane == 31 || (int)threadIdx.x + 1 == (int)blockDim.x) part[warp] = x;
        __syncthreads();
        int run = carry + x - mine;  // the sum before this thread's first item
        for (int k = 0; k < warps; ++k) {
            if (k < warp) run += part[k];
            carry += part[k];
        }
        __syncthreads();  // part is written again by the next chunk
#pragma unroll
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            run += v[k];
            if (first + k < hi) o[first + k] = run;
        }
    }
}

// "1": the same, the tile (at most SCAN_VECS · 4 · blockDim.x items) read once: thread x holds
// vectors k = 0 … SCAN_VECS − 1 of items lo + 4 (k · blockDim.x + x) … + 3 (k-major: a vector
// of column k comes before every vector of column k + 1), their running sums in place; one
// warp scan a column, one barrier for the columns' warp sums, the look-back, the stores.
__device__ __forceinline__ void scan_tile_vectors(const int* __restrict__ a, int* __restrict__ o,
                                                  unsigned long long* st, int lo, int hi, int t, unsigned int epoch)
{
    __shared__ int part[SCAN_VECS][32];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)((blockDim.x + 31) >> 5);
    const bool vec = ((((unsigned long long)(size_t)a) | ((unsigned long long)(size_t)o)) & 15ull) == 0 && (lo & 3) == 0;
    int4 v[SCAN_VECS];
    int x[SCAN_VECS];
#pragma unroll
    for (int k = 0; k < SCAN_VECS; ++k) {  // every load issued before any is used
        const int i = lo + 4 * (k * (int)blockDim.x + (int)threadIdx.x);
        if (vec && i + 3 < hi) {
            v[k] = *reinterpret_cast<const int4*>(a + i);
        } else {
            v[k].x = i < hi ? a[i] : 0;
            v[k].y = i + 1 < hi ? a[i + 1] : 0;
            v[k].z = i + 2 < hi ? a[i + 2] : 0;
            v[k].w = i + 3 < hi ? a[i + 3] : 0;
        }
    }
#pragma unroll
    for (int k = 0; k < SCAN_VECS; ++k) {
        v[k].y += v[k].x;
        v[k].z += v[k].y;
        v[k].w += v[k].z;
        x[k] = warp_inclusive_scan(v[k].w);
        if (lane == 31 || (int)threadIdx.x + 1 == (int)blockDim.x) part[k][warp] = x[k];
    }
    __syncthreads();
    int total = 0;
#pragma unroll
    for (int k = 0; k < SCAN_VECS; ++k) {  // x[k] becomes the sum before vector k's first item
        int column = 0, earlier = 0;
        for (int w = 0; w < warps; ++w) {
            const int p = part[k][w];
            if (w < warp) earlier += p;
            column += p;
        }
        x[k] += total + earlier - v[k].w;
        total += column;
    }
    const int carry = scan_tile_carry<SCAN_WINDOW>(st, t, epoch, total);
#pragma unroll
    for (int k = 0; k < SCAN_VECS; ++k) {
        const int i = lo + 4 * (k * (int)blockDim.x + (int)threadIdx.x), add = carry + x[k];
        const int4 r = make_int4(v[k].x + add, v[k].y + add, v[k].z + add, v[k].w + add);
        if (vec && i + 3 < hi) {
            *reinterpret_cast<int4*>(o + i) = r;
        } else {
            if (i < hi) o[i] = r.x;
            if (i + 1 < hi) o[i + 1] = r.y;
            if (i + 2 < hi) o[i + 2] = r.z;
            if (i + 3 < hi) o[i + 3] = r.w;
        }
    }
}

// The one body of the four entries: the ticket, its tile — of A (rows_a rows of n_a items,
// tiles_a tiles of tile_a a row) for the first rows_a · tiles_a tickets, else of B (one row),
// B's status words after A's; a tile looks back only within its own row of its own set, at
// tiles of lower tickets (blocks already running), so each set's integers are its own
// launch's — then the tile by its way, then the last block readies ctrl for the next launch.
template <bool VECTORS>
__device__ __forceinline__ void scan_lookback_tile(const int* __restrict__ in_a, int n_a, int tile_a, int tiles_a,
                                                   int rows_a, int* __restrict__ out_a, const int* __restrict__ in_b,
                                                   int n_b, int tile_b, int tiles_b, int* __restrict__ out_b,
                                                   unsigned long long* __restrict__ status,
                                                   unsigned int* __restrict__ ctrl)
{
    __shared__ unsigned int s_epoch;
    __shared__ int s_ticket;
    if (threadIdx.x == 0) {
        s_epoch = *(volatile unsigned int*)ctrl;  // before this block counts itself done: the launch's epoch
        s_ticket = (int)atomicAdd(ctrl + 1, 1u);
    }
    __syncthreads();
    const unsigned int epoch = s_epoch;
    const bool in_first = s_ticket < rows_a * tiles_a;
    const int ticket = in_first ? s_ticket : s_ticket - rows_a * tiles_a;
    const int n = in_first ? n_a : n_b, tile = in_first ? tile_a : tile_b, tiles = in_first ? tiles_a : tiles_b;
    const int row = ticket / tiles, t = ticket - row * tiles;
    const int* a = (in_first ? in_a : in_b) + (size_t)row * n;
    int* o = (in_first ? out_a : out_b) + (size_t)row * n;
    unsigned long long* st = status + (in_first ? (size_t)0 : (size_t)rows_a * tiles_a) + (size_t)row * tiles;
    const int lo = t * tile, hi = min(n, lo + tile);
    if (VECTORS) scan_tile_vectors(a, o, st, lo, hi, t, epoch);
    else scan_tile_chunks(a, o, st, lo, hi, t, epoch);
    if (threadIdx.x == 0) {  // the last block of the launch readies ctrl for the next one
        scan_fence();
        if (atomicAdd(ctrl + 2, 1u) == gridDim.x - 1) {
            ctrl[1] = 0;
            ctrl[2] = 0;
            ctrl[0] = epoch == 0x7fffffffu ? 1u : epoch + 1u;
            scan_fence();
        }
    }
}

// out[row][i] = Σ in[row][0..i]: gridDim.x = rows · tiles blocks of tiles `tile` items wide
// (module notes): the body with no second set.
extern "C" __global__ void scan_lookback(const int* __restrict__ in, int n, int tile, int tiles,
                                         unsigned long long* __restrict__ status, unsigned int* __restrict__ ctrl,
                                         int* __restrict__ out)
{
    scan_lookback_tile<false>(in, n, tile, tiles, (int)gridDim.x / tiles, out, in, n, tile, tiles, out, status, ctrl);
}

// ---- Two independent scans in one launch (sparse_pressure_scan.inclusive_scans,
// VOXFX_SPARSE_SCAN_JOIN "1", h21m): the body over two sets of rows, A then B, their tickets
// one sequence (A's rows_a · tiles_a tiles first). The coarse levels pair a level's red/black
// flags (2 rows) with the next level's take (1 row): both are ready once the level's keys are
// (sparse_pressure_workspace_levels), 7 → 5 scan launches at 8M.
extern "C" __global__ void scan_lookback_pair(const int* __restrict__ in_a, int n_a, int tile_a, int tiles_a,
                                              int rows_a, int* __restrict__ out_a, const int* __restrict__ in_b,
                                              int n_b, int tile_b, int tiles_b, int* __restrict__ out_b,
                                              unsigned long long* __restrict__ status, unsigned int* __restrict__ ctrl)
{
    scan_lookback_tile<false>(in_a, n_a, tile_a, tiles_a, rows_a, out_a, in_b, n_b, tile_b, tiles_b, out_b, status,
                              ctrl);
}

// "1"'s entries, the pair's arguments both: scan_lookback_wide scans A alone (B's tiles_b 0).
extern "C" __global__ void __launch_bounds__(256, SCAN_WIDE_BLOCKS) scan_lookback_wide(
    const int* __restrict__ in_a, int n_a, int tile_a, int tiles_a, int rows_a, int* __restrict__ out_a,
    const int* __restrict__ in_b, int n_b, int tile_b, int tiles_b, int* __restrict__ out_b,
    unsigned long long* __restrict__ status, unsigned int* __restrict__ ctrl)
{
    scan_lookback_tile<true>(in_a, n_a, tile_a, tiles_a, rows_a, out_a, in_b, n_b, tile_b, tiles_b, out_b, status,
                             ctrl);
}

extern "C" __global__ void __launch_bounds__(256, SCAN_WIDE_BLOCKS) scan_lookback_pair_wide(
    const int* __restrict__ in_a, int n_a, int tile_a, int tiles_a, int rows_a, int* __restrict__ out_a,
    const int* __restrict__ in_b, int n_b, int tile_b, int tiles_b, int* __restrict__ out_b,
    unsigned long long* __restrict__ status, unsigned int* __restrict__ ctrl)
{
    scan_lookback_tile<true>(in_a, n_a, tile_a, tiles_a, rows_a, out_a, in_b, n_b, tile_b, tiles_b, out_b, status,
                             ctrl);
}
