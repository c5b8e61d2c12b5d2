"""The sparse FLIP kernels (cuda/flip_sparse_transfer.cu, flip_sparse_topology.cu's
marking pipeline, flip_sparse_gather.cu and flip_sparse_g2p.cu, and cuda/sparse.cu's brick
tables) give the NumPy reference's results, checked on the host without a GPU: nvcc builds
the kernels as host functions (one "thread" per call, atomics plain, no FMA contraction as
--fmad=false), and a C++ driver runs them in the order kernels/flip/sparse_gpu.py and
sparse_topology_gpu.py launch them (CuPy's scan and flip_transfer.cu's counting
sort: std::partial_sum and a stable sort by cell). Bit for bit where the arithmetic is
the same (tables, masks, cell types, extrapolation, boundaries, G2P and advection, the
incremental topology); P2G within float32 rounding (float64 sums in another order). The
device comparison is tests/gpu/test_flip_sparse_gpu.py."""


import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_words, hex32 as _hex, kernel_defines
from tests.unit.test_cuda_sparse_gather_host import BIN_BY_CELL
from voxfx.kernels.flip import sparse_gpu, sparse_transfer
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid, brick_margins, speed_squared, substep_margin
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import brick_coords

# Input: closed nx ny nz apic margin margin2 margin3; ox oy oz h inv_h flip pic dt half_dt, gravity·dt (3)
# (%a); n_keys cap, keys, slots; N, pos, vel (, C); per pool cell solid (int), solid_u,
# solid_v, solid_w (%a).
# Output, one value a line: the tables' nbr (6 × cells), exists_u/v/w and wall; P2G u v w
# and valid (the cell gather), the same from the brick gather; cell, from the particles and
# from the bins' counts; extrapolated u v w and masks; enforced u v w (gravity added); the
# fused tail from the first ring (old u v w, enforced u v w, masks); fluid faces;
# positions, velocities (, C) after G2P + advection, twice (particle order,
# then the bins'), then the same twice from g2p_advect_bricks, g2p_advect_lean and
# g2p_advect_block_end(_apic); the time-centred positions (sparse, bricks), lean's and block's
# (g2p_advect_block_centred(_apic)) positions and velocities with u_n = u/2;
# then, for those positions,
# the incremental topology's added and freed counts against the current one, missed and
# beyond counts, and its sorted unique keys; then the same from a full build; all of it
# for margin (≤ 8: one brick of reach), then margin2 (9–16: two bricks,
# sparse_gpu.reach_radius) and margin3 (17–24: three).
HARNESS = STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_topology.cu"  // the topology's marking pipeline
#include "flip_sparse_gather.cu"
#include "flip_sparse_g2p.cu"
#include "flip_sparse_g2p_lean.cu"
#include "flip_sparse_g2p_block.cu"
""" + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, apic, margin, margin2, margin3;
    if (scanf("%d %d %d %d %d %d %d %d", &closed, &nx, &ny, &nz, &apic, &margin, &margin2, &margin3) != 8) return 1;
    float ox = rf(), oy = rf(), oz = rf(), h = rf(), inv_h = rf(), flip = rf(), pic = rf(), dt = rf(), half_dt = rf();
    const float gravity[3] = {rf(), rf(), rf()};
    ll nk, cap;
    std::vector<ll> keys;
    std::vector<int> slots;
    read_bricks(nk, cap, keys, slots);
    std::vector<float> pos, vel, c;
    ll n = read_particles(apic, pos, vel, c);
    const ll cells = cap * 512;
    std::vector<u8> solid(cells);
    for (auto& x : solid) { int t; scanf("%d", &t); x = (u8)t; }
    std::vector<float> su(cells), sv(cells), sw(cells);
    for (auto* a : {&su, &sv, &sw}) for (auto& x : *a) x = rf();
    // tables
    std::vector<int> coords(3 * cap, 0), nbr27(27 * cap, -1), nbr(6 * cells);
    std::vector<u8> used(cap, 0);
    for (int s : slots) used[s] = 1;
    LAUNCH(27 * nk, brick_tables(keys.data(), slots.data(), nk, coords.data(), nbr27.data()));
    LAUNCH(cells, cell_neighbours(nbr27.data(), cells, nbr.data()));
    pr(nbr);
    std::vector<u8> eu(cells), ev(cells), ew(cells), wall(cells), solid0(cells);
    LAUNCH(cells, mark_walls(used.data(), coords.data(), cells, closed, nx, ny, nz, eu.data(), ev.data(), ew.data(),
                             wall.data(), solid0.data()));
    pr(eu); pr(ev); pr(ew); pr(wall);
    // P2G: counting sort by pool cell, then the gather
    std::vector<int> count(cells + 1, 0), cell_of(n), rank(n), start(cells + 1), order(n);
    // closed: the brick index (sparse_gpu.brick_index) over the box's bricks and wall ring
    const int idx_d[3] = {closed ? (nx >> 3) + 2 : 0, closed ? (ny >> 3) + 2 : 0, closed ? (nz >> 3) + 2 : 0};
    std::vector<int> index(std::max(1, idx_d[0] * idx_d[1] * idx_d[2]), -1);
    LAUNCH(nk, brick_index_fill(keys.data(), slots.data(), nk, index.data(), -1, -1, -1, idx_d[0], idx_d[1],
                                idx_d[2]));
#define INDEX index.data(), -1, -1, -1, idx_d[0], idx_d[1], idx_d[2]
    LAUNCH(n, count_particles_sparse(pos.data(), n, ox, oy, oz, inv_h, keys.data(), slots.data(), nk, INDEX, cells,
                                     count.data(), cell_of.data(), rank.data()));
""" + BIN_BY_CELL + r"""    std::vector<float> u(cells), v(cells), w(cells);
    std::vector<u8> mu(cells), mv(cells), mw(cells);
    LAUNCH(cells, p2g_gather_sparse(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(),
                                    used.data(), coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz,
                                    h, inv_h, u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data()));
    pf(u); pf(v); pf(w); pr(mu); pr(mv); pr(mw);
    {  // the brick gather: one block per slot (its one "thread" takes the 512 cells in turn)
        std::vector<float> bu(cells), bv(cells), bw(cells);
        std::vector<u8> bmu(cells), bmv(cells), bmw(cells);
        LAUNCH(cap, p2g_gather_brick(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(),
                                     used.data(), coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz,
                                     h, inv_h, bu.data(), bv.data(), bw.data(), bmu.data(), bmv.data(), bmw.data()));
        pf(bu); pf(bv); pf(bw); pr(bmu); pr(bmv); pr(bmw);
    }
    // classify on the given solid: from the particles, then from the bins' counts
    std::vector<u8> cell(cells), cell2(cells);
    LAUNCH(cells, cells_from_solid_sparse(solid.data(), cell.data(), cells));
    LAUNCH(n, mark_fluid_sparse(pos.data(), n, ox, oy, oz, inv_h, closed, nx, ny, nz, keys.data(), slots.data(), nk,
                                solid.data(), cell.data()));
    pr(cell);
    LAUNCH(cells, classify_counts_sparse(count.data(), solid.data(), coords.data(), cells, closed, nx, ny, nz,
                                         cell2.data()));
    pr(cell2);
    // two rings of extrapolation (the first ring's faces and masks kept for the fused tail below)
    std::vector<float> u1, v1, w1;
    std::vector<u8> mu1, mv1, mw1;
    for (int ring = 0; ring < 2; ++ring) {
        if (ring == 1) { u1 = u; v1 = v; w1 = w; mu1 = mu; mv1 = mv; mw1 = mw; }
        std::vector<float> du(cells), dv(cells), dw(cells);
        std::vector<u8> nu(cells), nv(cells), nw(cells);
        LAUNCH(cells, extrapolate_sparse(u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data(), eu.data(),
                                         ev.data(), ew.data(), nbr27.data(), cells, du.data(), dv.data(), dw.data(),
                                         nu.data(), nv.data(), nw.data()));
        u = du; v = dv; w = dw; mu = nu; mv = nv; mw = nw;
    }
    pf(u); pf(v); pf(w); pr(mu); pr(mv); pr(mw);
    std::vector<float> old_u = u, old_v = v, old_w = w;
    LAUNCH(cells, enforce_boundaries_sparse(u.data(), v.data(), w.data(), su.data(), sv.data(), sw.data(),
                                            solid.data(), eu.data(), ev.data(), ew.data(), nbr27.data(), cells, 1,
                                            gravity[0], gravity[1], gravity[2]));
    pf(u); pf(v); pf(w);
    {  // the fused tail (extrapolate_boundaries_sparse) from the first ring: old faces, faces, masks
        std::vector<float> ou(cells), ov(cells), ow(cells), fu(cells), fv(cells), fw(cells);
        std::vector<u8> nu(cells), nv(cells), nw(cells);
        LAUNCH(cells, extrapolate_boundaries_sparse(u1.data(), v1.data(), w1.data(), mu1.data(), mv1.data(),
                                                    mw1.data(), eu.data(), ev.data(), ew.data(), nbr27.data(), cells,
                                                    su.data(), sv.data(), sw.data(), solid.data(), 1, gravity[0],
                                                    gravity[1], gravity[2], ou.data(), ov.data(), ow.data(),
                                                    fu.data(), fv.data(), fw.data(), nu.data(), nv.data(),
                                                    nw.data()));
        pf(ou); pf(ov); pf(ow); pf(fu); pf(fv); pf(fw); pr(nu); pr(nv); pr(nw);
    }
    std::vector<u8> fu(cells), fv(cells), fw(cells);
    LAUNCH(cells, fluid_faces_sparse(cell.data(), nbr27.data(), cells, fu.data(), fv.data(), fw.data()));
    pr(fu); pr(fv); pr(fw);
    std::vector<float> pos2 = pos, vel2 = vel, c2 = c, pos_in = pos, vel_in = vel, c_in = c;
    LAUNCH(n, g2p_advect_sparse(pos.data(), vel.data(), c.data(), n, apic, u.data(), v.data(), w.data(),
                                old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(), slots.data(),
                                nk, nbr27.data(), closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt,
                                nullptr, nullptr, cells, 0, 0, nullptr, nullptr, nullptr));
    pf(pos); pf(vel);
    if (apic) pf(c);
    // the same in the bins' order (thread t: particle order[t])
    LAUNCH(n, g2p_advect_sparse(pos2.data(), vel2.data(), c2.data(), n, apic, u.data(), v.data(), w.data(),
                                old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(), slots.data(),
                                nk, nbr27.data(), closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt,
                                order.data(), cell_of.data(), cells, 1, 0, nullptr, nullptr, nullptr));
    pf(pos2); pf(vel2);
    if (apic) pf(c2);
    // g2p_advect_bricks (the default kernel), in the particles' order, then the bins'
    for (int use_order : {0, 1}) {
        std::vector<float> pos3 = pos_in, vel3 = vel_in, c3 = c_in;
        LAUNCH(n, g2p_advect_bricks(pos3.data(), vel3.data(), c3.data(), n, apic, u.data(), v.data(), w.data(),
                                    old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(),
                                    slots.data(), nk, nbr27.data(), INDEX, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                    flip, pic, dt, half_dt, order.data(), use_order, 0, nullptr, nullptr, nullptr));
        pf(pos3); pf(vel3);
        if (apic) pf(c3);
    }
    // g2p_advect_lean (flip_sparse_g2p_lean.cu), in the particles' order, then the bins'
    for (int use_order : {0, 1}) {
        std::vector<float> pos3 = pos_in, vel3 = vel_in, c3 = c_in;
        LAUNCH(n, g2p_advect_lean(pos3.data(), vel3.data(), c3.data(), n, apic, u.data(), v.data(), w.data(),
                                  old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(),
                                  slots.data(), nk, nbr27.data(), INDEX, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                  flip, pic, dt, half_dt, order.data(), use_order, 0, nullptr, nullptr, nullptr));
        pf(pos3); pf(vel3);
        if (apic) pf(c3);
    }
    // g2p_advect_block_end(_apic) (flip_sparse_g2p_block.cu), in the particles' order, then the bins'
    for (int use_order : {0, 1}) {
        std::vector<float> pos3 = pos_in, vel3 = vel_in, c3 = c_in;
        auto* block = apic ? g2p_advect_block_end_apic : g2p_advect_block_end;  // the variant's entry
        LAUNCH(n, block(pos3.data(), vel3.data(), c3.data(), n, apic, u.data(), v.data(), w.data(), old_u.data(),
                        old_v.data(), old_w.data(), solid.data(), keys.data(), slots.data(), nk, nbr27.data(), INDEX,
                        closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt, order.data(), use_order, 0,
                        nullptr, nullptr, nullptr));
        pf(pos3); pf(vel3);
        if (apic) pf(c3);
    }
    // the time-centred advection (u_n: the old faces stand in), g2p_advect_sparse then _bricks
    {
        std::vector<float> pos4 = pos_in, vel4 = vel_in, c4 = c_in, pos5 = pos_in, vel5 = vel_in, c5 = c_in;
        LAUNCH(n, g2p_advect_sparse(pos4.data(), vel4.data(), c4.data(), n, apic, u.data(), v.data(), w.data(),
                                    old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(), slots.data(),
                                    nk, nbr27.data(), closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt,
                                    half_dt, nullptr, nullptr, cells, 0, 1, old_u.data(), old_v.data(), old_w.data()));
        pf(pos4);
        LAUNCH(n, g2p_advect_bricks(pos5.data(), vel5.data(), c5.data(), n, apic, u.data(), v.data(), w.data(),
                                    old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(),
                                    slots.data(), nk, nbr27.data(), INDEX, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                    flip, pic, dt, half_dt, order.data(), 0, 1, old_u.data(), old_v.data(),
                                    old_w.data()));
        pf(pos5);
        // and g2p_advect_lean with a u_n of its own (the faces halved: not the old faces, which
        // the kernels above also read as u_old)
        std::vector<float> pos6 = pos_in, vel6 = vel_in, c6 = c_in, bu = u, bv = v, bw = w;
        for (auto* b : {&bu, &bv, &bw})
            for (auto& x : *b) x *= 0.5f;
        LAUNCH(n, g2p_advect_lean(pos6.data(), vel6.data(), c6.data(), n, apic, u.data(), v.data(), w.data(),
                                  old_u.data(), old_v.data(), old_w.data(), solid.data(), keys.data(),
                                  slots.data(), nk, nbr27.data(), INDEX, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                  flip, pic, dt, half_dt, order.data(), 1, 1, bu.data(), bv.data(), bw.data()));
        pf(pos6); pf(vel6);
        std::vector<float> pos7 = pos_in, vel7 = vel_in, c7 = c_in;  // and block_centred(_apic), the same u_n
        auto* block = apic ? g2p_advect_block_centred_apic : g2p_advect_block_centred;
        LAUNCH(n, block(pos7.data(), vel7.data(), c7.data(), n, apic, u.data(), v.data(), w.data(), old_u.data(),
                        old_v.data(), old_w.data(), solid.data(), keys.data(), slots.data(), nk, nbr27.data(), INDEX,
                        closed, nx, ny, nz, ox, oy, oz, h, inv_h, flip, pic, dt, half_dt, order.data(), 1, 1,
                        bu.data(), bv.data(), bw.data()));
        pf(pos7); pf(vel7);
    }
    double rdt, rgdt, rh;  // per-brick margins (sparse_grid.BrickReach): dt, |g|·dt, h, base, the largest margin
    int rbase, rmax;
    if (scanf("%la %la %la %d %d", &rdt, &rgdt, &rh, &rbase, &rmax) != 5) return 1;
    // the scalar margins (one brick of reach, R = 1, then two and three), then the per-brick ones (radius of rmax)
    for (int m : {margin, margin2, margin3, -1}) {
    const bool per_brick = m < 0;
    const int top = per_brick ? rmax : m;
    const int radius = std::max(1, (top + 7) / 8), offsets = (2 * radius + 1) * (2 * radius + 1) * (2 * radius + 1);
    const int words = (offsets + 31) / 32;
    // incremental topology of the moved particles
    std::vector<u8> occupied(cells, 0);
    std::vector<unsigned int> speed2(cap, 0u);
    std::vector<int> margins(cap, m);
    unsigned long long missed = 0, beyond = 0;
    LAUNCH(n, mark_occupied(pos.data(), n, ox, oy, oz, inv_h, closed, nx, ny, nz, keys.data(), slots.data(), nk, INDEX,
                            occupied.data(), &missed, vel.data(), speed2.data(), per_brick));
    if (per_brick) {
        unsigned long long most = 0;  // the largest |v|² bits (the device margin's)
        LAUNCH(cap, slot_margins(speed2.data(), used.data(), nbr27.data(), cap, rdt, rgdt, rh, rbase, margins.data(),
                                 &most));
        for (ll s = 0; s < cap; ++s) if (used[s]) printf("%d\n", margins[s]);
        printf("%llu\n", most);
    }
    std::vector<unsigned int> mask(words * cap, 0);
    LAUNCH(64 * cap, brick_reach(occupied.data(), used.data(), coords.data(), cap, margins.data(), closed, nx, ny, nz,
                                 radius, mask.data(), &beyond));
    std::vector<ll> reached(offsets * cap);
    LAUNCH(offsets * cap, reach_keys(mask.data(), coords.data(), cap, radius, reached.data(), &beyond));
    std::vector<u8> kept(cap, 0);
    unsigned long long added = 0, freed = 0;
    unsigned long long beyond2 = 0;
    LAUNCH(offsets * cap, reach_compare(mask.data(), coords.data(), cap, radius, keys.data(), slots.data(), nk, INDEX,
                                        kept.data(), &added, &beyond2));
    beyond += beyond2;
    LAUNCH(cap, count_unkept(used.data(), kept.data(), cap, &freed));
    printf("%llu\n%llu\n", added, freed);
    std::vector<ll> out;
    for (ll k : reached) if (k >= 0) out.push_back(k);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    printf("%llu\n%llu\n%zu\n", missed, beyond, out.size());
    for (ll k : out) printf("%lld\n", k);
    // the full build (sparse_topology_gpu.full_keys): the bricks holding particles, then the same marking
    std::vector<ll> bk(n);
    unsigned long long far = 0;
    LAUNCH(n, particle_brick_keys(pos.data(), n, ox, oy, oz, inv_h, closed, nx, ny, nz, bk.data(), &far));
    std::sort(bk.begin(), bk.end());
    bk.erase(std::unique(bk.begin(), bk.end()), bk.end());
    bk.erase(std::remove(bk.begin(), bk.end(), -1LL), bk.end());
    const ll c0 = bk.size();
    std::vector<int> s0(c0), coords0(3 * c0, 0), nbr0(27 * c0, -1), margins0(c0, m);
    std::iota(s0.begin(), s0.end(), 0);
    std::vector<u8> used0(c0, 1), occ0(c0 * 512, 0);
    std::vector<unsigned int> speed0(c0, 0u);
    LAUNCH(27 * c0, brick_tables(bk.data(), s0.data(), c0, coords0.data(), nbr0.data()));
    unsigned long long missed0 = 0;
    LAUNCH(n, mark_occupied(pos.data(), n, ox, oy, oz, inv_h, closed, nx, ny, nz, bk.data(), s0.data(), c0,
                            nullptr, 0, 0, 0, 0, 0, 0,
                            occ0.data(), &missed0, vel.data(), speed0.data(), per_brick));
    if (per_brick)
        LAUNCH(c0, slot_margins(speed0.data(), used0.data(), nbr0.data(), c0, rdt, rgdt, rh, rbase, margins0.data(),
                                nullptr));
    std::vector<unsigned int> mask0(words * c0, 0);
    LAUNCH(64 * c0, brick_reach(occ0.data(), used0.data(), coords0.data(), c0, margins0.data(), closed, nx, ny, nz,
                                radius, mask0.data(), &far));
    std::vector<ll> reached0(offsets * c0);
    LAUNCH(offsets * c0, reach_keys(mask0.data(), coords0.data(), c0, radius, reached0.data(), &far));
    std::vector<ll> full;
    for (ll k : reached0) if (k >= 0) full.push_back(k);
    std::sort(full.begin(), full.end());
    full.erase(std::unique(full.begin(), full.end()), full.end());
    printf("%llu\n%llu\n%zu\n", missed0, far, full.size());
    for (ll k : full) printf("%lld\n", k);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_words(tmp_path_factory, HARNESS, kernel_defines(sparse_gpu.KERNELS), "sparse_flip")


class Reader:
    def __init__(self, tokens):
        self.tokens, self.at = tokens, 0

    def ints(self, n, dtype=np.int64):
        out = np.array([int(x) for x in self.tokens[self.at:self.at + n]], dtype)
        self.at += n
        return out

    def floats(self, n):
        out = np.array([float.fromhex(x) for x in self.tokens[self.at:self.at + n]], np.float32)
        self.at += n
        return out


def scene(closed, apic, seed):
    """A grid whose topology was updated twice (so it has free slots), its solid with an
    obstacle block and moving solid faces, and particles with velocities (and C)."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (20, 13, 11))
    grid = SparseFlipGrid(spec, np, closed=closed)
    up = np.asarray(spec.upper) - np.asarray(spec.origin)
    lo = 0.0 if closed else -0.15

    def particles(n, a, b):
        return (np.asarray(spec.origin) + rng.uniform(a, b, (n, 3)) * up).astype(np.float32)

    grid.update(particles(3000, lo, 0.9), 3)
    pos = particles(1500, max(lo, 0.0) + 0.05, 0.6)
    obstacle = np.array([(i, j, k) for i in (7, 8) for j in range(3, 6) for k in range(2, 4)])
    inside = (obstacle + rng.uniform(0.1, 0.9, obstacle.shape)) * spec.voxel_size  # pushed out after advection
    pos[:len(obstacle)] = (np.asarray(spec.origin) + inside).astype(np.float32)
    grid.update(pos, 3, obstacle)
    n = len(pos)
    vel = rng.normal(0, 0.4, (n, 3)).astype(np.float32)
    c = rng.normal(0, 1, (n, 3, 3)).astype(np.float32) if apic else None
    for name in ("solid_u", "solid_v", "solid_w"):
        grid[name] = np.where(grid["solid"] != 0, rng.normal(0, 1, grid.size), 0).astype(np.float32)
    return spec, grid, pos, vel, c


