// The sparse FLIP solver's P2G as a deterministic scatter (seed 003 §6–7;
// kernels/flip/sparse_gpu.py launches it after its counting sort by pool cell,
// VOXFX_SPARSE_GATHER=scatter; kernels/flip/sparse_transfer.py's particles_to_grid is the
// NumPy reference; compiled with --fmad=false so each float operation rounds as NumPy's).
//
// The gathers (flip_sparse_gather.cu, flip_sparse_gather_staged.cu) walk ~54 (face,
// component) candidates a particle of which 24 reach; a scatter does only the 24. To stay
// deterministic without a fixed order of float sums, every term is added as a 64-bit
// fixed-point integer: integer addition is associative (modulo 2^64, so only the final sum
// must fit), and the sums are the same bits whatever order the atomics land in.
//
//   scatter_bounds     max over particles of a bound on |q| (q = v_a, APIC v_a + C_a·d with
//                      |d_b| < 2h for every term the window below admits) and max
//                      particles a cell, by integer atomicMax into bounds[2] (zeroed).
//   p2g_scatter_brick  one block per pool slot: its particles (one contiguous run of the
//                      sorted arrays) add (w·q, w) of their 24 (component, node) terms to
//                      the brick's faces plus a one-node halo in shared memory (each
//                      64-bit sum as two 32-bit words: scatter_add), then the block adds
//                      its non-zero nodes into the global accumulators of the bricks that
//                      own them (64-bit integer atomics; acc zeroed first).
//   p2g_scatter_finish one thread per pool cell: value = Σw·q / Σw and valid = Σw > 0; with
//                      SCATTER_REZERO (sparse_scatter.rezero_mode "1", helper h21n) the sums it read
//                      zeroed after the read, so acc is zero again for the next P2G (no zeroing launch).
//
// With SCATTER_SPLIT = T (sparse_scatter.split_mode, "on" by default since session 17; helper
// h17d) the grid is (slots, K) and a brick of m particles takes min(K, ⌈m/T⌉) blocks, part j the particles
// [m·j/parts, m·(j+1)/parts) of its run, each block adding its own shared sums into the global
// ones: integer atomics, the same sums. After the splash a few bricks hold tens of thousands of
// particles, one block each (bench/RESULTS.md "h17d").
//
// Terms (gather_cell's, float32, the same operations): the particle of cell c (its bin:
// ⌊(x − o)/h⌋) reaches node n of component a's lattice when n − c ∈ {0, 1} along a and
// {−1, 0, 1} across (the gathers' 27-cell window with offsets ≤ 0 along a; in a closed box
// the clamp can put a particle's nodes outside it: those are skipped, as the gathers never
// visit them), the node lies on the face lattice (closed) and the node's brick is active.
//
// Fixed point (scatter_scales): R = 18 · (max particles a cell) particles can reach one
// face, Q ≥ |q| of every term; e_R = ⌈log2 R⌉, Q < 2^e_Q. Weights w ∈ [0, 1] are scaled by
// 2^k_w, k_w = 61 − e_R, and rounded up (a term with w > 0 adds ≥ 1: Σw > 0 exactly where
// the gathers' float64 Σw > 0, so the valid masks are theirs); w·q by 2^k_q, k_q = 61 − e_R
// − e_Q, rounded to nearest (both scalings by a power of two in float32: exact; e_Q is
// clamped to [−60, 60], so 2^k is a normal float). Every sum then stays below R·(2^61/R + 1) < 2^62: no overflow.
// Error against the exact sums of the same float32 terms (the gathers' float64 sums are
// exact to 2^-53 relative): |ΔΣw·q| ≤ n·2^-(k_q+1), 0 ≤ ΔΣw ≤ n·2^-k_w for n terms, so
//   |v_scatter − v| ≤ (n·2^-(k_q+1) + |v|·n·2^-k_w) / Σw  (+ float32 rounding of v)
//                   ≤ R² · (Q + |v|) · 2^-59 / Σw,
// at 8M particles (R ≈ 18 · 30, Q ≈ 5 m/s) ~1e-11 m/s / Σw: below float32's rounding of v
// wherever Σw ≳ 1e-4 (a face that a particle touches with weight 1e-4 or more).
//
// Measured and not kept (helper i24t, H200, 8M dam break after 4 substeps, 7.9 particles an
// occupied cell, max 17): one thread per (component, cell) of a brick summing its cell's
// terms in 64-bit registers by node (the 18 nodes a component's window holds) and adding
// each reached node once (~a third of the shared atomics) gave these sums bit for bit but
// took 1.264 ms against 0.527 (zeroing, kernel and division): 127 registers (2 blocks an
// SM), every particle evaluating all 18 window nodes (10 of them weight 0, predicated, with
// their 64-bit conversions) and warps waiting on their fullest cell. The atomics are not
// the whole cost: a register pre-sum has to come without more arithmetic per term.
//
// Measured and not kept either (helper i24y, H100, the same scene, 3,198 bricks; the kernels
// on branch i24y-cells, bench/flip_sparse_p2g.py --ab there): a thread per (component, cell)
// walking its cell's particles, six of a particle's eight terms a component summed in 64-bit
// registers (the 10 nodes all the cell's particles share: the cell's node across both axes,
// one side along one) and only the corners by shared atomics (~40% of the atomics), the
// same 8 terms a component and these sums bit for bit: 0.82 ms against this kernel's 0.49
// (2.63 with the irregular particles' path out of line, a call in the loop; 0.99 inlined;
// 0.82 with a block's warps on one component at a time; 0.84 at 4 blocks an SM). Not
// profiled; likely: each particle is read and set up three times (a dependent load chain
// each), and a warp's lanes wait on its fullest cell while empty cells' lanes idle. Storing
// a brick's inner nodes (which only its own particles reach) in the flush instead of adding
// them: 0.506 against 0.491 ms. The lean code's accumulators in rows 8 banks apart (an 8 × 4
// patch of cells on 32 banks, 55.8 KB a block; helper i24q4): fewer conflicts, no faster
// (sparse_scatter.py's notes).

