"""Where a voxel grid sits in the world.

Voxel (i, j, k) covers ``origin + [i, i+1) * voxel_size`` along x (likewise y, z), so its
centre is ``origin + (index + 0.5) * voxel_size``. Arrays indexed by voxel are laid out
``[k, j, i]`` (z slowest, x fastest: x rows are contiguous, as bit grids pack x).
OpenVDB puts voxel centres at integer index coordinates, so a VDB transform for this
grid is a uniform scale by ``voxel_size`` and a translation to the centre of voxel 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError


@dataclass(frozen=True)
class GridSpec:
    origin: tuple  # world position (metres) of the min corner of voxel (0, 0, 0)
    voxel_size: float  # edge length in metres
    shape: tuple  # (nx, ny, nz) voxel counts

    def __post_init__(self):
        vs = float(self.voxel_size)
        if not np.isfinite(vs) or vs <= 0.0:
            raise InputError(f"voxel size must be a positive number of metres, not {self.voxel_size!r}")
        origin = tuple(float(v) for v in self.origin)
        if len(origin) != 3 or not all(np.isfinite(origin)):
            raise InputError(f"grid origin must be three finite numbers, not {self.origin!r}")
        shape = tuple(int(n) for n in self.shape)
        if len(shape) != 3 or min(shape) < 1:
            raise InputError(f"grid shape must be three positive counts, not {self.shape!r}")
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "voxel_size", vs)
        object.__setattr__(self, "shape", shape)

    @classmethod
    def around(cls, lo, hi, voxel_size: float, padding: int = 1) -> "GridSpec":
        """The smallest grid of *voxel_size* covering the box lo..hi plus *padding* voxels."""
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        vs = float(voxel_size)
        if not np.isfinite(vs) or vs <= 0.0:
            raise InputError(f"voxel size must be a positive number of metres, not {voxel_size!r}")
        shape = np.maximum(np.ceil((hi - lo) / vs).astype(np.int64), 1) + 2 * padding
        return cls(tuple(lo - padding * vs), vs, tuple(int(n) for n in shape))

    @property
    def array_shape(self) -> tuple:
        """Shape of a dense per-voxel array: (nz, ny, nx)."""
        nx, ny, nz = self.shape
        return (nz, ny, nx)

    @property
    def voxel_count(self) -> int:
        nx, ny, nz = self.shape
        return nx * ny * nz

    @property
    def upper(self) -> tuple:
        """World position of the max corner of the grid."""
        return tuple(o + n * self.voxel_size for o, n in zip(self.origin, self.shape))

    def centers(self, ijk):
        """World centres of voxels given as (N, 3) integer (i, j, k) indices."""
        ijk = np.asarray(ijk)
        return (np.asarray(self.origin) + (ijk + 0.5) * self.voxel_size).astype(np.float32)

    def index_of(self, points):
        """Integer (i, j, k) of the voxels containing world *points* (N, 3)."""
        p = (np.asarray(points, dtype=np.float64) - np.asarray(self.origin)) / self.voxel_size
        return np.floor(p).astype(np.int64)

    def vdb_translation(self) -> tuple:
        """World position of voxel (0,0,0)'s centre: the translation of a VDB transform."""
        return tuple(o + 0.5 * self.voxel_size for o in self.origin)

    def index_to_world_matrix(self) -> np.ndarray:
        """4×4 matrix taking VDB index coordinates (voxel centres) to world metres."""
        m = np.eye(4)
        m[0, 0] = m[1, 1] = m[2, 2] = self.voxel_size
        m[:3, 3] = self.vdb_translation()
        return m
