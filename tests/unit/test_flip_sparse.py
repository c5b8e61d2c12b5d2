"""The sparse FLIP solver (issue 12) on the CPU reference: its brick grid against the
lattice, its stages against the dense solver's, and whole runs against physics."""

import numpy as np
import pytest

from tests.meshes import box
from tests.unit.dam_break_runs import ONE_SECOND, sparse_after_one_second
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import (pressure, sparse_multigrid, sparse_multigrid_bricks, sparse_pressure, sparse_transfer,
                                transfer)
from voxfx.kernels.flip.grid import FLUID, DenseGrid, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_sim import SparseFlipSimulation
from voxfx.kernels.grid import GridSpec, mac
from voxfx.kernels.grid.sample import sample_faces
from voxfx.kernels.grid.sparse import keys_of_boxes
from voxfx.kernels.grid.sparse_mac import DIRECTIONS, SparseMacGrid


def dense_and_sparse(spec, pos, margin=3):
    """A dense grid and a closed sparse grid whose bricks cover *pos* (± *margin* cells)."""
    dense = DenseGrid(spec, np)
    sparse = SparseFlipGrid(spec, np, closed=True)
    sparse.update(pos, margin)
    return dense, sparse


def sparse_faces_on_box(sparse, comp, shape):
    """The sparse face channel over the dense face lattice of *comp* (missing cells NaN)."""
    sz, sy, sx = mac.face_shapes(*shape)[comp]
    k, j, i = (a.ravel().astype(np.int64) for a in np.indices((sz, sy, sx)))
    at = sparse.locate(i, j, k)
    f = sparse[sparse.FACES[comp]]
    return np.where(at >= 0, f[np.maximum(at, 0)], np.nan).reshape(sz, sy, sx), (at >= 0).reshape(sz, sy, sx)


def random_particles(spec, n, rng, lo=0.1, hi=0.6):
    up = np.asarray(spec.upper)
    return (rng.uniform(lo, hi, (n, 3)) * up).astype(np.float32), rng.normal(0, 1, (n, 3)).astype(np.float32)


# --------------------------------------------------------------------------- the brick grid


def test_neighbour_index_steps_one_cell_on_the_lattice():
    rng = np.random.default_rng(4)
    cells = rng.integers(-20, 20, (12, 3))
    g = SparseMacGrid((0.0, 0.0, 0.0), 1.0, np)
    g.retopologize(keys_of_boxes(cells, cells + 3))
    i, j, k = g.lattice()
    active = g.active()
    assert active.sum() == g.topology.count * 512
    for d, (dx, dy, dz) in enumerate(DIRECTIONS):
        want = g.locate(i + dx, j + dy, k + dz)
        got = g.nbr[d].astype(np.int64)
        assert np.array_equal(got[active], want[active])
        assert (got[~active] == -1).all()


def test_incremental_topology_keeps_the_data_of_kept_bricks():
    g = SparseMacGrid((0.0, 0.0, 0.0), 1.0, np)
    g.add("a", np.float32, -1.0)
    g.retopologize(keys_of_boxes(np.array([[0, 0, 0]]), np.array([[23, 7, 7]])))  # 3 bricks
    i, j, k = g.lattice()
    g["a"] = np.where(g.active(), (i + 100 * j + 10000 * k).astype(np.float32), np.float32(-1))
    before = {int(key): int(s) for key, s in zip(g.topology.keys, g.topology.slots)}
    g.retopologize(keys_of_boxes(np.array([[8, 0, 0]]), np.array([[31, 7, 7]])))  # drop brick 0, add brick 3
    after = {int(key): int(s) for key, s in zip(g.topology.keys, g.topology.slots)}
    kept = set(before) & set(after)
    assert len(kept) == 2 and all(before[key] == after[key] for key in kept)
    i, j, k = g.lattice()
    a = g["a"]
    for x in (8, 15, 16, 23):  # kept bricks keep their values
        at = g.locate(np.array([x]), np.array([3]), np.array([2]))[0]
        assert a[at] == x + 300 + 20000
    at = g.locate(np.array([24]), np.array([0]), np.array([0]))[0]  # the new brick starts at the background
    assert at >= 0 and a[at] == -1.0
    assert g.capacity == 3  # the freed slot was reused


