"""The order binning's count (``sparse_gpu.bin_count_mode``, ``VOXFX_SPARSE_BIN_COUNT``): the
grouped count by default (measured faster, the same bins: tests/gpu/test_flip_sparse_grouped_count_gpu.py),
the atomic one on request, and a one-line error naming the variable for anything else; the same
for where P2G's scatter types the cells (``sparse_gpu.p2g_cells_mode``, ``VOXFX_SPARSE_P2G_CELLS``:
tests/gpu/test_flip_sparse_p2g_cells_gpu.py)."""

import pytest

from voxfx.kernels.flip import sparse_gpu


def test_the_grouped_count_is_the_default_and_the_variable_is_checked(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_BIN_COUNT", raising=False)
    assert sparse_gpu.bin_count_mode() == "grouped"
    monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", " Atomic ")
    assert sparse_gpu.bin_count_mode() == "atomic"
    assert sparse_gpu.bin_count_mode("grouped") == "grouped"
    monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", "sideways")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_BIN_COUNT must be one of grouped, atomic, not 'sideways'"):
        sparse_gpu.bin_count_mode()


def test_the_p2g_cell_types_switch_is_checked(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_P2G_CELLS", raising=False)
    assert sparse_gpu.p2g_cells_mode() == sparse_gpu.P2G_CELLS[0]
    assert sparse_gpu.p2g_cells_mode() == "finish"  # the default (measured: the stage's device time 0.809 -> 0.802)
    monkeypatch.setenv("VOXFX_SPARSE_P2G_CELLS", " Apart ")
    assert sparse_gpu.p2g_cells_mode() == "apart"
    monkeypatch.setenv("VOXFX_SPARSE_P2G_CELLS", "fused")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_P2G_CELLS must be one of finish, apart, not 'fused'"):
        sparse_gpu.p2g_cells_mode()


