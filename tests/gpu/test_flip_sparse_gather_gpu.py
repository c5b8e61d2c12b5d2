"""The staged P2G gather (flip_sparse_gather_staged.cu's p2g_gather_staged) on the device: the
brick and cell gathers' bits and the NumPy reference's faces within float32 rounding, for
slabs that fit, slabs that halve and layers gathered from global memory (a brick packed
with ~30 particles a cell), with and without the cells' masks, on fresh random particles."""

import numpy as np
import pytest

from tests.unit.test_cuda_sparse_gather_host import layer_counts, plan, scene
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_gpu, sparse_transfer
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def host(a):
    return backend.to_numpy(a)


def gpu_grid(spec, pos, closed, margin):
    import cupy

    g = SparseFlipGrid(spec, cupy, closed=closed)
    g.update(cupy.asarray(pos), margin)
    return g


def liquid_block(closed, apic, rng):
    """A block of liquid, 8 particles a cell (the dam break's seeding, jittered), with
    random velocities (and C): full bricks, the staged gather's usual case."""
    spec = GridSpec((-0.3, 0.1, 0.2), 0.04, (48, 40, 32))
    cells = np.stack(np.meshgrid(*(np.arange(4, 28), np.arange(3, 19), np.arange(2, 18)), indexing="ij"), -1)
    sub = np.stack(np.meshgrid(*([np.array([0.25, 0.75])] * 3), indexing="ij"), -1).reshape(-1, 3)
    g = (cells.reshape(-1, 1, 3) + sub + rng.uniform(-0.2, 0.2, (cells.size // 3, 8, 3))).reshape(-1, 3)
    if not closed:
        g -= 6.0  # partly beyond the box
    pos = (np.asarray(spec.origin) + g * spec.voxel_size).astype(np.float32)
    vel = rng.normal(0, 1, pos.shape).astype(np.float32)
    c = rng.normal(0, 1, (len(pos), 3, 3)).astype(np.float32) if apic else None
    return spec, pos, vel, c


def random_case(case, closed, apic, rng=None):
    """(spec, pos, vel, c) of fresh random particles: "liquid", ``liquid_block``; "packed", the
    host harness's ``scene`` (~30 particles a cell in one brick, some beyond a closed box's walls)."""
    rng = np.random.default_rng() if rng is None else rng
    if case == "liquid":
        return liquid_block(closed, apic, rng)
    spec, _, pos, vel, c = scene(closed, apic, int(rng.integers(1 << 30)))
    return spec, pos, vel, c


def faces_of(monkeypatch, grid, dev, gather, slab=None, shared=None, filter=True):
    monkeypatch.setattr(sparse_gpu, "STAGED_SLAB", slab or 4)
    monkeypatch.setattr(sparse_gpu, "STAGED_SHARED", shared)
    monkeypatch.setattr(sparse_gpu, "STAGED_FILTER", filter)
    valid = sparse_gpu.particles_to_grid(grid, *dev, gather=gather)
    return [host(grid[n]) for n in grid.FACES], [host(m) for m in valid]


CONFIGS = [(4, None, True), (4, None, False), (2, 96 * 1024, True), (3, 40 * 1024, False), (1, 12 * 1024, True)]


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_staged_gather_gives_the_brick_gathers_bits(monkeypatch, closed, apic, case):
    import cupy

    spec, pos, vel, c = random_case(case, closed, apic)
    grid = gpu_grid(spec, pos, closed, 3)
    cpu = SparseFlipGrid(spec, np, closed=closed)  # the same bricks in the same slots
    cpu.update(pos, 3)
    layers = layer_counts(cpu, pos)
    plans = [plan(layers, slab, sparse_gpu.staged_capacity(apic, shared)[0]) for slab, shared, _ in CONFIGS]
    if case == "packed":
        assert plans[0][1]  # the packed brick's layers come from global memory
    assert any(p[0] for p in plans) and plans[-1][1]  # slabs halve; layers from global memory
    assert np.array_equal(host(grid.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(grid.topology.slots), cpu.topology.slots)
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    want = sparse_transfer.particles_to_grid(cpu, pos, vel, c)
    brick, brick_valid = faces_of(monkeypatch, grid, dev, "brick")
    cell, _ = faces_of(monkeypatch, grid, dev, "cell")
    for got, by_cell, name in zip(brick, cell, cpu.FACES):
        assert np.array_equal(got.view(np.uint32), by_cell.view(np.uint32))
        assert np.abs(got - cpu[name]).max() <= 1e-6 * max(1.0, np.abs(cpu[name]).max())
    for a, b in zip(brick_valid, want):
        assert np.array_equal(a, b)
    assert all(np.count_nonzero(m) > 1000 for m in brick_valid)
    for config in CONFIGS:
        staged, staged_valid = faces_of(monkeypatch, grid, dev, "staged", *config)
        for got, ref in zip(staged, brick):
            assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), config
        for a, b in zip(staged_valid, brick_valid):
            assert np.array_equal(a, b), config


def test_gpu_staged_gather_is_picked_by_the_environment_and_gives_the_same_bits_in_any_order(monkeypatch):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, _ = liquid_block(True, False, rng)
    grid = gpu_grid(spec, pos, True, 3)
    sparse_gpu.particles_to_grid(grid, cupy.asarray(pos), cupy.asarray(vel), None, gather="brick")
    want = [host(grid[n]) for n in grid.FACES]
    monkeypatch.setenv("VOXFX_SPARSE_GATHER", "staged")
    runs = []
    for order in (np.arange(len(pos)), rng.permutation(len(pos))):
        sparse_transfer.particles_to_grid(grid, cupy.asarray(pos[order]), cupy.asarray(vel[order]))
        runs.append([host(grid[n]) for n in grid.FACES])
    for a, b in zip(runs[0], want):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    for a, b in zip(runs[1], want):  # another particle order: float64 sums in another order
        assert np.abs(a - b).max() <= 1e-6 * max(1.0, np.abs(b).max())
