// Sparse FLIP pressure (seed 003 §8, Alg. 2): the fused V-cycle's coarse levels in one launch —
// one block (mg_tail_vcycle) or one cluster of blocks (mg_tail_cluster, sm_90), the one block's
// levels in global or in its shared memory (the _shared kernels; _fold: their first sweep in two
// passes). Moved out of flip_sparse_pressure_vcycle.cu (issue 24: modules under ~500 lines; the
// same PTX kernel for kernel, tools/compare_ptx.py), whose launches it replaces pass for pass
// with the same per-unknown values (voxfx_mg_cell.cuh); compiled with its options and -D
// constants and TAIL_CLUSTER (blocks of mg_tail_cluster's cluster); launched by
// kernels/flip/sparse_pressure_vcycle_tail.py (no FMA contraction: each value rounds as NumPy
// rounds it).

#include "voxfx_mg_cell.cuh"  // smooth_value, residual_value, restrict_value, prolong_value, ...: per unknown
#include "voxfx_mg_dense.cuh"  // block_dense_solve: the coarsest level by its inverse G

// The fused V-cycle's coarse levels in one launch: a group of threads runs each level's
// passes in the order and with the per-unknown values of sparse_pressure_gpu's _vcycle_fused
// launches, synchronised between passes (so z is the same bit for bit; one launch instead of
// ~10 per level). The group is one block (mg_tail_vcycle: __syncthreads) or one cluster of
// TAIL_CLUSTER blocks (mg_tail_cluster, sm_90: the cluster's hardware barrier, whose arrive
// releases and wait acquires every earlier access of the cluster's threads, global memory
// included; the cluster's blocks are scheduled together, so it cannot deadlock as a
// grid-wide spin barrier can). Level l's buffers are at ptrs[TAIL_PTRS·l + k]: x, b, r, nbr,
// diag, up (onto l from l + 1), down (into l + 1); strides[l] their row length. The coarsest
// level has no down: its slot 6 holds its dense inverse G (mg_dense_inverse, MG_DENSE) or 0
// (the sweeps).
#define TAIL_PTRS 7
#define TAIL_F(l, k) ((float*)ptrs[TAIL_PTRS * (l) + (k)])
#define TAIL_I(l, k) ((const int*)ptrs[TAIL_PTRS * (l) + (k)])
#define GROUP_RANGE(g, c, lo, hi) for (int c = (lo) + (g).rank(); c < (hi); c += (g).size())

// The tail's pass profile (issue 24, i24k1; bench/flip_sparse_pcg_loop.py --tail-profile compiles
// the module with -DTAIL_PROFILE=n): block 0's thread 0 stamps clock64 and %globaltimer after
// each barrier with a code, level·16 + the pass (TAIL_* below), into tail_stamps (up to n).
// Without the define no stamp is compiled: the kernels' code is today's.
#define TAIL_START 0    // the kernel's start
#define TAIL_FIRST 1    // the first pre-smoothing sweep (from x = 0)
#define TAIL_RED 2      // a red pass
#define TAIL_BLACK 3    // a black pass (on the way down: the last with the black residuals)
#define TAIL_RESID 4    // the (red) residuals
#define TAIL_RESTRICT 5 // the restriction into the level
#define TAIL_PROLONG 6  // the prolongation onto the level
#define TAIL_COARSE 7   // the coarsest level's solve
#define TAIL_COPY 8     // the shared tail's copies in or out, the cluster's hand-over to block 0
#ifdef TAIL_PROFILE
__device__ long long tail_stamps[3 * TAIL_PROFILE];  // per stamp: clock64, %globaltimer, code
__device__ int tail_stamp_count;
__device__ __forceinline__ void tail_stamp(int level, int pass)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const int i = tail_stamp_count;
    if (i >= TAIL_PROFILE) return;
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    tail_stamps[3 * i] = clock64();
    tail_stamps[3 * i + 1] = (long long)ns;
    tail_stamps[3 * i + 2] = level * 16 + pass;
    tail_stamp_count = i + 1;
}
#define TAIL_STAMP(level, pass) tail_stamp(level, pass)
#else
#define TAIL_STAMP(level, pass) ((void)0)
#endif

