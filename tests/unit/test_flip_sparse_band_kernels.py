"""The narrow band's kernel way (kernels/flip/sparse_band_gpu.py) on this machine: its switch,
its constants against the array code's, and the CPU path untouched by it (the device
comparison is tests/gpu/test_flip_sparse_band_kernels_gpu.py)."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import sparse_band, sparse_band_frame, sparse_band_gpu
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def test_the_switch_names_the_two_ways_and_refuses_others(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_BAND", raising=False)
    assert sparse_band_gpu.band_mode() == "kernels"
    monkeypatch.setenv("VOXFX_SPARSE_BAND", " Arrays ")
    assert sparse_band_gpu.band_mode() == "arrays"
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "fast")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_BAND"):
        sparse_band_gpu.band_mode()


def test_the_kernels_far_value_is_the_array_codes():
    from voxfx.kernels import backend

    assert sparse_band_gpu.FAR == sparse_band.FAR
    source = backend.cuda_source(sparse_band_gpu.KERNELS.filename)
    assert f"#define BAND_FAR {sparse_band.FAR!r}f" in source


def test_a_numpy_band_never_takes_the_kernels_and_steps_the_same_with_either_setting(monkeypatch):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (10, 6, 8))
    water = box((0.0, 0.0, 0.0), (0.5, 0.6, 0.6))
    runs = []
    for way in ("kernels", "arrays"):
        monkeypatch.setenv("VOXFX_SPARSE_BAND", way)
        sim = FlipSimulation(spec, FlipSettings(narrow_band=2, seed=7), *water, xp=np, sparse=True)
        for _ in range(3):
            sim.step(1 / 24)
        assert not sparse_band_gpu.usable(sim)
        runs.append((sim.band.deep.copy(), sim.band.phi.copy(), sim.pos.copy()))
    for a, b in zip(*runs):
        assert np.array_equal(a, b)
    assert len(runs[0][0]) > 0


@pytest.mark.parametrize("closed", [True, False])
def test_the_deep_cells_stand_ins_reach_the_same_bricks_with_far_fewer_boxes(monkeypatch, closed):
    from voxfx.kernels.flip.sparse_grid import SparseFlipGrid

    monkeypatch.delenv("VOXFX_SPARSE_BAND", raising=False)
    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (40, 33, 29))
    grid = SparseFlipGrid(spec, np, closed=closed)
    lo = 0 if closed else -20
    deep = np.unique(rng.integers(lo, [40, 33, 29], size=(3000, 3)), axis=0)
    deep = np.concatenate([deep, np.stack(np.meshgrid(*(np.arange(3, 19),) * 3), -1).reshape(-1, 3)])  # a block
    pos = rng.uniform(0.0, 2.9, size=(50, 3)).astype(np.float32)
    band = sparse_band.NarrowBand(4, np)
    band.deep = deep
    for margin in (1, 3, 5, 6, 8, 9, 13):
        stand_ins = band.topology_cells(margin)
        assert len(np.unique(stand_ins, axis=0)) < len(deep) / 3
        assert np.array_equal(grid.topology_keys(pos, margin, stand_ins), grid.topology_keys(pos, margin, deep))
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "arrays")
    assert band.topology_cells(5) is deep


def test_the_reduce_switch_defaults_to_the_measured_way_and_refuses_others(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_BAND_REDUCE", raising=False)
    assert sparse_band_gpu.reduce_mode() == "kernels"
    monkeypatch.setenv("VOXFX_SPARSE_BAND_REDUCE", "arrays")
    assert sparse_band_gpu.reduce_mode() == "arrays"
    monkeypatch.setenv("VOXFX_SPARSE_BAND_REDUCE", "gpu")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_BAND_REDUCE"):
        sparse_band_gpu.reduce_mode()


def test_the_maps_serve_boxes_that_follow_the_liquid_and_leave_a_stretched_box_to_the_arrays():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (10, 6, 8))
    sim = FlipSimulation(spec, FlipSettings(narrow_band=2, seed=7), *box((0.0, 0.0, 0.0), (0.5, 0.6, 0.6)), xp=np,
                         sparse=True)
    sim.step(1 / 24)
    band = sim.band
    around = sparse_band_frame._Frame.around([band.lattice, band.deep], None, 4, np)
    assert sparse_band_gpu.map_fits(around, band, sim)
    liquid = len(band.lattice) + len(band.deep) + len(sim.pos) // sim.settings.particles_per_cell
    side = int(np.ceil(max(sparse_band_gpu.MAP_FLOOR, sparse_band_gpu.MAP_CELLS * liquid) ** (1 / 3))) + 1
    stretched = sparse_band_frame._Frame((0, 0, 0), (side, side, side), np)  # a splash far away
    assert sparse_band_gpu.map_fits(stretched) and not sparse_band_gpu.map_fits(stretched, band, sim)
    huge = sparse_band_frame._Frame((0, 0, 0), (1 << 10, 1 << 10, 1 << 9), np)
    assert not sparse_band_gpu.map_fits(huge)
