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


def footprint(cells_ijk) -> tuple[int, tuple[int, int, int]]:
    """(cells, (cells seen along x, along y, along z)) of a body's cells: its size and its
    three projections (for ``emission_per_frame``)."""
    ijk = np.unique(np.asarray(cells_ijk, dtype=np.int64).reshape(-1, 3), axis=0)
    seen = tuple(len(np.unique(np.delete(ijk, a, axis=1), axis=0)) for a in range(3))
    return len(ijk), seen


def emission_per_frame(count: int, seen, velocity, gravity, fps: float, voxel_size: float,
                       particles_per_cell: float) -> float:
    """About how many particles an inflow of *count* cells (*seen*: its projections along
    x, y, z, ``footprint``) adds per frame in steady flow (the disk estimate's inflows).

    ``FlipSimulation.emit`` refills, once per frame, every inflow cell that holds no
    particle. Its particles start at *velocity* and gravity's pull along the flow speeds
    them up: a cell's worth crosses one cell in τ (h = v₀τ + ½aτ²), so the upstream
    layer of cells across the flow (the projections weighted by the flow's direction)
    empties 1/(τ·fps) times a frame, and a layer still holding the last of the particles
    before it is not refilled: whole layers only, once a frame passes them more than once
    (at most every cell, every frame). Checked against the emitter on four nozzles
    (tests/unit/test_disk_plan.py)."""
    v0, g = np.asarray(velocity, np.float64), np.asarray(gravity, np.float64)
    if count == 0 or not (np.any(v0) or np.any(g)):
        return 0.0
    flow = v0 if np.any(v0) else g
    direction = flow / np.linalg.norm(flow)
    speed, pull = float(np.linalg.norm(v0)), float(g @ direction)
    if speed ** 2 + 2.0 * pull * voxel_size <= 0.0:  # thrown against gravity, it never crosses a cell: it falls
        direction, speed, pull = g / np.linalg.norm(g), 0.0, float(np.linalg.norm(g))
    if pull > 1e-12:
        tau = (np.sqrt(speed ** 2 + 2.0 * pull * voxel_size) - speed) / pull
    else:
        tau = voxel_size / speed
    layers = 1.0 / (tau * fps)
    layers = np.floor(layers) if layers >= 1.0 else layers
    across = float(np.abs(direction) @ np.asarray(seen, np.float64))
    return float(min(count, layers * across) * particles_per_cell)


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
