"""The P2G scatter (flip_sparse_scatter.cu, VOXFX_SPARSE_GATHER=scatter) on the device:
the gathers' valid masks, faces within the scatter's stated fixed-point bound of the brick
and staged gathers and within float32 rounding of the NumPy reference (the gather tests'
tolerance), with and without APIC, open and closed, on fresh random particles; and the
same bits run to run whatever the particles' order and the lanes' spread."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_gather_gpu import gpu_grid, host, liquid_block, random_case
from tests.unit.test_cuda_sparse_scatter_host import check_scatter_against_gather
from voxfx.kernels.flip import sparse_gpu, sparse_scatter, sparse_transfer
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid


def scatter(grid, pos, vel, c, spread=None):
    """(faces, masks), acc (3, cells, 2) and bounds of one scatter of these particles."""
    import cupy

    size = grid.size
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    spos, svel, sc, start, count, _, _ = sparse_gpu.bin_particles(grid, *dev)
    faces = tuple(cupy.empty(size, cupy.float32) for _ in range(3))
    valid = tuple(cupy.empty(size, cupy.uint8) for _ in range(3))
    args = (spos, svel, sc, sparse_gpu._I32(c is not None), start, count, grid.brick_slot, grid.slot_coords,
            grid.brick_nbr, sparse_gpu._I64(size), sparse_gpu._I32(grid.closed), *sparse_gpu._dims(grid),
            *sparse_gpu._frame(grid), *faces, *valid)
    acc, bounds = sparse_scatter.launch(size, args, spread)
    out = ([host(f) for f in faces], [host(m).astype(np.int64) for m in valid])
    return out, host(acc).view(np.int64).reshape(3, size, 2), host(bounds).astype(np.int64)


def assert_scatter_ways_agree(monkeypatch, variable, modes, base, closed, apic, case):
    """*variable* set to each of *modes* in turn: on fresh random particles (``liquid_block``, or
    ~30 particles a cell in one brick with particles beyond a closed box's walls), the scatter's
    integer sums, masks, accumulators and bounds at spreads 8, 1 and 3 (the sorted binning's
    copies, lanes that many particles apart), and whole ``particles_to_grid`` faces and masks (the
    order binning), the same bits as *base*'s."""
    spec, pos, vel, c = random_case(case, closed, apic)
    assert_ways_agree_on(monkeypatch, variable, modes, base, gpu_grid(spec, pos, closed, 3), pos, vel, c)


def assert_ways_agree_on(monkeypatch, variable, modes, base, grid, pos, vel, c):
    """``assert_scatter_ways_agree``'s comparison on the device *grid* with these particles: the
    sums, masks, accumulators and bounds at spreads 8, 1 and 3 and the whole ``particles_to_grid``
    faces and masks with *variable* at each of *modes*, the same bits as *base*'s; returns *base*'s
    at spread 8 (faces' bits, masks, acc, bounds) for the caller's own checks."""
    import cupy

    sums, faces = {}, {}
    for mode in modes:
        monkeypatch.setenv(variable, mode)
        for spread in (8, 1, 3):
            (f, m), acc, bounds = scatter(grid, pos, vel, c, spread)
            sums[mode, spread] = [a.view(np.uint32) for a in f] + m + [acc, bounds]
        dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
        valid = sparse_gpu.particles_to_grid(grid, *dev, gather="scatter")
        faces[mode] = [host(grid[n]).view(np.uint32) for n in grid.FACES] + [host(v) for v in valid]
    first = sums[base, 8]
    assert all(np.count_nonzero(m) > 1000 for m in first[3:6])
    for key, got in sums.items():
        for a, b in zip(got, first):
            assert np.array_equal(a, b), key
    for mode in modes:
        for a, b in zip(faces[mode], faces[base]):
            assert np.array_equal(a, b), mode
    return first


def gathered(grid, pos, vel, c, mode):
    import cupy

    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    valid = sparse_gpu.particles_to_grid(grid, *dev, gather=mode)
    return [host(grid[n]) for n in grid.FACES], [host(m).astype(np.int64) for m in valid]


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("case", ["liquid", "packed"])
def test_gpu_scatter_matches_the_gathers_within_its_bound(closed, apic, case):
    spec, pos, vel, c = random_case(case, closed, apic)
    grid = gpu_grid(spec, pos, closed, 3)
    cpu = SparseFlipGrid(spec, np, closed=closed)  # the same bricks in the same slots
    cpu.update(pos, 3)
    assert np.array_equal(host(grid.topology.slots), cpu.topology.slots)
    got, acc, bounds = scatter(grid, pos, vel, c)
    for mode in ("brick", "staged"):
        check_scatter_against_gather(gathered(grid, pos, vel, c, mode), got, acc, bounds)
    want = sparse_transfer.particles_to_grid(cpu, pos, vel, c)
    for face, name in zip(got[0], cpu.FACES):
        assert np.abs(face - cpu[name]).max() <= 1e-6 * max(1.0, np.abs(cpu[name]).max())
    for a, b in zip(got[1], want):
        assert np.array_equal(a, b)
    assert all(np.count_nonzero(m) > 1000 for m in got[1])


def test_gpu_scatter_gives_the_same_bits_in_any_particle_order_and_spread(monkeypatch):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, c = liquid_block(True, True, rng)
    grid = gpu_grid(spec, pos, True, 3)
    first, acc, bounds = scatter(grid, pos, vel, c)
    for spread in (1, 3, 32):
        order = rng.permutation(len(pos))  # another order within every cell
        again, acc2, bounds2 = scatter(grid, pos[order], vel[order], c[order], spread)
        assert np.array_equal(bounds2, bounds) and np.array_equal(acc2, acc)
        for a, b in zip(again[0], first[0]):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), spread
        for a, b in zip(again[1], first[1]):
            assert np.array_equal(a, b)
    monkeypatch.setenv("VOXFX_SPARSE_GATHER", "scatter")  # the environment picks it, APIC too
    sparse_transfer.particles_to_grid(grid, cupy.asarray(pos), cupy.asarray(vel), cupy.asarray(c))
    for name, b in zip(grid.FACES, first[0]):
        assert np.array_equal(host(grid[name]).view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_scatter_sums_are_the_same_with_paired_and_serial_atomics(monkeypatch, apic):
    """sparse_scatter.ATOMICS: the low words of Σw·q and Σw added before their high words
    (paired, the default) or each high word right after its low word (serial): integer sums
    in another order, the same bits."""
    rng = np.random.default_rng()
    spec, pos, vel, c = liquid_block(True, apic, rng)
    grid = gpu_grid(spec, pos, True, 3)
    out = {}
    for mode in sparse_scatter.ATOMICS:
        monkeypatch.setenv("VOXFX_SPARSE_SCATTER_ATOMICS", mode)
        out[mode] = scatter(grid, pos, vel, c)
    (faces, acc, bounds), (faces2, acc2, bounds2) = out.values()
    assert np.array_equal(bounds2, bounds) and np.array_equal(acc2, acc)
    assert np.count_nonzero(acc[:, :, 1]) > 1000
    for a, b in zip(faces2[0] + faces2[1], faces[0] + faces[1]):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
