"""The P2G tail's idle-brick way (sparse_transfer.P2G_TAILS "live", helper h18f) checked on the host
without a GPU: nvcc builds the kernels as host functions (tests/cuda_host.py) and a C++ driver bins a
scene's particles and runs the brick scatter, then the tail three ways from the same sums: apart
(p2g_scatter_finish_cells, R rings of extrapolate_sparse, the old faces copied,
enforce_boundaries_sparse with gravity), tail (the last ring extrapolate_boundaries_sparse) and live
(brick_occupied_sparse and brick_live_sparse from the counts, the sums zeroed in the live bricks only
by p2g_zero_live_sums (the rest garbage) and scattered again, p2g_scatter_finish_live, R − 1 rings of
extrapolate_live_sparse, extrapolate_boundaries_live_sparse) with every output array filled with
garbage first: live must give apart's bytes everywhere (the idle bricks' values written unread, the
rest computed), tail too; then, as after the projection, R rings from fluid_faces_sparse's masks of
the cell types, extrapolate_sparse against extrapolate_copy_live_sparse (the idle bricks copied) into
garbage. The scene has idle bricks, bricks that hold no particle but whose faces P2G or the rings
make valid (a neighbour's particles by the border), free slots, solid cells with moving solid
velocities; the mutant (IDLE_MUTANT: a brick live only where it holds particles) must differ.
The device comparison is tests/gpu/test_flip_sparse_p2g_tail_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import _build, kernel_defines
from tests.unit.test_cuda_sparse_gather_host import SCENE_AND_BRICK_GATHER, _hex
from voxfx.kernels.flip import sparse_gpu
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

# Input: closed nx ny nz apic rings; ox oy oz h inv_h (%a); n_keys cap, keys, slots; N, pos, vel (, C);
# per pool cell solid (int), solid_u, solid_v, solid_w (%a); gravity·dt (3, %a).
# Output (after the brick gather's 6 · cells values): the used bricks, the live ones, the occupied
# ones; the valid faces in live bricks that hold no particle; then 1/0: live's division = apart's
# (faces, masks, types), live's old faces, faces and masks = apart's, tail's = apart's.
HARNESS = STUBS + r"""
using std::min;
using std::max;
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_gather.cu"
#include "flip_sparse_scatter.cu"
""" + DRIVER + r"""
typedef std::vector<float> F;
typedef std::vector<u8> B;
static bool same(const F& a, const F& b) { return a.size() == b.size() && !memcmp(a.data(), b.data(), 4 * a.size()); }
int main() {
    int closed, nx, ny, nz, apic, rings;
    if (scanf("%d %d %d %d %d %d", &closed, &nx, &ny, &nz, &apic, &rings) != 6) return 1;
""" + SCENE_AND_BRICK_GATHER + r"""
    std::vector<u8> solid(cells);
    for (auto& x : solid) { int t; scanf("%d", &t); x = (u8)t; }
    F su(cells), sv(cells), sw(cells);
    for (auto* a : {&su, &sv, &sw}) for (auto& x : *a) x = rf();
    const float g[3] = {rf(), rf(), rf()};
    B eu(cells), ev(cells), ew(cells), wall(cells), solid0(cells);
    LAUNCH(cells, mark_walls(used.data(), coords.data(), cells, closed, nx, ny, nz, eu.data(), ev.data(), ew.data(),
                             wall.data(), solid0.data()));
    std::vector<unsigned int> bounds(2, 0u);
    std::vector<unsigned long long> acc(6 * cells, 0ull);
    LAUNCH(1, scatter_bounds(svel.data(), sc.data(), apic, n, count.data(), cells, h, bounds.data()));
    LAUNCH(cap, p2g_scatter_brick(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(), used.data(),
                                  coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                  bounds.data(), 8, order.data(), 0, acc.data()));
    // apart: the division with the types, `rings` rings, the old faces, the boundaries with gravity
    F fu(cells), fv(cells), fw(cells);
    B fmu(cells), fmv(cells), fmw(cells), types(cells);
    LAUNCH(cells, p2g_scatter_finish_cells(acc.data(), cells, bounds.data(), fu.data(), fv.data(), fw.data(),
                                           fmu.data(), fmv.data(), fmw.data(), count.data(), solid.data(),
                                           coords.data(), closed, nx, ny, nz, types.data()));
    F au = fu, av = fv, aw = fw;
    B amu = fmu, amv = fmv, amw = fmw;
    for (int r = 0; r < rings; ++r) {
        F xu(cells), xv(cells), xw(cells);
        B xmu(cells), xmv(cells), xmw(cells);
        LAUNCH(cells, extrapolate_sparse(au.data(), av.data(), aw.data(), amu.data(), amv.data(), amw.data(),
                                         eu.data(), ev.data(), ew.data(), nbr27.data(), cells, xu.data(), xv.data(),
                                         xw.data(), xmu.data(), xmv.data(), xmw.data()));
        au = xu; av = xv; aw = xw; amu = xmu; amv = xmv; amw = xmw;
    }
    const F old_u = au, old_v = av, old_w = aw;
    LAUNCH(cells, enforce_boundaries_sparse(au.data(), av.data(), aw.data(), su.data(), sv.data(), sw.data(),
                                            solid.data(), eu.data(), ev.data(), ew.data(), nbr27.data(), cells, 1,
                                            g[0], g[1], g[2]));
    // tail and live: `rings` − 1 rings, then the tail kernel; every output filled with garbage first
    bool tail_same = true, live_same = true, division_same = true;
    std::vector<u8> occupied(cap, 0), live(cap, 7);
    LAUNCH(cells, brick_occupied_sparse(count.data(), cells, occupied.data()));
    LAUNCH(cap, brick_live_sparse(occupied.data(), nbr27.data(), cap, live.data()));
    for (int way = 0; way < 2; ++way) {
        F u(cells, -9.0f), v(cells, -9.0f), w(cells, -9.0f);
        B mu(cells, (u8)7), mv(cells, (u8)7), mw(cells, (u8)7), types2(cells, (u8)9);
        if (way == 0) u = fu, v = fv, w = fw, mu = fmu, mv = fmv, mw = fmw;
        else {  // the live bricks' sums zeroed, the rest garbage, the scatter again
            std::vector<unsigned long long> acc2(6 * cells, 0x5a5a5a5a5a5a5a5aull);
            LAUNCH(3 * cells, p2g_zero_live_sums(live.data(), cells, acc2.data()));
            LAUNCH(cap, p2g_scatter_brick(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(),
                                          used.data(), coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy,
                                          oz, h, inv_h, bounds.data(), 8, order.data(), 0, acc2.data()));
            LAUNCH(cells, p2g_scatter_finish_live(acc2.data(), cells, bounds.data(), u.data(), v.data(), w.data(),
                                                  mu.data(), mv.data(), mw.data(), count.data(), solid.data(),
                                                  coords.data(), closed, nx, ny, nz, types2.data(), live.data()));
            division_same = same(u, fu) && same(v, fv) && same(w, fw) && mu == fmu && mv == fmv && mw == fmw &&
                            types2 == types;
        }
        for (int r = 0; r + 1 < rings; ++r) {
            F xu(cells, NAN), xv(cells, NAN), xw(cells, NAN);
            B xmu(cells, (u8)5), xmv(cells, (u8)5), xmw(cells, (u8)5);
            if (way == 0)
                LAUNCH(cells, extrapolate_sparse(u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data(),
                                                 eu.data(), ev.data(), ew.data(), nbr27.data(), cells, xu.data(),
                                                 xv.data(), xw.data(), xmu.data(), xmv.data(), xmw.data()))
            else
                LAUNCH(cells, extrapolate_live_sparse(u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data(),
                                                      eu.data(), ev.data(), ew.data(), nbr27.data(), cells, xu.data(),
                                                      xv.data(), xw.data(), xmu.data(), xmv.data(), xmw.data(),
                                                      live.data()))
            u = xu; v = xv; w = xw; mu = xmu; mv = xmv; mw = xmw;
        }
        F ou(cells, -7.0f), ov(cells, -7.0f), ow(cells, -7.0f), du(cells, 5.0f), dv(cells, 5.0f), dw(cells, 5.0f);
        B nu(cells, (u8)3), nv(cells, (u8)3), nw(cells, (u8)3);
        if (way == 0)
            LAUNCH(cells, extrapolate_boundaries_sparse(u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data(),
                                                        eu.data(), ev.data(), ew.data(), nbr27.data(), cells,
                                                        su.data(), sv.data(), sw.data(), solid.data(), 1, g[0], g[1],
                                                        g[2], ou.data(), ov.data(), ow.data(), du.data(), dv.data(),
                                                        dw.data(), nu.data(), nv.data(), nw.data()))
        else
            LAUNCH(cells, extrapolate_boundaries_live_sparse(u.data(), v.data(), w.data(), mu.data(), mv.data(),
                                                             mw.data(), eu.data(), ev.data(), ew.data(), nbr27.data(),
                                                             cells, su.data(), sv.data(), sw.data(), solid.data(), 1,
                                                             g[0], g[1], g[2], ou.data(), ov.data(), ow.data(),
                                                             du.data(), dv.data(), dw.data(), nu.data(), nv.data(),
                                                             nw.data(), live.data()))
        const bool ok = same(ou, old_u) && same(ov, old_v) && same(ow, old_w) && same(du, au) && same(dv, av) &&
                        same(dw, aw) && nu == amu && nv == amv && nw == amw;
        (way == 0 ? tail_same : live_same) = ok;
    }
    // after the projection (any faces: the tail's here): the fluid faces of the types, `rings` rings of
    // extrapolate_sparse against extrapolate_copy_live_sparse into garbage
    B qu(cells), qv(cells), qw(cells);
    LAUNCH(cells, fluid_faces_sparse(types.data(), nbr27.data(), cells, qu.data(), qv.data(), qw.data()));
    bool copy_same = true;
    {
        F ru = au, rv = av, rw = aw, lu = au, lv = av, lw = aw;
        B rmu = qu, rmv = qv, rmw = qw, lmu = qu, lmv = qv, lmw = qw;
        for (int r = 0; r < rings; ++r) {
            F xu(cells), xv(cells), xw(cells), yu(cells, NAN), yv(cells, NAN), yw(cells, NAN);
            B xmu(cells), xmv(cells), xmw(cells), ymu(cells, (u8)5), ymv(cells, (u8)5), ymw(cells, (u8)5);
            LAUNCH(cells, extrapolate_sparse(ru.data(), rv.data(), rw.data(), rmu.data(), rmv.data(), rmw.data(),
                                             eu.data(), ev.data(), ew.data(), nbr27.data(), cells, xu.data(),
                                             xv.data(), xw.data(), xmu.data(), xmv.data(), xmw.data()));
            LAUNCH(cells, extrapolate_copy_live_sparse(lu.data(), lv.data(), lw.data(), lmu.data(), lmv.data(),
                                                       lmw.data(), eu.data(), ev.data(), ew.data(), nbr27.data(),
                                                       cells, yu.data(), yv.data(), yw.data(), ymu.data(), ymv.data(),
                                                       ymw.data(), live.data()));
            ru = xu; rv = xv; rw = xw; rmu = xmu; rmv = xmv; rmw = xmw;
            lu = yu; lv = yv; lw = yw; lmu = ymu; lmv = ymv; lmw = ymw;
        }
        copy_same = same(lu, ru) && same(lv, rv) && same(lw, rw) && lmu == rmu && lmv == rmv && lmw == rmw;
    }
    long long n_used = 0, n_live = 0, n_occ = 0, lonely = 0;
    for (ll s = 0; s < cap; ++s) {
        n_used += used[s];
        n_live += live[s];
        n_occ += occupied[s];
        if (live[s] && !occupied[s])
            for (ll t = s * 512; t < (s + 1) * 512; ++t) lonely += amu[t] + amv[t] + amw[t];
    }
    printf("%lld\n%lld\n%lld\n%lld\n", n_used, n_live, n_occ, lonely);
    printf("%d\n%d\n%d\n%d\n", (int)division_same, (int)live_same, (int)tail_same, (int)copy_same);
    return 0;
}
"""


def idle_scene(closed, apic, seed, xp=np):
    """A 96 × 24 × 24 box's bricks (free slots among them after a second update), particles in two
    clusters with idle bricks between and beyond them, some by brick borders (a live brick with no
    particle of its own but valid faces), solid cells with solid velocities, gravity. The grid on
    *xp* (tests/gpu/test_flip_sparse_p2g_tail_gpu.py: CuPy), the rest NumPy."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (96, 24, 24))
    grid = SparseFlipGrid(spec, xp, closed=closed)
    origin, h = np.asarray(spec.origin), spec.voxel_size
    grid.update(xp.asarray((origin + rng.uniform(0, [96, 24, 24], (4000, 3)) * h).astype(np.float32)), 2)
    every = (origin + (np.stack(np.meshgrid(*(np.arange(4, n, 8) for n in (96, 24, 24)), indexing="ij"), -1)
                       .reshape(-1, 3) + 0.5) * h).astype(np.float32)
    cluster = [rng.uniform([2, 2, 2], [14, 20, 20], (3000, 3)),  # bricks x 0–1
               rng.uniform([15.3, 3, 3], [15.95, 20, 20], (300, 3)),  # by brick x 1's border: brick 2's faces
               rng.uniform([58, 4, 4], [62, 12, 12], (1500, 3))]  # brick x 7
    if not closed:
        cluster.append(rng.uniform([-3, 2, 2], [-0.5, 6, 6], (200, 3)))  # beyond the box
    pos = (origin + np.concatenate(cluster) * h).astype(np.float32)
    grid.update(xp.asarray(np.concatenate([pos, every[::3]])), 1)  # the pool keeps the first update's bricks
    n = len(pos)
    vel = rng.normal(0, 0.4, (n, 3)).astype(np.float32)
    c = rng.normal(0, 1, (n, 3, 3)).astype(np.float32) if apic else None
    cells = grid.size
    solid = (np.arange(cells) % 7 == 0).astype(np.int64)
    solid_vel = [rng.normal(0, 0.3, cells).astype(np.float32) for _ in range(3)]
    return grid, pos, vel, c, solid, solid_vel


