"""The fused tables after a topology update (cuda/flip_sparse_topology.cu ``topology_slot_tables``
and ``topology_cell_tables``, ``sparse_topology_tables.fused_tables``) checked on the host without a
GPU (nvcc builds the kernels as host functions, tests/cuda_host.py): a topology with free slots
and a grown pool, over a closed domain's brick index (bricks inside it and beyond it, looked up
by search) or none; every entry of the slot tables, the six neighbours of every pool cell and
the marks are written (the outputs start as sentinels) and equal the NumPy grid's
(``SparseMacGrid._neighbours``, ``SparseFlipGrid._mark_walls``) and the brick tables' meaning
(a slot's brick coordinates, its 27 neighbours' slots). The device comparison is
tests/gpu/test_flip_sparse_topology_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import Topology, brick_coords, brick_keys

# Input: n_keys capacity; keys; slots; used (per slot); index lo (3) and dims (3), then its
# entries (dims 0: none); closed nx ny nz; the refill marks' slots (a count, then the slots; 0: a
# null refill). Output: coords (3·cap), nbr27 (27·cap), nbr (6·cells), exists_u, exists_v,
# exists_w, wall, solid (cells each), solid_u/v/w (cells each), then two kept channels after the
# refill (an f32 from 1.5·i to NaN as its bits, a u8 from i % 200 to 3).
# The topology's input lines as both tables harnesses read them (n_keys capacity through closed nx ny nz), inside main.
READ_TOPOLOGY = r"""
    ll n, cap;
    if (scanf("%lld %lld", &n, &cap) != 2) return 1;
    std::vector<ll> keys(n);
    std::vector<int> slots(n);
    for (auto& k : keys) scanf("%lld", &k);
    for (auto& s : slots) scanf("%d", &s);
    std::vector<u8> used(cap);
    for (auto& x : used) { int t; scanf("%d", &t); x = (u8)t; }
    int lo[3], d[3];
    for (auto& x : lo) scanf("%d", &x);
    for (auto& x : d) scanf("%d", &x);
    std::vector<int> index(std::max(1LL, (ll)d[0] * d[1] * d[2]), -1);
    if (d[0] > 0) for (auto& x : index) scanf("%d", &x);
    int closed, nx, ny, nz;
    scanf("%d %d %d %d", &closed, &nx, &ny, &nz);
