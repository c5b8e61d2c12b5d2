"""The lean gather with its lanes balanced (include/voxfx_surface_balance.cuh, particle_level_set_lean_balance,
VOXFX_LEVEL_SET_GATHER_BALANCE) against particle_level_set_lean_split, φ bit for bit, run on the host by real
threads: nvcc builds flip_surface_lean.cu as host functions with thread-local block and thread indices, a
block's threads run together (one block at a time: its ``__shared__`` memory a static), ``__syncwarp`` a barrier
of the warp's 32 threads and ``__reduce_max_sync`` an exchange among them. The split kernel runs one thread at a
time (it needs no warp). The scene is the gather's input made directly: binning cells with a few points each and
some crowded ones (hundreds to thousands of points, as beside the 65M splash's walls), the cells' starts, the
tiles' marks (one tile not active) and the interior flags (with and without the skip). A mutant — an owner's
terms added in another order, or its share taken one point short — must differ."""

from pathlib import Path

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, kernel_defines
from voxfx.kernels import backend
from voxfx.kernels.flip import surface_gpu
from voxfx.kernels.grid import GridSpec

STUBS = r"""
#include <cstdio>
#include <cstring>
#include <cmath>
#include <vector>
#include <thread>
#include <mutex>
#include <pthread.h>
#include <algorithm>
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
#define HOST_WARP_THREADS
static std::vector<pthread_barrier_t> warp_barriers;  // a block's warps
static std::vector<unsigned> warp_values(32 * 16);
static void host_syncwarp() { pthread_barrier_wait(&warp_barriers[threadIdx.x / 32]); }
#define __syncwarp() host_syncwarp()
static unsigned host_reduce_max(unsigned, unsigned v) {
    const unsigned w = threadIdx.x / 32;
    warp_values[threadIdx.x] = v;
    host_syncwarp();
    unsigned m = 0;
    for (unsigned l = 0; l < 32; ++l) m = std::max(m, warp_values[32 * w + l]);
    host_syncwarp();
    return m;
}
#define HOST_WARP_MAX(v) host_reduce_max(0u, v)
#define __syncthreads()  // include/voxfx_reduce.cuh's block sums: compiled, not called
static std::mutex note_lock;
static long long rows_balanced = 0, owners = 0;  // lane-rows balanced, owners among them
#define BALANCE_NOTE(slot) { std::lock_guard<std::mutex> g(note_lock); ++rows_balanced; owners += (slot) >= 0; }
template <typename T> T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> T plain_max(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicAdd plain_add
#define atomicMax plain_max
#define atomicMin plain_min
#define __ballot_sync(mask, flag) ((unsigned)(flag))
#define __shfl_down_sync(mask, v, offset) ((v) * 0)
#define __popc __builtin_popcount
#define __ffs __builtin_ffs
static unsigned host_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
#define __float_as_uint host_float_as_uint
static float host_int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
#define __int_as_float host_int_as_float
using std::isfinite;
"""

# Input: nx ny nz; ox oy oz h cox coy coz inv_edge (%a); cx cy cz; R band (%a); skip parts; the cells' starts
# (cells + 1); the points (4 a point, %a); the tiles' marks; the cells' interior flags. Output: every node's φ by
# the split kernel, then by the balanced one (%a), then the lane-rows balanced and the owners among them.
DRIVER = r"""
static float rf() { float x; scanf("%a", &x); return x; }
static int ri() { int x; scanf("%d", &x); return x; }
int main() {
    int nx = ri(), ny = ri(), nz = ri();
    float ox = rf(), oy = rf(), oz = rf(), h = rf(), cox = rf(), coy = rf(), coz = rf(), inv_edge = rf();
    int cx = ri(), cy = ri(), cz = ri();
    float R = rf(), band = rf();
    int skip = ri(), parts = ri();
    long long cells = (long long)cx * cy * cz;
    std::vector<int> starts(cells + 1);
    for (auto& s : starts) s = ri();
    std::vector<float4> packed(starts[cells]);
    for (auto& q : packed) { q.x = rf(); q.y = rf(); q.z = rf(); q.w = rf(); }
    int nbx = (nx + TILE_X - 1) / TILE_X, nby = (ny + TILE_Y - 1) / TILE_Y, nbz = (nz + TILE_Z - 1) / TILE_Z;
    long long tiles = (long long)nbx * nby * nbz, V = (long long)nx * ny * nz;
    std::vector<unsigned char> active(tiles), interior(cells);
    for (auto& a : active) a = (unsigned char)ri();
    for (auto& a : interior) a = (unsigned char)ri();
    const unsigned threads = TILE_X * TILE_Y * TILE_Z / parts;
    std::vector<float> split(V, NAN), balanced(V, NAN);
    h_dim.x = threads;
    for (long long b = 0; b < tiles * parts; ++b)
        for (unsigned t = 0; t < threads; ++t) {
            h_block.x = (unsigned)b; h_thread.x = t;
            particle_level_set_lean_split(packed.data(), starts.data(), active.data(), interior.data(), skip, nbx,
                                          nby, nx, ny, nz, ox, oy, oz, h, cox, coy, coz, inv_edge, cx, cy, cz, R,
                                          band, split.data(), parts, 0);
        }
    warp_barriers.assign(threads / 32, pthread_barrier_t());
    for (auto& w : warp_barriers) pthread_barrier_init(&w, nullptr, 32);
    for (long long b = 0; b < tiles * parts; ++b) {
        std::vector<std::thread> block;
        for (unsigned t = 0; t < threads; ++t)
            block.emplace_back([&, b, t] {
                h_block.x = (unsigned)b; h_thread.x = t;
                particle_level_set_lean_balance(packed.data(), starts.data(), active.data(), interior.data(), skip,
                                                nbx, nby, nx, ny, nz, ox, oy, oz, h, cox, coy, coz, inv_edge, cx, cy,
                                                cz, R, band, balanced.data(), parts, 0);
            });
        for (auto& th : block) th.join();
    }
    for (float v : split) printf("%a\n", v);
    for (float v : balanced) printf("%a\n", v);
    printf("%lld %lld\n", rows_balanced, owners);
    return 0;
}
"""

