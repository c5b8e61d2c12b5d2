"""The divergence-free air band on bricks (issue 24, accuracy): ``air_band.py``'s dense NumPy
prototype on the sparse solver, NumPy and CuPy (the same switches, ``VOXFX_AIR_BAND_PROJECTION``
and ``VOXFX_AIR_BAND_WALL_PIECES``, off by default; the dense CuPy solver still refuses them,
``air_band.refuse``). The mechanism and the dense measurements are ``air_band.py``'s notes; this
is where each of its steps lives on bricks (the GPU's side: "On the GPU", below).

    reach        the fastest face touching a FLUID cell, ·Δt/h + ``air_band.MARGIN`` rings
                 (``reach_cells``; the band's own faces are not counted, as dense).
    extrapolate  ``sparse_transfer.extrapolate`` from the liquid's faces, *reach* rings deep.
    band         the AIR cells within *reach* 6-neighbour steps of a FLUID cell through AIR
                 cells (``band_cells``, through the neighbour index).
    projection   ``sparse_pressure``'s own solve, not new solver code: for the solve the
                 grid's cell types are the band's (band cells FLUID — the unknowns —, the
                 liquid and the solids SOLID, the AIR beyond the band AIR, q = 0) and its
                 solid faces the faces the band must keep (``sparse_pressure.boundary_faces``:
                 the liquid's projected faces, the obstacles' velocity, 0 on the walls);
                 ``solve_pressure(grid, 1)`` and ``project(grid, q, 1)`` then change only the
                 faces of band cells that touch no liquid and no solid. Sealed band pockets
                 (no AIR beside them) have their mean removed, as ``solver_cells`` does for
                 liquid. The grid's own channels, the warm start's carried pressure and the
                 solver's kept tables are put back afterwards (``project_band``).
    advection    RK2 sub-steps of at most ``air_band.SUBSTEP_CELLS`` cells through the
                 band-projected faces, sampled by the brick sampler ``grid.sample_faces`` (the
                 closed domain's face boxes, as ``g2p_advect``), then ``sparse_transfer.push_out``
                 (``advect``); time-centred: u_n from the kept bricks (``KeptBricks``), blended.
    G2P          ``sparse_transfer.update_velocity`` (the FLIP/PIC or APIC half of
                 ``g2p_advect``) reads the liquid's faces before the band is projected; the
                 grid's faces and valid masks are put back after the advection (``g2p_and_advect``).
    wall split   ``air_band.split_substep`` hooks ``SparseFlipSimulation.substep`` as it hooks
                 the dense one (``wall_pieces`` reads the grid's box: closed domains only;
                 open ones have no walls and are never split).

Where the band leaves the active bricks. The topology's margin around the particles is
``substep_margin``: 1 + 2 extrapolation rings + ⌈(v_max + g·Δt)·Δt/h⌉ + 1 cells (per brick with
``VOXFX_SPARSE_MARGIN=brick``), the band's reach ⌈|u_face|_max·Δt/h⌉ + 2 rings from FLUID cells,
so the bricks hold the band (and the one cell more it needs, below) whenever the fastest
liquid face is no faster than the fastest particle (of the brick, with per-brick margins) +
g·Δt + 1 cell/Δt — the usual case (the faces are the particles' projected mean). Where it is
not so, the band stops one cell short of the bricks' edge: a cell with a missing neighbour
cannot be an unknown (its high faces live in the missing brick and read 0, so its divergence
is not the solve's: up to 33 1/s left there in the unit test's cut block before they were
taken out), so those cells stay AIR beyond the band (q = 0, their faces the extrapolation's),
the extrapolation does not reach beyond the bricks, and a particle sampling beyond them reads
0 (``SparseMacGrid.sample``) — the band is then shallower than the dense one, divergence-free
within. ``project_band``'s stats count the cells so taken out (``"band_cut"``).

Measured (CPU, this project's 2-core helper machine, shared; ``bench/flip_density.py --sparse
--res 48 --particles 110e3 --frames 12 --every 4 --alpha 0 --timing fast --max-substeps 1
--max-time-step 0``, one substep a frame of 7–12 cells), meshed volume at frames 4 / 8 / 12,
occupied cells at 12 (vs frame 0), fullest cell and ½v² + gz (3.885 J/kg at 0) at 12, substeps
at 8 / 12, stepping a frame:

  sparse, switches off       −2.1 / −13.8 / −32.5%, −18.3%, 192, 2.800, 1 / 1,  524 ms
  sparse, band               −0.1 / −1.1 / −17.3%,  −1.6%, 1,504, 3.004, 1 / 1, 1,538 ms
  sparse, band + wall split  −0.1 / −1.3 / −9.6%,   +5.5%,   144, 2.941, 3 / 2, 1,645 ms
  dense (the same command without --sparse): off −2.1 / −13.8 / −32.5% (143 ms), band −0.1 /
  −1.1 / −17.7%, fullest 1,537 (522 ms), band + split −0.1 / −1.3 / −9.0%, fullest 151 (795 ms)

so the port follows the dense prototype (the unit test's 12³ dam break agrees to the cell);
the NumPy sparse path costs more (8 frames profiled: of 6.9 s, the band's G2P and advection
4.0 s — the sub-cycled sampling 2.5 s, the band's extrapolation and solve 1.0 s (6–14
iterations, multigrid-preconditioned as the liquid's)). The band against the bricks in that
run: with the per-brick margins (the default) 0 cells cut in frames 1–7, then 88 of 23,935
band cells at frame 8 and 255 of 34,939 at 11 (band alone), 6 and 198 of ~24,000 in frame 12's
two pieces (band + split); with ``VOXFX_SPARSE_MARGIN=global`` none in 12 frames — the band's
depth is the fastest liquid face's everywhere, a slow brick's margin its own particles'
(likely where the cut falls; not located).

On the GPU (i24b). The same functions run on a CuPy grid: reach, band cells, edge cells and the
swapped channels are this module's array code, the extrapolation, fluid faces, set-up, solve and
projection the kernels those calls already launch (``sparse_gpu``, ``sparse_pressure_cells``,
``sparse_pressure_gpu``: the band's solve goes through the GPU sparse solver with the band's
cell types and fixed faces, and the liquid's channels, ``CARRIED`` and ``_pressure_memo`` are put
back as on NumPy; its set-up rebuilds the set-up workspace, so the liquid's kept tables fail
``tables_hold`` and are rebuilt at the next substep). The G2P update and the advection (all
sub-steps and the push-out in one thread a particle) are ``sparse_air_band_gpu.py``'s kernels,
the NumPy reference's bits (host harness ``tests/unit/test_cuda_sparse_air_band_host.py``; on an
H100, ``tests/gpu/test_flip_sparse_air_band_gpu.py``'s 16 kernel cases bit for bit). ``air_band
.wall_pieces`` takes CuPy arrays (``cupy.quantile``). The 12³ dam break of the unit tests with both
switches on (5 frames, one substep each): NumPy and CuPy 466 occupied cells and −3.329% meshed
volume both, 4 pieces both (time-centred 427, −17.31%, 4): the same to the printed digits.

Measured on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CuPy 14.2.0; one call, i24b),
``bench/flip_density.py --gpu --volume --res 256 --particles 8e6 --frames 24 --every 4 --timing
fast``, each run cut at 22–45 s (the call's budget), meshed volume at frames 4 / 8 / 12 / 16 / 24,
fullest cell at the last frame shown, substeps of the frames 4 / 8 / 12 / 16 (with the pieces):

  α 0, switches off        −2.7 / −27.5 / −50.2 / −62.0 / −84.9%, 19,693 at 24, 3 each; 32.7 ms
                           a frame (median of frames 2–24)
  α 0, band + split        +0.5 / −7.5 / −17.2 / −10.9% (16), 9,153 at 16; 3 / 3 / 9 / 6
  α 0.3, switches off      −2.7 / −28.2 / −43.8 / −29.0% (16), 2,062 at 16; 3 each
  α 0.3, band + split      +0.6 / +1.7 / +9.2% (12), 813 at 12; 3 / 17 / 14 (½v² + gz 3.04 →
                           3.37 J/kg at frame 8: energy put in, as the CPU's α 0.3 runs)

so on the GPU too the band keeps the volume through the floor phase (frame 8: −7.5% against
−27.5%, α 0) and the split bounds the wall phase's loss (−10.9% at 16 against −62.0%); α 0.3 with
both swells (the correction's dead band was sized for a liquid that loses volume; air_band.py's
notes). The band runs were not timed to the end (cut before their summary): from the call's
clock, ~1.5–2.5 s a frame with the band against ~0.05 s without (frames with 9–17 pieces, a second
solve each, every band solve on a hierarchy of another size than the liquid's, so the cached GPU
solver and its captured graph are likely rebuilt each solve — not profiled).
"""

