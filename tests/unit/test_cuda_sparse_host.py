"""The device sparse voxelizer's kernels (cuda/voxelize_sparse.cu, _tiles.cu, _solid.cu)
give the NumPy sparse voxelizer's bricks, checked on the host without a GPU: nvcc builds
the kernels as host functions (one "thread" per call, atomics plain), and a C++ driver runs them in the
order gpu_sparse.py launches them (sort = std::sort; the warp of sparse_surface_tiles as
its 32 lanes one phase after the other), with both surface launches, in one piece and in
small chunks. Full runs are expanded before the comparison. The device comparisons are
tests/gpu/test_voxelize_sparse_gpu.py and test_voxelize_sparse_kernels_gpu.py."""

from pathlib import Path

import numpy as np
import pytest

from tests import exact_soups
from tests.cuda_host import VOXELIZE_STUBS
from tests.unit.test_cuda_exact import _build
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize.slabs import SplitMesh
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")

# Input: T V nx ny nz mode (0 surface, 1 thin, 2 solid, 3 solid+surface) kernel (0 tiles,
# 1 columns, 3 tiles3) chunk batch (triangles per setup chunk, brick items per candidate
# batch) keybits (64 or 32) max_slices (slices per 32-bit key group), V×3 vertices (%a, voxel
# units), T×3 indices. Output: n_bricks, then per brick its number and 64 bytes; n_runs, then
# per run bx0 bx1 by bz. Exit 2: a voxel outside the candidates; 3: the slice-sorted
# crossings are not sorted; 6: the warp's owner search disagrees with owner_of.
HARNESS = r"""
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>
""" + VOXELIZE_STUBS + r"""
#define __shared__ static
#define __syncwarp()
#define __launch_bounds__(...)
#define __popc __builtin_popcount
// include/voxfx_reduce.cuh's warp functions are compiled but not called on the host
template <typename T> T plain_max(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
#define atomicMax plain_max
#define __syncthreads() ((void)0)
#define __shfl_down_sync(mask, v, offset) ((v) * 0)
#define __ballot_sync(mask, flag) ((unsigned)(flag))
static unsigned host_float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
#define __float_as_uint host_float_as_uint
static long long direct_sets = 0;  // tile voxels outside their window (stored one by one)
#define VOXFX_SPARSE_DIRECT_HOOK() ++direct_sets
#include "voxelize.cu"  // solid_column_counts: the sparse solid's work counts are the dense kernel's
#include "voxelize_sparse.cu"
#include "voxelize_sparse_tiles.cu"
#include "voxelize_sparse_solid.cu"
typedef long long ll;
static void at(ll i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
static void scan(const std::vector<ll>& c, std::vector<ll>& e) { ll s = 0; e.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i) { s += c[i]; e[i] = s; } }
struct Chunk { ll first, n; std::vector<Setup> setups; std::vector<ll> counts[3], ends[3]; ll total[3]; };
// gpu_sparse._chunks: setups and work counts of triangles first .. first + n - 1
static void make_chunk(Chunk& c, const std::vector<double>& pv, const std::vector<int>& tris, ll V, int nx, int ny,
                       int nz, int thin, unsigned long long* flags) {
    c.setups.assign(c.n, Setup());
    for (ll i = 0; i < c.n; ++i) { at(i); sparse_surface_setups(pv.data(), tris.data(), c.first, c.n, V, nx, ny, nz,
                                                                 thin, c.setups.data(), flags); }
    for (int w = 0; w < 3; ++w) c.counts[w].assign(c.n, 0);
    for (ll i = 0; i < c.n; ++i) { at(i); sparse_surface_counts(c.setups.data(), c.n, c.counts[0].data(),
                                                                 c.counts[1].data(), c.counts[2].data()); }
    for (int w = 0; w < 3; ++w) { scan(c.counts[w], c.ends[w]); c.total[w] = c.n ? c.ends[w][c.n - 1] : 0; }
}
// gpu_sparse._solid with keys of type K: 64-bit keys in one group (each slice sorted alone,
// the finest grouping _sort_groups can make), 32-bit keys in groups of max_slices slices
// (_slice_groups), each group sorted alone. An error code goes out as lin = {-code}.
template <typename K>
static void solid_host(const std::vector<double>& pv, const std::vector<int>& tris, ll T, ll V, int nx, int ny, int nz,
                       ll max_slices, unsigned long long* flags, std::vector<ll>& lin, std::vector<unsigned char>& rows,
                       std::vector<ll>& runs) {
    ll nbx = nx / 8, nby = ny / 8, nbz = nz / 8;
    std::vector<ll> counts(T), ends;
    for (ll t = 0; t < T; ++t) { at(t); solid_column_counts(pv.data(), tris.data(), T, V, 0, 0, ny, nz,
                                                             counts.data(), flags); }
    scan(counts, ends);
    ll total = T ? ends[T - 1] : 0;
    int xbits = 1; while ((1ll << xbits) <= nx - 1) ++xbits;
    int ybits = 0; while ((1ll << ybits) <= nby - 1) ++ybits;
    std::vector<ll> z0(nbz, 0);
    if (sizeof(K) == 4) for (ll z = 0; z < nbz; ++z) z0[z] = z / max_slices * max_slices;
    std::vector<unsigned long long> slice_at(nbz, 0);
    K none = 0;
    for (ll i = 0; i < total; ++i) { at(i); solid_crossings<K>(pv.data(), tris.data(), ends.data(), counts.data(), T,
        total, nx, ny, nz, xbits, ybits, z0.data(), 0, slice_at.data(), &none); }
    std::vector<ll> starts(nbz + 1, 0);
    for (ll z = 0; z < nbz; ++z) { starts[z + 1] = starts[z] + (ll)slice_at[z]; slice_at[z] = starts[z]; }
    ll n = starts[nbz];
    std::vector<K> out(n > 0 ? n : 1);
    for (ll i = 0; i < total; ++i) { at(i); solid_crossings<K>(pv.data(), tris.data(), ends.data(), counts.data(), T,
        total, nx, ny, nz, xbits, ybits, z0.data(), 1, slice_at.data(), out.data()); }
    out.resize(n);
    std::vector<ll> gstart, gz0;
    for (ll z = 0; z < nbz; ++z)
        if (z == 0 || (sizeof(K) == 4 && z0[z] != z0[z - 1])) { gstart.push_back(starts[z]); gz0.push_back(z0[z]); }
    gstart.push_back(n);
    ll G = gz0.size();
    if (sizeof(K) == 8) {
        for (ll z = 0; z < nbz; ++z) std::sort(out.begin() + starts[z], out.begin() + starts[z + 1]);
        if (!std::is_sorted(out.begin(), out.end())) { lin.assign(1, -3); return; }
    } else {
        for (ll g = 0; g < G; ++g) std::sort(out.begin() + gstart[g], out.begin() + gstart[g + 1]);
    }
    std::vector<ll> seg(std::max<ll>(1, std::min<ll>(n, nby * nbz)));
    unsigned long long n_seg = 0;
    for (ll i = 0; i < n; ++i) { at(i); row_segments<K>(out.data(), n, xbits, gstart.data(), G, seg.data(), &n_seg); }
    seg.resize(n_seg);
    std::sort(seg.begin(), seg.end());
    ll ns = seg.size();
    seg.push_back(n);
    if (!ns) return;
    std::vector<ll> nb(ns), nr(ns), nbe, nre;
    ll dummy = 0;
    for (ll g = 0; g < ns; ++g) { at(g); solid_rows<K>(out.data(), seg.data(), ns, xbits, ybits, gstart.data(),
        gz0.data(), G, nbx, nby, 0, nb.data(), nr.data(), &dummy, (unsigned char*)&dummy, &dummy); }
    scan(nb, nbe); scan(nr, nre);
    for (ll g = 0; g < ns; ++g) { nbe[g] -= nb[g]; nre[g] -= nr[g]; }
    ll NB = nbe[ns - 1] + nb[ns - 1], NR = nre[ns - 1] + nr[ns - 1];
    lin.resize(NB); rows.resize(64 * NB); runs.resize(4 * NR);
    for (ll g = 0; g < ns; ++g) { at(g); solid_rows<K>(out.data(), seg.data(), ns, xbits, ybits, gstart.data(),
        gz0.data(), G, nbx, nby, 1, nbe.data(), nre.data(), lin.data(), rows.data(), runs.data()); }
}
int main() {
    ll T, V, chunk, batch, max_slices; int nx, ny, nz, mode, kernel, keybits;
    if (scanf("%lld %lld %d %d %d %d %d %lld %lld %d %lld", &T, &V, &nx, &ny, &nz, &mode, &kernel, &chunk, &batch,
              &keybits, &max_slices) != 11) {
        printf("-1\n");
        return 1;
    }
    std::vector<double> pv(3 * V);
    std::vector<int> tris(3 * T);
    for (auto& x : pv) scanf("%la", &x);
    for (auto& x : tris) scanf("%d", &x);
    unsigned long long flags[2] = {0, 0};
    ll nbx = nx / 8, nby = ny / 8, nbz = nz / 8;
    bool solid = mode >= 2, surface = mode != 2;
    std::vector<ll> lin, runs;
    std::vector<unsigned char> rows;
    // brick-range items, candidate bricks (the surface's)
    ll n_range = 0, n_cand = 0;
    if (solid && keybits == 32)
        solid_host<unsigned int>(pv, tris, T, V, nx, ny, nz, max_slices, flags, lin, rows, runs);
    else if (solid) solid_host<ll>(pv, tris, T, V, nx, ny, nz, 0, flags, lin, rows, runs);
    if (solid && lin.size() == 1 && lin[0] < 0) { printf("%lld\n", lin[0]); return (int)-lin[0]; }
    if (surface) {
        int thin = mode == 1;
        std::vector<ll> pairs(lin);  // gpu_sparse._candidates: the solid's bricks, then each batch's
        for (ll first = 0; first < T; first += chunk) {
            Chunk c; c.first = first; c.n = std::min(chunk, T - first);
            make_chunk(c, pv, tris, V, nx, ny, nz, thin, flags);
            n_range += c.total[0];
            for (ll f = 0; f < c.total[0]; f += batch) {
                ll items = std::min(batch, c.total[0] - f);
                unsigned long long n_out = 0;
                ll dummy = 0;
                for (ll i = 0; i < items; ++i) { at(i); sparse_surface_bricks(c.setups.data(), c.ends[0].data(),
                    c.counts[0].data(), c.n, f, items, nbx, nby, 0, &dummy, &n_out); }
                std::vector<ll> out(n_out);
                unsigned long long m = 0;
                for (ll i = 0; i < items; ++i) { at(i); sparse_surface_bricks(c.setups.data(), c.ends[0].data(),
                    c.counts[0].data(), c.n, f, items, nbx, nby, 1, out.data(), &m); }
                if (m != n_out) { printf("-4\n"); return 4; }
                pairs.insert(pairs.end(), out.begin(), out.end());
            }
        }
        std::sort(pairs.begin(), pairs.end());
        pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
        n_cand = pairs.size();
        std::vector<unsigned int> pool(16 * pairs.size(), 0u);
        for (size_t b = 0; b < lin.size(); ++b) {
            size_t s = std::lower_bound(pairs.begin(), pairs.end(), lin[b]) - pairs.begin();
            for (int r = 0; r < 64; ++r) ((unsigned char*)pool.data())[64 * s + r] = rows[64 * b + r];
        }
        std::vector<ll> row_start(nby * nbz + 1);
        for (ll r = 0; r <= nby * nbz; ++r)
            row_start[r] = std::lower_bound(pairs.begin(), pairs.end(), r * nbx) - pairs.begin();
        unsigned long long missing = 0;
        for (ll first = 0; first < T && !pairs.empty(); first += chunk) {
            Chunk c; c.first = first; c.n = std::min(chunk, T - first);
            make_chunk(c, pv, tris, V, nx, ny, nz, thin, flags);
            if (kernel == 1) {
                for (ll i = 0; i < c.total[2]; ++i) { at(i); sparse_surface_columns(c.setups.data(),
                    c.ends[2].data(), c.counts[2].data(), c.n, c.total[2], pairs.data(), row_start.data(), nbx, nby,
                    pool.data(), &missing); }
                continue;
            }
            // sparse_surface_tiles (3: tiles3), one warp per item: its lanes one phase after the other
            for (ll item = 0; item < c.total[1]; ++item) {
                unsigned int buf[VOXFX_TILE_WORDS];
                BrickIndex ix = {pairs.data(), row_start.data(), nbx, nby, pool.data(), &missing, -1, 0};
                if (kernel == 3) {  // sparse_surface_tiles3
                    ll tri = warp_owner_of(c.ends[1].data(), c.n, item, 0);
                    if (tri != owner_of(c.ends[1].data(), c.n, item)) { printf("-6\n"); return 6; }
                    const Setup& s = c.setups[tri];
                    Tile3 k3 = tile3_work(s, c.ends[1].data(), c.counts[1].data(), tri, item);
                    for (int lane = 0; lane < 32; ++lane) tile_clear(buf, lane);
                    for (int lane = 0; lane < 32; ++lane) tile3_columns(s, k3, lane, buf, ix);
                    for (int lane = 0; lane < 32; ++lane) tile_flush(s, k3.w, lane, buf, ix);
                    continue;
                }
                TileWork w = tile_work(c.setups.data(), c.ends[1].data(), c.counts[1].data(), c.n, item);
                const Setup& s = c.setups[w.t];
                for (int lane = 0; lane < 32; ++lane) tile_clear(buf, lane);
                for (int lane = 0; lane < 32; ++lane)
                    tile_columns(s, w, lane, buf, ix);
                for (int lane = 0; lane < 32; ++lane) tile_flush(s, w, lane, buf, ix);
            }
        }
        if (missing) { printf("-2\n"); return 2; }
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
    if (flags[0] || flags[1]) { printf("-5\n"); return 5; }
    printf("%zu\n", lin.size());
    for (size_t b = 0; b < lin.size(); ++b) {
        printf("%lld", lin[b]);
        for (int r = 0; r < 64; ++r) printf(" %d", rows[64 * b + r]);
        printf("\n");
    }
    printf("%zu\n", runs.size() / 4);
    for (size_t k = 0; k < runs.size(); ++k) printf("%lld\n", runs[k]);
    printf("%lld %lld %lld\n", n_range, n_cand, direct_sets);
    return 0;
}
"""

