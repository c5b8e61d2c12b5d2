"""The device kernels of the sparse pressure solve (cuda/flip_sparse_pressure.cu, the
V-cycle's cuda/flip_sparse_pressure_vcycle.cu and _tail.cu) against the NumPy reference
(sparse_pressure.Unknowns, sparse_multigrid.VCycle, the component labels), checked on the
host without a GPU: nvcc builds the kernels as host functions (one
"thread" per block, atomics plain, warp shuffles of a one-lane warp, no FMA contraction as
the module is compiled) and a C++ driver launches them in the order sparse_pressure_gpu.py
does. The Laplacian, the Gauss-Seidel sweeps, residual, restriction, prolongation and the
coarsest level's solve are the reference's operations in the reference's order: the
V-cycle's result is equal bit for bit. The device run is tests/gpu/test_flip_sparse_pressure_gpu.py."""

from contextlib import contextmanager

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from voxfx.kernels.flip import sparse_multigrid, sparse_multigrid_bricks, sparse_pressure, sparse_transfer
from voxfx.kernels.flip.grid import FLUID
from voxfx.kernels.flip.pressure import MG_SWEEPS
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.flip.sparse_pressure_gpu import _MGT
from voxfx.kernels.grid import GridSpec

# Input: L, per level "m_red m", its nbr (6 × (m + 1)) and diag (m + 1, hex floats), per
# level but the last its up (8 × (m + 1)) and down (64 × (m_next + 1)) tables; r and d
# (m0 + 1 each, hex floats); n, then the links (3 × n) of the labelling. Output: q = A d
# (m0), Σ of the partial d·q, z = V-cycle(r) (m0) by the split launches, then by the fused
# ones (sparse_pressure_gpu.VCYCLE) with Σ of their partial r·z, the n labels.
# The drivers' readers of sized int and hex-float rows (after PREAMBLE's includes).
READERS = r"""
static void read_ints(std::vector<int>& v, size_t n) { v.resize(n); for (auto& a : v) scanf("%d", &a); }
static void read_floats(std::vector<float>& v, size_t n) { v.resize(n); for (auto& a : v) scanf("%a", &a); }
"""

PREAMBLE = r"""
#include <cstdio>
#include <cstring>
#include <vector>
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
static HostDim h_block, h_dim, h_thread, h_grid;
#define blockIdx h_block
#define blockDim h_dim
#define threadIdx h_thread
#define gridDim h_grid
#define __syncthreads() ((void)0)
#define __shfl_down_sync(mask, v, offset) ((v) * 0)
#define __ballot_sync(mask, flag) ((unsigned)(flag))
#define __popc __builtin_popcount
static unsigned host_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
#define __float_as_uint host_float_as_uint
template <typename T> T plain_max(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
template <typename T> T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> T plain_cas(T* p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
#define atomicMax plain_max
#define atomicMin plain_min
#define atomicAdd plain_add
#define atomicCAS plain_cas
#include "flip_sparse_pressure.cu"
""" + READERS

