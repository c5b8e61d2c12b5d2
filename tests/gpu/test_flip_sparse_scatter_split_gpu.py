"""The brick scatter split over blocks (flip_sparse_scatter.cu's SCATTER_SPLIT;
``VOXFX_SPARSE_SCATTER_SPLIT`` off / on, helper h17d) on the device: with the switch on, the
integer sums, bounds, faces and masks are the default's bit for bit on the crowded scene (a
cell of 20,000: its brick split over 5 blocks and more), on a packed brick, and whole sparse
dam-break runs give the same particle bits (tests/gpu/sparse_runs.py). The host harness
(tests/unit/test_cuda_sparse_scatter_host.py, "lean flip split", and its mutant) checks the
same sums without a GPU."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid
from tests.gpu.test_flip_sparse_scatter_gpu import assert_scatter_ways_agree, assert_ways_agree_on
from voxfx.kernels.flip import sparse_scatter
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec

MODES = sparse_scatter.SPLIT_MODES


@pytest.mark.parametrize("closed, apic", [(True, False), (False, True)], ids=["closed-flip", "open-apic"])
def test_gpu_split_bricks_give_the_same_sums_on_a_crowded_scene(monkeypatch, closed, apic):
    assert_crowded_scene_agrees(monkeypatch, "VOXFX_SPARSE_SCATTER_SPLIT", closed, apic)


@pytest.mark.parametrize("closed, apic", [(True, True), (False, False)], ids=["closed-apic", "open-flip"])
def test_gpu_split_bricks_give_the_same_sums_on_a_packed_brick(monkeypatch, closed, apic):
    assert_scatter_ways_agree(monkeypatch, "VOXFX_SPARSE_SCATTER_SPLIT", MODES, "off", closed, apic, "packed")


def test_gpu_sparse_runs_give_the_same_particle_bits_with_split_bricks(monkeypatch):
    assert_runs_agree(monkeypatch, False, "VOXFX_SPARSE_SCATTER_SPLIT", MODES)


def crowded_scene(closed, apic, seed):
    """tests/unit/test_cuda_sparse_gather_host.scene's kind of grid (random bricks over two updates, free
    slots among them, in the closed box particles beyond the walls), with crowded cells: 1,200
    particles in one cell, 500 in another, 600 over a block of 2 × 2 × 2 cells, 300 in a cell at
    the wall x = 0 (closed: terms cut by the face lattice) and a packed brick."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (40, 24, 20))
    grid = SparseFlipGrid(spec, np, closed=closed)
    origin, h = np.asarray(spec.origin), spec.voxel_size
    lo = 0.0 if closed else -4.0

    def cells(n, a, b):
        return rng.uniform(a, b, (n, 3))

    grid.update((origin + cells(1000, lo, 30) * h).astype(np.float32), 3)
    spread = cells(2000, (lo, lo, lo), (36, 22, 18))
    packed = 16 + rng.uniform(0, 8, (2000, 3))
    crowd = np.concatenate([np.array([5.0, 9.0, 4.0]) + rng.uniform(0, 1, (1200, 3)),
                            np.array([20.0, 3.0, 11.0]) + rng.uniform(0, 1, (500, 3)),
                            np.array([27.0, 15.0, 7.0]) + rng.uniform(0, 2, (600, 3)),
                            np.array([0.0, 12.0, 9.0]) + rng.uniform(0, 1, (300, 3))])  # at the wall x = 0
    beyond = cells(300, (-7.9, 0, 0), (-2.5, 22, 18))
    beyond[150:, 1] += 26.5
    pos = (origin + np.concatenate([spread, packed, crowd, beyond]) * h).astype(np.float32)
    grid.update(pos, 2)
    n = len(pos)
    vel = rng.normal(0, 0.4, (n, 3)).astype(np.float32)
    c = rng.normal(0, 1, (n, 3, 3)).astype(np.float32) if apic else None
    return grid, pos, vel, c


def assert_crowded_scene_agrees(monkeypatch, variable, closed, apic):
    """*variable* off and on: on the host harness's crowded scene with a cell of 20,000 more, the
    sums, bounds, faces and masks at spreads 8, 1 and 3 and the whole P2G the same bits."""
    grid_np, pos, vel, c = crowded_scene(closed, apic, 41 + 2 * closed + apic)
    extra = np.asarray(grid_np.origin) + (np.array([12.0, 6.0, 9.0]) + np.random.default_rng(5).uniform(
        0, 1, (20000, 3))) * grid_np.h  # and one cell of 20,000
    pos = np.concatenate([pos, extra.astype(np.float32)])
    vel = np.concatenate([vel, np.random.default_rng(6).normal(0, 0.4, (20000, 3)).astype(np.float32)])
    if c is not None:
        c = np.concatenate([c, np.random.default_rng(7).normal(0, 1, (20000, 3, 3)).astype(np.float32)])
    first = assert_ways_agree_on(monkeypatch, variable, ("off", "on"), "off", gpu_grid(grid_np.spec, pos, closed, 3),
                                 pos, vel, c)
    assert int(first[-1][1]) >= 20000  # the fullest cell
