"""A divergence-free air band (issue 24, accuracy; an opt-in prototype of the dense NumPy
solver, the environment switch ``VOXFX_AIR_BAND_PROJECTION``, off by default; on bricks, the
sparse solver's NumPy path: ``sparse_air_band.py``).

The mechanism it is for. With long substeps (Fast at fine grids: 16–26 cells a substep) a
particle spends most of its substep outside the FLUID cells the pressure solve saw: in the
AIR band, whose velocity is the projected field extrapolated outward (``transfer.extrapolate``:
each ring the mean of its valid neighbours). That extrapolation is not divergence-free: next to
the floor it carries the liquid's downward w over AIR cells whose floor face is 0, so
∂w/∂z < 0 there, and the advected particles converge onto the floor. Measured (CPU, the
64³ dam break of ``bench/flip_density.py`` with one substep a 24 fps frame, α 0): the
advection map's volume change per substep (mean det ∂x'/∂x over the FLUID cells' points,
finite differences of the very RK2 the solver runs) was −0.2% at frame 1, −3.9% at frame 5,
−12.9% at frame 8, −19% at frame 9 — the same without the push-out (not the clamp) and with
the exact path (RK4 in ≤ ¼-cell steps through the frozen field: −3.9%, −13.4% at frame 9, so
not the time integration either), and with the band extrapolated 40 rings deep (−12.8%).
Along that exact path, ln det = ∫ ∇·u dt of the sampled field: 92% of it (−0.25 of −0.27 at
frame 9) was gathered in AIR cells, 8% in FLUID ones (the trilinear interpolant's own
divergence). With three substeps a frame the particles barely leave the FLUID cells.

The remedy: after the extrapolation, make the band itself divergence-free — a second
Poisson solve on the band's cells (the AIR cells within *reach* cells of the liquid, reach
= the fastest face speed·Δt/h + 2), the FLUID cells and solids held as fixed faces (the
projected liquid's faces are not touched), the AIR beyond the band p = 0 (or, when the band
fills the box, a sealed region: its mean removed, ``pressure.py``). The faces between band
cells and to the AIR beyond get −∇q: each band cell's divergence is then the solver's
residual, and the wall faces of the band are the walls' velocity again. The band is first
extrapolated as deep as the reach (``transfer.extrapolate``'s rings), so that the solve
corrects a field defined everywhere a particle may go. Measured there (the same frames): the
exact path through the projected band changed the volume by +0.03%, −0.02%, +0.01% (frames
1, 5, 9) — the band was the whole of it — but one RK2 step through it still did (−10% at
frame 9, 7% of the points' maps folded: a 16–26-cell step through a field that turns within a
few cells), so the particles go through it in RK2 sub-steps of at most ``SUBSTEP_CELLS`` (4)
cells (−0.2% at frame 9; 8 cells −2.2%). Either alone does not help: the sub-steps without
the projected band follow the compressive band exactly (i24d2's sub-cycled advection, −45.8%).

Kept out of the liquid: the FLIP/PIC update reads the grid's faces as ever, and the faces are
put back after the advection (the frame's output and the next substep's u_n are today's). A
first version that left the band's faces in the grid blew up once the front met the far wall
(frame 10: band faces of 120 m/s where the air between front and wall was squeezed out of a
gap one or two cells wide; the surface particles took them through G2P, ½v² 20 J/kg at frame
24); the reach is therefore taken from the liquid's faces only.

Measured (CPU, 2 cores, ``bench/flip_density.py --res 64 --particles 260e3 --frames 24 --every
4 --timing fast --max-substeps 1 --max-time-step 0``), meshed volume at frames 8 / 12 / 24, α
0: −19.4% / −40.0% / −71.3% without, −0.2% / −20.0% / −46.5% with; α 0.3: −18.7% / −35.5% /
−45.5% without, +0.3% / −19.8% / −17.9% with — but there the mechanical energy rose past the
start's (½v² + gz 3.88 → 6.84 J/kg at frame 24, 94 cells a substep: energy put in, where the α
0 run only loses it, 3.88 → 1.58), so that figure is no win to keep. Up to frame 8 (the front
on the floor) the loss is gone; from frame 10, when the front meets the far wall, the loss
comes back at about the baseline's pace (fullest cell 11,108 at frame 24 with α 0): the wall
collision in one long substep is a second mechanism. Cost: a second Poisson solve over the
band (7–25 CG iterations) and 4–7 sub-steps of the advection: 3.7 s a frame against 0.38 s
(NumPy). Not built for the dense GPU solver (refused); the sparse solver has it, NumPy
(``sparse_air_band.py``, i24d5) and CuPy (``sparse_air_band_gpu.py``, i24b).

The wall collision (i24d4, the same CPU run, α 0, the prototype on). The exact path's ln det
(RK2 in ≤ ¼-cell steps through the band-projected, time-blended field, the FLUID cells' centres)
was −0.46, −0.41, −0.60, −0.56 a substep at frames 10–13, of which 83–94% gathered within 4
cells of the far walls (x = 1, y = 1: AIR there −0.28 / −0.11 / −0.27 / −0.17, FLUID there
−0.13 / −0.24 / −0.28 / −0.35, elsewhere −0.05 to −0.07); no point's path left the box (the
band's wall faces are 0, so the push-out clamp is not it). The band solve converged (19–33
iterations) but the band's cells near the far walls kept a discrete divergence of mean −0.1 to
−0.25 ×1/Δt, up to 60/Δt: the liquid's faces (fixed) carry more volume into the air left
between the front and the wall than it can pass on — pockets sealed by the liquid and the walls,
whose mean the solve removes, and one- or two-cell gaps whose air leaves at 42–100 m/s (the
liquid's fastest face 5–6 m/s; the advection then takes 29–67 sub-steps, not 4–7). No band can
be divergence-free there: the liquid itself must stop at the wall, which only a pressure solve
with the liquid at the wall does. (Finite-difference Jacobians of the sub-cycled map were
useless there: 2–4% folded, det ±100 through those jets.)

So the wall split (``VOXFX_AIR_BAND_WALL_PIECES=1``, with the band on; NumPy only): before
its P2G, a substep whose particles would meet a wall within it is taken as k equal substeps,
each its own P2G, solve, band and advection (``wall_pieces``: each particle asks for ceil(travel
toward a wall / (its distance to it + 1 cell)) pieces, the 99.9th percentile of those, at most
16; ``split_substep``; ``step()`` is unchanged and counts one substep). Measured (the run above,
24 frames), meshed volume at frames 8 / 12 / 24, ½v² + gz at 24 (start 3.88 J/kg), fullest cell
at 24, pieces a frame, CPU seconds a frame:

  band alone, α 0       −0.2% / −20.0% / −46.5%, 1.58, 11,108, 1, 3.7 s
  band + split, α 0     −1.5% / −9.6% / −0.2%, 2.05, 893, 2–3, 5.8 s
  band + split, α 0.3   −1.0% / −6.1% / +27.6%, 2.23, 461, 2–4, 8.7 s (+7.8% at 20: swollen)
  Fast as it is, α 0    −2.6% / −7.9% / −13.7%, 2.81, 283, 3 (2–7 cells each), 3.1 s (no band)

(CPU seconds on 2 cores shared with other runs: compare loosely.) With the split the energy no
longer rises (α 0.3: 3.88 → 2.23 J/kg against 6.84 with the band alone), but α 0.3 then swells
the liquid: the correction's dead band was sized for a liquid that loses volume; with the
split α 0 keeps it.

At 64³ the split asks 2–3 pieces, about Fast's own 3 substeps, so it is here mostly "more
substeps where the liquid meets a wall"; at 256³ (16–23 cells a substep) it would ask more.
The energy with α 0.3 and the band alone (i24d4, projected faces with the source minus
without, per frame): the correction's face velocity was ≤ 0.2 m/s up to frame 8, then 1.0,
2.5, 4.8, 5.5 m/s at frames 10–13 (rms 0.02–0.12) as the wall piles grew (fullest cell 935 →
2,261, the source up to 1,873 1/s), the particles' fastest 4.7 → 10.5 m/s: the velocity-level
correction's velocity, sized by the piles the wall collision makes, kept by FLIP. The band's
faces never reach G2P (put back before it).

Finer grids (i24d6; CPU, 2 cores, two runs at a time, ``bench/flip_density.py --timing fast
--alpha 0 --every 2``, Fast as it is: 3 substeps, no override; substeps a frame with the pieces,
meshed volume, CPU s a frame from a wrapper timing each ``step``, not kept). 96³, 880e3 particles,
24 frames, both switches: substeps 3 at frames 1–7, 6 / 6 at 8–9, 4 / 4 / 4 at 10–12, then 3 (4 at
15): 82 in 24 frames (72 without); volume at 8 / 12 / 16 / 24 −1.7% / −6.8% / −10.5% / −9.3% (Fast
alone −5.1% / −20.7% / −26.2% / −30.2%); 7–10 s a frame at 1–7, 21–61 s after (Fast alone 4–7 s).
128³, 2e6 particles, 12 frames: substeps 3 at 1–7, 6 at every frame 8–12 (the front at the far
wall); volume at 8 / 10 / 12 −2.6% / −6.1% / −9.1% (Fast alone −9.7% / −19.6% / −29.3%, 9.5–13.1
cells a substep); 25–38 s a frame at 1–7, 86–144 s at 8–12 (Fast alone ~12 s). So the split asked
at most twice Fast's substeps here (6 a frame where Fast alone takes 9.5–13.1 cells a substep),
not many; but it did not keep the volume as at 64³ with one long substep (−0.2% at 24): at 96³ the
loss from frame 10 is about a third of Fast's, and the band's cost (second solve, sub-cycled
advection) grows with the grid.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..errors import InputError
from ..grid import mac
from ..settings import env_value
from .grid import AIR, FLUID, SOLID

SWITCH = "VOXFX_AIR_BAND_PROJECTION"
WALL_SWITCH = "VOXFX_AIR_BAND_WALL_PIECES"  # the substep split where the liquid would meet a wall (notes)
WALL_SLACK = 1.0  # cells a particle may travel past its distance to a wall in one piece
WALL_QUANTILE = 0.999  # the pieces the particles ask for: this quantile of their counts
MAX_PIECES = 16
MARGIN = 2  # cells beyond the fastest face's reach
SUBSTEP_CELLS = 4.0  # the sub-cycled advection's longest step, in cells (notes)


def enabled() -> bool:
    """Whether ``VOXFX_AIR_BAND_PROJECTION`` is on ("1"; "0" or unset: off)."""
    text = env_value(SWITCH).strip()
    if text not in ("", "0", "1"):
        raise InputError(f"{SWITCH} must be 0 or 1, not {text}")
    return text == "1"


def wall_split() -> bool:
    """Whether ``VOXFX_AIR_BAND_WALL_PIECES`` is on ("1"; "0" or unset: off); it acts only
    with ``VOXFX_AIR_BAND_PROJECTION`` on."""
    text = env_value(WALL_SWITCH).strip()
    if text not in ("", "0", "1"):
        raise InputError(f"{WALL_SWITCH} must be 0 or 1, not {text}")
    return text == "1"


def refuse(xp, sparse: bool = False) -> None:
    """The dense solver's prototype is NumPy only: a dense CuPy simulation with it switched on
    refuses; the sparse solver (*sparse*) takes it on both backends (``sparse_air_band.py``,
    its GPU kernels ``sparse_air_band_gpu.py``). The wall split without the band refuses."""
    if (enabled() or wall_split()) and xp is not np and not sparse:
        raise NotImplementedError(f"{SWITCH} and {WALL_SWITCH} are prototypes of the dense NumPy solver "
                                  "and the sparse solver (kernels/flip/air_band.py, sparse_air_band.py): "
                                  "unset them for the dense GPU solver, or use the sparse one")
    if wall_split() and not enabled():
        raise InputError(f"{WALL_SWITCH} splits the substeps of {SWITCH}: switch that on too")


def wall_pieces(grid, pos, vel, dt: float, quantile: float = WALL_QUANTILE, most: int = MAX_PIECES) -> int:
    """Into how many equal pieces the substep *dt* is cut so that the particles' straight
    paths meet the walls within a piece (notes): each particle asks for ceil(travel toward a
    wall / (its distance to that wall + WALL_SLACK)) pieces (cells, the worst of its 6 walls),
    the substep takes the *quantile* of those counts (a few splash particles do not decide),
    at most *most*. Dense NumPy grid; walls of the box only (not solids)."""
    if len(pos) == 0:
        return 1
    from .transfer import _frame

    xp = getattr(grid, "xp", np)  # the sparse solver's CuPy grid too
    ox, oy, oz, h, inv_h = _frame(grid)
    need = xp.ones(len(pos), np.float32)
    for a, (o, n) in enumerate(zip((ox, oy, oz), grid.shape)):
        g = (pos[:, a] - np.float32(o)) * np.float32(inv_h)
        travel = vel[:, a] * np.float32(dt * inv_h)  # cells, signed
        room = xp.where(travel > 0, np.float32(n) - g, g) + np.float32(WALL_SLACK)
        need = xp.maximum(need, xp.abs(travel) / xp.maximum(room, np.float32(WALL_SLACK)))
    asked = float(xp.quantile(need, quantile)) if 0.0 < quantile < 1.0 else float(need.max())
    return int(min(most, max(1, math.ceil(asked - 1e-6))))


def split_substep(sim, dt: float, progress=None):
    """``FlipSimulation.substep`` with the wall split on: the substep taken as ``wall_pieces``
    equal substeps (each its own P2G, pressure solve, band and advection), or as itself when
    one piece suffices. Returns (stats, handled): handled False means the caller runs the
    substep as ever."""
    if not (enabled() and wall_split()) or getattr(sim, "_air_band_piece", False):
        return None, False
    if getattr(sim, "boundary", "closed") != "closed":  # the sparse solver's open domain: no walls
        return None, False
    pieces = wall_pieces(sim.grid, sim.pos, sim.vel, dt)
    if pieces == 1:
        return None, False
    from ..progress import scaled

    stats = {"iterations": 0, "residual": 0.0}
    sim._air_band_piece = True
    try:
        for i in range(pieces):
            part = sim.substep(dt / pieces, scaled(progress, i / pieces, (i + 1) / pieces) if progress else None)
            stats = {**part, "iterations": stats["iterations"] + int(part["iterations"]),
                     "residual": max(stats["residual"], float(part["residual"]))}
    finally:
        sim._air_band_piece = False
    sim.air_band_pieces = getattr(sim, "air_band_pieces", 0) + pieces - 1
    stats["pieces"] = pieces
    return stats, True


def reach_cells(grid, dt: float) -> int:
    """Rings of AIR a particle may cross in *dt*: the fastest liquid face's speed·Δt/h + MARGIN
    (faces touching a FLUID cell: the band's own faces could feed back)."""
    from .transfer import fluid_faces

    fastest = max((float(np.abs(f[m != 0]).max()) if m.any() else 0.0)
                  for f, m in zip(grid.faces(), fluid_faces(grid)))
    return int(math.ceil(fastest * dt / grid.h)) + MARGIN


def band_cells(cell, rings: int):
    """bool (nz, ny, nx): AIR cells within *rings* 6-neighbour steps of a FLUID cell (through
    AIR cells only)."""
    band = np.zeros(cell.shape, bool)
    front = cell == FLUID
    air = cell == AIR
    for _ in range(rings):
        front = mac.any_neighbour(front) & air & ~band
        if not front.any():
            break
        band |= front
    return band


def project_band(grid, dt: float, tolerance: float = 1e-4, max_iterations: int = 500):
    """The band's faces made divergence-free in place (module notes) on a dense NumPy grid
    whose faces are the projected, extrapolated velocity (``grid.valid_u/v/w`` the valid
    masks); extrapolates the band as deep as the reach first. Returns (band cells, solver
    stats) (None stats: no band)."""
    from . import pressure, transfer

    rings = reach_cells(grid, dt)
    transfer.extrapolate(grid, layers=rings, valid=transfer.fluid_faces(grid))
    band = band_cells(grid.cell, rings)
    if not band.any():
        return band, None
    kind = np.where(band, FLUID, np.where(grid.cell == AIR, AIR, SOLID)).astype(np.uint8)
    # fixed faces (touching the liquid, a solid or a wall) keep the grid's values: the
    # liquid's projected faces, the solids' velocities; walls get 0 from ``project``
    fixed = tuple(f.copy() for f in grid.faces())
    solid_touch = mac.faces_touching(grid.solid != 0)
    for f, sf, touch in zip(fixed, (grid.solid_u, grid.solid_v, grid.solid_w), solid_touch):
        f[touch] = sf[touch]
    walls = mac.faces_touching(np.zeros(grid.cell.shape, bool), outside=True)
    for f, wall in zip(fixed, walls):
        f[wall] = 0
    view = SimpleNamespace(xp=np, h=grid.h, shape=grid.shape, cell=kind, u=grid.u, v=grid.v, w=grid.w,
                           solid_u=fixed[0], solid_v=fixed[1], solid_w=fixed[2])
    q, stats = pressure.solve_pressure(view, 1.0, tolerance=tolerance, max_iterations=max_iterations)
    pressure.project(view, q, 1.0)
    return band, stats


def advect(grid, pos, dt: float, before=None, cells: float = SUBSTEP_CELLS):
    """*pos* moved in place through the grid's faces (the band made divergence-free) by RK2
    (midpoint) sub-steps of at most *cells* cells of the fastest face, then out of solids and
    walls (``transfer.push_out``; the fallback is the substep's start). *before* (the
    time-centred advection's u_n): the velocity at time t of the substep is
    (1 − t/Δt)·u_n + (t/Δt)·u_{n+1}, each sub-step sampling it at its start and middle.
    Returns the number of sub-steps."""
    from ..grid.sample import sample_faces
    from .transfer import _frame, push_out

    faces = grid.faces()
    fields = faces if before is None else tuple(before) + tuple(faces)
    fastest = max(float(np.abs(f).max()) if f.size else 0.0 for f in fields)
    n = max(1, int(math.ceil(fastest * dt / (cells * grid.h))))
    ox, oy, oz, _, inv_h = _frame(grid)
    origin = (ox, oy, oz)
    step = np.float32(dt / n)

    def velocity(x, t):  # t: the fraction of the substep
        g = [(x[a] - origin[a]) * inv_h for a in range(3)]
        new = sample_faces(faces, *g)
        if before is None:
            return new
        old = sample_faces(before, *g)
        s = np.float32(t)
        return [old[a] + s * (new[a] - old[a]) for a in range(3)]

    x0 = [pos[:, a].copy() for a in range(3)]
    x = [a.copy() for a in x0]
    for i in range(n):
        v1 = velocity(x, i / n)
        xm = [x[a] + np.float32(0.5) * step * v1[a] for a in range(3)]
        v2 = velocity(xm, (i + 0.5) / n)
        x = [x[a] + step * v2[a] for a in range(3)]
    for a, p in enumerate(push_out(grid, x, x0)):
        pos[:, a] = p
    return n


def g2p_and_advect(sim, old, ratio: float, dt: float):
    """The substep's G2P and advection with the prototype on (``FlipSimulation.substep``): the
    FLIP/PIC (or APIC) update from the grid's faces as ever, then the band made
    divergence-free (``project_band``) and the particles moved through it (``advect``; with
    the time-centred advection, u_n from the kept faces where they were the liquid's, the
    band's elsewhere), then the grid's faces and valid masks put back (the frame's output
    velocity and the next substep's kept faces are today's). Returns the fluid-face masks
    (the time-centred advection keeps them)."""
    from . import transfer

    g, s = sim.grid, sim.settings
    transfer.grid_to_particles(g, *old, sim.pos, sim.vel, ratio, sim.c)
    fluid = transfer.fluid_faces(g)
    faces = tuple(f.copy() for f in g.faces())
    valid = (g.valid_u, g.valid_v, g.valid_w)
    project_band(g, dt, s.pressure_tolerance, s.pressure_max_iterations)
    before = None
    if s.time_centred_advection:
        before = transfer.start_velocity(g.faces(), fluid, getattr(sim, "_kept", None))
    advect(g, sim.pos, dt, before)
    for f, k in zip(g.faces(), faces):
        f[...] = k
    g.valid_u, g.valid_v, g.valid_w = valid
    return fluid
