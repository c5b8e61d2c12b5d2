"""A liquid source's cells and the particles kept inside it (seed 003 §4: seeding the
source cells; issue 22 §3: the particle volume is the object's)."""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid import GridSpec, bitgrid
from ..progress import scaled
from ..voxelize import voxelize
from ..voxelize.inside import points_inside

def source_cells(vertices, triangles, spec: GridSpec, xp, progress=None):
    """The cells a liquid source may seed: (M, 3) int (i, j, k) of its solid+surface
    voxelization (3-axis vote), and (M,) bool, True for the cells its surface touches
    (only there can a particle fall outside it)."""
    if vertices is None or len(triangles) == 0:
        return np.zeros((0, 3), dtype=np.int32), np.zeros(0, bool)
    solid = voxelize(vertices, triangles, spec, "solid", vote=True, xp=xp, progress=scaled(progress, 0, 0.7)).bits
    surface = voxelize(vertices, triangles, spec, "surface", xp=xp, progress=scaled(progress, 0.7, 1)).bits
    nx = spec.shape[0]
    cells = bitgrid.coordinates(solid | surface, nx)
    crossed = bitgrid.unpack(surface, nx)[cells[:, 2], cells[:, 1], cells[:, 0]]
    return cells, np.asarray(crossed, bool)


def keep_inside(pos, vel, crossed, per_cell: int, vertices, triangles, spec: GridSpec):
    """The seeded particles that lie inside the source mesh: all of a cell its surface
    does not touch, and those of a touched cell that pass ``voxelize.inside.points_inside`` (run on the
    host, on positions both backends seed bit-identically: the same particles are kept).
    So the liquid's particle volume (count · h³ / per_cell) is the object's, not the
    whole cells its surface touches (issue 22 §3)."""
    xp = backend.array_module(pos)
    crossed = np.repeat(np.asarray(crossed, bool), int(per_cell))  # particle m·per_cell + s is in cell m
    if not crossed.any():
        return pos, vel
    keep = np.ones(len(crossed), bool)
    test = np.flatnonzero(crossed)
    keep[test] = points_inside(backend.to_numpy(pos[xp.asarray(test)]), vertices, triangles, spec)
    keep = xp.asarray(keep)
    return xp.ascontiguousarray(pos[keep]), xp.ascontiguousarray(vel[keep])