struct BlockGroup {  // one block
    __device__ int rank() const { return (int)threadIdx.x; }
    __device__ int size() const { return (int)blockDim.x; }
    __device__ void sync() const { __syncthreads(); }
};

// A grid of one cluster (mg_tail_cluster's launch: TAIL_CLUSTER blocks). Before sm_90 (and in
// the host harness's one-thread launches) the barrier is the block's: sparse_pressure_gpu
// launches mg_tail_cluster only on devices of compute capability 9.0 or later.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TAIL_CLUSTER_DIMS __cluster_dims__(TAIL_CLUSTER, 1, 1)
#define CLUSTER_BARRIER() asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory")
#else
#define TAIL_CLUSTER_DIMS
#ifndef CLUSTER_BARRIER  // a threaded host harness brings its own
#define CLUSTER_BARRIER() __syncthreads()
#endif
#endif
struct ClusterGroup {
    __device__ int rank() const { return (int)(blockIdx.x * blockDim.x + threadIdx.x); }
    __device__ int size() const { return (int)(gridDim.x * blockDim.x); }
    __device__ void sync() const { CLUSTER_BARRIER(); }
};

// One level of the tail: its vectors (the group's global buffers, or the block's shared
// memory: TAIL_SHARED below), its tables (global) and sizes. Tables are rows of `stride`
// entries whichever memory the vectors are in; vectors are indexed by unknown alike.
struct TailLevel {
    float *x, *b, *r;
    const int *nbr, *up, *down;
    const float* diag;
    int stride, m_red, m;
    int level;  // its index (the profile's stamps)
};

__device__ __forceinline__ TailLevel tail_global(const unsigned long long* __restrict__ ptrs,
                                                 const int* __restrict__ strides, const int* __restrict__ sizes, int l)
{
    TailLevel L;
    L.x = TAIL_F(l, 0);
    L.b = TAIL_F(l, 1);
    L.r = TAIL_F(l, 2);
    L.nbr = TAIL_I(l, 3);
    L.diag = TAIL_F(l, 4);
    L.up = TAIL_I(l, 5);
    L.down = TAIL_I(l, 6);
    L.stride = strides[l];
    L.m_red = sizes[2 * l];
    L.m = sizes[2 * l + 1];
    L.level = l;
    return L;
}

// The tails' first sweep in two passes (FOLD: the _fold kernels, VOXFX_SPARSE_MG_TAIL_FOLD;
// issue 24, i24k1): the red unknowns' first-sweep values b/diag written where their b is
// (first_red_of: by the restriction into the level, the shared tail's copy-in, or a red pass),
// then the black ones from x as a sweep does (black_first_value), the red neighbours' x at
// their first-sweep values and the sentinel's 0 — first_sweep_value's terms added in its order,
// so the same values bit for bit. first_sweep_value recomputes each black unknown's six red
// neighbours, its loads behind the divides before them (the IEEE divide's slow-path branch:
// sm_90 SASS loads a neighbour's b and diag only after the previous divide), ~12 dependent
// global loads in a row: the tail's first sweeps took 6.1 / 5.2 / 4.3 µs on levels 2 / 3 / 4
// against 1.9 / 0.9 / 0.6 µs for the red pass after them (H100, 8M dam break,
// bench/flip_sparse_pcg_loop.py --tail-profile).
__device__ __forceinline__ float first_red_of(float bc, float dc)
{
    const float g = bc / dc;
    return MG_OMEGA == 1.0f ? g : relaxed(0.0f, g);
}

__device__ __forceinline__ float black_first_value(const float* __restrict__ x, const float* __restrict__ b,
                                                   const int* __restrict__ nbr, const float* __restrict__ diag,
                                                   int stride, int c)
{
    const float g = gs_value(x, b, nbr, diag, stride, c);
    return MG_OMEGA == 1.0f ? g : relaxed(0.0f, g);
}

