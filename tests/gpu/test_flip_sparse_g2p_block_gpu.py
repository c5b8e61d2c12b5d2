"""The block G2P kernel (kernels/cuda/flip_sparse_g2p_block.cu, ``VOXFX_SPARSE_G2P_KERNEL=block``,
issue 24) on the device: whole sparse dam-break runs (12 substeps; FLIP, APIC, and the
time-centred advection) give the particle bits of the default kernel's and of the bricks
kernel's runs, with each of its corners (``G2P_CORNERS``: auto, pairs, select, table, tablew). The NumPy
reference's bits, kernel by kernel, on whole topologies and a checkerboard of bricks:
tests/gpu/test_flip_sparse_g2p_gpu.py (every ``G2P_KERNELS`` value, the block kernel's both corners)."""

import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from voxfx.kernels.flip import sparse_g2p_gpu


@pytest.mark.parametrize("centred", [False, True], ids=["midpoint", "centred"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_the_block_kernel(monkeypatch, apic, centred):
    assert "block" in sparse_g2p_gpu.G2P_KERNELS
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_G2P_KERNEL", ("auto", "block", "bricks"),
                      time_centred_advection=centred)


@pytest.mark.parametrize("centred", [False, True], ids=["midpoint", "centred"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_each_block_corners(monkeypatch, apic, centred):
    assert sparse_g2p_gpu.G2P_CORNERS == ("auto", "pairs", "select", "table", "tablew")
    monkeypatch.setenv("VOXFX_SPARSE_G2P_KERNEL", "block")
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_G2P_CORNERS", sparse_g2p_gpu.G2P_CORNERS,
                      time_centred_advection=centred)


@pytest.mark.parametrize("centred", [False, True], ids=["midpoint", "centred"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_each_block_shape(monkeypatch, apic, centred):
    """VOXFX_SPARSE_G2P_BLOCK_SHAPE (helper h21d): the block kernel built and launched for each
    (blocks an SM, threads) gives the default shape's particle bits."""
    assert sparse_g2p_gpu.G2P_BLOCK_SHAPES == ("8x128", "4x256", "16x64", "32x32")
    monkeypatch.setenv("VOXFX_SPARSE_G2P_KERNEL", "block")
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_G2P_BLOCK_SHAPE", sparse_g2p_gpu.G2P_BLOCK_SHAPES,
                      time_centred_advection=centred)

