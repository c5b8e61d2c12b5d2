"""The density correction (``kernels/flip/density.py``) is NumPy only for now: on CuPy a
non-zero stiffness is refused at once with a clear error, dense and sparse; 0 runs as ever."""

import pytest

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("sparse", [False, True])
def test_the_density_correction_is_refused_on_the_gpu(sparse):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.8, 0.4))
    with pytest.raises(NotImplementedError, match="not built on the GPU yet"):
        FlipSimulation(spec, FlipSettings(density_correction=0.3), v, t, xp=cp, sparse=sparse)
    sim = FlipSimulation(spec, FlipSettings(density_correction=0.0), v, t, xp=cp, sparse=sparse)
    sim.step(1 / 24)
    assert sim.frames == 1
