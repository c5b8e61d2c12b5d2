"""The sparse FLIP solver's CuPy launches between P2G and the pressure solve
(``kernels/cuda/flip_sparse_transfer.cu``, as ``sparse_transfer.py``'s stages): the cell types
(``classify``), the boundaries with gravity (``enforce_boundaries``), the fluid faces
(``fluid_faces``, ``fluid_live``) and the extrapolation rings (``extrapolate``, with the
boundaries folded into its last ring). Moved out of ``sparse_gpu.py`` with no change (issue 24's
module guide, session 21, helper h21b: that file had grown to 517 lines; ``sparse_gpu`` re-exports
these names). They read what ``sparse_gpu.particles_to_grid`` keeps on the grid: its bins
(``grid.bins``), its cell types (``grid.p2g_cells``) and its idle-brick flags
(``_live_cells``; ``sparse_gpu.brick_live``).

Classify (§6) comes from the binning: the count per pool cell says which cells hold a
particle (``classify_counts_sparse``, one pass over the pool) when the bins are those of
the same positions (``bins``: kept from P2G until the particles move or the bricks
change); otherwise the two-pass form (``cells_from_solid_sparse`` + ``mark_fluid_sparse``).
Gravity is added in the boundaries kernel (``enforce_boundaries(grid, add)``).
"""

from __future__ import annotations

import numpy as np

from .sparse_gpu_base import _I32, _I64, KERNELS, _dims, _frame, _keep, _topo


def classify(grid, pos) -> None:
    """``sparse_transfer.classify``: P2G's cell types when it wrote them with these bins, *pos*
    and solid array (``sparse_gpu.p2g_cells_mode``), else from P2G's bin counts when they are *pos*'s
    (module notes), else marking cells from the particles."""
    cp = grid.xp
    size = grid.size
    bins = getattr(grid, "bins", None)
    kept = getattr(grid, "p2g_cells", None)  # (bins, cell, solid) from P2G's division (p2g_cells_mode "finish")
    if kept is not None and bins is not None and kept[0] is bins and bins[0] is pos and kept[2] is grid["solid"]:
        grid["cell"] = kept[1]
        grid.p2g_cells = None  # handed over once: a later classify types a fresh array
        return
    cell = cp.empty(size, cp.uint8)
    if bins is not None and bins[0] is pos:
        KERNELS.launch("classify_counts_sparse", size, (bins[1], grid["solid"], grid.slot_coords, _I64(size),
                                                        _I32(grid.closed), *_dims(grid), cell))
        grid["cell"] = cell
        return
    KERNELS.launch("cells_from_solid_sparse", size, (grid["solid"], cell, _I64(size)))
    n = int(pos.shape[0])
    keys, slots, nk = _topo(grid)
    ox, oy, oz, _, inv_h = _frame(grid)
    KERNELS.launch("mark_fluid_sparse", n, (pos, _I64(n), ox, oy, oz, inv_h, _I32(grid.closed), *_dims(grid), keys,
                                            slots, nk, grid["solid"], cell))
    grid["cell"] = cell


def enforce_boundaries(grid, add=None) -> None:
    """``sparse_transfer.enforce_boundaries``, with *add* (three float32: a body force
    times Δt) added to the faces first."""
    force = tuple(np.float32(a) for a in add) if add is not None else (np.float32(0),) * 3
    KERNELS.launch("enforce_boundaries_sparse", grid.size,
                   (*grid.faces(), *(grid["solid_" + n] for n in grid.FACES), grid["solid"],
                    *(grid[n] for n in grid.EXISTS), grid.brick_nbr, _I64(grid.size), _I32(add is not None), *force))


def fluid_faces(grid):
    """``sparse_transfer.fluid_faces``; where the cell types are still those of a live P2G
    (``particles_to_grid(live=True)``), the masks are kept with its idle-brick flags for
    ``extrapolate`` (``fluid_live``)."""
    cp = grid.xp
    from .sparse_pressure_cells import projected_fluid

    out = projected_fluid(grid)  # the projection's own masks (VOXFX_SPARSE_PROJECT_FLUID=1)
    if out is None:
        out = tuple(cp.empty(grid.size, cp.uint8) for _ in range(3))
        KERNELS.launch("fluid_faces_sparse", grid.size, (grid["cell"], grid.brick_nbr, _I64(grid.size), *out))
    kept = getattr(grid, "_live_cells", None)
    _keep(grid, "_fluid_live", (out, kept[1]) if kept is not None and kept[0] is grid["cell"] else None)
    return out


