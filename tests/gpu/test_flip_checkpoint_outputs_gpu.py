"""A GPU liquid checkpoint holds its frame's grid velocity (issue 21 §1), as the CPU
reference's does (``tests/unit/test_flip_checkpoint_outputs.py``): restored into a fresh
GPU simulation it gives the frame's output arrays bit for bit (the level set gathers
without atomics; the cell velocity averages the same faces), and the sparse solver's
bricks (``SparseFlipGrid.velocity_bricks`` on CuPy: bit-pattern mask, boolean take) round
trip through the host exactly, on either backend."""

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


def simulation(solver, xp):
    return FlipSimulation(SPEC, FlipSettings(seed=3, **SOLVERS[solver]), *WATER, xp=xp)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_a_restored_gpu_checkpoint_gives_its_frames_outputs_bit_for_bit(solver):
    import cupy

    a = simulation(solver, cupy)
    for _ in range(4):
        a.step(1 / 60)
    state = {k: np.array(v) for k, v in a.checkpoint().items()}  # as written to and read from a file
    expected = frame_arrays(a, SPEC)
    assert np.abs(expected["cell_velocity"]).max() > 0.01
    b = simulation(solver, cupy)
    b.restore(state)
    assert b.restored_outputs
    got = frame_arrays(b, SPEC)
    assert got["surface_spec"] == expected["surface_spec"]
    for key in ("position", "velocity", "size", "surface", "cell_velocity"):
        assert np.array_equal(np.asarray(got[key]), np.asarray(expected[key])), key
    again = {k: np.array(v) for k, v in b.checkpoint().items()}
    assert sorted(again) == sorted(state) and all(np.array_equal(again[k], state[k]) for k in state)


@pytest.mark.parametrize("solver", ["dense", "sparse_closed"])
def test_the_grid_velocity_of_a_checkpoint_reads_the_same_on_cpu_and_gpu(solver):
    """One checkpoint (stepped on the GPU), restored on each backend: the same cell
    velocity bit for bit and the same grid velocity checkpointed again."""
    import cupy

    a = simulation(solver, cupy)
    for _ in range(3):
        a.step(1 / 60)
    state = {k: np.array(v) for k, v in a.checkpoint().items()}
    cpu, gpu = simulation(solver, np), simulation(solver, cupy)
    cpu.restore(state)
    gpu.restore(state)
    assert np.array_equal(cpu.cell_velocity(padding=2), gpu.cell_velocity(padding=2))
    for sim in (cpu, gpu):
        again = sim.checkpoint()
        for key in sim.VELOCITY_KEYS:
            assert np.array_equal(np.asarray(again[key]), state[key]), key