def run_harness(build, grid, pos, vel, c, solid, solid_vel, rings):
    t = grid.topology
    gravity = np.float32([0.0, -9.81 / 72, 0.25])
    lines = [f"{int(grid.closed)} {' '.join(str(int(x)) for x in grid.shape)} {int(c is not None)} {rings}",
             _hex([*grid.origin, grid.h, 1.0 / grid.h]), f"{t.count} {grid.capacity}",
             " ".join(str(int(k)) for k in t.keys), " ".join(str(int(s)) for s in t.slots), str(len(pos)),
             _hex(pos), _hex(vel)]
    if c is not None:
        lines.append(_hex(c))
    lines += [" ".join(str(int(x)) for x in solid), *(_hex(a) for a in solid_vel), _hex(gravity)]
    tokens = build.raw(lines, check=True).split()[6 * grid.size:]  # after the brick gather's output
    assert len(tokens) == 8
    return [int(x) for x in tokens]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return _build(tmp_path_factory, HARNESS, kernel_defines(sparse_gpu.KERNELS), "sparse_idle_bricks")


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("rings", [2, 3])
def test_live_tail_writes_aparts_bytes(harness, closed, apic, rings):
    grid, pos, vel, c, solid, solid_vel = idle_scene(closed, apic, 5 + 2 * closed + apic)
    assert grid.topology.free.shape[0] > 0  # free slots take part
    used, live, occupied, lonely, division, same, tail, copy = run_harness(harness, grid, pos, vel, c, solid,
                                                                           solid_vel, rings)
    assert used - live >= 4  # idle bricks skipped
    assert live > occupied and lonely > 100  # live bricks with no particle, holding valid faces
    assert division == 1  # p2g_scatter_finish_live: the division's faces, masks and types
    assert tail == 1  # extrapolate_boundaries_sparse: apart's bytes
    assert same == 1  # the idle-brick way: apart's bytes
    assert copy == 1  # after the projection: the fluid faces' rings, the idle bricks copied


def test_live_mutant_that_skips_a_live_brick_fails(tmp_path_factory):
    """IDLE_MUTANT (a brick live only where it holds particles: the valid faces a neighbour's
    particles give it skipped) does not give apart's bytes."""
    mutant = _build(tmp_path_factory, HARNESS, kernel_defines(sparse_gpu.KERNELS) + ["-DIDLE_MUTANT=1"],
                    "sparse_idle_bricks_mutant")
    grid, pos, vel, c, solid, solid_vel = idle_scene(True, False, 7)
    used, live, occupied, lonely, division, same, tail, copy = run_harness(mutant, grid, pos, vel, c, solid,
                                                                           solid_vel, 2)
    assert live == occupied and tail == 1
    assert same == 0 and copy == 0
