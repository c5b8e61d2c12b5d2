"""The scatter by cells (flip_sparse_scatter.cu's p2g_scatter_cells and _apic,
``VOXFX_SPARSE_SCATTER=cells``) and the grouped count (flip_sparse_transfer.cu's
count_particles_grouped, ``VOXFX_SPARSE_BIN_COUNT=grouped``) on the device, on fresh random
particles: the brick scatter's integer sums, faces and masks bit for bit (FLIP and APIC, open
and closed, a brick packed with ~30 particles a cell, particles beyond a closed box's walls),
in every build; the atomic count's counts, starts, cells and bounds, an order binned by cell;
and whole sparse runs the same particle bits either way."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block
from tests.meshes import box
from tests.unit.test_cuda_sparse_gather_host import clamped, scene
from voxfx.kernels.flip import sparse_gpu, sparse_scatter
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def scattered(grid, dev, kernel, cells_blocks=None, defines=None, monkeypatch=None):
    """(acc, bounds, faces' bits, masks) of one scatter on the sorted binning's copies."""
    import cupy

    if defines is not None:
        monkeypatch.setattr(sparse_scatter, "BUILD_DEFINES", defines)

    size = grid.size
    spos, svel, sc, start, count, _, _ = sparse_gpu.bin_particles(grid, *dev)
    faces = tuple(cupy.empty(size, cupy.float32) for _ in range(3))
    valid = tuple(cupy.empty(size, cupy.uint8) for _ in range(3))
    args = (spos, svel, sc, sparse_gpu._I32(dev[2] is not None), start, count, grid.brick_slot, grid.slot_coords,
            grid.brick_nbr, sparse_gpu._I64(size), sparse_gpu._I32(grid.closed), *sparse_gpu._dims(grid),
            *sparse_gpu._frame(grid), *faces, *valid)
    acc, bounds = sparse_scatter.launch(size, args, kernel=kernel, cells_blocks=cells_blocks)
    return host(acc), host(bounds), [host(f).view(np.uint32) for f in faces], [host(m) for m in valid]


def particles(case, closed, apic, rng):
    if case == "liquid":
        spec, pos, vel, c = liquid_block(closed, apic, rng)
    else:
        spec, _, pos, vel, c = scene(closed, apic, int(rng.integers(1 << 30)))
    return spec, pos, vel, c


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_scatter_by_cells_gives_the_brick_scatters_sums_bit_for_bit(closed, apic, case):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, c = particles(case, closed, apic, rng)
    grid = gpu_grid(spec, pos, closed, 3)
    if case == "packed":
        cpu = SparseFlipGrid(spec, np, closed=closed)  # the same bricks
        cpu.update(pos, 3)
        assert (clamped(cpu, pos) > 50) == closed  # irregular particles: the term-by-term path
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    want = scattered(grid, dev, "brick")
    got = scattered(grid, dev, "cells")
    assert np.count_nonzero(want[0]) > 1000
    for a, b in zip(got[:2], want[:2]):
        assert np.array_equal(a, b)
    for a, b in zip(got[2] + got[3], want[2] + want[3]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_scatter_builds_give_the_same_sums(monkeypatch, apic):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, c = particles("packed", True, apic, rng)  # irregular particles beyond the walls too
    grid = gpu_grid(spec, pos, True, 3)
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    want = scattered(grid, dev, "brick")[0]
    inline, major, store = {"SCATTER_CELLS_INLINE": 1}, {"SCATTER_CELLS_COMP_MAJOR": 1}, {"SCATTER_FLUSH_STORE": 1}
    assert np.array_equal(scattered(grid, dev, "brick", None, store, monkeypatch)[0], want)
    for blocks, defines in ((4, inline), (3, inline), (3, {**inline, **major}), (3, major),
                            (3, {**inline, **store})):  # 4: spills
        assert np.array_equal(scattered(grid, dev, "cells", blocks, defines, monkeypatch)[0], want)


def binned(monkeypatch, grid, dev, mode):
    monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", mode)
    return [host(a) for a in sparse_gpu.bin_particles_order(grid, *dev)]


@pytest.mark.parametrize("shuffled", [False, True], ids=["seeded", "shuffled"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_grouped_count_bins_as_the_atomic_count(monkeypatch, shuffled, apic):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, c = liquid_block(True, apic, rng)  # seeded cell by cell: 8 lanes share a cell
    if shuffled:
        perm = rng.permutation(len(pos))
        pos, vel, c = pos[perm], vel[perm], None if c is None else c[perm]
    grid = gpu_grid(spec, pos, True, 3)
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    start, count, order, cell_of, bounds = binned(monkeypatch, grid, dev, "atomic")
    got = binned(monkeypatch, grid, dev, "grouped")
    for a, b in zip(got[:2] + got[3:], (start, count, cell_of, bounds)):
        assert np.array_equal(a, b)
    assert count[:-1].max() >= 8
    assert np.array_equal(np.sort(got[2]), np.arange(len(pos)))  # a permutation
    assert np.all(np.diff(cell_of[got[2]]) >= 0)  # binned by cell
    faces = {}
    for mode in ("atomic", "grouped"):
        for kernel in ("brick", "cells"):
            monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", mode)
            monkeypatch.setenv("VOXFX_SPARSE_SCATTER", kernel)
            valid = sparse_gpu.particles_to_grid(grid, *dev)
            faces[mode, kernel] = [host(grid[n]).view(np.uint32) for n in grid.FACES] + [host(m) for m in valid]
    first = faces["atomic", "brick"]
    assert all(np.count_nonzero(m) > 1000 for m in first[3:])
    for other in faces.values():
        for a, b in zip(other, first):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_either_way(monkeypatch, apic):
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.04, (40, 16, 24))
    v, t = box((0.0, 0.0, 0.0), (0.6, 0.64, 0.5))
    settings = FlipSettings(seed=int(np.random.default_rng().integers(1000)), apic=apic)
    runs = []
    for mode, kernel in (("atomic", "brick"), ("grouped", "cells"), ("grouped", "cells")):
        monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", mode)
        monkeypatch.setenv("VOXFX_SPARSE_SCATTER", kernel)
        sim = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)
        for _ in range(12):
            sim.substep(1 / 120)
        state = sim.particles_host()
        if apic:
            state["c"] = host(sim.c)
        runs.append(state)
    first = runs[0]
    assert len(first["position"]) > 10000
    assert np.abs(first["velocity"]).max() > 0.1  # the liquid moved
    for other in runs[1:]:
        assert sorted(other) == sorted(first)
        for key in first:
            assert np.array_equal(other[key].view(np.uint8), first[key].view(np.uint8)), key
