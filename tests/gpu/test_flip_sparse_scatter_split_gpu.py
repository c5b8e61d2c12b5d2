"""The brick scatter split over blocks (flip_sparse_scatter.cu's SCATTER_SPLIT;
``VOXFX_SPARSE_SCATTER_SPLIT`` off / on, helper h17d) on the device: with the switch on, the
integer sums, bounds, faces and masks are the default's bit for bit on the crowded scene (a
cell of 20,000: its brick split over 5 blocks and more), on a packed brick, and whole sparse
dam-break runs give the same particle bits (tests/gpu/sparse_runs.py). The host harness
(tests/unit/test_cuda_sparse_scatter_host.py, "lean flip split", and its mutant) checks the
same sums without a GPU."""

import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_scatter_crowd_gpu import assert_crowded_scene_agrees
from tests.gpu.test_flip_sparse_scatter_gpu import assert_scatter_ways_agree
from voxfx.kernels.flip import sparse_scatter

MODES = sparse_scatter.SPLIT_MODES


@pytest.mark.parametrize("closed, apic", [(True, False), (False, True)], ids=["closed-flip", "open-apic"])
def test_gpu_split_bricks_give_the_same_sums_on_a_crowded_scene(monkeypatch, closed, apic):
    assert_crowded_scene_agrees(monkeypatch, "VOXFX_SPARSE_SCATTER_SPLIT", closed, apic)


@pytest.mark.parametrize("closed, apic", [(True, True), (False, False)], ids=["closed-apic", "open-flip"])
def test_gpu_split_bricks_give_the_same_sums_on_a_packed_brick(monkeypatch, closed, apic):
    assert_scatter_ways_agree(monkeypatch, "VOXFX_SPARSE_SCATTER_SPLIT", MODES, "off", closed, apic, "packed")


def test_gpu_sparse_runs_give_the_same_particle_bits_with_split_bricks(monkeypatch):
    assert_runs_agree(monkeypatch, False, "VOXFX_SPARSE_SCATTER_SPLIT", MODES)
