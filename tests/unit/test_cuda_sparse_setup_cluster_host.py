"""The set-up's one-launch tail of coarse levels (cuda/flip_sparse_pressure_setup.cu:
mgs_tail_levels* on one block, mgs_tail_levels_cluster* on one cluster; the groups of
include/voxfx_setup_groups.cuh) run by real host threads: nvcc builds the kernels as host
functions with thread-local block and thread indices, __syncthreads a barrier of a block's
threads, the cluster's barrier one of every thread, each block's shared ints its own, another
block's read through them (distributed shared memory), and a warp's shuffle an exchange among
its threads. The driver is test_cuda_sparse_pressure_setup_host's (levels launched one item a
call up to the tail), its output every kept level's tables, checked against the NumPy VCycle
(sparse_multigrid): a missing barrier, a wrong block offset in the cluster's scan or a lost
chunk carry gives another table."""

import re

import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_setup_host import SETUP, assert_levels, scene_lines

STUBS = r"""
#include <cstdio>
#include <cstring>
#include <vector>
#include <thread>
#include <pthread.h>
// DEFINES
#define TAIL_CLUSTER 8
#undef __device__
#define __device__ __attribute__((host))
#define __global__
#undef __forceinline__
#define __forceinline__ inline
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __shared__
#define __shared__ static
struct HostDim { unsigned x, y, z; };
static thread_local HostDim h_block, h_thread;
static HostDim h_dim, h_grid;
#define blockIdx h_block
#define blockDim h_dim
#define threadIdx h_thread
#define gridDim h_grid
static bool threaded = false;  // the tail's run: barriers real; the driver's one-item launches: none
static std::vector<pthread_barrier_t> block_barriers, warp_barriers;
static pthread_barrier_t cluster_barrier;
static void block_sync() { if (threaded) pthread_barrier_wait(&block_barriers[h_block.x]); }
#define __syncthreads() block_sync()
#define SETUP_CLUSTER_BARRIER() pthread_barrier_wait(&cluster_barrier)
struct HostShared { int sums[64]; int totals[4]; };  // a block's shared ints (SETUP_SHARED's names)
static std::vector<HostShared> host_shared;
#define SETUP_SHARED(T, name, n) T* name = host_shared[h_block.x].name
static int host_cluster_int(const int* p, int rank) {  // the same int of block rank's shared memory
    const char* mine = (const char*)&host_shared[h_block.x];
    return *(const int*)((const char*)&host_shared[rank] + ((const char*)p - mine));
}
#define SETUP_CLUSTER_INT(p, rank) host_cluster_int(p, rank)
static std::vector<int> warp_lanes;
static int host_shfl_up(unsigned, int v, int d) {  // lane − d's v (its own below d), by the warp's threads
    const int w = (int)(h_block.x * ((h_dim.x + 31) / 32) + h_thread.x / 32), lane = (int)(h_thread.x % 32);
    warp_lanes[32 * w + lane] = v;
    pthread_barrier_wait(&warp_barriers[w]);
    const int r = lane >= d ? warp_lanes[32 * w + lane - d] : v;
    pthread_barrier_wait(&warp_barriers[w]);
    return r;
}
#define __shfl_up_sync host_shfl_up
#define HOST_WARP_SHUFFLES  // voxfx_reduce.cuh's warp_inclusive_scan by them
#define __shfl_down_sync(mask, v, offset) ((v) * 0)  // the header's other warp functions: compiled, not called
#define __ballot_sync(mask, flag) ((unsigned)(flag))
#define __popc __builtin_popcount
static unsigned host_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
#define __float_as_uint host_float_as_uint
template <typename T> T host_max(T* p, T v) {
    T o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (o < v && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return o;
}
#define atomicMax host_max
template <typename T> T host_add(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
#define atomicAdd host_add
#include "flip_sparse_pressure_setup.cu"
// 0 mgs_tail_levels, 1 mgs_tail_levels_cluster, 2 mgs_tail_levels_fast, 3 the tail's first level by the
// cluster and the rest by the fast block ("hybrid"); + 4: the _scatter kernels.
static int tail_kernel, tail_blocks, tail_threads;
static void run_group(int kernel, int blocks, int threads, const long long* rec, int first, int count, int* cnt,
                      int* span);
static void run_tail(const long long* rec, int first, int count, int* cnt, int* span) {
    const int way = tail_kernel % 4, scatter = tail_kernel / 4;
    if (way == 0) run_group(4 * scatter, 1, tail_threads, rec, first, count, cnt, span);
    if (way == 1) run_group(1 + 4 * scatter, tail_blocks, tail_threads, rec, first, count, cnt, span);
    if (way == 2) run_group(2 + 4 * scatter, 1, tail_threads, rec, first, count, cnt, span);
    if (way == 3) {
        run_group(1 + 4 * scatter, tail_blocks, tail_threads, rec, first, first + 1, cnt, span);
        run_group(2 + 4 * scatter, 1, tail_threads, rec, first + 1, count, cnt, span);
    }
}
static void run_group(int kernel, int blocks, int threads, const long long* rec, int first, int count, int* cnt,
                      int* span) {
    const int warps = (threads + 31) / 32;
    h_dim = {(unsigned)threads, 1, 1};
    h_grid = {(unsigned)blocks, 1, 1};
    block_barriers.assign(blocks, pthread_barrier_t());
    for (auto& b : block_barriers) pthread_barrier_init(&b, nullptr, threads);
    warp_barriers.assign(blocks * warps, pthread_barrier_t());
    for (int w = 0; w < blocks * warps; ++w)
        pthread_barrier_init(&warp_barriers[w], nullptr, std::min(32, threads - 32 * (w % warps)));
    pthread_barrier_init(&cluster_barrier, nullptr, blocks * threads);
    warp_lanes.assign(32 * blocks * warps, -99);
    host_shared.assign(blocks, HostShared());
    for (auto& s : host_shared) { for (int& v : s.sums) v = -777; for (int& v : s.totals) v = -777; }
    threaded = true;
    std::vector<std::thread> pool;
    for (int blk = 0; blk < blocks; ++blk)
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([=] {
                h_block = {(unsigned)blk, 0, 0};
                h_thread = {(unsigned)t, 0, 0};
                if (kernel == 0) mgs_tail_levels(rec, first, count, cnt, span);
                else if (kernel == 1) mgs_tail_levels_cluster(rec, first, count, cnt, span);
                else if (kernel == 2) mgs_tail_levels_fast(rec, first, count, cnt, span);
                else if (kernel == 4) mgs_tail_levels_scatter(rec, first, count, cnt, span);
                else if (kernel == 5) mgs_tail_levels_cluster_scatter(rec, first, count, cnt, span);
                else mgs_tail_levels_fast_scatter(rec, first, count, cnt, span);
            });
    for (auto& th : pool) th.join();
    threaded = false;
    for (auto& b : block_barriers) pthread_barrier_destroy(&b);
    for (auto& b : warp_barriers) pthread_barrier_destroy(&b);
    pthread_barrier_destroy(&cluster_barrier);
}
"""


