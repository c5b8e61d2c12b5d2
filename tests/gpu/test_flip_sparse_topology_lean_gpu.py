"""The topology stage made lean (``sparse_topology_lean``, ``VOXFX_SPARSE_TOPOLOGY_LEAN``, issue 24, helper
s23e): the tables queued ahead in one allocation and the stage's launches with their arrays as kept addresses
give "0"'s grids and particles to the bit."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_tables_ahead_gpu import dam_break
from tests.gpu.test_flip_sparse_topology_gpu import assert_same_grids, drifted, host
from voxfx.kernels.flip import sparse_topology_gpu
from voxfx.kernels.flip import sparse_topology_lean as lean
from voxfx.kernels.flip import sparse_topology_tables_ahead as ahead
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid
from voxfx.kernels.grid import GridSpec


@pytest.fixture
def thin(monkeypatch):
    """Counts of the lean way's own calls: the tables queued in one allocation, the addresses made."""
    seen = {"queued": 0, "pointers": 0}
    queue, pointer = ahead._queue_thin, lean.pointer

    def queued(*a, **k):
        seen["queued"] += 1
        return queue(*a, **k)

    def pointed(a):
        seen["pointers"] += 1
        return pointer(a)

    monkeypatch.setattr(ahead, "_queue_thin", queued)
    monkeypatch.setattr(lean, "pointer", pointed)
    return seen


@pytest.mark.parametrize("tables", ["1", "0"])
@pytest.mark.parametrize("margins", ["device", "host"])
def test_lean_gives_the_plain_grid(monkeypatch, thin, margins, tables):
    """Two grids over 12 substeps of a drifting blob (bricks come and go, the pool grows past its room at
    substep 1, fast particles every third substep), per-brick margins (the host's, or learned on the device),
    a kept channel of background NaN written with noise before each update, the tables queued ahead or not:
    "1" against "0", the same grids to the bit after each substep (tables, marks, channels, brick index)."""
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_TABLES_AHEAD", tables)
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (64, 48, 40))
    up = np.asarray(spec.upper)
    spread = rng.normal(0, 1, (20000, 3))
    grids = {w: SparseFlipGrid(spec, cupy, True) for w in ("1", "0")}
    for g in grids.values():
        g.add("kept", np.float32, np.nan)
    changed = 0
    for step in range(12):
        scale = [0.06, 0.20, 0.08, 0.10, 0.12, 0.13, 0.12, 0.14, 0.11, 0.10, 0.09, 0.10][step] * up
        pos = cupy.asarray(drifted(0.4 * up, up, step, spread, scale))
        vel = cupy.asarray(rng.normal(0, 2.0 + 18.0 * (step % 3 == 2), (20000, 3)).astype(np.float32))
        reach = BrickReach(vel, 1 / 120, 9.81, spec.voxel_size)
        margin = sparse_topology_gpu.host_margin(reach) if margins == "host" else None
        noise = rng.normal(0, 1, grids["1"].size).astype(np.float32)
        before = grids["0"].topology.keys
        for way, g in grids.items():
            monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_LEAN", way)
            g["kept"] = cupy.asarray(noise[:g.size])
            g.update(pos, margin, reach=reach, scratch=True)
        after = grids["0"].topology.keys
        changed += step > 0 and (before.shape != after.shape or bool((before != after).any()))
        assert_same_grids(grids["1"], grids["0"], step, index=True)
    assert changed >= 6
    assert thin["pointers"] > 0
    assert (thin["queued"] > 0) == (tables == "1")


@pytest.mark.parametrize("timing", ["default", "fast"])
def test_lean_steps_give_the_same_particles_and_grids(monkeypatch, thin, timing):
    """A dam break stepped three frames with "1" and with "0", frame by frame in turn: the same particles,
    velocities, bricks, faces and carried channels to the bit after every frame; the lean way taken."""
    import cupy

    sims = {way: dam_break(cupy, timing) for way in ("1", "0")}
    for frame in range(3):
        for way, sim in sims.items():
            monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY_LEAN", way)
            sim.step(1 / 24)
        a, b = sims["1"], sims["0"]
        for x, y in ((a.pos, b.pos), (a.vel, b.vel), (a.grid.topology.keys, b.grid.topology.keys),
                     *zip(a.grid.faces(), b.grid.faces())):
            assert host(x).tobytes() == host(y).tobytes(), frame
        assert_same_grids(a.grid, b.grid, frame)
    assert thin["queued"] > 0 and thin["pointers"] > 0


def test_address_is_the_arrays_pointer():
    """``pointer`` is the array's first element's address (a view's too), kept: a kernel reading through it
    sees the array."""
    import cupy

    a = cupy.arange(64, dtype=cupy.int32)
    view = a[5:]
    assert lean.pointer(a) is lean.address(a.data.ptr)
    assert lean.pointer(view) is lean.address(a.data.ptr + 20)
    out = cupy.zeros(59, cupy.int32)
    copy = cupy.RawKernel(r'''extern "C" __global__ void copy(const int* a, int* b, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) b[i] = a[i]; }''', "copy")
    copy((1,), (64,), (lean.pointer(view), lean.pointer(out), np.int64(59)))
    assert (out.get() == np.arange(5, 64)).all()