_INCLUDE = '#include "voxfx_surface_balance.cuh"'


def harness_source(mutate=None) -> str:
    """STUBS, flip_surface_lean.cu with the balance header inlined (*mutate*: (old, new) replaced in it), DRIVER."""
    cuda = Path(backend.CUDA_DIR)
    lean = (cuda / "flip_surface_lean.cu").read_text()
    header = (Path(backend.CUDA_INCLUDE) / "voxfx_surface_balance.cuh").read_text()
    if mutate is not None:
        assert mutate[0] in header
        header = header.replace(*mutate)
    assert _INCLUDE in lean
    return STUBS + lean.replace(_INCLUDE, header) + DRIVER


def _build_kind(tmp_path_factory, sums, mutate=None, name="balance"):
    kernels = surface_gpu._K_LEAN_FUSED if sums == "fused" else surface_gpu._K_LEAN
    build = _build(tmp_path_factory, harness_source(mutate), kernel_defines(kernels), f"{name}-{sums}")
    return lambda text: build.raw([text], check=True).split()


@pytest.fixture(scope="module", params=surface_gpu.LEVEL_SET_SUMS)
def harness(request, tmp_path_factory):
    return _build_kind(tmp_path_factory, request.param)


def _hex(a):
    return " ".join(float(x).hex() for x in np.asarray(a, np.float32).ravel())


