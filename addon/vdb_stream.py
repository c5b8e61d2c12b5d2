"""A float VDB grid filled slab by slab (issue 21 §6): Voxelize's Volume output for grids
too large to hold as one dense array.

Each slab ([k, j, i] rows k0..k1 of the grid) goes into the tree with one
``copyFromArray`` at its offset; OpenVDB prunes constant leaves into tiles after each
call (``tools::pruneTiles`` in ``CopyFromDense``), so the inside of a solid costs tiles,
not voxels, and the tree grows with the surface. The largest dense arrays alive are one
slab's density and its (x, y, z) copy. A few dozen slabs cost a few dozen whole-tree
prunes (see ``sparse_vdb.py`` for why many thousands would not).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..kernels.errors import InputError
from ..kernels.grid import GridSpec
from .writeback import _vdb_transform, _write_atomically, openvdb_module


class SlabVolume:
    """``add(k0, values)`` slabs of a fog volume, then ``write(path)`` (atomically)."""

    def __init__(self, name: str, spec: GridSpec):
        if not name:
            raise InputError("every VDB grid needs a name (Blender finds grids by name)")
        self.vdb = openvdb_module()
        self.spec = spec
        self.grid = self.vdb.FloatGrid(0.0)
        self.grid.name = name
        self.grid.gridClass = self.vdb.GridClass.FOG_VOLUME
        self.grid.transform = _vdb_transform(self.vdb, spec)

    def add(self, k0: int, values) -> None:
        """Values [k, j, i] of rows k0.. (the whole x and y extent of the grid)."""
        values = np.asarray(values, dtype=np.float32)
        nx, ny, nz = self.spec.shape
        if values.ndim != 3 or values.shape[1:] != (ny, nx) or not 0 <= k0 <= nz - values.shape[0]:
            raise InputError(f"slab of shape {values.shape} at row {k0} does not fit the grid {self.spec.shape}")
        if not np.isfinite(values).all():
            raise InputError(f"grid {self.grid.name!r} contains NaN or infinite values")
        # copyFromArray reads axes as (x, y, z) and ignores strides: a real C-order copy
        self.grid.copyFromArray(np.ascontiguousarray(values.transpose(2, 1, 0)), (0, 0, int(k0)), 0.0)

    def write(self, path) -> Path:
        path = Path(path)
        _write_atomically(path, lambda temporary: self.vdb.write(str(temporary), [self.grid], {}))
        return path
