// Level 0's smoothing brick by brick (issue 24, helper h19a; kernels/flip/sparse_multigrid_bricks.py,
// VOXFX_SPARSE_MG_SMOOTHER "brick"): a whole pre- or post-smoothing in one launch where the
// red-black sweeps take one a colour. A block a brick of the grid's pool (grid-stride over its
// slots, their count from the brick table: the loop is a captured graph, sized to capacities)
// holds the brick's 8³ cells and one layer of halo a face in shared memory (10³ floats, the
// place ((z + 1)·10 + y + 1)·10 + x + 1), the cells' unknowns, b and diag beside them, and runs
// BRICK_SWEEPS sweeps (default MG_SWEEPS) inside the brick — per cell sparse_multigrid.sweep's
// rule, x_c ← x_c + ω·((b_c + Σ x_n)/diag_c − x_c), the six added −x, +x, −y, +y, −z, +z
// (relaxed(), no FMA: compiled with the V-cycle's options) — the halo held at its value at the
// start: 0 before the coarse correction (mg_brick_pre_smooth, red then black, reads no other
// brick), the x after the prolongation after it (mg_brick_post_smooth, black then red: the
// adjoint, so the V-cycle stays symmetric; it reads x_in and writes x_out, another buffer, so no
// block reads a halo another has already smoothed, and sums r·z = Σ b·x_out: a partial a block,
// the last block to finish adding them in block order). Cells that are not unknowns hold 0. The
// same values as the NumPy reference bit for bit for any grid and block
// (tests/unit/test_cuda_sparse_brick_smooth_host.py; on the H100 the solver's z for every block
// shape, tests/gpu/test_flip_sparse_mg_bricks_gpu.py).
//
// Measured (H100 80GB HBM3, driver 580.159.04, 8M dam break, 3,198 slots; event pairs a launch,
// bench/RESULTS.md h19a and h19a2): round 1 (512 threads on the reduction grid, loads one after
// another) pre 35 µs, post 40, the PCG loop 222.3 → 216.3 µs an iteration; round 2 (a block a
// slot, loads batched) at 128 threads pre 28, post 48, the loop 222.1 → 217.8 (16 blocks an SM:
// no better; 512 threads: worse); round 3 (the colour passes over the colour's 256 cells, the last
// block's sum with 8 loads in flight; session 20's call 1 and h20a's call) at 128 threads pre 24-27,
// post 35-37 at 2 and 3 sweeps. The span loads below (h20a, the default way) pre 20-21, post 28-31,
// the loop at 3 sweeps 212.4 (these) → 203.1 µs an iteration (red-black 221.9).

#include "voxfx_mg_bricks.cuh"  // BT_*: level 0's arrays
#include "voxfx_mg_cell.cuh"    // relaxed
#include "voxfx_reduce.cuh"     // block_sum2, warp_sum
#include "voxfx_sparse.cuh"     // SPARSE_CELLS

#include "voxfx_brick_smooth.cuh"  // BS_*, bs_*: the block-a-brick loads, sweeps, pre- and post-smoothing

// The entries: any block of at most 512 threads (a multiple of 32); the _16 ones 128 threads, their
// registers bounded so that 16 blocks fit an SM (32 a thread: sparse_pressure_vcycle.SMOOTH_THREADS
// "128x16").
#define BS_PRE_ARGS                                                                                          \
    const float *__restrict__ b, const unsigned long long *__restrict__ ptrs, const float *__restrict__ diag, \
        const int *__restrict__ sizes, float *__restrict__ x, const int *__restrict__ state
#define BS_POST_ARGS                                                                                            \
    const float *__restrict__ x_in, const float *__restrict__ b, const unsigned long long *__restrict__ ptrs,    \
        const float *__restrict__ diag, const int *__restrict__ sizes, float *__restrict__ x_out,               \
        double *__restrict__ block_rz, int *__restrict__ ticket, double *__restrict__ partials_rz, int reduce_blocks, \
        const int *__restrict__ state

