"""The staged P2G gather (cuda/flip_sparse_gather_staged.cu's p2g_gather_staged) gives the brick
gather's bits, checked on the host without a GPU: nvcc builds the kernels as host
functions (one block at a time, its one "thread" taking every item, barriers no-ops,
--fmad=false as -ffp-contract=off) and a C++ driver bins the particles as
kernels/flip/sparse_gpu.py does (count_particles_sparse, then a stable sort by cell),
runs p2g_gather_brick, then p2g_gather_staged with several slabs and shared-memory
capacities, with and without the cells' masks: slabs that fit, slabs that halve, and a
brick so full that one layer does not fit (gathered from global memory); in the closed box
particles beyond the walls, whose clamped weights the masks must not skip. Every result is
the brick gather's, bit for bit, and within float32 rounding of the NumPy reference. The device comparison is
tests/gpu/test_flip_sparse_gather_gpu.py."""


import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_words, hex32 as _hex, kernel_defines
from voxfx.kernels.flip import sparse_gpu, sparse_transfer
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

# After count_particles_sparse (count, cell_of), as kernels/flip/sparse_gpu.py bins: the bins'
# starts (CuPy's scan: exclusive prefix sums of count), the order (its counting sort: a stable
# sort by cell) and the particles copied in that order (spos, svel, sc). Shared with the flip
# harness (test_cuda_sparse_flip_host.py).
BIN_BY_CELL = r"""
    std::partial_sum(count.begin(), count.end(), start.begin());
    for (ll q = 0; q <= cells; ++q) start[q] -= count[q];
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cell_of[a] < cell_of[b]; });
    std::vector<float> spos(3 * n), svel(3 * n), sc(apic ? 9 * n : 1, 0.0f);
    for (ll s = 0; s < n; ++s) {
        for (int a = 0; a < 3; ++a) {
            spos[3 * s + a] = pos[3 * order[s] + a];
            svel[3 * s + a] = vel[3 * order[s] + a];
        }
        if (apic) for (int a = 0; a < 9; ++a) sc[9 * s + a] = c[9 * order[s] + a];
    }
"""

# The part of main() the gather and scatter harnesses share: after the header's ints, the
# frame (ox oy oz h inv_h, %a), the bricks (n_keys cap, keys, slots) and the particles (N, pos,
# vel, C with apic); the brick tables; the particles binned by pool cell as
# kernels/flip/sparse_gpu.py bins them and copied in that order (spos, svel, sc); the brick
# gather's u v w and valid u v w, printed.
SCENE_AND_BRICK_GATHER = r"""
    float ox = rf(), oy = rf(), oz = rf(), h = rf(), inv_h = rf();
    ll nk, cap;
    std::vector<ll> keys;
    std::vector<int> slots;
    read_bricks(nk, cap, keys, slots);
    std::vector<float> pos, vel, c;
    ll n = read_particles(apic, pos, vel, c);
    const ll cells = cap * 512;
    std::vector<int> coords(3 * cap, 0), nbr27(27 * cap, -1);
    std::vector<u8> used(cap, 0);
    for (int s : slots) used[s] = 1;
    LAUNCH(27 * nk, brick_tables(keys.data(), slots.data(), nk, coords.data(), nbr27.data()));
    // the counting sort by pool cell (no brick index: binary search)
    std::vector<int> count(cells + 1, 0), cell_of(n), rank(n), start(cells + 1), order(n);
    std::vector<int> no_index(1, -1);
    LAUNCH(n, count_particles_sparse(pos.data(), n, ox, oy, oz, inv_h, keys.data(), slots.data(), nk,
                                     no_index.data(), 0, 0, 0, 0, 0, 0, cells, count.data(), cell_of.data(),
                                     rank.data()));
""" + BIN_BY_CELL + r"""    std::vector<float> u(cells), v(cells), w(cells);
    std::vector<u8> mu(cells), mv(cells), mw(cells);
    LAUNCH(cap, p2g_gather_brick(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(), used.data(),
                                 coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy, oz, h, inv_h,
                                 u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data()));
    pf(u); pf(v); pf(w); pr(mu); pr(mv); pr(mw);
"""

