"""The fused table update of the sparse FLIP topology (cuda/flip_sparse_topology_fused.cu's
topology_fused_counts, topology_fused_pool, topology_fused_place: ``sparse_topology_gpu``'s
``VOXFX_SPARSE_TOPOLOGY_UPDATE=fused``, queued before the host read, sizes from the flags on the
device) gives ``Topology.update``'s topology of the bricks the reach masks name, the next
topology's brick index and its used slots, and writes nothing when the flags say no update.
Checked on the host without a GPU (tests/cuda_host.py: one "thread" a block, so a block's tile
is UPDATE_ITEMS items and the tiles' offsets are exercised across many blocks); the scenarios
are the table update's (test_cuda_sparse_topology_table_host.py). The device comparison is
tests/gpu/test_flip_sparse_topology_gpu.py."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints
from tests.unit.test_cuda_sparse_topology_table_host import DIMS, LOW, READ_SCENARIO, scenario

# Input: the table harness's, then whether to clear the flags' added and freed (no change) and whether
# topology_fused_counts makes the freed count (merged: no count_unkept first).
# Output: the flags (missed, beyond, added, freed), then (when an update was written) the new
# keys, slots, fresh, the pool past the reused slots, freed, the new index, the new used slots, the
# refill marks (freed or added: the slots retopologize fills).
HARNESS = STUBS + r"""
#include "flip_sparse_topology.cu"  // reach_compare_table, count_unkept: the flags, kept, claimed
#include "flip_sparse_topology_fused.cu"
""" + DRIVER + r"""
int main() {
""" + READ_SCENARIO + r"""
    int same, merged;
    scanf("%d %d", &same, &merged);
    unsigned long long flags[4] = {0, 0, 0, 0};
    LAUNCH(offsets * cap, reach_compare_table(mask.data(), coords.data(), cap, radius, index.data(), lx, ly, lz, dx,
                                              dy, dz, kept.data(), claimed.data(), &flags[2], &flags[1]));
    if (!merged) LAUNCH(cap, count_unkept(used.data(), kept.data(), cap, &flags[3]));  // merged: the counts'
    if (same) flags[2] = flags[3] = 0;
    const ll tile = UPDATE_ITEMS, pool_tiles = (cap + tile - 1) / tile;
    const ll tiles = pool_tiles + (entries + tile - 1) / tile;
    std::vector<int> totals(2 * tiles, -7), pool(cap, -7), freed(cap, -7), fresh(entries, -7), slots(entries, -7);
    std::vector<int> new_index(entries, -7);
    std::vector<ll> keys(entries, -7);
    std::vector<unsigned char> new_used(cap + entries, 7), refill(cap + entries, 7);
    LAUNCH(tiles, topology_fused_counts(flags, used.data(), kept.data(), cap, index.data(), claimed.data(), entries,
                                        pool_tiles, tiles, totals.data(), merged ? &flags[3] : nullptr));
    printf("%llu %llu %llu %llu\n", flags[0], flags[1], flags[2], flags[3]);
    LAUNCH(pool_tiles, topology_fused_pool(flags, used.data(), kept.data(), cap, totals.data(), tiles, pool.data(),
                                           freed.data(), new_used.data(), refill.data()));
    LAUNCH(tiles - pool_tiles, topology_fused_place(flags, index.data(), lx, ly, lz, dx, dy, dz, kept.data(),
                                                    claimed.data(), cap, nk, totals.data(), pool_tiles, tiles,
                                                    pool.data(), keys.data(), slots.data(), fresh.data(),
                                                    new_index.data(), new_used.data(), refill.data()));
    if (flags[1] || (flags[2] == 0 && flags[3] == 0)) {  // nothing written: every output as it was
        bool untouched = true;
        for (int x : totals) untouched = untouched && x == -7;
        for (int x : new_index) untouched = untouched && x == -7;
        for (unsigned char x : new_used) untouched = untouched && x == 7;
        for (unsigned char x : refill) untouched = untouched && x == 7;
        printf("%d\n", (int)untouched);
        return 0;
    }
    const ll n_add = (ll)flags[2], n_freed = (ll)flags[3], n_pool = cap - nk + n_freed, n_new = nk - n_freed + n_add;
    const ll capacity = cap + std::max(0LL, n_add - n_pool);
    for (ll i = 0; i < n_new; ++i) printf("%lld\n", keys[i]);
    for (ll i = 0; i < n_new; ++i) printf("%d\n", slots[i]);
    for (ll i = 0; i < n_add; ++i) printf("%d\n", fresh[i]);
    for (ll i = n_add; i < n_pool; ++i) printf("%d\n", pool[i]);
    for (ll i = 0; i < n_freed; ++i) printf("%d\n", freed[i]);
    for (ll i = 0; i < entries; ++i) printf("%d\n", new_index[i]);
    for (ll i = 0; i < capacity; ++i) printf("%d\n", (int)new_used[i]);
    for (ll i = 0; i < capacity; ++i) printf("%d\n", (int)refill[i]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    build = build_ints(tmp_path_factory, HARNESS, (), "sparse_topology_fused")

    def run(lines, same=False, merged=False):
        return build(lines[:-1] + [f"{lines[-1]} {int(same)} {int(merged)}"])

    return run


def index_of(topo):
    """The brick index of *topo* over the scenarios' index (slot, −1 elsewhere), as
    ``sparse_gpu.brick_index`` fills it."""
    z, y, x = np.meshgrid(*(np.arange(d) + LOW for d in DIMS[::-1]), indexing="ij")
    from voxfx.kernels.grid.sparse import brick_keys

    all_keys = brick_keys(np.stack([x, y, z], -1).reshape(-1, 3))
    index = np.full(all_keys.size, -1, np.int64)
    index[np.searchsorted(all_keys, topo.keys)] = topo.slots
    return index


@pytest.mark.parametrize("merged", [False, True], ids=["count_unkept", "counted by the update"])
@pytest.mark.parametrize("radius", [1, 2], ids=["27 offsets", "125 offsets"])
@pytest.mark.parametrize("kept_share", [0.9, 0.3], ids=["grow", "shrink"])
def test_fused_update_gives_topology_update(harness, radius, kept_share, merged):
    """Also with the merged pipeline's freed count (``topology_fused_counts`` given the flags'
    freed word in place of a ``count_unkept`` launch first): the same flags and topology."""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    topo, reached, lines = scenario(rng, radius, kept_share)
    out = harness(lines, merged=merged)
    missed, beyond, added, n_freed = (int(x) for x in out[:4])
    ref, fresh, freed = topo.update(reached)
    assert missed == beyond == 0 and added > 0 and n_freed > 0
    assert added == fresh.shape[0] and n_freed == freed.shape[0]
    n_new = ref.count
    got = np.split(out[4:], np.cumsum([n_new, n_new, added, ref.free.shape[0], n_freed, index_of(topo).size]))
    assert np.array_equal(got[0], ref.keys)
    assert np.array_equal(got[1], ref.slots)
    assert np.array_equal(got[2], fresh)
    assert np.array_equal(got[3], ref.free)
    assert np.array_equal(got[4], np.sort(freed))
    assert np.array_equal(got[5], index_of(ref))  # the next topology's brick index
    used = np.zeros(ref.capacity, np.int64)
    used[ref.slots] = 1
    assert np.array_equal(got[6][:ref.capacity], used)
    refill = np.zeros(ref.capacity, np.int64)  # every slot written: retopologize's two fill lists
    refill[fresh] = refill[freed] = 1
    assert np.array_equal(got[6][ref.capacity:], refill)
    assert (fresh[:, None] == freed[None, :]).any()  # a freed slot reused: in both lists, marked once


@pytest.mark.parametrize("merged", [False, True], ids=["count_unkept", "counted by the update"])
def test_grown_pool_takes_the_slots_past_the_capacity(harness, merged):
    """Adds beyond the free slots: the slots after the capacity, in key order (the table
    update's, ``Topology.update``'s growth), and used marks them."""
    for seed in range(40):
        rng = np.random.default_rng(seed)
        topo, reached, lines = scenario(rng, 2, 0.9)
        ref, fresh, freed = topo.update(reached)
        if ref.capacity > topo.capacity:
            break
    else:
        pytest.fail("no scenario grew the pool")
    out = harness(lines, merged=merged)
    n_new, added = ref.count, int(out[2])
    got = np.split(out[4:], np.cumsum([n_new, n_new, added]))
    assert np.array_equal(got[1], ref.slots) and np.array_equal(got[2], fresh)
    assert (got[2] >= topo.capacity).any()
    refill = out[-ref.capacity:]  # the grown slots are added ones: marked
    assert refill[topo.capacity:].all() and refill.sum() == len(set(fresh.tolist()) | set(freed.tolist()))


@pytest.mark.parametrize("case", ["same bricks", "beyond", "beyond, merged"])
def test_no_update_writes_nothing(harness, case):
    """(The merged pipeline's counts run unless a particle missed or a brick lies beyond: the
    same bricks then write their totals, which nothing reads.)"""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    _, _, lines = scenario(rng, 1, 0.5, reach_out=case != "same bricks")
    out = harness(lines, same=case == "same bricks", merged=case.endswith("merged"))
    assert out[-1] == 1 and out.size == 5
    assert (out[1] == 1) == case.startswith("beyond")


def test_topology_update_modes_take_fused(monkeypatch):
    from voxfx.kernels.flip import sparse_topology_gpu

    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_UPDATE", " Fused ")
    assert sparse_topology_gpu.topology_update_mode() == "fused"