#include "voxfx_bin.cuh"  // scatter_q_bound, scatter_q_bits, scatter_bits, scatter_float
#include "voxfx_sparse.cuh"  // SPARSE_CELLS, sparse_cell_near
#ifdef FLUID
#include "voxfx_cell_type.cuh"  // sparse_cell_type (p2g_scatter_finish_cells)
#endif

#define SCATTER_THREADS 256
#ifndef SCATTER_MIN_BLOCKS  // blocks an SM should hold (__launch_bounds__; sparse_gpu.SCATTER_MIN_BLOCKS):
#define SCATTER_MIN_BLOCKS 4  // 64 registers, no spill; H200, 8M: 0.69 ms against 0.81 at 3 (67 registers), 0.70 at 5
#endif
#ifndef SCATTER_PAIRED  // 1: scatter_add_pair (sparse_scatter.atomics_mode)
#define SCATTER_PAIRED 0
#endif
#ifndef SCATTER_REZERO  // 1: the division zeroes the sums it read (sparse_scatter.rezero_mode; helper h21n)
#define SCATTER_REZERO 0
#endif
#if SCATTER_REZERO  // the division's sums are written (zeroed) too
#define SCATTER_SUMS unsigned long long
#else
#define SCATTER_SUMS const unsigned long long
#endif
#define SCATTER_NODES 900      // a component's nodes: 9 along its axis (0 … 8), 10 across (−1 … 8)
#define SCATTER_WINDOW 18      // cells whose particles reach one face: 2 along its axis, 3 across
#define SCATTER_E_MIN (-60)    // e_Q clamped to [SCATTER_E_MIN, SCATTER_E_MAX]: 2^k_q is a normal float
#define SCATTER_E_MAX 60       // (a bound over 2^60 m/s is no simulation: its sums may overflow)

