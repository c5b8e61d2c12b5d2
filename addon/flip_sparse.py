"""The liquid's solver in the add-on (issue 12): the Solver choice (Auto: dense where its
memory estimate fits, sparse where it does not), the memory estimate for the Liquid panel
and the bake's guard (sparse: from the liquid's volume, not the box). The bake itself
(``kernels/flip/bake.py``) voxelizes its boundaries on the lattice."""

from __future__ import annotations

import numpy as np
from mathutils import Vector

from ..kernels import backend
from ..kernels.errors import InputError
from ..kernels.flip.sim import flip_memory
from ..kernels.flip.sparse_memory import sparse_flip_memory
from ..kernels.memory import trim_gpu_pool

SOLVERS = [
    ("AUTO", "Auto", "Dense where its memory estimate fits the GPU (or this computer's memory), sparse where it "
     "does not or where open boundaries or the narrow band need it"),
    ("DENSE", "Dense", "One grid over the whole domain box (closed walls only)"),
    ("SPARSE", "Sparse", "8³ bricks around the liquid only: memory follows the liquid, not the domain box (needed "
     "for open boundaries and the narrow band)"),
]


def usable_bytes() -> int:
    """What a bake may use where it runs: the device's (or host's) free memory with the
    guard's safety margin (``check_memory``)."""
    return int(backend.device_info().free_bytes * backend.SAFETY_FRACTION)


def time_centred(f) -> bool:
    """Whether the Liquid settings *f* ask for the time-centred advection (its kept faces
    count in the memory estimates)."""
    return bool(getattr(f, "time_centred_advection", False))


def count_control(f) -> bool:
    """Whether the Liquid settings *f* turn the particle count control on (Max Particles per
    Cell above 0: ``particle_count.limit_of``; its frame-end pass counts in the memory estimates)."""
    from ..kernels.flip.particle_count import limit_of

    return limit_of(f) > 0


def estimate_options(f) -> dict:
    """The Liquid settings *f*'s options of the memory estimates (``flip_memory``,
    ``sparse_flip_memory``, ``memory_at``): the time-centred advection's kept faces and the count
    control's frame-end pass."""
    return {"time_centred": time_centred(f), "count_control": count_control(f)}


def choose_solver(spec, particles: int, f, usable=None, xp=None) -> tuple[bool, str]:
    """(sparse, why) for the Liquid settings *f* (``solver``: AUTO, DENSE or SPARSE): Auto
    takes dense when its estimate fits *usable* bytes (default ``usable_bytes()``),
    sparse otherwise or with open boundaries or a narrow band. *why* is the panel's and the report's line."""
    choice = getattr(f, "solver", "AUTO")
    needs = ("open boundaries" if getattr(f, "boundary", "closed") != "closed"
             else "the narrow band" if int(getattr(f, "narrow_band", 0)) else None)
    if choice == "SPARSE":
        return True, "Solver: sparse"
    if choice == "DENSE":
        if needs:
            subject = {"open boundaries": "Open boundaries need", "the narrow band": "The narrow band needs"}[needs]
            raise InputError(f"{subject} the sparse solver: set Solver to Sparse or Auto")
        return False, "Solver: dense"
    if needs:
        return True, f"Solver: sparse (Auto: {needs})"
    usable = usable_bytes() if usable is None else int(usable)
    dense = flip_memory(spec, particles, bool(getattr(f, "apic", False)), xp=xp, **estimate_options(f))
    if dense <= usable:
        return False, f"Solver: dense (Auto: {backend.format_bytes(dense)} fits)"
    return True, (f"Solver: sparse (Auto: dense would need {backend.format_bytes(dense)}, "
                  f"{backend.format_bytes(usable)} usable)")


def liquid_reach(top: float, velocity, gravity):
    """(top, speed, g) of the liquid for ``climb``: the world height of its top (m), its
    initial speed (m/s) and gravity's pull (m/s²) where gravity points down −z (the box
    floor is its lowest face); None otherwise (the estimate then counts the walls to the
    box's top)."""
    g = np.asarray(gravity, dtype=float)
    if g[2] >= 0 or np.hypot(g[0], g[1]) > 1e-3 * abs(g[2]):
        return None
    return float(top), float(np.linalg.norm(np.asarray(velocity, dtype=float))), float(-g[2])


def climb(spec, reach):
    """Cells above *spec*'s floor the liquid can reach (``sparse_memory.climb_cells``) from
    ``liquid_reach``'s *reach*; None (the box's height) without one."""
    from ..kernels.flip.sparse_memory import climb_cells

    if reach is None:
        return None
    top, speed, g = reach
    return climb_cells((top - spec.origin[2]) / spec.voxel_size, speed, spec, g)


def memory_need(spec, particles: int, f, xp=None, usable=None, reach=None) -> int:
    """Peak bytes of the bake the Liquid settings *f* ask for: the sparse estimate (from
    the liquid's volume, spread over the floor and up the walls as high as *reach* lets it
    climb: ``liquid_reach``) when the solver is sparse (``choose_solver``), else the dense
    one (from the box)."""
    apic = bool(getattr(f, "apic", False))
    sparse, _ = choose_solver(spec, particles, f, usable=usable, xp=xp)
    if sparse:
        return sparse_flip_memory(spec, particles, int(f.particles_per_cell), apic,
                                  closed=getattr(f, "boundary", "closed") == "closed", xp=xp,
                                  narrow_band=int(getattr(f, "narrow_band", 0)), climb=climb(spec, reach),
                                  **estimate_options(f))
    return flip_memory(spec, particles, apic, xp=xp, **estimate_options(f))


