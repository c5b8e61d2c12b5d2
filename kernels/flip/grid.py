"""State layout of the FLIP liquid solver (seed 003 §4–8) — the contract between the
particle, transfer, pressure and surface stages. Lengths in metres, time in seconds,
z up, gravity (0, 0, −9.81) by default.

Grid: a dense MAC grid (``GridSpec``: origin, cell size h, shape (nx, ny, nz)):
  ``u`` (nz, ny, nx+1) x-velocity on x-faces at x = origin_x + i·h, (j+½)h, (k+½)h;
  ``v`` (nz, ny+1, nx), ``w`` (nz+1, ny, nx) likewise; float32.
  ``cell`` (nz, ny, nx) uint8: AIR, FLUID or SOLID. Cells outside the grid count as
  SOLID (closed box walls): faces on the domain boundary carry the wall's velocity (0).
  ``solid_u/v/w``: velocity of solids on faces next to SOLID cells (moving obstacles),
  zero for static ones.
``DenseGrid`` is the grid core's ``MacGrid`` (``kernels/grid/dense.py``, whose notes say how
a sparse brick grid, seed 003 §5–7, stands behind the same interface) plus the cell types
and solids; the faces, solid faces, stencil, sampler, projection and connected components
the stages use are the grid core's (``kernels/grid/``).

Particles: SoA, float32: ``pos`` (N, 3), ``vel`` (N, 3); optional APIC affine matrix
``c`` (N, 3, 3).

Pressure: A p = b over FLUID cells, A the 7-point Laplacian (diagonal = number of
non-SOLID neighbours; AIR neighbours are p = 0), b = −(h²/Δt)·∇·u*; p is pressure over
density (m²/s²) and ``pressure.project`` applies u = u* − (Δt/h)(p_hi − p_lo); the
relative residual is ‖r‖₂/‖b‖₂. Fluid regions with no AIR (sealed) have the constant
removed and one cell pinned (``pressure.py``). Faces next to SOLID cells and on the domain
walls take ``solid_u/v/w`` (zero by default). ``solid`` marks obstacle cells; the
pressure stage reads ``cell`` (where ``classify`` copied them as SOLID).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..grid import GridSpec, mac
from ..grid.dense import MacGrid
from ..settings import setting

AIR, FLUID, SOLID = mac.AIR, mac.FLUID, mac.SOLID  # the grid core's cell types
GRAVITY = (0.0, 0.0, -9.81)


@dataclass
class FlipSettings:
    """One definition of the liquid settings (``kernels/settings.py``): the fields made
    with ``setting`` are the Liquid panel's properties, same names, defaults and units."""

    particles_per_cell: int = setting(8, "Particles per Cell", "Particles seeded per liquid cell", min=1, max=27)
    max_particles_per_cell: int = setting(0, "Max Particles per Cell", "Where particles pile up (pressed against "
                                          "a wall, or landing there from a fast substep) a cell keeps about this "
                                          "many, the rest deleted at the end of each frame: piles slow every "
                                          "stage and do not change the surface (at least twice Particles per "
                                          "Cell, e.g. 32; 0 = keep every particle)", min=0, soft_max=128, max=1 << 20)
    # Density correction (``density.py``, issue 24): the stiffness α of a divergence source
    # α·max(0, n/n₀ − 1 − τ)/Δt in over-full FLUID cells, so particles crowded against walls and
    # the floor are pushed apart by the projection (0 = off: the solve as before). 0.3 by
    # default: the 8M dam break on an H100 (bench/flip_density.py --gpu) kept its meshed volume
    # within −5.5% at frame 24 against −31.5% off (Accurate), −46.5% against −84.9% (Fast).
    density_correction: float = setting(0.3, "Density Correction", "Where particles crowd together (pressed "
                                        "against walls and the floor) the pressure solve pushes them apart "
                                        "again, so the liquid keeps its volume: the fraction of a crowded "
                                        "cell's excess relaxed each substep (0 = off)", min=0.0, max=1.0,
                                        subtype="FACTOR")
    flip_ratio: float = setting(0.97, "FLIP Ratio", "FLIP/PIC blend: 1 = pure FLIP (lively, noisy), 0 = PIC "
                                "(smooth, viscous-looking)", min=0.0, max=1.0, subtype="FACTOR")
    apic: bool = setting(False, "APIC", "Affine particle-in-cell transfer instead of the FLIP/PIC blend (keeps "
                         "rotation, less noise)")
    cfl: float = setting(2.0, "CFL Number", "Cells a particle may travel per substep, each substep sized anew "
                         "from the fastest particle or obstacle: higher takes fewer substeps (faster, less "
                         "accurate; Mantaflow uses 2–4)", min=0.1, max=10.0, soft_max=5.0)
    max_substeps: int = setting(8, "Max Substeps", "Upper limit of CFL substeps per frame", min=1, max=64)
    # 1/30 s: a 24 fps frame takes at least 2 substeps (the sloshing period +5% of linear
    # theory, +15% in one substep; 60 fps frames are unchanged); 1/60 s gives +4% at 3 substeps.
    max_time_step: float = setting(1 / 30, "Max Time Step", "Longest substep in seconds, however slow the liquid: "
                                   "gentle waves and sloshing keep their period at low frame rates (at 1/30 s a "
                                   "24 fps frame takes at least 2 substeps; 0 = the CFL alone sizes them)",
                                   min=0.0, soft_max=0.1, precision=4, subtype="TIME_ABSOLUTE", unit="TIME_ABSOLUTE")
    pressure_tolerance: float = setting(1e-4, "Pressure Tolerance", "Relative residual at which the pressure "
                                        "solve stops", min=1e-8, max=1e-1, precision=6)
    warm_start_pressure: bool = setting(True, "Warm Start Pressure", "Start each substep's pressure solve from the "
                                        "last substep's pressure (sparse solver): fewer iterations to the same "
                                        "tolerance")
    seed: int = setting(0, "Seed", "Seed of the particle jitter", min=0)
    boundary: str = setting("closed", "Boundary", "Domain walls (sparse solver): closed walls, or open sides the "
                            "liquid may leave (it is deleted Kill Distance beyond the box)",
                            items=(("closed", "Closed", "The domain box has walls"),
                                   ("open", "Open", "No walls: the liquid may leave the box")))
    narrow_band: int = setting(0, "Narrow Band", "Cells under the liquid's surface that keep particles; the deeper "
                               "liquid is carried by the grid (sparse solver; fewer particles in deep water; 0 = "
                               "off, else at least 2)", min=0, soft_max=16, max=256)
    kill_distance: float = setting(2.0, "Kill Distance", "Open boundary: liquid farther than this beyond the "
                                   "domain box on any side is deleted (metres; 0 = at the box's faces)",
                                   min=0.0, soft_max=100.0, subtype="DISTANCE", unit="LENGTH")
    # Particles advected through the velocity linear in time over each substep, from the last
    # substep's projected faces (where a face touched FLUID then and now) to this one's: RK2 in
    # time and space (``transfer.grid_to_particles_and_advect``'s *before*) instead of through
    # the end velocity for the whole substep, whose aΔt²/2 a substep set the Martin–Moyce front
    # ahead the more the larger the CFL (16 cells: +10.6% at CFL 2, +13.0% at CFL 4 against the
    # test's 12%; time-centred +8.7% / +9.9%, and +9.9% where Max Substeps 2 caps a 24 fps frame
    # that CFL 2 would give 4–7 substeps, today's +14.2%: ``bench/flip_advection.py``). Off:
    # today's advection. Keeps the last substep's faces and fluid-face masks (5 bytes a face, 15 a cell)
    # between substeps, counted in the memory estimates and saved in checkpoints (a resumed
    # bake goes on bit for bit; an older checkpoint's first substep advects as today's).
    time_centred_advection: bool = setting(False, "Time-Centred Advection", "Move the particles "
                                           "through the velocity blended from the last substep's to this one's "
                                           "instead of this one's alone, so a larger CFL Number keeps its "
                                           "accuracy (the dam break's front at CFL 4 as at CFL 2); keeps the last "
                                           "substep's velocity, 15 bytes a cell more")
    # Kernel-only (the scene's gravity is passed in by the add-on)
    gravity: tuple = GRAVITY  # m/s²
    # The solver on 8³ bricks around the liquid only (memory follows the liquid, not the box;
    # needed for open boundaries and the narrow band). The add-on sets it from its Solver
    # choice (``addon/flip_sparse.choose_solver``: Auto, Dense or Sparse).
    sparse: bool = False
    pressure_max_iterations: int = 500