# Input: closed nx ny nz apic; ox oy oz h inv_h (%a); n_keys cap, keys, slots; N, pos, vel
# (, C); K, then K lines "slab capacity filter".
# Output, one value a line: u v w (%a) and valid u v w of the brick gather, then the same
# from the staged gather for each of the K (slab, capacity, filter).
HARNESS = STUBS + r"""
static std::vector<int> host_shared;  // the staged gather's dynamic shared memory
#define GATHER_SHARED(name) int* name = host_shared.data()
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_gather.cu"
#include "flip_sparse_gather_staged.cu"
""" + DRIVER + r"""
int main() {
    int closed, nx, ny, nz, apic;
    if (scanf("%d %d %d %d %d", &closed, &nx, &ny, &nz, &apic) != 5) return 1;
""" + SCENE_AND_BRICK_GATHER + r"""
    int configs;
    scanf("%d", &configs);
    for (int k = 0; k < configs; ++k) {
        int slab, capacity, filter;
        scanf("%d %d %d", &slab, &capacity, &filter);
        host_shared.assign(STAGE_PARTS + 2 * GATHER_HALO + 1 + (ll)capacity * (STAGE_WORDS + STAGE_APIC_WORDS), -7);
        for (auto* a : {&u, &v, &w}) std::fill(a->begin(), a->end(), -9.0f);  // stale: the kernel writes all
        for (auto* a : {&mu, &mv, &mw}) std::fill(a->begin(), a->end(), (u8)7);
        LAUNCH(cap, p2g_gather_staged(spos.data(), svel.data(), sc.data(), apic, start.data(), count.data(),
                                      used.data(), coords.data(), nbr27.data(), cells, closed, nx, ny, nz, ox, oy,
                                      oz, h, inv_h, u.data(), v.data(), w.data(), mu.data(), mv.data(), mw.data(),
                                      slab, capacity, filter));
        pf(u); pf(v); pf(w); pr(mu); pr(mv); pr(mw);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_words(tmp_path_factory, HARNESS, kernel_defines(sparse_gpu.KERNELS), "sparse_gather")


def scene(closed, apic, seed):
    """Random bricks of a grid (two updates: free slots among them), a few thousand
    particles spread over them, and one brick packed with ~30 particles a cell."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (40, 24, 20))
    grid = SparseFlipGrid(spec, np, closed=closed)
    origin, h = np.asarray(spec.origin), spec.voxel_size
    lo = 0.0 if closed else -4.0  # cells; open: some particles beyond the box

    def cells(n, a, b):
        return rng.uniform(a, b, (n, 3))

    grid.update((origin + cells(2000, lo, 30) * h).astype(np.float32), 3)
    spread = cells(5000, (lo, lo, lo), (36, 22, 18))
    packed = 16 + rng.uniform(0, 8, (16000, 3))  # the brick of cells 16 … 23 along each axis
    beyond = cells(300, (-7.9, 0, 0), (-2.5, 22, 18))  # closed: beyond the wall, clamped to −2 cells
    beyond[150:, 1] += 26.5  # and beyond ny + 2
    pos = (origin + np.concatenate([spread, packed, beyond]) * h).astype(np.float32)
    grid.update(pos, 2)
    n = len(pos)
    vel = rng.normal(0, 0.4, (n, 3)).astype(np.float32)
    c = rng.normal(0, 1, (n, 3, 3)).astype(np.float32) if apic else None
    return spec, grid, pos, vel, c


def clamped(grid, pos):
    """The particles a closed box's P2G clamps (more than 2 cells beyond it) that lie in
    active cells: the staged gather's irregular ones (none when open: no clamp)."""
    if not grid.closed:
        return 0
    g = (pos - np.asarray(grid.origin, np.float32)) / np.float32(grid.h)
    out = np.any((g < -2) | (g > np.asarray(grid.shape) + 2), axis=1)
    return int(np.count_nonzero(out & (grid.locate(*np.floor(g).astype(np.int64).T) >= 0)))