extern "C" __global__ void __launch_bounds__(BS_THREADS) mg_brick_pre_smooth(BS_PRE_ARGS)
{
    bs_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(128, 16) mg_brick_pre_smooth_16(BS_PRE_ARGS)
{
    bs_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(BS_THREADS) mg_brick_post_smooth(BS_POST_ARGS)
{
    bs_post(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}

extern "C" __global__ void __launch_bounds__(128, 16) mg_brick_post_smooth_16(BS_POST_ARGS)
{
    bs_post(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}

// ------------------------------------------------------------------------------------------------
// The span loads (VOXFX_SPARSE_MG_BRICK_THREADS "span", issue 24, helper h20a): the same sweeps, the
// same values bit for bit, without a per-cell lookup of the cell's unknown. Level 0 is numbered red
// then black, each colour in flat-cell order (unk_order, sparse_pressure.Unknowns; flat = slot·512 +
// l), so the unknowns of one parity class q = (x + y + z) & 1 of a brick are one contiguous run in
// local order. A slot's record in the span table (BSS_WORDS ints, built once a set-up by
// mg_brick_span_table from position0; sparse_multigrid_bricks.span_table the reference): mask[16]
// (bit l & 31 of word l >> 5: cell l is an unknown), base[q][w] (the unknown of the first class-q
// cell at or after word w: the class's first unknown plus its unknowns in words before w) and the
// red parity. Cell l of class q has the unknown base[q][l >> 5] + popc(mask & class(q) & below(l)).
// A thread holds BSS_CPT cells of each class (k = t + j·BSS_THREADS of the class's 256 in z, y, x
// order: a warp's 32 cells are consecutive unknowns of the run, so b, diag and x come in whole
// lines), their place, unknown, b and diag in registers through the sweeps; shared memory holds x.
// The chains: record → b, diag, x (the own cells), nbr27 → the neighbour's record → x (the halo).
// Why no renumbering of level 0 (h20a's brief: level 0 brick by brick): the numbering already has a
// brick's runs, so the record gives the same direct, contiguous loads, and level 0's other passes,
// the set-up and the red-black default keep their tables and PTX.
//
// Measured (H100 80GB HBM3, driver 580.159.04, 8M dam break, 3,198 slots, 4,968 blocks; h20a's call,
// bench/flip_mg_span_call.sh; event pairs of one iteration, the PCG loop's µs an iteration in one
// process): at 3 sweeps red-black 221.9, the position kernels (128 threads) 212.4 (pre 27, post 37),
// span 207.0 (25, 40), span12 203.1 (21, 31), spanh 204.3 (25, 34); at 2 sweeps red-black 221.4, 128
// threads 205.5 (24, 35), span12 197.9 (20, 28). The 8M row at 3 sweeps (separate processes): pressure
// 3.58 / 3.56 ms red-black, 3.40 / 3.33 span12, the same CG counts. Still about twice the ~10-15 µs a
// kernel first hoped for: the chains stay two and three loads deep (a record is one load as position0
// was), and the blocks of a wave load, then sweep, then store together.
#define BT_SPAN 6          // brick_ptrs' seventh word (span solvers): the span table
#define BT_SPAN_HALO 7     // its eighth ("spanh" solvers): the halo table (BS_FACES ints a slot), else 0
#define BSS_WORDS 64       // a slot's record: mask [0, 16), base of class 0 [16, 32), class 1 [32, 48), red parity
#define BSS_BASE 16
#define BSS_RED 48
#ifndef BSS_THREADS        // threads a block of the span kernels (the host harness: 1)
#define BSS_THREADS 128
#endif
#define BSS_CPT (SPARSE_CELLS / 2 / BSS_THREADS)              // a thread's cells of one class
#define BSS_FPT ((BS_FACES + BSS_THREADS - 1) / BSS_THREADS)  // a thread's halo places
#define BSS_TABLE_SLOTS 8  // slots a block of mg_brick_span_table (a thread a mask word: 128 threads)

// The class-q bits of mask word w (bit i: cell 32w + i, y = 4 (w & 1) + i / 8, z = w / 2).
__device__ __forceinline__ unsigned bss_class_bits(int q, int w)
{
    return ((q ^ (w >> 1)) & 1) ? 0x55AA55AAu : 0xAA55AA55u;
}

// Cell k (0 … 255) of class q: z = k / 32, y = k / 4 % 8, x = 2 (k % 4) + the bit that makes x + y + z ≡ q.
__device__ __forceinline__ int bss_cell(int q, int k)
{
    const int z = k >> 5, y = (k >> 2) & 7;
    return (z << 6) | (y << 3) | ((k & 3) << 1) | ((y + z + q) & 1);
}

// The unknown of cell l (class q) from its slot's record *rec* (m where none); both words loaded at once.
__device__ __forceinline__ int bss_unknown(const int* __restrict__ rec, int q, int l, int m)
{
    const int w = l >> 5;
    const unsigned mask = (unsigned)rec[w], bit = 1u << (l & 31);
    const int base = rec[BSS_BASE + 16 * q + w];
    return (mask & bit) ? base + __popc(mask & bss_class_bits(q, w) & (bit - 1u)) : m;
}

// The span table from position0 (m where none): a thread a (slot, mask word), BSS_TABLE_SLOTS slots a
// block in turn; a free slot (nbr27's centre −1) holds no unknown. Any grid and block. Where brick_ptrs
// names a halo table (BT_SPAN_HALO), each slot's BS_FACES halo unknowns too (a thread a place).
extern "C" __global__ void mg_brick_span_table(const unsigned long long* __restrict__ ptrs,
                                               const int* __restrict__ sizes, int* __restrict__ span)
{
    __shared__ unsigned masks[BSS_TABLE_SLOTS][16];
    __shared__ int counts[BSS_TABLE_SLOTS][2][16], firsts[BSS_TABLE_SLOTS][2][16], reds[BSS_TABLE_SLOTS][16];
    const int* position0 = (const int*)ptrs[BT_POSITION0];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    int* halo_table = (int*)ptrs[BT_SPAN_HALO];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m_red = sizes[0], m = sizes[1];
    for (int s0 = blockIdx.x * BSS_TABLE_SLOTS; s0 < slots; s0 += gridDim.x * BSS_TABLE_SLOTS) {
        for (int i = threadIdx.x; i < BSS_TABLE_SLOTS * 16; i += blockDim.x) {
            const int s = i >> 4, w = i & 15, slot = s0 + s;
            unsigned mask = 0;
            int count[2] = {0, 0}, first[2] = {m, m}, red = -1;
            if (slot < slots && nbr27[27 * slot + 13] >= 0) {
                const int* pos = position0 + (size_t)slot * SPARSE_CELLS + 32 * w;
                int u[32];
#pragma unroll
                for (int c = 0; c < 32; ++c) u[c] = pos[c];
#pragma unroll
                for (int c = 0; c < 32; ++c) {
                    if (u[c] < m) {
                        const int q = bs_parity(32 * w + c);
                        mask |= 1u << c;
                        if (!count[q]) first[q] = u[c];
                        ++count[q];
                        red = q ^ (u[c] >= m_red);
                    }
                }
            }
            masks[s][w] = mask;
            reds[s][w] = red;
            for (int q = 0; q < 2; ++q) {
                counts[s][q][w] = count[q];
                firsts[s][q][w] = first[q];
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < BSS_TABLE_SLOTS * 16; i += blockDim.x) {
            const int s = i >> 4, w = i & 15, slot = s0 + s;
            if (slot >= slots) continue;
            int* rec = span + (size_t)slot * BSS_WORDS;
            rec[w] = (int)masks[s][w];
            for (int q = 0; q < 2; ++q) {
                int first = m, before = 0;  // the class's first unknown in the slot; its unknowns before word w
                for (int v = 15; v >= 0; --v)
                    if (counts[s][q][v]) first = firsts[s][q][v];
                for (int v = 0; v < w; ++v) before += counts[s][q][v];
                rec[BSS_BASE + 16 * q + w] = first + before;
            }
            if (w == 0) {
                int red = 0;
                for (int v = 15; v >= 0; --v)
                    if (reds[s][v] >= 0) red = reds[s][v];
                rec[BSS_RED] = red;
            }
            if (w < BSS_WORDS - BSS_RED - 1) rec[BSS_RED + 1 + w] = 0;
        }
        if (halo_table)  // a live slot's halo places: the unknown across the face (bs_load's), m where none
            for (int i = threadIdx.x; i < BSS_TABLE_SLOTS * BS_FACES; i += blockDim.x) {
                const int slot = s0 + i / BS_FACES, f = i % BS_FACES;
                if (slot >= slots) continue;
                int place, dir, cell, h = m;
                bs_face(f, place, dir, cell);
                if (nbr27[27 * slot + 13] >= 0) {
                    const int n = nbr27[27 * slot + dir];
                    if (n >= 0) h = position0[(size_t)n * SPARSE_CELLS + cell];
                }
                halo_table[(size_t)slot * BS_FACES + f] = h;
            }
        __syncthreads();
    }
}

// A thread's cells of its block's brick: per class q and j, cell bss_cell(q, t + j·BSS_THREADS).
struct BssCells {
    int place[2][BSS_CPT], unknown[2][BSS_CPT];
    float b[2][BSS_CPT], diag[2][BSS_CPT];
};

// The brick at *slot*: the thread's cells (unknowns from the record, b, diag; x_in's x where given,
// else 0, into shared *sx*) and its halo places (x_in's across each face where *halo*, else 0); the
// record's red parity into *red*. Ends with a barrier; whether the brick holds an unknown.
__device__ __forceinline__ bool bss_load(float* sx, BssCells& c, int slot, const int* __restrict__ span,
                                         const int* __restrict__ nbr27, const int* __restrict__ halo_table,
                                         const float* __restrict__ b, const float* __restrict__ diag, const float* __restrict__ x_in, bool halo,
                                         int m, int& red)
{
    const int t = threadIdx.x;
    const int* rec = span + (size_t)slot * BSS_WORDS;
    red = rec[BSS_RED];
    int s[BSS_FPT];
#pragma unroll
    for (int f = 0; f < BSS_FPT; ++f) {
        const int i = t + f * BSS_THREADS;
        s[f] = -1;
        if (halo && halo_table && i < BS_FACES) {
            s[f] = halo_table[(size_t)slot * BS_FACES + i];  // the unknown itself (m where none)
        } else if (halo && i < BS_FACES) {
            int place, dir, cell;
            bs_face(i, place, dir, cell);
            s[f] = nbr27[27 * slot + dir];
        }
    }
    int any = 0;
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int j = 0; j < BSS_CPT; ++j) {
            const int l = bss_cell(q, t + j * BSS_THREADS);
            c.place[q][j] = bs_place(l);
            c.unknown[q][j] = bss_unknown(rec, q, l, m);
        }
    float xv[2][BSS_CPT];
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int j = 0; j < BSS_CPT; ++j) {
            const int u = c.unknown[q][j];
            const bool on = u < m;
            c.b[q][j] = on ? b[u] : 0.0f;
            c.diag[q][j] = on ? diag[u] : 1.0f;
            xv[q][j] = on && x_in ? x_in[u] : 0.0f;
            any |= on;
        }
    int h[BSS_FPT];
#pragma unroll
    for (int f = 0; f < BSS_FPT; ++f) {
        h[f] = m;
        if (halo_table) {
            if (s[f] >= 0) h[f] = s[f];
        } else if (s[f] >= 0) {
            int place, dir, cell;
            bs_face(t + f * BSS_THREADS, place, dir, cell);
            h[f] = bss_unknown(span + (size_t)s[f] * BSS_WORDS, bs_parity(cell), cell, m);
        }
    }
    float hv[BSS_FPT];
#pragma unroll
    for (int f = 0; f < BSS_FPT; ++f) hv[f] = h[f] < m ? x_in[h[f]] : 0.0f;
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int j = 0; j < BSS_CPT; ++j) sx[c.place[q][j]] = xv[q][j];
#pragma unroll
    for (int f = 0; f < BSS_FPT; ++f) {
        const int i = t + f * BSS_THREADS;
        if (i < BS_FACES) {
            int place, dir, cell;
            bs_face(i, place, dir, cell);
            sx[place] = hv[f];
        }
    }
    return __syncthreads_or(any);
}

// One class's cells of the thread (bs_sweep's rule and order of the six), then a barrier.
template <int Q>
__device__ __forceinline__ void bss_class_sweep(float* sx, const BssCells& c, int m)
{
#pragma unroll
    for (int j = 0; j < BSS_CPT; ++j) {
        if (c.unknown[Q][j] >= m) continue;
        const int p = c.place[Q][j];
        float s = sx[p - 1];
        s = s + sx[p + 1];
        s = s + sx[p - BS_PAD];
        s = s + sx[p + BS_PAD];
        s = s + sx[p - BS_PAD * BS_PAD];
        s = s + sx[p + BS_PAD * BS_PAD];
        const float g = (c.b[Q][j] + s) / c.diag[Q][j];
        sx[p] = MG_OMEGA == 1.0f ? g : relaxed(sx[p], g);
    }
    __syncthreads();
}

// One colour (0 red, 1 black): the class colour ^ red (the same for the whole block).
__device__ __forceinline__ void bss_sweep(float* sx, const BssCells& c, int colour, int red, int m)
{
    if ((colour ^ red) == 0) bss_class_sweep<0>(sx, c, m);
    else bss_class_sweep<1>(sx, c, m);
}

// Pre-smoothing (bs_pre's) with the span loads.
__device__ __forceinline__ void bss_pre(BS_PRE_ARGS)
{
    if (state[S_STOPPED]) return;
    __shared__ float sx[BS_PAD * BS_PAD * BS_PAD];
    const int* span = (const int*)ptrs[BT_SPAN];
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m = sizes[1];
    BssCells c;
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        int red;
        if (!bss_load(sx, c, slot, span, nullptr, nullptr, b, diag, nullptr, false, m, red)) continue;
        for (int sweep = 0; sweep < BRICK_SWEEPS; ++sweep) {
            bss_sweep(sx, c, 0, red, m);
            bss_sweep(sx, c, 1, red, m);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int j = 0; j < BSS_CPT; ++j)
                if (c.unknown[q][j] < m) x[c.unknown[q][j]] = sx[c.place[q][j]];
        __syncthreads();
    }
}

// Post-smoothing (bs_post's) with the span loads: r·z a thread over its class-0 cells, then class 1.
// HALO_TABLE: the halo places' unknowns from the halo table (BT_SPAN_HALO), one load, where they
// are otherwise found through nbr27 and the neighbour's record (two dependent loads).
template <bool HALO_TABLE>
__device__ __forceinline__ void bss_post(BS_POST_ARGS)
{
    if (state[S_STOPPED]) return;
    __shared__ float sx[BS_PAD * BS_PAD * BS_PAD];
    const int* span = (const int*)ptrs[BT_SPAN];
    const int* nbr27 = (const int*)ptrs[BT_NBR27];
    const int* halo_table = HALO_TABLE ? (const int*)ptrs[BT_SPAN_HALO] : nullptr;
    const int slots = (int)(ptrs[BT_CANDIDATES] >> 6), m = sizes[1];
    BssCells c;
    double rz = 0.0;
    for (int slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        int red;
        if (!bss_load(sx, c, slot, span, nbr27, halo_table, b, diag, x_in, true, m, red)) continue;
        for (int sweep = 0; sweep < BRICK_SWEEPS; ++sweep) {
            bss_sweep(sx, c, 1, red, m);
            bss_sweep(sx, c, 0, red, m);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int j = 0; j < BSS_CPT; ++j)
                if (c.unknown[q][j] < m) {
                    const float xc = sx[c.place[q][j]];
                    x_out[c.unknown[q][j]] = xc;
                    rz += (double)c.b[q][j] * xc;
                }
        __syncthreads();
    }
    bs_finish_rz(rz, block_rz, ticket, partials_rz, reduce_blocks);
}

// The span entries: BSS_THREADS threads a block (ptxas sm_90: pre 48 registers, post 64: 10 and 8
// blocks an SM); the _span12 ones bound to 40 registers so that 12 blocks fit an SM
// (sparse_pressure_vcycle.SMOOTH_THREADS "span12"; no spill at 2 or 3 sweeps; at 32, ~90 B of spill).
extern "C" __global__ void __launch_bounds__(BSS_THREADS) mg_brick_pre_smooth_span(BS_PRE_ARGS)
{
    bss_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(BSS_THREADS, 12) mg_brick_pre_smooth_span12(BS_PRE_ARGS)
{
    bss_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(BSS_THREADS) mg_brick_post_smooth_span(BS_POST_ARGS)
{
    bss_post<false>(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}

extern "C" __global__ void __launch_bounds__(BSS_THREADS, 12) mg_brick_post_smooth_span12(BS_POST_ARGS)
{
    bss_post<false>(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}

// "spanh" (sparse_pressure_vcycle.SMOOTH_THREADS): the post-smoothing's halo from the halo table.
extern "C" __global__ void __launch_bounds__(BSS_THREADS) mg_brick_pre_smooth_spanh(BS_PRE_ARGS)
{
    bss_pre(b, ptrs, diag, sizes, x, state);
}

extern "C" __global__ void __launch_bounds__(BSS_THREADS, 8) mg_brick_post_smooth_spanh(BS_POST_ARGS)
{
    bss_post<true>(x_in, b, ptrs, diag, sizes, x_out, block_rz, ticket, partials_rz, reduce_blocks, state);
}
