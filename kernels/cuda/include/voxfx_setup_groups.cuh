// The groups of threads that run the set-up's coarse-level tail (flip_sparse_pressure_setup.cu's
// mgs_tail_levels_body): one block (SetupBlock: __syncthreads, scan_range's Hillis–Steele scan)
// or one cluster of TAIL_CLUSTER blocks (SetupCluster, sm_90: the cluster's hardware barrier,
// whose arrive releases and wait acquires every earlier access of the cluster's threads, global
// memory included; a scan by warp shuffles, each block's total read by every block from the
// others' shared memory). Both give the same integers: an inclusive scan of ints is the same in
// any order of its additions. Issue 24, 8M dam break on an H100 (s22b, bench/RESULTS.md): the
// one-block tail 0.087–0.094 ms of device a substep (levels 4 … 7); on the cluster 0.085–0.089 (a
// cluster barrier costs about what its threads save at these sizes); SetupFastBlock's 0.066; level
// 4 on the cluster and the rest by the fast block 0.038 + 0.027 in two launches.
#ifndef VOXFX_SETUP_GROUPS_CUH  // a guard, not #pragma once: a host harness inlines a mutant before it
#define VOXFX_SETUP_GROUPS_CUH

#include "voxfx_block_scan.cuh"  // scan_range: the one-block group's scan

struct SetupBlock {  // the one-block tail as it was (its barriers where the host launched the next kernel)
    __device__ void sync() { __syncthreads(); }
    __device__ void own() { __syncthreads(); }
    __device__ void level_end() { __syncthreads(); }
    __device__ void scan(const int* __restrict__ a, int n, int* __restrict__ o) { scan_range(a, 0, n, 0, o); }
    // The two rows (n long) of flags scanned into the two of o.
    __device__ void scan_rows(const int* __restrict__ flags, int n, int* __restrict__ o)
    {
        scan_range(flags, 0, n, 0, o);
        scan_range(flags + n, 0, n, 0, o + n);
    }
};

#include "voxfx_reduce.cuh"  // warp_inclusive_scan (full warps: the tail's blocks are 1024 threads)
// The hooks a threaded host harness replaces (tests/unit/test_cuda_sparse_setup_cluster_host.py):
// a block's shared array, another block's int of it (distributed shared memory), the cluster's
// barrier (the last two below, with the cluster's group). Before sm_90 the cluster kernels are compiled but
// never launched (sparse_pressure_workspace_levels.tail_group falls back to the fast block). The fast block is
// in every module of flip_sparse_pressure_setup.cu (the default's), the cluster only with -DTAIL_CLUSTER.
#ifndef SETUP_SHARED
#define SETUP_SHARED(T, name, n) __shared__ T name[n]
#endif

// The block's inclusive scans of a and b (in place); ta, tb: the block's sums. sums: the block's
// 64 shared ints, written again only after a barrier that follows this call's reads.
__device__ __forceinline__ void setup_block_inclusive2(int& a, int& b, int* sums, int& ta, int& tb)
{
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = ((int)blockDim.x + 31) >> 5;
    a = warp_inclusive_scan(a);
    b = warp_inclusive_scan(b);
    if (lane == 31 || (int)threadIdx.x == (int)blockDim.x - 1) {
        sums[warp] = a;
        sums[32 + warp] = b;
    }
    __syncthreads();
    if (warp == 0) {
        int sa = lane < warps ? sums[lane] : 0, sb = lane < warps ? sums[32 + lane] : 0;
        sa = warp_inclusive_scan(sa);
        sb = warp_inclusive_scan(sb);
        if (lane < warps) {
            sums[lane] = sa;
            sums[32 + lane] = sb;
        }
    }
    __syncthreads();
    ta = sums[warps - 1];
    tb = sums[32 + warps - 1];
    if (warp > 0) {
        a += sums[warp - 1];
        b += sums[32 + warp - 1];
    }
}

