"""The GPU particle level set's ways (cuda/flip_surface.cu, flip_surface_lean.cu, surface_gpu.LEVEL_SET_MODES) checked
on the host without a GPU: nvcc builds the kernels as host functions (one "thread" per
call, atomics plain, no FMA contraction as --fmad=false) and a C++ driver runs them in the
order surface.py launches them — "bricks" (images made in the binning kernels, counting
sort, cells put in tag order, the gather over the marked node bricks only, smoothing, the
box cut) and "legacy" (keys, a stable sort, cell starts by binary search, the gather over
every node, smoothing; its images from ``mirror_at_walls`` and its cut ``box_distance``,
as surface.py's array code). The two agree to the bit, and both agree with the NumPy
reference (``closed_level_set`` / ``particle_level_set``) to float32 accuracy; "lean" (the
count and placement grouped by warp — one lane a warp on the host —, 32-bit tags, the
branch-free gather with its three-operation quotient) gives the bricks way's cell starts
and gather bit for bit. The device comparison is tests/gpu/test_flip_surface_gpu.py,
test_flip_closed_surface_gpu.py and test_flip_surface_bricks_gpu.py."""


import numpy as np
import pytest

from tests.unit.test_flip_surface import seeded_ball
from tests.cuda_host import STUBS
from tests.unit.test_cuda_exact import _build
from voxfx.kernels import backend
from voxfx.kernels.flip import surface, surface_gpu
from voxfx.kernels.flip.surface import (box_distance, closed_level_set, mirror_at_walls, particle_level_set,
                                        surface_grid, surface_radii)
from voxfx.kernels.grid import GridSpec

