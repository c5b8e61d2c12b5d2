"""sparse_gpu.g2p_build (issue 24): the G2P build for more blocks an SM is chosen by
G2P_MIN_BLOCKS or VOXFX_SPARSE_G2P_MIN_BLOCKS, defined for nvcc as G2P_MIN_BLOCKS and
G2P_BLOCK, built once per (blocks, threads); 0 is the default build; bad values get a
one-line error. (Builds only: the bits are tests/gpu/test_flip_sparse_g2p_gpu.py's.)"""

import pytest

from voxfx.kernels.flip import sparse_gpu


def test_the_default_build_unless_asked(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_G2P_MIN_BLOCKS", raising=False)
    assert sparse_gpu.g2p_build() is sparse_gpu.G2P
    monkeypatch.setenv("VOXFX_SPARSE_G2P_MIN_BLOCKS", "0")
    assert sparse_gpu.g2p_build() is sparse_gpu.G2P


def test_a_build_per_blocks_and_threads(monkeypatch):
    monkeypatch.setenv("VOXFX_SPARSE_G2P_MIN_BLOCKS", "3")
    k = sparse_gpu.g2p_build(threads=512)
    assert k is not sparse_gpu.G2P and k.threads == 512
    assert "-DG2P_MIN_BLOCKS=3" in k.options and "-DG2P_BLOCK=512" in k.options
    assert set(sparse_gpu.G2P.options) < set(k.options)  # the default build's defines too
    assert sparse_gpu.g2p_build(3, 512) is k
    other = sparse_gpu.g2p_build(6, 256)
    assert other is not k and "-DG2P_BLOCK=256" in other.options and other.threads == 256


@pytest.mark.parametrize("value", ["three", "-1"])
def test_bad_values_are_one_line_errors(monkeypatch, value):
    monkeypatch.setenv("VOXFX_SPARSE_G2P_MIN_BLOCKS", value)
    with pytest.raises(ValueError, match="G2P") as err:
        sparse_gpu.g2p_build()
    assert "\n" not in str(err.value)
