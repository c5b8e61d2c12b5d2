"""Owners of a sparse voxelization's voxels on the device (issue 11): which triangle, and
so which selected object and material, each voxel comes from, by the rules of the CPU
reference (``attributes.py``, ``sparse_attributes.OwnerMesh``): the smallest triangle
whose conservative test covers the voxel, else the fill along its x row.

``DeviceOwnerMesh`` has ``OwnerMesh``'s interface (``box_of``, ``context``, ``touched``,
``owners``). The hits are never listed: the dense device pass ``surface_owners`` of
``cuda/voxelize.cu`` (the conservative test of the dense surface kernels, cut to the
chunk's box of whole x rows: the same voxel indices as the host's box) takes the
``atomicMin`` of the triangle index into each listed voxel (the chunk's voxels, sorted,
found by binary search), then the same ``fill_along_rows`` as the host fills the rest.
Run bricks a triangle may touch (whose voxels need their own owners) are those holding a
voxel of the mesh's sparse surface (``gpu_sparse``, once per mesh; the conservative test's
voxels are the surface mode's).
"""

from __future__ import annotations

import numpy as np

from ..grid import GridSpec
from ..grid.sparse import BRICK
from .attributes import fill_along_rows


class DeviceOwnerMesh:
    """The triangles on the device, in the grid's voxel units (``gpu.DeviceMesh``)."""

    def __init__(self, vertices, triangles, spec):
        from . import gpu

        self.vertices, self.triangles, self.spec = vertices, triangles, spec
        self.mesh = gpu.DeviceMesh(vertices, triangles, spec)
        self._surface = None

    def box_of(self, brick_min, brick_max):
        from .sparse_attributes import OwnerMesh

        return OwnerMesh.box_of(self, brick_min, brick_max)

    def context(self, lo, hi):
        """What ``owners`` and ``touched`` need of the box lo … hi (here the box alone)."""
        return (np.asarray(lo, np.int64), np.asarray(hi, np.int64))

    def surface_keys(self):
        """Sorted keys (device) of the bricks holding a voxel of the mesh's surface."""
        if self._surface is None:
            from .gpu_sparse import voxelize_bricks

            s = self.spec
            whole = GridSpec(s.origin, s.voxel_size, tuple(-(-int(n) // BRICK) * BRICK for n in s.shape))
            self._surface = voxelize_bricks(self.vertices, self.triangles, whole, "surface")[0]
        return self._surface

    def touched(self, run_keys, context):
        """bool (host) per brick key *run_keys*: whether a triangle's conservative test
        may cover one of its voxels (it holds a surface voxel)."""
        import cupy as cp

        run_keys = np.asarray(run_keys)
        keys = self.surface_keys()
        if len(run_keys) == 0 or keys.shape[0] == 0:
            return np.zeros(len(run_keys), bool)
        rk = cp.asarray(run_keys)
        at = cp.minimum(cp.searchsorted(keys, rk), keys.shape[0] - 1)
        return cp.asnumpy(keys[at] == rk)

    def owners(self, ijk, box=None):
        """int32 (host) owner triangle of each voxel *ijk* ((m, 3) int64, the set voxels
        of whole rows of bricks), in the order given; −1 where the row holds no owned
        voxel (``OwnerMesh.owners``)."""
        import cupy as cp

        from . import gpu

        ijk = np.asarray(ijk, np.int64)
        if len(ijk) == 0:
            return np.zeros(0, np.int32)
        lo, hi = box[:2] if box is not None else self.box_of(ijk.min(axis=0) // BRICK, ijk.max(axis=0) // BRICK)
        nx, ny = int(hi[0] - lo[0]), int(hi[1] - lo[1])
        rel = ijk - lo
        linear = (rel[:, 2] * ny + rel[:, 1]) * nx + rel[:, 0]
        order = np.argsort(linear, kind="stable")
        linear = linear[order]
        owner = cp.full(len(linear), np.iinfo(np.int32).max, cp.int32)
        m = self.mesh
        if m.n_tris:
            counts, ends = m.counts("surface", (lo, hi))
            total = int(ends[-1])  # sync
            gx, gy, gz = m.shape
            if total:
                gpu._K.launch("surface_owners", total, (m.pv, m.tris, ends, counts, np.int64(m.n_tris),
                                                        np.int64(total), np.int32(gx), np.int32(gy), np.int32(gz),
                                                        *gpu.box_args(m.shape, (lo, hi))[0],
                                                        *gpu.box_args(m.shape, (lo, hi))[1], cp.asarray(linear),
                                                        np.int64(len(linear)), owner))
        filled = fill_along_rows(cp.asnumpy(owner).astype(np.int64), linear // nx)
        out = np.empty(len(ijk), np.int32)
        out[order] = filled
        return out
