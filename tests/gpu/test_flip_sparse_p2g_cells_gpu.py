"""The cell types written by the scatter P2G's division (``VOXFX_SPARSE_P2G_CELLS=finish``,
flip_sparse_scatter.cu's p2g_scatter_finish_cells, helper i24p8) on the device: classify's
own (classify_counts_sparse) byte for byte with the same faces and masks, on a closed and an
open box with random solid cells; handed to classify once, and not while the bins, the
positions or the solid array are others; and whole sparse runs give the same particle bits
either way. With the binning and the scatter launched before P2G's outputs are allocated
(``sparse_gpu.particles_to_grid``), the default either way."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block
from voxfx.kernels.flip import sparse_gpu
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID


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
        assert (grid.p2g_cells is not None) == (mode == "finish")
        sparse_gpu.classify(grid, dev[0])
        assert grid.p2g_cells is None  # "finish": taken (handed over once)
        out[mode] = [host(grid["cell"]), *(host(grid[n]).view(np.uint32) for n in grid.FACES),
                     *(host(m) for m in valid)]
        if mode == "finish":  # handed over once: classify again types a fresh array, the same bytes
            first = grid["cell"]
            sparse_gpu.classify(grid, dev[0])
            assert grid["cell"] is not first and np.array_equal(host(grid["cell"]), out[mode][0])
            grid.p2g_cells = (grid.bins, first, cupy.zeros_like(solid))  # another solid array: not trusted
            sparse_gpu.classify(grid, dev[0])
            assert grid["cell"] is not first
            grid.p2g_cells = ((*grid.bins,), first, grid["solid"])  # other bins (the particles moved): neither
            sparse_gpu.classify(grid, dev[0])
            assert grid["cell"] is not first
    assert all(np.count_nonzero(out["apart"][0] == k) > 1000 for k in (AIR, FLUID, SOLID))
    for a, b in zip(out["finish"], out["apart"]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_p2gs_cell_types(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_P2G_CELLS", sparse_gpu.P2G_CELLS)