// Level l on the way down (l < last): pre-smoothing (mg_smooth_first, the sweeps, the last
// black one with the black residuals: mg_smooth_black_residual), the residual
// (mg_residual), the restriction into C, level l + 1 (mg_restrict), unless C is the coarsest.
// FOLD: on entry the red unknowns' x hold their first-sweep values; the first sweep's pass is
// the black one (black_first_value), the restriction writes C's red first-sweep values too.
template <bool FOLD, class Group>
__device__ __forceinline__ void tail_down(const Group& g, const TailLevel& L, const TailLevel& C, bool restrict_next)
{
    float *x = L.x, *b = L.b, *r = L.r;
    const int* nbr = L.nbr;
    const float* diag = L.diag;
    const int stride = L.stride, m_red = L.m_red, m = L.m;
    if (FOLD) {
        GROUP_RANGE(g, c, m_red, m) x[c] = black_first_value(x, b, nbr, diag, stride, c);
    } else {
        GROUP_RANGE(g, c, 0, m) x[c] = first_sweep_value(b, nbr, diag, stride, m_red, c);  // mg_smooth_first
    }
    g.sync();
    TAIL_STAMP(L.level, TAIL_FIRST);
    for (int sweep = 1; sweep < MG_SWEEPS; ++sweep) {
        GROUP_RANGE(g, c, 0, m_red) x[c] = smooth_value(x, b, nbr, diag, stride, c);
        g.sync();
        TAIL_STAMP(L.level, TAIL_RED);
        if (sweep < MG_SWEEPS - 1) {
            GROUP_RANGE(g, c, m_red, m) x[c] = smooth_value(x, b, nbr, diag, stride, c);
        } else {  // mg_smooth_black_residual
            GROUP_RANGE(g, c, m_red, m)
            {
                const float s = compact_neighbour_sum(x, nbr, stride, c);
                const float gc = (b[c] + s) / diag[c];
                const float xc = MG_OMEGA == 1.0f ? gc : relaxed(x[c], gc);
                x[c] = xc;
                r[c] = b[c] - (diag[c] * xc - s);
            }
        }
        g.sync();
        TAIL_STAMP(L.level, TAIL_BLACK);
    }
    GROUP_RANGE(g, c, 0, MG_SWEEPS == 1 ? m : m_red) r[c] = residual_value(x, b, nbr, diag, stride, c);
    g.sync();
    TAIL_STAMP(L.level, TAIL_RESID);
    if (restrict_next) {  // mg_restrict into l + 1
        GROUP_RANGE(g, c, 0, C.m)
        {
            const float v = restrict_value(r, L.down, C.stride, c);
            C.b[c] = v;
            if (FOLD && c < C.m_red) C.x[c] = first_red_of(v, C.diag[c]);
        }
        g.sync();
        TAIL_STAMP(C.level, TAIL_RESTRICT);
    }
}

// Level l on the way up: prolongation from C (level l + 1) onto the red unknowns
// (mg_prolong_add; onto all where MG_OMEGA ≠ 1: the over-relaxed black sweep reads the black
// values), post-smoothing black then red.
template <class Group>
__device__ __forceinline__ void tail_up(const Group& g, const TailLevel& L, const float* __restrict__ xc)
{
    float *x = L.x, *b = L.b;
    const int* nbr = L.nbr;
    const float* diag = L.diag;
    const int stride = L.stride, m_red = L.m_red, m = L.m;
    GROUP_RANGE(g, f, 0, MG_OMEGA == 1.0f ? m_red : m) x[f] = x[f] + prolong_value(xc, L.up, stride, f);
    g.sync();
    TAIL_STAMP(L.level, TAIL_PROLONG);
    for (int sweep = 0; sweep < MG_SWEEPS; ++sweep) {
        GROUP_RANGE(g, c, m_red, m) x[c] = smooth_value(x, b, nbr, diag, stride, c);
        g.sync();
        TAIL_STAMP(L.level, TAIL_BLACK);
        GROUP_RANGE(g, c, 0, m_red) x[c] = smooth_value(x, b, nbr, diag, stride, c);
        g.sync();
        TAIL_STAMP(L.level, TAIL_RED);
    }
}

// The one-block tail's level l with its vectors in the block's shared memory (VOXFX_SPARSE_MG_TAIL_SHARED):
// per level first..last x, b and (but the coarsest) r, `stride` floats each, in level order
// from `shared` (tail_shared_floats: the launch's dynamic shared memory). Every pass then reads
// and writes shared memory; only the tables stay global (issue 24: the tail's ~60 passes are
// latency-bound, a pass of a few thousand unknowns waiting on L2 loads between barriers).
__device__ __forceinline__ TailLevel tail_shared(const unsigned long long* __restrict__ ptrs,
                                                 const int* __restrict__ strides, const int* __restrict__ sizes,
                                                 int first, int last, int l, float* shared)
{
    TailLevel L = tail_global(ptrs, strides, sizes, l);
    for (int k = first; k < l; ++k) shared += (k < last ? 3 : 2) * strides[k];
    L.x = shared;
    L.b = shared + L.stride;
    L.r = l < last ? shared + 2 * L.stride : nullptr;
    return L;
}