from __future__ import annotations

import math

import numpy as np

from . import air_band, sparse_pressure, sparse_transfer
from .grid import AIR, FLUID, SOLID

_F = np.float32


def reach_cells(grid, dt: float) -> int:
    """``air_band.reach_cells`` on bricks: rings of AIR a particle may cross in *dt*."""
    xp = grid.xp  # |u| ≥ 0: faces touching no FLUID cell read 0 (no boolean gather: no size read)
    fastest = max(float(xp.abs(xp.where(m != 0, f, _F(0))).max()) if f.size else 0.0
                  for f, m in zip(grid.faces(), sparse_transfer.fluid_faces(grid)))
    return int(math.ceil(fastest * dt / grid.h)) + air_band.MARGIN


def _any_neighbour(grid, mask):
    m = mask.astype(grid.xp.uint8)
    out = grid.xp.zeros(grid.size, bool)
    for d in range(6):
        out |= grid.neighbour(m, d) != 0
    return out


def band_cells(grid, rings: int):
    """bool per flat cell: AIR cells within *rings* 6-neighbour steps of a FLUID cell
    (through AIR cells; ``air_band.band_cells`` on the neighbour index)."""
    cell = grid["cell"]
    band = grid.xp.zeros(grid.size, bool)
    front = cell == FLUID
    air = cell == AIR
    for _ in range(rings):
        front = _any_neighbour(grid, front) & air & ~band
        if not front.any():
            break
        band |= front
    return band


