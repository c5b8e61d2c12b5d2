"""Per-brick topology margins (issue 21 §6, ``sparse_grid.BrickReach``): each particle's box
is its cell ± its brick's margin, the margin of the fastest particle in the 27 bricks
around it; checked against a brute force over the particles (plain Python loops), and
against the global margin of the fastest particle."""

import math

import numpy as np
import pytest

from voxfx.kernels.flip.sparse_grid import (
    EXTRAPOLATION_LAYERS,
    BrickReach,
    SparseFlipGrid,
    brick_margins,
    speed_squared,
    substep_margin,
)
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import brick_coords, brick_keys


def scene(rng, closed, n=3000, outliers=1, fast=13.0):
    """A slab of slow liquid (≲ 0.5 m/s) in a 96 × 64 × 48 box of 2 cm cells, with
    *outliers* splash particles at *fast* m/s."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.02, (96, 64, 48))
    up = np.asarray(spec.upper)
    lo = 0.0 if closed else -0.05
    pos = (rng.uniform(lo, 0.45, (n, 3)) * up).astype(np.float32)
    vel = rng.normal(0.0, 0.2, (n, 3)).astype(np.float32)
    for i in range(outliers):
        pos[i] = (np.array([0.9, 0.8, 0.7]) - 0.05 * i) * up
        direction = rng.normal(0.0, 1.0, 3)
        vel[i] = fast * direction / np.linalg.norm(direction)
    return spec, pos, vel


def cell_of(grid, p):
    """Particle *p*'s lattice cell (clamped into the box when closed)."""
    g = grid.cell_coords(p[None, :])
    c = [int(math.floor(g[a][0])) for a in range(3)]
    return [min(max(c[a], 0), grid.shape[a] - 1) for a in range(3)] if grid.closed else c


def brute_margins(grid, pos, vel, reach):
    """{brick: margin} by loops: each particle's brick, the bricks' fastest particle, the
    fastest over the 27 around, then substep_margin of that speed (the formula as written)."""
    fastest = {}
    for p, v in zip(pos, vel):
        b = tuple(x >> 3 for x in cell_of(grid, p))
        s2 = float((v[0] * v[0] + v[1] * v[1]) + v[2] * v[2])  # float32 throughout
        fastest[b] = max(fastest.get(b, 0.0), s2)
    margins = {}
    for b in fastest:
        s2 = max(fastest.get((b[0] + dx, b[1] + dy, b[2] + dz), 0.0)
                 for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1))
        speed = float(np.sqrt(np.float32(s2)))
        margins[b] = substep_margin(speed, reach.dt, reach.h, reach.gravity)
    return margins


def brute_keys(grid, pos, margins):
    """The bricks of every particle's box (its cell ± its brick's margin), by loops."""
    bricks = set()
    for p in pos:
        c = cell_of(grid, p)
        m = margins[tuple(x >> 3 for x in c)]
        lo = [c[a] - m for a in range(3)]
        hi = [c[a] + m for a in range(3)]
        if grid.closed:
            lo = [max(x, -1) for x in lo]
            hi = [min(hi[a], grid.shape[a]) for a in range(3)]
        for bz in range(lo[2] >> 3, (hi[2] >> 3) + 1):
            for by in range(lo[1] >> 3, (hi[1] >> 3) + 1):
                for bx in range(lo[0] >> 3, (hi[0] >> 3) + 1):
                    bricks.add((bx, by, bz))
    return np.sort(brick_keys(np.array(sorted(bricks), np.int64)))


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_each_particle_box_takes_its_bricks_margin(closed):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, closed, n=600, outliers=2)
    grid = SparseFlipGrid(spec, np, closed)
    reach = BrickReach(vel, 1 / 240, 9.81, spec.voxel_size)
    margins = brute_margins(grid, pos, vel, reach)
    fastest = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), reach.dt, reach.h, reach.gravity)
    assert max(margins.values()) == fastest and min(margins.values()) < fastest  # margins differ between bricks
    keys = grid.topology_keys(pos, fastest, reach=reach)
    assert np.array_equal(keys, brute_keys(grid, pos, margins))
    cells = np.stack([np.floor(a) for a in grid.cell_coords(pos)], axis=1).astype(np.int64)
    if closed:
        cells = np.clip(cells, 0, np.asarray(spec.shape) - 1)
    got_keys, got = brick_margins(cells >> 3, speed_squared(vel, np), reach, np)
    want = np.array([margins[tuple(int(x) for x in b)] for b in brick_coords(got_keys)])
    assert np.array_equal(got, want)


