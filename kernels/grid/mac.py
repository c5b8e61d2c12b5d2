"""The staggered (MAC) grid: faces, solid faces, the 7-point stencil and the projection,
shared by the FLIP liquid (``flip/``) and the snow wind (``snow/wind.py``).

Layout (x fastest, arrays indexed [k, j, i]) for a grid of nx × ny × nz cells:

  ``u`` (nz, ny, nx+1) x-velocity on x-faces at (i, j+½, k+½) in cell units;
  ``v`` (nz, ny+1, nx) on y-faces at (i+½, j, k+½); ``w`` (nz+1, ny, nx) at (i+½, j+½, k);
  cells (pressure, types, masks) (nz, ny, nx), cell (i, j, k) centred at (i+½, j+½, k+½).

Face (i, j, k) of component a separates the cells (i, j, k) − e_a ("lo") and (i, j, k)
("hi"); on the domain walls one of them lies outside the grid. Every function takes the
array module of its input (NumPy or CuPy) and does exactly the same float operations in
the same order on both. The device side of the same ideas is
``cuda/include/voxfx_mac.cuh`` (indices, faces, red-black order, neighbour sum, and the
projection: ``cell_face_sum``, ``project_face``).

The projection of a cell-typed grid (``fixed_faces``, ``project``; FLIP and the wind):
``cell`` holds a type per cell, *fluid* is the type whose pressure is solved for, *solid*
the type whose faces are fixed. A face is fixed when a *solid* cell lies on either side
or, with *walls_fixed*, when it lies on the domain wall; a fixed face carries the given
velocity (*fixed*: (u, v, w)-shaped arrays, or None for 0).
"""

from __future__ import annotations

from ..backend import array_module

# Cell types of a MAC grid whose cells are classified (the FLIP liquid); the kernels get
# them as -D options (``launch.Kernels(defines=CELL_TYPES)``): defined here only.
AIR, FLUID, SOLID = 0, 1, 2
CELL_TYPES = {"AIR": AIR, "FLUID": FLUID, "SOLID": SOLID}


def face_shapes(nx: int, ny: int, nz: int) -> tuple:
    """Array shapes of u, v and w for nx × ny × nz cells."""
    return (nz, ny, nx + 1), (nz, ny + 1, nx), (nz + 1, ny, nx)


def face_count(nx: int, ny: int, nz: int) -> int:
    """Number of faces of all three components (one thread each in face kernels)."""
    return (nx + 1) * ny * nz + nx * (ny + 1) * nz + nx * ny * (nz + 1)


def faces_touching(mask, outside: bool = False, dtype=bool) -> tuple:
    """(u, v, w) masks (*dtype*: bool, or uint8 for kernels) of the faces with a cell of
    *mask* on either side; the cells beyond the domain walls count as *outside* (True:
    every wall face is marked)."""
    xp = array_module(mask)
    m = mask if mask.dtype == bool else mask.astype(bool)
    nz, ny, nx = m.shape
    su, sv, sw = (xp.full(s, outside, dtype) for s in face_shapes(nx, ny, nz))
    su[:, :, 1:nx] = m[:, :, :-1] | m[:, :, 1:]
    sv[:, 1:ny, :] = m[:, :-1, :] | m[:, 1:, :]
    sw[1:nz] = m[:-1] | m[1:]
    if not outside:  # the wall faces see their one inside cell
        su[:, :, 0] |= m[:, :, 0]
        su[:, :, nx] |= m[:, :, nx - 1]
        sv[:, 0, :] |= m[:, 0, :]
        sv[:, ny, :] |= m[:, ny - 1, :]
        sw[0] |= m[0]
        sw[nz] |= m[nz - 1]
    return su, sv, sw


def face_sum(u, v, w):
    """D per cell: the sum of its outgoing face velocities (face differences, no 1/h);
    ∇·u = D/h. The order of the additions is the kernels' (x, y, then z)."""
    return ((u[:, :, 1:] - u[:, :, :-1]) + (v[:, 1:, :] - v[:, :-1, :])) + (w[1:] - w[:-1])


def subtract_gradient(u, v, w, p, c, touch=None) -> None:
    """The projection u ← u − c·(p_hi − p_lo) on the faces between two cells (c = Δt/h,
    ρ = 1), in place; wall faces are left alone. *touch*: (u, v, w) face masks, only
    those faces change (default: every inner face)."""
    xp = array_module(u)
    for comp, vel in enumerate((u, v, w)):
        ax = 2 - comp  # array axis of the component's direction
        inner, lo, hi = ([slice(None)] * 3 for _ in range(3))
        inner[ax], lo[ax], hi[ax] = slice(1, p.shape[ax]), slice(None, -1), slice(1, None)
        inner, lo, hi = tuple(inner), tuple(lo), tuple(hi)
        new = vel[inner] - c * (p[hi] - p[lo])
        vel[inner] = new if touch is None else xp.where(touch[comp][inner], new, vel[inner])