// One block with SetupCluster's shortcuts (the _fast kernels: the small levels after a cluster's
// level, or every level): no barrier between a pass and the scan of its flags, none at a level's
// end, and the scans by warp shuffles — three barriers a chunk of blockDim.x items where
// scan_range's Hillis–Steele steps take twenty at 1024 threads. A grid of one block.
struct SetupFastBlock {
    __device__ void sync() { __syncthreads(); }
    __device__ void own() {}
    __device__ void level_end() {}
    __device__ void scan2(const int* __restrict__ a, const int* __restrict__ b, int n, int* __restrict__ oa,
                          int* __restrict__ ob)
    {
        SETUP_SHARED(int, sums, 64);
        int carry_a = 0, carry_b = 0;
        for (int at = 0; at < n; at += (int)blockDim.x) {
            const int i = at + (int)threadIdx.x;
            int va = i < n ? a[i] : 0, vb = i < n && b ? b[i] : 0, ta, tb;
            setup_block_inclusive2(va, vb, sums, ta, tb);
            if (i < n) {
                oa[i] = carry_a + va;
                if (b) ob[i] = carry_b + vb;
            }
            carry_a += ta;
            carry_b += tb;
            __syncthreads();  // sums read above before the next chunk writes them
        }
    }
    __device__ void scan(const int* __restrict__ a, int n, int* __restrict__ o) { scan2(a, nullptr, n, o, nullptr); }
    __device__ void scan_rows(const int* __restrict__ flags, int n, int* __restrict__ o)
    {
        scan2(flags, flags + n, n, o, o + n);
    }
};

#ifdef TAIL_CLUSTER  // the cluster's group: only in the module of the cluster kernels (-DTAIL_CLUSTER)
#ifndef SETUP_CLUSTER_INT
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ int setup_cluster_int(const int* local, int rank)
{
    const unsigned at = (unsigned)__cvta_generic_to_shared(local);
    unsigned remote;
    int v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(rank));
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
    return v;
}
#define SETUP_CLUSTER_INT(p, rank) setup_cluster_int(p, rank)
#define SETUP_CLUSTER_BARRIER() asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory")
#else
#define SETUP_CLUSTER_INT(p, rank) (*(p))
#define SETUP_CLUSTER_BARRIER() __syncthreads()
#endif
#endif

struct SetupCluster {
    int slot = 0;  // which pair of block totals this chunk writes (read by the others after the barrier)
    __device__ void sync() { SETUP_CLUSTER_BARRIER(); }
    // Between a pass and a scan of what it wrote: none — item i's flag and its scan are both
    // thread i mod (gridDim.x · blockDim.x)'s (the passes' RANGE, the scan's chunks).
    __device__ void own() {}
    // The end of a level: none — the next level's passes read only what earlier barriers ordered
    // and write its own arrays (the workspace's levels never share memory).
    __device__ void level_end() {}
    // oa[i] = Σ a[0..i] and, where b, ob[i] = Σ b[0..i] for i < n, by every thread of the cluster
    // (a grid of one cluster: block b's rank is blockIdx.x), gridDim.x · blockDim.x items a chunk,
    // one barrier each.
    __device__ void scan2(const int* __restrict__ a, const int* __restrict__ b, int n, int* __restrict__ oa,
                          int* __restrict__ ob)
    {
        SETUP_SHARED(int, sums, 64);
        SETUP_SHARED(int, totals, 4);
        const int size = (int)(gridDim.x * blockDim.x);
        int carry_a = 0, carry_b = 0;
        for (int at = 0; at < n; at += size) {
            const int i = at + (int)(blockIdx.x * blockDim.x + threadIdx.x);
            int va = i < n ? a[i] : 0, vb = i < n && b ? b[i] : 0, ta, tb;
            setup_block_inclusive2(va, vb, sums, ta, tb);
            if (threadIdx.x == 0) {
                totals[2 * slot] = ta;
                totals[2 * slot + 1] = tb;
            }
            SETUP_CLUSTER_BARRIER();
            int before_a = 0, before_b = 0, chunk_a = 0, chunk_b = 0;
            for (int r = 0; r < (int)gridDim.x; ++r) {
                const int xa = SETUP_CLUSTER_INT(&totals[2 * slot], r), xb = SETUP_CLUSTER_INT(&totals[2 * slot + 1], r);
                before_a += r < (int)blockIdx.x ? xa : 0;
                before_b += r < (int)blockIdx.x ? xb : 0;
                chunk_a += xa;
                chunk_b += xb;
            }
            if (i < n) {
                oa[i] = carry_a + before_a + va;
                if (b) ob[i] = carry_b + before_b + vb;
            }
            carry_a += chunk_a;
            carry_b += chunk_b;
            slot ^= 1;
        }
    }
    __device__ void scan(const int* __restrict__ a, int n, int* __restrict__ o) { scan2(a, nullptr, n, o, nullptr); }
    __device__ void scan_rows(const int* __restrict__ flags, int n, int* __restrict__ o)
    {
        scan2(flags, flags + n, n, o, o + n);
    }
};

#endif  // TAIL_CLUSTER
#endif
