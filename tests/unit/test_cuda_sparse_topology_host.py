"""The device topology update (cuda/flip_sparse_topology.cu, ``sparse_topology_gpu.update_topology``)
gives ``Topology.update``'s topology, checked on the host without a GPU: nvcc builds the
kernels as host functions (one "thread" per call), and a C++ driver runs them in the order
update_topology launches them (CuPy's sort and scans: std::sort and std::partial_sum). The
device comparison is tests/gpu/test_flip_sparse_topology_gpu.py."""


import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit.test_cuda_exact import build_ints
from voxfx.kernels.grid.sparse import Topology, brick_keys

# The end of an update harness's main(): the new keys and slots, fresh, the pool (free slots
# ascending), freed; assert_update reads them. Shared with test_cuda_sparse_topology_table_host.py.
PRINT_UPDATE = r"""
    for (ll k : new_keys) printf("%lld\n", k);
    for (int s : new_slots) printf("%d\n", s);
    for (int s : fresh) printf("%d\n", s);
    for (int s : pool) printf("%d\n", s);
    for (int s : freed) printf("%d\n", s);
"""

# Input: m, the reached keys (−1: none; repeats); n_keys, capacity, keys, slots; per slot
# used and kept. Output: n_add, then the new keys, slots, fresh (n_add), the pool (free
# slots ascending), freed.
HARNESS = STUBS + r"""
#include "flip_sparse_topology.cu"
""" + DRIVER + r"""
int main() {
    ll m, nk, cap;
    if (scanf("%lld", &m) != 1) return 1;
    std::vector<ll> reached(m);
    for (auto& k : reached) scanf("%lld", &k);
    std::vector<ll> keys;
    std::vector<int> slots;
    read_bricks(nk, cap, keys, slots);
    std::vector<unsigned char> used(cap), kept(cap);
    for (auto& x : used) { int t; scanf("%d", &t); x = (unsigned char)t; }
    for (auto& x : kept) { int t; scanf("%d", &t); x = (unsigned char)t; }
    ll freed_count = 0;
    for (ll s = 0; s < cap; ++s) freed_count += used[s] && !kept[s];  // count_unkept's flag
    std::sort(reached.begin(), reached.end());
    std::vector<ll> marks(m), free(cap);
    LAUNCH(m, topology_heads(reached.data(), m, keys.data(), slots.data(), nk, marks.data()));
    std::partial_sum(marks.begin(), marks.end(), marks.begin());
    LAUNCH(cap, topology_free(used.data(), kept.data(), cap, free.data()));
    std::partial_sum(free.begin(), free.end(), free.begin());
    const ll n_add = m ? marks[m - 1] >> 32 : 0, n_pool = cap - nk + freed_count;
    std::vector<int> pool(n_pool), freed(freed_count);
    LAUNCH(cap, topology_pool(free.data(), cap, pool.data(), freed.data()));
    const ll n_new = nk - freed_count + n_add;
    std::vector<ll> new_keys(n_new, -7);
    std::vector<int> new_slots(n_new, -7), fresh(n_add, -7);
    LAUNCH(m, topology_place(reached.data(), m, marks.data(), keys.data(), slots.data(), nk, pool.data(), n_pool, cap,
                             new_keys.data(), new_slots.data(), fresh.data()));
    printf("%lld\n", n_add);
""" + PRINT_UPDATE + r"""    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_ints(tmp_path_factory, HARNESS, (), "sparse_topology")


def assert_update(words, topo, ref, fresh, freed):
    """PRINT_UPDATE's *words* are ``topo.update``'s (*ref*, *fresh*, *freed*): the new keys and
    slots, fresh, the pool past the reused slots (the new free list), freed sorted. Returns
    the pool's size (the free slots before the update plus the freed)."""
    n_new, n_add = ref.count, fresh.shape[0]
    n_pool = topo.capacity - topo.count + freed.shape[0]
    got = np.split(words, np.cumsum([n_new, n_new, n_add, n_pool]))
    assert np.array_equal(got[0], ref.keys)
    assert np.array_equal(got[1], ref.slots)
    assert np.array_equal(got[2], fresh)
    assert np.array_equal(got[3][n_add:], ref.free)  # the new free list: the pool past the reused
    assert np.array_equal(got[4], np.sort(freed))
    return n_pool


def keys_of(rng, n):
    return np.unique(brick_keys(rng.integers(-6, 6, (n, 3))))


@pytest.mark.parametrize("case", ["grow", "reuse", "shrink"])
def test_device_update_gives_topology_update(harness, case):
    """grow: more bricks added than free slots (the pool reused, then the capacity grows);
    reuse: fewer; shrink: none added."""
    rng = np.random.default_rng(["grow", "reuse", "shrink"].index(case) + 5)
    topo = Topology.from_keys(keys_of(rng, 300))
    topo, _, _ = topo.update(np.concatenate([topo.keys[::3], keys_of(rng, 40)]))  # free slots to reuse
    assert topo.free.shape[0] > 0
    kept_keys = topo.keys[rng.random(topo.count) < {"grow": 0.9, "reuse": 0.6, "shrink": 0.3}[case]]
    extra = {"grow": 600, "reuse": 40, "shrink": 0}[case]
    new = np.setdiff1d(keys_of(rng, extra), topo.keys) if extra else np.zeros(0, np.int64)
    want_keys = np.union1d(kept_keys, new)
    reached = np.concatenate([np.repeat(want_keys, rng.integers(1, 4, want_keys.shape[0])),
                              np.full(500, -1, np.int64)])
    rng.shuffle(reached)
    used = np.zeros(topo.capacity, np.uint8)
    used[topo.slots] = 1
    kept = np.zeros(topo.capacity, np.uint8)
    kept[topo.slots[np.isin(topo.keys, want_keys)]] = 1
    lines = [str(reached.size), " ".join(map(str, reached)), f"{topo.count} {topo.capacity}",
             " ".join(map(str, topo.keys)), " ".join(map(str, topo.slots)), " ".join(map(str, used)),
             " ".join(map(str, kept))]
    out = harness(lines)
    ref, added, freed = topo.update(reached[reached >= 0])
    n_add = int(out[0])
    assert n_add == added.shape[0]
    n_pool = assert_update(out[1:], topo, ref, added, freed)
    assert ref.capacity == topo.capacity + max(0, n_add - n_pool)
    assert {"grow": n_add > n_pool, "reuse": 0 < n_add < n_pool, "shrink": n_add == 0}[case]
    assert freed.shape[0] > 0
