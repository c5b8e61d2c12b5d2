"""The block G2P kernel's corners (kernels/cuda/flip_sparse_g2p_block.cu ``BLOCK_PAIRS``,
``sparse_g2p_gpu.G2P_CORNERS``): tests/unit/test_cuda_sparse_flip_host.py builds the harness
with the kernel file's own default (pairs: a "warp" of one lane takes the pairs wherever its
sample crosses no brick along y and z, the corners picked one by one elsewhere); here the same
checks with select (``BLOCK_PAIRS=0``, the kernel before the pairs), and which corners each
variant launches with (auto: tablew without APIC, tests/unit/test_cuda_g2p_wtable_host.py; table with APIC at
the end of the substep, tests/unit/test_cuda_g2p_table_host.py; pairs time-centred with APIC)."""

import pytest

from tests.unit import test_cuda_sparse_flip_host as flip_host
from tests.unit.test_cuda_exact import build_words, kernel_defines
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_words(tmp_path_factory, flip_host.HARNESS, [*kernel_defines(sparse_gpu.KERNELS), "-DBLOCK_PAIRS=0"],
                       "sparse_flip_select")


# the same scenes and checks (NumPy reference bits), the block kernels built with the select corners
test_select_corners_match_the_numpy_reference = flip_host.test_sparse_flip_kernels_match_the_numpy_reference


# auto's corners a variant (centred, apic): tablew without APIC (helper s22c), table with APIC at the end of the
# substep, pairs for time-centred APIC
AUTO = {(False, False): "tablew", (False, True): "table", (True, False): "tablew", (True, True): "pairs"}


def test_auto_corners_are_tablew_without_apic_table_with_it_pairs_time_centred(monkeypatch):
    monkeypatch.delenv("VOXFX_SPARSE_G2P_CORNERS", raising=False)
    want = AUTO
    for (centred, apic), way in want.items():
        assert sparse_g2p_gpu.block_corners(centred, apic) == way
        module, entry = sparse_g2p_gpu.g2p_block_entry(centred, apic)
        assert ("-DBLOCK_PAIRS=1" in module.options) == (way == "pairs")
        assert ("-DBLOCK_TABLE=1" in module.options) == (way == "table")
        assert ("-DBLOCK_TABLE=2" in module.options) == (way == "tablew")
        assert entry == sparse_g2p_gpu.G2P_BLOCK_ENTRIES[(centred, apic)]
    for way in ("pairs", "select", "table", "tablew"):  # a way named wins for every variant
        monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", way)
        for centred, apic in want:
            assert sparse_g2p_gpu.block_corners(centred, apic) == way
            options = sparse_g2p_gpu.g2p_block_entry(centred, apic)[0].options
            assert ("-DBLOCK_PAIRS=1" in options) == (way == "pairs")
            assert ("-DBLOCK_TABLE=1" in options) == (way == "table")
            assert ("-DBLOCK_TABLE=2" in options) == (way == "tablew")


def test_block_shapes_build_the_kernel_for_their_blocks_and_threads(monkeypatch):
    """VOXFX_SPARSE_G2P_BLOCK_SHAPE: each shape's module is built (__launch_bounds__) and launched with
    its blocks an SM and threads; 8x128, the default, is the module's G2P_BLOCK_MIN_BLOCKS and G2P_BLOCK_THREADS."""
    monkeypatch.delenv("VOXFX_SPARSE_G2P_CORNERS", raising=False)
    want = {"8x128": (sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS), "4x256": (4, 256),
            "16x64": (16, 64), "32x32": (32, 32)}
    assert tuple(want) == sparse_g2p_gpu.G2P_BLOCK_SHAPES and want["8x128"] == (8, 128)
    for shape, (blocks, threads) in want.items():
        monkeypatch.setenv("VOXFX_SPARSE_G2P_BLOCK_SHAPE", shape)
        for centred in (False, True):
            for apic in (False, True):
                module, entry = sparse_g2p_gpu.g2p_block_entry(centred, apic)
                assert f"-DBLOCK_MIN_BLOCKS={blocks}" in module.options
                assert f"-DBLOCK_THREADS={threads}" in module.options and module.threads == threads
                way = AUTO[(centred, apic)]
                assert ("-DBLOCK_TABLE=1" in module.options) == (way == "table")
                assert ("-DBLOCK_TABLE=2" in module.options) == (way == "tablew")
                assert ("-DBLOCK_PAIRS=1" in module.options) == (way == "pairs")
                assert entry == sparse_g2p_gpu.G2P_BLOCK_ENTRIES[(centred, apic)]
