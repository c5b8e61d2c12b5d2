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