// Levels first..last in one block (first ≥ 1, first < last, their unknowns few). On entry
// level first's b (global) holds the restricted residual; on exit its x (global) the
// post-smoothed correction. SHARED: the levels' vectors in shared memory (tail_shared; the
// same passes in the same order, so the same values bit for bit): level first's b copied in,
// every level's sentinels set to 0 (what the global buffers hold there), level first's x
// copied out at the end.
template <bool SHARED, bool FOLD = false>
__device__ __forceinline__ void block_tail(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides,
                                           int first, int last, const int* __restrict__ sizes, float* shared)
{
    static_assert(SHARED || !FOLD, "FOLD writes level first's red x in the shared copy-in");
    const BlockGroup g;
    auto level = [&](int l) {
        return SHARED ? tail_shared(ptrs, strides, sizes, first, last, l, shared) : tail_global(ptrs, strides, sizes, l);
    };
    if (SHARED) {
        for (int l = first; l <= last; ++l) {
            const TailLevel L = level(l);
            if (threadIdx.x == 0) {
                L.x[L.m] = 0.0f;
                L.b[L.m] = 0.0f;
                if (l < last) L.r[L.m] = 0.0f;
            }
        }
        const TailLevel F = level(first);
        const float* b = TAIL_F(first, 1);
        GROUP_RANGE(g, c, 0, F.m)
        {
            F.b[c] = b[c];
            if (FOLD && c < F.m_red) F.x[c] = first_red_of(b[c], F.diag[c]);
        }
        __syncthreads();
        TAIL_STAMP(first, TAIL_COPY);
    }
    for (int l = first; l < last; ++l) tail_down<FOLD>(g, level(l), level(l + 1), l + 1 < last);
    {  // mg_restrict_coarse_solve (mg_restrict_coarse_dense where the coarsest level's slot 6 holds G)
        const TailLevel C = level(last), F = level(last - 1);
        const float* dense = TAIL_F(last, 6);
        GROUP_RANGE(g, c, 0, C.m)
        {
            C.b[c] = restrict_value(F.r, F.down, C.stride, c);
            if (!dense) C.x[c] = 0.0f;
        }
        __syncthreads();
        TAIL_STAMP(last, TAIL_RESTRICT);
        if (dense) {
            block_dense_solve(C.x, C.b, dense, C.stride, C.m);
            __syncthreads();
        } else {
            block_coarse_sweeps(C.x, C.b, C.nbr, C.diag, C.stride, C.m_red, C.m);
        }
        TAIL_STAMP(last, TAIL_COARSE);
    }
    for (int l = last - 1; l >= first; --l) tail_up(g, level(l), level(l + 1).x);
    if (SHARED) {  // tail_up ended with a barrier
        const TailLevel F = level(first);
        float* x = TAIL_F(first, 0);
        GROUP_RANGE(g, c, 0, F.m) x[c] = F.x[c];
        TAIL_STAMP(first, TAIL_COPY);  // thread 0's copies alone (no barrier follows)
    }
}

// The dynamic shared memory of the _shared tails (host harnesses bring their own array).
#ifndef TAIL_SHARED_ARRAY
#if defined(__CUDA_ARCH__) && !defined(__syncthreads)
#define TAIL_SHARED_ARRAY(name) extern __shared__ float name[]
#else  // the host pass, or a host harness (its __syncthreads a macro) that calls no _shared kernel
#define TAIL_SHARED_ARRAY(name) float* name = nullptr
#endif
#endif

extern "C" __global__ void __launch_bounds__(1024) mg_tail_vcycle(const unsigned long long* __restrict__ ptrs,
                                                                  const int* __restrict__ strides, int first, int last,
                                                                  const int* __restrict__ sizes,
                                                                  const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    TAIL_STAMP(0, TAIL_START);
    block_tail<false>(ptrs, strides, first, last, sizes, nullptr);
}

