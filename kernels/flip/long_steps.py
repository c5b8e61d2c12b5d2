"""Opt-in prototypes for substeps that carry particles many cells (issue 24, accuracy; NumPy
only, environment switches, off by default): the Fast timing at fine grids, where the CFL
asks up to ~20 cells a substep, lost half the dam break's meshed volume on an H100 even
with the density correction (``density.py``).

``VOXFX_ADVECT_CELLS`` = C > 0: **sub-cycled advection**. The particles still move through
the substep's grid velocity (the projected u_{n+1}, or with the time-centred advection the
velocity linear in time from u_n to u_{n+1}), but each takes k_p = ⌈|u|Δt/(C·h)⌉ RK2
(midpoint) steps of Δt/k_p, pushed out of solids and walls after each, instead of one step
of Δt. Why: the grid velocity is divergence-free with no flow through the walls, so its
exact flow map keeps volume and never reaches a wall; one RK2 step of ~20 cells does
neither — a particle heading at a wall lands on it (clamped PUSH_EPSILON inside, all on one
plane, where the wall's zero normal velocity then holds it for good) and one turning with
the flow lands where the velocity of its start pointed. The standard remedy of the
particle-advection literature (Bridson, *Fluid Simulation for Computer Graphics*, 2nd ed.,
§3 and §7: advect particles with several small steps through the same grid velocity when
the time step exceeds the CFL bound); here the steps are per particle, so only the fast
ones pay.

``VOXFX_EXTRAPOLATE_REACH`` = 1: **the air band as deep as the substep's reach**. The
projected velocity is extrapolated from the FLUID faces into the air ``transfer.extrapolate``'s
2 rings deep; beyond them the faces hold the P2G's band (2 rings more) and then only
gravity's Δt·g. A particle at the front that moves ~20 cells a substep samples (RK2's
midpoint, ~10 cells ahead) air that stands still: it stays behind, and those behind it land
on it — the front piles up. With the switch the rings are ⌈|u|_max Δt/h⌉ + 1 (the fastest
FLUID face's speed), at least 2 (Mantaflow's FLIP scenes extrapolate likewise by the
fastest velocity in cells).

``VOXFX_DENSITY_POSITIONS`` = β in (0, 1]: a **position-only density correction** after
the advection (the particle shifting of Ando et al. 2012 and the position-level density
projection of Kugelstadt et al. 2019, reduced to one explicit Poisson solve): with the
counts n_i at the advected positions, solve A q = h²·β·max(0, n_i/n₀ − 1 − τ) on the
FLUID cells of the advected particles (``pressure.solve_pressure`` with Δt = 1 and faces
at rest), project faces at rest with it (Δt = 1: a displacement field d on the faces whose
divergence per cell is the asked volume fraction, zero through walls and solids), and
move each particle by d sampled at it, then out of solids and walls. The velocities are
not touched: no kinetic energy is put in that FLIP's change would keep.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..errors import InputError

_F = np.float32


def _env_number(name: str, low: float, high: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return 0.0
    value = float(text)
    if not (math.isfinite(value) and low <= value <= high):
        raise InputError(f"{name} must be a number in [{low}, {high}] (0 = off), not {text}")
    return value


def advect_cells() -> float:
    """C of ``VOXFX_ADVECT_CELLS`` (0: off, one RK2 step a substep as ever)."""
    return _env_number("VOXFX_ADVECT_CELLS", 0.0, 1e6)


def extrapolate_reach() -> bool:
    """Whether ``VOXFX_EXTRAPOLATE_REACH`` is on (module notes)."""
    return bool(_env_number("VOXFX_EXTRAPOLATE_REACH", 0.0, 1.0))


def reach_layers(faces, fluid, dt: float, h: float, least: int = 2) -> int:
    """Rings of extrapolation that cover a substep's travel: ⌈|u|_max·Δt/h⌉ + 1 from the
    largest component of each axis over the *fluid* faces (masks), at least *least*."""
    top = [float(np.abs(f[m != 0]).max()) if (m != 0).any() else 0.0 for f, m in zip(faces, fluid)]
    return max(int(least), int(math.ceil(math.sqrt(sum(t * t for t in top)) * dt / h)) + 1)


def position_stiffness() -> float:
    """β of ``VOXFX_DENSITY_POSITIONS`` (0: off)."""
    return _env_number("VOXFX_DENSITY_POSITIONS", 0.0, 1.0)


def refuse_on_gpu(xp, sparse: bool = False) -> None:
    """The prototypes are the dense NumPy solver's only: a CuPy or a sparse simulation with
    one switched on refuses."""
    switched = bool(advect_cells()) | bool(position_stiffness()) | extrapolate_reach()  # each read, checked
    if switched and (xp is not np or sparse):
        raise NotImplementedError("VOXFX_ADVECT_CELLS, VOXFX_EXTRAPOLATE_REACH and VOXFX_DENSITY_POSITIONS are "
                                  "prototypes of the dense NumPy solver (kernels/flip/long_steps.py): unset them "
                                  "for the GPU and the sparse solver")


def advect_sub_cycled(sample, push_out, x0, faces, before, dt: float, inv_h, origin, cells: float):
    """Positions (3 float32 arrays, world) after the substep's advection in k_p RK2 steps a
    particle (module notes). *sample(faces, gx, gy, gz)*: the face sampler; *push_out(x,
    fallback)*: out of solids and walls; *faces* u_{n+1}; *before* u_n (time-centred) or
    None; *cells* C. k_p from the larger of |u_n(x)| and |u_{n+1}(x)| at the start."""
    dt32 = _F(dt)

    def velocity(x, idx, tau):  # u at the sub-step's time fraction tau (per particle)
        g = [(x[a] - origin[a]) * inv_h for a in range(3)]
        end = sample(faces, *g)
        if before is None:
            return end
        start = sample(before, *g)
        return [(_F(1) - tau) * start[a] + tau * end[a] for a in range(3)]

    g0 = [(x0[a] - origin[a]) * inv_h for a in range(3)]
    speeds = [sample(f, *g0) for f in ((faces,) if before is None else (faces, before))]
    fastest = np.max([np.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) for v in speeds], axis=0)
    steps = np.maximum(1, np.ceil(fastest * dt32 * inv_h / _F(cells))).astype(np.int64)
    x = [a.copy() for a in x0]
    for j in range(int(steps.max()) if steps.size else 0):
        idx = np.flatnonzero(steps > j)
        k = steps[idx].astype(np.float32)
        delta = dt32 / k
        xs = [x[a][idx] for a in range(3)]
        ta, tm = _F(j) / k, (_F(j) + _F(0.5)) / k
        v1 = velocity(xs, idx, ta)
        xm = [xs[a] + _F(0.5) * delta * v1[a] for a in range(3)]
        v2 = velocity(xm, idx, tm)
        x1 = [xs[a] + delta * v2[a] for a in range(3)]
        for a, p in enumerate(push_out(x1, xs)):
            x[a][idx] = p
    return x


def correct_positions(sim, beta: float) -> None:
    """The position-only density correction (module notes) on a dense NumPy simulation,
    after its advection: *sim*'s particles moved, its velocities and its grid's faces as
    they were (the faces are the frame's output velocity)."""
    from . import density, pressure, transfer
    from .grid import FLUID
    from ..grid.sample import sample_faces

    g, s = sim.grid, sim.settings
    kept = tuple(f.copy() for f in g.faces())
    transfer.classify(g, sim.pos)  # the advected particles' FLUID cells
    counts = density.dense_counts(g, sim.pos)
    excess = density.source(counts, g.cell == FLUID, s.particles_per_cell, beta, 1.0)  # β·max(0, n/n₀ − 1 − τ)
    for f in g.faces():
        f[...] = 0
    transfer.enforce_boundaries(g)
    q, _ = pressure.solve_pressure(g, 1.0, tolerance=s.pressure_tolerance, max_iterations=s.pressure_max_iterations,
                                   source=excess)
    pressure.project(g, q, 1.0)  # d on the faces: ∇·d per cell = the asked fraction, 0 through walls
    x0 = [sim.pos[:, a].copy() for a in range(3)]
    d = sample_faces(g.faces(), *g.cell_coords(sim.pos))
    moved = transfer.push_out(g, [x0[a] + d[a] for a in range(3)], x0)
    for a in range(3):
        sim.pos[:, a] = moved[a]
    for f, k in zip(g.faces(), kept):
        f[...] = k
