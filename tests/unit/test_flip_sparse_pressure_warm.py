"""The sparse pressure solve's warm start (issue 24, ``sparse_pressure`` module notes) on the
CPU reference: fewer PCG iterations on still and starting liquid, the same answer within
the tolerance as a cold solve, the sealed regions' gauge kept, the carried pressure
dropped where the liquid leaves, and carried through a checkpoint."""

import numpy as np
import pytest

from tests.meshes import box
from tests.pressure_solves import iterations_of
from voxfx.kernels.flip import sparse_pressure, sparse_transfer
from voxfx.kernels.flip.grid import FLUID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def tank(warm, liquid=(1.0, 0.5, 0.5), n=16, seed=3):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n // 2, n))
    v, t = box((0.0, 0.0, 0.0), liquid)
    return FlipSimulation(spec, FlipSettings(warm_start_pressure=warm, seed=seed), v, t, xp=np, sparse=True)


def test_the_warm_start_is_the_default_and_the_environment_overrides_it(monkeypatch):
    assert FlipSettings().warm_start_pressure
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    assert not sparse_pressure.warm_start_on(True)
    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "1")
    assert sparse_pressure.warm_start_on(False)
    monkeypatch.delenv("VOXFX_PRESSURE_WARM")
    assert sparse_pressure.warm_start_on(True) and not sparse_pressure.warm_start_on(False)


def test_a_resting_tank_needs_few_iterations_from_the_last_pressure(monkeypatch):
    monkeypatch.delenv("VOXFX_PRESSURE_WARM", raising=False)
    cold, warm = tank(False), tank(True)
    its_cold, its_warm = iterations_of(cold, 3), iterations_of(warm, 3)
    assert len(its_cold) == len(its_warm) >= 4
    assert its_warm[0] == its_cold[0] > 2  # the first substep has nothing to start from
    assert sum(its_warm[1:]) <= 0.25 * sum(its_cold[1:])
    # the same still water: the same tolerance, the same motion
    assert np.abs(warm.particles_host()["position"] - cold.particles_host()["position"]).max() < 1e-4


def test_a_dam_break_takes_fewer_iterations_with_the_warm_start(monkeypatch):
    """The bench's substeps (1/120 s) as the column starts to fall: 60 → 49 iterations
    measured; later, when the splashing liquid's divergence is new every substep, the
    last pressure is seldom a better start than 0 (module notes) and the count stays."""
    monkeypatch.delenv("VOXFX_PRESSURE_WARM", raising=False)
    cold, warm = tank(False, (0.4, 0.5, 0.6)), tank(True, (0.4, 0.5, 0.6))
    its_cold, its_warm = iterations_of(cold, 10, fps=120), iterations_of(warm, 10, fps=120)
    assert its_warm[0] == its_cold[0] and sum(its_warm) < 0.9 * sum(its_cold)
    assert np.linalg.norm(warm.centre_of_mass() - cold.centre_of_mass()) < 1e-3


def _still_grid(fill, seed=1):
    """A closed sparse grid with particles over *fill* of its box (z up to fill[2]), random
    face velocities and gravity added, as a substep leaves it before the solve."""
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (10, 8, 9))
    up = np.asarray(spec.upper) * np.asarray(fill)
    pos = (rng.uniform(0, 1, (6000, 3)) * up).astype(np.float32)
    g = SparseFlipGrid(spec, np, closed=True)
    g.update(pos, 3)
    sparse_transfer.classify(g, pos)
    for name in g.FACES:
        g[name] = rng.normal(0, 0.2, g.size).astype(np.float32)
    sparse_transfer.enforce_boundaries(g, add=[np.float32(0), np.float32(0), np.float32(-9.81 / 60)])
    return g


@pytest.mark.parametrize("fill", [(1.0, 1.0, 0.6), (1.0, 1.0, 1.0)], ids=["open surface", "sealed"])
def test_a_warm_solve_gives_the_cold_answer_within_the_tolerance(fill):
    g = _still_grid(fill)
    dt = 1 / 60
    sparse_pressure.solve_pressure(g, dt, warm_start=True)  # carries a pressure
    faces = [g[n].copy() for n in g.FACES]
    rng = np.random.default_rng(2)
    for name, f in zip(g.FACES, faces):  # the next substep: a little different
        g[name] = f + rng.normal(0, 0.01, f.shape).astype(np.float32)
    carried = g[sparse_pressure.CARRIED].copy()
    p_cold, s_cold = sparse_pressure.solve_pressure(g, dt, warm_start=False)
    assert sparse_pressure.CARRIED not in g.channels  # a cold solve carries nothing
    g.add(sparse_pressure.CARRIED, np.float32, np.nan)
    g[sparse_pressure.CARRIED] = carried
    p_warm, s_warm = sparse_pressure.solve_pressure(g, dt, warm_start=True)
    assert s_cold["converged"] and s_warm["converged"]
    assert s_warm["residual"] <= 1e-4 and 0 < s_warm["iterations"] < s_cold["iterations"]
    fluid = g["cell"] == FLUID
    scale = np.abs(p_cold[fluid]).max()
    assert scale > 0 and np.abs(p_warm - p_cold)[fluid].max() <= 1e-3 * scale
    _, enclosed, labels = sparse_pressure.solver_cells(g)
    assert (enclosed is not None) == (fill[2] == 1.0)
    if enclosed is not None:  # the sealed region's pressure keeps its zero mean
        assert abs(float(p_warm[enclosed].astype(np.float64).mean())) <= 1e-5 * scale


