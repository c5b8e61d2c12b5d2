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


@pytest.mark.parametrize("name", ("tank", "moved", "speckled", "sheet"))
def test_gpu_local_brick_links_give_the_same_parents_and_labels(monkeypatch, name):
    """cells_hook_bricks_local (sparse_pressure_cells.BRICK_LINKS "local": the brick's cells in
    shared memory, no nbr rows) against cells_hook_bricks ("nbr") on the device's real blocks of
    128 threads: the parents after the one launch bit for bit (from cells_rhs's parents, and
    from every cell its own), then stage's b, kind, labels, reach and count."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    g = scene(cupy, name, seed)
    n = g.size
    cell = g["cell"].astype(cupy.uint8)
    nbr = cupy.ascontiguousarray(g.nbr)
    fluid = host(cell) == FLUID
    ran = {}
    for start in ("rhs", "self"):
        if start == "rhs":  # cells_rhs's LINK_INIT parents: a FLUID cell's lowest FLUID neighbour below
            low = cupy.arange(n, dtype=cupy.int32)
            for d in range(6):
                o = nbr[d]
                ok = (cell == FLUID) & (o >= 0) & (o < low) & (cell[cupy.maximum(o, 0)] == FLUID)
                low = cupy.where(ok, o, low).astype(cupy.int32)
            parent0 = low
        else:
            parent0 = cupy.arange(n, dtype=cupy.int32)
        for kernel in ("cells_hook_bricks", "cells_hook_bricks_local"):
            parent = parent0.copy()
            sparse_pressure_cells._K.launch_grid(kernel, (n // 512,), (sparse_pressure_cells._BRICK_THREADS,),
                                                 (cell, nbr, np.int32(n), parent))
            ran[start, kernel] = host(parent)
        assert np.array_equal(ran[start, "cells_hook_bricks"], ran[start, "cells_hook_bricks_local"]), \
            f"{name}, {start}, seed {seed}"
        assert (ran[start, "cells_hook_bricks"] != host(parent0))[fluid].any()  # joined something
    got = {}
    for links in sparse_pressure_cells.BRICK_LINKS:
        monkeypatch.setenv("VOXFX_SPARSE_LABEL_BRICK_LINKS", links)
        got[links] = [host(a) for a in sparse_pressure_cells.stage(scene(cupy, name, seed), DT)]
    for a, b in zip(got["nbr"], got["local"]):
        assert a.dtype == b.dtype and np.array_equal(a, b), f"{name}, seed {seed}"


def test_gpu_local_brick_links_give_the_same_pressure_bit_for_bit(monkeypatch):
    """Cold solves of a speckled tank (sealed regions) and dam-break tanks with each way."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", False)
    runs = {}
    for links in sparse_pressure_cells.BRICK_LINKS:
        monkeypatch.setenv("VOXFX_SPARSE_LABEL_BRICK_LINKS", links)
        sparse_pressure_gpu.release_gpu_solvers()
        runs[links] = [sparse_pressure.solve_pressure(scene(cupy, name, seed), DT, tolerance=1e-5)
                       for name, seed in (("speckled", 3), ("tank", 4), ("moved", 5))]
    sparse_pressure_gpu.release_gpu_solvers()
    for (p_a, s_a), (p_b, s_b) in zip(runs["nbr"], runs["local"]):
        assert s_a == s_b and np.array_equal(host(p_a).view(np.uint32), host(p_b).view(np.uint32))
    assert max(s["iterations"] for _, s in runs["local"]) >= 3
