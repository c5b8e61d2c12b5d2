"""The lean scatter's crowded warps (flip_sparse_scatter.cu's SCATTER_CROWD, include/
voxfx_scatter_crowd.cuh; ``VOXFX_SPARSE_SCATTER_CROWD`` off / on, helper h17d) on the device:
with the switch on, the integer sums, bounds, faces and masks are the default's bit for bit on
a crowded scene (thousands of particles in a few cells: whole warps in one cell, the crowded
path taken; closed with cells at the wall, and open; FLIP and APIC; spreads 8, 1 and 3; both
binnings), on fresh random particles (a liquid block, a packed brick), and whole sparse
dam-break runs give the same particle bits either way (12 substeps each,
tests/gpu/sparse_runs.py). The host harness (tests/unit/test_cuda_scatter_crowd_host.py) runs
the kernel's warps as 32 threads without a GPU."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host
from tests.gpu.test_flip_sparse_scatter_gpu import assert_scatter_ways_agree, scatter
from tests.unit.test_cuda_scatter_crowd_host import crowded_scene
from voxfx.kernels.flip import sparse_gpu, sparse_scatter

MODES = sparse_scatter.CROWD_MODES


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_crowded_scene_gives_the_same_sums_either_way(monkeypatch, closed, apic):
    assert_crowded_scene_agrees(monkeypatch, "VOXFX_SPARSE_SCATTER_CROWD", closed, apic)


def assert_crowded_scene_agrees(monkeypatch, variable, closed, apic):
    """*variable* off and on: on the host harness's crowded scene with a cell of 20,000 more, the
    sums, bounds, faces and masks at spreads 8, 1 and 3 and the whole P2G the same bits."""
    import cupy

    grid_np, pos, vel, c = crowded_scene(closed, apic, 41 + 2 * closed + apic)
    extra = np.asarray(grid_np.origin) + (np.array([12.0, 6.0, 9.0]) + np.random.default_rng(5).uniform(
        0, 1, (20000, 3))) * grid_np.h  # and one cell of 20,000
    pos = np.concatenate([pos, extra.astype(np.float32)])
    vel = np.concatenate([vel, np.random.default_rng(6).normal(0, 0.4, (20000, 3)).astype(np.float32)])
    if c is not None:
        c = np.concatenate([c, np.random.default_rng(7).normal(0, 1, (20000, 3, 3)).astype(np.float32)])
    grid = gpu_grid(grid_np.spec, pos, closed, 3)
    sums, faces = {}, {}
    for mode in ("off", "on"):
        monkeypatch.setenv(variable, mode)
        for spread in (8, 1, 3):
            (f, m), acc, bounds = scatter(grid, pos, vel, c, spread)
            sums[mode, spread] = [a.view(np.uint32) for a in f] + m + [acc, bounds]
        dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
        valid = sparse_gpu.particles_to_grid(grid, *dev, gather="scatter")
        faces[mode] = [host(grid[n]).view(np.uint32) for n in grid.FACES] + [host(v) for v in valid]
    first = sums["off", 8]
    assert int(first[-1][1]) >= 20000  # the fullest cell
    assert all(np.count_nonzero(m) > 1000 for m in first[3:6])
    for key, got in sums.items():
        for a, b in zip(got, first):
            assert np.array_equal(a, b), key
    for a, b in zip(faces["on"], faces["off"]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_scatter_crowd_switch_gives_the_same_sums(monkeypatch, closed, apic, case):
    assert_scatter_ways_agree(monkeypatch, "VOXFX_SPARSE_SCATTER_CROWD", MODES, "off", closed, apic, case)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_crowded_warps_on(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_SCATTER_CROWD", MODES)
