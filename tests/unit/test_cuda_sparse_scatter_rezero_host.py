"""The sums re-zeroed by the division (flip_sparse_scatter.cu's SCATTER_REZERO,
``sparse_scatter.rezero_mode`` "1", helper h21n) checked on the host without a GPU (nvcc builds
the kernels as host functions: tests/unit/test_cuda_sparse_scatter_host.py's notes). Both builds
run the same six P2Gs on test_cuda_sparse_gather_host's scenes — the velocities scaled by the run's
number, in every other run the particles of most bricks left out (their cells' counts zero, so
bricks go idle), the divisions p2g_scatter_finish, _cells and _live in turn (the live one after
brick_occupied_sparse / brick_live_sparse) —: the default build zeroes the sums before each
scatter (all of them, or the live bricks' by p2g_zero_live_sums over a stale buffer, as
``sparse_scatter.launch_sums`` does), the re-zeroing build never does (one buffer, zero once at the
start: ``KeptSums``). Their faces, masks and cell types are the same bytes run by run (the runs with
every particle: the NumPy reference's masks and, within float32 rounding, its faces), and the
re-zeroing build's sums are all zero after each division; a mutant leaving component 2's sums
(SCATTER_REZERO_MUTANT) fails. The device comparison is tests/gpu/test_flip_sparse_scatter_rezero_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import _build, kernel_defines
from tests.unit.test_cuda_sparse_gather_host import SCENE_AND_BRICK_GATHER, scene
from tests.unit.test_cuda_sparse_scatter_host import harness_input
from voxfx.kernels.flip import sparse_gpu, sparse_scatter, sparse_transfer

RUNS = 6
# Input: the scatter harness's (closed nx ny nz apic spread; frame; bricks; particles). Output: the
# brick gather's faces and masks (SCENE_AND_BRICK_GATHER's), then per run the faces (%a), masks,
# cell types, the idle slots and whether the sums are all zero after the division (−1: the default build).
HARNESS = STUBS + r"""
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
    std::vector<unsigned long long> acc(6 * cells, SCATTER_REZERO ? 0ull : 0xdeadbeefcafef00dull);
    std::vector<u8> solid(cells);
    for (ll t = 0; t < cells; ++t) solid[t] = (u8)(t % 5 == 0);
    for (int r = 0; r < RUNS; ++r) {
        std::vector<float> rv(svel), rc(sc);
        for (auto& x : rv) x *= (float)(r + 1);
        for (auto& x : rc) x *= (float)(r + 1);
        std::vector<int> rcount(count), rstart(start);
        if (r % 2) for (ll s = 0; s < cap; ++s) {  // most bricks' particles left out: empty runs
            if (s % 5 == r % 5) continue;
            for (ll t = s * 512; t < (s + 1) * 512; ++t) { rcount[t] = 0; rstart[t] = start[s * 512]; }
        }
        std::vector<unsigned int> bounds(2, 0u);
        LAUNCH(1, scatter_bounds(rv.data(), rc.data(), apic, n, rcount.data(), cells, h, bounds.data()));
        std::vector<u8> occupied(cap, 0), live(cap, 0);
        LAUNCH(cells, brick_occupied_sparse(rcount.data(), cells, occupied.data()));
        LAUNCH(cap, brick_live_sparse(occupied.data(), nbr27.data(), cap, live.data()));
        const int kind = r % 3;  // 0: p2g_scatter_finish, 1: _cells, 2: _live
#if !SCATTER_REZERO  // sparse_scatter.launch_sums: the sums zeroed (all, or the live bricks' of a stale buffer)
        if (kind == 2) { LAUNCH(3 * cells, p2g_zero_live_sums(live.data(), cells, acc.data())); }
        else std::fill(acc.begin(), acc.end(), 0ull);
#endif
        LAUNCH(cap, p2g_scatter_brick(spos.data(), rv.data(), rc.data(), apic, rstart.data(), rcount.data(),
                                      used.data(), coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy,
                                      oz, h, inv_h, bounds.data(), spread, order.data(), 0, acc.data()));
        std::vector<float> fu(cells, -9.0f), fv(cells, -9.0f), fw(cells, -9.0f);
        std::vector<u8> fmu(cells, 7), fmv(cells, 7), fmw(cells, 7), types(cells, 9);
        if (kind == 0) {
            LAUNCH(cells, p2g_scatter_finish(acc.data(), cells, bounds.data(), fu.data(), fv.data(), fw.data(),
                                             fmu.data(), fmv.data(), fmw.data()));
        } else if (kind == 1) {
            LAUNCH(cells, p2g_scatter_finish_cells(acc.data(), cells, bounds.data(), fu.data(), fv.data(),
                                                   fw.data(), fmu.data(), fmv.data(), fmw.data(), rcount.data(),
                                                   solid.data(), coords.data(), closed, nx, ny, nz, types.data()));
        } else {
            LAUNCH(cells, p2g_scatter_finish_live(acc.data(), cells, bounds.data(), fu.data(), fv.data(),
                                                  fw.data(), fmu.data(), fmv.data(), fmw.data(), rcount.data(),
                                                  solid.data(), coords.data(), closed, nx, ny, nz, types.data(),
                                                  live.data()));
        }
        pf(fu); pf(fv); pf(fw); pr(fmu); pr(fmv); pr(fmw); pr(types);
        printf("%d\n", (int)(cap - std::count(live.begin(), live.end(), (u8)1)));
#if SCATTER_REZERO
        printf("%d\n", (int)(std::count(acc.begin(), acc.end(), 0ull) == (ll)acc.size()));
#else
        printf("-1\n");
#endif
    }
    return 0;
}
"""


def harness_run(tmp_path_factory, name, build_defines):
    """The harness built with the default scatter's defines plus *build_defines*: ``run(grid, pos, vel,
    c)`` → per run (faces and masks as bytes, cell types, idle slots, zero after the division)."""
    lean = ["-DSCATTER_PAIRED=1", "-DSCATTER_LEAN=1", "-DSCATTER_FLIP=1", f"-DRUNS={RUNS}"]
    defines = kernel_defines(sparse_gpu.KERNELS) + lean + build_defines
    build = _build(tmp_path_factory, HARNESS, defines, f"sparse_scatter_rezero_{name}")

    def run(grid, pos, vel, c):
        tokens = build.raw(harness_input(grid, pos, vel, c, 8), check=True).split()
        cells = grid.size
        at, runs = 6 * cells, []
        for _ in range(RUNS):
            faces = np.array([float.fromhex(x) for x in tokens[at:at + 3 * cells]], np.float32)
            rest = np.array(tokens[at + 3 * cells:at + 7 * cells], np.int64)
            at += 7 * cells
            runs.append((faces.view(np.uint32), rest, int(tokens[at]), int(tokens[at + 1])))
            at += 2
        assert at == len(tokens)
        return runs

    return run


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    return {name: harness_run(tmp_path_factory, name, defines)
            for name, defines in (("default", []), ("rezero", ["-DSCATTER_REZERO=1"]),
                                  ("mutant", ["-DSCATTER_REZERO=1", "-DSCATTER_REZERO_MUTANT=1"]))}


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("apic", [False, True])
def test_rezeroed_sums_give_the_default_bytes_run_after_run(builds, closed, apic):
    spec, grid, pos, vel, c = scene(closed, apic, 11 + 2 * closed + apic)
    want = builds["default"](grid, pos, vel, c)
    got = builds["rezero"](grid, pos, vel, c)
    assert [r[3] for r in want] == [-1] * RUNS
    assert [r[3] for r in got] == [1] * RUNS  # all zero after every division
    assert max(r[2] for r in want) > 0  # idle bricks in the emptied runs (the live division skips them)
    for (wf, wr, widle, _), (gf, gr, gidle, _) in zip(want, got):
        assert np.count_nonzero(wr[:3 * grid.size]) > 100  # faces with terms in every run
        assert np.array_equal(gf, wf)
        assert np.array_equal(gr, wr)
        assert gidle == widle
    # runs 0, 2 and 4 (every particle, velocities × 1, 3, 5; the plain, live and typed divisions) against the
    # NumPy reference: its masks, its faces within float32 rounding (the fixed-point sums: the scatter's notes)
    cells = grid.size
    for r in (0, 2, 4):
        scale = np.float32(r + 1)
        valid = sparse_transfer.particles_to_grid(grid, pos, vel * scale, None if c is None else c * scale)
        faces = got[r][0].view(np.float32).reshape(3, cells)
        for k, name in enumerate(grid.FACES):
            assert np.abs(faces[k] - grid[name]).max() <= 1e-6 * max(1.0, np.abs(grid[name]).max())
            assert np.array_equal(got[r][1][k * cells:(k + 1) * cells], valid[k])
    # the mutant (component 2's sums left after its read): sums left, then other faces
    mutant = builds["mutant"](grid, pos, vel, c)
    assert [r[3] for r in mutant] == [0] * RUNS
    assert any(not np.array_equal(m[0], w[0]) for m, w in zip(mutant[1:], want[1:]))


def test_kept_sums_are_zero_when_taken():
    """``KeptSums`` (NumPy here; CuPy on the device): a new size (the pool grew) a new zeroed buffer,
    a clean buffer (its division re-zeroed it) the same one untouched, a dirty one (no re-zeroing
    division since it was taken: the first ring's, an exception) zeroed."""
    kept = sparse_scatter.KeptSums(np)
    a = kept.take(4)
    assert a.shape == (24,) and a.dtype == np.uint64 and not a.any() and not kept.clean
    a[3] = 5  # a scatter's sum, then a division that re-zeroes: clean
    a[3] = 0
    kept.clean = True
    assert kept.take(4) is a
    a[7] = 9  # the sum left (no re-zeroing division): dirty
    b = kept.take(4)
    assert b is a and not b.any()
    b[1] = 3
    kept.clean = True  # even marked clean, another size is a new zeroed buffer
    c = kept.take(8)
    assert c is not a and c.shape == (48,) and not c.any()


def test_kept_sums_live_on_their_holder():
    class Grid:
        pass

    grid = Grid()
    kept = sparse_scatter.kept_sums(grid, np)
    assert sparse_scatter.kept_sums(grid, np) is kept
    assert sparse_scatter.kept_sums(object(), np) is not sparse_scatter.kept_sums(object(), np)


def test_rezero_switch(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_SCATTER_REZERO", raising=False)
    assert sparse_scatter.rezero_mode() == "0"
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_REZERO", "1")
    assert sparse_scatter.rezero_mode() == "1"
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_REZERO", "yes")
    with pytest.raises(ValueError):
        sparse_scatter.rezero_mode()
