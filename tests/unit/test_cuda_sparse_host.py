"""The device sparse voxelizer's kernels (cuda/voxelize_sparse.cu) give the NumPy sparse
voxelizer's bricks, checked on the host without a GPU: nvcc builds the kernels as host
functions (one "thread" per call, atomics plain), and a C++ driver runs them in the
order gpu_sparse.py launches them (sort = std::sort). Full runs are expanded before the
comparison. The device comparison is tests/gpu/test_voxelize_sparse_gpu.py."""

from pathlib import Path

import numpy as np
import pytest

from tests import exact_soups
from tests.unit.test_cuda_exact import _build
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize.slabs import SplitMesh
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")

# Input: T V nx ny nz mode (0 surface, 1 thin, 2 solid, 3 solid+surface), V×3 vertices
# (%a, voxel units), T×3 indices. Output: n_bricks, then per brick its number and 64
# bytes; n_runs, then per run bx0 bx1 by bz.
HARNESS = r"""
#include <algorithm>
#include <cstdio>
#include <vector>
#undef __device__
#define __device__ __attribute__((host))
#define __global__
struct HostDim { unsigned x, y, z; };
static HostDim h_block, h_dim, h_thread;
#define blockIdx h_block
#define blockDim h_dim
#define threadIdx h_thread
template <typename T> T plain_add(T* p, T v) { T o = *p; *p = o + v; return o; }
template <typename T> T plain_or(T* p, T v) { T o = *p; *p = o | v; return o; }
template <typename T> T plain_xor(T* p, T v) { T o = *p; *p = o ^ v; return o; }
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicAdd plain_add
#define atomicOr plain_or
#define atomicXor plain_xor
#define atomicMin plain_min
#define __popc __builtin_popcount
#include "voxelize_sparse.cu"
typedef long long ll;
static void at(ll i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
static void scan(const std::vector<ll>& c, std::vector<ll>& e) { ll s = 0; e.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i) { s += c[i]; e[i] = s; } }
int main() {
    ll T, V; int nx, ny, nz, mode;
    if (scanf("%lld %lld %d %d %d %d", &T, &V, &nx, &ny, &nz, &mode) != 6) return 1;
    std::vector<double> pv(3 * V);
    std::vector<int> tris(3 * T);
    for (auto& x : pv) scanf("%la", &x);
    for (auto& x : tris) scanf("%d", &x);
    unsigned long long flags[2] = {0, 0};
    ll nbx = nx / 8, nby = ny / 8, nbz = nz / 8;
    bool solid = mode >= 2, surface = mode != 2;
    std::vector<ll> lin, runs;
    std::vector<unsigned char> rows;
    if (solid) {
        std::vector<ll> counts(T), ends;
        for (ll t = 0; t < T; ++t) { at(t); solid_column_counts(pv.data(), tris.data(), T, V, 0, 0, ny, nz,
                                                                 counts.data(), flags); }
        scan(counts, ends);
        ll total = T ? ends[T - 1] : 0;
        int xbits = 1; while ((1ll << xbits) <= nx - 1) ++xbits;
        unsigned long long n_out = 0;
        ll none = 0;
        for (ll i = 0; i < total; ++i) { at(i); sparse_solid_crossings(pv.data(), tris.data(), ends.data(),
            counts.data(), T, total, nx, ny, nz, xbits, 0, &none, &n_out); }
        std::vector<ll> out(n_out > 0 ? n_out : 1);
        n_out = 0;
        for (ll i = 0; i < total; ++i) { at(i); sparse_solid_crossings(pv.data(), tris.data(), ends.data(),
            counts.data(), T, total, nx, ny, nz, xbits, 1, out.data(), &n_out); }
        out.resize(n_out);
        std::sort(out.begin(), out.end());
        std::vector<unsigned char> starts(out.size());
        for (size_t i = 0; i < out.size(); ++i) { at(i); sparse_row_starts(out.data(), out.size(), xbits,
                                                                          starts.data()); }
        std::vector<ll> seg;
        for (size_t i = 0; i < out.size(); ++i)
            if (starts[i]) seg.push_back(i);
        ll ns = seg.size();
        seg.push_back(out.size());
        if (ns) {
            std::vector<ll> nb(ns), nr(ns), nbe, nre;
            ll dummy = 0;
            for (ll g = 0; g < ns; ++g) { at(g); sparse_solid_rows(out.data(), seg.data(), ns, xbits, nbx, nby, 0,
                nb.data(), nr.data(), &dummy, (unsigned char*)&dummy, &dummy); }
            scan(nb, nbe); scan(nr, nre);
            for (ll g = 0; g < ns; ++g) { nbe[g] -= nb[g]; nre[g] -= nr[g]; }
            ll NB = nbe[ns - 1] + nb[ns - 1], NR = nre[ns - 1] + nr[ns - 1];
            lin.resize(NB); rows.resize(64 * NB); runs.resize(4 * NR);
            for (ll g = 0; g < ns; ++g) { at(g); sparse_solid_rows(out.data(), seg.data(), ns, xbits, nbx, nby, 1,
                nbe.data(), nre.data(), lin.data(), rows.data(), runs.data()); }
        }
    }
    if (surface) {
        std::vector<ll> bcounts(T), bends, pairs;
        std::vector<int> bbox(6 * T);
        for (ll t = 0; t < T; ++t) { at(t); sparse_surface_boxes(pv.data(), tris.data(), T, V, nx, ny, nz,
                                                                  bcounts.data(), bbox.data(), flags); }
        scan(bcounts, bends);
        ll np_ = T ? bends[T - 1] : 0;
        pairs.resize(np_);
        for (ll i = 0; i < np_; ++i) { at(i); sparse_expand_bricks(bends.data(), bcounts.data(), bbox.data(), T, np_,
                                                                    nbx, nby, pairs.data()); }
        for (ll l : lin) pairs.push_back(l);
        std::sort(pairs.begin(), pairs.end());
        pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
        std::vector<unsigned int> pool(16 * pairs.size(), 0u);
        for (size_t b = 0; b < lin.size(); ++b) {
            size_t s = std::lower_bound(pairs.begin(), pairs.end(), lin[b]) - pairs.begin();
            for (int r = 0; r < 64; ++r) ((unsigned char*)pool.data())[64 * s + r] = rows[64 * b + r];
        }
        std::vector<ll> row_start(nby * nbz + 1);
        for (ll r = 0; r <= nby * nbz; ++r)
            row_start[r] = std::lower_bound(pairs.begin(), pairs.end(), r * nbx) - pairs.begin();
        std::vector<ll> counts(T), ends;
        for (ll t = 0; t < T; ++t) { at(t); surface_column_counts(pv.data(), tris.data(), T, V, nx, ny, nz, 0, 0, 0,
                                                                   nx, ny, nz, counts.data(), flags); }
        scan(counts, ends);
        ll total = T ? ends[T - 1] : 0;
        unsigned long long missing = 0;
        std::vector<Setup> setups(T);
        for (ll t = 0; t < T; ++t) { at(t); sparse_surface_setups(pv.data(), tris.data(), T, V, nx, ny, nz,
                                                                   mode == 1, setups.data(), flags); }
        ll threads = (total + VOXFX_SPARSE_ITEMS - 1) / VOXFX_SPARSE_ITEMS;
        for (ll i = 0; i < threads; ++i) { at(i); sparse_surface_columns(setups.data(), ends.data(),
            counts.data(), T, total, pairs.data(), row_start.data(), nbx, nby, pool.data(), &missing); }
        if (missing) return 2;
        std::vector<ll> keep_lin; std::vector<unsigned char> keep_rows;
        for (size_t b = 0; b < pairs.size(); ++b) {
            const unsigned char* p = (const unsigned char*)pool.data() + 64 * b;
            bool any = false; for (int r = 0; r < 64; ++r) any |= p[r] != 0;
            bool inrun = false;
            for (size_t k = 0; k < runs.size() / 4; ++k)
                if (pairs[b] / nbx == runs[4 * k + 3] * nby + runs[4 * k + 2] && pairs[b] % nbx >= runs[4 * k]
                    && pairs[b] % nbx < runs[4 * k + 1]) inrun = true;
            if (any && !inrun) { keep_lin.push_back(pairs[b]); keep_rows.insert(keep_rows.end(), p, p + 64); }
        }
        lin = keep_lin; rows = keep_rows;
    }
    printf("%zu\n", lin.size());
    for (size_t b = 0; b < lin.size(); ++b) {
        printf("%lld", lin[b]);
        for (int r = 0; r < 64; ++r) printf(" %d", rows[64 * b + r]);
        printf("\n");
    }
    printf("%zu\n", runs.size() / 4);
    for (size_t k = 0; k < runs.size(); ++k) printf("%lld\n", runs[k]);
    return 0;
}
"""

