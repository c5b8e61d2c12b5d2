"""``SparseMacGrid.retopologize`` on CuPy against NumPy's (issue 24's host-time cuts: a kept channel
grows uninitialised past its old slots and copied by one device copy, the added and freed slots
filled per list, or joined where three channels or more are kept; the lean growth's views; the
replaced channels left as they are; the kept channels' copies and fills one launch each for up to eight,
``VOXFX_SPARSE_KEPT_JOIN``): the same channels bit for bit (NaN backgrounds too), tables and used slots,
through bricks added, freed, reused and a growing pool."""

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.grid.sparse import brick_keys
from voxfx.kernels.grid.sparse_mac import SparseMacGrid

CHANNELS = (("u", np.float32, 0.0), ("mark", np.uint8, 0), ("p", np.float32, np.nan), ("solid_u", np.float32, 0.0),
            ("exists", np.uint8, 7), ("kept", np.float32, 0.0))
MORE = (("e0", np.float32, np.nan), ("e1", np.uint8, 1), ("e2", np.uint8, 0), ("e3", np.float32, 3.0),
        ("e4", np.uint8, 9), ("e5", np.float32, -0.0))  # with CHANNELS: 12 kept, two joined launches


@pytest.mark.parametrize("join", ["joined", "each"])
@pytest.mark.parametrize("rewritten, replaced, more", [(("mark", "solid_u"), (), False),
                                                      (("mark", "solid_u", "u"), ("kept",), False), ((), (), True)],
                         ids=["four-kept", "two-kept", "twelve-kept"])
def test_device_retopologize_gives_the_cpus(rewritten, replaced, more, join, monkeypatch):
    import cupy

    from voxfx.kernels.grid import sparse_mac

    monkeypatch.setenv("VOXFX_SPARSE_KEPT_JOIN", join)
    channels = CHANNELS + (MORE if more else ())
    launched = []
    launch = sparse_mac._K.launch
    monkeypatch.setattr(sparse_mac._K, "launch", lambda name, n, args: launched.append(name) or launch(name, n, args))

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    grids = {xp: SparseMacGrid((0.0, 0.0, 0.0), 0.1, xp) for xp in (np, cupy)}
    for g in grids.values():
        for name, dtype, bg in channels:
            g.add(name, dtype, bg)
    grew = both = 0
    for step in range(7):
        keys = brick_keys(rng.integers(-3, 4, (30 + 20 * step, 3)))
        data = np.random.default_rng(step)
        values = {name: (data.random(grids[np].size) * 200).astype(dtype) for name, dtype, _ in channels}
        for xp, g in grids.items():
            for name in values:
                g[name] = xp.asarray(values[name])
        update = grids[np].topology.update(keys)
        topo, added, freed = update
        grew += topo.capacity > grids[np].capacity
        both += bool(len(added) and len(freed))
        before = {name: grids[cupy][name] for name in replaced}
        used = np.zeros(topo.capacity, bool)
        used[topo.slots] = True
        grids[np].retopologize(None, rewritten=rewritten, update=update, replaced=replaced)
        device = (type(topo)(*(cupy.asarray(a) for a in (topo.keys, topo.slots)), topo.capacity,
                             cupy.asarray(topo.free), cupy), cupy.asarray(added), cupy.asarray(freed))
        grids[cupy].retopologize(None, rewritten=rewritten, update=device, used=cupy.asarray(used),
                                 lean=True if step % 2 else "classed", replaced=replaced)
        want, got = grids[np], grids[cupy]
        assert got.capacity == want.capacity
        assert np.array_equal(backend.to_numpy(got.brick_slot), want.brick_slot)
        assert np.array_equal(backend.to_numpy(got.nbr), want.nbr)
        assert all(got[name] is before[name] for name in replaced), step
        for name, _, _ in channels:
            if name not in replaced:
                a, b = want[name], backend.to_numpy(got[name])
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (step, name)
    assert grew >= 3 and both >= 2
    joined = join == "joined"  # the way under test ran: a copy launch a growth (two for twelve), fills joined
    assert launched.count("copy_channels_joined") == (2 if more else 1) * grew * joined
    assert ("fill_slots_joined" in launched) == joined and ("fill_slots_f32" in launched) != joined