MODES = {"surface": 0, "thin": 1, "solid": 2, "solid+surface": 3}
KERNELS = {"tiles": 0, "columns": 1, "tiles3": 3}
WHOLE = 1 << 40  # one chunk of triangles, one batch of brick items


@pytest.fixture(scope="module")
def device_sparse(tmp_path_factory):
    run = _build(tmp_path_factory, HARNESS)

    def voxelize_host(v, t, spec, mode, kernel="tiles", chunk=WHOLE, batch=WHOLE, keys=64, max_slices=1):
        """{brick (bx, by, bz): 64 bytes} of the kernels, runs expanded, and the runs;
        ``counts``: the surface's brick-range items, candidate bricks, and tile voxels
        stored outside their window."""
        mesh = SplitMesh(v, t, spec)
        nx, ny, nz = spec.shape
        lines = [f"{len(t)} {len(mesh.pv)} {nx} {ny} {nz} {MODES[mode]} {KERNELS[kernel]} {chunk} {batch} {keys} "
                 f"{max_slices}"]
        lines += [" ".join(float(x).hex() for x in row) for row in mesh.pv]
        lines += [" ".join(str(int(x)) for x in row) for row in mesh.triangles]
        out = run(lines)
        n, at = out[0], 1
        assert n >= 0, f"harness error {-n}"
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
        voxelize_host.counts = tuple(out[at + 1 + 4 * m:at + 4 + 4 * m])
        return bricks, runs

    return voxelize_host


