"""The fused tables queued ahead of the flags read (cuda/flip_sparse_topology_tables_ahead.cu,
``sparse_topology_tables_ahead``, ``VOXFX_SPARSE_TABLES_AHEAD=1``) checked on the host without a GPU
(tests/cuda_host.py): launched over ``room`` slots with the flags and the current topology's count and
capacity, they write exactly what ``topology_slot_tables`` and ``topology_cell_tables`` (no refill) write at
the host's sizes, where they end (the rest of their room untouched), and nothing at all where the flags say
no update (missed, beyond, the same bricks) or the new pool passes the room."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints
from tests.unit.test_cuda_sparse_topology_tables_host import READ_TOPOLOGY, topology
from voxfx.kernels.flip.sparse_topology_tables_ahead import sizes
from voxfx.kernels.grid.sparse import Topology, brick_coords, brick_keys

# Input: n_keys capacity (the new topology's); keys; slots; used (per slot); index lo (3) and dims (3), then its
# entries (dims 0: none); closed nx ny nz; flags (missed beyond added freed); n_old cap_old room. Output: the
# plain kernels' coords (3·cap), nbr27 (27·cap), nbr (6·cells), the 5 byte marks (cells each), the solid faces
# (3·cells, 0 where +0), then the ahead kernels' the same over room slots (sentinels where unwritten).
HARNESS = STUBS + r"""
#include "flip_sparse_topology.cu"
#include "flip_sparse_topology_tables_ahead.cu"
""" + DRIVER + r"""
struct Out {
    std::vector<int> coords, nbr27, nbr;
    std::vector<u8> eu, ev, ew, wall, solid;
    std::vector<float> su, sv, sw;
    explicit Out(ll slots) : coords(3 * slots, -7), nbr27(27 * slots, -7), nbr(6 * slots * 512, -7),
        eu(slots * 512, 7), ev(slots * 512, 7), ew(slots * 512, 7), wall(slots * 512, 7), solid(slots * 512, 7),
        su(slots * 512, 7.0f), sv(slots * 512, 7.0f), sw(slots * 512, 7.0f) {}
    void print() const {
        pr(coords); pr(nbr27); pr(nbr); pr(eu); pr(ev); pr(ew); pr(wall); pr(solid);
        for (const auto* a : {&su, &sv, &sw}) for (float x : *a) printf("%d\n", x == 0.0f && !std::signbit(x) ? 0 : 7);
    }
};
int main() {
""" + READ_TOPOLOGY + r"""    unsigned long long flags[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) scanf("%llu", &flags[i]);
    ll n_old, cap_old, room;
    scanf("%lld %lld %lld", &n_old, &cap_old, &room);
    void* none = nullptr;
    const ll cells = cap * 512;
    Out plain(cap), ahead(room);
    LAUNCH(27 * (n + cap), topology_slot_tables(keys.data(), slots.data(), n, index.data(), lo[0], lo[1], lo[2],
                                                d[0], d[1], d[2], used.data(), cap, plain.coords.data(),
                                                plain.nbr27.data()));
    LAUNCH(cells, topology_cell_tables(plain.nbr27.data(), used.data(), plain.coords.data(), cells, closed, nx, ny, nz,
                                       plain.nbr.data(), 1, plain.eu.data(), plain.ev.data(), plain.ew.data(),
                                       plain.wall.data(), plain.solid.data(), plain.su.data(), plain.sv.data(),
                                       plain.sw.data(), nullptr, 0, 0, none, none, none, none, none, none, none, none,
                                       0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u));
    // the fused update's outputs have room: the keys, slots and used slots padded past the new topology's
    std::vector<ll> rkeys(keys);
    std::vector<int> rslots(slots);
    std::vector<u8> rused(used);
    rkeys.resize(room + n, 1LL << 40);
    rslots.resize(room + n, 1 << 30);
    rused.resize(room, 1);
    LAUNCH(54 * room, topology_slot_tables_ahead(flags, rkeys.data(), rslots.data(), n_old, index.data(), lo[0], lo[1],
                                                 lo[2], d[0], d[1], d[2], rused.data(), cap_old, room,
                                                 ahead.coords.data(), ahead.nbr27.data()));
    LAUNCH(room * 512, topology_cell_tables_ahead(flags, n_old, cap_old, room, ahead.nbr27.data(), rused.data(),
                                                  ahead.coords.data(), closed, nx, ny, nz, ahead.nbr.data(), 1,
                                                  ahead.eu.data(), ahead.ev.data(), ahead.ew.data(),
                                                  ahead.wall.data(), ahead.solid.data(), ahead.su.data(),
                                                  ahead.sv.data(), ahead.sw.data()));
    plain.print();
    ahead.print();
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_ints(tmp_path_factory, HARNESS, (), "sparse_topology_tables_ahead")


def _split(out, slots):
    cells = slots * 512
    return np.split(out, np.cumsum([3 * slots, 27 * slots, 6 * cells, 5 * cells]))


# (case, flags, grown): the flags (missed, beyond, added, freed) and whether the pool grows; room: the new
# capacity plus *extra* (negative: the pool passes the room)
CASES = {
    "update": ((0, 0, 7, 4), False, 3, True),
    "grown": ((0, 0, 9, 4), True, 2, True),
    "grown, room exact": ((0, 0, 9, 4), True, 0, True),
    "added only": ((0, 0, 5, 0), False, 1, True),
    "freed only": ((0, 0, 0, 6), False, 1, True),
    "missed": ((1, 0, 7, 4), False, 3, False),
    "beyond": ((0, 2, 7, 4), False, 3, False),
    "the same bricks": ((0, 0, 0, 0), False, 3, False),
    "past the room": ((0, 0, 9, 4), True, -1, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tables_ahead_write_the_plain_tables_or_nothing(harness, case):
    flags, grown, extra, writes = CASES[case]
    rng = np.random.default_rng(list(CASES).index(case) + 5)
    shape = (40, 24, 32)
    topo = topology(rng, (-2, 7))
    if grown:  # packed: a pool that grew to the new count has no free slot
        topo = Topology.from_keys(topo.keys)
    cap, n = topo.capacity, topo.count
    n_old = n - flags[2] + flags[3]
    cap_old = n_old + 2 if grown else cap  # grown: a pool of n_old + 2 slots takes 5 more bricks
    if flags[:2] == (0, 0):
        assert sizes(n_old, cap_old, flags[2], flags[3]) == (n, cap)
    assert (cap > cap_old) == grown
    room = cap + extra
    used = np.zeros(cap, np.uint8)
    used[topo.slots] = 1
    dims = tuple(s // 8 + 2 for s in shape)
    table = np.full(dims[::-1], -1, np.int64)
    c = brick_coords(topo.keys, np) + 1
    inside = ((c >= 0) & (c < np.asarray(dims))).all(axis=1)
    table[c[inside, 2], c[inside, 1], c[inside, 0]] = topo.slots[inside]
    lines = [f"{n} {cap}", " ".join(map(str, topo.keys)), " ".join(map(str, topo.slots)), " ".join(map(str, used)),
             "-1 -1 -1", " ".join(map(str, dims)), " ".join(map(str, table.ravel())), f"1 {shape[0]} {shape[1]} "
             f"{shape[2]}", " ".join(map(str, flags)), f"{n_old} {cap_old} {room}"]
    out = harness(lines)
    cells = cap * 512
    size = 3 * cap + 27 * cap + 14 * cells
    plain, ahead = _split(out[:size], cap), _split(out[size:], room)
    assert np.count_nonzero(plain[1] >= 0) > n  # the plain tables hold neighbours (the comparison means something)
    sentinels = [np.full(a.shape, v) for a, v in zip(ahead, (-7, -7, -7, 7, 7))]
    if not writes:
        for got, want in zip(ahead, sentinels):
            assert np.array_equal(got, want)
        return
    rcells = room * 512
    assert np.array_equal(ahead[0][:3 * cap], plain[0]) and np.all(ahead[0][3 * cap:] == -7)
    assert np.array_equal(ahead[1][:27 * cap], plain[1]) and np.all(ahead[1][27 * cap:] == -7)
    assert np.array_equal(ahead[2][:6 * cells], plain[2]) and np.all(ahead[2][6 * cells:] == -7)
    for k in (3, 4):  # the marks (5 arrays), the solid faces (3): each one's first cells, the rest untouched
        per = ahead[k].reshape(-1, rcells)
        assert np.array_equal(per[:, :cells].ravel(), plain[k]) and np.all(per[:, cells:] == 7)
    assert plain[3].any() and not plain[4].any()
    assert brick_keys(brick_coords(topo.keys, np)).tolist() == topo.keys.tolist()


@pytest.mark.parametrize("count, capacity, added, freed, want", [
    (10, 12, 3, 1, (12, 12)), (10, 12, 5, 1, (14, 14)), (10, 10, 0, 4, (6, 10)), (0, 0, 4, 0, (4, 4))])
def test_sizes_are_the_topology_updates(count, capacity, added, freed, want):
    """``sizes``: the new count, the pool grown only past its free slots (``Topology.update``'s)."""
    assert sizes(count, capacity, added, freed) == want
    keys = np.arange(count, dtype=np.int64) * 3
    topo = Topology(keys, np.arange(count, dtype=np.int32), capacity,
                    np.arange(count, capacity, dtype=np.int32), np)
    new = np.union1d(keys[freed:], np.arange(added, dtype=np.int64) * 3 + 1)
    got, _, _ = topo.update(new)
    assert (got.count, got.capacity) == want