@pytest.mark.parametrize("holes", [False, True], ids=["bricks", "holes"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_sparse_flip_kernels_match_the_numpy_reference(harness, closed, apic, holes):
    """With *holes* the bricks of odd bx + by + bz are dropped (a checkerboard): samples
    reach missing bricks, and corners whose walk from the lower corner passes a missing
    brick (diagonal bricks active, the sides not) read 0, as the reference's walk says."""
    spec, grid, pos, vel, c = scene(closed, apic, 11 + 2 * closed + apic)
    if holes:
        keys = grid.topology.keys
        grid.retopologize(keys[brick_coords(keys).sum(axis=1) % 2 == 0])
    assert grid.topology.free.shape[0] > 0  # free slots take part
    margin, margin2, margin3, dt = 4, 13, 20, 0.01
    flip = np.float32(0.0 if apic else 0.95)
    pic = np.float32(1) - flip
    dt32 = np.float32(dt)
    nx, ny, nz = spec.shape
    t = grid.topology
    cells = grid.size
    gravity = [np.float32(a * dt) for a in (0.5, -9.81, 0.25)]
    lines = [f"{int(closed)} {nx} {ny} {nz} {int(apic)} {margin} {margin2} {margin3}",
             _hex([*spec.origin, grid.h, 1.0 / grid.h, flip, pic, dt32, np.float32(0.5) * dt32, *gravity]),
             f"{t.count} {grid.capacity}", " ".join(str(int(k)) for k in t.keys),
             " ".join(str(int(s)) for s in t.slots), str(len(pos)), _hex(pos), _hex(vel)]
    if apic:
        lines.append(_hex(c))
    lines += [" ".join(str(int(x)) for x in grid["solid"]), *(_hex(grid["solid_" + n]) for n in "uvw")]
    reach = _reach(grid)  # the per-brick pass (velocities after G2P: the same bits on both sides)
    lines.append(f"{float(reach.dt).hex()} {reach.gdt.hex()} {float(reach.h).hex()} {reach.base} {LARGEST}")
    out = Reader(harness(lines))

    # brick tables and marks
    assert np.array_equal(out.ints(6 * cells).reshape(6, cells), grid.nbr)
    for name in (*grid.EXISTS, "wall"):
        assert np.array_equal(out.ints(cells), grid[name]), name
    # P2G: the gather against the sorted float64 sums
    valid = sparse_transfer.particles_to_grid(grid, pos, vel, c)
    faces = [out.floats(cells) for _ in range(3)]
    masks = [out.ints(cells) for _ in range(3)]
    for got, name in zip(faces, grid.FACES):
        # (holes: particles outside the bricks, which the solver's margin never leaves, reach
        # faces in the reference's P2G and not in the gather, which bins them nowhere)
        assert holes or np.abs(got - grid[name]).max() <= 1e-6 * max(1.0, np.abs(grid[name]).max())
        assert np.count_nonzero(got)
    for got, want in zip(masks, valid):
        assert holes or np.array_equal(got, want)
    brick_faces = [out.floats(cells) for _ in range(3)]  # the brick gather: the cell gather's bits
    for got, want in zip(brick_faces, faces):
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    for want in masks:
        assert np.array_equal(out.ints(cells), want)
    for got, name in zip(faces, grid.FACES):  # the rest from the kernel's faces: bit for bit from here
        grid[name] = got
    grid.valid = tuple(m.astype(np.uint8) for m in masks)
    sparse_transfer.classify(grid, pos)
    assert np.array_equal(out.ints(cells), grid["cell"])
    assert np.array_equal(out.ints(cells), grid["cell"])  # from the bins' counts
    assert (grid["cell"] == 1).sum() > 100 and (grid["cell"] == 2).sum() > 0
    sparse_transfer.extrapolate(grid)
    for name in grid.FACES:
        assert np.array_equal(out.floats(cells), grid[name]), name
    for want in grid.valid:
        assert np.array_equal(out.ints(cells), want)
    old = tuple(f.copy() for f in grid.faces())
    sparse_transfer.enforce_boundaries(grid, add=gravity)  # gravity fused
    for name, before in zip(grid.FACES, old):
        got = out.floats(cells)
        assert np.array_equal(got, grid[name]), name
        assert not np.array_equal(got, before)
    for want in (*old, *grid.faces(), *grid.valid):  # the fused tail: the same bits
        got = out.floats(cells) if want.dtype == np.float32 else out.ints(cells)
        assert np.array_equal(got, want)
    for want in sparse_transfer.fluid_faces(grid):
        assert np.array_equal(out.ints(cells), want)
    _check_g2p(out, grid, old, pos, vel, flip, dt, c)
    _check_topology(out, grid, pos, vel, t, (margin, margin2, margin3), holes)
    assert out.at == len(out.tokens)


LARGEST = 20  # the per-brick pass's largest margin, for its radius (3: larger than the margins need)


def _reach(grid):
    """The per-brick pass's ``BrickReach`` (velocities set later): 0.15 s substeps on a
    0.05 m grid, so the particles' speeds (~0.4 m/s) give margins of 9–15 cells."""
    return BrickReach(None, 0.15, 9.81, grid.h)


def _cells(grid, pos):
    """The particles' lattice cells as ``topology_keys`` takes them (clamped when closed)."""
    cells = np.stack([np.floor(a) for a in grid.cell_coords(pos)], axis=1).astype(np.int64)
    return np.clip(cells, 0, np.asarray(grid.shape) - 1) if grid.closed else cells


def _check_topology(out, grid, pos, vel, t, margins, holes):
    """The incremental topology of the moved particles is topology_keys', and says what
    changed; for a margin of one brick of reach, then of two (9–16 cells: 125 offsets a
    brick) and three, then per brick (``BrickReach``: each used slot's margin first, those
    of the bricks holding particles ``brick_margins``'); from nothing, the same bricks.
    *holes*: particles outside the bricks (the caller then builds from nothing)."""
    reach = _reach(grid)._replace(vel=vel)
    for m in (*margins, None):
        if m is None:
            m = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), reach.dt, reach.h, reach.gravity)
            assert 8 < m <= LARGEST  # two bricks of reach at least; the harness's radius (3) serves it
            got = out.ints(int(t.count))  # per used slot, in slot order
            most = int(out.ints(1)[0])  # slot_margins' largest |v|² bits: the fastest particle's (holes: of those in)
            assert most == int(speed_squared(vel, np).max().view(np.uint32)) or holes
            want_keys, want = brick_margins(_cells(grid, pos) >> 3, speed_squared(vel, np), reach, np)
            if not holes:
                keys_by_slot = np.empty(grid.capacity, np.int64)
                keys_by_slot[t.slots] = t.keys
                slot_keys = keys_by_slot[np.sort(t.slots)]
                held = np.isin(slot_keys, want_keys)
                assert held.any() and (got >= reach.base).all()
                assert np.array_equal(got[held], want[np.searchsorted(want_keys, slot_keys[held])])
            want = grid.topology_keys(pos, m, reach=reach)
        else:
            want = grid.topology_keys(pos, m)
        added, freed, missed, beyond, count = out.ints(5)
        if holes:
            assert missed > 0
            out.ints(count)
        else:
            assert missed == 0 and beyond == 0
            assert np.array_equal(out.ints(count), want), m
            new = np.setdiff1d(want, t.keys).size  # added counts reaches of new bricks (a brick may be reached twice)
            assert (added >= new) and (added > 0) == (new > 0) and freed == np.setdiff1d(t.keys, want).size
            assert added + freed > 0  # the margin changed from 3: bricks were added
        missed, beyond, count = out.ints(3)  # built from nothing: the same bricks
        assert missed == 0 and beyond == 0
        assert np.array_equal(out.ints(count), want), m


