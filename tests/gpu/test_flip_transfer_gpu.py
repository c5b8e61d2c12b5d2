"""The FLIP transfer kernels (cuda/flip_transfer.cu) against the NumPy reference on fresh
random grids and particles, stage by stage: seeding bit-identical, classification,
boundaries and extrapolation exact, P2G (gather and atomic scatter, plain and APIC), G2P and
advection to float32 rounding; the gather reproducible bit for bit (seed 003 §6–7)."""

import numpy as np
import pytest

from voxfx.kernels.flip import particles as fp
from voxfx.kernels.flip import transfer as ft
from voxfx.kernels.flip.grid import DenseGrid
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")


def random_grid(rs, solid_fraction=0.1):
    """A random box with a random MAC velocity, random solid cells and solid velocities."""
    shape = tuple(int(n) for n in rs.integers(4, 24, 3))
    spec = GridSpec(tuple(rs.uniform(-5, 5, 3)), float(rs.uniform(0.05, 0.5)), shape)
    grid = DenseGrid(spec)
    grid.solid[...] = rs.random(grid.solid.shape) < solid_fraction
    for f in grid.faces() + (grid.solid_u, grid.solid_v, grid.solid_w):
        f[...] = rs.normal(scale=2.0, size=f.shape)
    return grid


def random_particles(rs, grid, n, outside=0.5):
    """n particles over the grid and up to *outside* cells beyond its walls, some NaN-free."""
    lo = np.asarray(grid.spec.origin) - outside * grid.h
    hi = np.asarray(grid.spec.upper) + outside * grid.h
    pos = rs.uniform(lo, hi, (n, 3)).astype(np.float32)
    vel = rs.normal(scale=1.5, size=(n, 3)).astype(np.float32)
    c = rs.normal(scale=4.0, size=(n, 3, 3)).astype(np.float32)
    return pos, vel, c


def on_gpu(grid):
    g = DenseGrid(grid.spec, xp=cp)
    for name in ("u", "v", "w", "cell", "solid", "solid_u", "solid_v", "solid_w"):
        setattr(g, name, cp.asarray(getattr(grid, name)))
    for name in ("valid_u", "valid_v", "valid_w"):
        if hasattr(grid, name):
            setattr(g, name, cp.asarray(getattr(grid, name)))
    return g