#ifdef __CUDA_ARCH__
__device__ __forceinline__ long long scatter_round(float x) { return __float2ll_rn(x); }
__device__ __forceinline__ long long scatter_round_up(float x) { return __float2ll_ru(x); }
#else  // the host harness (tests/unit/test_cuda_sparse_scatter_host.py)
__device__ __forceinline__ long long scatter_round(float x) { return llrintf(x); }
__device__ __forceinline__ long long scatter_round_up(float x) { return (long long)ceilf(x); }
#endif

// Smallest e ≥ 0 with 2^e ≥ x (x ≥ 1).
__device__ __forceinline__ int scatter_ceil_log2(long long x)
{
    int e = 0;
    while ((1LL << e) < x) ++e;
    return e;
}

// k_q and k_w (module notes) from bounds[0] (Q's float bits) and bounds[1] (max particles a cell).
__device__ __forceinline__ void scatter_scales(const unsigned int* __restrict__ bounds, int& k_q, int& k_w)
{
    const int e_r = scatter_ceil_log2((long long)SCATTER_WINDOW * (long long)max(1u, bounds[1]));
    int e_q = 0;
    frexpf(scatter_float(bounds[0]), &e_q);  // Q = m·2^e_q, m ∈ [½, 1): Q < 2^e_q (0 for Q = 0)
    e_q = min(max(e_q, SCATTER_E_MIN), SCATTER_E_MAX);
    k_w = 61 - e_r;
    k_q = 61 - e_r - e_q;
}

// Block-wide max of v (unsigned), then one atomicMax by thread 0 (any block size ≤ 1024).
__device__ void scatter_block_max(unsigned int v, unsigned int* __restrict__ out)
{
    __shared__ unsigned int part[1024];
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s <<= 1) {
        const unsigned int other = (threadIdx.x % (2 * s) == 0 && threadIdx.x + s < blockDim.x)
                                   ? part[threadIdx.x + s] : 0u;
        __syncthreads();
        if (threadIdx.x % (2 * s) == 0) part[threadIdx.x] = max(part[threadIdx.x], other);
        __syncthreads();
    }
    if (threadIdx.x == 0 && part[0]) atomicMax(out, part[0]);
}

// bounds[0] = max over sorted particles s < n of max_a |v_a| + 2h·Σ_b |C_ab| (as float bits:
// for floats ≥ 0 the bits order as the values), times 1 + 2^-10 against the rounding of q;
// bounds[1] = max count over the pool's cells (the last bin, particles without an active
// cell, is not scattered). A grid-stride loop over a fixed grid (sparse_gpu.BOUND_BLOCKS),
// then one atomicMax a block for each: one thread per item with a block's reduction and
// atomics each measured 0.18 ms at 8M particles (H200), 6× the loads. bounds zeroed first.
extern "C" __global__ void scatter_bounds(const float* __restrict__ svel, const float* __restrict__ sc, int apic,
                                          long long n, const int* __restrict__ count, long long cells, float h,
                                          unsigned int* __restrict__ bounds)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    float q = 0.0f;
    unsigned int most = 0u;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += stride)
        q = fmaxf(q, scatter_q_bound(svel, sc, apic, t, h));
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < cells; t += stride)
        most = max(most, (unsigned int)max(count[t], 0));
    scatter_block_max(scatter_q_bits(q), bounds);
    scatter_block_max(most, bounds + 1);
}

#include "voxfx_scatter_terms.cuh"  // SCATTER_WORDS, scatter_add(_pair), scatter_word, scatter_node,
                                    // scatter_particle

#ifndef SCATTER_LEAN  // 1: scatter_particle_lean (sparse_scatter.kernel_mode "lean"); 0: scatter_particle
#define SCATTER_LEAN 0
#endif
#ifndef SCATTER_FLIP  // 1: the lean code's half-lattice nodes, the particle's cell first (sparse_scatter.banks_mode)
#define SCATTER_FLIP 0
#endif
#ifndef SCATTER_SPLIT  // > 0: a brick's particles split over blocks of at least this many (sparse_scatter.split_mode)
#define SCATTER_SPLIT 0
#endif
#if SCATTER_LEAN
#include "voxfx_scatter_lean.cuh"  // scatter_carry_hi, scatter_add_pair_lean, scatter_particle_lean
#endif

