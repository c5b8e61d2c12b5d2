"""The dense staggered grid the FLIP liquid and the snow wind both hold (``MacGrid``).

The solvers reach their grid only through this small interface — ``spec``, ``shape``,
``h``, ``xp``, the face arrays ``u, v, w`` (``faces()``), new face- or cell-shaped arrays
(``face_arrays``, ``cell_array``), ``index`` and ``cell_coords`` — and through the
operations of ``mac.py``, ``sample.py`` and ``components.py`` applied to those arrays.

<<<<<<< HEAD
A brick grid (``sparse.py``) stands behind the same interface this way: ``u, v, w`` and
every cell array become pool channels ``(bricks, 8, 8, 8)`` (a brick keeps the −x, −y, −z
faces of its voxels; the +1 face is the neighbour brick's, read through the neighbour
table), ``index`` becomes (slot, local voxel) by the key search, and each ``mac`` operation
runs on the brick plus a one-voxel apron (``sparse_ops.with_apron``), where the dense
version reads the neighbour array element: the stencils are the same code on an 10³
block instead of the whole grid. Missing bricks are the background (AIR for FLIP, the
inflow wind for snow). ``sparse_mac.py`` is such a grid (the sparse FLIP solver's), with
flat pool channels and the apron kept as a per-cell neighbour index.
=======
What a sparse brick grid (issue 8; ``sparse.py``, ``sparse_ops.py``) must implement to
stand behind the same interface:

1. The attributes and constructors above, with ``u, v, w`` and every cell array as pool
   channels ``(bricks, 8, 8, 8)``: a brick keeps the −x, −y, −z faces of its voxels; the
   +1 face is the neighbour brick's, read through the neighbour table. ``index`` becomes
   (slot, local voxel) by the key search.
2. Every ``mac`` operation with the dense version's semantics, on the brick plus a
   one-voxel apron (``sparse_ops.with_apron``) where the dense version reads the
   neighbour element — the stencils are the same code on a 10³ block instead of the
   whole grid:
   * faces: ``faces_touching``, ``fixed_face_masks``, ``face_sum`` (the divergence);
   * the one projection of a cell-typed grid: ``fixed_faces`` and ``project`` (cell
     types, the *fluid* type whose pressure is solved, the *solid* type whose faces are
     fixed, walls fixed or free, the fixed faces' velocities or 0); FLIP and the wind
     both call it, so it is implemented once for bricks too;
   * the 7-point stencil: ``neighbour_sum``, ``neighbour_count``, ``any_neighbour``,
     ``red_cells``;
   * sampling (``sample.py``: ``sample_face(s)``, ``sample_lattice``, with gradient) and
     connected components (``components.py``: ``label_components``, ``reachable``).
3. On the device, the same functions of ``cuda/include/voxfx_mac.cuh`` —
   ``cell_face_sum<FIXED>``, ``project_face<FIXED>``, ``neighbour_sum``,
   ``red_black_cell``, ``decode_face``, ``face_cells`` — with a brick's (slot, local
   voxel) address and its apron in place of the dense (i, j, k) and linear index; the
   reductions come from ``voxfx_reduce.cuh``, the trilinear look-up from
   ``voxfx_lattice.cuh``. Constants reach the kernels as -D options
   (``launch.define_options``), never as ``#define`` in a ``.cu``.
4. Missing bricks are the background: AIR for FLIP (p = 0, faces untouched), the inflow
   wind for snow.

The effects' bake objects (``flip/bake.py``, ``snow/bake.py``) and the add-on only see
the simulation, never the grid, so a sparse grid changes nothing above the solvers.
>>>>>>> i19
"""

from __future__ import annotations

import numpy as np

from . import mac
from .spec import GridSpec


class MacGrid:
    """u (nz, ny, nx+1), v (nz, ny+1, nx), w (nz+1, ny, nx) float32 on *xp* (NumPy or
    CuPy), zero or *fill* (one value per component) to start with."""

    def __init__(self, spec: GridSpec, xp=np, fill=(0.0, 0.0, 0.0)):
        self.spec, self.xp = spec, xp
        nx, ny, nz = spec.shape
        self.shape = (nx, ny, nz)
        self.h = float(spec.voxel_size)
        self.u, self.v, self.w = self.face_arrays(fill=fill)

    def faces(self):
        return self.u, self.v, self.w

    def face_arrays(self, dtype=None, fill=None):
        """New (u, v, w)-shaped arrays: empty, or filled with *fill* (one value per component)."""
        xp = self.xp
        dtype = xp.float32 if dtype is None else dtype
        shapes = mac.face_shapes(*self.shape)
        if fill is None:
            return tuple(xp.empty(s, dtype=dtype) for s in shapes)
        return tuple(xp.full(s, np.dtype(dtype).type(f), dtype=dtype) for s, f in zip(shapes, fill))

    def cell_array(self, dtype):
        """A new zeroed (nz, ny, nx) array."""
        nx, ny, nz = self.shape
        return self.xp.zeros((nz, ny, nx), dtype=dtype)

    def index(self, i, j, k):
        """Linear index of cell (i, j, k)."""
        nx, ny, _ = self.shape
        return (k * ny + j) * nx + i

    def cell_coords(self, points):
        """World points (N, 3) float32 → cell units (x, y, z) = (p − origin)·float32(1/h),
        float32: the convention of every sampler (``sample.py``)."""
        inv_h = np.float32(1.0 / self.h)
        return tuple((points[:, a] - np.float32(o)) * inv_h for a, o in enumerate(self.spec.origin))
