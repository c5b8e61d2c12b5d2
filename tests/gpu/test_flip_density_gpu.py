"""The density correction (``kernels/flip/density.py``) on the GPU: the counts are the
CPU rule's (dense: ``count_cells_inside``; sparse: the P2G bins' and ``particle_cells``'),
the fused right-hand-side kernels (dense ``divergence``, sparse ``cells_rhs`` and the staged
set-up) add (h²/Δt)·s bit for bit as the array code adds ``density.source``, the solve with
the counts equals the solve with the source array, and a GPU dam break keeps more occupied
cells with it, as the CPU reference does (tests/unit/test_flip_density.py)."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import density, pressure, sparse_pressure, sparse_transfer, transfer
from voxfx.kernels.flip.grid import FLUID, TIMINGS, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")

SLAB, COLUMN = (64, 4, 40), (20, 4, 38)  # the CPU test's thin dam break, h = 1/64 m
ALPHA, N0 = 0.3, 8


def dam(alpha, sparse, frames, xp=cp):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 64, SLAB)
    v, t = box((0.0, 0.0, 0.0), tuple(c / 64 for c in COLUMN))
    sim = FlipSimulation(spec, FlipSettings(**TIMINGS["fast"], density_correction=alpha), v, t, xp=xp, sparse=sparse)
    for _ in range(frames):
        sim.step(1 / 24)
    return sim


def bits(a):
    return cp.asnumpy(a).astype(np.float32).view(np.uint32)


def with_source(b, counts, fluid, dt, h):
    """The array code's b + (h²/Δt)·density.source on the host."""
    b, counts, fluid = cp.asnumpy(b), cp.asnumpy(counts), cp.asnumpy(fluid)
    s = density.source(counts, fluid, N0, ALPHA, dt)
    assert (s > 0).sum() > 10  # the piles are there: the source is on in many cells
    return np.where(fluid, b + np.float32(h * h / dt) * s, b).astype(np.float32)


def test_dense_counts_and_divergence_kernel():
    sim = dam(0.0, False, 9)
    g, pos, dt = sim.grid, sim.pos, 1 / 60
    transfer.particles_to_grid(g, pos, sim.vel, sim.c)
    transfer.classify(g, pos)
    counts = density.dense_counts(g, pos)
    host = density.dense_counts(type(g)(sim.spec, np), cp.asnumpy(pos))
    assert counts.dtype == cp.int32 and np.array_equal(cp.asnumpy(counts), host.astype(np.int32))
    fluid = g.cell == FLUID
    assert np.array_equal(cp.asnumpy(fluid), cp.asnumpy((counts > 0) & (g.solid == 0)))  # classify's cells
    b0 = pressure.pressure_rhs(g, dt)[0]
    crowding = density.Crowding(counts, N0, ALPHA, dt)
    b1 = pressure.pressure_rhs(g, dt, crowding)[0]
    assert np.array_equal(bits(b1), with_source(b0, counts, fluid, dt, g.h).view(np.uint32))
    array = pressure.pressure_rhs(g, dt, crowding.source(fluid))[0]  # the array code on CuPy
    assert np.array_equal(bits(array), bits(b1))
    p_counts, _ = pressure.solve_pressure(g, dt, source=crowding)
    p_array, _ = pressure.solve_pressure(g, dt, source=crowding.source(fluid))
    assert np.array_equal(bits(p_counts), bits(p_array))