// One block per pool slot (grid = slots, block ≤ SCATTER_THREADS). `spread`: lane j of a
// warp takes particles tile + j·spread + r (r < spread), so that the lanes' particles lie
// in different cells (fewer shared atomics on one node) while each lane's loads stay close
// (1: consecutive particles). acc[(comp·cells + cell)·2 + {0: Σw·q, 1: Σw}], zeroed first.
// use_order = 0: spos, svel, sc are the binned copies (sorted position s is the particle);
// 1: they are the particles' own arrays, read through order[s] (sparse_gpu's "order"
// binning: no copies, and no per-cell sort either, as the integer sums take any order).
extern "C" __global__ void __launch_bounds__(SCATTER_THREADS, SCATTER_MIN_BLOCKS)
    p2g_scatter_brick(const float* __restrict__ spos, const float* __restrict__ svel, const float* __restrict__ sc,
                      int apic, const int* __restrict__ start, const int* __restrict__ count,
                      const unsigned char* __restrict__ used, const int* __restrict__ coords,
                      const int* __restrict__ nbr27, long long cells, int closed, int nx, int ny, int nz, float ox,
                      float oy, float oz, float h, float inv_h, const unsigned int* __restrict__ bounds, int spread,
                      const int* __restrict__ order, int use_order, unsigned long long* __restrict__ acc)
{
    __shared__ unsigned int shared_acc[2 * SCATTER_WORDS];
    const int slot = (int)blockIdx.x;
    if ((long long)slot * SPARSE_CELLS >= cells || !used[slot]) return;  // a free slot: no particles
    const long long cell0 = (long long)slot * SPARSE_CELLS;
#if SCATTER_SPLIT  // a brick's particles over up to gridDim.y blocks of ≥ SCATTER_SPLIT each (part blockIdx.y)
    const long long b0 = start[cell0], b1 = (long long)start[cell0 + SPARSE_CELLS - 1] + count[cell0 + SPARSE_CELLS - 1];
    if (b1 <= b0) return;
    const long long parts = min((long long)gridDim.y, (b1 - b0 + SCATTER_SPLIT - 1) / SCATTER_SPLIT);
    if ((long long)blockIdx.y >= parts) return;
#ifndef SCATTER_SPLIT_MUTANT  // the host harness's mutant: each part's last particle left out (its test must fail)
    const long long p0 = b0 + (b1 - b0) * blockIdx.y / parts, p1 = b0 + (b1 - b0) * (blockIdx.y + 1) / parts;
#else
    const long long p0 = b0 + (b1 - b0) * blockIdx.y / parts, p1 = b0 + (b1 - b0) * (blockIdx.y + 1) / parts - 1;
#endif
    if (p1 <= p0) return;
#else
    const long long p0 = start[cell0], p1 = (long long)start[cell0 + SPARSE_CELLS - 1] + count[cell0 + SPARSE_CELLS - 1];
    if (p1 <= p0) return;
#endif
    for (int i = threadIdx.x; i < 2 * SCATTER_WORDS; i += blockDim.x) shared_acc[i] = 0u;
    int k_q, k_w;
    scatter_scales(bounds, k_q, k_w);
    const float scale_q = ldexpf(1.0f, k_q), scale_w = ldexpf(1.0f, k_w);
    const int brick[3] = {8 * coords[3 * slot], 8 * coords[3 * slot + 1], 8 * coords[3 * slot + 2]};
    const int n[3] = {nx, ny, nz};
    const float o[3] = {ox, oy, oz};
    __syncthreads();
    const int total = (int)(p1 - p0), tile = 32 * spread;  // a brick's particles: fewer than 2^31
    const int items = (total + tile - 1) / tile * tile;
#if SCATTER_LEAN
    const int shift = __ffs(spread) - 1;
    const bool pow2 = !(spread & (spread - 1));  // shifts for a power of two (the default 8)
#endif
    for (int i = threadIdx.x; i < items; i += blockDim.x) {
        const int lane = i & 31, row = i >> 5;
#if SCATTER_LEAN
        const int k = pow2 ? ((row >> shift) << shift) * 32 + lane * spread + (row & (spread - 1))
                           : row / spread * tile + lane * spread + row % spread;
#else
        const int k = row / spread * tile + lane * spread + row % spread;
#endif
        if (k >= total) continue;
        const int p = use_order ? order[p0 + k] : (int)p0 + k;
#if SCATTER_LEAN
        if (apic)
            scatter_particle_lean<true>(spos, svel, sc, p, brick, closed, n, o, h, inv_h, scale_q, scale_w, shared_acc);
        else
            scatter_particle_lean<false>(spos, svel, sc, p, brick, closed, n, o, h, inv_h, scale_q, scale_w,
                                         shared_acc);
#else
        if (apic)
            scatter_particle<true>(spos, svel, sc, p, brick, closed, n, o, h, inv_h, scale_q, scale_w, shared_acc);
        else
            scatter_particle<false>(spos, svel, sc, p, brick, closed, n, o, h, inv_h, scale_q, scale_w, shared_acc);
#endif
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 3 * SCATTER_NODES; i += blockDim.x) {
        const unsigned long long den = scatter_word(shared_acc, 3 * SCATTER_NODES + i);
        if (!den) continue;  // no term reached it (w > 0 adds ≥ 1)
        const int comp = i / SCATTER_NODES, j = i - comp * SCATTER_NODES;
        const int ex = comp == 0 ? 9 : 10, ey = comp == 1 ? 9 : 10;
        const int x = j % ex - (comp != 0), y = (j / ex) % ey - (comp != 1), z = j / (ex * ey) - (comp != 2);
        const int cell = sparse_cell_near(nbr27, slot, x, y, z);
        if (cell < 0) continue;  // an inactive brick: the gathers have no such face either
        unsigned long long* const to = acc + ((long long)comp * cells + cell) * 2;
        atomicAdd(to, scatter_word(shared_acc, i));
        atomicAdd(to + 1, den);
    }
}

