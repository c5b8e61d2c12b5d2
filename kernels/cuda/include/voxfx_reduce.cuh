// Warp and block reductions: the one copy every kernel that reduces uses (FLIP pressure's
// dot products, the wind's residual maxima, the FLIP CFL speed, the flakes' landed count).
// Warp functions need all 32 lanes of the warp present (launch with blockDim a multiple of
// 32: kernels/grid/launch.THREADS); the result is in lane 0.
#pragma once

// Σ v over the warp (lane 0), in a fixed order: the same result every run.
__device__ __forceinline__ double warp_sum(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// max v over the warp (lane 0), unsigned: the bits of non-negative floats order like the
// floats, and a NaN's bits beat every number (the NaN is kept).
__device__ __forceinline__ unsigned int warp_max(unsigned int v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

// max v over the warp (lane 0), float, by fmaxf (a NaN lane is dropped).
__device__ __forceinline__ float warp_max(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

// Atomic max of a non-negative float (its bits order like an unsigned int): exact and
// independent of the order of the atomics.
__device__ __forceinline__ void atomic_max_nonneg(float* slot, float value)
{
    atomicMax(reinterpret_cast<unsigned int*>(slot), __float_as_uint(value));
}

// *slot ← max(*slot, the warp's max of the non-negative value): one atomic per warp.
__device__ __forceinline__ void warp_max_into(float* slot, float value)
{
    value = warp_max(value);
    if ((threadIdx.x & 31) == 0) atomic_max_nonneg(slot, value);
}

// min / max of an int over the warp (lane 0; all 32 lanes present): one redux instruction on
// sm_80+, shuffles before; on the host (a harness's one-thread "warp") the one lane's value.
__device__ __forceinline__ int warp_min_int(int v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_min_sync(0xFFFFFFFFu, v);
#elif defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset >>= 1) v = min(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
#else
    return v;
#endif
}

__device__ __forceinline__ int warp_max_int(int v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xFFFFFFFFu, v);
#elif defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
#else
    return v;
#endif
}

// Bit k set where lane k's flag is set (all 32 lanes present).
__device__ __forceinline__ unsigned int warp_ballot(bool flag)
{
    return __ballot_sync(0xFFFFFFFFu, flag);
}

// Whether every lane of the warp has flag set (all 32 lanes present); on the host (a
// harness's one-thread "warp") the one lane's flag.
__device__ __forceinline__ bool warp_all(bool flag)
{
#ifdef __CUDA_ARCH__
    return __all_sync(0xFFFFFFFFu, flag);
#else
    return flag;
#endif
}

// *count += the number of lanes of the warp with flag set: one atomic per warp (none when
// no lane has it).
template <class T>
__device__ __forceinline__ void warp_count_into(T* count, bool flag)
{
    const unsigned int ballot = __ballot_sync(0xFFFFFFFFu, flag);
    if ((threadIdx.x & 31u) == 0u && ballot != 0u) atomicAdd(count, (T)__popc(ballot));
}

// *slot ← max(*slot, v) (non-negative float bits, as atomic_max_nonneg) for lanes that may
// share slots, not all present: with *grouped* (sm_80+) the lanes of one `key`
// (__match_any_sync) take their max (__reduce_max_sync) and the lowest adds it — one atomic
// a slot a warp instead of one a lane; otherwise (or on the host) one a lane. The plain read
// first skips the atomic where *slot already holds as much.
__device__ __forceinline__ void group_max_into(unsigned int* slot, unsigned int v, int key, bool grouped)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (grouped) {
        const unsigned int peers = __match_any_sync(__activemask(), key);
        v = __reduce_max_sync(peers, v);
        if ((int)(threadIdx.x & 31u) != __ffs(peers) - 1) return;
    }
#endif
    if (v > *slot) atomicMax(slot, v);
}

// group_max_into (grouped) with a fast path first (sm_80+): when every present lane holds the
// same key — the particles keep their seeding's spatial order, so most warps lie in one brick —
// one __reduce_max_sync over them and one atomic by the lowest lane, no __match_any_sync; mixed
// warps take group_max_into's groups. The same maxima (a max is exact and order independent).
__device__ __forceinline__ void group_max_into_uniform(unsigned int* slot, unsigned int v, int key)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned int active = __activemask();
    const int leader = __ffs(active) - 1;
    if (__all_sync(active, key == __shfl_sync(active, key, leader))) {
        v = __reduce_max_sync(active, v);
        if ((int)(threadIdx.x & 31u) == leader && v > *slot) atomicMax(slot, v);
        return;
    }
#endif
    group_max_into(slot, v, key, true);
}

