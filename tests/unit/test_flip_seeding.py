"""A liquid object starts with its own volume (issue 22 §3): particles are seeded in the
cells its voxelization touches and kept where they lie inside it. Oracles: the mesh's
volume by the divergence theorem, and the generalised winding number (tests/meshes.py)
for which points are inside."""

import math

import numpy as np
import pytest

from tests.isosurface import mesh_volume
from tests.meshes import box, merge, rotation, torus, uv_sphere, winding_inside
from voxfx.kernels.errors import VoxFXError
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.voxelize.inside import points_inside
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

H = 0.5 / 24  # the tank: 0.5 m, resolution 24
TANK = GridSpec((0.0, 0.0, 0.0), H, (24, 24, 24))


def particle_volume(sim):
    return len(sim.pos) * sim.spec.voxel_size ** 3 / sim.settings.particles_per_cell


def test_tank_filled_wall_to_wall_seeds_exactly_its_twelve_layers():
    sim = FlipSimulation(TANK, FlipSettings(), *box((0, 0, 0), (0.5, 0.5, 0.25)), xp=np)
    assert len(sim.pos) == 24 * 24 * 12 * 8  # was 24 × 24 × 13 cells: +8.3 %
    assert sim.particles_host()["position"][:, 2].max() < 0.25


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cube_of_9_6_cells_seeds_its_volume_within_2_percent(seed):
    v, t = box((0.15, 0.15, 0.15), (0.35, 0.35, 0.35))
    sim = FlipSimulation(TANK, FlipSettings(seed=seed), v, t, xp=np)
    assert particle_volume(sim) == pytest.approx(0.2 ** 3, rel=0.02)  # was 10³ cells: +13 %


def shapes():
    """Closed meshes at least 8 cells across, off the grid's axes and centres."""
    r = rotation(0.3, -0.5, 0.8)
    tv, tt = torus(0.13, 0.05, center=(0.0, 0.0, 0.0))
    bv, bt = box((-0.09, -0.06, -0.1), (0.09, 0.06, 0.1))
    return {
        "sphere 8 cells across": uv_sphere(4 * H, center=(0.2512, 0.2437, 0.2281)),
        "sphere 15 cells across": uv_sphere(7.5 * H, center=(0.2512, 0.2437, 0.2281)),
        "torus": (tv @ r.T + 0.25, tt),
        "tilted box": (bv @ r.T + np.array([0.23, 0.26, 0.27]), bt),
    }


@pytest.mark.parametrize("name", list(shapes()))
def test_particle_volume_matches_the_object_within_2_percent(name):
    v, t = shapes()[name]
    sim = FlipSimulation(TANK, FlipSettings(seed=5), v, t, xp=np)
    assert particle_volume(sim) == pytest.approx(mesh_volume(v, t), rel=0.02)
    pos = sim.particles_host()["position"]
    some = np.random.default_rng(0).choice(len(pos), 1500, replace=False)  # the oracle is O(points · triangles)
    assert winding_inside(pos[some], v, t).all()


@pytest.mark.parametrize("cells_across", [1.5, 3.0, 5.0])
def test_small_objects_are_within_a_cell_of_their_volume(cells_across):
    v, t = uv_sphere(cells_across * H / 2, center=(0.2512, 0.2437, 0.2281))
    sim = FlipSimulation(TANK, FlipSettings(seed=2), v, t, xp=np)
    assert abs(particle_volume(sim) - mesh_volume(v, t)) <= H ** 3


def test_a_surface_without_volume_seeds_nothing():
    triangle = np.array([[0.1, 0.12, 0.2], [0.3, 0.18, 0.25], [0.2, 0.35, 0.3]])  # was 96 cells' worth
    with pytest.raises(VoxFXError, match="no volume"):
        FlipSimulation(TANK, FlipSettings(), triangle, np.array([[0, 1, 2]]), xp=np)


def test_inside_test_agrees_with_the_winding_number():
    rng = np.random.default_rng(4)
    tv, tt = torus(0.12, 0.05, segments=24, sides=12, center=(0.0, 0.0, 0.0))
    sv, st = uv_sphere(0.05, segments=16, rings=8, center=(0.41, 0.41, 0.41))  # apart: the winding number is 0 or 1
    v, t = merge((tv @ rotation(1.0, 0.2, -0.4).T + 0.25, tt), (sv, st))
    points = rng.uniform(0.02, 0.48, (8000, 3))
    expected = winding_inside(points, v, t)
    assert 0.05 < expected.mean() < 0.5
    np.testing.assert_array_equal(points_inside(points, v, t, TANK), expected)


def test_a_box_missing_one_face_is_still_filled_by_the_vote():
    v, t = box((0.1, 0.1, 0.1), (0.3, 0.3, 0.3))
    centres = v[t].mean(axis=1)
    open_top = t[~np.isclose(centres[:, 2], 0.3)]  # no lid
    points = np.random.default_rng(1).uniform(0.11, 0.29, (2000, 3))
    assert points_inside(points, v, open_top, TANK).all()
    assert not points_inside(points + 0.2, v, open_top, TANK).any()


def test_inflow_still_fills_whole_cells():
    sim = FlipSimulation(TANK, FlipSettings(), *box((0, 0, 0), (0.5, 0.5, 0.1)), xp=np)
    n0 = len(sim.pos)
    nozzle = np.array([(i, j, 20) for i in (10, 11) for j in (10, 11)])
    assert sim.emit(nozzle, (0.0, 0.0, -1.0)) == 4 * 8 and len(sim.pos) == n0 + 32


def test_volume_error_statistics_are_centred():
    """Particles of a crossed cell are kept by where they lie, uniformly over the cell:
    the expected particle volume is the object's (no bias towards a cell layer)."""
    v, t = uv_sphere(6 * H, center=(0.2512, 0.2437, 0.2281))
    errors = [particle_volume(FlipSimulation(TANK, FlipSettings(seed=s), v, t, xp=np)) / mesh_volume(v, t) - 1
              for s in range(6)]
    assert abs(np.mean(errors)) < 0.01 and max(abs(e) for e in errors) < 0.02
    assert not math.isnan(np.std(errors))
