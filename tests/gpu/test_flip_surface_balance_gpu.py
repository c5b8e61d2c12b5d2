"""The lean gather with its lanes balanced (VOXFX_LEVEL_SET_GATHER_BALANCE=on, particle_level_set_lean_balance,
include/voxfx_surface_balance.cuh) on the device: φ bit for bit the gather's without it (split 1, 4 and 8 blocks a
tile; closed against the walls with the interior skip and smoothing, open with per-particle radii), on a box with
a crowded pile beside two walls (thousands of points a binning cell, so rows are balanced and lanes hand their
points over); in the overlapped copy too; and gather_work's model (balance_slots) under the warps' lane slots
there. The host harness is tests/unit/test_cuda_surface_balance_host.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_surface_bricks_gpu import liquid_in_a_box
from voxfx.kernels.flip import surface_gpu, surface_host_copy
from voxfx.kernels.flip.surface import closed_level_set, particle_level_set, surface_grid, surface_radii
from voxfx.kernels.flip.surface_overlap import HostSink


def crowded_box(rng):
    """liquid_in_a_box and 30,000 points in a cube of 1.5 voxels against two walls (with their images)."""
    spec, pos = liquid_in_a_box(rng)
    h = spec.voxel_size
    lo, hi = np.asarray(spec.origin), np.asarray(spec.upper)
    pile = lo + np.array([6 * h, 0.0, 0.0]) + rng.uniform(0.0, 1.5 * h, (30000, 3))
    return spec, np.clip(np.concatenate([pos, pile]), lo + 1e-3 * h, hi - 1e-3 * h).astype(np.float32)


def _calls(rng, cupy):
    spec, pos = crowded_box(rng)
    r, R = surface_radii(spec.voxel_size, 8)
    radii = rng.uniform(0.5, 1.0, len(pos)).astype(np.float32) * np.float32(r)
    return spec, pos, r, R, (lambda: closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy),
                             lambda: particle_level_set(cupy.asarray(pos), spec, cupy.asarray(radii), R, xp=cupy))


@pytest.mark.parametrize("split", ["1", "4", "8"])
def test_balanced_gather_gives_the_gathers_bits(monkeypatch, split):
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
    monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_SPLIT", split)
    *_, calls = _calls(np.random.default_rng(), cupy)
    for call in calls:
        monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_BALANCE", "off")
        plain = call().get()
        monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_BALANCE", "on")
        balanced = call().get()
        assert (plain < 0).any() and balanced.tobytes() == plain.tobytes()


def test_balanced_gather_in_the_overlapped_copy(monkeypatch):
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
    spec, pos, r, R, _ = _calls(np.random.default_rng(11), cupy)
    whole = closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy).get()
    monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_BALANCE", "on")
    sink = HostSink(surface_host_copy.host_block(surface_grid(spec).array_shape, pinned="class"))
    sink.array[...] = np.nan
    phi = closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy, host=sink)
    assert sink.filled and sink.array.tobytes() == whole.tobytes() and phi.get().tobytes() == whole.tobytes()


def test_gather_work_models_fewer_slots_balanced_beside_the_pile(monkeypatch):
    """balance_slots (gather_work's [7], balanced_row_slots' model): more than the points tested, fewer than the
    warps' lane slots where a pile crowds a few lanes' rows; φ unchanged by the counters."""
    import cupy

    monkeypatch.setenv("VOXFX_LEVEL_SET", "lean")
    spec, pos, r, R, _ = _calls(np.random.default_rng(3), cupy)
    monkeypatch.setenv("VOXFX_LEVEL_SET_GATHER_WORK", "1")
    monkeypatch.setattr(surface_gpu, "STATS", {})
    closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy)
    w = surface_gpu.STATS
    assert w["most_tests"] > 4095
    assert w["tests"] < w["balance_slots"] < w["lane_slots"]
