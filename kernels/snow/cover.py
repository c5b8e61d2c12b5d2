"""The Snow Cover mesh: a quad mesh over the ground lattice at terrain height (the
frame's depth displaces it, ``addon/frame_loader``), with no faces where there is no
receiver and none across a step of the height field."""

from __future__ import annotations

import math

import numpy as np

from .domain import NO_GROUND, SnowDomain

# Snow slides off slopes steeper than its angle of repose, so a cover quad much steeper
# than that spans a step of the height field (a roof edge, a wall, a tree's crown), not a
# snow surface. The margin keeps slopes the lattice only makes look steeper.
COVER_SLOPE_MARGIN_DEG = 20.0


def cover_max_slope(repose_angle: float) -> float:
    """Steepest quad kept, in degrees, for an angle of repose in radians."""
    return min(math.degrees(repose_angle) + COVER_SLOPE_MARGIN_DEG, 85.0)


def cover_mesh(terrain, domain: SnowDomain, max_slope_deg: float):
    """(float32 (V, 3) vertices, int32 (Q, 4) quads) over the ground lattice: no quad with
    a corner where no receiver is, and none whose rise over its side is steeper than
    *max_slope_deg* (snow on a roof does not hang down to the ground like a curtain)."""
    terrain = np.asarray(terrain)
    gy, gx = terrain.shape
    x0, y0 = domain.ground_origin
    c = domain.ground_cell
    jj, ii = np.mgrid[0:gy, 0:gx]
    z = np.where(terrain == NO_GROUND, 0.0, terrain)
    verts = np.stack([x0 + ii * c, y0 + jj * c, z], -1).reshape(-1, 3)
    idx = (jj * gx + ii)[:-1, :-1].ravel()
    quads = np.stack([idx, idx + 1, idx + gx + 1, idx + gx], axis=1)
    has = (terrain != NO_GROUND).ravel()
    corner_z = z.ravel()[quads]
    flat_enough = np.ptp(corner_z, axis=1) <= c * math.tan(math.radians(max_slope_deg))
    quads = quads[has[quads].all(axis=1) & flat_enough]
    return verts.astype(np.float32), quads.astype(np.int32)