// Pool cell t's faces from the fixed-point sums (module notes); Σw = 0 (no term, a free slot,
// beyond a closed box's face lattice): 0 and invalid. With SCATTER_REZERO (helper h21n) a sum
// read with Σw ≠ 0 is zeroed after its read (Σw = 0: no term, so Σw·q is 0 as well), so the
// sums are zero again after the division and the next P2G needs no zeroing launch
// (sparse_scatter.KeptSums: the buffer kept between P2Gs).
__device__ __forceinline__ void scatter_finish_cell(SCATTER_SUMS* __restrict__ acc, long long cells,
                                                    const unsigned int* __restrict__ bounds, long long t,
                                                    float* __restrict__ u, float* __restrict__ v,
                                                    float* __restrict__ w, unsigned char* __restrict__ valid_u,
                                                    unsigned char* __restrict__ valid_v,
                                                    unsigned char* __restrict__ valid_w)
{
    int k_q, k_w;
    scatter_scales(bounds, k_q, k_w);
    const double unscale = ldexp(1.0, k_w - k_q);
    float* const out[3] = {u, v, w};
    unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    for (int a = 0; a < 3; ++a) {
        const long long num = (long long)acc[(a * cells + t) * 2], den = (long long)acc[(a * cells + t) * 2 + 1];
        const bool ok = den > 0;
        out[a][t] = ok ? (float)((double)num / (double)den * unscale) : 0.0f;
        valid[a][t] = ok;
#if SCATTER_REZERO
#ifndef SCATTER_REZERO_MUTANT  // the host harness's mutant: component 2's sums left (its test must fail)
        if (den) {
#else
        if (den && a != 2) {
#endif
            acc[(a * cells + t) * 2] = 0ull;
            acc[(a * cells + t) * 2 + 1] = 0ull;
        }
#endif
    }
}

// The sums zeroed in the live bricks only (flip_sparse_transfer.cu's brick_live_sparse;
// sparse_transfer.P2G_TAILS "live", helper h18f): one thread per (component, pool cell), its
// two words; an idle brick's words are left as they are (no particle adds there: the brick
// scatter adds to an occupied brick's faces and a one-face halo, all live; p2g_scatter_finish_live
// reads none of them).
extern "C" __global__ void p2g_zero_live_sums(const unsigned char* __restrict__ live, long long cells,
                                              unsigned long long* __restrict__ acc)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 3 * cells || !live[(i % cells) >> 9]) return;
    acc[2 * i] = 0ull;
    acc[2 * i + 1] = 0ull;
}

