"""The sealed-region labels' union-find brick by brick (sparse_pressure_cells.HOOK "bricks":
cells_hook_bricks joins each brick's links in shared memory, cells_hook_faces those across
brick faces) against the one-launch union-find on the flat cells ("cells") and the NumPy
reference: the same labels (each component's lowest flat index), reach, sealed count and
cell types on fresh random liquids with many sealed regions, and the same pressure bit for
bit and iterations through solve_pressure."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_bricks_gpu import host
from tests.gpu.test_flip_sparse_pressure_one_read_gpu import DT, scene
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_cells, sparse_pressure_gpu
from voxfx.kernels.flip.grid import FLUID


@pytest.mark.parametrize("name", ("tank", "moved", "speckled", "sheet"))
def test_gpu_brick_hook_gives_the_flat_hooks_labels(monkeypatch, name):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    ref = scene(np, name, seed)
    fluid = ref["cell"] == FLUID
    want = sparse_pressure.label_components(ref, fluid)
    got = {}
    for hook in ("cells", "bricks"):
        monkeypatch.setattr(sparse_pressure_cells, "HOOK", hook)
        g = scene(cupy, name, seed)
        assert g.size % 512 == 0
        b, kind, label, reach, count = sparse_pressure_cells.stage(g, DT)
        got[hook] = [host(a) for a in (b, kind, label, reach, count)]
        assert np.array_equal(got[hook][2][fluid].astype(np.int64), want[fluid]), f"{hook}, seed {seed}"
    for a, b in zip(got["cells"], got["bricks"]):
        assert a.dtype == b.dtype and np.array_equal(a, b), f"seed {seed}"
    if name == "speckled":
        assert int(got["bricks"][4][0]) > 0  # sealed regions, pinned
        assert len(np.unique(want[fluid])) > 50  # many components across the bricks


def test_gpu_brick_hook_gives_the_same_pressure_bit_for_bit(monkeypatch):
    """Cold solves of a speckled tank (sealed regions) and a dam-break tank with each hook."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    runs = {}
    for hook in ("cells", "bricks"):
        monkeypatch.setattr(sparse_pressure_cells, "HOOK", hook)
        sparse_pressure_gpu.release_gpu_solvers()
        runs[hook] = []
        for name, seed in (("speckled", 3), ("tank", 4), ("moved", 5)):
            p, stats = sparse_pressure.solve_pressure(scene(cupy, name, seed), DT, tolerance=1e-5)
            runs[hook].append((host(p), stats))
    sparse_pressure_gpu.release_gpu_solvers()
    for (p_a, s_a), (p_b, s_b) in zip(runs["cells"], runs["bricks"]):
        assert s_a == s_b and np.array_equal(p_a.view(np.uint32), p_b.view(np.uint32))
    assert max(s["iterations"] for _, s in runs["bricks"]) >= 3
