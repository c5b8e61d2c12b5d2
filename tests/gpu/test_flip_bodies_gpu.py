"""Liquid boundaries voxelized on the GPU (kernels/flip/bodies.py) against the CPU."""

import math

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip import bodies
from voxfx.kernels.flip.bodies import Body
from voxfx.kernels.grid import GridSpec


def test_obstacle_cells_and_velocities_on_the_gpu_equal_the_cpu():
    import cupy

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), float(rng.uniform(0.03, 0.1)), (40, 36, 28))
    lo = rng.uniform(0.1, 0.5, 3)
    v, t = box(lo, lo + rng.uniform(0.3, 0.8, 3))
    a = float(rng.uniform(-0.2, 0.2))
    m1 = np.eye(4)
    m1[:2, :2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    m1[:3, 3] = rng.uniform(-0.05, 0.05, 3)
    c_cpu, v_cpu = bodies.obstacle_state([Body(v, t, np.eye(4))], [m1], spec, 24.0, np)
    c_gpu, v_gpu = bodies.obstacle_state([Body(v, t, np.eye(4))], [m1], spec, 24.0, cupy)
    assert isinstance(c_gpu, cupy.ndarray) and isinstance(v_gpu, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(c_gpu), c_cpu)  # voxel sets: bit-identical
    np.testing.assert_allclose(cupy.asnumpy(v_gpu), v_cpu, rtol=1e-6, atol=1e-6)
