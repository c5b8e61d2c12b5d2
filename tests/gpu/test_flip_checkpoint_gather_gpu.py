"""A GPU liquid checkpoint gathered once into a page-locked block (``kernels.checkpoint``)
holds exactly what the old gather held (each device array through a pageable copy, then
copied again: ``VOXFX_CHECKPOINT=legacy``): the same keys, dtypes, shapes and bits, on
the dense and sparse solvers and a narrow band, restored or stepped. Its block is reused
only once released; a state not released is never overwritten, by later checkpoints or
steps."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.checkpoint import HostState
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

SPEC = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
WATER = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4))
SOLVERS = {
    "dense": dict(),
    "sparse_closed": dict(sparse=True, time_centred_advection=True),
    "sparse_open": dict(sparse=True, boundary="open"),
    "narrow_band": dict(sparse=True, narrow_band=2),
}


def simulation(solver):
    import cupy

    return FlipSimulation(SPEC, FlipSettings(seed=3, **SOLVERS[solver]), *WATER, xp=cupy)


def same(a: dict, b: dict):
    assert sorted(a) == sorted(b)
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), key


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_the_pinned_gather_holds_what_the_legacy_gather_held(solver, monkeypatch):
    sim = simulation(solver)
    for _ in range(3):
        sim.step(1 / 60)
    state = sim.checkpoint()
    assert isinstance(state, HostState) and state._block is not None
    monkeypatch.setenv("VOXFX_CHECKPOINT", "legacy")
    old = sim.checkpoint()
    monkeypatch.delenv("VOXFX_CHECKPOINT")
    same(state, old)
    restored = simulation(solver)
    restored.restore({k: np.array(v) for k, v in old.items()})
    same(restored.checkpoint(), old)  # a restored state's pending arrays (NumPy) too


def test_a_block_is_reused_only_once_released_and_a_held_state_never_changes():
    sim = simulation("sparse_closed")
    sim.step(1 / 60)
    first = sim.checkpoint()
    at = first["pos"].ctypes.data
    first.release()
    assert first == {}  # no view of a block another checkpoint may fill outlives the release
    second = sim.checkpoint()
    assert second["pos"].ctypes.data == at  # the released block again
    kept = {k: np.array(v) for k, v in second.items()}
    sim.step(1 / 60)
    third = sim.checkpoint()  # second still held: a block of its own
    assert third["pos"].ctypes.data != at
    same(second, kept)
    assert not np.array_equal(third["pos"], kept["pos"])
    second.release()
    third.release()