def layer_counts(grid, pos):
    """Per active brick, the particles of each of its 10 halo layers (the 10 × 10 cells
    around the brick at local z = −1 … 8): what the staged gather stages."""
    cell = np.floor((pos - np.asarray(grid.origin, np.float32)) / np.float32(grid.h)).astype(np.int64)
    keys = grid.topology.keys
    out = []
    for key in keys:
        b = np.array([(int(key) >> (21 * a)) & ((1 << 21) - 1) for a in range(3)]) - (1 << 20)
        local = cell - 8 * b
        inside = np.all((local >= -1) & (local <= 8), axis=1)
        active = grid.locate(*cell[inside].T) >= 0  # binned particles only
        out.append(np.bincount(local[inside][active, 2] + 1, minlength=10))
    return np.array(out)


def plan(layers, slab, capacity):
    """(halved, from_global): whether some slab halved, and some layer was gathered from
    global memory, by the kernel's rule."""
    halved = from_global = False
    for counts in layers:
        z0 = 0
        while z0 < 8:
            s = min(slab, 8 - z0)
            while s > 1 and counts[z0:z0 + s + 2].sum() + 100 * (s + 2) > capacity:  # one spare entry a cell
                s >>= 1
                halved = True
            if counts[z0:z0 + 3].sum() + 300 > capacity:
                from_global, s = True, 1
            z0 += s
    return halved, from_global


CONFIGS = [(4, 200000, 1), (4, 200000, 0), (4, 3000, 1), (2, 1200, 1), (3, 700, 0), (1, 0, 1)]


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_staged_gather_gives_the_brick_gathers_bits(harness, closed, apic):
    spec, grid, pos, vel, c = scene(closed, apic, 5 + 2 * closed + apic)
    t = grid.topology
    assert t.free.shape[0] > 0  # free slots take part
    assert (clamped(grid, pos) > 50) == closed
    layers = layer_counts(grid, pos)
    assert layers.max() > 1500  # the packed brick: one halo layer holds ~2,000
    plans = [plan(layers, slab, capacity) for slab, capacity, _ in CONFIGS]
    assert plans[0] == plans[1] == (False, False)  # everything fits
    assert all(p[1] for p in plans[2:])  # the packed brick's layers from global memory
    assert all(p[0] for p in plans[2:5])  # slabs halve
    nx, ny, nz = spec.shape
    cells = grid.size
    lines = [f"{int(closed)} {nx} {ny} {nz} {int(apic)}", _hex([*spec.origin, grid.h, 1.0 / grid.h]),
             f"{t.count} {grid.capacity}", " ".join(str(int(k)) for k in t.keys),
             " ".join(str(int(s)) for s in t.slots), str(len(pos)), _hex(pos), _hex(vel)]
    if apic:
        lines.append(_hex(c))
    lines += [str(len(CONFIGS)), *(" ".join(str(x) for x in config) for config in CONFIGS)]
    tokens = harness(lines)

    at = 0

    def read():
        nonlocal at
        faces = [np.array([float.fromhex(x) for x in tokens[at + k * cells:at + (k + 1) * cells]], np.float32)
                 for k in range(3)]
        masks = [np.array(tokens[at + (3 + k) * cells:at + (4 + k) * cells], np.int64) for k in range(3)]
        at += 6 * cells
        return faces, masks

    brick_faces, brick_masks = read()
    valid = sparse_transfer.particles_to_grid(grid, pos, vel, c)  # the NumPy reference
    for got, name in zip(brick_faces, grid.FACES):
        assert np.abs(got - grid[name]).max() <= 1e-6 * max(1.0, np.abs(grid[name]).max())
    for got, want in zip(brick_masks, valid):
        assert np.array_equal(got, want)
    assert all(np.count_nonzero(m) > 1000 for m in brick_masks)
    for config in CONFIGS:
        faces, masks = read()
        for got, want in zip(faces, brick_faces):
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), config
        for got, want in zip(masks, brick_masks):
            assert np.array_equal(got, want), config
    assert at == len(tokens)