def edge_cells(grid):
    """bool per flat cell: a neighbour's brick is not in the topology (module notes)."""
    return (grid.nbr < 0).any(axis=0)


def project_band(grid, dt: float, tolerance: float = 1e-4, max_iterations: int = 500, preconditioner: str = "mg"):
    """The band's faces made divergence-free in place (module notes) on a sparse NumPy grid
    whose faces are the projected velocity (``grid.valid`` its masks): extrapolated as deep
    as the reach first, then ``sparse_pressure``'s solve over the band's cells with every
    other face held. Returns (band cells, stats) (None stats: no band)."""
    rings = reach_cells(grid, dt)
    sparse_transfer.extrapolate(grid, layers=rings, valid=sparse_transfer.fluid_faces(grid))
    band = band_cells(grid, rings)
    edge = band & edge_cells(grid)  # a face of theirs lies in a missing brick: not unknowns (notes)
    band &= ~edge
    if not bool(band.any()):
        return band, None
    fixed = sparse_pressure.boundary_faces(grid)  # liquid's faces as they are, solids', walls' 0
    cell = grid["cell"]
    xp = grid.xp
    kind = xp.where(band, FLUID, xp.where(cell == AIR, AIR, SOLID)).astype(xp.uint8)
    swapped = ("cell", "solid", "solid_u", "solid_v", "solid_w")
    saved = {n: grid[n] for n in swapped}
    carried = grid.channels.get(sparse_pressure.CARRIED)  # the liquid's warm start: not the band's
    memo = getattr(grid, "_pressure_memo", None)  # the liquid's kept solver tables
    grid["cell"] = kind
    grid["solid"] = (kind == SOLID).astype(xp.uint8)
    for name, f in zip(grid.FACES, fixed):
        grid["solid_" + name] = f
    try:
        q, stats = sparse_pressure.solve_pressure(grid, 1.0, tolerance=tolerance, max_iterations=max_iterations,
                                                  preconditioner=preconditioner)
        sparse_pressure.project(grid, q, 1.0)
    finally:
        for n, a in saved.items():
            grid[n] = a
        if carried is not None:
            grid.channels[sparse_pressure.CARRIED] = carried
        grid._pressure_memo = memo
    return band, {**stats, "band_cells": int(band.sum()), "band_cut": int(edge.sum())}