// mg_tail_vcycle with the levels' vectors in shared memory (block_tail<true>); launched with
// 4·Σ (3, the coarsest 2)·strides[l] bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(1024)
    mg_tail_vcycle_shared(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides, int first,
                          int last, const int* __restrict__ sizes, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    TAIL_SHARED_ARRAY(shared);
    TAIL_STAMP(0, TAIL_START);
    block_tail<true>(ptrs, strides, first, last, sizes, shared);
}

// Levels from..last (1 ≤ from < first < last) in one launch of one cluster
// (VOXFX_SPARSE_MG_CLUSTER): levels from..first − 1, whose unknowns are too many for one
// block, down and up by the whole cluster; levels first..last by its block 0 as
// mg_tail_vcycle (SHARED: as mg_tail_vcycle_shared), the other blocks waiting at the
// cluster's barrier.
template <bool SHARED, bool FOLD = false>
__device__ __forceinline__ void cluster_tail(const unsigned long long* __restrict__ ptrs,
                                             const int* __restrict__ strides, int from, int first, int last,
                                             const int* __restrict__ sizes, float* shared)
{
    const ClusterGroup g;
    if (FOLD) {  // level from's red first-sweep values (its b restricted by the launch before)
        const TailLevel F = tail_global(ptrs, strides, sizes, from);
        GROUP_RANGE(g, c, 0, F.m_red) F.x[c] = first_red_value(F.b, F.diag, c);
        g.sync();
        TAIL_STAMP(from, TAIL_RED);
    }
    for (int l = from; l < first; ++l)  // FOLD: the restriction into first writes its global x too (unread)
        tail_down<FOLD>(g, tail_global(ptrs, strides, sizes, l), tail_global(ptrs, strides, sizes, l + 1),
                        l + 1 < last);
    if (blockIdx.x == 0) block_tail<SHARED, FOLD>(ptrs, strides, first, last, sizes, shared);
    g.sync();
    TAIL_STAMP(first, TAIL_COPY);
    for (int l = first - 1; l >= from; --l)
        tail_up(g, tail_global(ptrs, strides, sizes, l), tail_global(ptrs, strides, sizes, l + 1).x);
}

extern "C" __global__ void TAIL_CLUSTER_DIMS __launch_bounds__(1024)
    mg_tail_cluster(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides, int from, int first,
                    int last, const int* __restrict__ sizes, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;  // the same for every block: none waits at a barrier for another
    TAIL_STAMP(0, TAIL_START);
    cluster_tail<false>(ptrs, strides, from, first, last, sizes, nullptr);
}

// mg_tail_cluster with block 0's levels first..last in shared memory (as mg_tail_vcycle_shared;
// every block of the cluster is launched with the same dynamic shared memory).
extern "C" __global__ void TAIL_CLUSTER_DIMS __launch_bounds__(1024)
    mg_tail_cluster_shared(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides, int from,
                           int first, int last, const int* __restrict__ sizes, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    TAIL_SHARED_ARRAY(shared);
    TAIL_STAMP(0, TAIL_START);
    cluster_tail<true>(ptrs, strides, from, first, last, sizes, shared);
}

// The _shared tails with the first sweep in two passes (FOLD: first_red_of, black_first_value;
// VOXFX_SPARSE_MG_TAIL_FOLD): the same values bit for bit.
extern "C" __global__ void __launch_bounds__(1024)
    mg_tail_vcycle_shared_fold(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides,
                               int first, int last, const int* __restrict__ sizes, const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    TAIL_SHARED_ARRAY(shared);
    TAIL_STAMP(0, TAIL_START);
    block_tail<true, true>(ptrs, strides, first, last, sizes, shared);
}

extern "C" __global__ void TAIL_CLUSTER_DIMS __launch_bounds__(1024)
    mg_tail_cluster_shared_fold(const unsigned long long* __restrict__ ptrs, const int* __restrict__ strides,
                                int from, int first, int last, const int* __restrict__ sizes,
                                const int* __restrict__ state)
{
    if (state[S_STOPPED]) return;
    TAIL_SHARED_ARRAY(shared);
    TAIL_STAMP(0, TAIL_START);
    cluster_tail<true, true>(ptrs, strides, from, first, last, sizes, shared);
}