def liquids_reach(scene, liquids):
    """``liquid_reach`` of the Liquid objects: their world bounding boxes' top, the
    fastest initial velocity, the scene's gravity."""
    if not liquids:
        return None
    top = max((o.matrix_world @ Vector(c))[2] for o in liquids for c in o.bound_box)
    speed = max(np.linalg.norm(np.asarray(o.voxfx_flip.initial_velocity, float)) for o in liquids)
    gravity = tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)
    return liquid_reach(top, (speed, 0.0, 0.0), gravity)


def liquid_particles_estimate(liquids, spec, particles_per_cell: int) -> int:
    """Particles of the Liquid objects before baking: their world bounding boxes in cells
    (as the bake's guard counts them), times particles per cell."""
    if not liquids:
        return 0
    corners = np.array([o.matrix_world @ Vector(c) for o in liquids for c in o.bound_box])
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    return int(particles_per_cell * np.prod(np.clip((hi - lo) / spec.voxel_size, 1, None)))


def estimate_lines(context, f) -> list:
    """The Liquid panel's lines before baking: the solver and why ("Solver: sparse (Auto:
    dense would need 81 GiB, 70 GiB usable)") and the memory ("Memory ≈ 1.2 GiB (sparse,
    3.4M particles)"), or none (no domain or liquid yet; a choice that cannot run: its
    one-line reason)."""
    from .operators.flip import domain_spec, role_objects

    if f.domain is None:
        return []
    try:
        spec = domain_spec(f.domain, f.resolution)
    except Exception:  # noqa: BLE001 - a domain without volume: the bake says so
        return []
    liquids = role_objects(context.scene, "LIQUID")
    particles = liquid_particles_estimate(liquids, spec, f.particles_per_cell)
    if not particles:
        return []
    try:
        usable = usable_bytes()
        sparse, why = choose_solver(spec, particles, f, usable=usable)  # on the backend the bake uses
    except InputError as e:
        return [str(e)]
    need = memory_need(spec, particles, f, usable=usable, reach=liquids_reach(context.scene, liquids))
    kind = "sparse" if sparse else "dense"
    return [why, f"Memory ≈ {backend.format_bytes(need)} ({kind}, {particles / 1e6:.1f}M particles)"]


def estimate_line(context, f) -> str:
    """The Liquid panel's memory line ("Memory ≈ 1.2 GiB (sparse, 3.4M particles)"), or ""."""
    lines = estimate_lines(context, f)
    return lines[-1] if len(lines) == 2 else ""


def frame_check(spec, f, sparse: bool, compact: bool, particles: int, xp=None, reach=None):
    """The bake's ``frame_check.FrameCheck`` for the Liquid settings *f*: sparse, the
    bricks it holds (``memory_at``; before its grid is built, the estimate's for
    *particles*); dense, the box's grid (``flip_memory``); with the device encoder of
    Compact frames on a GPU (*compact*, as ``bake_memory_need``)."""
    from ..kernels.flip.frame_check import FrameCheck
    from ..kernels.flip.sparse_memory import box_bricks, estimate_bricks, memory_at
    from . import compact_points

    xp = xp or backend.xp()
    apic = bool(getattr(f, "apic", False))
    closed = getattr(f, "boundary", "closed") == "closed"
    band = int(getattr(f, "narrow_band", 0))

    def memory(bricks, particles, parts=False, kept=None):
        if sparse:
            stages = memory_at(spec, bricks, particles, int(f.particles_per_cell), apic, closed, True, xp, band,
                               kept=kept, **estimate_options(f))
        else:
            stages = flip_memory(spec, particles, apic, parts=True, xp=xp, **estimate_options(f))
        if compact and xp is not np:
            stages = {**stages, "total": compact_points.with_device_encoder(stages, particles)}
        return stages if parts else stages["total"]

    first = estimate_bricks(int(particles) / max(1, int(f.particles_per_cell)), spec, closed,
                            climb(spec, reach)) if sparse else 0
    return FrameCheck(memory, closed, box_bricks(spec), xp=xp, first=first, band=sparse and band > 0)


class GuardedBake:
    """*bake* (``kernels.flip.bake.FlipBake``) with its memory looked at again before
    each frame (``frame_check``): where the bricks held now plus the next frame's growth
    would not fit what is usable then (beside what the simulation already holds), the
    bake stops before stepping, in one line; the frames before it, their checkpoint and
    the cache stay as a cancel leaves them, and the next Bake resumes after them."""

    def __init__(self, bake, check, frame_start: int, usable=None):
        self.bake, self.check, self.frame_start = bake, check, int(frame_start)
        self.usable = usable or usable_bytes

    def __getattr__(self, name):
        return getattr(self.bake, name)

    def step(self, sim, frame: int, progress=None, **inputs) -> str:
        if self.check.xp is not None and self.check.xp is not np:
            trim_gpu_pool()  # the last frame's outgrown free blocks
        need, held = self.check.need(sim)
        fits = int(self.usable()) + held
        if need > fits:
            done = (f"frame {self.frame_start} is" if frame - 1 == self.frame_start
                    else f"frames {self.frame_start}–{frame - 1} are")
            raise InputError(f"Frame {frame}: the liquid now needs {backend.format_bytes(need)}, "
                             f"{backend.format_bytes(fits)} fits; {done} baked and resume from there")
        line = self.bake.step(sim, frame, progress=progress, **inputs)
        self.check.seen(sim)
        return line