# Input: 0 walls smooth radius_stride; lo (3) hi (3) reach; nx ny nz; ox oy oz h; cox coy coz
# inv_edge; cx cy cz; R band step flat (%a); n, pos (3n), radii (n or 1); the legacy list m,
# points (3m), radii (m or 1). Output: bricks phi (cut when walls), legacy phi (uncut), the
# non-finite count, 1 where the lean way's starts and gather (and that gather split over 4 blocks a
# tile, particle_level_set_lean_split; and one smoothing step by smooth_level_set_bricks_from in three
# runs of tiles) are the bricks way's bits, the
# active bricks. Or "1 b e m0 n" (quotients()): quotient_mismatches' count; or "2 n pos"
# (bounds()): particle_bounds' six order keys.
HARNESS = STUBS + r"""
static float host_int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
#define __int_as_float host_int_as_float
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicMin plain_min
#include "flip_surface.cu"
#include "flip_surface_lean.cu"
#include "flip_surface_interior.cu"
typedef long long ll;
static void at(ll i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
#define LAUNCH(n, call) for (ll t_ = 0; t_ < (ll)(n); ++t_) { at(t_); call; }
static float rf() { float x; scanf("%a", &x); return x; }
static int ri() { int x; scanf("%d", &x); return x; }
static void pf(const std::vector<float>& a) { for (float x : a) printf("%a\n", x); }
// The interior skip's cell flags from per-cell counts (surface_gpu._interior_cells' three launches).
static std::vector<unsigned char> interior_flags(const std::vector<int>& counts, int skip, int full, int cx, int cy,
                                                 int cz, int reach) {
    ll cells = (ll)cx * cy * cz;
    if (!skip) return std::vector<unsigned char>(1, 0);
    std::vector<unsigned char> a(cells), b(cells);
    LAUNCH(cells, interior_cells_x(counts.data(), full, cx, cy, cz, reach, a.data()));
    LAUNCH(cells, interior_cells_erode(a.data(), cx, cy, cz, 1, reach, b.data()));
    LAUNCH(cells, interior_cells_erode(b.data(), cx, cy, cz, 2, reach, a.data()));
    return a;
}
static void smooth(std::vector<float>& phi, int nx, int ny, int nz, float step, float flat, float band, int times) {
    std::vector<float> other(phi.size());
    for (int s = 0; s < times; ++s) {
        LAUNCH(phi.size(), smooth_level_set(phi.data(), nx, ny, nz, step, flat, band, other.data()));
        phi.swap(other);
    }
}
// Input "1 b e m0 n": quotient_mismatches over n mantissas from m0 at exponent e; prints the count.
static int quotients() {
    float b = rf();
    int e = ri(), m0 = ri();
    ll n; scanf("%lld", &n);
    unsigned long long bad = 0;
    LAUNCH(n, quotient_mismatches(b, e, m0, n, &bad));
    printf("%llu\n", bad);
    return 0;
}
// Input "2 n pos (3n, %a)": particle_bounds' six keys (one thread walks every particle).
static int bounds() {
    ll n; scanf("%lld", &n);
    std::vector<float> pos(3 * n);
    for (auto& x : pos) x = rf();
    unsigned keys[6] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0u, 0u, 0u};
    at(0);
    particle_bounds(pos.data(), n, keys);
    for (unsigned k : keys) printf("%u\n", k);
    return 0;
}
int main() {
    int mode = ri();
    if (mode == 1) return quotients();
    if (mode == 2) return bounds();
    int walls = ri(), times = ri(), stride = ri();
    float lox = rf(), loy = rf(), loz = rf(), hix = rf(), hiy = rf(), hiz = rf(), reach = rf();
    int nx = ri(), ny = ri(), nz = ri();
    float ox = rf(), oy = rf(), oz = rf(), h = rf(), cox = rf(), coy = rf(), coz = rf(), inv_edge = rf();
    int cx = ri(), cy = ri(), cz = ri();
    float R = rf(), band = rf(), step = rf(), flat = rf();
    int skip = ri(), full = ri(), ireach = ri();
    ll n; scanf("%lld", &n);
    std::vector<float> pos(3 * n), radii(stride ? n : 1);
    for (auto& x : pos) x = rf();
    for (auto& x : radii) x = rf();
    ll m; scanf("%lld", &m);
    std::vector<float> pts(3 * m), pr(stride ? m : 1);
    for (auto& x : pts) x = rf();
    for (auto& x : pr) x = rf();
    ll cells = (ll)cx * cy * cz, V = (ll)nx * ny * nz;

    // bricks
    std::vector<int> counts(cells, 0), starts(cells + 1, 0), bad(1, 0);
    LAUNCH(n, surface_count(pos.data(), n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox, coy, coz, inv_edge,
                            cx, cy, cz, counts.data(), bad.data()));
    std::partial_sum(counts.begin(), counts.end(), starts.begin() + 1);
    ll points = starts[cells];
    std::vector<unsigned char> iflags = interior_flags(counts, skip, full, cx, cy, cz, ireach);
    std::vector<float4> packed(points);
    std::vector<ll> tags(points);
    std::fill(counts.begin(), counts.end(), 0);
    LAUNCH(n, surface_place(pos.data(), radii.data(), stride, n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox,
                            coy, coz, inv_edge, cx, cy, cz, starts.data(), counts.data(), packed.data(),
                            tags.data()));
    std::vector<float4> ordered(points);
    LAUNCH(points, surface_order_cells(packed.data(), tags.data(), starts.data(), points, cox, coy, coz, inv_edge, cx,
                                       cy, cz, 1 << 30, ordered.data()));
    packed.swap(ordered);
    int nbx = (nx + TILE_X - 1) / TILE_X, nby = (ny + TILE_Y - 1) / TILE_Y, nbz = (nz + TILE_Z - 1) / TILE_Z;
    std::vector<unsigned char> active((ll)nbx * nby * nbz);
    LAUNCH(active.size(), mark_level_set_bricks(starts.data(), nbx, nby, nbz, nx, ny, nz, ox, oy, oz, h, cox, coy,
                                                coz, inv_edge, cx, cy, cz, R, active.data()));
    std::vector<float> phi(V, NAN);
    for (ll b = 0; b < (ll)active.size(); ++b)
        for (unsigned t = 0; t < TILE_X * TILE_Y * TILE_Z; ++t) {
            h_block.x = (unsigned)b; h_dim.x = TILE_X * TILE_Y * TILE_Z; h_thread.x = t;
            particle_level_set_bricks(packed.data(), starts.data(), active.data(), iflags.data(), skip, nbx, nby, nx,
                                      ny, nz, ox, oy, oz, h, cox, coy, coz, inv_edge, cx, cy, cz, R, band,
                                      phi.data());
        }
    // lean: grouped count and place, 32-bit tags, the branch-free gather (before smoothing)
    std::vector<int> lcounts(cells + 1, 0), lstarts_(cells + 1, 0), lbad(1, 0);
    LAUNCH(n, surface_count_lean(pos.data(), n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox, coy, coz, inv_edge,
                                 cx, cy, cz, lcounts.data(), lbad.data()));
    std::partial_sum(lcounts.begin(), lcounts.end() - 1, lstarts_.begin() + 1);
    std::vector<unsigned char> lflags = interior_flags(lcounts, skip, full, cx, cy, cz, ireach);
    std::vector<float4> lpk(lstarts_[cells]), lord(lstarts_[cells]);
    std::vector<unsigned> ltags(lstarts_[cells]);
    std::fill(lcounts.begin(), lcounts.end(), 0);
    LAUNCH(n, surface_place_lean(pos.data(), radii.data(), stride, n, walls, lox, loy, loz, hix, hiy, hiz, reach, cox,
                                 coy, coz, inv_edge, cx, cy, cz, lstarts_.data(), lcounts.data(), lpk.data(),
                                 ltags.data()));
    LAUNCH(lpk.size(), surface_order_cells_lean(lpk.data(), ltags.data(), lstarts_.data(), (ll)lpk.size(), cox, coy,
                                                coz, inv_edge, cx, cy, cz, 1 << 30, lord.data()));
    std::vector<float> lean(V, NAN);
    for (ll b = 0; b < (ll)active.size(); ++b)
        for (unsigned t = 0; t < TILE_X * TILE_Y * TILE_Z; ++t) {
            h_block.x = (unsigned)b; h_dim.x = TILE_X * TILE_Y * TILE_Z; h_thread.x = t;
            particle_level_set_lean(lord.data(), lstarts_.data(), active.data(), lflags.data(), skip, nbx, nby, nx, ny,
                                    nz, ox, oy, oz, h, cox, coy, coz, inv_edge, cx, cy, cz, R, band, lean.data());
        }
    // lean's gather with each tile over 4 blocks of 128 threads (particle_level_set_lean_split): lean's bits
    std::vector<float> split(V, NAN);
    const unsigned part = TILE_X * TILE_Y * TILE_Z / 4;
    for (ll b = 0; b < 4 * (ll)active.size(); ++b)
        for (unsigned t = 0; t < part; ++t) {
            h_block.x = (unsigned)b; h_dim.x = part; h_thread.x = t;
            particle_level_set_lean_split(lord.data(), lstarts_.data(), active.data(), lflags.data(), skip, nbx, nby,
                                          nx, ny, nz, ox, oy, oz, h, cox, coy, coz, inv_edge, cx, cy, cz, R, band,
                                          split.data(), 4, 0);
        }
    // phi: the bricks gather, not yet smoothed
    int lean_same = lbad[0] == bad[0] && lstarts_ == starts && !std::memcmp(lean.data(), phi.data(), 4 * V) &&
                    !std::memcmp(split.data(), lean.data(), 4 * V);
    std::vector<unsigned char> near(active.size());
    LAUNCH(active.size(), dilate_bricks(active.data(), nbx, nby, nbz, near.data()));
    if (times > std::min(TILE_X, std::min(TILE_Y, TILE_Z))) std::fill(near.begin(), near.end(), 1);
    std::vector<float> other(V, NAN), gathered(phi);
    for (int s = 0; s < times; ++s) {
        int cut = walls && s == times - 1;
        for (ll b = 0; b < (ll)active.size(); ++b)
            for (unsigned t = 0; t < TILE_X * TILE_Y * TILE_Z; ++t) {
                h_block.x = (unsigned)b; h_dim.x = TILE_X * TILE_Y * TILE_Z; h_thread.x = t;
                smooth_level_set_bricks(phi.data(), near.data(), nbx, nby, nx, ny, nz, step, flat, band, cut, ox, oy,
                                        oz, h, lox, loy, loz, hix, hiy, hiz, other.data());
            }
        phi.swap(other);
    }
    if (walls && times == 0)
        LAUNCH(V, cut_by_box(phi.data(), nx, ny, nz, ox, oy, oz, h, lox, loy, loz, hix, hiy, hiz, band));
    // one step by smooth_level_set_bricks_from over three runs of tiles (surface_overlap's chunks): the same bits
    if (times == 1) {
        std::vector<float> chunked(V, NAN);
        ll tiles = (ll)active.size(), cut1 = tiles / 3, cut2 = 2 * tiles / 3, ends[4] = {0, cut1, cut2, tiles};
        for (int c = 0; c < 3; ++c)
            for (ll b = 0; b < ends[c + 1] - ends[c]; ++b)
                for (unsigned t = 0; t < TILE_X * TILE_Y * TILE_Z; ++t) {
                    h_block.x = (unsigned)b; h_dim.x = TILE_X * TILE_Y * TILE_Z; h_thread.x = t;
                    smooth_level_set_bricks_from(gathered.data(), near.data(), nbx, nby, nx, ny, nz, step, flat, band,
                                                 walls, ox, oy, oz, h, lox, loy, loz, hix, hiy, hiz, chunked.data(),
                                                 ends[c]);
                }
        lean_same = lean_same && !std::memcmp(chunked.data(), phi.data(), 4 * V);
    }

    // legacy
    std::vector<int> keys(m);
    LAUNCH(m, bin_particles(pts.data(), m, cox, coy, coz, inv_edge, cx, cy, cz, keys.data()));
    std::vector<ll> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](ll a, ll b) { return keys[a] < keys[b]; });
    std::vector<int> sorted(m), lstarts(cells + 1, 0);
    for (ll s = 0; s < m; ++s) sorted[s] = keys[order[s]];
    for (ll c = 1; c <= cells; ++c)
        lstarts[c] = (int)(std::lower_bound(sorted.begin(), sorted.end(), (int)c) - sorted.begin());
    std::vector<float4> lpacked(m);
    LAUNCH(m, pack_particles(pts.data(), pr.data(), stride, order.data(), m, lpacked.data()));
    std::vector<int> legacy_counts(cells);
    for (ll c = 0; c < cells; ++c) legacy_counts[c] = lstarts[c + 1] - lstarts[c];
    std::vector<unsigned char> gflags = interior_flags(legacy_counts, skip, full, cx, cy, cz, ireach);
    std::vector<float> legacy(V);
    LAUNCH(V, particle_level_set(lpacked.data(), lstarts.data(), gflags.data(), skip, nx, ny, nz, ox, oy, oz, h, cox,
                                 coy, coz, inv_edge, cx, cy, cz, R, band, legacy.data()));
    smooth(legacy, nx, ny, nz, step, flat, band, times);

    pf(phi);
    pf(legacy);
    printf("%d\n", bad[0]);
    printf("%d\n", lean_same);
    ll marked = 0;
    for (auto a : iflags) marked += a;
    printf("%lld\n", skip ? marked : -1);
    for (auto a : active) printf("%d\n", (int)a);
    return 0;
}
"""


