"""The vote-on-bricks kernels (cuda/voxelize_sparse_vote.cu) give the NumPy twins' results
(kernels/voxelize/gpu_sparse_vote.py), checked on the host without a GPU: nvcc builds the
kernels as host functions (one "thread" per call, atomics plain) and a C++ driver runs
them in the order ``vote_bricks`` launches them, on the three sparse solids of real
meshes (closed, open, holed). The twins themselves equal the dense vote
(test_voxelize_sparse_vote.py); the device run is tests/gpu/test_voxelize_sparse_vote_gpu.py."""

from pathlib import Path

import numpy as np
import pytest

from tests.meshes import uv_sphere
from tests.unit.test_cuda_exact import _build
from tests.unit.test_voxelize_sparse import rounded
from tests.unit.test_voxelize_sparse_vote import around, holed
from voxfx.kernels.grid.sparse import BRICK
from voxfx.kernels.voxelize import gpu_sparse_vote as gv

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")

# Input: nbx nby nbz, box lo (3), box size m (3), words; per axis: n, its brick numbers, its
# rows (64 bytes each), n_runs, its runs (4 each); then n_u and U's brick numbers.
# Output: U's slots (3 each), U's rows (64 each), n_runs, the runs (4 each).
HARNESS = r"""
#include <cstdio>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __global__
struct HostDim { unsigned x, y, z; };
static HostDim h_block, h_dim, h_thread;
#define blockIdx h_block
#define blockDim h_dim
#define threadIdx h_thread
template <typename T> T plain_or(T* p, T v) { T o = *p; *p = o | v; return o; }
template <typename T> T plain_and(T* p, T v) { T o = *p; *p = o & v; return o; }
#define atomicOr plain_or
#define atomicAnd plain_and
#define __ffs __builtin_ffs
#include "voxelize_sparse_vote.cu"
typedef long long ll;
static void at(ll i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
static std::vector<ll> read_ll(ll n) { std::vector<ll> v(n); for (auto& x : v) scanf("%lld", &x); return v; }
int main() {
    ll nb[3], lo[3], m[3], words;
    for (auto& x : nb) scanf("%lld", &x);
    for (auto& x : lo) scanf("%lld", &x);
    for (auto& x : m) scanf("%lld", &x);
    scanf("%lld", &words);
    std::vector<ll> lin[3], runs[3];
    std::vector<unsigned char> rows[3];
    const ll per = m[2] * m[1] * words;
    std::vector<unsigned int> bitmaps(3 * per, 0u);
    for (int a = 0; a < 3; ++a) {
        ll n; scanf("%lld", &n);
        lin[a] = read_ll(n);
        rows[a].resize(64 * n + 64);
        for (ll i = 0; i < 64 * n; ++i) { int b; scanf("%d", &b); rows[a][i] = (unsigned char)b; }
        ll r; scanf("%lld", &r);
        runs[a] = read_ll(4 * r);
        for (ll g = 0; g < r; ++g) { at(g); vote_fill_runs(runs[a].data(), r, a, lo[0], lo[1], lo[2], m[0], m[1], m[2],
                                                            words, bitmaps.data() + a * per); }
    }
    ll n; scanf("%lld", &n);
    std::vector<ll> u = read_ll(n), slot(3 * n + 3);
    for (ll g = 0; g < n; ++g) { at(g); vote_brick_slots(u.data(), n, nb[0], nb[1], nb[2], lo[0], lo[1], lo[2], m[1],
        words, lin[0].data(), (ll)lin[0].size(), lin[1].data(), (ll)lin[1].size(), lin[2].data(),
        (ll)lin[2].size(), bitmaps.data(), per, slot.data()); }
    std::vector<unsigned char> out(64 * n + 64);
    for (ll g = 0; g < 64 * n; ++g) { at(g); vote_brick_rows(slot.data(), n, rows[0].data(), rows[1].data(),
                                                              rows[2].data(), out.data()); }
    std::vector<unsigned char> full(n + 1);
    for (ll i = 0; i < n; ++i) { bool f = true; for (int r = 0; r < 64; ++r) f = f && out[64 * i + r] == 0xff;
                                 full[i] = f; }
    for (ll i = 0; i < per; ++i) {  // the majority, word by word (vote_bricks does it with CuPy)
        unsigned int p = bitmaps[i], q = bitmaps[per + i], r = bitmaps[2 * per + i];
        bitmaps[i] = (p & q) | (r & (p | q));
    }
    for (ll g = 0; g < n; ++g) { at(g); vote_override(u.data(), full.data(), n, nb[0], nb[1], lo[0], lo[1], lo[2],
                                                      m[1], words, bitmaps.data()); }
    const ll n_rows = m[1] * m[2];
    std::vector<ll> count(n_rows + 1, 0), start(n_rows + 1, 0);
    for (ll g = 0; g < n_rows; ++g) { at(g); vote_row_runs(bitmaps.data(), n_rows, words, m[1], lo[0], lo[1], lo[2],
                                                           0, count.data(), nullptr); }
    ll total = 0;
    for (ll g = 0; g < n_rows; ++g) { start[g] = total; total += count[g]; }
    std::vector<ll> out_runs(4 * total + 4);
    for (ll g = 0; g < n_rows; ++g) { at(g); vote_row_runs(bitmaps.data(), n_rows, words, m[1], lo[0], lo[1], lo[2],
                                                           1, start.data(), out_runs.data()); }
    for (ll i = 0; i < 3 * n; ++i) printf("%lld ", slot[i]);
    printf("\n");
    for (ll i = 0; i < 64 * n; ++i) printf("%d ", (int)out[i]);
    printf("\n%lld\n", total);
    for (ll i = 0; i < 4 * total; ++i) printf("%lld ", out_runs[i]);
    printf("\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return _build(tmp_path_factory, HARNESS)


def _union(parts, nb, lo, hi):
    u = []
    nbx, nby, _ = nb
    for a, (lin, _, _) in enumerate(parts):
        c = gv.world_coords(lin, a, nb, np)
        c = c[((c >= lo) & (c < hi)).all(axis=1)]
        u.append((c[:, 2] * nby + c[:, 1]) * nbx + c[:, 0])
    return np.unique(np.concatenate(u))


def run_both(harness, v, t, spec):
    spec = rounded(spec, BRICK)
    nb = tuple(n // BRICK for n in spec.shape)
    parts = gv.axis_solids_numpy(v, t, spec)
    lo, hi = gv.vote_box(parts, nb, np)
    m = tuple(int(x) for x in hi - lo)
    words = -(-m[0] // 32)
    u = _union(parts, nb, lo, hi)
    lines = [" ".join(map(str, (*nb, *lo, *m, words)))]
    for lin, rows, runs in parts:
        lines += [str(len(lin)), " ".join(map(str, lin.tolist())), " ".join(map(str, rows.reshape(-1).tolist())),
                  str(len(runs)), " ".join(map(str, runs.reshape(-1).tolist()))]
    lines += [str(len(u)), " ".join(map(str, u.tolist()))]
    got = harness(lines)
    n = len(u)
    slot = np.array(got[:3 * n]).reshape(n, 3)
    rows = np.array(got[3 * n:67 * n], np.uint8).reshape(n, BRICK, BRICK)
    total = got[67 * n]
    runs = np.array(got[67 * n + 1:], np.int64).reshape(total, 4)
    # the NumPy twins on the same inputs
    bitmaps = np.zeros((3, m[2], m[1], words), np.uint32)
    for a, (_, _, r) in enumerate(parts):
        gv._Numpy.fill_runs(r, a, lo, m, words, bitmaps[a])
    want_slot = gv._Numpy.brick_slots(u, nb, lo, m, words, parts, bitmaps)
    assert np.array_equal(slot, want_slot)
    assert np.array_equal(rows, gv._Numpy.brick_rows(want_slot, [p[1] for p in parts]))
    lin, kept_rows, want_runs = gv.vote_bricks(parts, nb, np)
    assert np.array_equal(runs, want_runs) and len(runs) > 0
    keep = rows.reshape(n, -1).any(axis=1) & ~(rows.reshape(n, -1) == 0xFF).all(axis=1)
    assert np.array_equal(u[keep], lin) and np.array_equal(rows[keep], kept_rows)
    return slot


@pytest.mark.parametrize("name,res", [("uv_sphere", 70), ("monkey", 60), ("torus", 83)])
def test_vote_kernels_equal_the_numpy_twins(harness, name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    run_both(harness, v, t, around(v, res))


def test_vote_kernels_equal_the_numpy_twins_with_holes(harness):
    """A wide box (words > 1 along x: runs across 32-brick words) and holes."""
    v, t = holed(*uv_sphere(1.0, 40, 20), 31, 4)
    v = v * np.array([3.0, 1.0, 1.0])
    slot = run_both(harness, v, t, around(v, 330))
    assert (slot == gv.FULL).any() and (slot == gv.EMPTY).any()  # a hole's axis differs from the others