def advect(grid, pos, dt: float, before=None, cells: float = air_band.SUBSTEP_CELLS) -> int:
    """``air_band.advect`` on bricks: *pos* moved in place by RK2 sub-steps of at most *cells*
    cells of the fastest face (u_n blended in time with *before*), sampled by
    ``grid.sample_faces`` (closed: the face boxes), then ``sparse_transfer.push_out`` (the
    fallback the substep's start). Returns the number of sub-steps."""
    if int(pos.shape[0]) == 0:
        return 0
    faces = grid.faces()
    fields = faces if before is None else tuple(before) + tuple(faces)
    xp = grid.xp
    fastest = max(float(xp.abs(f).max()) if f.size else 0.0 for f in fields)
    n = max(1, int(math.ceil(fastest * dt / (cells * grid.h))))
    boxes = grid.boxes if grid.closed else None
    step = _F(dt / n)
    if xp is not np:  # all sub-steps and the push-out in one kernel, the same bits
        from . import sparse_air_band_gpu

        sparse_air_band_gpu.advect(grid, pos, n, step, before)
        return n

    def velocity(x, t):  # t: the fraction of the substep
        g = grid.cell_coords(np.stack(x, axis=1))
        new = grid.sample_faces(faces, *g, boxes=boxes)
        if before is None:
            return new
        old = grid.sample_faces(before, *g, boxes=boxes)
        s = _F(t)
        return [old[a] + s * (new[a] - old[a]) for a in range(3)]

    x0 = [pos[:, a].copy() for a in range(3)]
    x = [a.copy() for a in x0]
    for i in range(n):
        v1 = velocity(x, i / n)
        xm = [x[a] + _F(0.5) * step * v1[a] for a in range(3)]
        v2 = velocity(xm, (i + 0.5) / n)
        x = [x[a] + step * v2[a] for a in range(3)]
    for a, p in enumerate(sparse_transfer.push_out(grid, x, x0)):
        pos[:, a] = p
    return n


def g2p_and_advect(sim, old, ratio: float, dt: float) -> dict:
    """``SparseFlipSimulation.substep``'s G2P and advection with the prototype on
    (``air_band.g2p_and_advect`` on bricks): the FLIP/PIC (or APIC) update from the liquid's
    faces, the band projected, the particles advected through it (time-centred: u_n from
    the kept bricks where they were the liquid's, the band's elsewhere), then the grid's
    faces and valid masks put back. Returns the band's stats ("band_iterations",
    "band_residual", "band_converged", "band_cells", "band_cut"; none without a band) and
    "advection_steps"."""
    g, s = sim.grid, sim.settings
    if int(sim.pos.shape[0]):
        flip = _F(ratio)
        if sim.xp is not np:  # one kernel, the same bits
            from . import sparse_air_band_gpu

            sparse_air_band_gpu.update_velocity(g, old, sim.pos, sim.vel, flip, _F(1) - flip, sim.c)
        else:
            sparse_transfer.update_velocity(g, old, g.cell_coords(sim.pos), sim.vel, flip, _F(1) - flip, sim.c)
    faces = tuple(f.copy() for f in g.faces())
    valid = g.valid
    _, stats = project_band(g, dt, s.pressure_tolerance, s.pressure_max_iterations, sim.preconditioner)
    before = sim._start_velocity() if s.time_centred_advection else None
    stats = {"band_" + k: v for k, v in (stats or {}).items() if k != "band_cells" and k != "band_cut"} | {
        k: v for k, v in (stats or {}).items() if k in ("band_cells", "band_cut")}
    stats["advection_steps"] = advect(g, sim.pos, dt, before)
    for name, k in zip(g.FACES, faces):
        g[name] = k
    g.valid = valid
    return stats
