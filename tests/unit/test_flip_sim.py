"""The FLIP liquid step on the CPU reference (seed 003 Alg. 1): physical checks."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import pressure
from voxfx.kernels.flip.grid import FLUID, SOLID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation, SimulationError
from voxfx.kernels.grid import GridSpec


def tank(shape=(12, 12, 12), fill=(0, 0, 0, 12, 12, 6), h=0.1, **kw):
    spec = GridSpec((0.0, 0.0, 0.0), h, shape)
    x0, y0, z0, x1, y1, z1 = (c * h for c in fill)
    v, t = box((x0, y0, z0), (x1, y1, z1))
    return FlipSimulation(spec, FlipSettings(**kw), v, t, xp=np)


def test_still_water_stays_still():
    sim = tank()
    for _ in range(100):
        sim.step(1 / 60)
    speed = np.linalg.norm(sim.particles_host()["velocity"], axis=1)
    assert speed.max() < 0.05  # m/s after 100 steps of a 0.6 m deep tank


def test_free_fall_follows_g_t_squared_over_two():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (16, 16, 40))
    v, t = box((0.6, 0.6, 2.6), (1.0, 1.0, 3.0))  # a blob high above the floor
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=np)
    z0 = sim.centre_of_mass()[2]
    t_total, substeps = 0.0, 0
    for _ in range(12):
        substeps += sim.step(1 / 60)["substeps"]
        t_total += 1 / 60
    dz = z0 - sim.centre_of_mass()[2]
    # Gravity is applied before advecting (semi-implicit Euler): after n substeps of δt the
    # drop is g·δt²·n(n+1)/2, i.e. g·t²/2 plus a first-order error g·t·δt/2.
    exact = 0.5 * 9.81 * t_total ** 2
    first_order = 0.5 * 9.81 * t_total * (t_total / substeps)
    assert exact <= dz <= exact + first_order * 1.05
    assert dz == pytest.approx(exact, rel=0.1)


def test_dam_break_keeps_its_volume():
    """Particles carry the volume (h³ / particles per cell each) and none may be lost in a
    closed box. The meshed volume (``liquid_volume`` of the closed level set) stays within
    5% of the water's: at rest the kernel rounds the column's free edges (−3%), after 100
    frames sparse splash particles inflate it (+3%). (This test used to compare the first
    and last frames' level-set volumes to 2%: both then dropped the half cell along every
    wall they touched, some 15% of the water.)"""
    from voxfx.kernels.flip.surface import liquid_volume

    sim = tank(shape=(30, 10, 15), fill=(0, 0, 0, 10, 10, 10), h=0.04)
    n0 = len(sim.pos)
    water = n0 * 0.04 ** 3 / 8
    v0 = liquid_volume(sim.level_set(), sim.surface_spec)
    for _ in range(100):
        sim.step(1 / 60)
    pos = sim.particles_host()["position"]
    assert len(pos) == n0
    assert (pos >= 0).all() and (pos <= np.asarray(sim.spec.upper, dtype=np.float32)).all()
    v1 = liquid_volume(sim.level_set(), sim.surface_spec)
    print(f"\ndam break 30 × 10 × 15: meshed volume {v0 / water - 1:+.1%} at rest, {v1 / water - 1:+.1%} "
          "after 100 frames")
    assert abs(v0 / water - 1) < 0.05 and abs(v1 / water - 1) < 0.05
    assert sim.centre_of_mass()[0] > 0.3  # it broke: the column (0.4 m wide) spread along x


@pytest.mark.slow
def test_dam_break_meshed_volume_over_three_seconds():
    """The issue's 3 s dam break (48 × 12 × 24 cells, a 12 × 12 × 16 cell column): the
    volume of the marching-tetrahedra mesh of the closed level set every ½ s, against the
    water's (no particle is lost). A table for the README; the bounds are what a particle
    level set of 8 particles per cell can promise: thin sheets mid-splash are thinner than
    its kernel and shrink, sparse splash particles each claim a ball of half a cell."""
    from tests.isosurface import marching_tets, mesh_volume, open_and_nonmanifold_edges, triangle_edges
    from voxfx.kernels.flip.surface import liquid_volume

    h = 1 / 48
    sim = tank(shape=(48, 12, 24), fill=(0, 0, 0, 12, 12, 16), h=h)
    n0 = len(sim.pos)
    water = n0 * h ** 3 / 8
    rows = []
    for frame in range(73):
        if frame % 12 == 0:
            phi = sim.level_set()
            vertices, triangles = marching_tets(phi, sim.surface_spec.origin, h)
            assert open_and_nonmanifold_edges(triangle_edges(triangles)) == (0, 0)
            rows.append((frame / 24, mesh_volume(vertices, triangles) / water - 1,
                         liquid_volume(phi, sim.surface_spec) / water - 1))
        sim.step(1 / 24)
    assert len(sim.pos) == n0
    print("\n t (s) | meshed volume | liquid_volume\n" +
          "\n".join(f" {t:.1f}   | {m:+.1%}        | {v:+.1%}" for t, m, v in rows))
    assert all(abs(m - v) < 0.01 for _, m, v in rows)  # liquid_volume measures the mesh
    assert all(-0.08 < m < 0.12 for _, m, _ in rows)


def test_projection_leaves_no_divergence_and_no_particle_in_a_solid():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (20, 8, 12))
    water = box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4))
    obstacle = box((0.6, 0.0, 0.0), (0.7, 0.4, 0.25))
    sim = FlipSimulation(spec, FlipSettings(), *water, *obstacle, xp=np)
    for _ in range(30):
        sim.step(1 / 60)
        div = pressure.divergence(sim.grid)
        fluid = sim.grid.cell == FLUID
        assert np.abs(div[fluid]).max() * spec.voxel_size < 1e-3 * max(1.0, np.abs(sim.grid.w).max())
    pos = sim.particles_host()["position"]
    ijk = np.floor(pos / spec.voxel_size).astype(int)
    assert (sim.grid.solid[ijk[:, 2], ijk[:, 1], ijk[:, 0]] == 0).all()
    assert (sim.grid.cell[sim.grid.solid == 1] == SOLID).all()


def test_resume_from_a_checkpoint_is_bit_identical():
    a = tank(shape=(10, 10, 10), fill=(0, 0, 0, 5, 10, 6))
    for _ in range(5):
        a.step(1 / 60)
    b = tank(shape=(10, 10, 10), fill=(0, 0, 0, 5, 10, 6))
    b.restore(a.checkpoint())
    for _ in range(5):
        a.step(1 / 60)
        b.step(1 / 60)
    assert np.array_equal(a.particles_host()["position"], b.particles_host()["position"])


@pytest.mark.parametrize("damage", ["missing", "shape", "object", "nan", "mismatch"])
def test_a_damaged_state_is_refused_before_anything_changes(damage):
    a = tank(shape=(8, 8, 8), fill=(0, 0, 0, 8, 8, 4))
    state = a.checkpoint()
    if damage == "missing":
        del state["vel"]
    elif damage == "shape":
        state["pos"] = state["pos"][:, :2]
    elif damage == "object":
        state["t"] = np.array("1.0")
    elif damage == "nan":
        state["vel"][3, 1] = np.nan
    else:
        state["vel"] = state["vel"][:-1]
    b = tank(shape=(8, 8, 8), fill=(0, 0, 0, 8, 8, 4))
    before = b.checkpoint()
    with pytest.raises(ValueError):
        b.restore(state)
    after = b.checkpoint()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_nan_stops_with_a_clear_error():
    sim = tank(shape=(8, 8, 8), fill=(0, 0, 0, 8, 8, 4))
    sim.vel[0, 0] = np.nan
    with pytest.raises(SimulationError, match="NaN"):
        sim.step(1 / 60)


def test_empty_liquid_source_is_refused():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((5.0, 5.0, 5.0), (6.0, 6.0, 6.0))  # outside the grid
    from voxfx.kernels.errors import VoxFXError

    with pytest.raises(VoxFXError, match="covers no free grid cell"):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np)


def test_moving_obstacle_faces_carry_its_velocity_and_push_the_water():
    sim = tank(shape=(16, 8, 8), fill=(0, 0, 0, 16, 8, 6), h=0.05)
    paddle = np.array([(i, j, k) for i in (3,) for j in range(8) for k in range(8)])
    cell_velocity = np.zeros((8, 8, 16, 3), np.float32)
    cell_velocity[..., 0] = 1.0  # the paddle moves along +x at 1 m/s
    sim.set_obstacles(paddle, cell_velocity)
    assert np.all(sim.grid.solid_u[:, :, 3] == 1.0) and np.all(sim.grid.solid_u[:, :, 4] == 1.0)
    assert np.all(sim.grid.solid_u[:, :, 6] == 0.0)
    sim.step(1 / 60)
    pos, vel = sim.particles_host()["position"], sim.particles_host()["velocity"]
    ahead = (pos[:, 0] > 0.2) & (pos[:, 0] < 0.35)  # just downstream of the paddle (x 0.15–0.2)
    behind = pos[:, 0] > 0.6
    assert vel[ahead, 0].mean() > 0.2 and vel[ahead, 0].mean() > 3 * abs(vel[behind, 0].mean())


def test_inflow_fills_only_empty_cells_with_moving_particles():
    sim = tank(shape=(12, 6, 12), fill=(0, 0, 0, 4, 6, 3), h=0.05)
    n0 = len(sim.pos)
    nozzle = np.array([(i, j, 9) for i in (8, 9) for j in (2, 3)])
    added = sim.emit(nozzle, (0.0, 0.0, -1.0))
    assert added == 4 * 8 and len(sim.pos) == n0 + added
    assert np.allclose(sim.particles_host()["velocity"][n0:], (0.0, 0.0, -1.0))
    assert sim.emit(nozzle, (0.0, 0.0, -1.0)) == 0  # cells still full: nothing more
    for _ in range(4):  # the jet (1 m/s + gravity) moves on by more than two 5 cm cells
        sim.step(1 / 60)
    assert sim.emit(nozzle, (0.0, 0.0, -1.0)) > 0


def test_outflow_deletes_the_particles_that_reach_it():
    sim = tank(shape=(12, 6, 12), fill=(0, 0, 0, 12, 6, 4), h=0.05)
    n0 = len(sim.pos)
    drain = np.array([(i, j, 0) for i in range(10, 12) for j in range(6)])
    removed = sim.drain(drain)
    assert removed == 2 * 6 * 8 and len(sim.pos) == n0 - removed
    cells = np.floor(sim.particles_host()["position"] / 0.05).astype(int)
    assert not ((cells[:, 0] >= 10) & (cells[:, 2] == 0)).any()
