"""The level set's binning ways (kernels/flip/surface_place.py, cuda/flip_surface_place.cu;
``VOXFX_LEVEL_SET_PLACE``) checked on the host without a GPU: nvcc builds the kernels as host
functions (one "thread" a call, a warp of one lane: warp_grouped_rank a plain read and
write, the warp's combo word the lane's own) and a C++ driver runs them as surface_gpu does —
"lean" (surface_count_lean, surface_place_lean, surface_order_cells_lean: the reference), then
"tags" and "tags-plain" with their place's threads in a shuffled order (the device's atomics
give any order within a cell) and a crowded-cell limit, the cells over it sorted by tag as
surface_gpu._order_crowded sorts them. The counts and the non-finite count must be lean's,
and the points of every cell in the same order with the same bits; the image combo word must
be the combos wall_image allows. Mutants of the kernel file (a combo dropped, the rank
reversed, a mirror on the wrong axis) must fail. The device comparison is
tests/gpu/test_flip_surface_place_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import STUBS
from tests.unit.test_cuda_exact import _build, kernel_defines
from tests.unit.test_cuda_surface_host import _hex, liquid_in_a_box
from voxfx.kernels import backend
from voxfx.kernels.flip import surface_gpu
from voxfx.kernels.flip.surface import surface_grid, surface_radii
from voxfx.kernels.grid import GridSpec

# Input "0": walls stride; lo (3) hi (3) reach; cox coy coz inv_edge (%a); cx cy cz; limit; n,
# pos (3n), radii (n or 1), the place's thread order (n). Output: lean's points and non-finite
# count; the grouped count's counts and bad lean's (1/0), both places' fill lean's counts (1/0);
# tags' and tags-plain's ordered lists lean's bits (1/0 each); tags' points as placed (no order)
# already lean's (1/0); the cells over the limit. Or "1": image_combos of every (mx, my, mz) in
# 0 … 3, x fastest.
HARNESS = STUBS + r"""
static float host_int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
#define __int_as_float host_int_as_float
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicMin plain_min
#include "flip_surface_lean.cu"
#include "flip_surface_place.cu"
typedef long long ll;
static void at(ll i) { h_block.x = (unsigned)i; h_dim.x = 1; h_thread.x = 0; }
#define LAUNCH(n, call) for (ll t_ = 0; t_ < (ll)(n); ++t_) { at(t_); call; }
static float rf() { float x; scanf("%a", &x); return x; }
static int ri() { int x; scanf("%d", &x); return x; }
static bool same_bits(const std::vector<float4>& a, const std::vector<float4>& b) {
    return a.size() == b.size() && (a.empty() || !std::memcmp(a.data(), b.data(), sizeof(float4) * a.size()));
}
// surface_gpu._order_crowded: each cell of more than limit points, from src's slots, in tag order into out.
static ll crowded(const std::vector<float4>& src, const std::vector<unsigned>& tags, const std::vector<int>& starts,
                  int limit, std::vector<float4>& out) {
    ll cells = 0;
    for (size_t c = 0; c + 1 < starts.size(); ++c) {
        int first = starts[c], last = starts[c + 1];
        if (last - first <= limit) continue;
        ++cells;
        std::vector<int> slots(last - first);
        std::iota(slots.begin(), slots.end(), first);
        std::stable_sort(slots.begin(), slots.end(), [&](int a, int b) { return tags[a] < tags[b]; });
        std::vector<float4> sorted;
        for (int s : slots) sorted.push_back(src[s]);
        std::copy(sorted.begin(), sorted.end(), out.begin() + first);
    }
    return cells;
}
int main() {
    if (ri() == 1) {
        for (int mz = 0; mz < 4; ++mz)
            for (int my = 0; my < 4; ++my)
                for (int mx = 0; mx < 4; ++mx) printf("%u\n", image_combos(mx, my, mz));
        return 0;
    }
    int walls = ri(), stride = ri();
    float lox = rf(), loy = rf(), loz = rf(), hix = rf(), hiy = rf(), hiz = rf(), reach = rf();
    float cox = rf(), coy = rf(), coz = rf(), inv_edge = rf();
    int cx = ri(), cy = ri(), cz = ri(), limit = ri();
    ll n; scanf("%lld", &n);
    std::vector<float> pos(3 * n), radii(stride ? n : 1);
    for (auto& x : pos) x = rf();
    for (auto& x : radii) x = rf();
    std::vector<ll> perm(n);
    for (auto& p : perm) scanf("%lld", &p);
    ll cells = (ll)cx * cy * cz;
#define WALLS walls, lox, loy, loz, hix, hiy, hiz, reach
#define CELLS cox, coy, coz, inv_edge, cx, cy, cz
    // lean, every cell ranked in place: the reference list
    std::vector<int> counts(cells + 1, 0), starts(cells + 1, 0), bad(1, 0);
    LAUNCH(n, surface_count_lean(pos.data(), n, WALLS, CELLS, counts.data(), bad.data()));
    std::partial_sum(counts.begin(), counts.end() - 1, starts.begin() + 1);
    ll points = starts[cells];
    std::vector<float4> packed(points), want(points);
    std::vector<unsigned> tags(points);
    std::vector<int> fill(cells + 1, 0);
    LAUNCH(n, surface_place_lean(pos.data(), radii.data(), stride, n, WALLS, CELLS, starts.data(), fill.data(),
                                 packed.data(), tags.data()));
    LAUNCH(points, surface_order_cells_lean(packed.data(), tags.data(), starts.data(), points, CELLS, 1 << 30,
                                            want.data()));
    // tags: the grouped count, then the tags placed in the shuffled thread order and the order with the limit
    std::vector<int> gcounts(cells + 1, 0), gbad(1, 0);
    LAUNCH(n, surface_count_grouped(pos.data(), n, WALLS, CELLS, gcounts.data(), gbad.data()));
    int counts_same = gcounts == counts && gbad[0] == bad[0];
    std::vector<unsigned> ttags(points), ptags(points);
    std::vector<float4> tordered(points), pordered(points), placed(points);
    std::fill(fill.begin(), fill.end(), 0);
    for (ll t = 0; t < n; ++t) {
        at(perm[t]);
        surface_place_tags(pos.data(), n, WALLS, CELLS, starts.data(), fill.data(), ttags.data());
    }
    int fill_same = fill == counts;
    LAUNCH(points, surface_order_tags(pos.data(), radii.data(), stride, n, lox, loy, loz, hix, hiy, hiz,
                                      ttags.data(), starts.data(), points, CELLS, limit, tordered.data()));
    std::vector<float4> at_slots(tordered);  // the crowded cells' points at their slots: sorted in place
    ll over = crowded(at_slots, ttags, starts, limit, tordered);
    // the placed points unordered (limit −1: every cell left at its slots): not yet lean's list
    LAUNCH(points, surface_order_tags(pos.data(), radii.data(), stride, n, lox, loy, loz, hix, hiy, hiz,
                                      ttags.data(), starts.data(), points, CELLS, -1, placed.data()));
    // tags-plain: lean's counts, the tags placed with one atomic an image, in the same shuffled order
    std::fill(fill.begin(), fill.end(), 0);
    for (ll t = 0; t < n; ++t) {
        at(perm[t]);
        surface_place_tags_plain(pos.data(), n, WALLS, CELLS, starts.data(), fill.data(), ptags.data());
    }
    fill_same = fill_same && fill == counts;
    LAUNCH(points, surface_order_tags(pos.data(), radii.data(), stride, n, lox, loy, loz, hix, hiy, hiz,
                                      ptags.data(), starts.data(), points, CELLS, limit, pordered.data()));
    at_slots = pordered;
    crowded(at_slots, ptags, starts, limit, pordered);
    printf("%lld %d\n%d %d\n%d %d %d\n%lld\n", points, bad[0], counts_same, fill_same, (int)same_bits(tordered, want),
           (int)same_bits(pordered, want), (int)same_bits(placed, want), over);
    return 0;
}
"""


def _build_harness(tmp_path_factory, source, name):
    build = _build(tmp_path_factory, source, kernel_defines(surface_gpu._K_LEAN), name)
    return lambda text: build.raw([text], check=True).split()


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return _build_harness(tmp_path_factory, HARNESS, "surface_place")


def _lines(pos, radii, grid, R, walls, limit, perm):
    f = np.float32
    if walls is not None:
        lo = [f(o) for o in walls.origin]
        hi = [f(o + c * walls.voxel_size) for o, c in zip(walls.origin, walls.shape)]
        reach = f(R + walls.voxel_size)
    else:
        lo = hi = [f(0)] * 3
        reach = f(0)
    (cox, coy, coz), edge, (cx, cy, cz) = surface_gpu._cell_grid(grid, R)
    return "\n".join([
        f"0 {int(walls is not None)} {int(np.ndim(radii) > 0)}", _hex(lo + hi + [reach]),
        _hex([cox, coy, coz, 1.0 / edge]), f"{cx} {cy} {cz} {limit}", str(len(pos)), _hex(pos),
        _hex(np.atleast_1d(radii)), " ".join(map(str, perm))])


def _check(run, pos, radii, grid, R, walls=None, limit=1 << 30, seed=0):
    """The harness's words for one scene (the place's threads in a shuffled order), after
    asserting every way's counts, fill and list are lean's; returns (points, bad, placed
    list already lean's, cells over the limit)."""
    perm = np.random.default_rng(seed).permutation(len(pos))
    out = run(_lines(pos, radii, grid, R, walls, limit, perm))
    points, bad, counts_same, fill_same, tags_same, plain_same, placed_same, over = (int(x) for x in out)
    assert counts_same == 1 and fill_same == 1  # the grouped count is lean's; both places fill every cell
    assert tags_same == 1 and plain_same == 1  # each cell's points in tag order: lean's list, bit for bit
    return points, bad, placed_same, over


def test_image_combos_are_the_combos_wall_image_allows(harness):
    """image_combos(mx, my, mz): bit c set exactly for the combos 1 … 26 whose choice on each
    axis is 0 or a wall that axis's choices allow (voxfx_surface.cuh's allowed)."""
    words = [int(x) for x in harness("1")]
    i = 0
    for mz in range(4):
        for my in range(4):
            for mx in range(4):
                want = 0
                for combo in range(1, 27):
                    c = (combo % 3, combo // 3 % 3, combo // 9)
                    if all(ci == 0 or (m >> (ci - 1)) & 1 for ci, m in zip(c, (mx, my, mz))):
                        want |= 1 << combo
                assert words[i] == want, (mx, my, mz)
                i += 1


@pytest.mark.parametrize("limit", [1 << 30, 2048, 40, 2])
def test_closed_box_every_way_gives_lean_counts_and_list(harness, limit):
    """Particles in a box with a ball in a corner (7 images a particle) and a pile of 1,500
    points in one corner cell: tags and tags-plain give lean's counts and, ordered (cells over
    *limit* sorted apart), lean's list; the shuffled place alone does not (the check can fail)."""
    rng = np.random.default_rng(limit % 97)
    h = float(rng.uniform(0.02, 0.06))
    spec, pos = liquid_in_a_box(rng, h)
    lo = np.asarray(spec.origin)
    pile = (lo + rng.uniform(0.05, 0.3, (1500, 3)) * h).astype(np.float32)
    pos = np.concatenate([pos, pile])
    r, R = surface_radii(h, 8)
    points, bad, placed_same, over = _check(harness, pos, np.float32(r), surface_grid(spec), R, walls=spec,
                                            limit=limit, seed=limit)
    assert bad == 0 and points > len(pos) + 1500 * 7  # the pile's 7 images a point, and the others'
    assert placed_same == 0
    assert (over > 0) == (limit < 1500)  # the pile's cell and its images' cells go over the small limits


def test_open_level_set_with_radii_non_finite_and_far_particles(harness):
    """No walls (no images), per-particle radii, particles off the cell grid and non-finite ones:
    lean's counts, non-finite count and list."""
    rng = np.random.default_rng(5)
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (30, 26, 34))
    pos = np.concatenate([rng.uniform(0.2, 0.9, (2000, 3)), rng.uniform(-1.0, 3.0, (300, 3))]).astype(np.float32)
    pos[[3, 50, 51]] = [np.nan, 0.5, 0.5], [0.5, np.inf, 0.5], [0.5, 0.5, -np.inf]
    radii = (rng.uniform(0.3, 0.7, len(pos)) * h).astype(np.float32)
    points, bad, _, _ = _check(harness, pos, radii, spec, 4 * float(radii.max()), limit=3)
    assert bad == 3 and 0 < points < len(pos)


# Mutants of flip_surface_place.cu: combo 1 (the low x wall) dropped from the combo word; the rank
# counting the larger tags; y mirrored by x's choice in surface_order_tags.
_MUTANTS = {"combo": ("return (ax * ys * zs) & ~1u;", "return (ax * ys * zs) & ~3u;"),
            "rank": ("rank += tags[u] < t ? 1 : 0;\n    out[first + rank] = q;",
                     "rank += tags[u] > t ? 1 : 0;\n    out[first + rank] = q;"),
            "mirror": ("pos[3 * p + 1], (int)((combo / 3u) % 3u)", "pos[3 * p + 1], (int)(combo % 3u)")}


@pytest.mark.parametrize("name", sorted(_MUTANTS))
def test_mutants_fail(tmp_path_factory, name):
    old, new = _MUTANTS[name]
    file = "flip_surface_place.cu"
    text = (backend.CUDA_DIR / file).read_text()
    assert text.count(old) == 1
    d = tmp_path_factory.mktemp("place_mutant")
    (d / file).write_text(text.replace(old, new))
    source = HARNESS.replace(f'#include "{file}"', f'#include "{d / file}"')
    run = _build_harness(tmp_path_factory, source, f"place_{name}")
    rng = np.random.default_rng(11)
    h = 0.04
    spec, pos = liquid_in_a_box(rng, h)
    r, R = surface_radii(h, 8)
    out = [int(x) for x in run(_lines(pos, np.float32(r), surface_grid(spec), R, spec, 1 << 30,
                                      np.random.default_rng(1).permutation(len(pos))))]
    counts_same, tags_same, plain_same = out[2], out[4], out[5]
    if name == "combo":  # the grouped count ("tags") misses the low-x images; tags-plain counts as lean
        assert counts_same == 0 and plain_same == 1
    else:  # the ordering both tag ways share
        assert counts_same == 1 and tags_same == 0 and plain_same == 0
