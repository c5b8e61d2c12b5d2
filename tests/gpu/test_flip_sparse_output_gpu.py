"""The sparse liquid's open-domain outputs (issue 12) on the GPU against the CPU: the same
region (integer work) and the level set / cell velocity to float32 accuracy."""

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import WALL_CELLS
from voxfx.kernels.grid import GridSpec


def test_gpu_open_domain_outputs_match_cpu_on_the_same_particles():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.2, 0.2, 0.2), (0.6, 0.6, 0.6))
    sims = [FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0)), v, t, xp=xp, sparse=True, boundary="open",
                           kill_distance=50.0, initial_velocity=(6.0, 0.0, 0.0)) for xp in (np, cupy)]
    cpu, gpu = sims
    for _ in range(6):
        cpu.step(1 / 24)
    gpu.restore(cpu.checkpoint())  # the same particles on both, and a tiny step to build the grid
    gpu.step(1e-4)
    cpu.step(1e-4)
    assert gpu.surface_spec == cpu.surface_spec and cpu.surface_spec.origin[0] > 1.0
    assert np.abs(gpu.level_set() - cpu.level_set()).max() < 1e-4  # metres, h = 0.1
    a, b = gpu.cell_velocity(padding=WALL_CELLS), cpu.cell_velocity(padding=WALL_CELLS)
    assert a.shape == b.shape == cpu.surface_spec.array_shape + (3,)
    assert np.abs(a - b).max() < 1e-3