def test_slow_bricks_far_from_a_fast_particle_keep_the_small_margin():
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, True, n=4000, outliers=1, fast=13.0)
    reach = BrickReach(vel, 1 / 60, 9.81, spec.voxel_size)
    cells = np.clip(np.floor(pos / spec.voxel_size).astype(np.int64), 0, np.asarray(spec.shape) - 1)
    keys, margins = brick_margins(cells >> 3, speed_squared(vel, np), reach, np)
    fast_brick = brick_keys((cells[:1] >> 3))[0]
    near = np.abs(brick_coords(keys) - brick_coords(np.array([fast_brick]))).max(axis=1) <= 1
    slow = float(np.sqrt(speed_squared(vel[1:], np).max()))
    small = substep_margin(slow, reach.dt, reach.h, reach.gravity)
    big = substep_margin(float(np.sqrt(speed_squared(vel[:1], np)[0])), reach.dt, reach.h, reach.gravity)
    assert big > small + 2
    assert (margins[near] == big).all() and near.sum() >= 1  # the splash's brick and its neighbours
    assert (margins[~near] <= small).all() and (~near).sum() > 20  # every other brick: at most the slow margin
    assert small >= 1 + EXTRAPOLATION_LAYERS + 1 + 1


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_one_outlier_no_longer_dilates_the_whole_liquid(closed):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, closed, n=5000, outliers=1, fast=13.0)
    dt = 1 / 60
    fastest = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), dt, spec.voxel_size, 9.81)
    per_brick = SparseFlipGrid(spec, np, closed)
    per_brick.update(pos, fastest, reach=BrickReach(vel, dt, 9.81, spec.voxel_size))
    everywhere = SparseFlipGrid(spec, np, closed)
    everywhere.update(pos, fastest)
    assert set(per_brick.topology.keys.tolist()) < set(everywhere.topology.keys.tolist())
    assert per_brick.brick_count() < 0.8 * everywhere.brick_count()
    # every particle's own reach (its cell ± the margin of its own speed) lies in the bricks.
    # (Not the bricks of the slow particles' fastest margin everywhere: a brick among slower
    # particles keeps a smaller margin — the point of the per-brick margins — which made the
    # old comparison fail for about one random scene in six.)
    h = spec.voxel_size
    cells = np.floor(pos / np.float32(h)).astype(np.int64)
    own = np.array([substep_margin(float(v), dt, h, 9.81) for v in np.sqrt(speed_squared(vel, np))])
    lo, hi = cells - own[:, None], cells + own[:, None]
    if closed:
        top = np.asarray(spec.shape) - 1
        lo, hi = np.clip(lo, 0, top), np.clip(hi, 0, top)
    lo, hi = lo >> 3, hi >> 3
    span = int((hi - lo).max())
    need = set()
    for d in np.ndindex(span + 1, span + 1, span + 1):
        need |= set(brick_keys(np.minimum(lo + np.asarray(d), hi)).tolist())
    assert need <= set(per_brick.topology.keys.tolist()) and len(need) > 20


def test_extra_cells_keep_the_scalar_margin_and_uniform_speeds_give_the_global_bricks():
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, False, n=800, outliers=0)
    vel[:] = np.float32([0.6, 0.0, 0.8])  # every particle 1 m/s: every brick the global margin
    dt = 1 / 120
    margin = substep_margin(1.0, dt, spec.voxel_size, 9.81)
    grid = SparseFlipGrid(spec, np, False)
    reach = BrickReach(vel, dt, 9.81, spec.voxel_size)
    assert np.array_equal(grid.topology_keys(pos, margin, reach=reach), grid.topology_keys(pos, margin))
    extra = np.array([[200, 10, 10], [-40, 3, 5]])
    got = grid.topology_keys(pos, 3, extra_cells=extra, reach=reach)
    want = np.union1d(grid.topology_keys(pos, margin), grid.topology_keys(pos[:0], 3, extra_cells=extra))
    assert np.array_equal(got, want)


def test_a_velocity_that_is_not_finite_is_a_clear_error():
    rng = np.random.default_rng(3)
    spec, pos, vel = scene(rng, True, n=200, outliers=0)
    vel[5, 1] = np.nan
    grid = SparseFlipGrid(spec, np, True)
    with pytest.raises(ValueError, match="not finite"):
        grid.topology_keys(pos, 5, reach=BrickReach(vel, 1 / 120, 9.81, spec.voxel_size))


def test_the_margin_mode_is_read_from_the_environment(monkeypatch):
    from voxfx.kernels.flip.sparse_grid import margin_mode

    monkeypatch.delenv("VOXFX_SPARSE_MARGIN", raising=False)
    assert margin_mode() == "brick"
    monkeypatch.setenv("VOXFX_SPARSE_MARGIN", "global")
    assert margin_mode() == "global"
    monkeypatch.setenv("VOXFX_SPARSE_MARGIN", "fastest")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_MARGIN"):
        margin_mode()
