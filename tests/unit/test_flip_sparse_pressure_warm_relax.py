"""The warm start relaxed where the liquid changed (``VOXFX_PRESSURE_WARM_RELAX``,
``sparse_pressure_warm.relax_guess``; issue 24, h20b) on the CPU reference: the switch's values,
fewer PCG iterations on a running dam break, only the changed unknowns moved, and a resumed bake
that goes on bit for bit (the relaxation reads the carried pressure and the cell types alone)."""

import numpy as np
import pytest

from tests.meshes import box
from tests.pressure_solves import iterations_of
from tests.unit.test_flip_sparse_mg_keep_resume import resumed_and_uninterrupted
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_warm
from voxfx.kernels.flip.grid import FLUID, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

RELAX = sparse_pressure_warm.RELAX


def dam_break(n=32, xp=np):
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n // 2, n))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.5, 0.6))
    return FlipSimulation(spec, FlipSettings(seed=3), v, t, xp=xp, sparse=True)


def test_the_switch_is_off_by_default_and_reads_its_sweeps_and_width(monkeypatch):
    monkeypatch.delenv(RELAX, raising=False)
    assert sparse_pressure_warm.relax_setting() is None
    for value, want in (("0", None), ("1", (2, 1)), ("3,2", (3, 2)), ("1,0", (1, 0))):
        monkeypatch.setenv(RELAX, value)
        assert sparse_pressure_warm.relax_setting() == want
    for bad in ("2", "0,1", "2,-1", "a,b", "1,2,3"):
        monkeypatch.setenv(RELAX, bad)
        with pytest.raises(ValueError):
            sparse_pressure_warm.relax_setting()


def test_a_running_dam_break_takes_fewer_iterations_relaxed(monkeypatch):
    """14 frames at 72 fps (one substep each), 32 × 16 × 32: 74 → 66 iterations over frames
    3–13 measured (every relaxed solve 6 or fewer, today's 6–7); the same liquid within the
    tolerance's reach. Measured with the red-black level-0 sweeps (h20b), pinned to them: with the
    brick smoother (the default since h20d) this scene's frames 3–13 take 66 → 63."""
    monkeypatch.setenv("VOXFX_SPARSE_MG_SMOOTHER", "rb")  # read when each VCycle is built
    monkeypatch.delenv(RELAX, raising=False)
    off = dam_break()
    its_off = iterations_of(off, 14, fps=72)
    monkeypatch.setenv(RELAX, "2,1")
    on = dam_break()
    its_on = iterations_of(on, 14, fps=72)
    assert its_on[0] == its_off[0]  # nothing carried yet: the same cold solve
    assert sum(its_on[3:]) <= sum(its_off[3:]) - 4, (its_off, its_on)
    assert np.linalg.norm(on.centre_of_mass() - off.centre_of_mass()) < 2e-3


def test_only_the_changed_unknowns_and_their_neighbours_move(monkeypatch):
    """On the dam break's solves: x₀ relaxed differs from today's only on unknowns that are new,
    next to a cell that left the liquid, or next to either (width 1); and somewhere it does."""
    monkeypatch.setenv(RELAX, "2,1")
    sim = dam_break(24)
    seen = []
    relax = sparse_pressure.relax_guess

    def spy(grid, kind, b, x0):
        out = relax(grid, kind, b, x0)
        if x0 is not None:
            known = np.isfinite(grid[sparse_pressure.CARRIED])
            fluid = kind == FLUID
            nb = grid.nbr
            near = lambda m: m | np.any([(nb[d] >= 0) & m[np.maximum(nb[d], 0)] for d in range(6)], axis=0)  # noqa: E731
            changed = fluid & (~known | near(known & ~fluid))
            allowed = near(changed) & fluid
            moved = out != x0
            seen.append((int(moved.sum()), bool((moved & ~allowed).any())))
        return out

    monkeypatch.setattr(sparse_pressure, "relax_guess", spy)
    for _ in range(4):
        sim.step(1 / 72)
    assert seen and not any(outside for _, outside in seen)
    assert sum(count for count, _ in seen) > 0


def test_a_resumed_bake_relaxed_goes_on_bit_for_bit(monkeypatch):
    monkeypatch.setenv(RELAX, "2,1")
    moved = []
    relax = sparse_pressure.relax_guess

    def spy(grid, kind, b, x0):
        out = relax(grid, kind, b, x0)
        moved.append(x0 is not None and not np.array_equal(out, x0))
        return out

    monkeypatch.setattr(sparse_pressure, "relax_guess", spy)
    want, got, _, _ = resumed_and_uninterrupted(np, monkeypatch)
    assert sum(moved) >= 4  # the relaxation ran and moved x₀ after the restore too: the test can fail
    assert np.array_equal(got, want)
