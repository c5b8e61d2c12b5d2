"""The table update of the sparse FLIP topology (cuda/flip_sparse_topology.cu's
reach_compare_table, topology_table_marks, topology_table_place: ``sparse_topology_gpu``'s update
over a closed domain's brick index, no key list, no sort, no host read of its own) gives
``Topology.update``'s topology of the bricks the reach masks name, and counts each added
brick once (the flags the pipeline reads hold the new sizes). Checked on the host without
a GPU: nvcc builds the kernels as host functions (one "thread" per call, atomics plain),
and a C++ driver runs them in the order ``sparse_topology_gpu`` launches them (CuPy's scans:
std::partial_sum). The device comparison is tests/gpu/test_flip_sparse_topology_gpu.py."""


import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints
from tests.unit.test_cuda_sparse_topology_host import PRINT_UPDATE, assert_update
from voxfx.kernels.grid.sparse import Topology, brick_coords, brick_keys

# Input: radius, index lowest brick and dims, the index (slot or −1); capacity, per slot
# used, coords (x y z), mask words; n_keys. Output: added, beyond, freed (count_unkept),
# then the new keys, slots, fresh (added), the pool (free slots ascending), freed.
# The input read into a harness's main() (the fused update's harness reads the same).
READ_SCENARIO = r"""
    int radius, lx, ly, lz, dx, dy, dz;
    ll cap, nk;
    if (scanf("%d %d %d %d %d %d %d", &radius, &lx, &ly, &lz, &dx, &dy, &dz) != 7) return 1;
    const ll entries = (ll)dx * dy * dz;
    std::vector<int> index(entries);
    for (auto& s : index) scanf("%d", &s);
    scanf("%lld", &cap);
    const int side = 2 * radius + 1, offsets = side * side * side, words = (offsets + 31) / 32;
    std::vector<unsigned char> used(cap);
    for (auto& x : used) { int t; scanf("%d", &t); x = (unsigned char)t; }
    std::vector<int> coords(3 * cap);
    for (auto& c : coords) scanf("%d", &c);
    std::vector<unsigned> mask(cap * words);
    for (auto& w : mask) scanf("%u", &w);
    scanf("%lld", &nk);
    std::vector<unsigned char> kept(cap, 0);
    std::vector<unsigned> claimed(entries, 0);
"""
HARNESS = STUBS + r"""
#include "flip_sparse_topology.cu"
""" + DRIVER + r"""
int main() {
""" + READ_SCENARIO + r"""
    unsigned long long added = 0, beyond = 0, freed_count = 0;
    LAUNCH(offsets * cap, reach_compare_table(mask.data(), coords.data(), cap, radius, index.data(), lx, ly, lz, dx,
                                              dy, dz, kept.data(), claimed.data(), &added, &beyond));
    for (ll s = 0; s < cap; ++s) freed_count += used[s] && !kept[s];  // count_unkept's flag
    printf("%llu %llu %llu\n", added, beyond, freed_count);
    if (beyond) return 0;
    std::vector<ll> marks(entries), free(cap);
    LAUNCH(entries, topology_table_marks(index.data(), entries, kept.data(), claimed.data(), marks.data()));
    std::partial_sum(marks.begin(), marks.end(), marks.begin());
    LAUNCH(cap, topology_free(used.data(), kept.data(), cap, free.data()));
    std::partial_sum(free.begin(), free.end(), free.begin());
    const ll n_add = (ll)added, n_pool = cap - nk + (ll)freed_count, n_new = nk - (ll)freed_count + n_add;
    std::vector<int> pool(n_pool), freed(freed_count);
    LAUNCH(cap, topology_pool(free.data(), cap, pool.data(), freed.data()));
    std::vector<ll> new_keys(n_new, -7);
    std::vector<int> new_slots(n_new, -7), fresh(n_add, -7);
    LAUNCH(entries, topology_table_place(marks.data(), index.data(), lx, ly, lz, dx, dy, dz, pool.data(), n_pool, cap,
                                         new_keys.data(), new_slots.data(), fresh.data()));
""" + PRINT_UPDATE + r"""    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_ints(tmp_path_factory, HARNESS, (), "sparse_topology_table")


DIMS = (7, 6, 5)  # a closed 40 × 32 × 24 box's bricks and wall ring: bricks −1 … 5, 4, 3
LOW = -1


def scenario(rng, radius, kept_share, reach_out=False):
    """A topology over the index's bricks with free slots, and reach masks whose bricks keep
    about *kept_share* of it and add others (repeats across slots); with *reach_out*, one
    bit names a brick past the index."""
    z, y, x = np.meshgrid(*(np.arange(d) + LOW for d in DIMS[::-1]), indexing="ij")
    table = np.stack([x, y, z], -1).reshape(-1, 3)  # entry (z·dy + y)·dx + x
    all_keys = brick_keys(table)
    assert (np.diff(all_keys) > 0).all()  # the index's order is the keys' (the kernels' premise)
    topo = Topology.from_keys(all_keys[rng.random(all_keys.size) < 0.5])
    topo, _, _ = topo.update(np.concatenate([topo.keys[::3], all_keys[rng.random(all_keys.size) < 0.1]]))
    assert topo.free.shape[0] > 0
    side = 2 * radius + 1
    offsets, words = side ** 3, -(-side ** 3 // 32)
    coords = np.zeros((topo.capacity, 3), np.int64)
    coords[topo.slots] = brick_coords(topo.keys)
    used = np.zeros(topo.capacity, np.uint8)
    used[topo.slots] = 1
    o = np.arange(offsets)
    step = np.stack([o % side, (o // side) % side, o // side ** 2], 1) - radius
    bits = np.zeros((topo.capacity, offsets), bool)
    for s in topo.slots:
        target = coords[s] + step
        inside = ((target >= LOW) & (target < LOW + np.array(DIMS))).all(1)
        bits[s] = inside & (rng.random(offsets) < kept_share / 4)
    # Both kinds of change, whatever the draw: the last slot's brick is reached by none (freed),
    # and a slot reaches a brick of the index outside the topology (added).
    victim = coords[topo.slots[-1]]
    for s in topo.slots:
        bits[s] &= ~(coords[s] + step == victim).all(1)
    for s in topo.slots:
        target = coords[s] + step
        inside = ((target >= LOW) & (target < LOW + np.array(DIMS))).all(1)
        absent = np.flatnonzero(inside & ~np.isin(brick_keys(target), topo.keys) & ~(target == victim).all(1))
        if absent.size:
            bits[s, absent[0]] = True
            break
    if reach_out:
        s = topo.slots[0]
        outside = np.flatnonzero(~((coords[s] + step >= LOW) & (coords[s] + step < LOW + np.array(DIMS))).all(1))
        bits[s, outside[0]] = True
    reached = np.concatenate([brick_keys(coords[s] + step[bits[s]]) for s in topo.slots])
    padded = np.zeros((topo.capacity, 32 * words), np.uint64)
    padded[:, :offsets] = bits
    mask = (padded.reshape(topo.capacity, words, 32) << np.arange(32, dtype=np.uint64)).sum(2)
    index = np.full(all_keys.size, -1, np.int64)
    index[np.searchsorted(all_keys, topo.keys)] = topo.slots
    lines = [f"{radius} {LOW} {LOW} {LOW} {DIMS[0]} {DIMS[1]} {DIMS[2]}", " ".join(map(str, index)),
             str(topo.capacity), " ".join(map(str, used)), " ".join(map(str, coords.reshape(-1))),
             " ".join(map(str, mask.reshape(-1))), str(topo.count)]
    return topo, reached, lines


@pytest.mark.parametrize("radius", [1, 2], ids=["27 offsets", "125 offsets"])
@pytest.mark.parametrize("kept_share", [0.9, 0.3], ids=["grow", "shrink"])
def test_table_update_gives_topology_update(harness, radius, kept_share):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    topo, reached, lines = scenario(rng, radius, kept_share)
    out = harness(lines)
    added, beyond, n_freed = (int(x) for x in out[:3])
    ref, fresh, freed = topo.update(reached)
    assert beyond == 0
    assert added == fresh.shape[0] == np.setdiff1d(reached, topo.keys).size  # each added brick once
    assert n_freed == freed.shape[0]
    assert_update(out[3:], topo, ref, fresh, freed)
    assert added > 0 and n_freed > 0


def test_a_brick_past_the_index_sends_the_update_elsewhere(harness):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    _, _, lines = scenario(rng, 1, 0.5, reach_out=True)
    out = harness(lines)
    assert out[1] == 1 and out.size == 3  # beyond counted: no update written


def test_topology_update_modes_are_checked(monkeypatch):
    from voxfx.kernels.flip import sparse_topology_gpu

    monkeypatch.delenv("VOXFX_SPARSE_TOPOLOGY_UPDATE", raising=False)
    assert sparse_topology_gpu.topology_update_mode() == "fused"  # the default (device where there is no brick index)
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_UPDATE", "Device")
    assert sparse_topology_gpu.topology_update_mode() == "device"
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_UPDATE", "sorted")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_TOPOLOGY_UPDATE"):
        sparse_topology_gpu.topology_update_mode()
