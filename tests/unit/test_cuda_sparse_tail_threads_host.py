"""The one-block and cluster tails of the V-cycle (cuda/flip_sparse_pressure_vcycle_tail.cu:
mg_tail_vcycle, mg_tail_cluster and their _shared kernels) run by real host threads: nvcc builds the kernels as host
functions with thread-local block and thread indices, __syncthreads a barrier of a block's
threads and the cluster's barrier one of every thread of every block, and the kernels run
with several blocks of a few threads each. Each pass spreads its unknowns over the threads
and reads only what the passes before it wrote, so every run gives the one-thread run's
values bit for bit (test_cuda_sparse_pressure_host.py and test_cuda_sparse_vcycle_plan_host.py
check that one against the NumPy V-cycle); a missing barrier would let a thread read a value
that another has not written yet."""

import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import READERS
from tests.unit.test_cuda_sparse_vcycle_plan_host import LEVELS, hierarchy  # noqa: F401 (hierarchy: a fixture)
from voxfx.kernels.flip.sparse_pressure_gpu import _MGT

# Input: the hierarchy of test_cuda_sparse_vcycle_plan_host (levels, tables, r: unused), then
# "kernel blocks threads repeats": kernel 0 mg_tail_vcycle from level 1, 1 mg_tail_cluster from
# level 1 with its block from 2, 2 and 3 their _shared kernels (the vectors of the block's levels
# in its "shared memory", NaN on entry), 4 and 5 the _shared_fold ones (the first sweep in two
# passes, VOXFX_SPARSE_MG_TAIL_FOLD). Each repeat: level 1's b set to a fixed pattern, every
# other vector NaN off the sentinels, the kernel run. Output: per repeat whether every level's
# x and r equal the one-thread run's of kernel 0 or 1 bit for bit (the _shared kernels: level
# 1's x, their one result in global memory) (1 or 0).
HARNESS = r"""
#include <cstdio>
#include <cstring>
#include <cmath>
#include <vector>
#include <thread>
#include <pthread.h>
// DEFINES
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
static std::vector<pthread_barrier_t> block_barriers;
static pthread_barrier_t cluster_barrier;
static void block_sync() { pthread_barrier_wait(&block_barriers[h_block.x]); }
#define __syncthreads() block_sync()
#define CLUSTER_BARRIER() pthread_barrier_wait(&cluster_barrier)
#define __shfl_down_sync(mask, v, offset) ((v) * 0)
#define __ballot_sync(mask, flag) ((unsigned)(flag))
#define __popc __builtin_popcount
static unsigned host_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
#define __float_as_uint host_float_as_uint
template <typename T> T plain_max(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
template <typename T> T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
#define atomicMax plain_max  // the reductions' header needs them; the tails call none
#define atomicMin plain_min
#define atomicAdd plain_add
static std::vector<float> host_tail_shared(1 << 20);  // the _shared tails' "dynamic shared memory"
#define TAIL_SHARED_ARRAY(name) float* name = host_tail_shared.data()
#include "flip_sparse_pressure_vcycle_tail.cu"

""" + READERS + LEVELS + r"""

static void reset() {  // level 1's b a pattern, the rest NaN but the sentinels
    for (size_t l = 0; l < L.size(); ++l) {
        Level& A = L[l];
        for (int c = 0; c < A.stride; ++c) {
            const bool live = c < A.m;
            A.x[c] = live ? __builtin_nanf("") : 0.0f;
            A.r[c] = live ? __builtin_nanf("") : 0.0f;
            A.b[c] = !live ? 0.0f : l == 1 ? (float)std::sin(0.37 * c + 1.0) : __builtin_nanf("");
        }
    }
}

static void run(int kernel, int blocks, int threads) {
    h_dim = {(unsigned)threads, 1, 1};
    h_grid = {(unsigned)blocks, 1, 1};
    block_barriers.assign(blocks, pthread_barrier_t());
    for (auto& b : block_barriers) pthread_barrier_init(&b, nullptr, threads);
    pthread_barrier_init(&cluster_barrier, nullptr, blocks * threads);
    const int last = (int)L.size() - 1;
    std::vector<std::thread> pool;
    for (int blk = 0; blk < blocks; ++blk)
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([=] {
                h_block = {(unsigned)blk, 0, 0};
                h_thread = {(unsigned)t, 0, 0};
                if (kernel == 0) mg_tail_vcycle(ptrs.data(), strides.data(), 1, last, sizes.data(), state);
                else if (kernel == 1) mg_tail_cluster(ptrs.data(), strides.data(), 1, 2, last, sizes.data(), state);
                else if (kernel == 2) mg_tail_vcycle_shared(ptrs.data(), strides.data(), 1, last, sizes.data(), state);
                else if (kernel == 3)
                    mg_tail_cluster_shared(ptrs.data(), strides.data(), 1, 2, last, sizes.data(), state);
                else if (kernel == 4)
                    mg_tail_vcycle_shared_fold(ptrs.data(), strides.data(), 1, last, sizes.data(), state);
                else mg_tail_cluster_shared_fold(ptrs.data(), strides.data(), 1, 2, last, sizes.data(), state);
            });
    for (auto& th : pool) th.join();
    for (auto& b : block_barriers) pthread_barrier_destroy(&b);
    pthread_barrier_destroy(&cluster_barrier);
}

static bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int main() {
    if (!read_levels(0.0f)) return 1;  // x, b, r: reset() fills them before each run
    std::vector<float> unused;
    read_floats(unused, L[0].stride);
    int kernel, blocks, threads, repeats;
    while (scanf("%d %d %d %d", &kernel, &blocks, &threads, &repeats) == 4) {
        reset();
        run(kernel % 2, 1, 1);  // the global kernel's one-thread run
        std::vector<std::vector<float>> want;
        for (size_t l = 1; l < L.size(); ++l) { want.push_back(L[l].x); want.push_back(L[l].r); }
        bool nonzero = false;
        for (float v : L[1].x) nonzero = nonzero || (v != 0.0f && v == v);
        printf("%d\n", nonzero ? 1 : 0);
        for (int k = 0; k < repeats; ++k) {
            reset();
            for (auto& v : host_tail_shared) v = __builtin_nanf("");
            run(kernel, blocks, threads);
            bool ok = same(L[1].x, want[0]);
            for (size_t l = 1; l < L.size() && kernel < 2; ++l)
                ok = ok && same(L[l].x, want[2 * (l - 1)]) && same(L[l].r, want[2 * l - 1]);
            printf("%d\n", ok ? 1 : 0);
        }
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def threads_harness(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, _MGT), name="tail_threads")


@pytest.mark.parametrize("kernel,blocks,threads", [(0, 1, 5), (0, 1, 32), (1, 8, 3), (1, 8, 16), (1, 3, 7),
                                                    (1, 16, 2), (2, 1, 5), (2, 1, 32), (3, 8, 3), (3, 3, 7),
                                                    (3, 16, 2), (4, 1, 5), (4, 1, 32), (5, 8, 3), (5, 3, 7),
                                                    (5, 16, 2)],
                         ids=["block-5", "block-32", "cluster-8x3", "cluster-8x16", "cluster-3x7", "cluster-16x2",
                              "block-5-shared", "block-32-shared", "cluster-8x3-shared", "cluster-3x7-shared",
                              "cluster-16x2-shared", "block-5-fold", "block-32-fold", "cluster-8x3-fold",
                              "cluster-3x7-fold", "cluster-16x2-fold"])
def test_tails_on_threads_give_the_one_thread_values(threads_harness, hierarchy, kernel, blocks, threads):  # noqa: F811
    lines = hierarchy[3] + [f"{kernel} {blocks} {threads} 6"]
    out = [int(v) for v in threads_harness.raw(lines, check=True).split()]
    assert out[0] == 1  # the one-thread run computed something
    assert out[1:] == [1] * 6
