"""The particle level set's interior skip (kernels/flip/surface_interior.py) on the NumPy
reference: the rule's numbers, its box erosion against a brute force, and on liquids whose
surface is known (a seeded ball at 1× and 2× resolution, a dam block closed against the
walls, a stepped dam break) the skip on and off give the same signs everywhere, the same
φ bits on every node beside a sign change (so the same zero crossing for any mesher and
the same ``liquid_volume``), and differ only where both are below −0.2 voxel (the stated
margin: the same φ wherever either is above −band + (band − 0.2 voxel)); a rule that
skips nodes next to the surface (a mutation) is caught by the same check. The GPU's
equality with these is tests/gpu/test_flip_surface_interior_gpu.py, the kernels' on the
host test_cuda_surface_host.py."""

import itertools

import numpy as np
import pytest

from tests.unit.test_flip_surface import seeded_ball, seeded_pool
from voxfx.kernels.flip import surface_interior
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import (closed_level_set, liquid_volume, particle_level_set, surface_grid,
                                        surface_radii)
from voxfx.kernels.flip.surface_gpu import _cell_grid
from voxfx.kernels.grid import GridSpec

SIM_CELL = 1.0 / 16
MARGIN_VOXELS = 0.2  # nodes the skip changes lie below −0.2 voxel in both runs (measured: −0.27 at worst)


def beside_a_crossing(phi):
    """Nodes with a node of the other sign among their 26 neighbours (edge values repeated)."""
    neg = phi < 0
    p = np.pad(neg, 1, mode="edge")
    near = np.zeros_like(neg)
    for dz, dy, dx in itertools.product((-1, 0, 1), repeat=3):
        near |= p[1 + dz:p.shape[0] - 1 + dz, 1 + dy:p.shape[1] - 1 + dy, 1 + dx:p.shape[2] - 1 + dx] != neg
    return near


def assert_surface_kept(off, on, spec):
    """The skip (*on*) against the full gather (*off*): module text's checks."""
    h = spec.voxel_size
    np.testing.assert_array_equal(on < 0, off < 0)
    near = beside_a_crossing(off)
    assert near.any()
    np.testing.assert_array_equal(on[near], off[near])
    changed = on != off
    assert (np.maximum(on, off)[changed] <= -MARGIN_VOXELS * h).all()
    assert liquid_volume(on, spec) == liquid_volume(off, spec)


def both(call):
    return call(False), call(True)


def skipped(on, band):
    return int((on == np.float32(-band)).sum())


def test_rule_numbers_for_the_default_radii():
    """8 particles a simulation cell (r = cell/2, R = 2 cells, binning cells of a simulation
    cell): a full cell holds 2; the cube reaches (R + (S + 1)·h)/edge cells, rounded up."""
    r, R = surface_radii(SIM_CELL, 8)
    same = GridSpec((0.0, 0.0, 0.0), SIM_CELL, (20, 20, 20))
    double = GridSpec((0.0, 0.0, 0.0), SIM_CELL / 2, (40, 40, 40))
    assert surface_interior.interior_rule(same, R, r, 0) == (2, 4)
    assert surface_interior.interior_rule(same, R, r, 1) == (2, 5)
    assert surface_interior.interior_rule(double, R, r, 1) == (2, 4)
    assert surface_interior.interior_rule(double, R, r, 3) == (2, 5)
    assert surface_interior.interior_rule(same, R, r / 4, 1)[0] == 128  # small radii: nothing is full at rest


@pytest.mark.parametrize("reach", [0, 1, 2, 7])
def test_eroded_cells_match_a_brute_force(reach):
    rng = np.random.default_rng()
    full = rng.uniform(size=(9, 11, 13)) < 0.93
    got = full.copy()
    for axis in range(3):
        got = surface_interior.eroded(got, reach, axis)
    want = np.zeros_like(full)
    nz, ny, nx = full.shape
    for k, j, i in itertools.product(range(nz), range(ny), range(nx)):
        lo, hi = np.array([k, j, i]) - reach, np.array([k, j, i]) + reach
        if (lo >= 0).all() and (hi < full.shape).all():
            want[k, j, i] = full[lo[0]:hi[0] + 1, lo[1]:hi[1] + 1, lo[2]:hi[2] + 1].all()
    np.testing.assert_array_equal(got, want)


def test_a_node_is_interior_only_when_the_cells_every_nearby_node_gathers_are_full():
    """Every node within S + 1 voxels of an interior node reads (node_phi's cell ranges,
    with the cull's slack) only full cells: brute force over a ball's nodes."""
    rng = np.random.default_rng()
    r, R = surface_radii(SIM_CELL, 8)
    pos = seeded_ball(np.zeros(3), 13 * SIM_CELL, SIM_CELL / 2, rng)
    spec = GridSpec.around(pos.min(0), pos.max(0), SIM_CELL, padding=4)
    S = 1
    rule = surface_interior.interior_rule(spec, R, r, S)
    nodes = surface_interior.interior_nodes_cpu(pos, spec, R, rule)
    assert nodes.any()
    co, edge, shape = _cell_grid(spec, R)
    cells = np.zeros(shape[::-1], np.int64)
    f = np.float32
    c = [np.floor((pos[:, a] - f(co[a])) * f(1.0 / edge)).astype(int) for a in range(3)]
    np.add.at(cells, (c[2], c[1], c[0]), 1)
    full = cells >= rule[0]
    u = [(np.floor((((np.arange(n) + 0.5) * spec.voxel_size + spec.origin[a]) - co[a]) / edge)) for a, n in
         enumerate(spec.shape)]
    Rc = R / edge + 1e-3
    for k, j, i in zip(*np.nonzero(nodes)):
        for dk, dj, di in itertools.product(range(-S - 1, S + 2), repeat=3):
            kk, jj, ii = k + dk, j + dj, i + di
            x = [(ii + 0.5) * spec.voxel_size + spec.origin[0], (jj + 0.5) * spec.voxel_size + spec.origin[1],
                 (kk + 0.5) * spec.voxel_size + spec.origin[2]]
            lo = [int(np.floor((x[a] - co[a]) / edge - Rc)) for a in range(3)]
            hi = [int(np.floor((x[a] - co[a]) / edge + Rc)) for a in range(3)]
            assert full[lo[2]:hi[2] + 1, lo[1]:hi[1] + 1, lo[0]:hi[0] + 1].all()
    assert u  # the node cells exist