def fixed_face_masks(cell, solid, walls_fixed: bool) -> tuple:
    """(u, v, w) bool masks of the fixed faces: a *solid* cell on either side, or (with
    *walls_fixed*) the domain wall."""
    return faces_touching(cell == solid, outside=walls_fixed)


def fixed_faces(u, v, w, cell, solid, walls_fixed: bool, fixed=None) -> tuple:
    """The faces as the projection sees them (new arrays): the fixed faces' velocity
    (``fixed``, None: 0) on the fixed faces, u, v, w elsewhere. ``face_sum`` of them is
    ``cell_face_sum<true>`` of voxfx_mac.cuh."""
    xp = array_module(u)
    masks = fixed_face_masks(cell, solid, walls_fixed)
    values = fixed if fixed is not None else (u.dtype.type(0),) * 3
    return tuple(xp.where(m, s, f) for m, s, f in zip(masks, values, (u, v, w)))


def project(u, v, w, p, c, cell, fluid, solid, walls_fixed: bool, fixed=None, masks=None) -> None:
    """The projection u ← u − c·(p_hi − p_lo) (c = Δt/h, ρ = 1), in place, as
    ``project_face`` of voxfx_mac.cuh: faces between two cells of the grid of which one
    at least is *fluid* lose c·(p_hi − p_lo), with p counted 0 in the other cells; then
    the fixed faces take *fixed* (None: 0); every other face keeps its value. *masks*:
    the fixed faces if the caller keeps them (``fixed_face_masks``)."""
    xp = array_module(u)
    is_fluid = cell == fluid
    p = xp.where(is_fluid, p, p.dtype.type(0))
    subtract_gradient(u, v, w, p, c, touch=faces_touching(is_fluid))
    if masks is None:
        masks = fixed_face_masks(cell, solid, walls_fixed)
    for comp, (vel, mask) in enumerate(zip((u, v, w), masks)):
        vel[mask] = 0.0 if fixed is None else fixed[comp][mask]


def neighbour_sum(x):
    """Σ x_n over the six neighbours inside the grid, added −x, +x, −y, +y, −z, +z (the
    order of ``neighbour_sum`` in voxfx_mac.cuh). Callers keep x = 0 on cells that are not
    unknowns: Dirichlet neighbours add 0, Neumann ones (walls) drop out."""
    xp = array_module(x)
    s = xp.zeros_like(x)
    s[:, :, 1:] += x[:, :, :-1]
    s[:, :, :-1] += x[:, :, 1:]
    s[:, 1:, :] += x[:, :-1, :]
    s[:, :-1, :] += x[:, 1:, :]
    s[1:] += x[:-1]
    s[:-1] += x[1:]
    return s


def neighbour_count(mask):
    """uint8 per cell: how many of its six neighbours inside the grid are in *mask* (the
    diagonal of the 7-point Laplacian when *mask* marks the non-Neumann cells)."""
    xp = array_module(mask)
    return neighbour_sum(mask.astype(xp.uint8))


def red_cells(shape, xp):
    """Cells (i, j, k) with i + j + k even: the first colour of red-black ordering (on the
    device ``red_black_cell`` in voxfx_mac.cuh); the other colour is its complement."""
    k, j, i = xp.indices(shape)
    return (i + j + k) % 2 == 0


def any_neighbour(mask):
    """Cells with at least one 6-neighbour (inside the grid) in *mask*."""
    xp = array_module(mask)
    out = xp.zeros_like(mask)
    out[:, :, 1:] |= mask[:, :, :-1]
    out[:, :, :-1] |= mask[:, :, 1:]
    out[:, 1:, :] |= mask[:, :-1, :]
    out[:, :-1, :] |= mask[:, 1:, :]
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    return out


def face_positions(comp: int, nx: int, ny: int, nz: int, xp):
    """Broadcastable float32 cell-unit coordinates (x, y, z) of the faces of component
    *comp* (0 = u, 1 = v, 2 = w)."""
    half = xp.float32(0.5)
    x = xp.arange(nx + (comp == 0), dtype=xp.float32)[None, None, :]
    y = xp.arange(ny + (comp == 1), dtype=xp.float32)[None, :, None]
    z = xp.arange(nz + (comp == 2), dtype=xp.float32)[:, None, None]
    if comp != 0:
        x = x + half
    if comp != 1:
        y = y + half
    if comp != 2:
        z = z + half
    return x, y, z
