"""Issue 24's adaptive substeps on the GPU: the same count and reason as the CPU
reference, a moving obstacle's speed read from device arrays."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

SPEC = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 8))


@pytest.mark.parametrize("sparse", [False, True])
def test_gpu_substeps_and_their_reason_are_the_cpus(sparse):
    import cupy

    kw = dict(sparse=True, boundary="open", kill_distance=100.0) if sparse else {}
    settings = FlipSettings(max_substeps=32, gravity=(0.0, 0.0, 0.0))
    cube = box((0.1, 0.1, 0.1), (0.3, 0.3, 0.3))
    runs = [FlipSimulation(SPEC, settings, *cube, xp=xp, initial_velocity=(12.0, 0.0, 0.0), **kw)
            for xp in (np, cupy)]
    cpu, gpu = (sim.step(1 / 24) for sim in runs)
    assert cpu["limit"] == gpu["limit"] == "liquid"
    assert gpu["substeps"] == cpu["substeps"] > 1 and gpu["cfl_substeps"] == cpu["cfl_substeps"]


def test_gpu_obstacle_speed_sizes_the_substeps_as_on_the_cpu():
    import cupy

    out = []
    for xp in (np, cupy):
        sim = FlipSimulation(SPEC, FlipSettings(max_substeps=64), *box((0.0, 0.0, 0.0), (0.8, 0.4, 0.2)), xp=xp)
        paddle = np.array([(3, j, k) for j in range(8) for k in (6, 7)])
        velocity = np.zeros((8, 8, 16, 3), np.float32)
        velocity[..., 0] = 6.0
        sim.set_obstacles(xp.asarray(paddle), xp.asarray(velocity))
        assert sim.obstacle_speed == pytest.approx(6.0)
        out.append(sim.step(1 / 24))
    assert out[0]["limit"] == out[1]["limit"] == "obstacle" and out[0]["substeps"] == out[1]["substeps"]


@pytest.mark.parametrize("sparse", [False, True])
def test_gpu_max_time_step_splits_frames_as_on_the_cpu_and_keeps_the_sloshing_period(sparse):
    """Issue 24: at 24 fps the default Max Time Step (1/30 s) takes the still tank's frame
    in the CPU's substeps with the same reason, and the sloshing period stays within the
    accuracy test's −3%..+10% of linear theory (CPU: +5.3%; one substep a frame: +15%)."""
    import cupy

    from tests import flip_accuracy as scenes

    kw = dict(sparse=True) if sparse else {}
    water = box((0.0, 0.0, 0.0), (0.8, 0.4, 0.2))
    cpu, gpu = (FlipSimulation(SPEC, FlipSettings(), *water, xp=xp, **kw).step(1 / 24) for xp in (np, cupy))
    assert cpu["limit"] == gpu["limit"] == "time step" and cpu["substeps"] == gpu["substeps"] == 2
    expected = scenes.linear_sloshing_period(0.8, 0.32)
    period, beta = scenes.sloshing(xp=cupy, sparse=sparse, fps=24.0)
    print(f"\nGPU sloshing at 24 fps: {period / expected - 1:+.1%}")
    assert 0.97 * expected <= period <= 1.10 * expected and beta < 2.0
