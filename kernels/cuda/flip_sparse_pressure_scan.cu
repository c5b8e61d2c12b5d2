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
// then its first warp walks back over the tiles before it 32 at a time, adding aggregates
// until a tile that has published its inclusive prefix, publishes its own prefix and scans
// its tile from that carry, SCAN_ITEMS consecutive items a thread. Integer sums: the same
// integers as the two launches in any order.
//
// status[row · tiles + tile]: epoch << 33 | is-prefix << 32 | value (a 32-bit count).
// ctrl (device, int32 × 3, kept between launches): the epoch of this launch, the next
// ticket, the blocks done. A word of another epoch is not yet published; the last block
// to finish sets the ticket and done count back to 0 and moves the epoch on (1 … 2^31 − 1,
// never 0: a zeroed status array holds nothing), so the next launch — from the host or a
// graph replay — finds its words unpublished without clearing them.
#define SCAN_ITEMS 8

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

// The exclusive prefix of tile t of its row (status row st), by the block's first warp (lane
// k reads tile at − k; a tile before 0 counts as a published prefix of 0); lane 0 has it.
__device__ __forceinline__ int scan_look_back(const unsigned long long* st, int t, unsigned int epoch)
{
    const int lane = (int)(threadIdx.x & 31), lanes = min(32, (int)blockDim.x);
    int before = 0;
    for (int at = t - 1; at >= 0; at -= lanes) {
        const int j = at - lane;
        unsigned long long w = 0;
        bool ready = false;
        while (true) {  // until every tile of the window has published something
            if (j >= 0) w = *(volatile const unsigned long long*)(st + j);
            ready = j < 0 || (unsigned int)(w >> 33) == epoch;
            if (warp_all(ready)) break;
        }
        const bool prefix = j < 0 || ((w >> 32) & 1u);
        const unsigned int found = warp_ballot(prefix);
        const int nearest = found ? scan_first_lane(found) : lanes;  // the nearest tile with a prefix
        before += warp_all_sum(lane <= nearest && j >= 0 ? (int)(unsigned int)w : 0);
        if (found) break;
    }
    return before;
}

// out[row][i] = Σ in[row][0..i]: rows · tiles blocks of tiles `tile` items wide (module notes).
extern "C" __global__ void scan_lookback(const int* __restrict__ in, int n, int tile, int tiles,
                                         unsigned long long* __restrict__ status, unsigned int* __restrict__ ctrl,
                                         int* __restrict__ out)
{
    __shared__ unsigned int s_epoch;
    __shared__ int s_ticket, s_before;
    if (threadIdx.x == 0) {
        s_epoch = *(volatile unsigned int*)ctrl;  // before this block counts itself done: the launch's epoch
        s_ticket = (int)atomicAdd(ctrl + 1, 1u);
    }
    __syncthreads();
    const unsigned int epoch = s_epoch;
    const int row = s_ticket / tiles, t = s_ticket - row * tiles;
    const int* a = in + (size_t)row * n;
    int* o = out + (size_t)row * n;
    unsigned long long* st = status + (size_t)row * tiles;
    const int lo = t * tile, hi = min(n, lo + tile);
    int s = 0;
    for (int i = lo + (int)threadIdx.x; i < hi; i += (int)blockDim.x) s += a[i];
    const int total = scan_block_total(s);
    if (threadIdx.x == 0) {  // the aggregate (tile 0: its prefix) where the tiles after can see it
        scan_publish(st + t, scan_word(epoch, t == 0, total));
    }
    if (threadIdx.x < 32) {
        const int before = t == 0 ? 0 : scan_look_back(st, t, epoch);
        if (threadIdx.x == 0) {
            if (t > 0) scan_publish(st + t, scan_word(epoch, true, before + total));
            s_before = before;
        }
    }
    __syncthreads();
    int carry = s_before;
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

// ---- Two independent scans in one launch (sparse_pressure_scan.inclusive_scans,
// VOXFX_SPARSE_SCAN_JOIN "1"): scan_lookback over the tiles of two sets of rows, A (rows_a
// rows of n_a items, tiles_a tiles of tile_a) then B, their tickets one sequence — A's
// rows_a · tiles_a tiles first — and B's status words after A's. A tile looks back only
// within its own row of its own set, at tiles of lower tickets (blocks already running),
// so each set's integers are its own launch's. scan_lookback's body from the ticket on (its
// twin: scan_lookback itself is left as it is, so that the default path's PTX stays the
// same; fold the two once this is the default). The coarse levels pair a level's red/black
// flags (2 rows) with the next level's take (1 row): both are ready once the level's keys
// are (sparse_pressure_workspace_levels), 7 → 5 scan launches at 8M.
// scan_block_total with its own shared words: a shared variable of a function two kernels
// call is emitted outside both entries, which would move scan_lookback's PTX (compare_ptx).
__device__ __forceinline__ int scan_pair_total(int v)
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

extern "C" __global__ void scan_lookback_pair(const int* __restrict__ in_a, int n_a, int tile_a, int tiles_a,
                                              int rows_a, int* __restrict__ out_a, const int* __restrict__ in_b,
                                              int n_b, int tile_b, int tiles_b, int* __restrict__ out_b,
                                              unsigned long long* __restrict__ status, unsigned int* __restrict__ ctrl)
{
    __shared__ unsigned int s_epoch;
    __shared__ int s_ticket, s_before;
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
    int s = 0;
    for (int i = lo + (int)threadIdx.x; i < hi; i += (int)blockDim.x) s += a[i];
    const int total = scan_pair_total(s);
    if (threadIdx.x == 0) {  // the aggregate (tile 0: its prefix) where the tiles after can see it
        scan_publish(st + t, scan_word(epoch, t == 0, total));
    }
    if (threadIdx.x < 32) {
        const int before = t == 0 ? 0 : scan_look_back(st, t, epoch);
        if (threadIdx.x == 0) {
            if (t > 0) scan_publish(st + t, scan_word(epoch, true, before + total));
            s_before = before;
        }
    }
    __syncthreads();
    int carry = s_before;
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
