"""The P2G scatter's crowded warps (flip_sparse_scatter.cu with SCATTER_CROWD 1,
include/voxfx_scatter_crowd.cuh; sparse_scatter.crowd_mode) checked on the host without a GPU,
a warp as a warp: nvcc builds the kernels as host functions, and p2g_scatter_brick runs each
brick as 32 threads (std::thread) with the warp's match, max and shuffles and the block's
barrier done through shared slots and a barrier, the atomics as real atomic adds. On
test_cuda_sparse_gather_host's scene with crowded cells added (thousands of particles in a
few cells, so that whole warps share a cell: the crowded path runs), in the closed box (with
particles whose window or face lattice cuts terms) and open, FLIP and APIC, at spreads 8 and
1: the integer sums are the lean flip kernel's (SCATTER_CROWD 0, the same threads) bit for
bit; on one scene a mutant whose trees drop their last step (SCATTER_CROWD_MUTANT) gives other sums; and
a crowd minimum of 1 lane (every warp by groups, most of one lane) the same sums again. The
device comparison is tests/gpu/test_flip_sparse_scatter_crowd_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import _build, kernel_defines
from tests.unit.test_cuda_sparse_gather_host import SCENE_AND_BRICK_GATHER, _hex
from voxfx.kernels.flip import sparse_gpu, sparse_scatter
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

# The host's warp of 32 threads: a barrier (mutex + condition, generation counted), the
# warp's functions through shared slots, atomics as atomic adds, threadIdx per thread.
WARP = r"""
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
static int host_threads = 1;  // 32 while a brick runs as a warp
static std::mutex host_mutex;
static std::condition_variable host_cv;
static int host_waiting = 0;
static long long host_generation = 0;
static void host_barrier() {
    if (host_threads == 1) return;
    std::unique_lock<std::mutex> lock(host_mutex);
    const long long gen = host_generation;
    if (++host_waiting == host_threads) {
        host_waiting = 0;
        ++host_generation;
        host_cv.notify_all();
    } else {
        host_cv.wait(lock, [&] { return host_generation != gen; });
    }
}
#undef __syncthreads
#define __syncthreads() host_barrier()
static thread_local HostDim h_lane_dim;
#undef threadIdx
#define threadIdx h_lane_dim
static int plain_add(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned plain_add(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned long long plain_add(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static unsigned host_keys[32];
static int host_ints[32];
static unsigned long long host_words[32];
static long long host_crowded = 0;  // warps (rows) that took the crowded path
#define WARP_HOST_LANES 1
static unsigned int warp_lane() { return threadIdx.x & 31u; }
static unsigned int warp_match_any(unsigned int key) {
    host_keys[warp_lane()] = key;
    host_barrier();
    unsigned int m = 0u;
    for (int l = 0; l < host_threads; ++l) m |= (unsigned int)(host_keys[l] == key) << l;
    host_barrier();
    return m;
}
static int warp_all_max_int(int v) {
    host_ints[warp_lane()] = v;
    host_barrier();
    int m = v;
    for (int l = 0; l < host_threads; ++l) m = std::max(m, host_ints[l]);
    host_barrier();
    if (warp_lane() == 0 && m >= SCATTER_CROWD_MIN) ++host_crowded;
    return m;
}
static unsigned long long warp_shfl_u64(unsigned long long v, int src) {
    host_words[warp_lane()] = v;
    host_barrier();
    const unsigned long long r = host_words[src];
    host_barrier();
    return r;
}
"""

# Input: closed nx ny nz apic spread; the scene as SCENE_AND_BRICK_GATHER reads it. Output:
# the bounds (2), the warps that took the crowded path, then acc (6·cells, signed integers).
HARNESS = STUBS + "#ifndef SCATTER_CROWD_MIN\n#define SCATTER_CROWD_MIN 4\n#endif\n" + WARP + r"""
using std::min;
using std::max;
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_gather.cu"
#include "flip_sparse_scatter.cu"
""" + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, apic, spread;
    if (scanf("%d %d %d %d %d %d", &closed, &nx, &ny, &nz, &apic, &spread) != 6) return 1;
""" + SCENE_AND_BRICK_GATHER + r"""
    std::vector<unsigned int> bounds(2, 0u);
    std::vector<unsigned long long> acc(6 * cells, 0ull);
    LAUNCH(1, scatter_bounds(svel.data(), sc.data(), apic, n, count.data(), cells, h, bounds.data()));
    host_threads = 32;
    for (ll b = 0; b < cap; ++b) {
        h_block.x = (unsigned)b;
        h_dim.x = 32;
        std::vector<std::thread> lanes;
        for (int l = 0; l < 32; ++l)
            lanes.emplace_back([&, l] {
                h_lane_dim.x = (unsigned)l;
                p2g_scatter_brick(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(), used.data(),
                                  coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                  bounds.data(), spread, order.data(), 0, acc.data());
            });
        for (auto& t : lanes) t.join();
    }
    printf("%u\n%u\n%lld\n", bounds[0], bounds[1], host_crowded);
    for (auto x : acc) printf("%lld\n", (ll)x);
    return 0;
}
"""

BUILDS = {"lean flip": [], "crowd": ["-DSCATTER_CROWD=1"], "crowd mutant": ["-DSCATTER_CROWD=1",
                                                                          "-DSCATTER_CROWD_MUTANT=1"],
          "crowd every warp": ["-DSCATTER_CROWD=1", "-DSCATTER_CROWD_MIN=1"]}


@pytest.fixture(scope="module")
def harnesses(tmp_path_factory):
    """The harness built each way of ``BUILDS`` (the lean flip code, 4 blocks, paired atomics)."""
    base = kernel_defines(sparse_gpu.KERNELS) + ["-DSCATTER_PAIRED=1", "-DSCATTER_LEAN=1", "-DSCATTER_FLIP=1",
                                                 "-Xcompiler=-pthread"]
    return {name: _build(tmp_path_factory, HARNESS, base + extra, f"scatter_crowd_{name.replace(' ', '_')}")
            for name, extra in BUILDS.items()}


def crowded_scene(closed, apic, seed):
    """test_cuda_sparse_gather_host.scene's kind of grid (random bricks over two updates, free
    slots among them, in the closed box particles beyond the walls), with crowded cells: 1,200
    particles in one cell, 500 in another, 600 over a block of 2 × 2 × 2 cells, 300 in a cell at
    the wall x = 0 (closed: terms cut by the face lattice) and a packed brick."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (40, 24, 20))
    grid = SparseFlipGrid(spec, np, closed=closed)
    origin, h = np.asarray(spec.origin), spec.voxel_size
    lo = 0.0 if closed else -4.0

    def cells(n, a, b):
        return rng.uniform(a, b, (n, 3))

    grid.update((origin + cells(1000, lo, 30) * h).astype(np.float32), 3)
    spread = cells(2000, (lo, lo, lo), (36, 22, 18))
    packed = 16 + rng.uniform(0, 8, (2000, 3))
    crowd = np.concatenate([np.array([5.0, 9.0, 4.0]) + rng.uniform(0, 1, (1200, 3)),
                            np.array([20.0, 3.0, 11.0]) + rng.uniform(0, 1, (500, 3)),
                            np.array([27.0, 15.0, 7.0]) + rng.uniform(0, 2, (600, 3)),
                            np.array([0.0, 12.0, 9.0]) + rng.uniform(0, 1, (300, 3))])  # at the wall x = 0
    beyond = cells(300, (-7.9, 0, 0), (-2.5, 22, 18))
    beyond[150:, 1] += 26.5
    pos = (origin + np.concatenate([spread, packed, crowd, beyond]) * h).astype(np.float32)
    grid.update(pos, 2)
    n = len(pos)
    vel = rng.normal(0, 0.4, (n, 3)).astype(np.float32)
    c = rng.normal(0, 1, (n, 3, 3)).astype(np.float32) if apic else None
    return grid, pos, vel, c


def run(build, grid, pos, vel, c, spread):
    t = grid.topology
    lines = [f"{int(grid.closed)} {' '.join(str(int(x)) for x in grid.shape)} {int(c is not None)} {spread}",
             _hex([*grid.origin, grid.h, 1.0 / grid.h]), f"{t.count} {grid.capacity}",
             " ".join(str(int(k)) for k in t.keys), " ".join(str(int(s)) for s in t.slots), str(len(pos)),
             _hex(pos), _hex(vel)]
    if c is not None:
        lines.append(_hex(c))
    tokens = build.raw(lines, check=True).split()
    at = 6 * grid.size  # the brick gather's faces and masks first
    bounds = [int(x) for x in tokens[at:at + 2]]
    crowded = int(tokens[at + 2])
    acc = np.array(tokens[at + 3:], np.int64)
    assert acc.shape == (6 * grid.size,)
    return bounds, crowded, acc


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_crowded_warps_give_the_lean_kernels_sums(harnesses, closed, apic):
    grid, pos, vel, c = crowded_scene(closed, apic, 23 + 2 * closed + apic)
    for spread in (8, 1):
        bounds, crowded, lean = run(harnesses["lean flip"], grid, pos, vel, c, spread)
        assert bounds[1] >= 1200 and crowded == 0  # the fullest cell; no warp functions in the lean code
        assert np.count_nonzero(lean) > 10000
        b2, crowded, acc = run(harnesses["crowd"], grid, pos, vel, c, spread)
        assert b2 == bounds
        assert crowded > 40  # rows of 32 lanes by groups (1,200 particles in a cell: ~37 rows there)
        assert np.array_equal(acc, lean)


def test_every_warp_by_groups_and_a_mutant(harnesses):
    """A crowd minimum of one lane (every row by groups, most of them of one lane): the same
    sums; the mutant (trees without their last step): other sums."""
    grid, pos, vel, c = crowded_scene(True, False, 31)
    _, crowded, lean = run(harnesses["lean flip"], grid, pos, vel, c, 8)
    _, every, acc = run(harnesses["crowd every warp"], grid, pos, vel, c, 8)
    assert every > 300  # every row of every brick
    assert np.array_equal(acc, lean)
    _, _, mutant = run(harnesses["crowd mutant"], grid, pos, vel, c, 8)
    assert not np.array_equal(mutant, lean)  # a tree short of its last step loses terms


def test_crowd_switch_is_checked_and_needs_the_lean_flip_code(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_SCATTER_CROWD", raising=False)
    assert sparse_scatter.crowd_mode() == "off"
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_CROWD", " On ")
    assert sparse_scatter.crowd_mode() == "on"
    assert sparse_scatter.crowd_mode("off") == "off"
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_CROWD", "always")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_SCATTER_CROWD"):
        sparse_scatter.crowd_mode()
    with pytest.raises(ValueError, match="lean flip"):
        sparse_scatter._build(4, 1, 1, 0, 4)