HARNESS = PREAMBLE + r"""
static std::vector<float> host_tail_shared(1 << 21);  // the _shared tails' "dynamic shared memory"
#define TAIL_SHARED_ARRAY(name) float* name = host_tail_shared.data()
#include "flip_sparse_pressure_vcycle.cu"
#include "flip_sparse_pressure_vcycle_tail.cu"
struct Level { int m_red, m, stride; std::vector<int> nbr, up, down; std::vector<float> diag, b, x, r; };
static std::vector<Level> L;
static int state[4] = {0, 0, 0, 0};
static std::vector<int> sizes;

// n "blocks" of one thread: the grid-stride loop runs each index once
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)

static void smooth(int l, int colour, int first) {
    Level& A = L[l];
    LAUNCH(A.stride, mg_smooth(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(), A.stride, sizes.data(), l, colour,
                               first, state));
}

static void vcycle_split() {
    const int last = (int)L.size() - 1;
    for (int l = 0; l < last; ++l) {
        Level &A = L[l], &C = L[l + 1];
        for (int s = 0; s < MG_SWEEPS; ++s) { smooth(l, 0, s == 0); smooth(l, 1, 0); }
        LAUNCH(A.stride, mg_residual(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(), A.stride, sizes.data(), l,
                                     1, A.r.data(), state));
        LAUNCH(C.stride, mg_restrict(A.r.data(), A.down.data(), C.stride, sizes.data(), l + 1, C.b.data(), state));
    }
    Level& C = L[last];
    h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
    mg_coarse_solve(C.x.data(), C.b.data(), C.nbr.data(), C.diag.data(), C.stride, sizes.data(), last, state);
    for (int l = last - 1; l >= 0; --l) {
        Level &A = L[l], &C2 = L[l + 1];
        LAUNCH(A.stride, mg_prolong_add(C2.x.data(), A.up.data(), A.stride, sizes.data(), l, 1, A.x.data(), state));
        for (int s = 0; s < MG_SWEEPS; ++s) { smooth(l, 1, 0); smooth(l, 0, 0); }
    }
}

// sparse_pressure_gpu._vcycle_fused (at least two levels); the partial sums of r·z into rz;
// levels tail..last in mg_tail_vcycle's one block where tail > 0, and with from > 0 (from <
// tail) levels from..last in mg_tail_cluster; the levels whose bit is set in first2 start with
// mg_smooth_first2 (sparse_pressure_gpu.FIRST2_UNKNOWNS); shared: the tails' _shared kernels
// (sparse_pressure_gpu.TAIL_SHARED), their "shared memory" NaN on entry
static void vcycle_fused(std::vector<double>& rz, int tail = 0, int from = 0, unsigned first2 = 0,
                         bool shared = false) {
    const int last = (int)L.size() - 1;
    const int first = tail > 0 ? tail : last;
    const int lead = from > 0 ? from : first;  // the levels launch by launch
    for (int l = 0; l < lead; ++l) {
        Level &A = L[l], &C = L[l + 1];
        const bool two = MG_SWEEPS > 1 && (first2 >> l & 1u);
        if (two) LAUNCH(A.stride, mg_smooth_first2(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(), A.stride,
                                                   sizes.data(), l, state));
        else LAUNCH(A.stride, mg_smooth_first(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(), A.stride,
                                              sizes.data(), l, state));
        for (int s = 1; s < MG_SWEEPS; ++s) {
            if (!(two && s == 1)) smooth(l, 0, 0);
            if (s < MG_SWEEPS - 1) smooth(l, 1, 0);
            else LAUNCH(A.stride, mg_smooth_black_residual(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(),
                                                           A.stride, sizes.data(), l, A.r.data(), state));
        }
        LAUNCH(A.stride, mg_residual(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(), A.stride, sizes.data(), l,
                                     MG_SWEEPS == 1, A.r.data(), state));
        if (l + 1 < last)
            LAUNCH(C.stride, mg_restrict(A.r.data(), A.down.data(), C.stride, sizes.data(), l + 1, C.b.data(), state));
    }
    Level &C = L[last], &F = L[last - 1];
    h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
    if (tail > 0) {
        std::vector<unsigned long long> ptrs;
        std::vector<int> strides;
        for (auto& A : L) {
            for (void* p : {(void*)A.x.data(), (void*)A.b.data(), (void*)A.r.data(), (void*)A.nbr.data(),
                            (void*)A.diag.data(), (void*)A.up.data(), (void*)A.down.data()})
                ptrs.push_back((unsigned long long)p);
            strides.push_back(A.stride);
        }
        for (auto& v : host_tail_shared) v = __builtin_nanf("");
        if (from > 0 && shared)
            mg_tail_cluster_shared(ptrs.data(), strides.data(), from, first, last, sizes.data(), state);
        else if (from > 0) mg_tail_cluster(ptrs.data(), strides.data(), from, first, last, sizes.data(), state);
        else if (shared) mg_tail_vcycle_shared(ptrs.data(), strides.data(), first, last, sizes.data(), state);
        else mg_tail_vcycle(ptrs.data(), strides.data(), first, last, sizes.data(), state);
    } else {
        mg_restrict_coarse_solve(F.r.data(), F.down.data(), C.x.data(), C.b.data(), C.nbr.data(), C.diag.data(),
                                 C.stride, sizes.data(), last, state);
    }
    for (int l = lead - 1; l >= 0; --l) {
        Level &A = L[l], &C2 = L[l + 1];
        LAUNCH(A.stride, mg_prolong_add(C2.x.data(), A.up.data(), A.stride, sizes.data(), l, MG_OMEGA != 1.0f,
                                         A.x.data(), state));  // the red (all: sparse_multigrid.MG_OMEGA ≠ 1)
        for (int s = 0; s < MG_SWEEPS; ++s) {
            smooth(l, 1, 0);
            if (l == 0 && s == MG_SWEEPS - 1)
                LAUNCH(A.stride, mg_smooth_red_dot(A.x.data(), A.b.data(), A.nbr.data(), A.diag.data(), A.stride,
                                                   sizes.data(), rz.data(), state));
            else
                smooth(l, 0, 0);
        }
    }
}

// every vector but the sentinels NaN: the fused V-cycle must write before it reads
static void poison() {
    for (size_t l = 0; l < L.size(); ++l) {
        Level& A = L[l];
        for (int c = 0; c < A.m; ++c) {
            A.x[c] = A.r[c] = __builtin_nanf("");
            if (l) A.b[c] = __builtin_nanf("");
        }
    }
}


int main() {
    int nl;
    if (scanf("%d", &nl) != 1) return 1;
    L.resize(nl);
    for (auto& A : L) {
        scanf("%d %d", &A.m_red, &A.m);
        A.stride = A.m + 1;
        read_ints(A.nbr, 6 * A.stride);
        read_floats(A.diag, A.stride);
        A.b.assign(A.stride, 0.0f); A.x.assign(A.stride, 0.0f); A.r.assign(A.stride, 0.0f);
        sizes.push_back(A.m_red);
        sizes.push_back(A.m);
    }
    for (int l = 0; l + 1 < nl; ++l) {
        read_ints(L[l].up, 8 * L[l].stride);
        read_ints(L[l].down, 64 * L[l + 1].stride);
    }
    Level& F = L[0];
    std::vector<float> d, q(F.stride, 0.0f);
    read_floats(F.b, F.stride);
    read_floats(d, F.stride);
    std::vector<double> partials(F.stride, 0.0);
    LAUNCH(F.stride, apply_laplacian(d.data(), q.data(), F.nbr.data(), F.diag.data(), F.stride, sizes.data(),
                                     partials.data(), state));
    double dq = 0.0;
    for (double p : partials) dq += p;
    vcycle_split();
    const std::vector<float> z_split(F.x.begin(), F.x.begin() + F.m);
    poison();
    std::vector<double> rz_partials(F.stride, 0.0);
    vcycle_fused(rz_partials);
    double rz = 0.0;
    for (double p : rz_partials) rz += p;
    const std::vector<float> z_fused(F.x.begin(), F.x.begin() + F.m);
    std::vector<std::vector<float>> z_tails;  // mg_tail_vcycle from level 1, then from the last but one
    for (int tail : {1, (int)L.size() - 2}) {
        poison();
        std::vector<double> tail_partials(F.stride, 0.0);
        vcycle_fused(tail_partials, tail);
        z_tails.emplace_back(F.x.begin(), F.x.begin() + F.m);
    }
    std::vector<std::vector<float>> z_clusters;  // mg_tail_cluster from level 1, its block from 2 … the last but one
    for (int tail = 2; tail + 1 < (int)L.size(); ++tail) {
        poison();
        std::vector<double> cluster_partials(F.stride, 0.0);
        vcycle_fused(cluster_partials, tail, 1);
        z_clusters.emplace_back(F.x.begin(), F.x.begin() + F.m);
    }
    std::vector<std::vector<float>> z_first2;  // mg_smooth_first2 on every level, on level 1, with the tail from 1
    for (int variant = 0; variant < 3; ++variant) {
        poison();
        std::vector<double> first2_partials(F.stride, 0.0);
        vcycle_fused(first2_partials, variant == 2 ? 1 : 0, 0, variant == 1 ? 2u : ~0u);
        z_first2.emplace_back(F.x.begin(), F.x.begin() + F.m);
        if (variant == 0) {
            double rz2 = 0.0;
            for (double p : first2_partials) rz2 += p;
            if (rz2 != rz) return 2;  // the same r·z partials, added in the same order
        }
    }
    std::vector<std::vector<float>> z_shared;  // the _shared tails: from 1, the last but one, the cluster's
    for (int variant = 0; variant < (int)L.size() - 1; ++variant) {  // from 1 with its block from 2 …
        const int tail = variant == 0 ? 1 : variant == 1 ? (int)L.size() - 2 : variant;
        const int from = variant >= 2 ? 1 : 0;
        poison();
        std::vector<double> shared_partials(F.stride, 0.0);
        vcycle_fused(shared_partials, tail, from, 0, true);
        z_shared.emplace_back(F.x.begin(), F.x.begin() + F.m);
    }
    int n;
    scanf("%d", &n);
    std::vector<int> links, parent(n);
    read_ints(links, 3 * (size_t)n);
    for (int v = 0; v < n; ++v) parent[v] = v;
    LAUNCH(n, label_hook(links.data(), n, parent.data()));
    LAUNCH(n, label_flatten(parent.data(), n));
    for (int c = 0; c < F.m; ++c) printf("%a\n", q[c]);
    printf("%a\n", dq);
    for (int c = 0; c < F.m; ++c) printf("%a\n", z_split[c]);
    for (int c = 0; c < F.m; ++c) printf("%a\n", z_fused[c]);
    printf("%a\n", rz);
    for (auto& z : z_tails) for (int c = 0; c < F.m; ++c) printf("%a\n", z[c]);
    for (int v = 0; v < n; ++v) printf("%d\n", parent[v]);
    printf("%d\n", (int)z_clusters.size());
    for (auto& z : z_clusters) for (int c = 0; c < F.m; ++c) printf("%a\n", z[c]);
    for (auto& z : z_first2) for (int c = 0; c < F.m; ++c) printf("%a\n", z[c]);
    printf("%d\n", (int)z_shared.size());
    for (auto& z : z_shared) for (int c = 0; c < F.m; ++c) printf("%a\n", z[c]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    # the modules' -D constants (sparse_pressure_gpu._K, _MG: the same; _MGT: and TAIL_CLUSTER) and the V-cycle's sweeps
    return _build(tmp_path_factory, with_defines(HARNESS, _MGT, [f"#define MG_SWEEPS {MG_SWEEPS}"]))


def _tank(shape=(20, 12, 18), scale=1):
    """A closed tank with walls, an obstacle, air and two separate puddles, on bricks (scale:
    particles per cell as the default's)."""
    rng = np.random.default_rng(8)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, shape)
    up = np.asarray(spec.upper)
    pos = np.concatenate([(rng.uniform(0.0, 0.4, (6000 * scale, 3)) * up),
                          (rng.uniform(0.7, 0.95, (3000 * scale, 3)) * up)])
    pos = pos.astype(np.float32)
    g = SparseFlipGrid(spec, np, closed=True)
    g.update(pos, 3, obstacle=np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)]))
    sparse_transfer.classify(g, pos)
    return g


