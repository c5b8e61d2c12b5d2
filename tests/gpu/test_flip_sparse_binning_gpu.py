"""The scatter's "order" binning (``sparse_gpu.bin_particles_order``,
``VOXFX_SPARSE_BINNING=order``: the |q| bound fused into the count, the two-launch scan, no
per-cell sort, the scatter reading the particles through the order) on the device: the
grid sums, faces and masks of the sorted binning bit for bit; start the exclusive scan of
the counts and order a permutation in cell order; and whole sparse runs (dam break, FLIP
and APIC) give the same particle state bits run to run and as the sorted binning, in the
particles' own order (the atomics' order within a cell changes nothing)."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block
from voxfx.kernels.flip import sparse_gpu


def p2g(monkeypatch, binning, grid, pos, vel, c):
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_BINNING", binning)
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    valid = sparse_gpu.particles_to_grid(grid, *dev, gather="scatter")
    faces = [host(grid[n]).view(np.uint32) for n in grid.FACES]
    return faces, [host(m) for m in valid], [host(b) for b in grid.bins[1:]]


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_order_binning_gives_the_sorted_binnings_faces_bit_for_bit(monkeypatch, closed, apic):
    rng = np.random.default_rng()
    spec, pos, vel, c = liquid_block(closed, apic, rng)
    perm = rng.permutation(len(pos))  # the particles in no particular order
    pos, vel, c = pos[perm], vel[perm], None if c is None else c[perm]
    grid = gpu_grid(spec, pos, closed, 3)
    want_faces, want_masks, (want_count, _, _) = p2g(monkeypatch, "sorted", grid, pos, vel, c)
    faces, masks, (count, order, cell_of) = p2g(monkeypatch, "order", grid, pos, vel, c)
    for a, b in zip(faces, want_faces):
        assert np.array_equal(a, b)
    for a, b in zip(masks, want_masks):
        assert np.array_equal(a, b)
    assert all(np.count_nonzero(m) > 1000 for m in masks)
    assert np.array_equal(count, want_count)
    assert np.array_equal(np.sort(order), np.arange(len(pos)))  # a permutation
    assert np.all(np.diff(cell_of[order]) >= 0)  # binned by cell
    import cupy

    start, count2, _, _, bounds = sparse_gpu.bin_particles_order(grid, *(cupy.asarray(a) if a is not None else None
                                                                       for a in (pos, vel, c)))
    count2 = host(count2)
    assert np.array_equal(host(start), np.concatenate([[0], np.cumsum(count2)[:-1]]))
    assert int(host(bounds)[1]) == count2[:-1].max()


def test_gpu_scan_counts_is_the_exclusive_scan_over_many_tiles():
    import cupy

    rng = np.random.default_rng()
    for n in (1, 255, 2049, 8192 * 2048 + 4099):  # one tile, a partial one; tiles wider than 8 blocks' widths
        count = rng.integers(0, 40, n).astype(np.int32)
        bounds = cupy.zeros(2, cupy.uint32)
        start = host(sparse_gpu.scan_counts(cupy, cupy.asarray(count), n - 1, bounds))
        assert np.array_equal(start, np.concatenate([[0], np.cumsum(count, dtype=np.int64)[:-1]]))
        assert int(host(bounds)[1]) == (count[:-1].max() if n > 1 else 0)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_either_binning(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_BINNING", ("order", "order", "sorted"))
