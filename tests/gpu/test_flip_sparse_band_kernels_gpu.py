"""The narrow band's kernels (kernels/flip/sparse_band_gpu.py, kernels/cuda/flip_sparse_band.cu)
against its array code (VOXFX_SPARSE_BAND=arrays), the reference: the same deep cells, level
set cells and φ, deep mass and particles to the bit, frame after frame; and the kernels'
φ samples against NarrowBand.sample on fresh random points."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_band_frame, sparse_band_gpu
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def _bits(a):
    a = backend.to_numpy(a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def _step_both(monkeypatch, sims, frame_dt):
    for way, sim in zip(("arrays", "kernels"), sims):
        monkeypatch.setenv("VOXFX_SPARSE_BAND", way)
        sim.step(frame_dt)
        assert sparse_band_gpu.usable(sim) == (way == "kernels")


def _assert_same(sims, frame):
    old, new = sims
    for name in ("deep", "lattice", "phi", "mass"):
        a, b = (_bits(getattr(s.band, name)) for s in sims)
        assert a.shape == b.shape and np.array_equal(a, b), (frame, name)
    for name in ("pos", "vel"):
        a, b = (_bits(getattr(s, name)) for s in sims)
        assert a.shape == b.shape and np.array_equal(a, b), (frame, name)
    assert old.band.resampled == new.band.resampled
    assert np.array_equal(_bits(old.grid.topology.keys), _bits(new.grid.topology.keys)), frame


@pytest.mark.parametrize("cells, seed", [(3, 1), (4, 2)])
def test_the_band_kernels_keep_the_array_codes_dam_break_bit_for_bit(monkeypatch, cells, seed):
    import cupy

    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    settings = FlipSettings(narrow_band=cells, seed=seed)
    sims = [FlipSimulation(spec, settings, *water, xp=cupy, sparse=True) for _ in range(2)]
    for frame in range(10):
        _step_both(monkeypatch, sims, 1 / 24)
        _assert_same(sims, frame)
    assert len(sims[1].band.deep) > 0 and sims[1].band.resampled > 0


def test_the_band_kernels_match_in_an_open_domain_leaving_the_box(monkeypatch):
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.0, 0.0, 0.2), (0.8, 0.8, 0.8))
    settings = FlipSettings(narrow_band=2, seed=3, boundary="open")
    sims = [FlipSimulation(spec, settings, *water, xp=cupy, sparse=True) for _ in range(2)]
    for frame in range(6):
        _step_both(monkeypatch, sims, 1 / 24)
        _assert_same(sims, frame)
    assert (sims[1].band.lattice < 0).any()


def test_the_phi_map_samples_as_the_band_does_at_random_points():
    import cupy

    rng = np.random.default_rng()
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    sim = FlipSimulation(spec, FlipSettings(narrow_band=3, seed=int(rng.integers(1000))), *water, xp=cupy,
                         sparse=True)
    for _ in range(3):
        sim.step(1 / 24)
    band = sim.band
    frame = sparse_band_frame._Frame.around([band.lattice], None, 3, cupy)
    lo, hi = frame.lo - 2, frame.lo + frame.span + 2  # beyond the map too: FAR there
    x = cupy.asarray(rng.uniform(lo, hi, size=(20000, 3)).astype(np.float32))
    x[:50] = cupy.floor(x[:50]) + np.float32(0.5)  # cell centres: a one-corner sample
    expected = band.sample(sim, x)
    got = sparse_band_gpu.sample_points(sim.grid, x, sparse_band_gpu.phi_map(frame, band.lattice, band.phi), frame)
    assert np.array_equal(_bits(got), _bits(expected))
    assert float(expected.min()) < 0 < float(expected.max())
    faces = sparse_band_gpu.sample_faces(sim.grid, x)
    g = sim.grid
    ref = cupy.stack(g.sample_faces(g.faces(), x[:, 0], x[:, 1], x[:, 2], boxes=g.boxes), axis=1)
    assert np.array_equal(_bits(faces), _bits(ref))
    assert float(cupy.abs(ref).max()) > 0


def test_the_band_topology_keys_are_the_array_paths_with_every_deep_cell(monkeypatch):
    import cupy

    from voxfx.kernels.flip import transfer
    from voxfx.kernels.flip.sparse_grid import BrickReach, substep_margin

    monkeypatch.delenv("VOXFX_SPARSE_BAND", raising=False)
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    sim = FlipSimulation(spec, FlipSettings(narrow_band=3, seed=3), *water, xp=cupy, sparse=True)
    for _ in range(4):
        sim.step(1 / 24)
    g, band = sim.grid, sim.band
    assert len(band.deep) > 0
    for dt in (1 / 96, 1 / 48, 1 / 12):
        margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, h, 9.81)  # as the substep's
        for reach in (None, BrickReach(sim.vel, dt, 9.81, h)):
            got = sparse_band_gpu.topology_keys(band, g, sim.pos, margin, reach)
            assert got is not None
            assert np.array_equal(backend.to_numpy(got), backend.to_numpy(g.topology_keys(sim.pos, margin, band.deep,
                                                                                          reach)))


@pytest.mark.parametrize("boundary", ["closed", "open"])
def test_the_bounds_and_deep_brick_kernels_keep_the_measured_kernels_bits(monkeypatch, boundary):
    """VOXFX_SPARSE_BAND_REDUCE=kernels (the update's bounds and the deep cells' bricks in
    kernels, not yet measured) against the measured kernel way, frame by frame."""
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_BAND", "kernels")
    if boundary == "closed":
        h = 0.05
        spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
        water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    else:
        spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
        water = box((0.0, 0.0, 0.2), (0.8, 0.8, 0.8))
    settings = FlipSettings(narrow_band=3, seed=6, boundary=boundary)
    sims = [FlipSimulation(spec, settings, *water, xp=cupy, sparse=True) for _ in range(2)]
    for frame in range(8):
        for way, sim in zip(("arrays", "kernels"), sims):
            monkeypatch.setenv("VOXFX_SPARSE_BAND_REDUCE", way)
            sim.step(1 / 24)
        _assert_same(sims, frame)
    assert len(sims[1].band.deep) > 0