"""
HARNESS = STUBS + r"""
#include "flip_sparse_topology.cu"
""" + DRIVER + r"""
int main() {
""" + READ_TOPOLOGY + r"""    ll m;
    scanf("%lld", &m);
    std::vector<u8> refill(cap, 0);
    for (ll i = 0; i < m; ++i) { int s; scanf("%d", &s); refill[s] = 1; }
    const ll cells = cap * 512;
    std::vector<float> kf(cells);
    std::vector<u8> ku(cells);
    for (ll i = 0; i < cells; ++i) { kf[i] = 1.5f * i; ku[i] = (u8)(i % 200); }
    void* none = nullptr;
    std::vector<int> coords(3 * cap, -7), nbr27(27 * cap, -7), nbr(6 * cells, -7);
    std::vector<u8> eu(cells, 7), ev(cells, 7), ew(cells, 7), wall(cells, 7), solid(cells, 7);
    std::vector<float> su(cells, 7.0f), sv(cells, 7.0f), sw(cells, 7.0f);
    LAUNCH(27 * (n + cap), topology_slot_tables(keys.data(), slots.data(), n, index.data(), lo[0], lo[1], lo[2],
                                                d[0], d[1], d[2], used.data(), cap, coords.data(), nbr27.data()));
    LAUNCH(cells, topology_cell_tables(nbr27.data(), used.data(), coords.data(), cells, closed, nx, ny, nz,
                                       nbr.data(), 1, eu.data(), ev.data(), ew.data(), wall.data(), solid.data(),
                                       su.data(), sv.data(), sw.data(), m ? refill.data() : nullptr, 2, 2,
                                       kf.data(), ku.data(), none, none, none, none, none, none,
                                       host_float_as_uint(std::nanf("")), 3u, 0u, 0u, 0u, 0u, 0u, 0u));
    pr(coords); pr(nbr27); pr(nbr); pr(eu); pr(ev); pr(ew); pr(wall); pr(solid);
    for (const auto* a : {&su, &sv, &sw}) for (float x : *a) printf("%d\n", x == 0.0f && !std::signbit(x) ? 0 : 7);
    for (float x : kf) printf("%u\n", host_float_as_uint(x));
    pr(ku);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_ints(tmp_path_factory, HARNESS, (), "sparse_topology_tables")


def topology(rng, span):
    """A topology after updates: the pool grown, then slots freed; bricks in *span*."""
    lo, hi = span

    def keys_of(m):
        return np.unique(brick_keys(rng.integers(lo, hi, (m, 3))))

    topo = Topology.from_keys(keys_of(40))
    first = topo.count
    topo, _, _ = topo.update(np.union1d(topo.keys, keys_of(60)))  # the pool grows
    topo, _, _ = topo.update(np.union1d(topo.keys[::2], keys_of(5)))  # slots freed
    assert topo.free.shape[0] > 0 and topo.capacity > first
    return topo


@pytest.mark.parametrize("refill", [False, True], ids=["no refill", "refill"])
@pytest.mark.parametrize("case", ["closed, index", "closed, no index", "open"])
def test_fused_tables_give_the_grids_tables_and_marks(harness, case, refill):
    """With the fused update's refill marks (``VOXFX_SPARSE_TOPOLOGY_FILL=tables``) the kept channels
    take their backgrounds (the NaN's bits, the byte) in the marked slots' cells, nowhere else; a null
    refill leaves them alone."""
    rng = np.random.default_rng(["closed, index", "closed, no index", "open"].index(case) + 11)
    shape = (40, 24, 32)
    closed = case != "open"
    topo = topology(rng, (-2, 7))  # some bricks past the index's box (−1 … n/8): found by search
    cap = topo.capacity
    used = np.zeros(cap, np.uint8)
    used[topo.slots] = 1
    dims = tuple(n // 8 + 2 for n in shape) if case == "closed, index" else (0, 0, 0)
    lines = [f"{topo.count} {cap}", " ".join(map(str, topo.keys)), " ".join(map(str, topo.slots)),
             " ".join(map(str, used)), "-1 -1 -1", " ".join(map(str, dims))]
    if dims[0]:
        table = np.full(dims[::-1], -1, np.int64)
        c = brick_coords(topo.keys, np) + 1
        inside = ((c >= 0) & (c < np.asarray(dims))).all(axis=1)
        table[c[inside, 2], c[inside, 1], c[inside, 0]] = topo.slots[inside]
        assert inside.sum() < topo.count  # the search serves the rest
        lines.append(" ".join(map(str, table.ravel())))
    lines.append(f"{int(closed)} {shape[0]} {shape[1]} {shape[2]}")
    marked = sorted(set(rng.choice(cap, 5, replace=False).tolist() + topo.free[:2].tolist())) if refill else []
    lines.append(" ".join(map(str, [len(marked), *marked])))
    out = harness(lines)
    cells = cap * 512
    coords, nbr27, nbr, marks, faces, kf, ku = np.split(out, np.cumsum([3 * cap, 27 * cap, 6 * cells, 5 * cells,
                                                                        3 * cells, cells]))
    i = np.arange(cells)
    hit = np.isin(i // 512, marked)
    assert hit.sum() == 512 * len(marked)
    nan_bits = int(np.array(np.nan, np.float32).view(np.uint32))
    assert np.array_equal(kf, np.where(hit, nan_bits, (1.5 * i).astype(np.float32).view(np.uint32)))
    assert np.array_equal(ku, np.where(hit, 3, i % 200))

    grid = SparseFlipGrid(GridSpec((0.0, 0.0, 0.0), 0.1, shape), np, closed)
    grid.topology = topo
    grid._neighbours()
    wall = grid._mark_walls()
    want_coords = np.zeros((cap, 3), np.int64)
    want_coords[topo.slots] = brick_coords(topo.keys, np)
    assert np.array_equal(coords.reshape(cap, 3), want_coords)
    slot_of = dict(zip(topo.keys.tolist(), topo.slots.tolist()))
    want27 = np.full((cap, 27), -1, np.int64)
    for key, slot in zip(topo.keys.tolist(), topo.slots.tolist()):
        b = brick_coords(np.array([key]), np)[0]
        for o in range(27):
            nb = b + np.array([o % 3 - 1, (o // 3) % 3 - 1, o // 9 - 1])
            want27[slot, o] = slot_of.get(int(brick_keys(nb[None, :])[0]), -1)
    assert np.array_equal(nbr27.reshape(cap, 27), want27)
    assert np.array_equal(nbr.reshape(6, cells), grid.nbr)
    want_marks = np.stack([grid[n] for n in grid.EXISTS] + [wall, wall]).astype(np.int64)
    assert np.array_equal(marks.reshape(5, cells), want_marks)
    assert wall.any() == closed and want_marks[:3].any()
    assert not faces.any()  # the solid faces +0 everywhere