def _check_g2p(out, grid, old, pos, vel, flip, dt, c):
    """G2P + advection (in place): the NumPy reference's bits from g2p_advect_sparse in the
    particles' order and the bins', then from g2p_advect_bricks, _lean and _block in both."""
    apic = c is not None
    x0, v0, c0 = pos.copy(), vel.copy(), None if c is None else c.copy()
    v_in, c_in = vel.copy(), None if c is None else c.copy()  # (v0 and c0 are updated below)
    sparse_transfer.g2p_advect(grid, old, pos, vel, flip, dt, c)
    got_pos, got_vel = out.floats(pos.size).reshape(-1, 3), out.floats(vel.size).reshape(-1, 3)
    assert np.array_equal(got_pos, pos)
    assert np.array_equal(got_vel, vel)
    assert not np.array_equal(pos, x0)
    if apic:
        assert np.array_equal(out.floats(c.size).reshape(c.shape), c)
    for want in (pos, vel, c) if apic else (pos, vel):  # in the bins' order: the same bits
        assert np.array_equal(out.floats(want.size).reshape(want.shape), want)
    for _ in ("bricks, particle order", "bricks, bins' order", "lean, particle order", "lean, bins' order",
              "block, particle order", "block, bins' order"):
        for want in (pos, vel, c) if apic else (pos, vel):  # g2p_advect_bricks, _lean and _block: the same bits
            assert np.array_equal(out.floats(want.size).reshape(want.shape).view(np.uint32), want.view(np.uint32))
    centred = x0.copy()  # the time-centred advection, the old faces as u_n: both kernels, the same bits
    sparse_transfer.g2p_advect(grid, old, centred, v0, flip, dt, c0, before=old)
    assert not np.array_equal(centred, pos)
    for _ in ("g2p_advect_sparse", "g2p_advect_bricks"):
        assert np.array_equal(out.floats(pos.size).reshape(-1, 3).view(np.uint32), centred.view(np.uint32))
    # g2p_advect_lean, time-centred with a u_n of its own (the faces halved): u_n is sampled at
    # x on the corners of u_{n+1} and u_old, at x_m on those of u_{n+1}
    half = tuple(f * np.float32(0.5) for f in grid.faces())
    centred, v1 = x0.copy(), v_in.copy()
    sparse_transfer.g2p_advect(grid, old, centred, v1, flip, dt, c_in, before=half)
    assert not np.array_equal(centred, pos)
    assert np.array_equal(out.floats(pos.size).reshape(-1, 3).view(np.uint32), centred.view(np.uint32))
    assert np.array_equal(out.floats(vel.size).reshape(-1, 3).view(np.uint32), v1.view(np.uint32))
    for want in (centred, v1):  # g2p_advect_block_centred(_apic), the same u_n: the same bits
        assert np.array_equal(out.floats(want.size).reshape(-1, 3).view(np.uint32), want.view(np.uint32))