// One thread per pool cell: scatter_finish_cell.
extern "C" __global__ void p2g_scatter_finish(SCATTER_SUMS* __restrict__ acc, long long cells,
                                              const unsigned int* __restrict__ bounds, float* __restrict__ u,
                                              float* __restrict__ v, float* __restrict__ w,
                                              unsigned char* __restrict__ valid_u,
                                              unsigned char* __restrict__ valid_v,
                                              unsigned char* __restrict__ valid_w)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    scatter_finish_cell(acc, cells, bounds, t, u, v, w, valid_u, valid_v, valid_w);
}

#ifdef FLUID  // the cell types' defines (sparse_scatter._build: kernels/grid/mac.py CELL_TYPES)
// p2g_scatter_finish and flip_sparse_transfer.cu's classify_counts_sparse in one pass
// (sparse_gpu.p2g_cells_mode "finish", helper i24p8): the faces, masks and the cell types
// (sparse_cell_type, from the binning's count and solid), the same bytes as the two launches.
extern "C" __global__ void p2g_scatter_finish_cells(SCATTER_SUMS* __restrict__ acc, long long cells,
                                                    const unsigned int* __restrict__ bounds, float* __restrict__ u,
                                                    float* __restrict__ v, float* __restrict__ w,
                                                    unsigned char* __restrict__ valid_u,
                                                    unsigned char* __restrict__ valid_v,
                                                    unsigned char* __restrict__ valid_w,
                                                    const int* __restrict__ count,
                                                    const unsigned char* __restrict__ solid,
                                                    const int* __restrict__ coords, int closed, int nx, int ny,
                                                    int nz, unsigned char* __restrict__ cell)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    scatter_finish_cell(acc, cells, bounds, t, u, v, w, valid_u, valid_v, valid_w);
    cell[t] = sparse_cell_type(count, solid, coords, t, closed, nx, ny, nz);  // voxfx_cell_type.cuh
}

// p2g_scatter_finish_cells over the live bricks (flip_sparse_transfer.cu's brick_live_sparse;
// sparse_transfer.P2G_TAILS "live", helper h18f): an idle brick's faces 0 and invalid without its
// sums being read (no particle reaches them: Σw = 0 there, what scatter_finish_cell writes), its
// cell types as p2g_scatter_finish_cells'. The same bytes.
extern "C" __global__ void p2g_scatter_finish_live(SCATTER_SUMS* __restrict__ acc, long long cells,
                                                   const unsigned int* __restrict__ bounds, float* __restrict__ u,
                                                   float* __restrict__ v, float* __restrict__ w,
                                                   unsigned char* __restrict__ valid_u,
                                                   unsigned char* __restrict__ valid_v,
                                                   unsigned char* __restrict__ valid_w,
                                                   const int* __restrict__ count,
                                                   const unsigned char* __restrict__ solid,
                                                   const int* __restrict__ coords, int closed, int nx, int ny,
                                                   int nz, unsigned char* __restrict__ cell,
                                                   const unsigned char* __restrict__ live)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    if (live[t >> 9]) scatter_finish_cell(acc, cells, bounds, t, u, v, w, valid_u, valid_v, valid_w);
    else {
        u[t] = v[t] = w[t] = 0.0f;
        valid_u[t] = valid_v[t] = valid_w[t] = 0;
    }
    cell[t] = sparse_cell_type(count, solid, coords, t, closed, nx, ny, nz);  // voxfx_cell_type.cuh
}