def test_channels_the_caller_rewrites_are_not_filled_but_are_resized():
    """``retopologize(keys, rewritten)``: a rewritten channel keeps whatever its slots held
    (the caller writes it whole next), the others take the background in fresh slots; when
    the pool grows, a rewritten channel is the new size, all background."""
    g = SparseMacGrid((0.0, 0.0, 0.0), 1.0, np)
    g.add("kept", np.float32, -1.0)
    g.add("marks", np.uint8, 0)
    g.retopologize(keys_of_boxes(np.array([[0, 0, 0]]), np.array([[15, 7, 7]])))  # 2 bricks
    g["kept"] = np.full(g.size, 5.0, np.float32)
    g["marks"] = np.full(g.size, 7, np.uint8)
    g.retopologize(keys_of_boxes(np.array([[8, 0, 0]]), np.array([[23, 7, 7]])), rewritten=("marks",))
    assert g.capacity == 2  # brick 0 freed, brick 2 in its slot
    fresh = g.locate(np.array([16]), np.array([0]), np.array([0]))[0]
    assert g["kept"][fresh] == -1.0 and g["marks"][fresh] == 7  # not filled: the caller's
    g.retopologize(keys_of_boxes(np.array([[0, 0, 0]]), np.array([[31, 7, 7]])), rewritten=("marks",))
    assert g.capacity == 4 and g["marks"].shape[0] == g.size and not g["marks"].any()
    assert g["kept"].shape[0] == g.size and g["kept"][fresh] == -1.0


def test_sampler_on_bricks_equals_the_dense_sampler_in_a_closed_box():
    rng = np.random.default_rng(7)
    spec = GridSpec((0.1, -0.2, 0.0), 0.1, (13, 9, 11))
    pos, _ = random_particles(spec, 500, rng, 0.0, 1.0)
    dense, sparse = dense_and_sparse(spec, pos, margin=2)
    for comp, f in enumerate(dense.faces()):
        f[...] = rng.normal(0, 1, f.shape).astype(np.float32)
        sz, sy, sx = f.shape
        k, j, i = (a.ravel().astype(np.int64) for a in np.indices(f.shape))
        at = sparse.locate(i, j, k)
        chan = sparse[sparse.FACES[comp]]
        chan[at[at >= 0]] = f.ravel()[at >= 0]
    pts = pos + rng.normal(0, 0.05, pos.shape).astype(np.float32)  # some just outside the box
    g = dense.cell_coords(pts)
    want, want_grad = sample_faces(dense.faces(), *g, gradient=True)
    got, got_grad = sparse.sample_faces(sparse.faces(), *sparse.cell_coords(pts), boxes=sparse.boxes, gradient=True)
    for a in range(3):
        assert np.array_equal(got[a], want[a])
        for b in range(3):
            assert np.array_equal(got_grad[a][b], want_grad[a][b])


@pytest.mark.parametrize("apic", [False, True])
def test_gather_p2g_on_bricks_matches_the_dense_transfer(apic):
    rng = np.random.default_rng(11)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (12, 10, 9))
    pos, vel = random_particles(spec, 3000, rng, 0.0, 1.0)
    c = rng.normal(0, 1, (len(pos), 3, 3)).astype(np.float32) if apic else None
    dense, sparse = dense_and_sparse(spec, pos)
    dv = transfer.particles_to_grid(dense, pos, vel, c)
    sv = sparse_transfer.particles_to_grid(sparse, pos, vel, c)
    for comp in range(3):
        got, have = sparse_faces_on_box(sparse, comp, spec.shape)
        want = dense.faces()[comp]
        assert np.abs(got[have] - want[have]).max() <= 1e-6 * max(1.0, np.abs(want).max())
        assert (want[~have] == 0).all()  # every touched face is on an active brick
        valid = sv[comp][np.maximum(sparse.locate(*(a.ravel().astype(np.int64) for a in np.indices(
            want.shape)[::-1])), 0)].reshape(want.shape)
        assert np.array_equal(valid[have], dv[comp][have])