def _harness(tmp_path_factory, sums, source=HARNESS, name="surface"):
    """The harness built as the kernels of surface_gpu.level_set_sums() *sums* are."""
    kernels = surface_gpu._K_FUSED if sums == "fused" else surface_gpu._K
    build = _build(tmp_path_factory, source, [o for o in kernels.options if o.startswith("-D")], f"{name}-{sums}")

    def run(text):
        return build.raw([text], check=True).split()

    return run


@pytest.fixture(scope="module", params=surface_gpu.LEVEL_SET_SUMS)
def harness(request, tmp_path_factory):
    """The harness in each way of adding a node's sums (VOXFX_LEVEL_SET_SUMS): every test below runs in both."""
    return _harness(tmp_path_factory, request.param)


def _hex(a):
    return " ".join(float(x).hex() for x in np.asarray(a, np.float32).ravel())


def host_level_sets(run, pos, radii, grid, R, band, smooth, walls=None, interior=None):
    """(bricks φ, legacy φ (cut as surface.py cuts it), non-finite count, active bricks);
    *interior*: (full, reach) of the interior skip (surface_interior), which every way
    takes (host_interior_cells gives its marked cells)."""
    f = np.float32
    h = grid.voxel_size
    if walls is not None:
        lo = [f(o) for o in walls.origin]
        hi = [f(o + c * walls.voxel_size) for o, c in zip(walls.origin, walls.shape)]
        ghosts, source = mirror_at_walls(pos, walls, R + walls.voxel_size, np)
        pts = np.concatenate([pos, ghosts])
        pr = radii if np.ndim(radii) == 0 else np.concatenate([radii, radii[source]])
    else:
        lo = hi = [f(0)] * 3
        pts, pr = pos, radii
    (cox, coy, coz), edge, (cx, cy, cz) = surface_gpu._cell_grid(grid, R)
    stride = int(np.ndim(radii) > 0)
    nx, ny, nz = grid.shape
    text = "\n".join([
        f"0 {int(walls is not None)} {smooth} {stride}", _hex(lo + hi + [f(R + h if walls is not None else 0.0)]),
        f"{nx} {ny} {nz}", _hex([*grid.origin, h, cox, coy, coz, 1.0 / edge]), f"{cx} {cy} {cz}",
        _hex([R, band, surface.SMOOTH_STEP, f(surface.FLAT_GRADIENT * h) ** 2]),
        f"{int(interior is not None)} {' '.join(str(int(v)) for v in (interior or (0, 0)))}",
        str(len(pos)), _hex(pos), _hex(np.atleast_1d(radii)), str(len(pts)), _hex(pts), _hex(np.atleast_1d(pr))])
    out = run(text)
    V = grid.voxel_count
    bricks = np.array([float.fromhex(x) for x in out[:V]], np.float32).reshape(grid.array_shape)
    legacy = np.array([float.fromhex(x) for x in out[V:2 * V]], np.float32).reshape(grid.array_shape)
    if walls is not None:
        legacy = np.maximum(legacy, box_distance(grid, walls, band, np))
    bad = int(out[2 * V])
    assert out[2 * V + 1] == "1"  # the lean way's starts and gather: the bricks way's bits
    host_level_sets.marked = int(out[2 * V + 2])  # interior cells marked (−1 without the skip)
    active = np.array([int(x) for x in out[2 * V + 3:]])
    return bricks, legacy, bad, active