// The old value of counter[key] plus this lane's place among the warp's lanes of the same
// key (lane order): a counting sort's rank, with one atomicAdd a group of equal keys instead
// of one a lane (the lanes of a group take consecutive ranks). Every lane of the warp must
// call it; a lane with key < 0 adds nothing (its answer is not a rank). On the host (a
// harness's one-thread "warp") the one lane's add.
__device__ __forceinline__ int warp_grouped_rank(int* counter, long long key)
{
#ifdef __CUDA_ARCH__
    const unsigned int group = __match_any_sync(0xffffffffu, key), lane = threadIdx.x & 31u;
    const int leader = __ffs((int)group) - 1;
    int base = 0;
    if (key >= 0 && (int)lane == leader) base = atomicAdd(counter + key, __popc(group));
    base = __shfl_sync(0xffffffffu, base, leader);
    return base + __popc(group & ((1u << lane) - 1u));
#else  // one thread: a plain read and write
    if (key < 0) return 0;
    const int old = counter[key];
    counter[key] = old + 1;
    return old;
#endif
}

// Σ v and max v over the warp, every lane getting the result (butterfly), and the warp's
// inclusive scan in lane order (voxfx_bin.cuh's block sums and scans). On the host (a
// harness's one-thread "warp") each is the value itself.
__device__ __forceinline__ int warp_all_sum(int v)
{
#ifdef __CUDA_ARCH__
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
#endif
    return v;
}

__device__ __forceinline__ unsigned int warp_all_max(unsigned int v)
{
#ifdef __CUDA_ARCH__
    for (int d = 16; d > 0; d >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, d));
#endif
    return v;
}

// warp_all_max with one redux instruction on sm_80+ (the butterfly before); on the host the one lane's value.
__device__ __forceinline__ unsigned int warp_all_max_redux(unsigned int v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xffffffffu, v);
#elif defined(__CUDA_ARCH__)
    return warp_all_max(v);
#else
    return v;
#endif
}

// The bitwise OR of v over the warp, every lane getting it (flip_sparse_reach.cu reach_slots' class word).
__device__ __forceinline__ unsigned int warp_all_or(unsigned int v)
{
#ifdef __CUDA_ARCH__
    for (int d = 16; d > 0; d >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, d);
#endif
    return v;
}

// low ← min and high ← max of the warp's low and high, every lane getting both (one butterfly
// for the two: flip_surface_lean.cu particle_bounds' per-axis keys).
__device__ __forceinline__ void warp_all_min_max(unsigned int& low, unsigned int& high)
{
#ifdef __CUDA_ARCH__
    for (int d = 16; d > 0; d >>= 1) {
        low = min(low, __shfl_xor_sync(0xffffffffu, low, d));
        high = max(high, __shfl_xor_sync(0xffffffffu, high, d));
    }
#endif
}

// Inclusive scan over the warp's lanes (on the host the one lane's value, unless a threaded
// harness brings its warps' shuffles: HOST_WARP_SHUFFLES, tests/unit/test_cuda_sparse_setup_cluster_host.py).
__device__ __forceinline__ int warp_inclusive_scan(int v)
{
#if defined(__CUDA_ARCH__) || defined(HOST_WARP_SHUFFLES)
    const int lane = (int)(threadIdx.x & 31);
    for (int d = 1; d < 32; d <<= 1) {
        const int o = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += o;
    }
#endif
    return v;
}

// Block sums of a and b → out_a[blockIdx.x], out_b[blockIdx.x] (thread 0 writes; a null
// output is skipped). Every thread of the block must call it.
__device__ void block_sum2(double a, double b, double* out_a, double* out_b)
{
    __shared__ double sa[32], sb[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    if (lane == 0) {
        sa[warp] = a;
        sb[warp] = b;
    }
    __syncthreads();
    if (warp == 0) {
        a = lane < warps ? sa[lane] : 0.0;
        b = lane < warps ? sb[lane] : 0.0;
        a = warp_sum(a);
        b = warp_sum(b);
        if (lane == 0) {
            if (out_a) out_a[blockIdx.x] = a;
            if (out_b) out_b[blockIdx.x] = b;
        }
    }
}

// Σ partials[0..n) by one block, in a fixed order; the result in thread 0.
__device__ double block_total(const double* __restrict__ partials, int n)
{
    __shared__ double s[32];
    double v = 0.0;
    for (int t = threadIdx.x; t < n; t += blockDim.x) v += partials[t];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();  // s may still be read by a previous call
    if (lane == 0) s[warp] = v;
    __syncthreads();
    v = 0.0;
    if (warp == 0) {
        v = lane < warps ? s[lane] : 0.0;
        v = warp_sum(v);
    }
    return v;
}