def test_p2g_sums_in_a_fixed_order_whatever_the_particle_order():
    """The gather's sums depend only on the pairs' order within a face (particle order):
    reversing the particles changes nothing beyond float64 rounding, then float32."""
    rng = np.random.default_rng(2)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    pos, vel = random_particles(spec, 2000, rng, 0.2, 0.8)
    _, a = dense_and_sparse(spec, pos)
    _, b = dense_and_sparse(spec, pos)
    sparse_transfer.particles_to_grid(a, pos, vel)
    sparse_transfer.particles_to_grid(b, pos[::-1].copy(), vel[::-1].copy())
    for name in a.FACES:
        assert np.abs(a[name] - b[name]).max() <= 1e-6


@pytest.mark.parametrize("preconditioner", ["mg", "jacobi", "none"])
def test_sparse_pressure_matches_the_dense_solve_and_leaves_no_divergence(preconditioner, monkeypatch):
    monkeypatch.setattr(sparse_multigrid, "MG_OMEGA", 1.0)  # the dense V-cycle's plain Gauss-Seidel (i24m)
    rng = np.random.default_rng(5)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (12, 9, 10))
    pos, vel = random_particles(spec, 4000, rng, 0.0, 0.55)
    dense, sparse = dense_and_sparse(spec, pos)
    dense.solid[...] = 0
    for g, tr in ((dense, transfer), (sparse, sparse_transfer)):
        tr.particles_to_grid(g, pos, vel)
        tr.classify(g, pos)
        tr.extrapolate(g)
        tr.enforce_boundaries(g)
    dt = 0.01
    pd, sd = pressure.solve_pressure(dense, dt, tolerance=1e-6)
    ps, ss = sparse_pressure.solve_pressure(sparse, dt, tolerance=1e-6, preconditioner=preconditioner,
                                            max_iterations=2000)
    assert sd["converged"] and ss["converged"] and ss["residual"] <= 1e-6
    if preconditioner == "mg":  # the same multigrid on bricks: the dense solver's iterations
        assert abs(ss["iterations"] - sd["iterations"]) <= 1
    fluid = dense.cell == FLUID
    k, j, i = (a.astype(np.int64) for a in np.nonzero(fluid))
    at = sparse.locate(i, j, k)
    assert (at >= 0).all() and (sparse["cell"][at] == FLUID).all()
    assert int((sparse["cell"] == FLUID).sum()) == len(at)
    assert np.abs(ps[at] - pd[fluid]).max() <= 1e-3 * np.abs(pd).max()
    sparse_pressure.project(sparse, ps, dt)
    div = sparse_pressure.divergence(sparse)
    assert np.abs(div).max() * spec.voxel_size <= 1e-4 * max(1.0, float(np.abs(vel).max()))


