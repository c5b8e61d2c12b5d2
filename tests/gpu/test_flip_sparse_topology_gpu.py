"""The device topology updates (``sparse_topology_gpu.update_topology``, and
``update_topology_table`` and ``update_topology_fused`` over a closed domain's brick index,
issue 24) against
``Topology.update`` (``VOXFX_SPARSE_TOPOLOGY_UPDATE=array``) and the CPU grid: particles
that move, spread and gather over several substeps give the same keys, slots, free list,
capacity, neighbour tables and channels every time, through bricks added, freed, reused
and a growing pool; the fused update's brick index is the one ``brick_index`` builds."""

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_topology_gpu, sparse_topology_tables
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def host(a):
    return backend.to_numpy(a)


def drifted(centre, up, step, spread, scale):
    """The tests' blob at *step*: unit normal offsets *spread* scaled by *scale* about *centre*,
    drifting (0.02, 0.01, −0.01) of the box *up* a step (float32 positions)."""
    return (centre + np.array([0.02, 0.01, -0.01]) * up * step + spread * scale).astype(np.float32)


def assert_same_grids(a, b, step, margin=True, index=False):
    """Grids *a* and *b* after the same updates: the same capacity, keys, slots and free list, the
    same tables and channels to the bit; with *margin* the same learned margin, with *index* *a*'s
    cached brick index the one built afresh."""
    ta, tb = a.topology, b.topology
    assert ta.capacity == tb.capacity, step
    if margin:
        assert getattr(a, "last_margin", None) == getattr(b, "last_margin", None), step
    for x, y in ((ta.keys, tb.keys), (ta.slots, tb.slots), (ta.free, tb.free)):
        assert host(x).tobytes() == host(y).tobytes() and host(x).shape == host(y).shape, step
    for name in ("slot_coords", "brick_nbr", "nbr", "brick_slot"):
        x, y = host(getattr(a, name)), host(getattr(b, name))
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (name, step)
    for name in a.channels:
        x, y = host(a[name]), host(b[name])
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (name, step)
    if index:
        cached = sparse_topology_gpu.brick_index(a)
        a._brick_index = None
        assert np.array_equal(host(cached[0]), host(sparse_topology_gpu.brick_index(a)[0])), step


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_device_update_gives_the_array_update_and_the_cpus(monkeypatch, closed):
    import cupy

    calls = {"update_topology": [], "update_topology_table": [], "update_topology_fused": []}

    def counting(name):
        original = getattr(sparse_topology_gpu, name)

        def counted(*args, **kwargs):
            calls[name].append(1)
            return original(*args, **kwargs)

        monkeypatch.setattr(sparse_topology_gpu, name, counted)

    counting("update_topology")
    counting("update_topology_table")
    counting("update_topology_fused")
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    centre = np.array([0.3, 0.4, 0.5]) * up
    spread = rng.normal(0, 1, (20000, 3))
    grids = {"cpu": SparseFlipGrid(spec, np, closed), "table": SparseFlipGrid(spec, cupy, closed),
             "device": SparseFlipGrid(spec, cupy, closed), "array": SparseFlipGrid(spec, cupy, closed),
             "fused": SparseFlipGrid(spec, cupy, closed)}
    changed = 0
    for step in range(8):  # the blob drifts, spreads, then gathers (< 3 cells a step): bricks come and go
        scale = [0.10, 0.11, 0.12, 0.12, 0.11, 0.11, 0.11, 0.10][step] * up
        pos = drifted(centre, up, step, spread, scale)
        for name, g in grids.items():
            if name != "cpu":
                monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_UPDATE", name)
            xp = np if name == "cpu" else cupy
            added, freed = g.update(xp.asarray(pos), 4)
            if name == "cpu":
                changed += int(len(added) + len(freed) > 0)
        want = grids["cpu"]
        for name in ("table", "device", "array", "fused"):
            g = grids[name]
            t = g.topology
            assert np.array_equal(host(t.keys), want.topology.keys), (name, step)
            assert np.array_equal(host(t.slots), want.topology.slots), (name, step)
            assert np.array_equal(host(t.free), want.topology.free), (name, step)
            assert t.capacity == want.topology.capacity
            assert np.array_equal(host(g.nbr), want.nbr)
            assert np.array_equal(host(g.brick_slot), want.brick_slot), (name, step)
            for channel in ("exists_u", "exists_v", "exists_w", "wall", "solid", "u", "cell"):
                assert np.array_equal(host(g[channel]), want[channel]), (name, channel)
            if closed:  # the index the update left (fused: its own) is the one built afresh
                cached = sparse_topology_gpu.brick_index(g)
                g._brick_index = None
                assert np.array_equal(host(cached[0]), host(sparse_topology_gpu.brick_index(g)[0])), (name, step)
    # the device updates ran (the first build is not an update); open domains have no index: no table
    table_calls, fused_calls = len(calls["update_topology_table"]), len(calls["update_topology_fused"])
    assert changed >= 6 and len(calls["update_topology"]) >= (5 if closed else 15)
    assert (table_calls >= 5 and fused_calls >= 5) if closed else (table_calls == fused_calls == 0)


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_fused_tables_give_the_separate_tables_and_marks(monkeypatch, closed):
    """``VOXFX_SPARSE_TOPOLOGY_TABLES=fused`` (``fused_tables``: the slot tables, neighbours and,
    without obstacles, the marks in two launches) against ``separate`` over substeps whose
    bricks come and go and whose pool grows: the same brick tables, neighbours, marks and solid
    faces to the bit; with an obstacle the marks stay the separate way's (the tables fused)."""
    import cupy

    calls = []
    original = sparse_topology_tables.fused_tables

    def counted(grid, marks):
        calls.append(marks)
        return original(grid, marks)

    monkeypatch.setattr(sparse_topology_tables, "fused_tables", counted)
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {way: SparseFlipGrid(spec, cupy, closed) for way in sparse_topology_tables.TABLES}
    obstacle = np.array([[10, 10, 10], [11, 10, 10], [30, 20, 12]])
    for step in range(8):
        scale = [0.08, 0.10, 0.12, 0.13, 0.12, 0.11, 0.10, 0.09][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        ob = obstacle if step in (3, 4) else None
        for way, g in grids.items():
            monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_TABLES", way)
            g.update(pos, 4, obstacle=ob)
        a, b = grids["fused"], grids["separate"]
        assert a.capacity == b.capacity and np.array_equal(host(a.topology.slots), host(b.topology.slots))
        for name in ("slot_coords", "brick_nbr", "nbr", "brick_slot"):
            x, y = host(getattr(a, name)), host(getattr(b, name))
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (name, step)
        for name in (*SparseFlipGrid.MARKS, "cell", "u"):
            x, y = host(a[name]), host(b[name])
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (name, step)
        assert a.plain_marks == b.plain_marks == (ob is None)
    assert True in calls and False in calls  # marks fused without the obstacle, tables alone with it


def test_kept_scratch_gives_the_fresh_topology(monkeypatch):
    """``VOXFX_SPARSE_TOPOLOGY_SCRATCH=kept`` (the pipeline's scratch kept on the grid and zeroed
    again, the update's allocations at size classes) against ``fresh`` over substeps whose bricks
    come and go and whose pool grows, per-brick margins found on the device: the same keys, slots,
    free list, capacity, tables, marks and channels to the bit, and the scratch reused."""
    import cupy

    from voxfx.kernels.flip.sparse_grid import BrickReach

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    vel = cupy.asarray(rng.normal(0, 2.0, (20000, 3)).astype(np.float32))
    grids = {way: SparseFlipGrid(spec, cupy, True) for way in sparse_topology_gpu.SCRATCH_MODES}
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ROOM", "off")  # the kept scratch at its sizes (room's: its own test)
    reused, grew = 0, 0
    for step in range(10):
        scale = [0.06, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size)
        for way, g in grids.items():
            monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_SCRATCH", way)
            before = getattr(g, "_reach_scratch", None)
            capacity = g.capacity
            g.update(pos, None, reach=reach, scratch=True)
            if way == "kept":
                reused += int(before is not None and getattr(g, "_reach_scratch", None) is before)
                grew += int(g.capacity > capacity)
        a, b = grids["kept"], grids["fresh"]
        assert_same_grids(a, b, step, margin=False, index=True)
    assert reused >= 1 and grew >= 2


@pytest.mark.parametrize("margins", ["per brick", "one"])
def test_room_gives_the_topology_without_it(monkeypatch, margins):
    """``VOXFX_SPARSE_TOPOLOGY_ROOM=on`` (the pipeline's scratch and the fused update's outputs, in
    two sets, kept on the grid with room) against ``off``, over substeps whose bricks come and go,
    whose pool grows and whose fast particles make the pipeline run again with the learned radius:
    the same keys, slots, free list, capacity, tables, marks, channels and learned margin to the bit;
    the outputs' sets reused (never the one the installed topology holds), the scratch reused across
    a growth within its room."""
    import cupy

    from voxfx.kernels.flip import sparse_topology_update
    from voxfx.kernels.flip.sparse_grid import BrickReach

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {way: SparseFlipGrid(spec, cupy, True) for way in sparse_topology_update.ROOMS}
    kept_sets, scratch_reused, grew, changed = set(), 0, 0, 0
    for step in range(12):
        scale = [0.06, 0.08, 0.10, 0.11, 0.12, 0.13, 0.12, 0.14, 0.15, 0.11, 0.10, 0.09][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        vel = cupy.asarray(rng.normal(0, 2.0 + 18.0 * (step % 4 == 3), (20000, 3)).astype(np.float32))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size) if margins == "per brick" else None
        for way, g in grids.items():
            monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_ROOM", way)
            capacity = g.capacity
            scratch = getattr(g, "_reach_room", None)
            held = sparse_topology_update._installed(g) if g.topology.count else []
            before = g.topology
            g.update(pos, None if reach is not None else 3 + step % 4, reach=reach, scratch=True)
            if way == "on":
                grew += int(g.capacity > capacity)
                sets = getattr(g, "_fused_sets", ())
                assert len(sets) <= 2, step
                kept_sets.update(id(s[2]) for s in sets)
                if g.capacity > capacity and scratch is not None and scratch[0][0] >= capacity:
                    assert getattr(g, "_reach_room", None) is scratch, step  # the pool grew within its room
                    scratch_reused += 1
                if held and g.topology is not before:  # the new topology is in a set the old one did not hold
                    at = g.topology.keys.data.ptr
                    mine = [s for s in sets if s[2].data.ptr <= at < s[2].data.ptr + s[2].nbytes]
                    changed += int(bool(mine))
                    assert not any(sparse_topology_update._holds(s[2], held) for s in mine), step
        a, b = grids["on"], grids["off"]
        assert_same_grids(a, b, step, index=True)
    assert grew >= 2 and changed >= 6 and len(kept_sets) < changed
    if margins == "one":  # its pool grows a few bricks at a time (per brick: past the room at the fast substeps)
        assert scratch_reused >= 1


@pytest.mark.parametrize("margins", ["per brick", "one"])
def test_merged_pipeline_gives_the_separate_topology(monkeypatch, margins):
    """``VOXFX_SPARSE_TOPOLOGY_PIPELINE=merged`` (``reach_slots`` for the margins, class words and
    walks; the fused update's counts make the freed count) against ``separate``, with per-brick
    margins found on the device (fast particles: the radius learned, the pipeline run again) or one
    margin, over substeps whose bricks come and go and whose pool grows: the same keys, slots, free
    list, capacity, tables, marks, channels and learned margin to the bit, and the merged way taken."""

    from voxfx.kernels.flip import sparse_reach

    merged_calls = []
    original = sparse_reach.launch_slots

    def counted(*args, **kwargs):
        merged_calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(sparse_reach, "launch_slots", counted)
    _, grew, changed = ways_in_turn(monkeypatch, "VOXFX_SPARSE_TOPOLOGY_PIPELINE", sparse_topology_gpu.PIPELINES,
                                    "merged", "separate", margins)
    assert len(merged_calls) >= 8 and grew >= 2 and changed >= 6


def ways_in_turn(monkeypatch, variable, ways, way, other, margins, index=False):
    """(grids, grew, changed): a grid a way of *variable* updated in turn (the variable set to its way)
    over 10 substeps of a drifting blob whose bricks come and go and whose pool grows, its fast
    particles' margins per brick found on the device (*margins* "per brick") or one margin; *way*'s
    grid checked against *other*'s to the bit after every substep (``assert_same_grids``), *way*'s
    growths and changed substeps counted."""
    import cupy

    from voxfx.kernels.flip.sparse_grid import BrickReach

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {w: SparseFlipGrid(spec, cupy, True) for w in ways}
    grew, changed = 0, 0
    for step in range(10):
        scale = [0.06, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        vel = cupy.asarray(rng.normal(0, 2.0 + 18.0 * (step % 3 == 2), (20000, 3)).astype(np.float32))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size) if margins == "per brick" else None
        for w, g in grids.items():
            monkeypatch.setenv(variable, w)
            capacity = g.capacity
            added, freed = g.update(pos, None if reach is not None else 3 + step % 4, reach=reach, scratch=True)
            if w == way:
                grew += int(g.capacity > capacity)
                changed += int(len(added) + len(freed) > 0)
        assert_same_grids(grids[way], grids[other], step, index=index)
    return grids, grew, changed


def test_device_carve_and_segment_are_views_at_the_slices_addresses():
    """``carve_buffer`` and ``segment`` on CuPy (one ``ndarray`` over the memory, no slice): the
    views ``carve`` and slicing give, at the same addresses, disjoint, the allocation zeroed."""
    import cupy

    from voxfx.kernels.grid.sparse_mac import carve_buffer, segment

    buf, parts = carve_buffer(cupy, {"a": (np.uint8, 5), "b": (np.int64, (2, 3)), "c": (np.uint32, 70)}, zero=True)
    base = buf.data.ptr
    assert [p.data.ptr - base for p in parts.values()] == [0, 256, 512]
    assert [(p.shape, p.dtype) for p in parts.values()] == [((5,), np.uint8), ((2, 3), np.int64), ((70,), np.uint32)]
    assert int(buf.sum()) == 0 and buf.nbytes == 256 + 256 + 512
    parts["b"][...] = -1
    assert int(buf[256:304].sum()) == 48 * 255 and int(parts["a"].sum()) == 0 and int(parts["c"].sum()) == 0
    a = cupy.arange(40, dtype=cupy.uint8)
    part = segment(a, 3, 9)
    assert part.data.ptr == a.data.ptr + 3 and host(part).tolist() == list(range(3, 9))
    flags = segment(a, 0, 4, np.bool_)
    assert flags.dtype == np.bool_ and host(flags).tolist() == [False, True, True, True]
    assert segment(cupy.arange(10, dtype=cupy.int64), 8, 5).shape == (0,)
    wide = segment(cupy.arange(10, dtype=cupy.int64), 2, 5)
    assert host(wide).tolist() == [2, 3, 4]


@pytest.mark.parametrize("extra", [0, 2], ids=["seven kept", "nine kept"])
def test_kept_channels_filled_by_the_tables_give_retopologizes_fills(monkeypatch, extra):
    """``VOXFX_SPARSE_TOPOLOGY_FILL=tables`` (the fused update's refill marks, ``topology_cell_tables``
    writing the kept channels' backgrounds) against ``retopologize`` (its fills joined, or a launch a
    channel: ``VOXFX_SPARSE_KEPT_JOIN``) and the CPU grid, with the product's seven kept channels
    (the warm start's NaN-background pressure and the time-centred substep's faces and masks),
    written with fresh values each substep: the same grids to the bit through bricks added, freed,
    reused and a growing pool; the tables fill them (no fill launch) up to eight channels, and
    retopologize does past that."""
    import cupy

    from voxfx.kernels.grid import sparse_mac

    ways = {"cpu": None, "tables": ("tables", "joined"), "joined": ("retopologize", "joined"),
            "each": ("retopologize", "each")}
    kept = [("pressure_carried", np.float32, np.nan), *((f"kept_{c}", np.float32, 0) for c in "uvw"),
            *((f"kept_fluid_{c}", np.uint8, 0) for c in "uvw"), *((f"more{i}", np.uint8, 5) for i in range(extra))]
    launched = []
    monkeypatch.setenv("VOXFX_SPARSE_TABLES_AHEAD", "0")  # the plain tables fill (those queued ahead take no fills)
    launch = sparse_mac._K.launch
    monkeypatch.setattr(sparse_mac._K, "launch", lambda name, n, args: launched.append(name) or launch(name, n, args))
    fused = sparse_topology_gpu.update_topology_fused
    monkeypatch.setattr(sparse_topology_gpu, "update_topology_fused",
                        lambda *a: launched.append("update_topology_fused") or fused(*a))
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {way: SparseFlipGrid(spec, np if way == "cpu" else cupy, True) for way in ways}
    for g in grids.values():
        for name, dtype, bg in kept:
            g.add(name, dtype, bg)
    grew = changed = 0
    fills = {way: [] for way in ways}  # each fused update's fill launches
    for step in range(10):
        scale = [0.06, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09][step] * up
        pos = drifted(0.4 * up, up, step, spread, scale)
        size = grids["cpu"].size
        values = {name: (rng.random(size) * 100).astype(dtype) for name, dtype, _ in kept}
        for way, g in grids.items():
            xp = np if way == "cpu" else cupy
            if ways[way]:
                monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_FILL", ways[way][0])
                monkeypatch.setenv("VOXFX_SPARSE_KEPT_JOIN", ways[way][1])
            for name in values:
                g[name] = xp.asarray(values[name])
            capacity = g.capacity
            launched.clear()
            added, freed = g.update(xp.asarray(pos), 3 + step % 4, scratch=True)
            if "update_topology_fused" in launched:
                fills[way].append(sum(name.startswith("fill_slots") for name in launched))
            if way == "cpu":
                grew += int(g.capacity > capacity)
                changed += int(len(added) + len(freed) > 0)
        want = grids["cpu"]
        for way in ("tables", "joined", "each"):
            g = grids[way]
            assert_same_grids(g, grids["joined"], step, index=True)
            assert g.capacity == want.capacity and np.array_equal(host(g.topology.slots), want.topology.slots)
            for name, _, _ in kept:
                assert host(g[name]).tobytes() == want[name].tobytes(), (way, name, step)
    assert grew >= 2 and changed >= 6 and len(fills["tables"]) >= 5
    assert fills["tables"] == ([0] * len(fills["tables"]) if not extra else fills["joined"])
    assert fills["joined"] == [1 + (extra > 1)] * len(fills["joined"])  # one launch for eight channels
    assert fills["each"] == [7 + extra] * len(fills["each"])