@contextmanager
def dense_mode(mode):
    """sparse_multigrid.MG_DENSE set to *mode* while VCycles are built (whatever the environment
    says; the harnesses here pass no dense inverse unless told)."""
    old = sparse_multigrid.MG_DENSE
    sparse_multigrid.MG_DENSE = mode
    try:
        yield
    finally:
        sparse_multigrid.MG_DENSE = old


@contextmanager
def red_black():
    """sparse_multigrid_bricks.SMOOTHER "rb" while VCycles are built: the harnesses here launch
    level 0's red-black sweeps (the kernels of a solver without the brick smoother, the default
    "brick" smoothing workspace solvers alone), so their reference smooths so too."""
    old = sparse_multigrid_bricks.SMOOTHER
    sparse_multigrid_bricks.SMOOTHER = "rb"
    try:
        yield
    finally:
        sparse_multigrid_bricks.SMOOTHER = old


def _hex(values):
    return [float(x).hex() for x in np.asarray(values, np.float32)]


@pytest.mark.parametrize("scene", [(), ((40, 24, 36), 8)], ids=["tank", "big-tank"])
def test_sparse_pressure_kernels_equal_the_numpy_tables_bit_for_bit(device, scene):
    """The big tank has four levels: mg_tail_cluster from level 1 with its block from 2."""
    g = _tank(*scene)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    with dense_mode(0), red_black():
        M = VCycle(g, kind, level)
    assert len(M.levels) >= 3 and level.m > 300 and 0 < level.m_red < level.m
    rng = np.random.default_rng(3)
    r = np.append(rng.normal(0, 1, level.m), 0).astype(np.float32)
    d = np.append(rng.normal(0, 1, level.m), 0).astype(np.float32)
    fluid = g["cell"] == FLUID
    cells = np.flatnonzero(fluid)
    position = np.full(g.size, -1, np.int32)
    position[cells] = np.arange(len(cells), dtype=np.int32)
    links = np.stack([sparse_pressure._compact(g.nbr[dd][cells], position, -1, np) for dd in (1, 3, 5)])
    lines = [str(len(M.levels))]
    for L in M.levels:
        lines += [f"{L.m_red} {L.m}", *map(str, L.nbr.ravel()), *_hex(L.diag)]
    for up, down in zip(M.up, M.down):
        lines += [*map(str, up.ravel()), *map(str, down.ravel())]
    lines += [*_hex(r), *_hex(d), str(len(cells)), *map(str, links.ravel())]
    out = device.raw(lines, check=True).split()
    m = level.m
    q = np.array([float.fromhex(x) for x in out[:m]], np.float32)
    dq = float.fromhex(out[m])
    z = np.array([float.fromhex(x) for x in out[m + 1:2 * m + 1]], np.float32)
    z_fused = np.array([float.fromhex(x) for x in out[2 * m + 1:3 * m + 1]], np.float32)
    rz = float.fromhex(out[3 * m + 1])
    z_tails = np.array([float.fromhex(x) for x in out[3 * m + 2:5 * m + 2]], np.float32).reshape(2, m)
    n = len(cells)
    labels = np.array([int(x) for x in out[5 * m + 2:5 * m + 2 + n]])
    k = int(out[5 * m + 2 + n])
    assert k == max(0, len(M.levels) - 3)
    z_clusters = np.array([float.fromhex(x) for x in out[5 * m + 3 + n:5 * m + 3 + n + k * m]], np.float32)
    z_clusters = z_clusters.reshape(-1, m)
    at = 5 * m + 3 + n + k * m
    z_first2 = np.array([float.fromhex(x) for x in out[at:at + 3 * m]], np.float32).reshape(3, m)
    shared_count = int(out[at + 3 * m])
    z_shared = np.array([float.fromhex(x) for x in out[at + 3 * m + 1:]], np.float32).reshape(shared_count, m)
    want_q = level.apply(d)
    assert np.array_equal(q, want_q[:m])
    assert dq == pytest.approx(float(np.dot(d.astype(np.float64), want_q)), rel=1e-12)
    want_z = M(r)
    assert np.array_equal(z, want_z[:m])
    assert np.array_equal(z_fused, want_z[:m])  # the fused launches: the same values
    for z_tail in z_tails:  # the coarse levels in mg_tail_vcycle's one block (from level 1, from the last but one)
        assert np.array_equal(z_tail, want_z[:m])
    for z_cluster in z_clusters:  # levels from 1 in mg_tail_cluster (VOXFX_SPARSE_MG_CLUSTER)
        assert np.array_equal(z_cluster, want_z[:m])
    for z2 in z_first2:  # mg_smooth_first2 (VOXFX_SPARSE_MG_FIRST2): every level, level 1, with the tail
        assert np.array_equal(z2, want_z[:m])
    assert len(z_clusters) >= (1 if scene else 0)
    assert shared_count == 2 + len(z_clusters)
    for z_tail in z_shared:  # the tails' vectors in shared memory (TAIL_SHARED), with the cluster's
        assert np.array_equal(z_tail, want_z[:m])
    assert np.abs(z).max() > 0
    assert rz == pytest.approx(float(np.dot(r.astype(np.float64), want_z)), rel=1e-12)
    want_labels = sparse_pressure._component_roots(links)
    assert np.array_equal(labels, want_labels)
    assert len(np.unique(labels)) >= 2  # the two puddles at least
