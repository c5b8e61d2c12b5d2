"""The sparse brick core (issue 11, first increment): keys, the sorted-key index, the
topology build from voxel boxes (seed 003 §5.1), the incremental update that keeps slots
(§5.2) and the dense exchange, checked against plain Python sets and dense arrays."""

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import sparse
from voxfx.kernels.grid.sparse import BRICK, SparseGrid, Topology, brick_coords, brick_keys, keys_of_boxes


def box_bricks(lo, hi):
    """Oracle: the set of brick coordinates the inclusive voxel boxes touch (Python ints)."""
    out = set()
    for a, b in zip(lo, hi):
        rng = [range(int(a[d]) // BRICK, int(b[d]) // BRICK + 1) for d in range(3)]
        out |= {(x, y, z) for z in rng[2] for y in rng[1] for x in rng[0]}
    return out


def test_keys_round_trip_and_sort_z_major():
    rs = np.random.default_rng(0)
    b = rs.integers(-sparse.OFFSET, sparse.OFFSET, (5000, 3))
    keys = brick_keys(b)
    assert np.array_equal(brick_coords(keys), b)
    order = np.lexsort((b[:, 0], b[:, 1], b[:, 2]))  # z, then y, then x
    assert np.array_equal(np.argsort(keys, kind="stable"), order)


def test_keys_refuse_coordinates_beyond_the_lattice():
    with pytest.raises(InputError, match="8,388,608"):
        brick_keys(np.array([[sparse.OFFSET, 0, 0]]))
    with pytest.raises(InputError):
        brick_keys(np.array([[0, 0, -sparse.OFFSET - 1]]))


def test_build_from_boxes_matches_the_set_oracle_with_negative_coordinates():
    rs = np.random.default_rng(1)
    lo = rs.integers(-200, 200, (400, 3))
    hi = lo + rs.integers(0, 30, (400, 3))
    topo = Topology.from_boxes(lo, hi)
    want = box_bricks(lo, hi)
    got = {tuple(int(v) for v in c) for c in topo.coords()}
    assert got == want and topo.count == len(want)
    assert np.all(np.diff(topo.keys) > 0)


def test_build_in_chunks_equals_one_pass(monkeypatch):
    rs = np.random.default_rng(2)
    lo = rs.integers(-100, 100, (300, 3))
    hi = lo + rs.integers(0, 40, (300, 3))
    whole = keys_of_boxes(lo, hi)
    monkeypatch.setattr(sparse, "BUILD_CHUNK", 7)
    assert np.array_equal(keys_of_boxes(lo, hi), whole)


def test_lookup_finds_active_bricks_and_only_them():
    topo = Topology.from_keys(brick_keys(np.array([[0, 0, 0], [5, -3, 2], [-7, 1, 1]])))
    q = brick_keys(np.array([[5, -3, 2], [1, 0, 0], [-7, 1, 1], [0, 0, 0], [100, 100, 100]]))
    slots = topo.lookup(q)
    assert slots[1] == -1 and slots[4] == -1
    assert sorted(slots[[0, 2, 3]].tolist()) == [0, 1, 2]
    assert np.array_equal(topo.lookup(topo.keys), topo.slots)


def test_update_keeps_slots_reuses_freed_ones_and_keeps_data():
    rs = np.random.default_rng(3)
    a = {tuple(v) for v in rs.integers(-20, 20, (300, 3)).tolist()}
    b = set(list(a)[:200]) | {tuple(v) for v in rs.integers(-20, 20, (150, 3)).tolist()}
    ka, kb = brick_keys(np.array(sorted(a))), brick_keys(np.array(sorted(b)))
    grid = SparseGrid(Topology.from_keys(ka))
    data = grid.add_channel("phi", np.float32, background=7.0)
    before = {int(k): int(s) for k, s in zip(grid.topology.keys, grid.topology.slots)}
    data[:] = np.arange(data.shape[0], dtype=np.float32)[:, None, None, None]  # brick id in every voxel
    added, freed = grid.retopologize(kb[::-1])  # any order
    t = grid.topology
    after = {int(k): int(s) for k, s in zip(t.keys, t.slots)}
    assert set(after) == {int(k) for k in kb}
    kept = set(before) & set(after)
    assert all(after[k] == before[k] for k in kept)  # §5.2: kept bricks keep their slots
    assert len(set(after.values())) == len(after)  # no slot used twice
    assert len(freed) == len(set(before) - set(after)) and len(added) == len(set(after) - set(before))
    assert t.capacity == max(len(a), len(after))  # freed slots reused before the pool grows
    phi = grid.channels["phi"]
    for k in kept:
        assert np.all(phi[after[k]] == before[k])
    for s in added.tolist():
        assert np.all(phi[s] == 7.0)  # new bricks start at the background


@pytest.mark.parametrize("comp", [(), (3,)])
def test_dense_round_trip_with_an_offset_origin(comp):
    rs = np.random.default_rng(4)
    shape = (21, 13, 30)  # nx, ny, nz: not multiples of 8
    dense = np.zeros((shape[2], shape[1], shape[0]) + comp, np.float32)
    for _ in range(6):
        z, y, x = rs.integers(0, 13, 3)
        dense[z:z + 3, y:y + 2, x:x + 4] = rs.standard_normal((1,) * 3 + comp)
    origin_ijk = (-11, 5, -3)
    grid = SparseGrid.from_dense("v", dense, origin_ijk)
    assert grid.topology.count < (4 * 3 * 5)  # empty bricks are not stored
    assert np.array_equal(grid.to_dense("v", origin_ijk, shape), dense)
    # A larger window: the rest is background.
    window = (origin_ijk[0] - 9, origin_ijk[1], origin_ijk[2] - 1)
    big = grid.to_dense("v", window, (shape[0] + 20, shape[1], shape[2] + 2))
    assert np.array_equal(big[1:-1, :, 9:9 + shape[0]], dense)
    assert not big[0].any() and not big[-1].any()
    assert grid.nbytes == grid.topology.count * BRICK ** 3 * 4 * (comp[0] if comp else 1) + 12 * grid.topology.count


def test_empty_inputs():
    topo = Topology.from_boxes(np.zeros((0, 3), int), np.zeros((0, 3), int))
    assert topo.count == 0 and np.all(topo.lookup(brick_keys(np.array([[1, 2, 3]]))) == -1)
    grid = SparseGrid.from_dense("v", np.zeros((4, 4, 4), np.uint8), (0, 0, 0))
    assert grid.topology.count == 0 and not grid.to_dense("v", (0, 0, 0), (4, 4, 4)).any()


def test_points_touch_the_bricks_of_their_influence_box():
    rs = np.random.default_rng(5)
    pos = rs.uniform(-3.0, 3.0, (2000, 3))
    h, r, origin = 0.05, 0.12, (0.3, -0.2, 0.1)
    topo = Topology.from_points(pos, origin, h, r)
    lo = np.floor((pos - r - origin) / h).astype(int)
    hi = np.floor((pos + r - origin) / h).astype(int)
    assert {tuple(int(v) for v in c) for c in topo.coords()} == box_bricks(lo, hi)
    with pytest.raises(InputError, match="finite"):
        Topology.from_points(np.array([[0.0, np.nan, 0.0]]), origin, h)