def liquid_in_a_box(rng, h):
    spec = GridSpec(tuple(rng.uniform(-2, 2, 3)), h, tuple(int(a) for a in rng.integers(14, 26, 3)))
    lo, hi = np.asarray(spec.origin), np.asarray(spec.upper)
    parts = [seeded_ball(rng.uniform(lo, hi), float(rng.uniform(3, 6)) * h, h / 2, rng) for _ in range(2)]
    parts.append(seeded_ball(lo + 2 * h, 4 * h, h / 2, rng))  # in a corner: up to 7 images a particle
    parts.append(rng.uniform(lo, hi, (200, 3)))
    return spec, np.clip(np.concatenate(parts), lo + 1e-3 * h, hi - 1e-3 * h).astype(np.float32)


@pytest.mark.parametrize("smooth", [0, 1, 5])
def test_bricks_closed_level_set_equals_legacy_and_the_reference(harness, smooth):
    rng = np.random.default_rng()
    h = float(rng.uniform(0.02, 0.06))
    spec, pos = liquid_in_a_box(rng, h)
    r, R = surface_radii(h, 8)
    band = 3.0 * h
    grown = surface_grid(spec)
    bricks, legacy, bad, active = host_level_sets(harness, pos, np.float32(r), grown, R, band, smooth, walls=spec)
    assert bad == 0
    np.testing.assert_array_equal(bricks, legacy)  # the same particles in the same order: the same bits
    # the harness ran without the interior skip, so the reference too (with the skip, the default, ~1.7% of
    # the random scenes had interior nodes at −band where the harness gathered: seeds 61, 73, 97, 202, 290)
    reference = closed_level_set(pos, spec, r, R, xp=np, smooth_iterations=smooth, interior=False)
    np.testing.assert_allclose(bricks, reference, rtol=0, atol=2e-5 * R if smooth == 0 else 1e-4 * h * smooth)
    assert (bricks < 0).any() and 0 < active.sum() <= active.size


