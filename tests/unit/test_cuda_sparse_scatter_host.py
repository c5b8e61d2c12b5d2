"""The P2G scatter (cuda/flip_sparse_scatter.cu: scatter_bounds, p2g_scatter_brick,
p2g_scatter_finish) checked on the host without a GPU: nvcc builds the kernels as host
functions (one block at a time, its one "thread" taking every item, barriers no-ops, atomics
plain adds, --fmad=false as -ffp-contract=off) and a C++ driver bins the particles as
kernels/flip/sparse_gpu.py does, then runs the brick gather and the scatter. On
test_cuda_sparse_gather_host's scenes (free slots, a brick packed with ~30 particles a
cell, in the closed box particles beyond the walls whose weights are clamped): the
scatter's valid masks are the gather's, its faces are within the stated fixed-point bound
(flip_sparse_scatter.cu's notes) of the gather's, within float32 rounding of the NumPy
reference, and the same bits when the particles come in another order (another order
within each cell) or the lanes another spread; the bounds' grid-stride loop gives the same
bounds over 1 and 7 blocks; the "order" binning (count with the bound fused, the two-launch
scan, no per-cell sort, the scatter reading the particles through the order) gives the same
bounds and integer sums, and its scan the exclusive prefix sums of the counts; the grouped count
(count_particles_grouped, one lane a "warp" here) count_particles_bounds' counts, cells, ranks
and bounds; the division with the cell types (p2g_scatter_finish_cells) the division's faces and
masks and classify_counts_sparse's types byte for byte; the division with the first ring of
extrapolation (p2g_scatter_finish_ring) the division's faces and masks through extrapolate_sparse
byte for byte. The device comparisons are
tests/gpu/test_flip_sparse_scatter_gpu.py, test_flip_sparse_grouped_count_gpu.py and
test_flip_sparse_p2g_cells_gpu.py."""


import numpy as np
import pytest

from tests.unit.test_cuda_sparse_gather_host import SCENE_AND_BRICK_GATHER, _hex, clamped, scene
from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import _build, kernel_defines
from voxfx.kernels.flip import sparse_gpu, sparse_scatter, sparse_transfer

# Input: closed nx ny nz apic spread; ox oy oz h inv_h (%a); n_keys cap, keys, slots; N,
# pos, vel (, C). Output, one value a line: the brick gather's u v w (%a) and valid u v w;
# the scatter's u v w, valid u v w, bounds[2], then acc (6·cells, as signed integers).
HARNESS = STUBS + r"""
using std::min;
using std::max;
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_gather.cu"
#include "flip_sparse_scatter.cu"
// The brick scatter split over parts (SCATTER_SPLIT: the grid's second dimension, 5 parts here)
#if SCATTER_SPLIT
#define SCATTER_PARTS 5u
#else
#define SCATTER_PARTS 1u
#endif
#define PARTS(n, call) { h_grid.y = SCATTER_PARTS; for (unsigned y_ = 0; y_ < SCATTER_PARTS; ++y_) { \
    h_block.y = y_; LAUNCH(n, call); } h_grid.y = 1; h_block.y = 0; }
""" + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, apic, spread;
    if (scanf("%d %d %d %d %d %d", &closed, &nx, &ny, &nz, &apic, &spread) != 6) return 1;
