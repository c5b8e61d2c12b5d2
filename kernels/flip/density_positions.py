"""A position-only density correction (issue 24, accuracy; an opt-in prototype of the dense
NumPy solver, the environment switch ``VOXFX_DENSITY_POSITIONS``, off by default): the Fast
timing at fine grids, where the CFL asks up to ~20 cells a substep, lost half the dam break's
meshed volume on an H100 even with the velocity-level density correction (``density.py``).

``VOXFX_DENSITY_POSITIONS`` = β in (0, 1]: a **position-only density correction** after
the advection (the particle shifting of Ando et al. 2012 and the position-level density
projection of Kugelstadt et al. 2019, reduced to one explicit Poisson solve): with the
counts n_i at the advected positions, solve A q = h²·β·max(0, n_i/n₀ − 1 − τ) on the
FLUID cells of the advected particles (``pressure.solve_pressure`` with Δt = 1 and faces
at rest), project faces at rest with it (Δt = 1: a displacement field d on the faces whose
divergence per cell is the asked volume fraction, zero through walls and solids), and
move each particle by d sampled at it, then out of solids and walls. The velocities are
not touched: no kinetic energy is put in that FLIP's change would keep.

Measured (CPU, 2 cores; ``bench/flip_density.py --res 64 --particles 260e3 --max-substeps 1
--max-time-step 0``: one substep a 24 fps frame, 16–26 cells a substep), meshed volume at frame
24: α 0.3 alone −45.5%, with β 0.3 −31.4% (α 0: −71.3% → −43.6%); with τ 0 for both −4.9% at
frame 12 but +10.3% at frame 4 (swollen). Fast as it is at 64³ (3 substeps, 2–7 cells): α 0.3
−7.2%, with β 0.3 −5.1%. It costs a second pressure solve a substep. Also tried there and not
kept: sub-cycled advection (each particle in RK2 steps of at most C cells through the substep's
velocity; C 4: −45.8%, C 2 at α 0 piled more: −76.6%), and the air band extrapolated as deep as
the substep's reach (−46.8%). Not built for the sparse solver or the GPU (refused).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..settings import env_value

SWITCH = "VOXFX_DENSITY_POSITIONS"


def stiffness() -> float:
    """β of ``VOXFX_DENSITY_POSITIONS`` (0: off), checked: a number in [0, 1]."""
    text = env_value(SWITCH).strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InputError(f"{SWITCH} must be a number in [0, 1] (0 = off), not {text}")
    return value


def refuse(xp, sparse: bool = False) -> None:
    """The prototype is the dense NumPy solver's only: a CuPy or a sparse simulation with it
    switched on refuses."""
    if stiffness() and (xp is not np or sparse):
        raise NotImplementedError(f"{SWITCH} is a prototype of the dense NumPy solver "
                                  "(kernels/flip/density_positions.py): unset it for the GPU and the sparse solver")


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
