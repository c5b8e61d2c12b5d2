"""Moving liquid boundaries from posed meshes (kernels/flip/bodies.py): the cells a body
fills are its voxelization, and an obstacle's cells move with its rigid motion."""

import math

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import bodies
from voxfx.kernels.flip.bodies import Body
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize

SPEC = GridSpec((0.0, 0.0, 0.0), 0.1, (20, 16, 12))


def rigid(angle_z=0.0, move=(0.0, 0.0, 0.0)):
    c, s = math.cos(angle_z), math.sin(angle_z)
    m = np.eye(4)
    m[:2, :2] = [[c, -s], [s, c]]
    m[:3, 3] = move
    return m


def test_cells_are_the_solid_and_surface_voxels_of_the_body():
    v, t = box((0.33, 0.41, 0.27), (1.07, 0.93, 0.88))
    want = bitgrid.coordinates(voxelize(v, t, SPEC, "solid+surface", vote=True, xp=np).bits, SPEC.shape[0])
    got = bodies.cells(Body(v, t, np.eye(4)), SPEC, np)
    assert np.array_equal(got, want) and len(got) > 100
    assert len(bodies.cells(None, SPEC, np)) == 0
    both = bodies.cells_of_all([Body(v, t, np.eye(4))] * 2, SPEC, np)
    assert len(both) == 2 * len(got)


def test_a_translating_obstacle_gives_every_cell_its_speed_and_a_resting_one_none():
    v, t = box((0.5, 0.5, 0.3), (0.9, 0.8, 0.7))
    fps = 24.0
    rng = np.random.default_rng()
    d = rng.uniform(-0.05, 0.05, 3)
    cells, vel = bodies.obstacle_state([Body(v, t, np.eye(4))], [rigid(move=d)], SPEC, fps, np)
    assert len(cells) > 50
    per_cell = vel[cells[:, 2], cells[:, 1], cells[:, 0]]
    assert per_cell == pytest.approx(np.broadcast_to(d * fps, per_cell.shape), abs=1e-5)
    outside = np.ones(SPEC.array_shape, bool)
    outside[cells[:, 2], cells[:, 1], cells[:, 0]] = False
    assert not vel[outside].any()
    cells2, still = bodies.obstacle_state([Body(v, t, rigid(0.3, (0.1, 0, 0)))], [rigid(0.3, (0.1, 0, 0))], SPEC,
                                          fps, np)
    assert still is None and np.array_equal(cells2, cells)


def test_a_spinning_obstacle_moves_each_cell_along_its_circle():
    """Turning by ω/fps about the z axis through the origin moves the centre x to R·x:
    velocity (R·x − x)·fps, which tends to ω × x for small angles."""
    v, t = box((0.6, 0.4, 0.2), (1.4, 1.2, 0.6))
    omega, fps = 2.0, 60.0
    cells, vel = bodies.obstacle_state([Body(v, t, np.eye(4))], [rigid(omega / fps)], SPEC, fps, np)
    x = SPEC.centers(cells).astype(np.float64)
    per_cell = vel[cells[:, 2], cells[:, 1], cells[:, 0]]
    exact = (x @ rigid(omega / fps)[:3, :3].T - x) * fps
    assert per_cell == pytest.approx(exact, abs=1e-5)
    cross = omega * np.stack([-x[:, 1], x[:, 0], np.zeros(len(x))], axis=1)
    assert per_cell == pytest.approx(cross, abs=omega * omega / fps * 2.0)  # ω × x to first order
