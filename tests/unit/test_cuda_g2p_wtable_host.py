"""The block G2P kernel with the brick table's corner codes split (kernels/cuda/include/voxfx_g2p_block_wtable.cuh,
``BLOCK_TABLE=2``, ``VOXFX_SPARSE_G2P_CORNERS=tablew``, helper s22c), on the host: the flip scenes of
tests/unit/test_cuda_sparse_flip_host.py and the G2P-only harness of tests/unit/test_cuda_g2p_table_host.py (fast
faces whose midpoints leave the table; whole bricks and a checkerboard; closed and open; FLIP and APIC; end of the
substep and time-centred) give the NumPy reference's bits; a mutant (the corners' (y, z) local parts left out) does
not; the closed lattices' upper-corner flag once a launch (``BLOCK_UP_UNIFORM``, s != 1) equals the per-lane one for
every box size and point; the switch builds the module."""

import numpy as np
import pytest

from tests.cuda_host import DRIVER, STUBS
from tests.unit import test_cuda_g2p_table_host as table_host
from tests.unit import test_cuda_sparse_flip_host as flip_host
from tests.unit.test_cuda_exact import build_ints, build_words, kernel_defines
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu

WTABLE = ["-DBLOCK_PAIRS=0", "-DBLOCK_TABLE=2"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_words(tmp_path_factory, flip_host.HARNESS, [*kernel_defines(sparse_gpu.KERNELS), *WTABLE],
                       "sparse_flip_wtable")


# the same scenes and checks (NumPy reference bits), the block kernels built with the split codes
test_wtable_corners_match_the_numpy_reference = flip_host.test_sparse_flip_kernels_match_the_numpy_reference


@pytest.fixture(scope="module")
def g2p_harness(tmp_path_factory):
    return build_words(tmp_path_factory, table_host.G2P_HARNESS, [*kernel_defines(sparse_gpu.KERNELS), *WTABLE],
                       "g2p_wtable")


# fast faces: midpoints in and beyond the table (both paths), the NumPy reference's bits
test_wtable_corners_match_the_reference_where_midpoints_leave_the_table = (
    table_host.test_table_corners_match_the_reference_where_midpoints_leave_the_table)


@pytest.fixture(scope="module")
def mutant_harness(tmp_path_factory):
    return build_words(tmp_path_factory, table_host.G2P_HARNESS,
                       [*kernel_defines(sparse_gpu.KERNELS), *WTABLE, "-DWTABLE_MUTANT=1"], "g2p_wtable_mutant")


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_a_mutant_table_fails_the_reference(mutant_harness, apic):
    """The mutant (WTABLE_MUTANT: the corners' (y, z) local parts left out) differs from the NumPy reference's
    bits."""
    with pytest.raises(AssertionError):
        table_host.test_table_corners_match_the_reference_where_midpoints_leave_the_table(mutant_harness, True,
                                                                                           apic, False)


# axis_corners(c, closed = 1, s) with BLOCK_UP_UNIFORM 0 and 1: i0, up, t's bits for s in [−3, 40) and points
# around every lattice edge, one a line each way
UP_HARNESS = STUBS + r"""
#include "sparse.cu"
#include "flip_sparse_transfer.cu"
#include "flip_sparse_g2p_block.cu"
""" + DRIVER + r"""
int main() {
    const float c[] = {-1e30f, -5.0f, -1.0f, -0.5f, -0.0f, 0.0f, 0.25f, 0.5f, 0.999f, 1.0f, 1.5f, 2.0f, 2.5f, 7.9f,
                       8.0f, 38.5f, 39.0f, 39.99f, 40.0f, 41.0f, 1e30f, INFINITY, -INFINITY, NAN};
    for (int s = -3; s < 40; ++s)
        for (float x : c) {
            const AxisCorners A = axis_corners(x, 1, s);
            unsigned t;
            std::memcpy(&t, &A.t, 4);
            printf("%d\n%d\n%d\n", A.i0, A.up, (int)t);
        }
    return 0;
}
"""


def test_the_closed_upper_corner_flag_once_a_launch_is_the_lanes(tmp_path_factory):
    """min(i0 + 1, s − 1) != i0 (the lattices' upper corner, per lane) equals s != 1 for every box size s and point c
    (i0 ≤ s − 2 where s ≥ 2; 0 where s = 1; the clamp's s − 1 < 0 where s ≤ 0): i0, up and t the same bits."""
    lane, uniform = (build_ints(tmp_path_factory, UP_HARNESS, [*kernel_defines(sparse_gpu.KERNELS), *WTABLE,
                                                               f"-DBLOCK_UP_UNIFORM={u}"], f"g2p_up{u}")([])
                     for u in (0, 1))
    assert lane.size == 43 * 24 * 3
    assert np.array_equal(lane, uniform)
    up = lane.reshape(43, 24, 3)[:, :, 1]
    assert (up[1 + 3] == 0).all() and (up[np.arange(43) != 4] == 1).all()  # s = 1 only: no upper corner


def test_tablew_corners_build_the_module(monkeypatch):
    """VOXFX_SPARSE_G2P_CORNERS=tablew: every variant's module built with BLOCK_TABLE=2, no pairs, no table code."""
    monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", "tablew")
    for centred in (False, True):
        for apic in (False, True):
            assert sparse_g2p_gpu.block_corners(centred, apic) == "tablew"
            module, entry = sparse_g2p_gpu.g2p_block_entry(centred, apic)
            assert module is sparse_g2p_gpu.G2P_BLOCK_TABLEW
            assert "-DBLOCK_TABLE=2" in module.options and "-DBLOCK_PAIRS=0" in module.options
            assert not any("BLOCK_TABLE_OR" in o for o in module.options)
            assert entry == sparse_g2p_gpu.G2P_BLOCK_ENTRIES[(centred, apic)]
