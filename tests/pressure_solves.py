"""The sparse pressure solves of a simulation's frames, watched: each solve's pressure (on
the host) and stats, for the tests that compare solver paths and warm starts."""

from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure


def solves(sim, frames, fps=24):
    """(p on the host, stats) of every pressure solve of *frames* frames of *sim*."""
    out = []
    solve = sparse_pressure.solve_pressure

    def spy(*args, **kwargs):
        p, stats = solve(*args, **kwargs)
        out.append((backend.to_numpy(p), stats))
        return p, stats

    sparse_pressure.solve_pressure = spy
    try:
        for _ in range(frames):
            sim.step(1 / fps)
    finally:
        sparse_pressure.solve_pressure = solve
    return out


def iterations_of(sim, frames, fps=24):
    """PCG iterations of every substep of *frames* frames of *sim*."""
    return [stats["iterations"] for _, stats in solves(sim, frames, fps)]


def assert_dam_break_ways_agree(monkeypatch, xp, set_way, ways, frames=3):
    """A small dam break (warm start, table reuse and the ahead set-up on: the defaults),
    *frames* frames, with every coarse level launched apart and with the default one-block tail
    (``sparse_pressure_setup.TAIL_BOUND`` 0 and 16384), for each of *ways* (``set_way(way)``
    switches it): every solve's pressure and stats the same bit for bit, and the last way's
    solves take at least 3 iterations somewhere (the V-cycles ran)."""
    import numpy as np

    from tests.meshes import box
    from voxfx.kernels.flip import sparse_pressure_gpu, sparse_pressure_setup, sparse_pressure_workspace
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation
    from voxfx.kernels.grid import GridSpec

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    monkeypatch.setattr(sparse_pressure_workspace, "MODE", "workspace")
    for tail_bound in (0, 16384):
        monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", tail_bound)
        runs = {}
        for way in ways:
            set_way(way)
            sparse_pressure_gpu.release_gpu_solvers()
            runs[way] = solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=xp, sparse=True), frames)
        sparse_pressure_gpu.release_gpu_solvers()
        first, last = runs[ways[0]], runs[ways[-1]]
        assert all(len(runs[way]) == len(first) for way in ways) and len(first) > 0
        for way in ways[1:]:
            for (p_a, s_a), (p_b, s_b) in zip(first, runs[way]):
                assert s_a == s_b and np.array_equal(p_a.view(np.uint32), p_b.view(np.uint32))
        assert max(s["iterations"] for _, s in last) >= 3
