"""The long-substep prototypes (``kernels/flip/long_steps.py``, issue 24; environment
switches of the dense NumPy solver): sub-cycled advection is today's advection for a
particle that moves less than C cells and follows a rotation where one step drifts out;
the deep air band covers the substep's reach; the position-only correction spreads a
crowded cell without touching a velocity; the sparse solver refuses the switches; a bad
value is refused."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import long_steps, transfer
from voxfx.kernels.flip.grid import DenseGrid, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

from .test_flip_density import CROWDED, H, crowded_tank


def rotating_grid(n=16):
    """A dense n³ grid of 1 m whose faces hold the rigid rotation (−(y − ½), x − ½, 0) rad/s."""
    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n, n)), np)
    h = 1.0 / n
    zc, yc, xf = np.meshgrid((np.arange(n) + 0.5) * h, (np.arange(n) + 0.5) * h, np.arange(n + 1) * h, indexing="ij")
    g.u[...] = -(yc - 0.5)
    zc, yf, xc = np.meshgrid((np.arange(n) + 0.5) * h, np.arange(n + 1) * h, (np.arange(n) + 0.5) * h, indexing="ij")
    g.v[...] = xc - 0.5
    return g


def advected(grid, pos, dt):
    pos = pos.copy()
    transfer.advect(grid, pos, dt)
    return pos


def test_sub_cycled_is_todays_advection_within_c_cells(monkeypatch):
    g = rotating_grid()
    pos = np.random.default_rng(1).uniform(0.3, 0.7, (500, 3)).astype(np.float32)
    today = advected(g, pos, 0.05)  # at most 0.2 m/s · 0.05 s = 0.16 cells
    monkeypatch.setenv("VOXFX_ADVECT_CELLS", "1")
    assert np.array_equal(advected(g, pos, 0.05), today)


def test_sub_cycled_follows_a_rotation(monkeypatch):
    g = rotating_grid()
    pos = np.array([[0.8, 0.5, 0.5]], np.float32)  # 0.3 m from the axis: 0.3 m/s
    dt = 2.0  # 2 rad: 9.6 cells in one substep
    one = advected(g, pos, dt)
    monkeypatch.setenv("VOXFX_ADVECT_CELLS", "0.5")
    many = advected(g, pos, dt)
    radius = [float(np.hypot(p[0, 0] - 0.5, p[0, 1] - 0.5)) for p in (one, many)]
    assert abs(radius[1] - 0.3) < 0.01 < abs(radius[0] - 0.3)
    assert np.allclose(many[0, :2], [0.5 + 0.3 * np.cos(2.0), 0.5 + 0.3 * np.sin(2.0)], atol=0.01)


def test_reach_layers_cover_the_substep():
    g = rotating_grid(32)
    fluid = transfer.fluid_faces(g)  # no FLUID cell: the least
    assert long_steps.reach_layers(g.faces(), fluid, 1.0, g.h) == 2
    ones = tuple(np.ones(f.shape, np.uint8) for f in g.faces())
    top = float(np.abs(g.u).max())  # the x and y maxima alike: |u|_max = √2 · top
    assert long_steps.reach_layers(g.faces(), ones, 1.0, g.h) == int(np.ceil(np.sqrt(2) * top * 32)) + 1


def occupied(pos):
    return len(np.unique(np.floor(pos / np.float32(H)).astype(np.int64), axis=0))


def test_position_correction_spreads_without_touching_velocities(monkeypatch):
    sim, _ = crowded_tank(0.0, False)
    sim.vel = np.random.default_rng(2).normal(0, 1e-3, sim.vel.shape).astype(np.float32)
    before = occupied(sim.pos)
    mine = (np.floor(sim.pos / np.float32(H)).astype(np.int64) == CROWDED).all(axis=1)
    vel = sim.vel.copy()
    long_steps.correct_positions(sim, 1.0)
    assert np.array_equal(sim.vel, vel)
    assert occupied(sim.pos) >= before
    left = (np.floor(sim.pos / np.float32(H)).astype(np.int64) == CROWDED).all(axis=1)
    assert left.sum() < 0.8 * mine.sum()  # the triple-full cell gave particles to its neighbours


def test_position_correction_in_a_substep(monkeypatch):
    sims = []
    for beta in ("", "1"):
        monkeypatch.setenv("VOXFX_DENSITY_POSITIONS", beta)
        sim, crowded = crowded_tank(0.0, False)
        sim.substep(0.01)
        sims.append(sim)
    count = [int((np.floor(s.pos / np.float32(H)).astype(np.int64) == CROWDED).all(axis=1).sum()) for s in sims]
    assert count[1] < 0.8 * count[0], count


@pytest.mark.parametrize("name", ["VOXFX_ADVECT_CELLS", "VOXFX_EXTRAPOLATE_REACH", "VOXFX_DENSITY_POSITIONS"])
def test_switches_refused_by_the_sparse_solver_and_checked(monkeypatch, name):
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4))
    spec = GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8))
    monkeypatch.setenv(name, "1")
    with pytest.raises(NotImplementedError, match="dense NumPy"):
        FlipSimulation(spec, FlipSettings(sparse=True), v, t, xp=np)
    FlipSimulation(spec, FlipSettings(), v, t, xp=np)  # the dense NumPy solver takes them
    monkeypatch.setenv(name, "-1")
    with pytest.raises(InputError, match=name):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np)