def crowded_scene(rng, skip, parts, inactive=True):
    """The gather's input text: a (40, 6, 7)-node grid (two tiles along x, the second past the grid's edge; the
    tiles' y, z rows past it too), binning cells of R/2 with 0–6 points each and crowded cells of 300–3,000 points
    in a block of 3×2×2 cells (and one of 9×1×1 along x: more than 8 fullest lanes in a row), each cell's points
    inside it; one tile not active; interior flags on ~8% of the cells."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (40, 6, 7))
    R = 0.25
    (cox, coy, coz), edge, (cx, cy, cz) = surface_gpu._cell_grid(spec, R)
    counts = rng.integers(0, 7, (cz, cy, cx))
    k0, j0, i0 = cz // 2, cy // 2, int(rng.integers(4, cx - 8))
    counts[k0:k0 + 2, j0:j0 + 2, i0:i0 + 3] = rng.integers(300, 3000, (2, 2, 3))
    counts[k0 - 2, j0 - 1, 2:11] = rng.integers(200, 400, 9)
    n = int(counts.sum())
    cell = np.repeat(np.arange(counts.size), counts.ravel())
    k, rest = np.divmod(cell, cy * cx)
    j, i = np.divmod(rest, cx)
    corner = np.stack([cox + i * edge, coy + j * edge, coz + k * edge], 1)
    points = np.empty((n, 4), np.float32)
    points[:, :3] = corner + rng.uniform(0.01, 0.99, (n, 3)) * edge
    points[:, 3] = rng.uniform(0.02, 0.05, n)
    starts = np.concatenate([[0], np.cumsum(counts.ravel())])
    nb = [-(-a // t) for a, t in zip(spec.shape, surface_gpu.TILE)]
    active = np.ones(int(np.prod(nb)), np.uint8)
    if inactive:
        active[-1] = 0
    interior = (rng.uniform(size=counts.size) < 0.08).astype(np.uint8)
    nx, ny, nz = spec.shape
    text = "\n".join([f"{nx} {ny} {nz}", _hex([0, 0, 0, spec.voxel_size, cox, coy, coz, 1.0 / edge]),
                      f"{cx} {cy} {cz}", _hex([R, 3 * spec.voxel_size]), f"{skip} {parts}",
                      " ".join(map(str, starts)), _hex(points), " ".join(map(str, active)),
                      " ".join(map(str, interior))])
    return text, spec.voxel_count


def gathers(run, text, V):
    out = run(text)
    split = np.array([float.fromhex(x) for x in out[:V]], np.float32)
    balanced = np.array([float.fromhex(x) for x in out[V:2 * V]], np.float32)
    return split, balanced, int(out[2 * V]), int(out[2 * V + 1])


@pytest.mark.parametrize("skip,parts", [(0, 4), (1, 4), (1, 8)])
def test_balanced_gather_is_the_split_gathers_bits(harness, skip, parts):
    rng = np.random.default_rng()
    text, V = crowded_scene(rng, skip, parts)
    split, balanced, rows, owners = gathers(harness, text, V)
    assert np.isfinite(split).all()
    assert split.view(np.uint32).tolist() == balanced.view(np.uint32).tolist()
    assert rows > 0 and owners > 0  # rows were balanced, and some lanes handed points to the warp
    assert (split < 0).sum() > 100 and (split == np.float32(0.3)).any()  # liquid, and the inactive tile's +band


MUTANTS = {
    "order": ("for (int k = 0; k < count; ++k) {\n                const float4 e = sh.terms[slot][k];\n"
              "                add_terms(m, e.x, e.y, e.z, e.w, sh.radius[slot][k]);",
              "for (int k = count - 1; k >= 0; --k) {\n                const float4 e = sh.terms[slot][k];\n"
              "                add_terms(m, e.x, e.y, e.z, e.w, sh.radius[slot][k]);"),
    "share": ("sh.start[rank] = s + share;", "sh.start[rank] = s + share + 1;"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_a_mutant_differs(tmp_path_factory, mutant):
    run = _build_kind(tmp_path_factory, "fused", MUTANTS[mutant], f"balance-{mutant}")
    text, V = crowded_scene(np.random.default_rng(5), 0, 4)
    split, balanced, _, _ = gathers(run, text, V)
    assert (split.view(np.uint32) != balanced.view(np.uint32)).sum() > 0


CULL = ["float ux = (x - cox) * inv_edge, uy = (y - coy) * inv_edge, uz = (z - coz) * inv_edge;",
        "float Rc = R * inv_edge + SLACK;",
        "int klo = max((int)floorf(uz - Rc), 0), khi = min((int)floorf(uz + Rc), cz - 1);",
        "int jlo = max((int)floorf(uy - Rc), 0), jhi = min((int)floorf(uy + Rc), cy - 1);",
        "for (int ck = klo; ck <= khi; ++ck) {", "float gz = gap_to_cell(uz, ck);",
        "float left_z = Rc * Rc - gz * gz;", "if (left_z <= 0.0f) continue;", "for (int cj = jlo; cj <= jhi; ++cj) {",
        "float gy = gap_to_cell(uy, cj);", "float left = left_z - gy * gy;", "if (left <= 0.0f) continue;",
        "float half = sqrtf(left);",
        "int ilo = max((int)floorf(ux - half - SLACK), 0), ihi = min((int)floorf(ux + half + SLACK), cx - 1);",
        "int row = (ck * cy + cj) * cx;"]


def test_the_balanced_walk_is_node_phi_leans():
    """node_phi_balance walks node_phi_lean's rows in its order (the same cull lines, in the same order), so a node
    reads the same cells: its rows' ranges are the harness's concern (bit for bit above)."""
    lean = (Path(backend.CUDA_DIR) / "flip_surface_lean.cu").read_text()
    header = (Path(backend.CUDA_INCLUDE) / "voxfx_surface_balance.cuh").read_text()

    def walk(text, name):
        body = text[text.index(f"float {name}("):]
        body = body[:body.index("return phi_of_sums")]
        lines = [line.split("//")[0].strip() for line in body.splitlines()]
        return [line for line in lines if line in CULL]

    assert walk(lean, "node_phi_lean") == CULL
    assert walk(header, "node_phi_balance") == CULL