def assert_faces_close(cpu, gpu, scale, rtol=2e-5):
    for a, b in zip(cpu.faces(), gpu.faces()):
        np.testing.assert_allclose(b.get(), a, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("per_cell", [1, 4, 8, 16])
def test_gpu_seeding_is_bit_identical_to_cpu(per_cell):
    rs = np.random.default_rng()
    grid = random_grid(rs)
    nx, ny, nz = grid.shape
    cells = np.argwhere(rs.random((nz, ny, nx)) < 0.3)[:, ::-1].astype(np.int32)
    seed = int(rs.integers(0, 2**40))
    velocity = rs.normal(size=3)
    pos, vel = fp.seed_particles(cells, grid.spec, per_cell, seed, velocity=velocity)
    gpos, gvel = fp.seed_particles(cp.asarray(cells), grid.spec, per_cell, seed, velocity=velocity)
    assert isinstance(gpos, cp.ndarray)
    assert np.array_equal(gpos.get(), pos) and np.array_equal(gvel.get(), vel)


def test_gpu_classify_matches_cpu():
    rs = np.random.default_rng()
    grid = random_grid(rs)
    pos, _, _ = random_particles(rs, grid, 3000)
    gpu = on_gpu(grid)
    ft.classify(grid, pos)
    ft.classify(gpu, cp.asarray(pos))
    assert np.array_equal(gpu.cell.get(), grid.cell)


@pytest.mark.parametrize("method", ["gather", "atomic"])
@pytest.mark.parametrize("apic", [False, True])
def test_gpu_particles_to_grid_matches_cpu(method, apic):
    rs = np.random.default_rng()
    grid = random_grid(rs)
    n = int(rs.integers(1000, 20000))
    pos, vel, c = random_particles(rs, grid, n)
    gpu = on_gpu(grid)
    valid = ft.particles_to_grid(grid, pos, vel, c if apic else None)
    gvalid = ft.particles_to_grid(gpu, cp.asarray(pos), cp.asarray(vel), cp.asarray(c) if apic else None,
                                  method=method)
    for m, gm in zip(valid, gvalid):
        assert np.array_equal(gm.get(), m)
    scale = np.abs(vel).max() + (np.abs(c).max() * 3 * grid.h if apic else 0)
    assert_faces_close(grid, gpu, scale)


def test_gpu_binning_sorts_particles_by_cell_then_index():
    rs = np.random.default_rng()
    grid = random_grid(rs)
    pos, vel, c = random_particles(rs, grid, 30000, outside=1.5)
    spos, svel, sc, start, count = ft.bin_particles(on_gpu(grid), cp.asarray(pos), cp.asarray(vel), cp.asarray(c))
    nx, ny, nz = grid.shape
    ox, oy, oz, _, inv_h = (np.float32(a) for a in (*grid.spec.origin, grid.h, 1.0 / grid.h))
    ijk = [np.clip(np.floor((pos[:, a] - o) * inv_h), 0, n - 1).astype(np.int64)
           for a, o, n in ((0, ox, nx), (1, oy, ny), (2, oz, nz))]
    cell = (ijk[2] * ny + ijk[1]) * nx + ijk[0]
    order = np.lexsort((np.arange(len(pos)), cell))  # by cell, then by particle index
    assert np.array_equal(spos.get(), pos[order]) and np.array_equal(svel.get(), vel[order])
    assert np.array_equal(sc.get(), c[order])
    expect = np.bincount(cell, minlength=nx * ny * nz)
    assert np.array_equal(count.get(), expect)
    assert np.array_equal(start.get(), np.cumsum(expect) - expect)


def test_gpu_gather_is_reproducible_bit_for_bit():
    rs = np.random.default_rng()
    grid = on_gpu(random_grid(rs))
    pos, vel, c = (cp.asarray(a) for a in random_particles(rs, grid, 50000, outside=0.0))
    ft.particles_to_grid(grid, pos, vel, c)
    first = [f.copy() for f in grid.faces()]
    perm = cp.asarray(rs.permutation(len(pos)))  # a different particle order, same set
    ft.particles_to_grid(grid, pos, vel, c)
    assert all(bool((a == b).all()) for a, b in zip(first, grid.faces()))
    ft.particles_to_grid(grid, pos[perm], vel[perm], c[perm])
    for a, b in zip(first, grid.faces()):
        np.testing.assert_allclose(b.get(), a.get(), rtol=1e-5, atol=1e-4)


def test_gpu_enforce_boundaries_and_extrapolate_match_cpu_exactly():
    rs = np.random.default_rng()
    grid = random_grid(rs, solid_fraction=0.2)
    masks = tuple((rs.random(f.shape) < 0.1).astype(np.uint8) for f in grid.faces())
    gpu = on_gpu(grid)
    ft.enforce_boundaries(grid)
    ft.enforce_boundaries(gpu)
    for a, b in zip(grid.faces(), gpu.faces()):
        assert np.array_equal(b.get(), a)
    layers = int(rs.integers(1, 4))
    out = ft.extrapolate(grid, layers, valid=masks)
    gout = ft.extrapolate(gpu, layers, valid=tuple(cp.asarray(m) for m in masks))
    for m, gm, a, b in zip(out, gout, grid.faces(), gpu.faces()):
        assert np.array_equal(gm.get(), m)
        assert np.array_equal(b.get(), a)


@pytest.mark.parametrize("apic", [False, True])
def test_gpu_grid_to_particles_matches_cpu(apic):
    rs = np.random.default_rng()
    grid = random_grid(rs)
    old = [f + rs.normal(scale=0.3, size=f.shape).astype(np.float32) for f in grid.faces()]
    pos, vel, c = random_particles(rs, grid, 20000)
    gpu = on_gpu(grid)
    gpos, gvel, gc = cp.asarray(pos), cp.asarray(vel), cp.asarray(c)
    flip = float(rs.uniform(0, 1))
    ft.grid_to_particles(grid, *old, pos, vel, flip, c if apic else None)
    ft.grid_to_particles(gpu, *(cp.asarray(o) for o in old), gpos, gvel, flip, gc if apic else None)
    np.testing.assert_allclose(gvel.get(), vel, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gc.get(), c, rtol=1e-4, atol=1e-4 * 8 / grid.h)
    assert np.array_equal(gpos.get(), pos)


def test_gpu_advect_and_fused_step_match_cpu():
    rs = np.random.default_rng()
    grid = random_grid(rs, solid_fraction=0.15)
    old = [f * np.float32(0.9) for f in grid.faces()]
    pos, vel, c = random_particles(rs, grid, 20000, outside=0.3)
    dt = float(rs.uniform(0.2, 0.8)) * grid.h / 6.0  # up to about one cell per step
    gpu = on_gpu(grid)
    gpos = cp.asarray(pos)
    p = pos.copy()
    ft.advect(grid, p, dt)
    ft.advect(gpu, gpos, dt)
    np.testing.assert_allclose(gpos.get(), p, rtol=1e-6, atol=1e-5 * grid.h)
    g = (gpos.get().astype(np.float64) - np.asarray(grid.spec.origin)) / grid.h
    assert np.all(g > 0) and np.all(g < np.asarray(grid.shape))
    gpos, gvel, gc = cp.asarray(pos), cp.asarray(vel), cp.asarray(c)
    ft.grid_to_particles_and_advect(grid, *old, pos, vel, 0.95, dt, c)
    ft.grid_to_particles_and_advect(gpu, *(cp.asarray(o) for o in old), gpos, gvel, 0.95, dt, gc)
    np.testing.assert_allclose(gpos.get(), pos, rtol=1e-6, atol=1e-5 * grid.h)
    np.testing.assert_allclose(gvel.get(), vel, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gc.get(), c, rtol=1e-4, atol=1e-4 * 8 / grid.h)


def test_gpu_max_speed_matches_cpu_and_stays_on_the_device():
    rs = np.random.default_rng()
    vel = rs.normal(size=(int(rs.integers(1, 100000)), 3)).astype(np.float32)
    s = ft.max_speed(cp.asarray(vel))
    assert isinstance(s, cp.ndarray) and s.shape == ()
    assert float(s) == float(ft.max_speed(vel))
    assert float(ft.max_speed(cp.zeros((0, 3), cp.float32))) == 0.0


def test_gpu_stages_accept_no_particles():
    rs = np.random.default_rng()
    gpu = on_gpu(random_grid(rs))
    empty = cp.zeros((0, 3), cp.float32)
    valid = ft.particles_to_grid(gpu, empty, empty)
    assert all(int(m.sum()) == 0 for m in valid) and all(not bool(f.any()) for f in gpu.faces())
    ft.classify(gpu, empty)
    ft.grid_to_particles_and_advect(gpu, *gpu.faces(), empty, empty, 0.9, 0.01)