# The Liquid panel's Timing buttons (``voxfx.flip_timing``) and the CLI's ``flip --timing``: each
# sets these four settings. "accurate" is the defaults above. "fast" takes three substeps a 24 fps
# frame (issue 24): the 8M dam break's frames 29–35 ms on an H100 against 64–80 ms at the defaults,
# and the accuracy tests hold for it on the CPU and the GPU (tests/unit and tests/gpu
# test_flip_centred_advection*: the 32-cell Martin–Moyce front within 12% (+10.5% sparse on the
# CPU; the defaults give +10.6% at 16 cells), the sloshing period +6.6% (allowed −3…+10%)).
# But three substeps lose the more liquid the finer the grid (the dam break's meshed volume at
# frame 24 with the density correction: −7.2% at 64³, −12.9% at 96³, −26.2% at 128³ on the CPU,
# −46.5% at 256³ on an H100): the loss follows the cells a substep moves. "balanced" bounds those
# at 8 (CFL 8, the Max Time Step and advection of "fast"; Max Substeps 16): within 10% at 64³,
# 96³ and 128³ (CPU; worst −7.7%, −9.9%, −5.9%) at 3.1, 4.0 and 5.2 substeps a frame (Accurate:
# 6.6 and 7.3 at 64³ and 96³, up to its 8); 3 while the liquid is slow, more the finer the grid
# (bench/flip_density.py's notes).
TIMING_FIELDS = ("cfl", "max_substeps", "max_time_step", "time_centred_advection")
TIMINGS = {
    "accurate": {name: FlipSettings.__dataclass_fields__[name].default for name in TIMING_FIELDS},
    "balanced": {"cfl": 8.0, "max_substeps": 16, "max_time_step": 1 / 72, "time_centred_advection": True},
    "fast": {"cfl": 5.0, "max_substeps": 3, "max_time_step": 1 / 72, "time_centred_advection": True},
}


def timing_of(settings) -> str:
    """The name in ``TIMINGS`` whose four values *settings* (any object with those attributes)
    holds, or "custom"."""
    for name, values in TIMINGS.items():
        if all(_same(getattr(settings, k), v) for k, v in values.items()):
            return name
    return "custom"


def _same(a, b) -> bool:
    """Equal as the Liquid panel stores them (Blender's float properties are float32)."""
    if isinstance(b, float):
        return abs(float(a) - b) <= 1e-6 * max(1.0, abs(b))
    return a == b


class DenseGrid(MacGrid):
    """The grid core's dense MAC grid (``grid/dense.py``) with FLIP's cell types and solids."""

    def __init__(self, spec: GridSpec, xp=np):
        super().__init__(spec, xp)
        self.cell = self.cell_array(xp.uint8)
        self.solid = self.cell_array(xp.uint8)  # static + moving obstacles, set by the caller
        self.solid_u, self.solid_v, self.solid_w = self.face_arrays(fill=(0.0, 0.0, 0.0))

    def fluid_cells(self):
        """Linear indices of FLUID cells (ascending)."""
        return self.xp.flatnonzero(self.cell.ravel() == FLUID)
