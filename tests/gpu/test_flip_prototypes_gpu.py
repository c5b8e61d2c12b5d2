"""The long-substep prototypes on CuPy: the position-only density correction
(``kernels/flip/density_positions.py``, dense NumPy only) is refused by both GPU solvers, the
divergence-free air band (``kernels/flip/air_band.py``) by the dense one only — the sparse
solver runs it on the GPU (``sparse_air_band_gpu.py``, i24b; its comparison with NumPy:
test_flip_sparse_air_band_gpu.py); refused at once with a clear error; unset, the GPU
simulation runs as ever."""

import pytest

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("switch, value, sparse", [("VOXFX_DENSITY_POSITIONS", "0.3", False),
                                                   ("VOXFX_DENSITY_POSITIONS", "0.3", True),
                                                   ("VOXFX_AIR_BAND_PROJECTION", "1", False)])
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


def test_the_sparse_gpu_solver_takes_the_air_band_and_the_wall_split(monkeypatch):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.8, 0.4))
    monkeypatch.setenv("VOXFX_AIR_BAND_PROJECTION", "1")
    monkeypatch.setenv("VOXFX_AIR_BAND_WALL_PIECES", "1")
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    sim.step(1 / 24)
    assert sim.frames == 1 and bool(cp.isfinite(sim.pos).all())
