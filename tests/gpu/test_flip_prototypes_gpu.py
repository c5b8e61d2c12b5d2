"""The long-substep prototypes are NumPy only (``kernels/flip/air_band.py`` — dense and, since
i24d5, the sparse solver's NumPy path, ``sparse_air_band.py`` —, ``kernels/flip/density_positions.py``
dense only): on CuPy, dense or sparse, their switches are refused at
once with a clear error; unset, the GPU simulation runs as ever. (The position switch's case
passed on an H100, 2026-11-26; the air band's was merged after that session's device budget.)"""

import pytest

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("switch, value", [("VOXFX_DENSITY_POSITIONS", "0.3"), ("VOXFX_AIR_BAND_PROJECTION", "1")])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_prototype_switch_is_refused_on_the_gpu(monkeypatch, sparse, switch, value):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.8, 0.4))
    monkeypatch.setenv(switch, value)
    with pytest.raises(NotImplementedError, match="dense NumPy"):
        FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=sparse)
    monkeypatch.delenv(switch)
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=sparse)
    sim.step(1 / 24)
    assert sim.frames == 1
