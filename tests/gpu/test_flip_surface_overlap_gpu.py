"""φ copied to the host while the device makes it (kernels/flip/surface_overlap.py,
``VOXFX_LEVEL_SET_COPY=overlap``): the host array the chunks fill holds the level set's bits — the
same as the whole level set's copy — at every chunk count, with the gather in one block a tile or
split, closed against the walls and open with per-particle radii; without one smoothing step the
sink is left unfilled (the caller copies after); and an open sparse liquid's ``level_set()`` with the
way set returns the bits of its device level set. The host array is filled with
NaN first, so a chunk not copied fails."""

import numpy as np
import pytest

from tests.gpu.test_flip_surface_bricks_gpu import liquid_in_a_box
from tests.meshes import box
from voxfx.kernels.flip import surface_host_copy
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import closed_level_set, particle_level_set, surface_grid, surface_radii
from voxfx.kernels.flip.surface_overlap import HostSink
from voxfx.kernels.grid import GridSpec


def _sink(shape):
    sink = HostSink(surface_host_copy.host_block(shape, pinned="class"))
    sink.array[...] = np.nan
    return sink


@pytest.mark.parametrize("chunks, split", [("8", "1"), ("4", "4"), ("16", "8")])
def test_overlapped_copy_holds_the_level_set_bits(monkeypatch, chunks, split):
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
    monkeypatch.setenv("VOXFX_LEVEL_SET_COPY_CHUNKS", chunks)
    monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_SPLIT", split)
    rng = np.random.default_rng()
    spec, pos = liquid_in_a_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    radii = rng.uniform(0.5, 1.0, len(pos)).astype(np.float32) * np.float32(r)
    calls = ((surface_grid(spec).array_shape, lambda host: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy,
                                                                             host=host)),
             (spec.array_shape, lambda host: particle_level_set(cupy.asarray(pos), spec, cupy.asarray(radii), R,
                                                                xp=cupy, host=host)))
    for shape, call in calls:
        whole = call(None).get()
        sink = _sink(shape)
        phi = call(sink)
        assert sink.filled and (whole < 0).any()
        assert sink.array.tobytes() == whole.tobytes() and phi.get().tobytes() == whole.tobytes()


@pytest.mark.parametrize("smooth_iterations", [0, 2])
def test_without_one_smoothing_step_the_sink_is_left(monkeypatch, smooth_iterations):
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
    spec, pos = liquid_in_a_box(np.random.default_rng(7))
    r, R = surface_radii(spec.voxel_size, 8)
    sink = _sink(surface_grid(spec).array_shape)
    phi = closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy, smooth_iterations=smooth_iterations, host=sink)
    assert not sink.filled and np.isnan(sink.array).all()
    assert phi.get().tobytes() == closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy,
                                                   smooth_iterations=smooth_iterations).get().tobytes()


def _open_liquid_level_sets(monkeypatch, substeps):
    """An open sparse liquid after *substeps* substeps of 1/120 s: its device level set (NumPy), then
    ``level_set()``'s host array with ``VOXFX_LEVEL_SET_COPY=overlap``."""
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.04, (40, 16, 24))
    sim = FlipSimulation(spec, FlipSettings(seed=5, boundary="open"), *box((0.0, 0.0, 0.0), (0.6, 0.64, 0.5)),
                         xp=cupy, sparse=True)
    for _ in range(substeps):
        sim.substep(1 / 120)
    on_device = sim.level_set(on_device=True).get()
    monkeypatch.setenv("VOXFX_LEVEL_SET_COPY", "overlap")
    return on_device, sim.level_set()


def test_sparse_level_set_overlapped_is_its_device_level_set(monkeypatch):
    """An open sparse liquid (its region's level set, sparse_output.level_set; a small closed box
    takes the dense solver's level set, not this copy)."""
    on_device, host = _open_liquid_level_sets(monkeypatch, 6)
    assert isinstance(host, np.ndarray) and host.dtype == np.float32 and (host < 0).any()
    assert host.tobytes() == on_device.tobytes()


def test_sparse_level_set_overlap_where_it_does_not_apply_copies_into_its_block(monkeypatch):
    """With the overlap asked for but a level set it does not serve ("bricks"), φ is copied after into the
    sink's one pinned block (sparse_output.level_set: no second block — ``host_copy``, which would page-lock
    one, is not called), the device's φ to the bit."""
    monkeypatch.setenv("VOXFX_LEVEL_SET", "bricks")
    copies, real = [], surface_host_copy.host_copy
    monkeypatch.setattr(surface_host_copy, "host_copy", lambda *a, **k: copies.append(k) or real(*a, **k))
    on_device, host = _open_liquid_level_sets(monkeypatch, 3)
    assert isinstance(host, np.ndarray) and host.dtype == np.float32 and (host < 0).any()
    assert host.tobytes() == on_device.tobytes()
    assert copies == []
