"""The sparse liquid's frame outputs (issue 12): level set and cell velocity over the
liquid wherever it is (open domain), the box's as the dense solver's (closed)."""

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import WALL_CELLS, liquid_volume, particle_level_set, surface_grid, surface_radii
from voxfx.kernels.grid import GridSpec


def test_open_domain_level_set_follows_liquid_that_left_the_box():
    """No gravity, a cube thrown along +x out of its box: after the flight its level set
    lies around it, beyond the box, holds its volume and is small (the liquid's region,
    not the box plus the kill distance)."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.2, 0.2, 0.2), (0.6, 0.6, 0.6))
    sim = FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0)), v, t, xp=np, sparse=True,
                         boundary="open", kill_distance=50.0, initial_velocity=(6.0, 0.0, 0.0))
    for _ in range(12):
        sim.step(1 / 24)
    pos = sim.particles_host()["position"]
    assert pos[:, 0].min() > 2.0  # left the box (0.8 m) far behind
    phi = sim.level_set()
    grid = sim.surface_spec
    assert phi.shape == grid.array_shape
    assert grid.origin[0] > 1.0 and grid.shape[0] < 20  # around the liquid, not from the box on
    lo, hi = np.asarray(grid.origin), np.asarray(grid.upper)
    assert (pos > lo).all() and (pos < hi).all()
    assert (phi[0] > 0).all() and (phi[-1] > 0).all() and (phi[:, :, 0] > 0).all() and (phi[:, :, -1] > 0).all()
    wide = surface_grid(grid, 4)  # the same particles' level set on a wider grid: nothing was cut off
    r, R = surface_radii(0.1, 8)
    assert np.abs(particle_level_set(pos, wide, r, R, xp=np)[4:-4, 4:-4, 4:-4] - phi).max() < 1e-6
    assert liquid_volume(phi, grid) > 0.5 * len(pos) * 0.1 ** 3 / 8
    vel = sim.cell_velocity(padding=WALL_CELLS)
    assert vel.shape == grid.array_shape + (3,)
    inside = phi < -0.02
    assert inside.sum() > 8
    assert np.abs(vel[inside][:, 0] - 6.0).max() < 0.3  # the liquid's own grid velocity there


def test_closed_sparse_outputs_are_the_dense_solvers():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.3))
    dense = FlipSimulation(spec, FlipSettings(seed=4), v, t, xp=np)
    sparse = FlipSimulation(spec, FlipSettings(seed=4), v, t, xp=np, sparse=True)
    for _ in range(3):
        dense.step(1 / 60)
        sparse.step(1 / 60)
    assert sparse.surface_spec == dense.surface_spec
    assert np.abs(sparse.level_set() - dense.level_set()).max() < 1e-3 * spec.voxel_size * 10
    a, b = sparse.cell_velocity(padding=WALL_CELLS), dense.cell_velocity(padding=WALL_CELLS)
    assert a.shape == b.shape and np.abs(a - b).max() < 1e-3