@pytest.mark.parametrize("coarse", [0, 1, 2])
def test_the_brick_multigrid_is_a_symmetric_positive_definite_preconditioner(monkeypatch, coarse):
    """CG needs M symmetric positive definite: a·M b = b·M a and a·M a > 0 (to float32
    rounding) on a grid with walls, an obstacle, air and two separate puddles — with the
    coarsest level by its sweeps (*coarse* 0), by its dense inverse (1), and with the last level
    dropped and the one above solved by its inverse (2; ``sparse_multigrid.MG_DENSE``)."""
    from voxfx.kernels.flip import sparse_multigrid
    from voxfx.kernels.flip.sparse_multigrid import VCycle

    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", coarse)

    rng = np.random.default_rng(8)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (20, 12, 18))
    pos = np.concatenate([random_particles(spec, 6000, rng, 0.0, 0.4)[0],
                          random_particles(spec, 3000, rng, 0.7, 0.95)[0]])
    g = SparseFlipGrid(spec, np, closed=True)
    g.update(pos, 3, obstacle=np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)]))
    sparse_transfer.classify(g, pos)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = VCycle(g, kind, level)
    assert len(M.levels) >= (2 if coarse == 2 else 3) and level.m > 300
    for _ in range(3):
        a, b = (np.append(rng.normal(0, 1, level.m), 0).astype(np.float32) for _ in range(2))
        ma, mb = M(a), M(b)
        assert ma[-1] == 0 and mb[-1] == 0  # the sentinel stays 0
        ab, ba = float(np.dot(a.astype(np.float64), mb)), float(np.dot(b.astype(np.float64), ma))
        assert abs(ab - ba) <= 1e-4 * np.sqrt(float(np.dot(a, ma)) * float(np.dot(b, mb)))
        assert float(np.dot(a.astype(np.float64), ma)) > 0


def test_sparse_pressure_pins_a_sealed_region():
    """A tank filled to the lid: no AIR anywhere, the solve still converges (the region's
    lowest cell pinned, b made compatible)."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    sim = FlipSimulation(spec, FlipSettings(), *box((0.0, 0.0, 0.0), (0.8, 0.8, 0.8)), xp=np, sparse=True)
    stats = sim.substep(0.01)
    assert stats["converged"]
    assert np.abs(sim.particles_host()["velocity"]).max() < 0.05


# --------------------------------------------------------------------------- whole runs


def test_sparse_is_built_by_flip_simulation():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True)
    assert isinstance(sim, SparseFlipSimulation) and isinstance(sim, FlipSimulation)
    assert type(FlipSimulation(spec, FlipSettings(), v, t, xp=np)) is FlipSimulation
    with pytest.raises(InputError, match="boundary"):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True, boundary="leaky")
    with pytest.raises(InputError, match="kill distance"):
        FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True, boundary="open", kill_distance=-1)


def test_sparse_and_dense_dam_breaks_agree():
    """Issue 12: same seed, same scene: particle count, centre of mass within 1 cm and
    kinetic energy within 5% after ½ s (the time a CI machine affords in a few seconds)."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.5, 0.5))
    settings = FlipSettings(seed=9)
    dense = FlipSimulation(spec, settings, v, t, xp=np)
    sparse = FlipSimulation(spec, settings, v, t, xp=np, sparse=True)
    for _ in range(30):
        dense.step(1 / 60)
        sparse.step(1 / 60)
    assert len(sparse.pos) == len(dense.pos)
    moved = np.linalg.norm(dense.centre_of_mass() - np.array([0.2, 0.25, 0.25]))
    assert moved > 0.1  # it broke
    assert np.linalg.norm(sparse.centre_of_mass() - dense.centre_of_mass()) < 0.01  # metres
    assert sparse.kinetic_energy() == pytest.approx(dense.kinetic_energy(), rel=0.05)


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("apic", [False, True])
def test_closed_sparse_follows_dense_particle_for_particle(apic, monkeypatch):
    """In a closed box the brick solver does the dense solver's arithmetic (same weights,
    sampler, multigrid) up to the order of float sums: the same particles end within
    float32 rounding of each other after several frames, with the same CG iterations."""
    monkeypatch.setenv("VOXFX_SPARSE_PARTICLE_SORT", "off")  # index by index: the dense solver never sorts
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")  # the dense multigrid's red-black sweeps
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.5, 0.5))
    dense = FlipSimulation(spec, FlipSettings(seed=2, apic=apic), v, t, xp=np)
    sparse = FlipSimulation(spec, FlipSettings(seed=2, apic=apic), v, t, xp=np, sparse=True)
    for _ in range(5):
        a, b = dense.step(1 / 60), sparse.step(1 / 60)
        assert abs(a["iterations"] - b["iterations"]) <= a["substeps"]
    assert np.abs(dense.pos - sparse.pos).max() <= 1e-5  # metres
    assert np.abs(dense.vel - sparse.vel).max() <= 1e-4  # m/s, of ~1 m/s