def test_bricks_open_level_set_with_per_particle_radii_and_far_particles(harness):
    """No walls; particles off the grid, far away and sparse: skipped bricks are +band."""
    rng = np.random.default_rng()
    h = float(rng.uniform(0.02, 0.06))
    spec = GridSpec(tuple(rng.uniform(-2, 2, 3)), h, tuple(int(a) for a in rng.integers(20, 40, 3)))
    lo, hi = np.asarray(spec.origin), np.asarray(spec.upper)
    pos = np.concatenate([seeded_ball(rng.uniform(lo, lo + 0.4 * (hi - lo)), 4 * h, h / 2, rng),
                          rng.uniform(lo - 3 * h, lo + 0.5 * (hi - lo), (100, 3)),  # spray, off the grid too
                          hi + rng.uniform(20 * h, 50 * h, (20, 3))])  # far away
    pos = pos.astype(np.float32)
    radii = (rng.uniform(0.3, 0.7, len(pos)) * h).astype(np.float32)
    R = 4 * float(radii.max())
    band = 3.0 * h
    bricks, legacy, bad, active = host_level_sets(harness, pos, radii, spec, R, band, 1)
    np.testing.assert_array_equal(bricks, legacy)
    reference = particle_level_set(pos, spec, radii, R, xp=np, interior=False)  # the harness: no skip
    np.testing.assert_allclose(bricks, reference, rtol=0, atol=1e-4 * h)
    assert 0 < active.sum() < active.size  # some bricks skipped, and they are the far field
    assert (bricks == np.float32(band)).any()