@pytest.mark.parametrize("smooth,resolution", [(0, 1), (1, 1), (2, 1), (1, 2)])
def test_ball_keeps_its_surface(smooth, resolution):
    rng = np.random.default_rng()
    r, R = surface_radii(SIM_CELL, 8)
    voxel = SIM_CELL / resolution
    pos = seeded_ball(rng.uniform(-1, 1, 3), 14 * SIM_CELL, SIM_CELL / 2, rng)
    spec = GridSpec.around(pos.min(0), pos.max(0), voxel, padding=6)
    off, on = both(lambda skip: particle_level_set(pos, spec, r, R, xp=np, smooth_iterations=smooth, interior=skip))
    assert_surface_kept(off, on, spec)
    assert skipped(on, 3 * voxel) > 0


@pytest.mark.parametrize("smooth", [0, 1])
def test_closed_dam_block_keeps_its_surface(smooth):
    """A block of water against three walls and the floor of a closed box, mirrored there."""
    rng = np.random.default_rng()
    h = 1 / 32
    box = GridSpec((0.0, 0.0, 0.0), h, (40, 24, 32))
    pos = seeded_pool(0.75, 0.6, 0.6, h / 2, rng)
    pos = np.clip(pos[pos[:, 0] < 0.6], 1e-4, np.asarray(box.upper) - 1e-4).astype(np.float32)
    r, R = surface_radii(h, 8)
    off, on = both(lambda skip: closed_level_set(pos, box, r, R, xp=np, smooth_iterations=smooth, interior=skip))
    assert_surface_kept(off, on, surface_grid(box))
    assert skipped(on, 3 * h) > 0


def test_stepped_dam_break_keeps_its_surface():
    """The dam break of bench/flip.py at 48³ (~53k particles), checked every 8 substeps up
    to 24 (the column slumping, the front running out along the floor)."""
    from tests.meshes import box

    h = 1 / 48
    spec = GridSpec((0.0, 0.0, 0.0), h, (48, 48, 48))
    sim = FlipSimulation(spec, FlipSettings(), *box((0.0, 0.0, 0.0), (0.3125, 0.3125, 0.625)), xp=np)
    r, R = surface_radii(h, 8)
    for step in range(25):
        if step % 8 == 0:
            off, on = both(lambda skip: closed_level_set(sim.pos, spec, r, R, xp=np, interior=skip))
            assert_surface_kept(off, on, surface_grid(spec))
            assert (on != off).sum() > 0.1 * (off < 0).sum()  # by the walls skipped nodes read the cut's d_box
        sim.substep(1 / 120)


def test_a_rule_that_skips_nodes_near_the_surface_is_caught(monkeypatch):
    """Mutation: the cube one cell wide, so nodes a cell under the surface are skipped: the
    check above must fail (the skip's own reach passes it, test_ball_keeps_its_surface)."""
    rng = np.random.default_rng()
    r, R = surface_radii(SIM_CELL, 8)
    pos = seeded_ball(np.zeros(3), 10 * SIM_CELL, SIM_CELL / 2, rng)
    spec = GridSpec.around(pos.min(0), pos.max(0), SIM_CELL, padding=6)
    real = surface_interior.interior_rule
    monkeypatch.setattr(surface_interior, "interior_rule", lambda *a: (real(*a)[0], 1))
    off, on = both(lambda skip: particle_level_set(pos, spec, r, R, xp=np, interior=skip))
    with pytest.raises(AssertionError):
        assert_surface_kept(off, on, spec)


def test_the_switch_is_on_by_default_and_read_from_the_environment(monkeypatch):
    rng = np.random.default_rng()
    r, R = surface_radii(SIM_CELL, 8)
    pos = seeded_ball(np.zeros(3), 10 * SIM_CELL, SIM_CELL / 2, rng)
    spec = GridSpec.around(pos.min(0), pos.max(0), SIM_CELL, padding=4)
    monkeypatch.delenv("VOXFX_LEVEL_SET_INTERIOR", raising=False)
    default = particle_level_set(pos, spec, r, R, xp=np, smooth_iterations=0)
    assert skipped(default, 3 * SIM_CELL) > 0
    np.testing.assert_array_equal(default, particle_level_set(pos, spec, r, R, xp=np, smooth_iterations=0,
                                                              interior=True))
    monkeypatch.setenv("VOXFX_LEVEL_SET_INTERIOR", "0")
    off = particle_level_set(pos, spec, r, R, xp=np, smooth_iterations=0)
    assert skipped(off, 3 * SIM_CELL) == 0
    np.testing.assert_array_equal(off, particle_level_set(pos, spec, r, R, xp=np, smooth_iterations=0, interior=False))
    monkeypatch.setenv("VOXFX_LEVEL_SET_INTERIOR", "yes")  # as every A/B switch: a typo is refused, not taken as off
    with pytest.raises(ValueError, match="VOXFX_LEVEL_SET_INTERIOR"):
        particle_level_set(pos, spec, r, R, xp=np, smooth_iterations=0)
