"""The scatter's lean per-particle code (flip_sparse_scatter.cu's scatter_particle_lean,
``VOXFX_SPARSE_SCATTER_KERNEL=lean``) on the device: the classic code's integer sums, bounds,
faces and masks bit for bit on fresh random particles (FLIP and APIC, open and closed, both
binnings, a spread of 8, 1 and 3), and whole sparse dam-break runs give the same particle
bits with either code (12 substeps each, tests/gpu/sparse_runs.py)."""

import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_scatter_gpu import assert_scatter_ways_agree

MODES = ("classic", "lean")


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_lean_scatter_gives_the_classic_sums(monkeypatch, closed, apic, case):
    assert_scatter_ways_agree(monkeypatch, "VOXFX_SPARSE_SCATTER_KERNEL", MODES, "classic", closed, apic, case)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_either_scatter_code(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_SCATTER_KERNEL", MODES)