def harness_source(mutation=None):
    """SETUP's driver with the threaded STUBS, its tail run by ``run_tail`` (input after the tail
    level: kernel blocks threads); *mutation*: (old, new) text of the groups' header, inlined."""
    from pathlib import Path

    from voxfx.kernels import backend

    driver = SETUP[SETUP.index("#include <algorithm>\ntypedef long long ll;"):]
    driver, n = re.subn(r"mgs_tail_levels\(rec\.data\(\), l, count, cnt\.data\(\), span\.data\(\)\);",
                        "run_tail(rec.data(), l, count, cnt.data(), span.data());", driver)
    assert n == 1
    old = 'if (scanf("%d", &tail) != 1) tail = 0;'
    assert old in driver
    driver = driver.replace(old, 'if (scanf("%d %d %d %d", &tail, &tail_kernel, &tail_blocks, &tail_threads) != 4) '
                                 'return 2;')
    stubs = STUBS
    if mutation is not None:
        header = (Path(backend.CUDA_INCLUDE) / "voxfx_setup_groups.cuh").read_text()
        assert mutation[0] in header
        stubs = stubs.replace('#include "flip_sparse_pressure_setup.cu"',  # its guard: the file's include is empty
                              header.replace(mutation[0], mutation[1]) + '\n#include "flip_sparse_pressure_setup.cu"')
    return stubs + driver


