"""The divergence-free air band (``kernels/flip/air_band.py``, issue 24; an environment switch
of the dense NumPy solver): the band's cells are divergence-free after ``project_band`` while
the liquid's faces keep their values and the walls are closed; a resting tank stays at rest
through long substeps with it; a bad value is refused (the sparse solver's NumPy path:
``test_flip_sparse_air_band.py``)."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import air_band, pressure, transfer
from voxfx.kernels.flip.grid import AIR, FLUID, DenseGrid, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec, mac

H = 0.1


def falling_block():
    """A 12³ grid, a FLUID block of 5 × 5 × 6 cells on the floor in one corner, random faces
    projected divergence-free, then extrapolated as the substep does."""
    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), H, (12, 12, 12)), np)
    g.cell[...] = AIR
    g.cell[:6, :5, :5] = FLUID
    rng = np.random.default_rng(4)
    for f in g.faces():
        f[...] = rng.normal(0.0, 1.0, f.shape).astype(np.float32)
    g.w[...] -= np.float32(2.0)  # falling
    transfer.enforce_boundaries(g)
    p, stats = pressure.solve_pressure(g, 0.1, tolerance=1e-6)
    assert stats["converged"]
    pressure.project(g, p, 0.1)
    transfer.extrapolate(g, valid=transfer.fluid_faces(g))
    return g


def cell_divergence(g):
    return mac.face_sum(*pressure._boundary_faces(g)) / np.float32(H)


def test_the_band_is_made_divergence_free_and_the_liquid_kept():
    g = falling_block()
    liquid = [f.copy() for f in g.faces()]
    touching = transfer.fluid_faces(g)
    band = air_band.band_cells(g.cell, air_band.reach_cells(g, 0.1))
    before = np.abs(cell_divergence(g)[band]).max()
    assert before > 1.0  # the extrapolated band compresses and expands (1/s)
    got, stats = air_band.project_band(g, 0.1, tolerance=1e-6)
    assert stats["converged"] and np.array_equal(got, band)
    after = np.abs(cell_divergence(g)[band]).max()
    assert after < 1e-3 * before, (before, after)
    for f, k, m in zip(g.faces(), liquid, touching):  # the projected liquid's faces untouched
        assert np.array_equal(f[m != 0], k[m != 0])
    walls = mac.faces_touching(np.zeros(g.cell.shape, bool), outside=True)
    for f, wall in zip(g.faces(), walls):
        assert not f[wall].any()
    assert np.abs(cell_divergence(g)[g.cell == FLUID]).max() < 1e-2  # the liquid still divergence-free


def test_sub_cycled_advection_follows_a_uniform_field_and_stays_inside():
    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8)), np)
    g.u[...] = np.float32(1.0)
    pos = np.array([[0.2, 0.4, 0.4], [0.75, 0.4, 0.4]], np.float32)
    n = air_band.advect(g, pos, 0.2, cells=0.5)
    assert n == 4  # 2 cells at 0.5 a sub-step
    assert np.allclose(pos[0], [0.4, 0.4, 0.4], atol=1e-6)
    assert pos[1, 0] < 0.8 and pos[1, 0] > 0.79  # pushed back inside the wall


def test_a_resting_tank_stays_at_rest_through_long_substeps(monkeypatch):
    monkeypatch.setenv(air_band.SWITCH, "1")
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.8, 0.4))
    sim = FlipSimulation(GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8)),
                         FlipSettings(max_substeps=1, max_time_step=0.0, seed=3), v, t, xp=np)
    start = sim.pos.copy()
    for _ in range(4):
        sim.step(1 / 8)
        assert sim.last["substeps"] == 1
    assert np.abs(sim.pos - start).max() < 0.2 * H
    assert np.abs(sim.vel).max() < 0.1


def test_the_switch_is_checked(monkeypatch):
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4))
    spec = GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8))
    monkeypatch.setenv(air_band.SWITCH, "1")
    FlipSimulation(spec, FlipSettings(), v, t, xp=np)  # the dense NumPy solver takes it (the sparse
    # one's NumPy path too: test_flip_sparse_air_band.py; CuPy refuses: tests/gpu)
    monkeypatch.setenv(air_band.SWITCH, "yes")
    with pytest.raises(InputError, match=air_band.SWITCH):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np)


def test_wall_pieces_cut_where_a_straight_path_meets_a_wall():
    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), H, (16, 16, 16)), np)
    # 2 cells from the +x wall, travelling 9 cells toward it: 9 / (2 + 1 slack) = 3 pieces
    pos = np.array([[1.4, 0.8, 0.8]], np.float32)
    vel = np.array([[9 * H / 0.5, 0.0, 0.0]], np.float32)
    assert air_band.wall_pieces(g, pos, vel, 0.5) == 3
    assert air_band.wall_pieces(g, pos, -vel, 0.5) == 1  # away from it: 14 cells of room
    assert air_band.wall_pieces(g, pos, vel * 10, 0.5) == air_band.MAX_PIECES  # capped
    # resting on the floor, sinking a little: no cut
    assert air_band.wall_pieces(g, np.array([[0.8, 0.8, 0.05]], np.float32),
                                np.array([[0.0, 0.0, -0.1]], np.float32), 0.5) == 1
    # one splash particle among many does not decide (the quantile); alone it does
    many = np.tile(np.array([[0.8, 0.8, 0.8]], np.float32), (2000, 1))
    still = np.zeros_like(many)
    still[0] = vel[0]
    many[0] = pos[0]
    assert air_band.wall_pieces(g, many, still, 0.5) == 1
    assert air_band.wall_pieces(g, many, still, 0.5, quantile=1.0) == 3


def test_the_wall_split_steps_a_block_thrown_at_a_wall_in_pieces(monkeypatch):
    monkeypatch.setenv(air_band.SWITCH, "1")
    monkeypatch.setenv(air_band.WALL_SWITCH, "1")
    spec = GridSpec((0.0, 0.0, 0.0), H, (12, 12, 12))
    v, t = box((0.4, 0.0, 0.0), (0.8, 1.2, 0.4))
    sim = FlipSimulation(spec, FlipSettings(max_substeps=1, max_time_step=0.0, seed=3), v, t, xp=np)
    sim.vel[:, 0] = np.float32(4.0)  # 0.4 m from the wall, 1 m a substep
    sim.step(1 / 4)
    assert sim.last["substeps"] == 1  # step() sees one substep ...
    assert sim.air_band_pieces >= 1  # ... taken as 2 or more pieces (the count of extra ones)
    assert abs(sim.t - 0.25) < 1e-9
    assert np.isfinite(sim.vel).all() and (sim.pos >= 0).all() and (sim.pos <= 1.2).all()
    monkeypatch.setenv(air_band.WALL_SWITCH, "0")
    again = FlipSimulation(spec, FlipSettings(max_substeps=1, max_time_step=0.0, seed=3), v, t, xp=np)
    again.vel[:, 0] = np.float32(4.0)
    again.step(1 / 4)
    assert getattr(again, "air_band_pieces", 0) == 0  # off: one piece


def test_a_resting_tank_takes_no_pieces(monkeypatch):
    monkeypatch.setenv(air_band.SWITCH, "1")
    monkeypatch.setenv(air_band.WALL_SWITCH, "1")
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.8, 0.4))
    sim = FlipSimulation(GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8)),
                         FlipSettings(max_substeps=1, max_time_step=0.0, seed=3), v, t, xp=np)
    for _ in range(3):
        sim.step(1 / 8)
    assert getattr(sim, "air_band_pieces", 0) == 0


def test_the_wall_split_is_refused_without_the_band(monkeypatch):
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4))
    spec = GridSpec((0.0, 0.0, 0.0), H, (8, 8, 8))
    monkeypatch.setenv(air_band.WALL_SWITCH, "1")
    with pytest.raises(InputError, match=air_band.SWITCH):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np)
    monkeypatch.setenv(air_band.SWITCH, "1")
    FlipSimulation(spec, FlipSettings(), v, t, xp=np)
    monkeypatch.setenv(air_band.WALL_SWITCH, "2")
    with pytest.raises(InputError, match=air_band.WALL_SWITCH):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np)
