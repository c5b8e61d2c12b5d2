"""Every test in this folder needs a working CUDA device (marked ``gpu`` by the root
conftest) and compares the GPU path with the CPU reference on fresh random inputs."""

import pytest


@pytest.fixture
def fresh_sparse_solvers():
    """No sparse GPU solver kept from another test before and after this one (the solvers'
    captured graphs and switches are per process: a test that changes a switch must not meet
    a solver built under another). Files use it with ``pytest.mark.usefixtures``."""
    from voxfx.kernels.flip import sparse_pressure_gpu

    sparse_pressure_gpu.release_gpu_solvers()
    yield
    sparse_pressure_gpu.release_gpu_solvers()