@pytest.mark.parametrize("smooth", [0, 1])
def test_interior_skip_closed_every_way_the_same_bits_and_the_reference_nodes(harness, smooth):
    """The interior skip (surface_interior, flip_surface_interior.cu) in every way: the
    cells marked from each way's counts, the same bits (bricks, lean, legacy), and the same
    skipped nodes (−band; the box cut's d_box by the walls) as the NumPy reference's."""
    from tests.unit.test_flip_surface import seeded_pool
    from voxfx.kernels.flip.surface_interior import interior_rule

    rng = np.random.default_rng()
    h = float(rng.uniform(0.02, 0.06))
    spec = GridSpec(tuple(rng.uniform(-2, 2, 3)), h, (22, 18, 24))
    lo = np.asarray(spec.origin)
    pool = seeded_pool(18 * h, 12 * h, 12 * h, h / 2, rng) + lo  # the floor's whole width, 12 cells deep
    pos = np.concatenate([pool, seeded_ball(lo + [8 * h, 9 * h, 18 * h], 3 * h, h / 2, rng)])
    pos = np.clip(pos, lo + 1e-3 * h, np.asarray(spec.upper) - 1e-3 * h).astype(np.float32)
    r, R = surface_radii(h, 8)
    band = 3.0 * h
    grown = surface_grid(spec)
    rule = interior_rule(grown, R, r, smooth)
    bricks, legacy, bad, _ = host_level_sets(harness, pos, np.float32(r), grown, R, band, smooth, walls=spec,
                                             interior=rule)
    assert bad == 0 and host_level_sets.marked > 0
    np.testing.assert_array_equal(bricks, legacy)
    reference = closed_level_set(pos, spec, r, R, xp=np, smooth_iterations=smooth, interior=True)
    off = closed_level_set(pos, spec, r, R, xp=np, smooth_iterations=smooth, interior=False)
    changed = reference != off
    assert changed.sum() > 100
    np.testing.assert_array_equal(bricks[changed & (reference == np.float32(-band))], np.float32(-band))
    np.testing.assert_array_equal(bricks == np.float32(-band), reference == np.float32(-band))
    np.testing.assert_allclose(bricks, reference, rtol=0, atol=2e-5 * R if smooth == 0 else 1e-4 * h)


def test_non_finite_particles_are_counted_and_left_out(harness):
    rng = np.random.default_rng()
    h = 0.05
    spec, pos = liquid_in_a_box(rng, h)
    pos[[3, 10, 11]] = [np.nan, 0.0, 0.0], [0.0, np.inf, 0.0], [0.0, 0.0, -np.inf]
    r, R = surface_radii(h, 8)
    _, _, bad, _ = host_level_sets(harness, pos[:20], np.float32(r), surface_grid(spec), R, 3 * h, 0, walls=spec)
    assert bad == 3


def test_a_node_whose_only_particle_lies_just_inside_r_reads_its_distance(harness):
    """A node whose one particle lies a float32 step inside R weighs it ~1e-21: the kernel's
    weighted offsets (~1e-22 m) squared underflow float32, and the node read |x − x̄| = 0,
    φ = −r (a speck of liquid far from it: seen on random inputs on the H100, 1 node in
    ~10⁵). The means taken first give the reference's R − r."""
    f = np.float32
    h, r = 0.1, 0.03
    R = 4 * r
    R2 = f(R) * f(R)
    spec = GridSpec((0.0, 0.0, 0.0), h, (9, 9, 9))
    node = f(4.5) * f(h)  # node 4's coordinate on every axis, as _node_coordinate rounds it
    x = node + f(R)  # a particle at (x, y, node): x a few float32 steps below node + R ...
    while f(x - node) * f(x - node) >= R2:
        x = np.nextafter(x, f(0))
    # ... and y by micrometres, to the first offset with d² one float32 step below R² (t = 2⁻²⁴)
    y = node + np.arange(2000, dtype=np.float32) * f(1e-6)
    dy = (y - node).astype(np.float32)
    d2 = f(x - node) * f(x - node) + dy * dy
    t = np.where(d2 < R2, f(1) - d2 / R2, np.inf)
    y = y[np.argmin(t)]
    assert t.min() == f(2.0 ** -24)
    pos = np.array([[x, y, node], [0.05, 0.05, 0.05]], np.float32)  # and one far from the node
    bricks, legacy, bad, _ = host_level_sets(harness, pos, f(r), spec, R, 3 * h, 0)
    reference = particle_level_set(pos, spec, f(r), R, xp=np, smooth_iterations=0, interior=False)  # as the harness
    assert bad == 0 and reference[4, 4, 4] == pytest.approx(R - r, abs=1e-6)  # one particle: |x − x_p| − r
    np.testing.assert_array_equal(bricks, legacy)
    np.testing.assert_allclose(bricks, reference, rtol=0, atol=2e-5 * R)


