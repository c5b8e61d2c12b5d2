"""Obstacles, inflows and outflows of the sparse liquid as bricks (issue 12, second
increment): voxelized without a dense box, so in an open domain they may lie outside it."""

import numpy as np

from tests.meshes import box
from voxfx.kernels.flip import bodies, sparse_bodies
from voxfx.kernels.flip.grid import SOLID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import brick_keys


def body(lo, hi, matrix=None):
    v, t = box(lo, hi)
    return bodies.Body(np.asarray(v, np.float32), np.asarray(t, np.int32),
                       np.eye(4) if matrix is None else np.asarray(matrix, np.float64))


def rows(a):
    return {tuple(int(x) for x in r) for r in np.asarray(a).reshape(-1, 3)}


def test_a_body_in_the_box_gives_the_cells_of_the_dense_voxelization():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (20, 18, 10))
    b = bodies.Body(*(np.asarray(a) for a in _torus()), np.eye(4))
    bricks = sparse_bodies.voxel_bricks(b, spec, np)
    assert bricks.count > 0 and np.all(np.diff(bricks.keys) > 0)
    assert rows(sparse_bodies.cells(bricks, np)) == rows(bodies.cells(b, spec, np))


def test_a_body_below_and_beyond_the_box_keeps_its_cells_on_the_lattice():
    """A box reaching 0.53 m below the origin and past the far side: its cells are those
    of the dense voxelization of a grid moved by whole tiles (64 cells) to hold it."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    b = body((-0.53, 0.12, -0.31), (0.97, 0.47, 0.04))
    got = sparse_bodies.cells(sparse_bodies.voxel_bricks(b, spec, np), np)
    big = GridSpec((-6.4, 0.0, -6.4), 0.1, (128, 64, 128))
    want = bodies.cells(b, big, np).astype(np.int64) - np.array([64, 0, 64])
    assert rows(got) == rows(want)
    assert got[:, 0].min() < 0 and got[:, 0].max() >= 8 and got[:, 2].min() < 0
    inside = sparse_bodies.contains(sparse_bodies.voxel_bricks(b, spec, np), np.vstack([got, [[3, 9, 3]]]), np)
    assert inside[:-1].all() and not inside[-1]


def test_obstacle_bricks_within_the_liquids_margin_are_marked_solid():
    """A plate far larger than the liquid: only its bricks inside the liquid's influence
    boxes join the grid, every cell of those bricks that the plate fills is SOLID."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.3, 0.3, 0.2), (0.5, 0.5, 0.4))
    plate = body((-3.0, -3.0, -0.2), (3.0, 3.0, 0.0))
    sim = FlipSimulation(spec, FlipSettings(), *water, xp=np, sparse=True, boundary="open")
    sim.set_obstacle_bodies([plate], [plate.matrix], 24.0)
    sim.substep(1 / 240)
    g = sim.grid
    plate_cells = sparse_bodies.cells(sim.obstacle_bodies[0], np)
    active = np.isin(brick_keys(plate_cells >> 3), g.topology.keys)
    assert 0 < active.sum() < len(plate_cells) / 4  # the plate's bricks near the liquid only
    at = g.locate(*(plate_cells[active, a] for a in range(3)))
    assert (g["solid"][at] == 1).all() and (g["cell"][at] == SOLID).all()
    assert int((g["solid"] == 1).sum()) == int(active.sum())


def test_a_blob_in_an_open_domain_lands_on_an_obstacle_below_the_box():
    """Open domain, a floor 0.5 m under the box: the liquid leaves the box, lands and
    stays on it; nothing sinks through the floor and nothing is killed."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.3, 0.3, 0.2), (0.6, 0.6, 0.5))
    floor = box((-0.5, -0.5, -0.9), (1.3, 1.3, -0.5))
    sim = FlipSimulation(spec, FlipSettings(), *water, *floor, xp=np, sparse=True, boundary="open",
                         kill_distance=2.0)
    n0 = len(sim.pos)
    for _ in range(45):
        sim.step(1 / 60)
    z = sim.particles_host()["position"][:, 2]
    assert len(z) == n0 and sim.killed == 0
    assert z.max() < 0.0  # it left the box downwards ...
    assert z.min() > -0.5 - 0.1  # ... and rests on the floor (one cell's tolerance)


def test_an_inflow_and_an_outflow_outside_the_box_in_an_open_domain():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.3, 0.3, 0.3), (0.5, 0.5, 0.5))
    sim = FlipSimulation(spec, FlipSettings(), *water, xp=np, sparse=True, boundary="open", kill_distance=5.0)
    nozzle = sim.body_cells(body((1.02, 0.31, 0.21), (1.18, 0.49, 0.39)))  # 0.2 m beyond the box in x
    assert len(nozzle) == 2 * 2 * 2 and (nozzle[:, 0] >= 8).all()
    n0 = len(sim.pos)
    assert sim.emit(nozzle, (1.0, 0.0, 0.0)) == 8 * 8
    new = sim.particles_host()["position"][n0:]
    cell = np.floor(new / 0.1).astype(np.int64)
    assert rows(cell) == rows(nozzle)
    assert sim.emit(nozzle, (1.0, 0.0, 0.0)) == 0  # occupied
    sim.step(1 / 60)
    assert sim.drain(sim.body_cells(body((0.9, -1.0, -2.0), (3.0, 2.0, 2.0)))) == 64  # the jet, not the blob
    assert len(sim.pos) == n0
    closed = FlipSimulation(spec, FlipSettings(), *water, xp=np, sparse=True)
    assert len(closed.body_cells(body((1.02, 0.31, 0.21), (1.18, 0.49, 0.39)))) == 0  # beyond the walls


def test_moving_obstacle_bodies_match_the_dense_obstacle_state(monkeypatch):
    """A paddle moving along −x through a closed tank: ``set_obstacle_bodies`` (bricks) and
    the dense ``obstacle_state`` give the same cells and velocities, so the same motion."""
    monkeypatch.setenv("VOXFX_SPARSE_PARTICLE_SORT", "off")  # index by index: the dense solver never sorts
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 6, 12))
    water = box((0.0, 0.0, 0.0), (0.6, 0.3, 0.2))
    sims = [FlipSimulation(spec, FlipSettings(seed=3), *water, xp=np, sparse=s) for s in (False, True)]
    for f in range(8):
        x = 0.4 - 0.02 * f
        now = body((x, -0.1, -0.1), (x + 0.06, 0.4, 0.3))
        nxt = np.eye(4)
        nxt[0, 3] = -0.02
        sims[0].set_obstacles(*bodies.obstacle_state([now], [nxt], spec, 60.0, np))
        sims[1].set_obstacle_bodies([now], [nxt], 60.0)
        for sim in sims:
            sim.step(1 / 60)
    dense, sparse = sims
    assert len(sparse.pos) == len(dense.pos)
    assert np.abs(sparse.pos - dense.pos).max() <= 1e-4
    assert np.abs(sparse.cell_velocity() - dense.cell_velocity()).max() < 1e-3


def _torus():
    from tests.meshes import torus

    v, t = torus(0.6, 0.2, center=(1.0, 0.9, 0.5))
    return np.asarray(v, np.float32), np.asarray(t, np.int32)
