"""The divergence-free air band (``kernels/flip/air_band.py``) is a dense NumPy prototype: on
CuPy, dense or sparse, ``VOXFX_AIR_BAND_PROJECTION`` is refused at once with a clear error."""

import pytest

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("sparse", [False, True])
def test_the_air_band_is_refused_on_the_gpu(monkeypatch, sparse):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.8, 0.4))
    monkeypatch.setenv("VOXFX_AIR_BAND_PROJECTION", "1")
    with pytest.raises(NotImplementedError, match="dense NumPy"):
        FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=sparse)
