"""The order binning's fused count (flip_sparse_transfer.cu's count_particles_fused,
``VOXFX_SPARSE_BIN_FUSED=scan|zero|all``: the scan's tile sums and the max particles a cell
from the count, the scatter's sums zeroed by the count's threads) on the device against
``none`` (count_particles_grouped, bin_scan_sums, bin_scan, a memset): the same counts,
starts, cells and bounds, an order binned by cell, the same faces and masks bit for bit
(FLIP and APIC, particles seeded cell by cell and shuffled, a closed and an open box); the
cell types written by P2G's division (``VOXFX_SPARSE_P2G_CELLS=finish``,
p2g_scatter_finish_cells) are classify's own; and whole sparse runs give the same particle
bits every way."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block
from voxfx.kernels.flip import sparse_gpu
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID

WAYS = sparse_gpu.BIN_FUSED


def binned(monkeypatch, grid, dev, mode):
    monkeypatch.setenv("VOXFX_SPARSE_BIN_FUSED", mode)
    return [host(a) for a in sparse_gpu.bin_particles_order(grid, *dev)]


def p2g(monkeypatch, grid, dev, mode):
    monkeypatch.setenv("VOXFX_SPARSE_BIN_FUSED", mode)
    valid = sparse_gpu.particles_to_grid(grid, *dev)
    return [host(grid[n]).view(np.uint32) for n in grid.FACES] + [host(m) for m in valid] + [host(grid.bins[1])]


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["seeded", "shuffled"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_fused_count_bins_and_scatters_as_the_separate_passes(monkeypatch, closed, shuffled, apic):
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", "grouped")
    rng = np.random.default_rng()
    spec, pos, vel, c = liquid_block(closed, apic, rng)
    if shuffled:
        perm = rng.permutation(len(pos))
        pos, vel, c = pos[perm], vel[perm], None if c is None else c[perm]
    grid = gpu_grid(spec, pos, closed, 3)
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    start, count, order, cell_of, bounds = binned(monkeypatch, grid, dev, "none")
    assert count[:-1].max() >= 8 and bounds[1] == count[:-1].max()
    want = p2g(monkeypatch, grid, dev, "none")
    assert all(np.count_nonzero(m) > 1000 for m in want[3:6])
    for way in WAYS[1:]:
        got = binned(monkeypatch, grid, dev, way)
        for a, b in zip(got[:2] + got[3:], (start, count, cell_of, bounds)):
            assert np.array_equal(a, b), way
        assert np.array_equal(np.sort(got[2]), np.arange(len(pos)))  # a permutation
        assert np.all(np.diff(cell_of[got[2]]) >= 0)  # binned by cell
        # the scatter's sums zeroed by the count: stale sums in the pool do not leak in
        cupy.get_default_memory_pool().malloc(8 * 6 * grid.size).memset(0xff, 8 * 6 * grid.size)
        for a, b in zip(p2g(monkeypatch, grid, dev, way), want):
            assert np.array_equal(a, b), way


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_every_fusion(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_BIN_FUSED", WAYS)



@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_gpu_p2g_cell_types_are_classifys(monkeypatch, closed):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, _ = liquid_block(closed, False, rng)
    grid = gpu_grid(spec, pos, closed, 3)
    solid = cupy.asarray((rng.random(grid.size) < 0.2).astype(np.uint8))  # obstacles among the liquid
    grid["solid"] = solid
    dev = [cupy.asarray(pos), cupy.asarray(vel), None]
    out = {}
    for mode in ("apart", "finish"):
        monkeypatch.setenv("VOXFX_SPARSE_P2G_CELLS", mode)
        valid = sparse_gpu.particles_to_grid(grid, *dev)
        assert (grid.bins[4] is not None) == (mode == "finish")
        sparse_gpu.classify(grid, dev[0])
        out[mode] = [host(grid["cell"]), *(host(grid[n]).view(np.uint32) for n in grid.FACES),
                     *(host(m) for m in valid)]
        if mode == "finish":  # handed over once: classify again types a fresh array, the same bytes
            first = grid["cell"]
            sparse_gpu.classify(grid, dev[0])
            assert grid["cell"] is not first and np.array_equal(host(grid["cell"]), out[mode][0])
            grid.bins = (*grid.bins[:4], (first, cupy.zeros_like(solid)))  # another solid array: not trusted
            sparse_gpu.classify(grid, dev[0])
            assert grid["cell"] is not first
    assert all(np.count_nonzero(out["apart"][0] == k) > 1000 for k in (AIR, FLUID, SOLID))
    for a, b in zip(out["finish"], out["apart"]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_p2gs_cell_types(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_P2G_CELLS", sparse_gpu.P2G_CELLS)
