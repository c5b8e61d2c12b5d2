"""The lean scatter's slot order (flip_sparse_scatter.cu's SCATTER_FLIP;
``VOXFX_SPARSE_SCATTER_BANKS`` flip / flat, helper i24q4) on the device: the flat order's
integer sums, bounds, faces and masks bit for bit on fresh random particles (FLIP and APIC,
open and closed, a liquid block and a brick packed with ~30 particles a cell, both binnings,
a spread of 8, 1 and 3), and whole sparse dam-break runs give the same particle bits either
way (12 substeps each, tests/gpu/sparse_runs.py). The host harness
(tests/unit/test_cuda_sparse_scatter_host.py) checks the same sums without a GPU."""

import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_scatter_gpu import assert_scatter_ways_agree
from voxfx.kernels.flip import sparse_scatter

MODES = sparse_scatter.BANK_MODES


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_scatter_slot_orders_give_the_same_sums(monkeypatch, closed, apic, case):
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_KERNEL", "lean")
    assert_scatter_ways_agree(monkeypatch, "VOXFX_SPARSE_SCATTER_BANKS", MODES, "flat", closed, apic, case)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_in_either_scatter_slot_order(monkeypatch, apic):
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_KERNEL", "lean")
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_SCATTER_BANKS", MODES)
