"""Boundaries of a liquid bake from posed meshes: obstacles, inflows and outflows.

The add-on only extracts: for each object and frame it hands over a :class:`Body` (the
object's world-space triangles and its world matrix). Here the bodies are voxelized on
the simulation's backend (``xp``: the GPU when the bake runs there) and a moving
obstacle's cells take the velocity of its rigid motion over the coming frame: the
solid velocity of the free-slip condition u·n = u_solid·n (the seed paper, 003, gives
no boundary treatment of its own; this is the standard MAC one, enforced at the faces
by ``FlipSimulation.set_obstacles`` and ``transfer.enforce_boundaries``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..grid import GridSpec, bitgrid
from ..voxelize import voxelize


@dataclass(frozen=True)
class Body:
    """One object at one frame: world-space triangles and the 4×4 world matrix."""

    vertices: np.ndarray  # (V, 3) float32, metres
    triangles: np.ndarray  # (T, 3) int32
    matrix: np.ndarray  # (4, 4) float64, object → world


def cells(body: Body | None, spec: GridSpec, xp, progress=None):
    """(M, 3) int32 (i, j, k) of the cells the body fills (solid + surface, 3-axis vote
    so open meshes still fill), on *xp*; *progress* may cancel (``kernels.progress``)."""
    if body is None or len(body.triangles) == 0:
        return xp.zeros((0, 3), dtype=xp.int32)
    g = voxelize(body.vertices, body.triangles, spec, "solid+surface", vote=True, xp=xp, keep_on_device=True,
                 progress=progress)
    return xp.asarray(bitgrid.coordinates(g.bits, spec.shape[0]))


def cells_of_all(bodies, spec: GridSpec, xp):
    """The cells of several bodies, concatenated (duplicates allowed), on *xp*."""
    parts = [cells(b, spec, xp) for b in bodies]
    return xp.concatenate(parts) if parts else xp.zeros((0, 3), dtype=xp.int32)


def centres(ijk, spec: GridSpec, xp):
    """World centres of cells (M, 3) as float32 (``GridSpec.centers``), on *xp*."""
    origin = xp.asarray(spec.origin, dtype=xp.float64)
    return (origin + (ijk.astype(xp.float64) + 0.5) * spec.voxel_size).astype(xp.float32)


def obstacle_state(now, next_matrices, spec: GridSpec, fps: float, xp):
    """Obstacle cells at this frame and the velocity of each obstacle cell, on *xp*.

    *now*: the obstacles' bodies at this frame; *next_matrices*: their world matrices at
    the next frame. A cell of a body moves with the body's rigid motion over one frame,
    ``step = M_next · M_now⁻¹``, so its velocity is (step·x − x)·fps. Returns
    ``(cells (M, 3) int32, velocity (nz, ny, nx, 3) float32 or None when nothing moves)``.
    """
    nx, ny, nz = spec.shape
    velocity = None
    found = []
    for body, m1 in zip(now, next_matrices):
        ijk = cells(body, spec, xp)
        if len(ijk) == 0:
            continue
        found.append(ijk)
        step = np.asarray(m1, dtype=np.float64) @ np.linalg.inv(np.asarray(body.matrix, dtype=np.float64))
        if np.abs(step - np.eye(4)).max() <= 1e-12:
            continue  # at rest over this frame (to rounding of M_next · M_now⁻¹): no velocity
        x = centres(ijk, spec, xp).astype(xp.float64)
        moved = x @ xp.asarray(step[:3, :3].T) + xp.asarray(step[:3, 3])
        if velocity is None:
            velocity = xp.zeros((nz, ny, nx, 3), dtype=xp.float32)
        velocity[ijk[:, 2], ijk[:, 1], ijk[:, 0]] = ((moved - x) * fps).astype(xp.float32)
    all_cells = xp.concatenate(found) if found else xp.zeros((0, 3), dtype=xp.int32)
    if velocity is not None and not bool(xp.any(velocity)):
        velocity = None
    return all_cells, velocity