def _harness(tmp_path_factory, mutation=None, name="setup_cluster"):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    source = with_defines(harness_source(mutation), setup_kernels, ["#include <algorithm>"])
    return _build(tmp_path_factory, source, name=name)


@pytest.fixture(scope="module")
def cluster_harness(tmp_path_factory):
    return _harness(tmp_path_factory)


# (kernel, blocks, threads): the block on 1 × 37 threads, the cluster on 3 × 40 (a partial warp),
# 2 × 64 and 8 × 32 — each level's scans over several chunks of the cluster's threads —, the fast
# block on 1 × 40 and 1 × 64, the hybrid on 3 × 40 then 1 × 40; kernel + 4: the _scatter kernels.
RUNS = [(0, 1, 37), (1, 3, 40), (1, 2, 64), (1, 8, 32), (2, 1, 40), (2, 1, 64), (3, 3, 40), (4, 1, 37), (5, 3, 40),
        (5, 8, 32), (6, 1, 40), (7, 3, 40)]
IDS = ["block-1x37", "cluster-3x40", "cluster-2x64", "cluster-8x32", "fast-1x40", "fast-1x64", "hybrid-3x40",
       "block-scatter-1x37", "cluster-scatter-3x40", "cluster-scatter-8x32", "fast-scatter-1x40",
       "hybrid-scatter-3x40"]


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("kernel,blocks,threads", RUNS, ids=IDS)
@pytest.mark.parametrize("tail", [1, 2])
@pytest.mark.parametrize("scene", ["tank", "sealed"])
def test_tails_on_threads_build_the_numpy_tables(cluster_harness, scene, tail, kernel, blocks, threads):
    """The tail from level 1 or 2 on threads (the cluster's on several blocks) gives every kept
    level's m, m_red, nbr, diag, up and down of the NumPy VCycle."""
    lines, M = scene_lines(scene)
    out = cluster_harness.raw(lines + [f"{tail} {kernel} {blocks} {threads}"], check=True).split()
    assert_levels(out, M)


# The cluster scan's deterministic mistakes: every block's offset one block too many, the carry of
# a chunk the block's own total, the second scan of a pair the first's warp sums; the passes
# without the cluster's barrier (120 threads racing: it failed every run tried); the fast block's
# second scan carrying the first's chunk sums.
MUTANTS = {"offset": ("before_a += r < (int)blockIdx.x ? xa : 0;", "before_a += r <= (int)blockIdx.x ? xa : 0;"),
           "carry": ("carry_a += chunk_a;", "carry_a += ta;"),
           "pair": ("sb = lane < warps ? sums[32 + lane] : 0;", "sb = lane < warps ? sums[lane] : 0;"),
           "barrier": ("__device__ void sync() { SETUP_CLUSTER_BARRIER(); }", "__device__ void sync() {}"),
           "fast-carry": ("            carry_a += ta;\n            carry_b += tb;\n            __syncthreads();",
                          "            carry_a += ta;\n            carry_b += ta;\n            __syncthreads();")}


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_a_wrong_cluster_scan_builds_other_tables(tmp_path_factory, mutant):
    """The mutants of SetupCluster's scan fail the oracle that the kernel passes."""
    harness = _harness(tmp_path_factory, MUTANTS[mutant], name="setup_cluster_" + mutant)
    lines, M = scene_lines("tank")
    out = harness.raw(lines + ["1 2 1 40" if mutant.startswith("fast") else "1 1 3 40"]).split()
    with pytest.raises((AssertionError, ValueError, IndexError)):  # other tables, or none readable
        assert_levels(out, M)
