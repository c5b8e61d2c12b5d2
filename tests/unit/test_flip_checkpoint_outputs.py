"""A liquid checkpoint holds everything its frame's files are computed from (issue 21 §1):
a fresh simulation restored from the checkpoint of frame N gives frame N's output arrays
(particles, level set, grid velocity) bit for bit, dense and sparse, so a bake killed
while writing frame N rewrites it from the checkpoint instead of simulating it again."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip.bake import frame_arrays
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

SPEC = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
WATER = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4))
SOLVERS = {
    "dense": dict(),
    "sparse_closed": dict(sparse=True),
    "sparse_open": dict(sparse=True, boundary="open"),
    "narrow_band": dict(sparse=True, narrow_band=2),
}


def simulation(solver, **extra):
    return FlipSimulation(SPEC, FlipSettings(seed=3, **SOLVERS[solver], **extra), *WATER, xp=np)


def assert_same_outputs(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        if key == "surface_spec":
            assert a[key] == b[key]
        else:
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("frames", [0, 4])
def test_a_restored_checkpoint_gives_its_frames_outputs_bit_for_bit(solver, frames):
    a = simulation(solver)
    for _ in range(frames):
        a.step(1 / 60)
    state = {k: np.array(v) for k, v in a.checkpoint().items()}  # as written to and read from a file
    expected = frame_arrays(a, SPEC)
    if frames:  # the grid velocity is a real part of the frame, not zeros a fresh grid would give too
        assert np.abs(expected["cell_velocity"]).max() > 0.01
    b = simulation(solver)
    b.restore(state)
    assert b.restored_outputs
    assert_same_outputs(frame_arrays(b, SPEC), expected)
    again = {k: np.array(v) for k, v in b.checkpoint().items()}  # a restored frame checkpoints the same state
    assert sorted(again) == sorted(state) and all(np.array_equal(again[k], state[k]) for k in state)


@pytest.mark.parametrize("solver", ["dense", "sparse_closed"])
def test_the_restored_velocity_is_dropped_by_the_next_step(solver):
    """After the restore the next step's own grid velocity is the output: the frame after
    a resumed one equals the uninterrupted frame."""
    a = simulation(solver)
    for _ in range(3):
        a.step(1 / 60)
    b = simulation(solver)
    b.restore(a.checkpoint())
    a.step(1 / 60)
    b.step(1 / 60)
    va, vb = a.cell_velocity(padding=2), b.cell_velocity(padding=2)
    if solver == "dense":
        assert np.array_equal(va, vb)
    else:  # the sparse resume rebuilds its bricks: the same up to float rounding
        assert np.abs(va - vb).max() <= 1e-5


@pytest.mark.parametrize("solver", ["dense", "sparse_closed"])
def test_a_checkpoint_without_the_grid_velocity_resumes_but_cannot_rewrite_its_frame(solver):
    """Checkpoints written before the grid velocity was kept still restore (the bake goes on
    from them) and say they cannot give their frame's outputs."""
    a = simulation(solver)
    a.step(1 / 60)
    state = {k: v for k, v in a.checkpoint().items() if not k.startswith("grid_")}
    b = simulation(solver)
    b.restore(state)
    assert b.restored_outputs is False
    a.step(1 / 60)
    b.step(1 / 60)
    assert np.abs(a.particles_host()["position"] - b.particles_host()["position"]).max() <= 1e-5


DAMAGES = [(s, d) for s in ("dense", "sparse_closed") for d in ("shape", "nan", "kind")] + \
    [("sparse_closed", "keys_order"), ("sparse_closed", "keys_range")]


@pytest.mark.parametrize("solver, damage", DAMAGES)
def test_a_damaged_grid_velocity_is_refused_before_anything_changes(solver, damage):
    a = simulation(solver)
    a.step(1 / 60)
    state = a.checkpoint()
    if damage == "shape":
        state["grid_u"] = state["grid_u"][:-1]
    elif damage == "nan":
        state["grid_v"].reshape(-1)[5] = np.nan
    elif damage == "kind":
        state["grid_w"] = state["grid_w"].astype(np.int32)
    elif damage == "keys_order":
        state["grid_bricks"] = state["grid_bricks"][::-1].copy()
    else:
        state["grid_bricks"] = state["grid_bricks"].copy()
        state["grid_bricks"][-1] = np.int64(1) << 62
    b = simulation(solver)
    before = b.checkpoint()
    with pytest.raises(ValueError, match="grid_"):
        b.restore(state)
    after = b.checkpoint()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_the_checkpoint_adds_twelve_bytes_a_cell_dense_and_six_kib_a_brick_sparse():
    """What the grid velocity costs a checkpoint (README, Caches and disk)."""
    dense, sparse = simulation("dense"), simulation("sparse_closed")
    for sim in (dense, sparse):
        sim.step(1 / 60)
    nx, ny, nz = SPEC.shape
    faces = (nx + 1) * ny * nz + nx * (ny + 1) * nz + nx * ny * (nz + 1)
    assert sum(dense.checkpoint()[k].nbytes for k in ("grid_u", "grid_v", "grid_w")) == 4 * faces
    state = sparse.checkpoint()
    bricks = len(state["grid_bricks"])
    assert 0 < bricks < sparse.grid.brick_count()  # bricks of +0 faces only (margin, wall ring) are left out
    assert sum(state[k].nbytes for k in ("grid_bricks", "grid_u", "grid_v", "grid_w")) == bricks * (8 + 3 * 512 * 4)