# the kernels' d2 of the offsets (dx, dy, dz), each square rounded, then added ...
_D2 = "float d2 = (dx * dx + dy * dy) + dz * dz;"
# ... and a mutant's: the compiler's own contraction (--fmad=true) of the same line
_D2_FUSED = "float d2 = fmaf(dz, dz, fmaf(dy, dy, dx * dx));"


def _d2_straddling_r2(h, R):
    """A particle (3,) float32 whose offsets from the node at (4.5h, 4.5h, 4.5h) give d2 ≥ R²
    as the kernels and NumPy add them — (dx² + dy²) + dz², every step rounded — and d2 < R²
    as _D2_FUSED adds them: the first of points within a few ulps of the sphere (a fixed
    seed) in directions whose components are of one size (their squares within four
    binades: the fused sums are exact in float64, one rounding to float32 as fmaf's)."""
    f = np.float32
    node = f(4.5) * f(h)
    R2 = f(R) * f(R)
    rng = np.random.default_rng(18)
    u = rng.uniform(0.4, 0.7, (200_000, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    p = (node + (R * (1.0 + rng.uniform(-2e-7, 2e-7, (len(u), 1)))) * u).astype(f)
    d = (p - node).astype(f)  # as the kernels and NumPy round them
    plain = (d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2]
    e = d.astype(np.float64)
    inner = (e[:, 1] * e[:, 1] + (d[:, 0] * d[:, 0]).astype(np.float64)).astype(f)
    fused = (e[:, 2] * e[:, 2] + inner.astype(np.float64)).astype(f)
    straddle = np.flatnonzero((plain >= R2) & (fused < R2))
    assert straddle.size, "no straddling offset in the scan"
    return p[straddle[0]]


def _straddling_scene():
    """(pos, spec, r, R, band, NumPy's φ) with _d2_straddling_r2's particle beside node (4, 4, 4)."""
    f = np.float32
    h, r = 0.1, 0.03
    R = 4 * r
    spec = GridSpec((0.0, 0.0, 0.0), h, (9, 9, 9))
    particle = _d2_straddling_r2(h, R)
    pos = np.array([particle, [0.05, 0.05, 0.05]], np.float32)  # and one far from the node
    reference = particle_level_set(pos, spec, f(r), R, xp=np, smooth_iterations=0, interior=False)
    assert reference[4, 4, 4] == f(3 * h)  # NumPy: d2 ≥ R², no particle within R: +band
    return pos, spec, f(r), R, f(3 * h), reference


def test_sums_include_what_numpy_includes_at_d2_next_to_r2(harness):
    """The node sums in either VOXFX_LEVEL_SET_SUMS mode (fmaf there leaves the offsets, d2
    and d2 < R² alone) include exactly the particles NumPy includes, on the particle whose
    d2 a fused sum of squares would put inside R (test below)."""
    pos, spec, r, R, band, reference = _straddling_scene()
    bricks, legacy, bad, _ = host_level_sets(harness, pos, r, spec, R, band, 0)  # lean's bits checked there
    assert bad == 0 and bricks[4, 4, 4] == band
    np.testing.assert_array_equal(bricks, legacy)
    np.testing.assert_array_equal(bricks == band, reference == band)
    np.testing.assert_allclose(bricks, reference, rtol=0, atol=2e-5 * R)


def test_a_fused_d2_would_include_a_particle_numpy_leaves_out(tmp_path_factory):
    """The test above can fail: a mutant of the fused build whose d2 is fused too (as
    --fmad=true would contract it, in every way's gather) takes the particle NumPy leaves
    out — node (4, 4, 4) reads ~R − r, not +band."""
    source = HARNESS
    for name in ("flip_surface.cu", "flip_surface_lean.cu"):
        text = (backend.CUDA_DIR / name).read_text()
        assert text.count(_D2) == 1
        source = source.replace(f'#include "{name}"', text.replace(_D2, _D2_FUSED))
    mutant = _harness(tmp_path_factory, "fused", source, "surface-mutant")
    pos, spec, r, R, band, reference = _straddling_scene()
    got, legacy, _, _ = host_level_sets(mutant, pos, r, spec, R, band, 0)
    np.testing.assert_array_equal(got, legacy)  # every way mutated alike
    assert abs(got[4, 4, 4] - (R - r)) < 1e-4 * R  # the particle taken: |x − x_p| − r
    assert not np.array_equal(got == band, reference == band)  # what the test above asserts


def test_fused_sums_move_phi_by_float32_rounding_only(tmp_path_factory):
    """The two VOXFX_LEVEL_SET_SUMS builds on one closed scene (a fixed seed): the same
    particles a node (the same +band and interior nodes), φ differing in the sums' last bits
    at some nodes — the switch switches — and by far less than the CPU tolerance (2e-5·R)."""
    rng = np.random.default_rng(7)
    h = 0.04
    spec, pos = liquid_in_a_box(rng, h)
    r, R = surface_radii(h, 8)
    grown = surface_grid(spec)
    phis = [host_level_sets(_harness(tmp_path_factory, sums), pos, np.float32(r), grown, R, 3.0 * h, 0,
                            walls=spec)[0] for sums in ("plain", "fused")]
    plain, fused = phis
    band = np.float32(3.0 * h)
    np.testing.assert_array_equal(np.abs(plain) == band, np.abs(fused) == band)
    assert (plain != fused).sum() > 100
    assert np.abs(plain - fused).max() < 2e-6 * R


@pytest.mark.parametrize("seed", [0, 1])
def test_lean_quotient_step_rounds_as_division_over_whole_binades(harness, seed):
    """The lean gather's d2 / R2 in three operations (flip_surface_lean.cu: y from 1/R2 rounded on
    the host) equals the division in every bit for every d2 mantissa in a binade below R2
    and one far below it (the quotient's bits repeat binade to binade), at random R2 of the
    sizes a level set uses; the GPU test checks the device's y (rcp.approx)."""
    rng = np.random.default_rng(seed)
    for R2 in np.float32(2.0) ** rng.uniform(-40, 20, 2).astype(np.float32) * rng.uniform(1, 2, 2).astype(np.float32):
        e = int(np.frexp(R2)[1]) - 1  # R2 = m·2^e with m in [1, 2)
        for below in (1, 30):
            out = harness(f"1 {float(R2).hex()} {e - below} 0 {1 << 23}")
            assert out == ["0"], (R2, below)


def test_particle_bounds_are_nanmin_and_nanmax_per_axis(harness):
    """The lean region's bounds (flip_surface_lean.cu particle_bounds, surface_gpu.bounds_from_keys):
    per axis the least and greatest coordinate with NaN skipped, negative and −0 included,
    as nanmin / nanmax; an axis of NaN alone reads NaN."""
    rng = np.random.default_rng()
    pos = rng.uniform(-5, 5, (300, 3)).astype(np.float32)
    pos[rng.integers(0, 300, 20), rng.integers(0, 3, 20)] = np.nan
    pos[7] = [-0.0, 1e-30, -np.inf]
    out = harness(f"2 {len(pos)}\n{_hex(pos)}")
    got = surface_gpu.bounds_from_keys([int(x) for x in out])
    want = np.stack([np.nanmin(pos, axis=0), np.nanmax(pos, axis=0)])
    np.testing.assert_array_equal(got, want)
    only_nan = np.full((4, 3), np.nan, np.float32)
    only_nan[:, 0] = [1.0, -2.0, 3.0, np.nan]
    got = surface_gpu.bounds_from_keys([int(x) for x in harness(f"2 4\n{_hex(only_nan)}")])
    assert got[:, 0].tolist() == [-2.0, 3.0] and np.isnan(got[:, 1:]).all()
