"""The sparse liquid solver in the add-on (issue 12): its memory estimate for the Liquid
panel and the bake's guard (from the liquid's volume, not the box). The bake itself
(``kernels/flip/bake.py``) voxelizes its boundaries on the lattice."""

from __future__ import annotations

import numpy as np
from mathutils import Vector

from ..kernels import backend
from ..kernels.flip.sim import flip_memory
from ..kernels.flip.sparse_memory import sparse_flip_memory


def memory_need(spec, particles: int, f, xp=None) -> int:
    """Peak bytes of the bake the Liquid settings *f* ask for: the sparse estimate (from
    the liquid's volume) when Sparse is on, else the dense one (from the box)."""
    apic = bool(getattr(f, "apic", False))
    if getattr(f, "sparse", False):
        return sparse_flip_memory(spec, particles, int(f.particles_per_cell), apic,
                                  closed=getattr(f, "boundary", "closed") == "closed", xp=xp)
    return flip_memory(spec, particles, apic, xp=xp)


def liquid_particles_estimate(liquids, spec, particles_per_cell: int) -> int:
    """Particles of the Liquid objects before baking: their world bounding boxes in cells
    (as the bake's guard counts them), times particles per cell."""
    if not liquids:
        return 0
    corners = np.array([o.matrix_world @ Vector(c) for o in liquids for c in o.bound_box])
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    return int(particles_per_cell * np.prod(np.clip((hi - lo) / spec.voxel_size, 1, None)))


def estimate_line(context, f) -> str:
    """The Liquid panel's memory line: "Memory ≈ 1.2 GiB (sparse, 3.4M particles)", or ""."""
    from .operators.flip import domain_spec, role_objects

    if f.domain is None:
        return ""
    try:
        spec = domain_spec(f.domain, f.resolution)
    except Exception:  # noqa: BLE001 - a domain without volume: the bake says so
        return ""
    particles = liquid_particles_estimate(role_objects(context.scene, "LIQUID"), spec, f.particles_per_cell)
    if not particles:
        return ""
    need = memory_need(spec, particles, f)  # on the backend the bake uses
    kind = "sparse" if f.sparse else "dense"
    return f"Memory ≈ {backend.format_bytes(need)} ({kind}, {particles / 1e6:.1f}M particles)"