def test_sparse_counts_and_cells_rhs():
    sim = dam(0.0, True, 9)
    g, pos, dt = sim.grid, sim.pos, 1 / 60
    sparse_transfer.particles_to_grid(g, pos, sim.vel, sim.c)
    sparse_transfer.classify(g, pos)
    assert g.bins is not None and g.bins[0] is pos
    counts = density.sparse_counts(g, pos)  # the bins' count (one more entry)
    assert counts is g.bins[1] and counts.size == g.size + 1
    at = sparse_transfer.particle_cells(g, pos)
    by_cells = cp.bincount(at[at >= 0], minlength=g.size)
    assert np.array_equal(cp.asnumpy(counts[:g.size]), cp.asnumpy(by_cells))
    fluid = g["cell"] == FLUID
    b0 = sparse_pressure.pressure_rhs(g, dt)[0]
    crowding = density.Crowding(counts, N0, ALPHA, dt)
    b1 = sparse_pressure.pressure_rhs(g, dt, crowding)[0]
    assert np.array_equal(bits(b1), with_source(b0, counts[:g.size], fluid, dt, g.h).view(np.uint32))
    array = sparse_pressure.pressure_rhs(g, dt, crowding.source(fluid))[0]  # the array code on CuPy
    assert np.array_equal(bits(array), bits(b1))
    # the staged set-up (one host read) against the array code's set-up
    p_staged, st = sparse_pressure.solve_pressure(g, dt, source=crowding)
    p_array, sa = sparse_pressure.solve_pressure(g, dt, source=crowding.source(fluid))
    assert st["iterations"] == sa["iterations"]
    np.testing.assert_allclose(cp.asnumpy(p_staged), cp.asnumpy(p_array), rtol=1e-5,
                               atol=1e-6 * float(cp.abs(p_array).max()))


def occupied(sim):
    cell = np.floor(cp.asnumpy(sim.pos) / np.float32(sim.spec.voxel_size)).astype(np.int64)
    counts = np.unique(cell, axis=0, return_counts=True)[1]
    return len(counts), int(counts.max())


@pytest.mark.parametrize("sparse", [False, True])
def test_a_gpu_dam_break_keeps_more_occupied_cells(sparse):
    """The CPU test's slab, 15 frames of Fast: off the wall and floor piles form; on, more
    cells and a lower fullest cell, no swelling past the column at rest; near the CPU's."""
    rest = COLUMN[0] * COLUMN[1] * COLUMN[2]
    (off, off_most), (on, on_most) = occupied(dam(0.0, sparse, 15)), occupied(dam(ALPHA, sparse, 15))
    cpu_on, _ = occupied(dam(ALPHA, sparse, 15, xp=np))
    print(f"\nGPU {'sparse' if sparse else 'dense'} 15 frames: occupied off {off / rest - 1:+.1%}, on "
          f"{on / rest - 1:+.1%} (CPU {cpu_on / rest - 1:+.1%}); fullest off {off_most}, on {on_most}")
    assert off < 0.99 * rest
    assert on > 1.03 * off and on < 1.10 * rest
    assert on_most < 0.7 * off_most
    assert abs(on - cpu_on) < 0.05 * rest


@pytest.mark.parametrize("flat", [False, True])
def test_device_args_take_only_counts_the_kernels_can_read(flat):
    """``density.device_args`` (both solvers' kernels): off is a null pointer and on = 0; the
    counts go to the kernel only as a C-contiguous int32 CuPy array of the grid's cells (the
    sparse solver's one-dimensional, at least its cells); anything else is None (the caller
    adds the source as an array)."""
    cells, h, dt = 60, 0.5, 1 / 60
    off = density.device_args(None, cells, h, flat=flat)
    assert int(off[0]) == 0 and int(off[1]) == 0 and len(off) == 6
    good = cp.arange(cells + (4 if flat else 0), dtype=cp.int32)
    if not flat:
        good = good.reshape(3, 4, 5)
    args = density.device_args(density.Crowding(good, N0, ALPHA, dt), cells, h, flat=flat)
    assert args[0] is good and int(args[1]) == 1
    assert args[2:] == density.Crowding(good, N0, ALPHA, dt).kernel_args(h)
    bad = [good.astype(cp.int64), cp.asnumpy(good), cp.arange(cells - 1, dtype=cp.int32),
           cp.arange(2 * cells, dtype=cp.int32)[::2]]
    if flat:
        bad.append(cp.arange(cells, dtype=cp.int32).reshape(6, 10))
    else:
        bad.append(cp.arange(cells + 1, dtype=cp.int32))
    for counts in bad:
        assert density.device_args(density.Crowding(counts, N0, ALPHA, dt), cells, h, flat=flat) is None