def fluid_live(grid, valid):
    """The idle-brick flags kept with *valid* by ``fluid_faces`` (the same mask arrays), else None;
    read once (the masks let go)."""
    kept = getattr(grid, "_fluid_live", None)
    if kept is None:
        return None
    _keep(grid, "_fluid_live", None)
    return kept[1] if len(valid) == 3 and all(a is b for a, b in zip(kept[0], valid)) else None


LIVE_RINGS = 7  # rings an idle brick stays invalid through (flip_sparse_transfer.cu's idle-brick notes)


def extrapolate(grid, layers: int, valid, boundaries=False, add=None, live=None):
    """*layers* ≥ 1 rings of ``sparse_transfer.extrapolate``, each into fresh arrays (the
    inputs are left as they were); the grown masks. With *boundaries*, the last ring is
    ``extrapolate_boundaries_sparse`` (``sparse_transfer.extrapolate_and_boundaries``): the
    faces it grows are returned too, as (masks, old faces), and the grid's faces are those
    through ``enforce_boundaries(grid, add)``. *live* (≤ ``LIVE_RINGS`` layers): ``brick_live``'s
    flags; with *boundaries* (*valid* P2G's masks) the rings skip the idle bricks and the last
    writes their values unread (extrapolate_live_sparse, extrapolate_boundaries_live_sparse),
    without (*valid* ``fluid_faces``' masks of the live P2G's cell types) the rings copy the idle
    bricks (extrapolate_copy_live_sparse); the same bytes."""
    cp = grid.xp
    size = grid.size
    exists = tuple(grid[n] for n in grid.EXISTS)
    values, masks = grid.faces(), tuple(cp.ascontiguousarray(m, dtype=cp.uint8) for m in valid)
    if boundaries:
        force = tuple(np.float32(a) for a in add) if add is not None else (np.float32(0),) * 3
        if live is not None and layers > LIVE_RINGS:
            live = None
        for _ in range(layers - 1):
            values, masks = _ring(grid, values, masks, exists, live)
        old, out = (tuple(cp.empty(size, cp.float32) for _ in range(3)) for _ in range(2))
        new_masks = tuple(cp.empty(size, cp.uint8) for _ in range(3))
        KERNELS.launch("extrapolate_boundaries_sparse" if live is None else "extrapolate_boundaries_live_sparse",
                       size, (*values, *masks, *exists, grid.brick_nbr, _I64(size),
                              *(grid["solid_" + n] for n in grid.FACES), grid["solid"], _I32(add is not None), *force,
                              *old, *out, *new_masks, *(() if live is None else (live,))))
        for name, f in zip(grid.FACES, out):
            grid[name] = f
        return new_masks, old
    copy = live if live is not None and layers <= LIVE_RINGS else None
    for _ in range(layers):
        values, masks = _ring(grid, values, masks, exists, copy, "extrapolate_copy_live_sparse")
    for name, f in zip(grid.FACES, values):
        grid[name] = f
    return masks


def _ring(grid, values, masks, exists, live=None, name="extrapolate_live_sparse"):
    """One ring of ``extrapolate_sparse`` into fresh arrays: (faces, masks); with *live*
    (``brick_live``'s flags) *name*'s: extrapolate_live_sparse (P2G's masks: the idle bricks
    left unwritten) or extrapolate_copy_live_sparse (the fluid faces': the idle bricks copied)."""
    cp, size = grid.xp, grid.size
    out = (tuple(cp.empty(size, cp.float32) for _ in range(3)), tuple(cp.empty(size, cp.uint8) for _ in range(3)))
    KERNELS.launch("extrapolate_sparse" if live is None else name, size, (
        *values, *masks, *exists, grid.brick_nbr, _I64(size), *out[0], *out[1], *(() if live is None else (live,))))
    return out
