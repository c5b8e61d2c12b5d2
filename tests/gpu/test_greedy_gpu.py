"""The greedy block mesh on CuPy equals the NumPy reference array for array."""

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize.greedy import greedy_faces


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 5, 7), (70, 40, 31)])
def test_gpu_greedy_mesh_matches_cpu(shape):
    import cupy as cp

    rng = np.random.default_rng()
    nx, ny, nz = shape
    dense = rng.random((nz, ny, nx)) < 0.6
    labels = rng.integers(0, 3, size=int(dense.sum()))
    spec = GridSpec((0.1, -0.2, 0.3), 0.05, shape)
    cpu = greedy_faces(bitgrid.pack(dense), spec, labels)
    gpu = greedy_faces(cp.asarray(bitgrid.pack(dense)), spec, cp.asarray(labels)).to_numpy()
    assert gpu.faces_before == cpu.faces_before
    for name in ("vertices", "quads", "label_of_quad", "voxel_of_quad", "direction_of_quad", "area_of_quad"):
        np.testing.assert_array_equal(getattr(gpu, name), getattr(cpu, name), err_msg=name)