def test_cells_that_leave_the_liquid_drop_their_pressure():
    g = _still_grid((1.0, 1.0, 0.6))
    p, _ = sparse_pressure.solve_pressure(g, 1 / 60, warm_start=True)
    carried = g[sparse_pressure.CARRIED]
    fluid = g["cell"] == FLUID
    assert np.array_equal(np.isfinite(carried), fluid) and np.array_equal(carried[fluid], p[fluid])
    cell = g["cell"].copy()
    gone = np.flatnonzero(fluid)[::3]
    cell[gone] = 0  # AIR now
    g["cell"] = cell
    sparse_pressure.solve_pressure(g, 1 / 60, warm_start=True)
    assert np.isnan(g[sparse_pressure.CARRIED][gone]).all()


def test_a_start_worse_than_zero_and_a_zero_right_hand_side_start_cold():
    g = _still_grid((1.0, 1.0, 0.6))
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    rng = np.random.default_rng(4)
    b = np.append(rng.normal(0, 1, level.m), 0).astype(np.float32)
    bb = float(np.dot(b.astype(np.float64), b))
    x, r, rr = sparse_pressure._start(level, b, bb, np.append(rng.normal(0, 100, level.m), 0).astype(np.float32))
    assert not x.any() and np.array_equal(r, b) and rr == bb
    zero = np.zeros_like(b)
    x, r, rr = sparse_pressure._start(level, zero, 0.0, np.append(rng.normal(0, 1, level.m), 0).astype(np.float32))
    assert not x.any() and not r.any() and rr == 0.0


def test_a_resumed_run_restores_the_carried_pressure(monkeypatch):
    monkeypatch.delenv("VOXFX_PRESSURE_WARM", raising=False)
    a = tank(True, (0.4, 0.5, 0.6))
    iterations_of(a, 3, fps=120)
    state = {k: np.array(v) for k, v in a.checkpoint().items()}  # as written to and read from disk
    fluid = int((a.grid["cell"] == FLUID).sum())
    assert state["pressure_cells"].shape == (fluid, 3) and state["pressure_values"].shape == (fluid,)
    assert np.abs(state["pressure_values"]).max() > 0
    b = tank(True, (0.4, 0.5, 0.6))
    b.restore(state)
    cold = tank(True, (0.4, 0.5, 0.6))
    cold.restore({k: v for k, v in state.items() if not k.startswith("pressure_")})  # absent: a cold start
    its_a, its_b, its_cold = (iterations_of(sim, 1, fps=120) for sim in (a, b, cold))
    assert its_b == its_a and its_cold[0] > its_a[0]
    assert np.abs(a.particles_host()["position"] - b.particles_host()["position"]).max() <= 1e-5
    ca, cb = a.grid[sparse_pressure.CARRIED], b.grid[sparse_pressure.CARRIED]
    keys = lambda g: np.stack(g.lattice(), axis=1)[np.isfinite(g[sparse_pressure.CARRIED])]  # noqa: E731
    assert np.array_equal(np.sort(keys(a.grid), axis=0), np.sort(keys(b.grid), axis=0))
    assert np.nansum(ca) == pytest.approx(float(np.nansum(cb)), rel=1e-5)


def test_a_checkpoint_taken_right_after_a_restore_keeps_the_carried_pressure():
    a = tank(True, (0.4, 0.5, 0.6))
    iterations_of(a, 1, fps=120)
    state = a.checkpoint()
    b = tank(True, (0.4, 0.5, 0.6))
    b.restore(state)
    again = b.checkpoint()  # no substep since: the pressure is still waiting for the grid
    for key in ("pressure_cells", "pressure_values"):
        assert np.array_equal(again[key], state[key])


def test_a_damaged_carried_pressure_in_a_checkpoint_is_refused():
    a = tank(True, (0.4, 0.5, 0.6))
    iterations_of(a, 1)
    state = a.checkpoint()
    b = tank(True, (0.4, 0.5, 0.6))
    with pytest.raises(ValueError):
        b.restore({**state, "pressure_values": state["pressure_values"][:-1]})
    with pytest.raises(ValueError):
        b.restore({k: v for k, v in state.items() if k != "pressure_cells"})
