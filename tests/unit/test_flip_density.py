"""The density correction (``kernels/flip/density.py``, issue 24) on the CPU reference: an
over-full cell becomes a source of volume (outward faces, ∇·u = s after the projection) on
the dense and the sparse solver; off (α = 0) the bits are today's; on, a small dam break
keeps more of its volume in cells; a bad stiffness is refused."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import density, pressure, sparse_pressure
from voxfx.kernels.flip.grid import TIMINGS, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

H = 0.1
CROWDED = (4, 3, 2)  # (i, j, k) of the over-full cell, inside the still water


def crowded_tank(alpha, sparse, extra=2):
    """Still water 8 × 6 × 4 cells deep in a 8 × 6 × 8 box without gravity, the cell CROWDED
    holding (1 + *extra*) times its particles (copies of its own, moved within the cell)."""
    spec = GridSpec((0.0, 0.0, 0.0), H, (8, 6, 8))
    v, t = box((0.0, 0.0, 0.0), (0.8, 0.6, 0.4))
    settings = FlipSettings(density_correction=alpha, gravity=(0.0, 0.0, 0.0), sparse=sparse)
    sim = FlipSimulation(spec, settings, v, t, xp=np)
    cell = np.floor(sim.pos / np.float32(H)).astype(np.int64)
    mine = (cell == CROWDED).all(axis=1)
    lo = np.asarray(CROWDED, np.float32) * np.float32(H)
    copies = [lo + (sim.pos[mine] - lo) * np.float32(0.5 + 0.2 * e) for e in range(extra)]
    sim.pos = np.concatenate([sim.pos, *copies]).astype(np.float32)
    sim.vel = np.zeros_like(sim.pos)
    return sim, int(mine.sum()) * (1 + extra)


def crowded_faces(sim):
    """(the six faces −x, +x, −y, +y, −z, +z of CROWDED, its divergence) after a substep."""
    i, j, k = CROWDED
    if not sim.settings.sparse:
        u, v, w = sim.grid.faces()
        faces = (u[k, j, i], u[k, j, i + 1], v[k, j, i], v[k, j + 1, i], w[k, j, i], w[k + 1, j, i])
        return np.asarray(faces), float(pressure.divergence(sim.grid)[k, j, i])
    g = sim.grid
    at = int(g.locate(*(np.asarray([c]) for c in CROWDED))[0])
    faces = []
    for comp, name in enumerate(g.FACES):
        faces += [g[name][at], g.neighbour(g[name], 2 * comp + 1)[at]]
    return np.asarray(faces), float(sparse_pressure.divergence(g)[at])


@pytest.mark.parametrize("sparse", [False, True])
def test_an_over_full_cell_gets_outward_faces_and_the_asked_divergence(sparse):
    alpha, dt = 0.4, 1 / 60
    on, n = crowded_tank(alpha, sparse)
    on.substep(dt)
    faces, div = crowded_faces(on)
    assert (faces * np.asarray([-1, 1] * 3) > 0).all(), faces  # outward: −x face negative, +x positive, …
    want = alpha * (n / 8 - 1 - density.DEADBAND) / dt  # s = α·(n/n₀ − 1 − τ)/Δt, 3 n₀ here
    assert want > 0
    assert div == pytest.approx(want, rel=0.02)
    off, _ = crowded_tank(0.0, sparse)
    off.substep(dt)
    faces_off, div_off = crowded_faces(off)
    assert np.abs(faces_off).max() < 1e-3 * np.abs(faces).max() and abs(div_off) < 1e-3 * want


SLAB, COLUMN = (64, 4, 40), (20, 4, 38)  # cells: a thin dam break of h = 1/64 m


def run(alpha, frames, sparse=False):
    """The slab dam break (Fast timing: the wall and floor piles of issue 24 form by frame 9)
    stepped *frames* frames of 1/24 s with the correction's stiffness *alpha*."""
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 64, SLAB)
    v, t = box((0.0, 0.0, 0.0), tuple(c / 64 for c in COLUMN))
    settings = FlipSettings(**TIMINGS["fast"]) if alpha is None else FlipSettings(**TIMINGS["fast"],
                                                                                  density_correction=alpha)
    sim = FlipSimulation(spec, settings, v, t, xp=np, sparse=sparse)
    for _ in range(frames):
        sim.step(1 / 24)
    return sim


@pytest.mark.parametrize("sparse", [False, True])
def test_the_default_is_on_at_0_3_and_off_changes_the_bits(sparse):
    default = run(None, 9, sparse)
    on = run(0.3, 9, sparse)
    off = run(0.0, 9, sparse)
    assert FlipSettings().density_correction == 0.3
    assert np.array_equal(default.pos, on.pos) and np.array_equal(default.vel, on.vel)
    assert not np.array_equal(default.pos, off.pos)  # the comparison sees a change


@pytest.mark.parametrize("sparse", [False, True])
def test_a_zero_source_changes_no_bit_of_the_pressure(sparse):
    sim = run(None, 2, sparse)
    g, dt = sim.grid, 1 / 60
    if sparse:
        zero = np.zeros(g.size, np.float32)
        p0, _ = sparse_pressure.solve_pressure(g, dt)
        p1, _ = sparse_pressure.solve_pressure(g, dt, source=zero)
    else:
        zero = np.zeros(g.cell.shape, np.float32)
        p0, _ = pressure.solve_pressure(g, dt)
        p1, _ = pressure.solve_pressure(g, dt, source=zero)
    assert np.abs(p0).max() > 0 and np.array_equal(p0, p1)


def occupancy(sim):
    """(occupied cells, the fullest cell's count)."""
    cell = np.floor(sim.pos / np.float32(sim.spec.voxel_size)).astype(np.int64)
    counts = np.unique(cell, axis=0, return_counts=True)[1]
    return len(counts), int(counts.max())


def test_a_dam_break_keeps_more_occupied_cells_with_the_correction():
    """Measured (CPU): after 15 frames 2973 occupied cells and the fullest 123 particles off,
    3132 (the column's 3040 at rest: +3%) and 59 with α = 0.3."""
    rest = COLUMN[0] * COLUMN[1] * COLUMN[2]
    (off, off_most), (on, on_most) = occupancy(run(0.0, 15)), occupancy(run(0.3, 15))
    print(f"\nafter 15 frames: occupied cells off {off / rest - 1:+.1%}, on {on / rest - 1:+.1%}; "
          f"the fullest cell off {off_most}, on {on_most}")
    assert off < 0.99 * rest  # the piles form without it
    assert on > 1.03 * off and on < 1.10 * rest  # more cells, not a swollen liquid
    assert on_most < 0.7 * off_most


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_a_bad_stiffness_is_refused(bad):
    with pytest.raises(InputError):
        run(bad, 0)
