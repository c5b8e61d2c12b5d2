"""The cells stage's face links by pairs and its label pass by brick (sparse_pressure_cells.CELLS_PAIRS
"links": cells_rhs_brick_pairs; "label": cells_label_brick; "1" both, the default since session 25)
against the kernels before ("0": cells_rhs_brick's 64 unites a face, cells_label) on the device's real
concurrent blocks: the stage's b, kinds, labels, reach and sealed count bit for bit on fresh random
liquids, pools of thousands of bricks (speckled: many sealed regions; all FLUID: one component across
every face) repeated on one grid, and the same pressure bit for bit through solve_pressure. On the host:
tests/unit/test_cuda_sparse_pressure_cells_brick_host.py (issue 24, helper s23i; proven there, first run
here)."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_bricks_gpu import host
from tests.gpu.test_flip_sparse_pressure_cells_brick_gpu import _agree, big_pool
from tests.gpu.test_flip_sparse_pressure_one_read_gpu import DT, scene
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_cells, sparse_pressure_gpu
from voxfx.kernels.flip.grid import FLUID

WAYS = ("links", "label", "1")


def _stage(monkeypatch, g, pairs, brick="fused"):
    monkeypatch.setenv("VOXFX_SPARSE_CELLS_BRICK", brick)
    monkeypatch.setenv("VOXFX_SPARSE_CELLS_PAIRS", pairs)
    return [host(a) for a in sparse_pressure_cells.stage(g, DT)]


@pytest.mark.parametrize("pairs", WAYS)
@pytest.mark.parametrize("name", ("tank", "moved", "speckled", "sheet"))
def test_gpu_pairs_give_the_default_stages_values(monkeypatch, name, pairs):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    ref = scene(np, name, seed)
    fluid = ref["cell"] == FLUID
    g = scene(cupy, name, seed)
    old = _stage(monkeypatch, g, "0")
    for repeat in range(3):
        _agree(old, _stage(monkeypatch, g, pairs), f"{name}, {pairs}, seed {seed}, stage {repeat}")
    _agree(old, _stage(monkeypatch, g, pairs, "inner"), f"{name}, {pairs} inner, seed {seed}")
    assert np.array_equal(old[2][fluid].astype(np.int64), sparse_pressure.label_components(ref, fluid)[fluid])


@pytest.mark.parametrize("pairs", WAYS)
@pytest.mark.parametrize("fluid_share", (0.66, 1.0))
def test_gpu_pairs_on_thousands_of_bricks(monkeypatch, fluid_share, pairs):
    """Thousands of blocks at once, their tickets, joins and label chases racing: five stages on one
    grid against the default, bit for bit."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    g = big_pool(cupy, seed, fluid_share)
    old = _stage(monkeypatch, g, "0")
    for repeat in range(5):
        _agree(old, _stage(monkeypatch, g, pairs), f"{pairs}, share {fluid_share}, seed {seed}, stage {repeat}")
    fluid = host(g["cell"]) == FLUID
    assert len(np.unique(old[2][fluid])) == 1 if fluid_share == 1.0 else int(old[4][0]) > 0


def test_gpu_pairs_give_the_same_pressure_bit_for_bit(monkeypatch):
    """Cold solves of a speckled tank and dam-break tanks with each way."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setenv("VOXFX_SPARSE_CELLS_BRICK", "fused")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    runs = {}
    for pairs in ("0",) + WAYS:
        monkeypatch.setenv("VOXFX_SPARSE_CELLS_PAIRS", pairs)
        sparse_pressure_gpu.release_gpu_solvers()
        runs[pairs] = [sparse_pressure.solve_pressure(scene(cupy, name, seed), DT, tolerance=1e-5)
                       for name, seed in (("speckled", 3), ("tank", 4), ("moved", 5))]
    sparse_pressure_gpu.release_gpu_solvers()
    for pairs in WAYS:
        for (p_a, s_a), (p_b, s_b) in zip(runs["0"], runs[pairs]):
            assert s_a == s_b and np.array_equal(host(p_a).view(np.uint32), host(p_b).view(np.uint32)), pairs