""" + SCENE_AND_BRICK_GATHER + r"""
    for (auto* a : {&u, &v, &w}) std::fill(a->begin(), a->end(), -9.0f);  // stale: the kernels write all
    for (auto* a : {&mu, &mv, &mw}) std::fill(a->begin(), a->end(), (u8)7);
    std::vector<unsigned int> bounds(2, 0u);
    std::vector<unsigned long long> acc(6 * cells, 0ull);
    LAUNCH(1, scatter_bounds(svel.data(), sc.data(), apic, n, count.data(), cells, h, bounds.data()));
    std::vector<unsigned int> strided(2, 0u);  // the grid-stride loop over 7 blocks: the same bounds
    h_grid.x = 7;
    LAUNCH(7, scatter_bounds(svel.data(), sc.data(), apic, n, count.data(), cells, h, strided.data()));
    h_grid.x = 1;
    if (strided != bounds) return 3;
    PARTS(cap, p2g_scatter_brick(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(), used.data(),
                                  coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                  bounds.data(), spread, order.data(), 0, acc.data()));
    LAUNCH(cells, p2g_scatter_finish(acc.data(), cells, bounds.data(), u.data(), v.data(), w.data(), mu.data(),
                                     mv.data(), mw.data()));
    pf(u); pf(v); pf(w); pr(mu); pr(mv); pr(mw);
    printf("%u\n%u\n", bounds[0], bounds[1]);
    for (auto x : acc) printf("%lld\n", (ll)x);
    // The division with the cell types (p2g_scatter_finish_cells, sparse_gpu.P2G_CELLS "finish")
    // on a solid of every fifth cell: p2g_scatter_finish's faces and masks and
    // classify_counts_sparse's types, byte for byte; 1 if so, then the types' AIR, FLUID, SOLID counts.
    std::vector<u8> solid(cells), types(cells, (u8)9), types2(cells, (u8)9);
    for (ll t = 0; t < cells; ++t) solid[t] = (u8)(t % 5 == 0);
    std::vector<float> cu(cells, -9.0f), cv(cells, -9.0f), cw(cells, -9.0f);
    std::vector<u8> cmu(cells, (u8)7), cmv(cells, (u8)7), cmw(cells, (u8)7);
    LAUNCH(cells, p2g_scatter_finish_cells(acc.data(), cells, bounds.data(), cu.data(), cv.data(), cw.data(),
                                           cmu.data(), cmv.data(), cmw.data(), count.data(), solid.data(),
                                           coords.data(), closed, nx, ny, nz, types.data()));
    LAUNCH(cells, classify_counts_sparse(count.data(), solid.data(), coords.data(), cells, closed, nx, ny, nz,
                                         types2.data()));
    const bool bits = !memcmp(cu.data(), u.data(), 4 * cells) && !memcmp(cv.data(), v.data(), 4 * cells) &&
                      !memcmp(cw.data(), w.data(), 4 * cells);
    printf("%d\n", (int)(bits && cmu == mu && cmv == mv && cmw == mw && types == types2));
    for (int k : {AIR, FLUID, SOLID}) printf("%d\n", (int)std::count(types.begin(), types.end(), (u8)k));
    // The "order" binning (sparse_gpu.bin_particles_order): the count with the bound fused,
    // the two-launch scan over tiles of 7 entries, place, and the scatter through the order
    // on the particles' own arrays; each particle's rank reversed within its cell (another
    // arrival order of the atomics). Prints bounds, start (cells + 1), then acc.
    std::vector<int> count2(cells + 1, 0), cell2(n), rank2(n), start2(cells + 1, -1), order2(n);
    std::vector<unsigned int> bounds2(2, 0u);
    LAUNCH(n, count_particles_bounds(pos.data(), vel.data(), c.data(), apic, n, ox, oy, oz, inv_h, h, keys.data(),
                                     slots.data(), nk, no_index.data(), 0, 0, 0, 0, 0, 0, cells, count2.data(),
                                     cell2.data(), rank2.data(), bounds2.data()));
    for (ll p = 0; p < n; ++p) rank2[p] = count2[cell2[p]] - 1 - rank2[p];
    const int tile = 7, tiles = (int)((cells + 1 + tile - 1) / tile);
    std::vector<int> sums(tiles);
    h_grid.x = tiles;
    LAUNCH(tiles, bin_scan_sums(count2.data(), (int)(cells + 1), tile, (int)cells, sums.data(), bounds2.data()));
    LAUNCH(tiles, bin_scan(count2.data(), (int)(cells + 1), tile, sums.data(), start2.data()));
    h_grid.x = 1;
    for (ll p = 0; p < n; ++p) order2[start2[cell2[p]] + rank2[p]] = (int)p;
    std::vector<unsigned long long> acc2(6 * cells, 0ull);
    PARTS(cap, p2g_scatter_brick(pos.data(), vel.data(), c.data(), apic, start2.data(), count2.data(), used.data(),
                                  coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                  bounds2.data(), spread, order2.data(), 1, acc2.data()));
    printf("%u\n%u\n", bounds2[0], bounds2[1]);
    for (auto x : start2) printf("%d\n", x);
    for (auto x : acc2) printf("%lld\n", (ll)x);
    // The grouped count (count_particles_grouped; on the host a "warp" of one lane): the
    // same counts, cells and bounds as count_particles_bounds. Prints 1 if so.
    std::vector<int> count3(cells + 1, 0), cell3(n), rank3(n);
    std::vector<unsigned int> bounds3(2, 0u);
    LAUNCH(n, count_particles_grouped(pos.data(), vel.data(), c.data(), apic, n, ox, oy, oz, inv_h, h, keys.data(),
                                      slots.data(), nk, no_index.data(), 0, 0, 0, 0, 0, 0, cells, count3.data(),
                                      cell3.data(), rank3.data(), bounds3.data()));
    std::vector<unsigned int> bounds_count(2, 0u);  // count_particles_bounds' bounds before the scan
    std::vector<int> count4(cells + 1, 0), cell4(n), rank4(n);
    LAUNCH(n, count_particles_bounds(pos.data(), vel.data(), c.data(), apic, n, ox, oy, oz, inv_h, h, keys.data(),
                                     slots.data(), nk, no_index.data(), 0, 0, 0, 0, 0, 0, cells, count4.data(),
                                     cell4.data(), rank4.data(), bounds_count.data()));
    printf("%d\n", (int)(count3 == count4 && cell3 == cell4 && rank3 == rank4 && bounds3 == bounds_count));
    // The division with the first ring of extrapolation (p2g_scatter_finish_ring): the division's
    // faces and masks (above: u v w, mu mv mw) through extrapolate_sparse, byte for byte, the
    // types p2g_scatter_finish_cells', and the ring grew faces. Prints 1 if so.
    std::vector<u8> eu(cells), ev(cells), ew(cells), wall(cells), solid_w(cells);
    LAUNCH(cells, mark_walls(used.data(), coords.data(), cells, closed, nx, ny, nz, eu.data(), ev.data(), ew.data(),
                             wall.data(), solid_w.data()));
    std::vector<float> xu(cells), xv(cells), xw(cells), ru(cells, -9.0f), rv(cells, -9.0f), rw(cells, -9.0f);
    std::vector<u8> xmu(cells), xmv(cells), xmw(cells), rmu(cells, (u8)7), rmv(cells, (u8)7), rmw(cells, (u8)7);
    std::vector<u8> types3(cells, (u8)9);
    LAUNCH(cells, extrapolate_sparse(u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data(), eu.data(),
                                     ev.data(), ew.data(), nbr27.data(), cells, xu.data(), xv.data(), xw.data(),
                                     xmu.data(), xmv.data(), xmw.data()));
    LAUNCH(cells, p2g_scatter_finish_ring(acc.data(), cells, bounds.data(), ru.data(), rv.data(), rw.data(),
                                          rmu.data(), rmv.data(), rmw.data(), count.data(), solid.data(),
                                          coords.data(), closed, nx, ny, nz, types3.data(), eu.data(), ev.data(),
                                          ew.data(), nbr27.data()));
    const bool ring_bits = !memcmp(ru.data(), xu.data(), 4 * cells) && !memcmp(rv.data(), xv.data(), 4 * cells) &&
                           !memcmp(rw.data(), xw.data(), 4 * cells);
    long long grown = 0;
    for (ll t = 0; t < cells; ++t) grown += (xmu[t] && !mu[t]) + (xmv[t] && !mv[t]) + (xmw[t] && !mw[t]);
    printf("%d\n", (int)(ring_bits && rmu == xmu && rmv == xmv && rmw == xmw && types3 == types && grown > 100));
    return 0;
}
"""


@pytest.fixture(scope="module", params=["serial", "paired", "lean", "lean flip", "lean flip split"])
def harness(tmp_path_factory, request):
    """The harness built with flip_sparse_scatter.cu's SCATTER_PAIRED = 0 and 1
    (sparse_scatter.ATOMICS), SCATTER_LEAN = 1 (sparse_scatter.KERNEL_MODES, paired), the
    lean code with SCATTER_FLIP = 1 (sparse_scatter.BANK_MODES: the half lattices' nodes in
    another slot order) and with SCATTER_SPLIT = 64 (sparse_scatter.SPLIT_MODES: a
    brick's particles over up to 5 blocks of ≥ 64 each here): the same integer sums every way."""
    lean = ["-DSCATTER_PAIRED=1", "-DSCATTER_LEAN=1"]
    build_defines = {"serial": ["-DSCATTER_PAIRED=0"], "paired": ["-DSCATTER_PAIRED=1"], "lean": lean,
                     "lean flip": lean + ["-DSCATTER_FLIP=1"],
                     "lean flip split": lean + ["-DSCATTER_FLIP=1", "-DSCATTER_SPLIT=64"]}[request.param]
    return harness_run(tmp_path_factory, request.param, build_defines)


def harness_input(grid, pos, vel, c, spread):
    """The scatter harnesses' input lines: the box, the frame, the topology, the particles (and C)."""
    t = grid.topology
    lines = [f"{int(grid.closed)} {' '.join(str(int(x)) for x in grid.shape)} {int(c is not None)} {spread}",
             _hex([*grid.origin, grid.h, 1.0 / grid.h]), f"{t.count} {grid.capacity}",
             " ".join(str(int(k)) for k in t.keys), " ".join(str(int(s)) for s in t.slots), str(len(pos)),
             _hex(pos), _hex(vel)]
    return lines + ([_hex(c)] if c is not None else [])


def harness_run(tmp_path_factory, name, build_defines):
    """The harness built with *build_defines*: ``run(grid, pos, vel, c, spread)`` (``harness``)."""
    defines = kernel_defines(sparse_gpu.KERNELS) + build_defines
    build = _build(tmp_path_factory, HARNESS, defines, f"sparse_scatter_{name.replace(' ', '_')}")

    def run(grid, pos, vel, c, spread):
        tokens = build.raw(harness_input(grid, pos, vel, c, spread), check=True).split()
        cells = grid.size

        def faces_masks(at):
            faces = [np.array([float.fromhex(x) for x in tokens[at + k * cells:at + (k + 1) * cells]], np.float32)
                     for k in range(3)]
            masks = [np.array(tokens[at + (3 + k) * cells:at + (4 + k) * cells], np.int64) for k in range(3)]
            return faces, masks

        gather = faces_masks(0)
        scatter = faces_masks(6 * cells)
        bounds = np.array(tokens[12 * cells:12 * cells + 2], np.int64)
        at = 12 * cells + 2
        acc = np.array(tokens[at:at + 6 * cells], np.int64)
        at += 6 * cells
        run.finish_cells_same = tokens[at] == "1"
        run.cell_types = [int(x) for x in tokens[at + 1:at + 4]]  # AIR, FLUID, SOLID cells
        at += 4
        # the "order" binning: its bounds, start and sums
        bounds2 = np.array(tokens[at:at + 2], np.int64)
        start2 = np.array(tokens[at + 2:at + 3 + cells], np.int64)
        at += 3 + cells
        acc2 = np.array(tokens[at:at + 6 * cells], np.int64)
        assert at + 6 * cells + 2 == len(tokens)
        run.order_binning = (bounds2, start2, acc2.reshape(3, cells, 2))
        run.grouped_count_same = tokens[-2] == "1"
        run.finish_ring_same = tokens[-1] == "1"
        return gather, scatter, bounds, acc.reshape(3, cells, 2)

    run.build = name
    return run


_SUMS: dict = {}  # (closed, apic) → {build: the scatter's integer sums}, for the builds' comparison


def fixed_point_bound(values, acc, bounds):
    """Per face, the scatter's stated bound against the exact sums of the same float32
    terms: (R·2^-(k_q+1) + |v|·R·2^-k_w) / Σw, R = 18 · (max particles a cell)."""
    k_q, k_w = sparse_scatter.scales(bounds)
    reach = 18 * int(bounds[1])
    weight = acc[:, 1].astype(np.float64) * 2.0 ** -k_w
    with np.errstate(divide="ignore", invalid="ignore"):
        return (reach * 2.0 ** -(k_q + 1) + np.abs(values) * reach * 2.0 ** -k_w) / weight


def check_scatter_against_gather(gather, scatter, acc, bounds):
    for comp, (g, gm, s, sm) in enumerate(zip(*gather, *scatter)):
        assert np.array_equal(sm, gm)
        ok = gm > 0
        assert np.array_equal(ok, acc[comp, :, 1] > 0)
        assert np.all(s[~ok] == 0)
        bound = fixed_point_bound(g.astype(np.float64), acc[comp], bounds)
        diff = np.abs(s.astype(np.float64) - g)
        # the bound, plus float32 rounding of the two (different) float64 quotients
        assert np.all(diff[ok] <= bound[ok] + 2 * np.spacing(np.abs(g[ok]))), comp


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_scatter_matches_the_gather_within_its_bound_and_is_order_independent(harness, closed, apic):
    spec, grid, pos, vel, c = scene(closed, apic, 11 + 2 * closed + apic)
    assert grid.topology.free.shape[0] > 0  # free slots take part
    assert (clamped(grid, pos) > 50) == closed
    gather, scatter, bounds, acc = harness(grid, pos, vel, c, 8)
    # the bounds: the max particles a cell (the packed brick's ~30) and Q ≥ every |v_a|
    cell = np.floor((pos - np.asarray(grid.origin, np.float32)) / np.float32(grid.h)).astype(np.int64)
    flat = grid.locate(*cell.T)
    assert int(bounds[1]) == np.bincount(flat[flat >= 0]).max() > 20
    assert np.uint32(bounds[0]).view(np.float32) >= np.abs(vel).max()
    check_scatter_against_gather(gather, scatter, acc, bounds)
    # the low words paired or not, the lean per-particle code: the same sums
    sums = _SUMS.setdefault((closed, apic), {})
    sums[harness.build] = acc
    assert all(np.array_equal(other, acc) for other in sums.values())
    # the "order" binning (fused bound, tiled scan, no sort, no copies, another order in
    # every cell): the same bounds and the same integer sums, start the exclusive scan
    bounds2, start2, acc2 = harness.order_binning
    assert np.array_equal(bounds2, bounds)
    assert np.array_equal(acc2, acc)
    assert harness.grouped_count_same  # count_particles_grouped bins as count_particles_bounds
    assert harness.finish_cells_same  # p2g_scatter_finish_cells: finish's faces, classify's types
    assert harness.finish_ring_same  # p2g_scatter_finish_ring: finish's faces through extrapolate_sparse
    assert min(harness.cell_types) > 100  # every type among them
    binned = np.floor((pos - np.asarray(grid.origin, np.float32)) * np.float32(1.0 / grid.h)).astype(np.int64)
    binned = grid.locate(*binned.T)  # the kernels' cell: ⌊(x − o)·(1/h)⌋
    counts = np.bincount(np.where(binned >= 0, binned, grid.size), minlength=grid.size + 1)
    assert np.array_equal(start2, np.concatenate([[0], np.cumsum(counts)[:-1]]))
    valid = sparse_transfer.particles_to_grid(grid, pos, vel, c)  # the NumPy reference
    for got, name in zip(scatter[0], grid.FACES):
        assert np.abs(got - grid[name]).max() <= 1e-6 * max(1.0, np.abs(grid[name]).max())
    for got, want in zip(scatter[1], valid):
        assert np.array_equal(got, want)
    assert all(np.count_nonzero(m) > 1000 for m in scatter[1])
    # another particle order (so another order within each cell) and another lane spread:
    # the same integer sums, the same bits
    perm = np.random.default_rng(3).permutation(len(pos))
    _, again, bounds2, acc2 = harness(grid, pos[perm], vel[perm], None if c is None else c[perm], 1)
    assert np.array_equal(bounds2, bounds)
    assert np.array_equal(acc2, acc)
    for a, b in zip(again[0], scatter[0]):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    for a, b in zip(again[1], scatter[1]):
        assert np.array_equal(a, b)


def test_split_bricks_mutant_loses_terms(tmp_path_factory):
    """The split brick scatter's mutant (SCATTER_SPLIT_MUTANT: each part's last particle left
    out) gives other sums than the lean flip code (the harness test above must catch a split
    that drops particles)."""
    lean = ["-DSCATTER_PAIRED=1", "-DSCATTER_LEAN=1", "-DSCATTER_FLIP=1"]
    spec, grid, pos, vel, c = scene(True, False, 11)
    _, _, _, acc = harness_run(tmp_path_factory, "split base", lean)(grid, pos, vel, c, 8)
    mutant = harness_run(tmp_path_factory, "split mutant", lean + ["-DSCATTER_SPLIT=64", "-DSCATTER_SPLIT_MUTANT=1"])
    _, _, _, acc2 = mutant(grid, pos, vel, c, 8)
    assert np.count_nonzero(acc) > 1000
    assert not np.array_equal(acc2, acc)


def test_scatter_scales_keep_every_sum_below_two_to_the_62():
    """The scales of the notes: with R particles all reaching one face with w = 1 and
    |q| = Q, the fixed-point sums stay below 2^62 (no overflow), for Q from tiny to 1e17 m/s
    (the scales' range: bounds beyond 2^60 m/s are clamped), and 2^k_q, 2^k_w are normal floats."""
    for q in (0.0, 1e-30, 1e-15, 0.37, 1.0, 7.9, 1e3, 1e17):
        for per_cell in (1, 8, 30, 5000, 1 << 20):
            bounds = (int(np.float32(q).view(np.uint32)), per_cell)
            k_q, k_w = sparse_scatter.scales(bounds)
            reach = 18 * per_cell
            assert reach * (2.0 ** k_w + 1) < 2.0 ** 62
            assert reach * (np.float64(np.float32(q)) * 2.0 ** k_q + 0.5) < 2.0 ** 62
            assert reach * 2.0 ** k_w >= 2.0 ** 59  # and no coarser than needed
            assert -126 <= k_q <= 127 and -126 <= k_w <= 127


@pytest.mark.parametrize("choose, variable, default, other, bad", [
    (sparse_scatter.atomics_mode, "VOXFX_SPARSE_SCATTER_ATOMICS", "paired", "serial", "batched"),
    (sparse_scatter.split_mode, "VOXFX_SPARSE_SCATTER_SPLIT", "on", "off", "always"),
    (sparse_scatter.kernel_mode, "VOXFX_SPARSE_SCATTER_KERNEL", "lean", "classic", "fast"),
    (sparse_scatter.banks_mode, "VOXFX_SPARSE_SCATTER_BANKS", "flip", "flat", "rows")])
def test_scatter_switch_names_are_checked(monkeypatch, choose, variable, default, other, bad):
    monkeypatch.delenv(variable, raising=False)
    assert choose() == default  # the default
    monkeypatch.setenv(variable, f" {other.capitalize()} ")
    assert choose() == other
    assert choose(default) == default
    monkeypatch.setenv(variable, bad)
    with pytest.raises(ValueError, match=variable):
        choose()
