"""A closed sparse liquid in a box too large for box-sized outputs (issue 12: resolutions
up to 2048): the level set and cell velocity cover the liquid's region, still closed
against the walls, and equal the box-sized outputs there."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import sparse_output
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_memory import sparse_flip_memory
from voxfx.kernels.flip.surface import closed_level_set, surface_grid, surface_radii
from voxfx.kernels.grid import GridSpec

H = 0.01
BIG = GridSpec((0.0, 0.0, 0.0), H, (400, 400, 400))  # surface grid 406³ > BOX_NODES
WATER = box((0.0, 0.0, 0.0), (0.1, 0.1, 0.1))  # in the corner: it touches three walls


@pytest.fixture(scope="module")
def sim():
    s = FlipSimulation(BIG, FlipSettings(), *WATER, xp=np, sparse=True)
    s.step(1 / 24)
    return s


def block(a, spec, sub):
    """*a* (z, y, x, ...) over *spec*'s nodes, cut to *sub*'s (a grid inside it)."""
    i, j, k = (int(round((p - q) / H)) for p, q in zip(sub.origin, spec.origin))
    nx, ny, nz = sub.shape
    return a[k:k + nz, j:j + ny, i:i + nx]


def test_a_large_closed_box_outputs_the_liquids_region_not_the_box(sim):
    assert not sparse_output.box_outputs(BIG)
    region = sim.surface_spec
    assert region.voxel_count < 30 ** 3  # the liquid's, not the 406³ box's
    assert np.allclose(region.origin, (-0.03, -0.03, -0.03))  # it meets the walls: the wall cells beyond them
    phi = sim.level_set()
    assert phi.shape == region.array_shape


def test_the_regions_level_set_equals_the_box_level_set_there(sim):
    """The oracle: ``closed_level_set`` of the same particles over a box-sized grid of a
    smaller box with the same three walls (the liquid is far from its others)."""
    small = GridSpec((0.0, 0.0, 0.0), H, (40, 40, 40))
    r, R = surface_radii(H, sim.settings.particles_per_cell)
    whole = np.asarray(closed_level_set(sim.pos, small, radius=r, kernel_radius=R, xp=np))
    region = sim.surface_spec
    assert np.abs(block(whole, surface_grid(small), region) - sim.level_set()).max() < 1e-6
    outside = whole.copy()
    block(outside, surface_grid(small), region)[...] = 1.0
    assert outside.min() > 0  # no liquid beyond the region


def test_the_regions_cell_velocity_equals_the_grids_there(sim):
    v = sim.cell_velocity(padding=3)
    region = sparse_output.liquid_region(sim)
    assert v.shape == surface_grid(region, 3).array_shape + (3,)
    wide = GridSpec((0.0, 0.0, 0.0), H, (40, 40, 40))
    ref = sparse_output.cell_velocity(sim.grid, wide, BIG)
    inner = v[3:-3, 3:-3, 3:-3]
    assert np.abs(inner).max() > 0.1  # it moves
    assert np.array_equal(inner, block(ref, wide, region))


def test_the_estimate_of_a_large_closed_box_follows_the_liquid():
    small = sparse_flip_memory(BIG, 8000, closed=True, xp=np)
    huge = sparse_flip_memory(GridSpec((0.0, 0.0, 0.0), H, (2048, 2048, 2048)), 8000, closed=True, xp=np)
    assert small == huge < 2 ** 30  # the 2048³ box's level set (34 GB) is not counted


def test_a_2048_cube_box_seeds_its_liquid_from_a_window_of_the_lattice():
    """2048³ cells (over 2³² — too many to voxelize or seed over the box): the source is
    voxelized and seeded on the lattice cells around it; its particle volume is the
    source's and the outputs follow it."""
    h = 4.0 / 2048
    spec = GridSpec((0.0, 0.0, 0.0), h, (2048, 2048, 2048))
    side = 10 * h
    water = box((1.0, 1.0, 0.0), (1.0 + side, 1.0 + side, side))  # 10³ cells on the floor
    sim = FlipSimulation(spec, FlipSettings(), *water, xp=np, sparse=True)
    assert len(sim.pos) == 8 * 10 ** 3
    lo, hi = sim.pos.min(axis=0), sim.pos.max(axis=0)
    assert np.all(lo >= np.array([1.0, 1.0, 0.0]) - 1e-6) and np.all(hi <= np.array([1.0, 1.0, 0.0]) + side + 1e-6)
    assert sim.surface_spec.voxel_count < 40 ** 3
    assert sim.level_set().min() < 0
