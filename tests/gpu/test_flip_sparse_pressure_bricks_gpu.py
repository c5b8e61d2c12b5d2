"""The multigrid set-up's brick path on the device (sparse_pressure_setup.BRICKS: level 1 and
its tables to and from level 0 by brick look-ups, cuda/flip_sparse_pressure_bricks.cu)
against the NumPy reference and the sorted-key path: the same unknowns and tables integer
for integer on fresh random liquids — a tank with an obstacle on a pool whose slots are out
of key order (the grid moved first), a sealed tank, a one-cell sheet, a puddle too
thin to coarsen (one level), no liquid at all — and the same pressure bit for bit."""

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_multigrid_bricks, sparse_pressure, sparse_pressure_setup, sparse_transfer
from voxfx.kernels.flip.grid import FLUID, SOLID
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec

SCENES = ("tank", "moved", "sealed", "sheet", "puddle", "empty")


def host(a):
    return backend.to_numpy(a)


def liquid(xp, name, seed):
    """A closed sparse grid of scene *name* with the particles' velocities on it."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (40, 28, 32))
    up = np.asarray(spec.upper)
    pos = np.concatenate([rng.uniform(0.0, 0.6, (60000, 3)) * up,
                          rng.uniform(0.7, 0.95, (15000, 3)) * up]).astype(np.float32)
    vel = rng.normal(0, 1, pos.shape).astype(np.float32)
    obstacle = np.array([(i, j, 3) for i in range(4, 9) for j in range(3, 8)])
    g = SparseFlipGrid(spec, xp, closed=True)
    up = up.astype(np.float32)
    if name == "moved":  # the liquid elsewhere first: the pool's slots end up out of key order
        g.update(xp.asarray(np.concatenate([up - pos[:30000], pos[:30]])), 3)
    p_, v_ = xp.asarray(pos), xp.asarray(vel)
    g.update(p_, 3, obstacle=obstacle)
    sparse_transfer.particles_to_grid(g, p_, v_)
    sparse_transfer.classify(g, p_)
    sparse_transfer.extrapolate(g)
    sparse_transfer.enforce_boundaries(g)
    cell, active = g["cell"], g.active()
    i, j, k = g.lattice()
    if name == "sealed":
        g["cell"] = xp.where(active & (cell != SOLID), xp.uint8(FLUID), cell).astype(xp.uint8)
    elif name == "sheet":
        sheet = active & (k == 2) & (i >= 12)
        g["cell"] = xp.where(sheet, xp.uint8(FLUID), xp.where(cell == SOLID, cell, 0)).astype(xp.uint8)
    elif name == "puddle":
        inside = active & (i >= 10) & (i < 13) & (j >= 3) & (j < 6) & (k >= 1) & (k < 4)
        g["cell"] = xp.where(inside, xp.uint8(FLUID), xp.where(cell == SOLID, cell, 0)).astype(xp.uint8)
    elif name == "empty":
        g["cell"] = xp.where(cell == SOLID, cell, 0).astype(xp.uint8)
    return g


def tables(level, M):
    out = [level.m, level.m_red, host(level.cells), host(level.position), host(level.nbr), host(level.diag),
           len(M.levels)]
    for L in M.levels[1:]:
        out += [L.m, L.m_red, host(L.nbr), host(L.diag)]
    return out + [host(a) for a in M.up + M.down]


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("name", SCENES)
def test_gpu_brick_setup_builds_the_cpus_tables(monkeypatch, name):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    built, levels0 = {}, {}
    for key, xp, bricks in (("cpu", np, True), ("bricks", cupy, True), ("keys", cupy, False)):
        monkeypatch.setattr(sparse_pressure_setup, "BRICKS", bricks)
        g = liquid(xp, name, seed)
        kind, _, _ = sparse_pressure.solver_cells(g)
        level = levels0[key] = sparse_pressure.compact_unknowns(g, kind)
        if xp is cupy:
            assert isinstance(level, sparse_pressure_setup._BrickUnknowns) == bricks
        built[key] = tables(level, VCycle(g, kind, level))
    for a, b in zip(levels0["bricks"].lattice, levels0["cpu"].lattice):  # made when read: the host's
        assert np.array_equal(host(a), b)
    cpu = built["cpu"]
    assert same(built["bricks"], cpu), f"seed {seed}"
    assert same(built["keys"], cpu), f"seed {seed}"
    levels = cpu[6]
    assert levels == 1 if name in ("puddle", "empty") else levels >= (2 if name == "sheet" else 4)
    assert (cpu[0] == 0) == (name == "empty")


def test_gpu_brick_setup_gives_the_sorted_key_pressure_bit_for_bit(monkeypatch):
    import cupy

    # level 0 smoothed by red-black sweeps both ways: the sorted-key set-up has no workspace (no
    # brick table), so no brick smoother (sparse_multigrid_bricks.SMOOTHER "brick", the default)
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")
    sparse_pressure.REUSE_TABLES, keep = False, sparse_pressure.REUSE_TABLES
    try:
        seed = int(np.random.default_rng().integers(1 << 30))
        out = []
        for bricks in (True, False):
            monkeypatch.setattr(sparse_pressure_setup, "BRICKS", bricks)
            g = liquid(cupy, "moved", seed)
            p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
            out.append((host(p), stats["iterations"]))
        assert out[0][1] == out[1][1] and np.array_equal(out[0][0], out[1][0])
        assert np.abs(out[0][0]).max() > 0
    finally:
        sparse_pressure.REUSE_TABLES = keep
