"""The narrow band's kernels (cuda/flip_sparse_band.cu) give NarrowBand's array code's results
bit for bit, checked on the host without a GPU (tests/cuda_host.py: nvcc builds the kernels as
host functions, no FMA contraction as --fmad=false): the deep faces' carried velocity and the
masks and cell types it leaves, the level set's trace of cells along the grid velocity, φ and
the grid velocity sampled at points, and the depths' erosion, on a NumPy narrow-band dam break's
state (closed and open) with fresh random inputs. The device comparison is
tests/gpu/test_flip_sparse_band_kernels_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.meshes import box
from tests.unit.test_cuda_exact import _build
from voxfx.kernels.flip import sparse_band, sparse_band_frame
from voxfx.kernels.grid import launch, mac
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

# Input: closed nx ny nz; nk cap, keys, slots; per pool cell u v w, carried u v w (%a), valid u v
# w, cell (int); dt_h (%a); D, deep rows; L, lattice rows, φ (%a); box lo (3) span (3); M, cells
# to trace; K N, liquid frame keys (sorted) and the band's depth; P, points (%a).
# Output: after the carry u v w (%a), its valid masks and cell types (int); the traced φ (%a);
# φ and the grid velocity at the points (%a); the depths (int).
BAND_STUBS = STUBS + r"""
template <typename T> T plain_min(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
#define atomicMin plain_min
"""
# HARNESS's and UPDATE's kernels and helpers, and their main()'s start: the grid (closed nx ny
# nz) and the bricks.
BAND_GRID = BAND_STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_band.cu"
""" + DRIVER + r"""
static std::vector<ll> rows(ll n) { std::vector<ll> a(3 * n); for (auto& x : a) scanf("%lld", &x); return a; }
static void prows(const std::vector<ll>& a) { printf("%lld\n", (ll)a.size() / 3); for (ll x : a) printf("%lld\n", x); }
int main() {
    int closed, nx, ny, nz;
    if (scanf("%d %d %d %d", &closed, &nx, &ny, &nz) != 4) return 1;
    ll nk, cap;
    std::vector<ll> keys;
    std::vector<int> slots;
    read_bricks(nk, cap, keys, slots);
"""
HARNESS = BAND_GRID + r"""
    const ll cells = cap * 512;
    std::vector<float> f[6];
    for (auto& a : f) { a.resize(cells); for (auto& x : a) x = rf(); }
    std::vector<u8> valid[3], cell(cells);
    for (auto& a : valid) { a.resize(cells); for (auto& x : a) { int t; scanf("%d", &t); x = (u8)t; } }
    for (auto& x : cell) { int t; scanf("%d", &t); x = (u8)t; }
    const float dt_h = rf();
    ll d; scanf("%lld", &d);
    std::vector<ll> deep = rows(d);
    ll l; scanf("%lld", &l);
    std::vector<ll> lattice = rows(l);
    std::vector<float> phi(l);
    for (auto& x : phi) x = rf();
    ll lo[3], span[3];
    for (auto& x : lo) scanf("%lld", &x);
    for (auto& x : span) scanf("%lld", &x);
    ll m; scanf("%lld", &m);
    std::vector<ll> traced = rows(m);
    ll nk2; int depth_n; scanf("%lld %d", &nk2, &depth_n);
    std::vector<ll> lkeys(nk2);
    for (auto& x : lkeys) scanf("%lld", &x);
    ll p; scanf("%lld", &p);
    std::vector<float> pts(3 * p);
    for (auto& x : pts) x = rf();
    // the grid's tables, and a closed domain's brick index (sparse_gpu.brick_index: lo −1, n/8 + 2)
    std::vector<int> coords(3 * cap, 0), nbr27(27 * cap, -1);
    LAUNCH(27 * nk, brick_tables(keys.data(), slots.data(), nk, coords.data(), nbr27.data()));
    const int dims[3] = {closed ? (nx >> 3) + 2 : 0, closed ? (ny >> 3) + 2 : 0, closed ? (nz >> 3) + 2 : 0};
    std::vector<int> index(std::max(1, dims[0] * dims[1] * dims[2]), -1);
    for (ll q = 0; q < nk && closed; ++q) {
        const ll mask = (1LL << 21) - 1, b[3] = {(keys[q] & mask) - 1048576, ((keys[q] >> 21) & mask) - 1048576,
                                                   (keys[q] >> 42) - 1048576};
        const ll x = b[0] + 1, y = b[1] + 1, z = b[2] + 1;
        if (x >= 0 && x < dims[0] && y >= 0 && y < dims[1] && z >= 0 && z < dims[2])
            index[(z * dims[1] + y) * dims[0] + x] = slots[q];
    }
#define GRID keys.data(), slots.data(), nk, nbr27.data(), index.data(), -1, -1, -1, dims[0], dims[1], dims[2], \
    closed, nx, ny, nz
    std::vector<u8> out[3] = {valid[0], valid[1], valid[2]};
    LAUNCH(6 * d, band_carry(deep.data(), d, f[3].data(), f[4].data(), f[5].data(), GRID, dt_h, valid[0].data(),
                             valid[1].data(), valid[2].data(), f[0].data(), f[1].data(), f[2].data(), out[0].data(),
                             out[1].data(), out[2].data()));
    LAUNCH(d, band_deep_fluid(deep.data(), d, GRID, (unsigned char)SOLID, (unsigned char)FLUID, cell.data()));
    for (int a = 0; a < 3; ++a) pf(f[a]);
    for (auto& a : out) pr(a);
    pr(cell);
    std::vector<float> map(span[0] * span[1] * span[2], BAND_FAR), advected(m), at_pts(p), vel(3 * p);
    LAUNCH(l, band_scatter_phi(lattice.data(), phi.data(), l, lo[0], lo[1], lo[2], span[0], span[1], span[2],
                               map.data()));
    LAUNCH(m, band_trace(traced.data(), m, f[0].data(), f[1].data(), f[2].data(), GRID, dt_h, map.data(), lo[0],
                         lo[1], lo[2], span[0], span[1], span[2], advected.data()));
    pf(advected);
    LAUNCH(p, band_sample_points(pts.data(), p, map.data(), lo[0], lo[1], lo[2], span[0], span[1], span[2], closed,
                                 nx, ny, nz, at_pts.data()));
    pf(at_pts);
    LAUNCH(p, band_sample_faces(pts.data(), p, f[0].data(), f[1].data(), f[2].data(), GRID, vel.data()));
    pf(vel);
    std::vector<signed char> depth_map(span[0] * span[1] * span[2], -1);
    for (ll k : lkeys) depth_map[k] = 0;
    std::vector<ll> depth(nk2, 0);
    for (int k = 1; k <= depth_n; ++k)
        LAUNCH(nk2, band_erode(lkeys.data(), nk2, k, depth_map.data(), lo[0], lo[1], lo[2], span[0], span[1],
                               span[2], closed, nx, ny, nz, depth.data()));
    pr(depth);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return _build(tmp_path_factory, HARNESS, defines=launch.define_options(mac.CELL_TYPES), name="band")


def _a(values):
    return [float(x).hex() for x in np.asarray(values, np.float32).ravel()]


def _ints(values):
    return [str(int(x)) for x in np.asarray(values).ravel()]


def _band_state(closed: bool):
    """A NumPy narrow-band run a few frames on (a dam break, or a block leaving an open box)."""
    if closed:
        h = 0.05
        spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
        sim = FlipSimulation(spec, FlipSettings(narrow_band=3, seed=2), *box((0.0, 0.0, 0.0), (0.4, 0.5, 0.6)),
                             xp=np, sparse=True)
    else:
        spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
        sim = FlipSimulation(spec, FlipSettings(narrow_band=2, seed=3, boundary="open"),
                             *box((0.0, 0.0, 0.2), (0.8, 0.8, 0.8)), xp=np, sparse=True)
    for _ in range(4):
        sim.step(1 / 24)
    return sim


@pytest.mark.parametrize("closed", [True, False])
def test_the_band_kernels_give_the_array_codes_results_on_the_host(harness, closed):
    rng = np.random.default_rng()
    sim = _band_state(closed)
    band, g = sim.band, sim.grid
    assert len(band.deep) and len(band.lattice)
    dt = 1 / 96
    size = g.size
    carried = tuple((f + rng.normal(0, 0.2, size) * (f != 0)).astype(np.float32) for f in g.faces())
    g.valid = tuple((rng.random(size) < 0.5).astype(np.uint8) for _ in range(3))
    inputs = [tuple(f.copy() for f in g.faces()), carried, tuple(v.copy() for v in g.valid), g["cell"].copy()]
    frame = sparse_band_frame._Frame.around([band.lattice], None, 3, np)
    traced = np.concatenate([band.lattice, rng.integers(frame.lo, frame.lo + frame.span, size=(500, 3))])
    liquid = band.lattice[band.phi < 0]
    order = np.argsort(frame.key(liquid))
    liquid, lkeys = liquid[order], frame.key(liquid)[order]
    points = rng.uniform(frame.lo - 2, frame.lo + frame.span + 2, size=(3000, 3)).astype(np.float32)
    # the references, NarrowBand's array code: the carry first (it writes the faces the rest reads)
    band.carry(g, carried, dt)
    x = [traced[:, a].astype(np.float32) + np.float32(0.5) for a in range(3)]
    boxes = g.boxes if g.closed else None
    u = g.sample_faces(g.faces(), *x, boxes=boxes)
    advected = band.sample(sim, np.stack([x[a] - u[a] * np.float32(dt / g.h) for a in range(3)], axis=1))
    at_points = band.sample(sim, points)
    velocity = np.stack(g.sample_faces(g.faces(), *(points[:, a] for a in range(3)), boxes=boxes), axis=1)
    depth = band._depths(sim, liquid, lkeys, frame)
    lines = [f"{int(closed)} {' '.join(str(n) for n in g.shape)}", f"{g.topology.count} {g.capacity}",
             " ".join(_ints(g.topology.keys)), " ".join(_ints(g.topology.slots))]
    lines += [" ".join(_a(f)) for f in (*inputs[0], *inputs[1])]
    lines += [" ".join(_ints(v)) for v in (*inputs[2], inputs[3])]
    lines += [float(np.float32(dt / g.h)).hex(), str(len(band.deep)), " ".join(_ints(band.deep)),
              str(len(band.lattice)), " ".join(_ints(band.lattice)), " ".join(_a(band.phi)),
              " ".join(_ints(frame.lo)) + " " + " ".join(_ints(frame.span)), str(len(traced)),
              " ".join(_ints(traced)), f"{len(lkeys)} {band.cells}", " ".join(_ints(lkeys)), str(len(points)),
              " ".join(_a(points))]
    out = harness.raw(lines, check=True).split()
    at = 0

    def take(n, kind):
        nonlocal at
        part = out[at:at + n]
        at += n
        return np.array([float.fromhex(v) for v in part], np.float32) if kind == "f" else np.array(part, np.int64)

    for f in g.faces():  # after the carry: faces, masks, cell types
        assert np.array_equal(take(size, "f").view(np.uint32), f.view(np.uint32))
    for v in g.valid:
        assert np.array_equal(take(size, "i"), v)
    assert np.array_equal(take(size, "i"), g["cell"])
    assert not np.array_equal(g.faces()[0], inputs[0][0])  # the carry wrote faces
    assert np.array_equal(take(len(traced), "f").view(np.uint32), advected.view(np.uint32))
    assert np.array_equal(take(len(points), "f").view(np.uint32), at_points.view(np.uint32))
    assert np.array_equal(take(3 * len(points), "f").reshape(-1, 3).view(np.uint32), velocity.view(np.uint32))
    got = take(len(lkeys), "i")
    assert np.array_equal(got, depth) and got.max() >= 1
    assert at == len(out)


# The whole kernel update after its frame (kernels/flip/sparse_band_gpu.py update, the map
# compactions as loops in key order). Input: closed nx ny nz; nk cap, keys, slots; per pool
# cell u v w (%a); dt_h (%a); box lo (3) span (3); dilation radius, band cells N, particles per
# cell; L, lattice rows, φ (%a); D, deep rows; n, positions (%a), origin (3) and h (%a).
# Output: the new lattice (count, rows) and φ (%a); the deep cells (count, rows); each
# particle's keep flag; the refill's cells (count, rows) and their wanted particles (%a).
UPDATE = BAND_GRID + r"""
    std::vector<float> f[3];
    for (auto& a : f) { a.resize(cap * 512); for (auto& x : a) x = rf(); }
    const float dt_h = rf();
    ll lo[3], span[3];
    for (auto& x : lo) scanf("%lld", &x);
    for (auto& x : span) scanf("%lld", &x);
    int radius, cells_n; double ppc;
    scanf("%d %d %lf", &radius, &cells_n, &ppc);
    ll l; scanf("%lld", &l);
    std::vector<ll> lattice = rows(l);
    std::vector<float> phi(l);
    for (auto& x : phi) x = rf();
    ll d; scanf("%lld", &d);
    std::vector<ll> deep = rows(d);
    ll n; scanf("%lld", &n);
    std::vector<float> pos(3 * n);
    for (auto& x : pos) x = rf();
    const float ox = rf(), oy = rf(), oz = rf(), h = rf();
    std::vector<int> coords(3 * cap, 0), nbr27(27 * cap, -1), index(1, -1);
    LAUNCH(27 * nk, brick_tables(keys.data(), slots.data(), nk, coords.data(), nbr27.data()));
#define BOX lo[0], lo[1], lo[2], span[0], span[1], span[2]
#define WALLS closed, nx, ny, nz
    const ll size = span[0] * span[1] * span[2];
    std::vector<u8> flags(size, 0), other(size);
    std::vector<ll> pkeys(n);
    LAUNCH(l, band_mark_rows(lattice.data(), l, BOX, BAND_CAND, flags.data()));
    LAUNCH(d, band_mark_rows(deep.data(), d, BOX, BAND_WAS_DEEP, flags.data()));
    LAUNCH(n, band_mark_particles(pos.data(), n, ox, oy, oz, h, BOX, flags.data(), pkeys.data()));
    if (radius)
        for (int axis = 0; axis < 3; ++axis) {
            LAUNCH(size, band_dilate(flags.data(), size, axis, radius, BOX, other.data()));
            std::swap(flags, other);
        }
    auto cell_of = [&](ll t, ll* c) { c[0] = t % span[0] + lo[0]; c[1] = (t / span[0]) % span[1] + lo[1];
                                      c[2] = t / (span[0] * span[1]) + lo[2]; };
    std::vector<ll> cand, cand_keys;
    for (ll t = 0; t < size; ++t) {
        ll c[3];
        cell_of(t, c);
        if ((flags[t] & BAND_CAND) && !band_solid(WALLS, c[0], c[1], c[2])) {
            cand.insert(cand.end(), c, c + 3);
            cand_keys.push_back(t);
        }
    }
    const ll m = cand_keys.size();
    std::vector<float> map(size, BAND_FAR), advected(m);
    LAUNCH(l, band_scatter_phi(lattice.data(), phi.data(), l, BOX, map.data()));
    LAUNCH(m, band_trace(cand.data(), m, f[0].data(), f[1].data(), f[2].data(), keys.data(), slots.data(), nk,
                         nbr27.data(), index.data(), 0, 0, 0, 0, 0, 0, WALLS, dt_h, map.data(), BOX,
                         advected.data()));
    std::vector<ll> liquid, lkeys;
    std::vector<u8> was;
    for (ll q = 0; q < m; ++q)
        if ((flags[cand_keys[q]] & BAND_TAKEN) || advected[q] + 1.0f < 0) {
            liquid.insert(liquid.end(), cand.begin() + 3 * q, cand.begin() + 3 * q + 3);
            lkeys.push_back(cand_keys[q]);
            was.push_back((flags[cand_keys[q]] & BAND_WAS_DEEP) != 0);
        }
    const ll k = lkeys.size();
    std::vector<signed char> depth_map(size, -1);
    for (ll key : lkeys) depth_map[key] = 0;
    std::vector<ll> depth(k, 0);
    for (int level = 1; level <= cells_n; ++level)
        LAUNCH(k, band_erode(lkeys.data(), k, level, depth_map.data(), BOX, WALLS, depth.data()));
    std::vector<u8> ring_map(size, 0);
    std::vector<ll> out = liquid;
    std::vector<float> out_phi;
    for (ll q = 0; q < k; ++q) out_phi.push_back(-((float)depth[q] + 0.5f));
    for (int ring = 1; ring <= 2; ++ring) {
        LAUNCH(size, band_rings(depth_map.data(), size, ring, BOX, WALLS, ring_map.data()));
        for (ll t = 0; t < size; ++t)
            if (ring_map[t] == ring) {
                ll c[3];
                cell_of(t, c);
                out.insert(out.end(), c, c + 3);
                out_phi.push_back((float)ring - 0.5f);
            }
    }
    prows(out);
    pf(out_phi);
    std::vector<ll> new_deep, refill;
    std::vector<double> want;
    std::vector<int> count(size, 0);
    std::vector<u8> keep(n);
    LAUNCH(n, band_particles(pkeys.data(), n, depth_map.data(), cells_n, keep.data(), count.data()));
    for (ll q = 0; q < k; ++q) {
        if (depth[q] >= cells_n) new_deep.insert(new_deep.end(), liquid.begin() + 3 * q, liquid.begin() + 3 * q + 3);
        if (depth[q] >= 1 && depth[q] < cells_n) {
            const double have = count[lkeys[q]];
            const double w = (was[q] || have == 0) ? std::max(ppc - have, 0.0) : 0.0;
            if (w > 0) {
                refill.insert(refill.end(), liquid.begin() + 3 * q, liquid.begin() + 3 * q + 3);
                want.push_back(w);
            }
        }
    }
    prows(new_deep);
    pr(keep);
    prows(refill);
    for (double w : want) printf("%a\n", w);
    return 0;
}
"""


@pytest.fixture(scope="module")
def update_harness(tmp_path_factory):
    return _build(tmp_path_factory, UPDATE, defines=launch.define_options(mac.CELL_TYPES), name="band_update")


@pytest.mark.parametrize("closed, dt", [(True, 1 / 96), (True, 0.12), (False, 1 / 48), (False, 0.2)])
def test_the_kernel_update_gives_the_array_updates_level_set_deep_cells_and_particles(update_harness, closed, dt):
    sim = _band_state(closed)
    band, g = sim.band, sim.grid
    reach, frame = band._reach_and_frame(sim, dt)
    inputs = (band.lattice.copy(), band.phi.copy(), band.deep.copy(), sim.pos.copy())
    lines = [f"{int(closed)} {' '.join(str(n) for n in g.shape)}", f"{g.topology.count} {g.capacity}",
             " ".join(_ints(g.topology.keys)), " ".join(_ints(g.topology.slots))]
    lines += [" ".join(_a(f)) for f in g.faces()]
    lines += [float(np.float32(dt / g.h)).hex(), " ".join(_ints(frame.lo)) + " " + " ".join(_ints(frame.span)),
              f"{max(0, reach - sparse_band.RINGS)} {band.cells} {float(sim.settings.particles_per_cell)!r}",
              str(len(inputs[0])), " ".join(_ints(inputs[0])), " ".join(_a(inputs[1])), str(len(inputs[2])),
              " ".join(_ints(inputs[2])), str(len(inputs[3])), " ".join(_a(inputs[3])),
              " ".join(_a(sim.spec.origin)), _a([sim.spec.voxel_size])[0]]
    out = update_harness.raw(lines, check=True).split()
    # the reference: the array update, its keep and refill recorded (no particles seeded)
    kept, refills = [], []
    keep_particles = sim._keep
    sim._keep = lambda keep: (kept.append(keep.copy()), keep_particles(keep))
    band._resample = lambda s, cells, want: refills.append((cells.copy(), want.copy()))
    band.update(sim, dt)
    at = 0

    def take(n, kind):
        nonlocal at
        part = out[at:at + n]
        at += n
        if kind == "f":
            return np.array([float.fromhex(v) for v in part], np.float32 if kind == "f" else np.float64)
        return np.array([float.fromhex(v) for v in part]) if kind == "d" else np.array(part, np.int64)

    def take_rows():
        return take(3 * int(take(1, "i")[0]), "i").reshape(-1, 3)

    assert np.array_equal(take_rows(), band.lattice)
    assert np.array_equal(take(len(band.lattice), "f").view(np.uint32), band.phi.view(np.uint32))
    assert np.array_equal(take_rows(), band.deep)
    keep = take(len(inputs[3]), "i").astype(bool)
    assert np.array_equal(keep, kept[0] if kept else np.ones(len(keep), bool))
    cells, want = take_rows(), None
    want = take(len(cells), "d")
    assert len(refills) == (1 if len(cells) else 0)
    if refills:
        assert np.array_equal(cells, refills[0][0]) and np.array_equal(want, refills[0][1])
    assert at == len(out)
    assert len(band.deep) and len(band.lattice) > len(band.deep)


# band_bounds and band_deep_bricks (VOXFX_SPARSE_BAND_REDUCE=kernels). Input: closed nx ny nz
# margin; m, rows; n, positions (%a), origin (3) and h (%a); brick box low (3) and span (3).
# Output: the rows' corners (6), the particles' cells' corners (6), the marked bricks' keys.
BOUNDS = BAND_STUBS + r"""
#include "flip_sparse_band.cu"
""" + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, margin;
    if (scanf("%d %d %d %d %d", &closed, &nx, &ny, &nz, &margin) != 5) return 1;
    ll m; scanf("%lld", &m);
    std::vector<ll> rows(3 * m);
    for (auto& x : rows) scanf("%lld", &x);
    ll n; scanf("%lld", &n);
    std::vector<float> pos(3 * n);
    for (auto& x : pos) x = rf();
    const float ox = rf(), oy = rf(), oz = rf(), h = rf();
    ll blo[3], bspan[3];
    for (auto& x : blo) scanf("%lld", &x);
    for (auto& x : bspan) scanf("%lld", &x);
    for (int use = 1; use >= 0; --use) {
        std::vector<ll> out = {BAND_LL_MAX, BAND_LL_MAX, BAND_LL_MAX, BAND_LL_MIN, BAND_LL_MIN, BAND_LL_MIN};
        LAUNCH(1, band_bounds(rows.data(), pos.data(), use ? m : n, use, ox, oy, oz, h, out.data()));
        for (ll x : out) printf("%lld\n", x);
    }
    std::vector<u8> map(bspan[0] * bspan[1] * bspan[2], 0);
    LAUNCH(m, band_deep_bricks(rows.data(), m, margin, closed, nx, ny, nz, blo[0], blo[1], blo[2], bspan[0],
                               bspan[1], bspan[2], map.data()));
    for (ll t = 0; t < (ll)map.size(); ++t)
        if (map[t]) {
            const ll x = t % bspan[0] + blo[0], y = (t / bspan[0]) % bspan[1] + blo[1],
                     z = t / (bspan[0] * bspan[1]) + blo[2];
            printf("%lld\n", ((z + 1048576) << 42) | ((y + 1048576) << 21) | (x + 1048576));
        }
    return 0;
}
"""