def test_still_water_in_an_l_shaped_tank_stays_still():
    """A block fills one quarter of the tank's floor plan up past the water line: the water
    is an L in plan, its surface level; it must stay at rest."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (12, 12, 10))
    water = box((0.0, 0.0, 0.0), (1.2, 1.2, 0.5))
    block = box((0.6, 0.6, 0.0), (1.2, 1.2, 0.8))
    sim = FlipSimulation(spec, FlipSettings(), *water, *block, xp=np, sparse=True)
    n0 = len(sim.pos)
    assert n0 == 8 * (144 - 36) * 5
    for _ in range(40):
        sim.step(1 / 60)
    assert len(sim.pos) == n0
    speed = np.linalg.norm(sim.particles_host()["velocity"], axis=1)
    assert speed.max() < 0.05


def test_a_blob_in_an_open_domain_falls_out_of_its_box_and_is_deleted():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.3, 0.3, 0.3), (0.6, 0.6, 0.6))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True, boundary="open", kill_distance=0.5)
    n0 = len(sim.pos)
    lowest = []
    for _ in range(40):
        sim.step(1 / 60)
        if len(sim.pos):
            lowest.append(float(sim.particles_host()["position"][:, 2].min()))
    assert min(lowest) < -0.3  # it left the box (no floor) ...
    assert min(lowest) >= -0.5 - 0.2  # ... and nothing is kept far beyond the kill distance
    assert sim.killed == n0 and len(sim.pos) == 0  # all of it fell past the kill distance
    sim.step(1 / 60)  # an empty open domain steps without error


def test_topology_follows_a_travelling_blob_and_keeps_the_slots_of_kept_bricks():
    """No gravity, a blob thrown along x through an open domain for 10 box lengths: every
    substep's bricks cover every particle, bricks kept from one substep to the next keep
    their slots, and the pool stays the size of the blob, not of its path."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.2, 0.2, 0.2), (0.5, 0.5, 0.5))
    settings = FlipSettings(gravity=(0.0, 0.0, 0.0))
    sim = FlipSimulation(spec, settings, v, t, xp=np, sparse=True, boundary="open", kill_distance=100.0,
                         initial_velocity=(12.0, 0.0, 0.0))
    n0 = len(sim.pos)
    previous = None
    capacity = 0
    while sim.centre_of_mass()[0] < 0.35 + 10 * 0.8:
        sim.substep(1 / 120)
        g = sim.grid
        now = dict(zip(g.topology.keys.tolist(), g.topology.slots.tolist()))
        if previous is not None:
            kept = set(previous) & set(now)
            assert kept and all(previous[key] == now[key] for key in kept)
        previous = now
        capacity = max(capacity, g.capacity)
        assert (sparse_transfer.particle_cells(g, sim.pos) >= 0).all()
    assert len(sim.pos) == n0
    assert np.abs(sim.particles_host()["velocity"][:, 0] - 12.0).max() < 0.5  # it flew as one piece
    assert capacity <= 64  # a blob of 3³ cells and its margin, not the 8 m it travelled


