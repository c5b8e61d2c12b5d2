"""The lean scatter's slot order (flip_sparse_scatter.cu's SCATTER_FLIP;
``VOXFX_SPARSE_SCATTER_BANKS`` flip / flat, helper i24q4) on the device: the flat order's
integer sums, bounds, faces and masks bit for bit on fresh random particles (FLIP and APIC,
open and closed, a liquid block and a brick packed with ~30 particles a cell, both binnings,
a spread of 8, 1 and 3), and whole sparse dam-break runs give the same particle bits either
way (12 substeps each, tests/gpu/sparse_runs.py). The host harness
(tests/unit/test_cuda_sparse_scatter_host.py) checks the same sums without a GPU."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block
from tests.gpu.test_flip_sparse_scatter_gpu import scatter
from tests.unit.test_cuda_sparse_gather_host import scene
from voxfx.kernels.flip import sparse_gpu, sparse_scatter

MODES = sparse_scatter.BANK_MODES


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_scatter_slot_orders_give_the_same_sums(monkeypatch, closed, apic, case):
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_KERNEL", "lean")
    rng = np.random.default_rng()
    if case == "liquid":
        spec, pos, vel, c = liquid_block(closed, apic, rng)
    else:  # ~30 particles a cell in one brick, particles beyond a closed box's walls
        spec, _, pos, vel, c = scene(closed, apic, int(rng.integers(1 << 30)))
    grid = gpu_grid(spec, pos, closed, 3)
    sums, faces = {}, {}
    for mode in MODES:
        monkeypatch.setenv("VOXFX_SPARSE_SCATTER_BANKS", mode)
        for spread in (8, 1, 3):  # the sorted binning's copies, lanes 8, 1 and 3 particles apart
            (f, m), acc, bounds = scatter(grid, pos, vel, c, spread)
            sums[mode, spread] = [a.view(np.uint32) for a in f] + m + [acc, bounds]
        dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
        valid = sparse_gpu.particles_to_grid(grid, *dev, gather="scatter")  # the order binning (default)
        faces[mode] = [host(grid[n]).view(np.uint32) for n in grid.FACES] + [host(v) for v in valid]
    first = sums["flat", 8]
    assert all(np.count_nonzero(m) > 1000 for m in first[3:6])
    for key, got in sums.items():
        for a, b in zip(got, first):
            assert np.array_equal(a, b), key
    for mode in MODES:
        for a, b in zip(faces[mode], faces["flat"]):
            assert np.array_equal(a, b), mode


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_in_either_scatter_slot_order(monkeypatch, apic):
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_KERNEL", "lean")
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_SCATTER_BANKS", MODES)
