"""Cancel inside the long kernels (issue 19, issue 23): a progress callback answering
False at its k-th call stops voxelize, a pressure solve, a FLIP step, a snow step and the
snow terrain with ``Cancelled`` there, and no work is done after that answer.

Work is counted by wrapping the functions each kernel's chunks call (a batch's bit
writes, a CG iteration's operator application, a stage of a step): the counters read at
the moment of the False answer must equal those after the ``Cancelled``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.meshes import box, merge, uv_sphere
from voxfx.kernels.errors import Cancelled
from voxfx.kernels.grid import GridSpec


class Counters(dict):
    def wrap(self, monkeypatch, owner, name):
        real = getattr(owner, name)

        def counted(*args, **kwargs):
            self[name] = self.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


class CancelAt:
    """A progress callback answering False at its k-th call (and noting the work done then)."""

    def __init__(self, k: int, counters: Counters | None = None):
        self.k, self.counters = k, counters
        self.calls, self.messages, self.fractions = 0, [], []
        self.work_at_cancel = None

    def __call__(self, fraction: float, message: str) -> bool:
        self.calls += 1
        self.messages.append(message)
        self.fractions.append(fraction)
        if self.calls >= self.k:
            self.work_at_cancel = dict(self.counters or {})
            return False
        return True


def full_run_calls(run) -> CancelAt:
    """Run uncancelled, counting progress calls (k must leave work undone to mean anything)."""
    cb = CancelAt(10 ** 9)
    run(cb)
    return cb


def assert_stops_at(run, k, counters):
    cb = CancelAt(k, counters)
    with pytest.raises(Cancelled):
        run(cb)
    assert cb.calls == k, "the kernel went on reporting after it was told to stop"
    assert dict(counters) == cb.work_at_cancel, "work was done after the False answer"
    return cb


# ------------------------------------------------------------------------------ voxelize

@pytest.fixture
def small_batches(monkeypatch):
    from voxfx.kernels.voxelize import surface

    monkeypatch.setattr(surface, "CHUNK_ITEMS", 256)  # many batches from a small mesh


@pytest.mark.parametrize("mode,vote", [("surface", False), ("solid", False), ("solid", True),
                                       ("solid+surface", False)])
@pytest.mark.parametrize("k", [1, 2, 5, 11])
def test_voxelize_stops_within_a_batch(monkeypatch, small_batches, mode, vote, k):
    from voxfx.kernels.voxelize import solid, surface, voxelize

    v, t = uv_sphere(1.0, 64, 32)
    spec = GridSpec.around(v.min(0), v.max(0), 2.0 / 48)
    counters = Counters()
    counters.wrap(monkeypatch, surface, "_set_bits")  # one call per surface batch
    counters.wrap(monkeypatch, solid, "_toggle_bits")  # one call per solid batch

    def run(cb):
        return voxelize(v, t, spec, mode, vote=vote, xp=np, progress=cb)

    total = full_run_calls(run).calls
    assert total > k + 3  # the cancel falls mid-kernel
    counters.clear()
    cb = assert_stops_at(run, k, counters)
    assert sum(counters.values()) <= k  # at most one batch per report before the answer
    assert all(0.0 <= f <= 1.0 for f in cb.fractions) and cb.fractions == sorted(cb.fractions)


def test_coverage_stops_within_a_slab(monkeypatch, small_batches):
    from voxfx.kernels.voxelize import solid
    from voxfx.kernels.voxelize.coverage import coverage

    v, t = uv_sphere(1.0, 32, 16)
    spec = GridSpec.around(v.min(0), v.max(0), 2.0 / 16)
    counters = Counters()
    counters.wrap(monkeypatch, solid, "_toggle_bits")

    def run(cb):
        return coverage(v, t, spec, xp=np, progress=cb, slab_bytes=1 << 16)

    assert full_run_calls(run).calls > 12
    for k in (2, 7):
        counters.clear()
        assert_stops_at(run, k, counters)


# ------------------------------------------------------------------------------ FLIP

@pytest.mark.parametrize("k", [1, 2, 4])
def test_pressure_solve_stops_between_blocks_of_iterations(monkeypatch, k):
    from voxfx.kernels.flip import pressure as P
    from voxfx.kernels.flip.grid import FLUID, DenseGrid

    n = 16
    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n, n)), np)
    g.cell[: n // 2, :, : n // 3] = FLUID
    g.w[...] = np.float32(-9.81 / 60)
    counters = Counters()
    counters.wrap(monkeypatch, P._Level, "apply")  # one per CG iteration (no preconditioner)

    def run(cb):
        return P.solve_pressure(g, 1 / 60, tolerance=1e-7, preconditioner="none", check_every=5,
                                max_iterations=1000, progress=cb)

    _, stats = run(None)
    assert stats["iterations"] > 5 * (k + 2)
    counters.clear()
    cb = assert_stops_at(run, k, counters)
    assert counters["apply"] == 5 * k  # k blocks of check_every iterations, then nothing
    assert cb.messages[-1] == f"pressure: iteration {5 * k}"


def dam_break_sim():
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation

    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (20, 8, 14))
    v, t = box((0.0, 0.0, 0.0), (8 * h, 8 * h, 10 * h))
    return FlipSimulation(spec, FlipSettings(pressure_tolerance=1e-6), v, t, xp=np)


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_flip_step_stops_between_stages_and_solver_blocks(monkeypatch, k):
    from voxfx.kernels.flip import pressure, transfer

    sim = dam_break_sim()
    sim.step(1 / 30)  # moving water: several substeps and real solves
    solve = pressure.solve_pressure  # Jacobi-preconditioned: blocks of 5 iterations to stop between
    monkeypatch.setattr(pressure, "solve_pressure",
                        lambda *a, **kw: solve(*a, **kw, preconditioner="jacobi", check_every=5))
    counters = Counters()
    for owner, name in ((transfer, "particles_to_grid"), (transfer, "grid_to_particles_and_advect"),
                        (pressure, "_dot"), (pressure, "project")):
        counters.wrap(monkeypatch, owner, name)
    state = sim.checkpoint()

    def run(cb):
        return sim.step(1 / 30, progress=cb)

    full = full_run_calls(run)
    assert full.calls > k + 2 and any(m.startswith("pressure: iteration") for m in full.messages)
    sim.restore(state)
    counters.clear()
    frames = sim.frames
    assert_stops_at(run, k, counters)
    assert sim.frames == frames  # no frame counted


# ------------------------------------------------------------------------------ snow

def snow_scene(drift=True):
    from voxfx.kernels.snow.domain import SnowDomain, SnowSettings
    from voxfx.kernels.snow.sim import SnowSimulation

    plane = (np.array([[0, 0, 0], [16, 0, 0], [16, 16, 0], [0, 16, 0]], np.float32), np.array([[0, 1, 2], [0, 2, 3]]))
    v, t = merge(plane, box((6, 6, 0), (10, 10, 3)))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(flake_count=2000, wind_speed=6.0, gust_strength=0.0, snowfall_rate=3600.0,
                            drift=drift, seed=1, obstacle_update_every=5, pressure_tolerance=1e-6)
    return SnowSimulation(domain, settings, v, t, xp=np), (domain, settings, v, t)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_snow_step_stops_between_stages_and_wind_sweeps(monkeypatch, k):
    from voxfx.kernels.snow import ground, sim as sim_module
    from voxfx.kernels.snow.wind import WindField

    sim, _ = snow_scene()
    counters = Counters()
    counters.wrap(monkeypatch, WindField, "_sweeps")  # one per block of SOR sweeps
    counters.wrap(monkeypatch, sim_module, "step_flakes")
    counters.wrap(monkeypatch, ground, "redistribute")
    counters.wrap(monkeypatch, sim_module.SnowSimulation, "drift_snow")
    state = sim.checkpoint()

    def run(cb):
        return sim.step(0.1, progress=cb)

    full = full_run_calls(run)
    assert full.calls > k + 1 and any(m.startswith("wind pressure") for m in full.messages)
    sim.restore(state)
    steps = sim.steps
    counters.clear()
    assert_stops_at(run, k, counters)
    assert sim.steps == steps


@pytest.mark.parametrize("k", [1, 3, 8])
def test_snow_terrain_stops_within_a_batch(monkeypatch, k):
    from voxfx.kernels.snow import ground

    _, (domain, settings, v, t) = snow_scene()
    monkeypatch.setattr(ground, "CHUNK_ITEMS", 64)
    counters = Counters()
    counters.wrap(monkeypatch, ground, "_edge_function")  # three per batch

    def run(cb):
        return ground.terrain_from_triangles(v, t, domain, xp=np, progress=cb)

    assert full_run_calls(run).calls > k + 2
    counters.clear()
    assert_stops_at(run, k, counters)
    assert counters["_edge_function"] == 3 * k


@pytest.mark.parametrize("k", [1, 3])
def test_liquid_surface_stops_within_a_slab(monkeypatch, k):
    from voxfx.kernels.flip import surface

    sim = dam_break_sim()
    monkeypatch.setattr(surface, "SLAB_VOXELS", 1)  # one layer of the grown grid per slab
    counters = Counters()
    counters.wrap(monkeypatch, surface, "_phi_from_sums")  # one per slab

    def run(cb):
        return sim.level_set(progress=cb)

    assert full_run_calls(run).calls > k + 2
    counters.clear()
    assert_stops_at(run, k, counters)
    assert counters["_phi_from_sums"] == k


@pytest.mark.parametrize("k", [1, 4])
def test_liquid_set_up_stops_within_its_voxelization(monkeypatch, small_batches, k):
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation
    from voxfx.kernels.voxelize import solid, surface

    v, t = uv_sphere(0.3, 32, 16, center=(0.5, 0.5, 0.5))
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 32, (32, 32, 32))
    counters = Counters()
    counters.wrap(monkeypatch, surface, "_set_bits")
    counters.wrap(monkeypatch, solid, "_toggle_bits")

    def run(cb):
        return FlipSimulation(spec, FlipSettings(), v, t, xp=np, progress=cb)

    assert full_run_calls(run).calls > k + 3
    counters.clear()
    assert_stops_at(run, k, counters)