def test_sparse_emit_drain_and_moving_obstacles_match_dense():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 6, 12))
    v, t = box((0.0, 0.0, 0.0), (0.6, 0.3, 0.2))
    sims = [FlipSimulation(spec, FlipSettings(seed=3), v, t, xp=np, sparse=s) for s in (False, True)]
    paddle = np.array([(i, j, k) for i in (7,) for j in range(6) for k in range(6)])
    cell_velocity = np.zeros((12, 6, 12, 3), np.float32)
    cell_velocity[..., 0] = -0.5
    nozzle = np.array([(i, j, 10) for i in (2, 3) for j in (2, 3)])
    drain = np.array([(i, j, 0) for i in (0, 1) for j in range(6)])
    for sim in sims:
        sim.set_obstacles(paddle, cell_velocity)
        assert sim.emit(nozzle, (0.0, 0.0, -1.0)) == 32
        assert sim.drain(drain) == 2 * 6 * 8
        assert sim.emit(nozzle, (0.0, 0.0, -1.0)) == 0  # occupied now
    dense, sparse = sims
    assert np.array_equal(dense.particles_host()["position"], sparse.particles_host()["position"])
    for _ in range(10):
        for sim in sims:
            sim.step(1 / 60)
    assert len(sparse.pos) == len(dense.pos)
    assert np.linalg.norm(sparse.centre_of_mass() - dense.centre_of_mass()) < 0.01
    assert sparse.kinetic_energy() == pytest.approx(dense.kinetic_energy(), rel=0.05)
    assert np.abs(sparse.cell_velocity() - dense.cell_velocity()).max() < 0.05


def test_sparse_apic_runs_and_agrees_with_dense(monkeypatch):
    monkeypatch.setenv("VOXFX_SPARSE_PARTICLE_SORT", "off")  # C index by index: the dense solver never sorts
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 6, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.3, 0.4))
    sims = [FlipSimulation(spec, FlipSettings(apic=True, seed=1), v, t, xp=np, sparse=s) for s in (False, True)]
    for _ in range(10):
        for sim in sims:
            sim.step(1 / 60)
    dense, sparse = sims
    assert np.linalg.norm(sparse.centre_of_mass() - dense.centre_of_mass()) < 0.01
    assert np.abs(sparse.c - dense.c).max() < 0.5


def test_sparse_resume_from_checkpoint_matches_an_uninterrupted_run():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4))
    a = FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True)
    for _ in range(3):
        a.step(1 / 60)
    b = FlipSimulation(spec, FlipSettings(), v, t, xp=np, sparse=True)
    b.restore(a.checkpoint())
    for _ in range(3):
        a.step(1 / 60)
        b.step(1 / 60)
    assert np.abs(a.particles_host()["position"] - b.particles_host()["position"]).max() <= 1e-5


@pytest.mark.slow
def test_sparse_and_dense_dam_breaks_agree_after_one_second():
    """The issue's wording: after 1 s of the same dam break (the sparse run is the one the
    narrow band's test compares with, run once a process)."""
    spec, water = ONE_SECOND
    dense = FlipSimulation(spec, FlipSettings(seed=4), *water, xp=np)
    for _ in range(60):
        dense.step(1 / 60)
    centre, particles, kinetic_energy = sparse_after_one_second(seed=4)
    assert particles == len(dense.pos)
    assert np.linalg.norm(centre - dense.centre_of_mass()) < 0.01
    assert kinetic_energy == pytest.approx(dense.kinetic_energy(), rel=0.05)


def test_sparse_stops_on_nan_and_cancels_between_stages():
    from voxfx.kernels.flip.sim import SimulationError
    from voxfx.kernels.progress import Cancelled

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    sim = FlipSimulation(spec, FlipSettings(), *box((0.0, 0.0, 0.0), (0.4, 0.4, 0.4)), xp=np, sparse=True)
    heard = []
    with pytest.raises(Cancelled):
        sim.step(1 / 60, progress=lambda f, m: heard.append(m) or "pressure" not in m)
    assert heard[:2] == ["topology", "particles to grid"]
    sim.vel[5, 1] = np.nan  # the failure: a particle's velocity became NaN
    with pytest.raises(SimulationError, match="NaN"):
        sim.step(1 / 60)


