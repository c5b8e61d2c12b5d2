"""The order binning's grouped count (flip_sparse_transfer.cu's count_particles_grouped,
``VOXFX_SPARSE_BIN_COUNT=grouped``, the default: one atomicAdd a warp's run of particles in
one cell) on the device, on fresh random particles seeded cell by cell (8 lanes of a warp
share a cell) and shuffled (few do): the atomic count's counts, starts, cells and bounds, an
order binned by cell, the same faces and masks bit for bit (FLIP and APIC); and whole sparse
runs give the same particle bits with either count."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block
from voxfx.kernels.flip import sparse_gpu


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
        monkeypatch.setenv("VOXFX_SPARSE_BIN_COUNT", mode)
        valid = sparse_gpu.particles_to_grid(grid, *dev)
        faces[mode] = [host(grid[n]).view(np.uint32) for n in grid.FACES] + [host(m) for m in valid]
    assert all(np.count_nonzero(m) > 1000 for m in faces["atomic"][3:])
    for a, b in zip(faces["grouped"], faces["atomic"]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_either_count(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_BIN_COUNT", ("atomic", "grouped", "grouped"))