MODES = {"surface": 0, "thin": 1, "solid": 2, "solid+surface": 3}


@pytest.fixture(scope="module")
def device_sparse(tmp_path_factory):
    run = _build(tmp_path_factory, HARNESS)

    def voxelize_host(v, t, spec, mode):
        """{brick (bx, by, bz): 64 bytes} of the kernels, runs expanded; and the runs."""
        mesh = SplitMesh(v, t, spec)
        nx, ny, nz = spec.shape
        lines = [f"{len(t)} {len(mesh.pv)} {nx} {ny} {nz} {MODES[mode]}"]
        lines += [" ".join(float(x).hex() for x in row) for row in mesh.pv]
        lines += [" ".join(str(int(x)) for x in row) for row in mesh.triangles]
        out = run(lines)
        n, at = out[0], 1
        nbx, nby = nx // 8, ny // 8
        bricks = {}
        for _ in range(n):
            lin, data = out[at], bytes(out[at + 1:at + 65])
            at += 65
            bricks[(lin % nbx, (lin // nbx) % nby, lin // (nbx * nby))] = data
        m = out[at]
        runs = np.array(out[at + 1:at + 1 + 4 * m], np.int64).reshape(m, 4)
        for bx0, bx1, by, bz in runs:
            for bx in range(bx0, bx1):
                assert (bx, by, bz) not in bricks
                bricks[(bx, by, bz)] = b"\xff" * 64
        return bricks, runs

    return voxelize_host


def numpy_bricks(v, t, spec, mode, tile):
    grid = voxelize_sparse(v, t, spec, mode, tile=tile, xp=np)
    coords = grid.topology.coords()
    rows = grid.channels[CHANNEL][grid.topology.slots]
    return {tuple(int(c) for c in b): r.tobytes() for b, r in zip(coords, rows)}


def rounded(spec, tile):
    return GridSpec(spec.origin, spec.voxel_size, tuple(-(-n // tile) * tile for n in spec.shape))


@pytest.mark.parametrize("name,res", [("torus", 45), ("monkey", 40), ("cone", 38), ("uv_sphere", 50)])
@pytest.mark.parametrize("mode", list(MODES))
def test_device_sparse_kernels_equal_the_numpy_bricks(device_sparse, name, res, mode):
    """Suzanne is open (rows run to the grid's end); the sphere's interior becomes runs."""
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    spec = rounded(GridSpec.around(lo, hi, float((hi - lo).max()) / res), 32)
    got, runs = device_sparse(v, t, spec, mode)
    want = numpy_bricks(v, t, spec, mode, 32)
    assert got.keys() == want.keys()
    assert all(got[k] == want[k] for k in want)
    assert want
    if mode in ("solid", "solid+surface") and name == "uv_sphere":
        assert len(runs) > 0  # the interior is stored as full runs


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("mode", list(MODES))
def test_device_sparse_kernels_on_ties_and_slivers(device_sparse, seed, mode):
    v, t = exact_soups.soup(seed)
    spec = rounded(exact_soups.UNIT, 32)
    got, _ = device_sparse(v, t, spec, mode)
    want = numpy_bricks(v, t, spec, mode, 32)
    assert got.keys() == want.keys() and all(got[k] == want[k] for k in want)