def test_gpu_gather_choice_comes_from_the_argument_or_the_environment(monkeypatch):
    """``VOXFX_SPARSE_GATHER`` picks the P2G kernel (the scatter by default, APIC too) and
    ``VOXFX_SPARSE_G2P`` G2P's particle order (cell by default); a wrong name is
    refused with the choices, not silently replaced."""
    from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu

    monkeypatch.delenv("VOXFX_SPARSE_GATHER", raising=False)
    assert sparse_gpu.gather_mode() == "scatter"
    assert sparse_gpu.gather_mode(apic=True) == "scatter"
    monkeypatch.setenv("VOXFX_SPARSE_GATHER", " Cell ")
    assert sparse_gpu.gather_mode() == "cell"
    assert sparse_gpu.gather_mode("brick") == "brick"
    monkeypatch.setenv("VOXFX_SPARSE_GATHER", "warp")
    with pytest.raises(ValueError, match="brick, cell"):
        sparse_gpu.gather_mode()
    monkeypatch.delenv("VOXFX_SPARSE_G2P", raising=False)
    assert sparse_g2p_gpu.g2p_order() == "cell"
    monkeypatch.setenv("VOXFX_SPARSE_G2P", "input")
    assert sparse_g2p_gpu.g2p_order() == "input"
    with pytest.raises(ValueError, match="cell, input"):
        sparse_g2p_gpu.g2p_order("random")


def test_boundaries_with_gravity_are_gravity_then_boundaries():
    """``enforce_boundaries(grid, add)`` (the sim's fused gravity) is the faces plus the
    force, then the boundary faces set: solid and missing faces take no gravity."""
    rng = np.random.default_rng(4)
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 10, 9))
    pos, vel = random_particles(spec, 3000, rng)
    _, a = dense_and_sparse(spec, pos)
    _, b = dense_and_sparse(spec, pos)
    for g in (a, b):
        sparse_transfer.particles_to_grid(g, pos, vel)
    add = [np.float32(v * 0.01) for v in (0.3, -9.81, 0.0)]
    for name, f in zip(a.FACES, add):
        a[name] = a[name] + f
    sparse_transfer.enforce_boundaries(a)
    sparse_transfer.enforce_boundaries(b, add=add)
    for comp, name in enumerate(a.FACES):
        assert np.array_equal(a[name], b[name])
        touch = sparse_transfer.solid_touch(b, comp)
        assert touch.any() and np.all(b[name][touch] == b["solid_" + name][touch])


def test_the_p2g_tail_is_extrapolation_the_old_faces_then_boundaries():
    """``extrapolate_and_boundaries`` (the sim's P2G tail) is two rings of extrapolation, a copy
    of the faces (returned: FLIP's old velocity), then the boundaries with gravity; on NumPy
    ``particles_to_grid(ring=True)`` is plain P2G (the GPU runs the first ring with its division:
    tests/gpu/test_flip_sparse_p2g_tail_gpu.py)."""
    rng = np.random.default_rng(5)
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 10, 9))
    pos, vel = random_particles(spec, 3000, rng)
    _, a = dense_and_sparse(spec, pos)
    _, b = dense_and_sparse(spec, pos)
    sparse_transfer.particles_to_grid(a, pos, vel)
    sparse_transfer.particles_to_grid(b, pos, vel, ring=True)
    add = [np.float32(v * 0.01) for v in (0.3, -9.81, 0.0)]
    sparse_transfer.extrapolate(a)
    want = tuple(f.copy() for f in a.faces())
    sparse_transfer.enforce_boundaries(a, add=add)
    got = sparse_transfer.extrapolate_and_boundaries(b, add=add)
    for name, w, g in zip(a.FACES, want, got):
        assert np.array_equal(g, w)
        assert np.array_equal(b[name], a[name])
        assert not np.array_equal(g, b[name])  # gravity added after the copy
    for m, n in zip(a.valid, b.valid):
        assert np.array_equal(m, n)
