"""``SparseMacGrid.retopologize``'s lean way (the fused topology update's, issue 24): the
rewritten channels of background 0 that grow are views of one zeroed allocation, and the used
slots may come from the update; the channels, tables and used slots are those of the plain
way, through growth and reuse, with rewritten and kept channels of several dtypes and a NaN
background interleaved (a kept channel before a rewritten one once reused the name of the
carved views)."""

import numpy as np

from voxfx.kernels.grid.sparse import brick_keys
from voxfx.kernels.grid.sparse_mac import CELLS, SparseMacGrid, carve, carve_buffer, classed_empty, segment, size_class

CHANNELS = (("u", np.float32, 0.0), ("mark", np.uint8, 0), ("p", np.float32, np.nan), ("solid_u", np.float32, 0.0),
            ("exists", np.uint8, 0), ("kept", np.float32, 0.0))
REWRITTEN = ("mark", "solid_u", "exists")


def root(a):
    while a.base is not None:
        a = a.base
    return a


def grid_with(rng):
    g = SparseMacGrid((0.0, 0.0, 0.0), 0.1, np)
    for name, dtype, bg in CHANNELS:
        g.add(name, dtype, bg)
    return g


def fill_random(g, rng):
    for name, dtype, _ in CHANNELS:
        g[name] = (rng.random(g.size) * 200).astype(dtype)


def updates(plain, lean):
    """Six topology updates of growing random brick sets on the grids *plain* and *lean* (the
    same data written into both first): yields (step, plain's update)."""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    for step in range(6):
        keys = brick_keys(rng.integers(-3, 4, (40 + 25 * step, 3)))
        for g in (plain, lean):
            fill_random(g, np.random.default_rng(step))  # the same data in both
        yield step, plain.topology.update(keys)


def test_lean_retopologize_gives_the_plain_one():
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    plain, lean = grid_with(rng), grid_with(rng)
    grew = 0
    for step, update in updates(plain, lean):
        topo = update[0]
        used = np.zeros(topo.capacity, bool)
        used[topo.slots] = True
        old = plain.capacity
        plain.retopologize(None, rewritten=REWRITTEN, update=update)
        lean.retopologize(None, rewritten=REWRITTEN, update=update, used=used, lean=True if step % 2 else "classed")
        grew += plain.capacity > old
        if plain.capacity > old:  # the grown rewritten channels share one allocation; the others do not
            assert len({id(root(lean[n])) for n in REWRITTEN}) == 1, step
            assert root(lean["kept"]) is not root(lean["mark"]) and root(lean["u"]) is not root(lean["mark"])
        assert plain.capacity == lean.capacity
        assert np.array_equal(plain.brick_slot, lean.brick_slot)
        assert np.array_equal(plain.nbr, lean.nbr)
        for name, _, _ in CHANNELS:
            a, b = plain[name], lean[name]
            assert a.dtype == b.dtype and a.shape == b.shape == (plain.size,), name
            assert a.tobytes() == b.tobytes(), (step, name)  # bit for bit (NaN backgrounds too)
    assert grew >= 3


def test_carve_gives_aligned_views_of_one_allocation():
    parts = carve(np, {"a": (np.uint8, 5), "b": (np.uint64, 3), "c": (np.int32, CELLS)}, zero=True)
    assert [p.dtype for p in parts.values()] == [np.uint8, np.uint64, np.int32]
    assert [p.size for p in parts.values()] == [5, 3, CELLS]
    base = parts["a"].__array_interface__["data"][0]
    offsets = [p.__array_interface__["data"][0] - base for p in parts.values()]
    assert offsets == [0, 256, 512] and all(not p.any() for p in parts.values())
    parts["b"][:] = 7
    assert parts["a"].sum() == 0 and parts["c"].sum() == 0  # no overlap


def test_carve_takes_shapes_and_leaves_memory_unset_unless_zeroed():
    """The pressure set-up's level-0 arrays: (3, n) rows beside flat ones, not zeroed."""
    n = 1000
    parts = carve(np, {"keys": (np.int64, n), "flags": (np.int32, (3, n)), "scans": (np.int32, (3, n))})
    assert [p.shape for p in parts.values()] == [(n,), (3, n), (3, n)]
    assert all(p.flags.c_contiguous for p in parts.values())
    base = parts["keys"].__array_interface__["data"][0]
    offsets = [p.__array_interface__["data"][0] - base for p in parts.values()]
    assert offsets == [0, 8192, 8192 + 12032]  # 8000 and 12000 bytes, each rounded up to 256
    assert not any(np.shares_memory(a, b) for a, b in [(parts["keys"], parts["flags"]),
                                                       (parts["flags"], parts["scans"])])


def test_size_classes_round_up_by_at_most_an_eighth():
    sizes = [1, 2, 15, 16, 17, 31, 32, 33, 100, 511, 512, 1000, 4097, 10 ** 6, 123_456_789]
    for n in sizes:
        c = size_class(n)
        assert n <= c <= n + n / 8 and size_class(c) == c, n
    classes = {size_class(n) for n in range(1000, 2001)}
    assert len(classes) <= 10  # sizes that creep up ask for few distinct allocations


def test_classed_views_have_the_exact_shape_of_a_larger_allocation():
    parts = carve(np, {"a": (np.int32, (3, 1000))}, zero=True, classed=True)
    assert parts["a"].shape == (3, 1000) and not parts["a"].any()
    assert root(parts["a"]).nbytes == size_class(12000) > 12000
    a = classed_empty(np, (7, 27), np.int32)
    assert a.shape == (7, 27) and a.dtype == np.int32 and a.flags.c_contiguous


def test_carve_buffer_is_the_views_allocation():
    buf, parts = carve_buffer(np, {"a": (np.uint8, 5), "b": (np.int64, (2, 3))}, zero=True, classed=True)
    assert buf.dtype == np.uint8 and buf.nbytes == size_class(512)
    assert all(root(p) is buf for p in parts.values())


def test_segment_is_the_slice():
    a = np.arange(40, dtype=np.uint8)
    assert np.array_equal(segment(a, 3, 9), a[3:9]) and np.shares_memory(segment(a, 3, 9), a)
    assert segment(a, 7, 5).shape == (0,)  # an empty range (stop before start)
    assert segment(a, 0, 4, np.bool_).dtype == np.bool_ and segment(a, 0, 4, np.bool_).tolist() == [0, 1, 1, 1]


def test_replaced_channels_are_left_as_they_are():
    """``retopologize(replaced=...)``: a channel the caller replaces next is neither resized nor
    filled (the same array object), through growth and reuse; the others as without it."""
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    plain, lean = grid_with(rng), grid_with(rng)
    grew = 0
    for step, update in updates(plain, lean):
        before = {n: lean[n] for n in ("u", "mark")}
        grew += update[0].capacity > plain.capacity
        plain.retopologize(None, rewritten=REWRITTEN, update=update)
        lean.retopologize(None, rewritten=REWRITTEN, update=update, lean=True, replaced=("u", "mark"))
        assert all(lean[n] is before[n] for n in before), step
        for name, _, _ in CHANNELS:
            if name not in before:
                assert plain[name].tobytes() == lean[name].tobytes(), (step, name)
        assert np.array_equal(plain.nbr, lean.nbr)
    assert grew >= 3