def numpy_bricks(v, t, spec, mode, tile):
    grid = voxelize_sparse(v, t, spec, mode, tile=tile, xp=np)
    coords = grid.topology.coords()
    rows = grid.channels[CHANNEL][grid.topology.slots]
    return {tuple(int(c) for c in b): r.tobytes() for b, r in zip(coords, rows)}


def rounded(spec, tile):
    return GridSpec(spec.origin, spec.voxel_size, tuple(-(-n // tile) * tile for n in spec.shape))


def primitive(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, rounded(GridSpec.around(lo, hi, float((hi - lo).max()) / res), 32)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("name,res", [("torus", 45), ("monkey", 40), ("cone", 38), ("uv_sphere", 50)])
@pytest.mark.parametrize("mode", list(MODES))
def test_device_sparse_kernels_equal_the_numpy_bricks(device_sparse, name, res, mode, kernel):
    """Suzanne is open (rows run to the grid's end); the sphere's interior becomes runs."""
    v, t, spec = primitive(name, res)
    got, runs = device_sparse(v, t, spec, mode, kernel)
    want = numpy_bricks(v, t, spec, mode, 32)
    assert got.keys() == want.keys()
    assert all(got[k] == want[k] for k in want)
    assert want
    if mode in ("solid", "solid+surface") and name == "uv_sphere":
        assert len(runs) > 0  # the interior is stored as full runs
    if kernel != "columns" and mode != "solid":
        assert device_sparse.counts[2] == 0  # every voxel went through its tile's window


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("mode", ["surface", "thin", "solid+surface"])
def test_device_sparse_kernels_in_chunks_and_batches(device_sparse, mode, kernel):
    """Setups built 17 triangles at a time, brick items tested 29 at a time: the same bricks."""
    v, t, spec = primitive("torus", 60)
    got, _ = device_sparse(v, t, spec, mode, kernel, chunk=17, batch=29)
    want = numpy_bricks(v, t, spec, mode, 32)
    assert got.keys() == want.keys() and all(got[k] == want[k] for k in want)


@pytest.mark.parametrize("max_slices", [1, 2, 3, 64])
@pytest.mark.parametrize("name,res", [("torus", 45), ("uv_sphere", 50), ("monkey", 40)])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_32_bit_crossing_keys_in_slice_groups(device_sparse, name, res, mode, max_slices):
    """32-bit crossing keys, their slice counted from the first of a group of max_slices
    slices (a group a slice, groups cut across the shape, one group): the bricks and runs
    of the 64-bit keys and of the NumPy voxelizer."""
    v, t, spec = primitive(name, res)
    got, runs = device_sparse(v, t, spec, mode, "tiles3", keys=32, max_slices=max_slices)
    wide, wide_runs = device_sparse(v, t, spec, mode, "tiles3")
    want = numpy_bricks(v, t, spec, mode, 32)
    assert want and got.keys() == want.keys() and all(got[k] == want[k] for k in want)
    assert got == wide and np.array_equal(runs, wide_runs)


def test_candidate_bricks_are_fewer_than_the_brick_ranges(device_sparse):
    """The conservative brick test drops bricks of the triangles' ranges that no voxel of
    theirs reaches (a sphere's ranges overlap a lot: count distinct bricks of both)."""
    v, t, spec = primitive("uv_sphere", 120)
    got, _ = device_sparse(v, t, spec, "surface")
    n_range, n_cand, _ = device_sparse.counts
    mesh = SplitMesh(v, t, spec)
    p = mesh.pv[mesh.triangles]
    lo = np.maximum(np.ceil(p.min(1)) - 1, 0).astype(np.int64) >> 3
    hi = np.minimum(np.floor(p.max(1)), np.asarray(spec.shape) - 1).astype(np.int64) >> 3
    ranged = {(x, y, z) for a, b in zip(lo, hi) for z in range(a[2], b[2] + 1) for y in range(a[1], b[1] + 1)
              for x in range(a[0], b[0] + 1)}
    assert n_range == int(np.prod(hi - lo + 1, axis=1).sum())
    assert len(got) <= n_cand < len(ranged)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("mode", list(MODES))
def test_device_sparse_kernels_on_ties_and_slivers(device_sparse, seed, mode, kernel):
    v, t = exact_soups.soup(seed)
    spec = rounded(exact_soups.UNIT, 32)
    got, _ = device_sparse(v, t, spec, mode, kernel)
    want = numpy_bricks(v, t, spec, mode, 32)
    assert got.keys() == want.keys() and all(got[k] == want[k] for k in want)


def tile_edge_soup(seed, n=24, size=64):
    """Triangles spanning several 8 × 8 tiles whose corners sit on tile corners, tile edges
    and voxel corners, or a rounding step off them (one-decimal coordinates), with slivers
    along tile boundaries: where tile windows and tiles3's tight column depths are nearest
    to a decision."""
    rng = np.random.default_rng(seed)
    tris = []
    for _ in range(n):
        a = rng.integers(0, size // 8 + 1, 3) * 8.0  # a tile corner
        b = np.clip(a + rng.integers(-3, 4, 3) * 8.0, 0, size)
        kind = rng.integers(4)
        if kind == 0:
            c = np.clip(a + rng.integers(-24, 25, 3), 0, size).astype(np.float64)  # a voxel corner
        elif kind == 1:
            c = np.round(np.clip(a + rng.uniform(-24, 24, 3), 0, size), 1)  # one decimal: near-ties
        elif kind == 2:
            c = a + rng.choice([0.25, 0.5, 0.9]) * (b - a)  # a sliver along a tile boundary line
            c[rng.integers(3)] += rng.choice([0.0, 1e-9, 0.1])
        else:
            c = b.copy()
            c[rng.integers(3)] = a[rng.integers(3)]  # in a tile face plane
        tris.append([a, b, c])
    v = np.asarray(tris, dtype=np.float64).reshape(-1, 3)
    return v, np.arange(len(v)).reshape(-1, 3)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["surface", "thin", "solid+surface"])
def test_tiles3_near_tile_edges_and_vertices(device_sparse, seed, mode):
    """tiles3 (the warp's owner search, each column's candidate depths only where the plane
    can meet a voxel's closed box) sets the bits of the NumPy voxelizer and of the tiles
    launch where corners sit on voxel corners and planes on voxel faces (ties of the depth
    range's ends)."""
    v, t = tile_edge_soup(seed)
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (96, 96, 96))
    want = numpy_bricks(v, t, spec, mode, 32)
    got, _ = device_sparse(v, t, spec, mode, "tiles3")
    tiles, _ = device_sparse(v, t, spec, mode, "tiles")
    assert want
    assert got.keys() == want.keys() and all(got[k] == want[k] for k in want)
    assert tiles == got


@pytest.mark.parametrize("kernel", ["tiles", "tiles3"])
@pytest.mark.parametrize("seed", range(6, 16))
@pytest.mark.parametrize("mode", ["surface", "thin"])
def test_tile_launches_on_more_ties_and_slivers(device_sparse, seed, mode, kernel):
    v, t = exact_soups.soup(seed, per_kind=4)
    spec = rounded(exact_soups.UNIT, 32)
    got, _ = device_sparse(v, t, spec, mode, kernel)
    want = numpy_bricks(v, t, spec, mode, 32)
    assert got.keys() == want.keys() and all(got[k] == want[k] for k in want)
