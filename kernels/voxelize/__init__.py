"""Mesh → voxels (seed 004 §3–4): conservative or thin surface, solid, solid+surface.

    from voxfx.kernels.voxelize import voxelize
    result = voxelize(vertices, triangles, spec, mode="solid+surface")
    result.bits          # packed bit grid (nz, ny, ceil(nx/32)) uint32, NumPy
    result.count()       # voxels set

Inputs are world-space arrays (metres): ``vertices`` (V, 3) float, ``triangles`` (T, 3)
int, and a ``GridSpec`` (origin, voxel size, shape). Runs on the current backend (GPU
when CUDA works) or the one forced by ``xp=numpy`` / ``xp=cupy``; both give identical
voxels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec, bitgrid
from ..progress import report
from . import gpu
from .solid import majority_vote_cpu, solid_voxels_cpu
from .surface import surface_voxels_cpu
from .triangles import check_inputs, check_shapes, to_voxel_units

MODES = ("surface", "thin", "solid", "solid+surface")


@dataclass
class VoxelGrid:
    spec: GridSpec
    bits: object  # packed bit grid, NumPy (or CuPy with keep_on_device=True)

    def count(self) -> int:
        return bitgrid.count(self.bits)

    def dense(self):
        """bool array [k, j, i]."""
        return bitgrid.unpack(self.bits, self.spec.shape[0])

    def coordinates(self):
        """(N, 3) int32 voxel indices (i, j, k) of set voxels, in linear order."""
        return bitgrid.coordinates(self.bits, self.spec.shape[0])


def estimate_bytes(spec: GridSpec, mode: str, n_vertices: int, n_triangles: int, vote: bool = False) -> int:
    """Peak device memory of ``voxelize`` for these settings (before allocating)."""
    grid = bitgrid.nbytes(spec.shape)
    geometry = 24 * n_vertices + 12 * n_triangles + 16 * n_triangles  # float64 positions, indices, scan
    grids = 2 * grid if mode == "solid+surface" else grid
    if vote and mode in ("solid", "solid+surface"):
        grids += 2 * spec.voxel_count + 3 * grid  # uint8 votes + a transposed uint8 + three bit grids
    # Work items: a few per triangle column; bounded by the CPU batch size on the CPU.
    return int(geometry + grids + 64 * n_triangles)


def voxelize(vertices, triangles, spec: GridSpec, mode: str = "surface", *, vote: bool = False, xp=None,
             keep_on_device: bool = False, progress=None) -> VoxelGrid:
    """Voxelize a triangle mesh into a packed bit grid.

    mode: ``surface`` (conservative, 26-separating: every voxel a triangle touches),
    ``thin`` (6-separating, §3.4), ``solid`` (voxel centres inside, §4.1) or
    ``solid+surface`` (their union, §4). *vote* uses the 3-axis majority vote for solid
    voxels, which tolerates small holes in meshes that are not closed.
    """
    if mode not in MODES:
        raise InputError(f"voxelization mode must be one of {', '.join(MODES)}, not {mode!r}")
    xp = xp or backend.xp()
    on_gpu = xp is not np
    backend.ensure_fits(estimate_bytes(spec, mode, len(vertices), len(triangles), vote),
                        f"voxelizing {len(triangles):,} triangles into {'×'.join(map(str, spec.shape))} voxels", xp=xp)
    report(progress, 0.0, "voxelizing")
    if on_gpu:  # checks, unit conversion and all passes on the device, one host sync
        check_shapes(vertices, triangles)
        bits = gpu.voxelize_gpu(vertices, triangles, spec, mode, vote)
        if not keep_on_device:
            bits = backend.to_host(bits)
    else:
        vertices = np.asarray(backend.to_numpy(vertices))
        triangles = np.asarray(backend.to_numpy(triangles)).astype(np.int64, copy=False)
        check_inputs(vertices, triangles)
        pv = to_voxel_units(vertices, spec.origin, spec.voxel_size)
        shape = spec.shape
        sub = (lambda f, m: progress(0.5 * f, m)) if (progress and mode == "solid+surface") else progress
        if mode in ("solid", "solid+surface"):
            bits = (majority_vote_cpu if vote else solid_voxels_cpu)(pv, triangles, shape, sub)
            if mode == "solid+surface":
                bits |= surface_voxels_cpu(pv, triangles, shape, False,
                                           progress and (lambda f, m: progress(0.5 + 0.5 * f, m)))
        else:
            bits = surface_voxels_cpu(pv, triangles, shape, mode == "thin", progress)
    report(progress, 1.0, "voxelized")
    return VoxelGrid(spec, bits)