// Component a's face at pool cell t as scatter_finish_cell divides it (*ok*: Σw > 0).
__device__ __forceinline__ float scatter_face(const unsigned long long* __restrict__ acc, long long cells, int a,
                                              long long t, double unscale, bool& ok)
{
    const long long den = (long long)acc[(a * cells + t) * 2 + 1];
    ok = den > 0;
    if (!ok) return 0.0f;  // Σw·q read only where it divides (most neighbours of an air face have none)
    const long long num = (long long)acc[(a * cells + t) * 2];
    return (float)((double)num / (double)den * unscale);
}

// p2g_scatter_finish_cells with the first ring of extrapolation (flip_sparse_transfer.cu's
// extrapolate_sparse) in the same pass (sparse_transfer.P2G_TAILS "fused", helper i24a): a face
// that exists and is not valid takes the mean of its valid existing neighbours (−x, +x, −y, +y,
// −z, +z, summed in that order), each neighbour's value divided from its sums again (the same
// operations: the same bits); u/v/w and the masks are then the ring's, not the division's
// (the two launches' bytes; the division's own faces are not kept). Cell types as
// p2g_scatter_finish_cells.
extern "C" __global__ void p2g_scatter_finish_ring(const unsigned long long* __restrict__ acc, long long cells,
                                                   const unsigned int* __restrict__ bounds, float* __restrict__ u,
                                                   float* __restrict__ v, float* __restrict__ w,
                                                   unsigned char* __restrict__ valid_u,
                                                   unsigned char* __restrict__ valid_v,
                                                   unsigned char* __restrict__ valid_w,
                                                   const int* __restrict__ count,
                                                   const unsigned char* __restrict__ solid,
                                                   const int* __restrict__ coords, int closed, int nx, int ny,
                                                   int nz, unsigned char* __restrict__ cell,
                                                   const unsigned char* __restrict__ exists_u,
                                                   const unsigned char* __restrict__ exists_v,
                                                   const unsigned char* __restrict__ exists_w,
                                                   const int* __restrict__ nbr27)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= cells) return;
    int k_q, k_w;
    scatter_scales(bounds, k_q, k_w);
    const double unscale = ldexp(1.0, k_w - k_q);
    float* const out[3] = {u, v, w};
    unsigned char* const valid[3] = {valid_u, valid_v, valid_w};
    const unsigned char* const exists[3] = {exists_u, exists_v, exists_w};
    int nb[6];
    for (int d = 0; d < 6; ++d) nb[d] = sparse_cell_step(nbr27, (int)t, d);
    for (int a = 0; a < 3; ++a) {
        bool ok;
        float value = scatter_face(acc, cells, a, t, unscale, ok);
        const bool here = ok && exists[a][t];
        bool grow = false;
        if (!here && exists[a][t]) {
            float total = 0.0f;
            int n = 0;
            for (int d = 0; d < 6; ++d) {
                if (nb[d] < 0 || !exists[a][nb[d]]) continue;
                bool near;
                const float q = scatter_face(acc, cells, a, nb[d], unscale, near);
                if (near) {
                    total += q;
                    ++n;
                }
            }
            if (n) {
                value = total / (float)n;
                grow = true;
            }
        }
        out[a][t] = value;
        valid[a][t] = here || grow;
    }
    cell[t] = sparse_cell_type(count, solid, coords, t, closed, nx, ny, nz);  // voxfx_cell_type.cuh
}
#endif