@pytest.fixture(scope="module")
def bounds_harness(tmp_path_factory):
    return _build(tmp_path_factory, BOUNDS, defines=(), name="band_bounds")


@pytest.mark.parametrize("closed", [True, False])
def test_the_bounds_and_deep_brick_kernels_give_the_array_codes_corners_and_bricks(bounds_harness, closed):
    from voxfx.kernels.flip.sparse_grid import SparseFlipGrid

    sim = _band_state(closed)
    band, g = sim.band, sim.grid
    deep = band.deep
    assert len(deep)
    for margin in (3, 6, 9, 21):
        lo, hi = deep.min(axis=0), deep.max(axis=0)
        if closed:
            top = np.asarray(g.shape) - 1
            lo, hi = np.clip(lo, 0, top), np.clip(hi, 0, top)
        blo, bhi = (lo - margin) >> 3, (hi + margin) >> 3
        lines = [f"{int(closed)} {' '.join(str(n) for n in g.shape)} {margin}", str(len(deep)), " ".join(_ints(deep)),
                 str(len(sim.pos)), " ".join(_a(sim.pos)), " ".join(_a(sim.spec.origin)), _a([sim.spec.voxel_size])[0],
                 " ".join(_ints(blo)) + " " + " ".join(_ints(bhi - blo + 1))]
        out = np.array(bounds_harness.raw(lines, check=True).split(), np.int64)
        assert np.array_equal(out[:6], np.concatenate([deep.min(axis=0), deep.max(axis=0)]))
        assert np.array_equal(out[6:12], np.concatenate(sparse_band_frame._particle_cell_bounds(sim)))
        expected = SparseFlipGrid(sim.spec, np, closed=closed).topology_keys(sim.pos[:0], margin, deep)
        assert np.array_equal(out[12:], expected)
