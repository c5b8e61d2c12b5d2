"""Mesh → voxels (seed 004 §3–4): conservative or thin surface, solid, solid+surface.

    from voxfx.kernels.voxelize import voxelize
    result = voxelize(vertices, triangles, spec, mode="solid+surface")
    result.bits          # packed bit grid (nz, ny, ceil(nx/32)) uint32, NumPy
    result.count()       # voxels set

    big = voxelize(vertices, triangles, spec, mode="solid", sparse="auto")
    big.count(), big.nbytes, big.active_bricks   # a SparseVoxels where sparse pays
    big.to_dense()       # the same VoxelGrid the dense path gives (small grids only)

Inputs are world-space arrays (metres): ``vertices`` (V, 3) float, ``triangles`` (T, 3)
int, and a ``GridSpec`` (origin, voxel size, shape). Runs on the current backend (GPU
when CUDA works) or the one forced by ``xp=numpy`` / ``xp=cupy``; both give identical
voxels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

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


# Host bytes of the NumPy path, counted from its arrays and checked by bench/memory.py:
# per triangle, the setup arrays (vertices, edges, normal, 3×3 edge functions, boxes, in
# float64) and their temporaries; per work item of a batch (surface.CHUNK_ITEMS at most),
# owner / local / column arrays and, for the surface pass, its depth candidates (about
# three per column) with the exact test's filters (kernel peak over work items, fresh
# process, Resolution 112–560: 335–396 B for Suzanne, torus and UV sphere, 200–290 B for
# the axis-aligned cube whose faces lie on voxel planes, now that ties are decided
# exactly in chunks of triangles.UNSURE_CHUNK; 510–600 B before that). The guard's
# promise is that a size it accepts runs, so the surface pass counts the worst case; the
# solid pass's crossing columns take 135–145 B.
CPU_BYTES_PER_TRIANGLE = 700
CPU_BYTES_PER_SURFACE_ITEM = 400
CPU_BYTES_PER_SOLID_ITEM = 160


class WorkItems(NamedTuple):
    """Work items of the largest CPU batch of each pass (0 for a pass the mode skips)."""

    surface: int
    solid: int

    def batch_bytes(self) -> int:
        """Peak bytes of the largest batch: the passes run one after the other."""
        return max(CPU_BYTES_PER_SURFACE_ITEM * self.surface, CPU_BYTES_PER_SOLID_ITEM * self.solid)

    @classmethod
    def most(cls, mode: str) -> "WorkItems":
        """The most a batch holds, for a mode (when the triangles are not read)."""
        from .surface import CHUNK_ITEMS

        return cls(CHUNK_ITEMS if mode != "solid" else 0,
                   CHUNK_ITEMS if mode in ("solid", "solid+surface") else 0)


def work_items(vertices, triangles, spec: GridSpec, mode: str) -> WorkItems:
    """Work items of the largest CPU batch of each pass: the column count of the surface
    and solid passes, capped by the batch size. Exact, from the triangles' boxes (a few
    hundred bytes per triangle at a time)."""
    from .surface import CHUNK_ITEMS, column_counts
    from .triangles import touched_boxes

    vertices = np.asarray(backend.to_numpy(vertices))
    triangles = np.asarray(backend.to_numpy(triangles)).astype(np.int64, copy=False)
    if len(triangles) == 0:
        return WorkItems(0, 0)
    pv = to_voxel_units(vertices, spec.origin, spec.voxel_size)
    surf = sol = single_surf = single_sol = 0
    for t0 in range(0, len(triangles), 1 << 16):
        tri = triangles[t0:t0 + (1 << 16)]
        if mode in ("surface", "thin", "solid+surface"):
            cols = column_counts(touched_boxes(pv, tri, spec.shape))
            surf += int(cols.sum())
            single_surf = max(single_surf, int(cols.max()))
        if mode in ("solid", "solid+surface"):  # columns of the yz boxes (an upper bound)
            y, z = pv[tri][:, :, 1], pv[tri][:, :, 2]
            wj = np.clip(np.floor(y.max(1) - 0.5) - np.ceil(y.min(1) - 0.5) + 1, 0, spec.shape[1])
            wk = np.clip(np.floor(z.max(1) - 0.5) - np.ceil(z.min(1) - 0.5) + 1, 0, spec.shape[2])
            cols = wj * wk
            sol += int(cols.sum())
            single_sol = max(single_sol, int(cols.max()))
    # a batch holds up to CHUNK_ITEMS items, or one triangle's when it alone has more
    return WorkItems(max(min(surf, CHUNK_ITEMS), single_surf), max(min(sol, CHUNK_ITEMS), single_sol))


def estimate_bytes(spec: GridSpec, mode: str, n_vertices: int, n_triangles: int, vote: bool = False,
                   xp=None, items: WorkItems | None = None) -> int:
    """Peak memory of ``voxelize`` for these settings (before allocating), on the device
    of *xp* (default: the current backend's). Every array of the path is counted:

    GPU (``gpu.voxelize_gpu``): the input vertices (up to float64) and their float64 copy
    in voxel units (24 B/vertex each, two more permuted copies for the vote), int32
    triangles (12 B), an int64 count and its int64 scan per triangle and pass (16 B; one
    surface pass, one or three solid passes), the scan shifted for a batched launch (8 B,
    one at a time, ``gpu.launch_columns``); the bit grid W (a pass's new grid reuses
    the old one's pool block); for the vote, a second bit grid, the uint8 vote grid and one unpacked axis or the ``≥ 2``
    mask at a time (2 B/voxel) and two bit grids.

    CPU (NumPy): vertices in voxel units, the triangle setup, the largest batch of work
    items of either pass (*items*, default the most a batch holds) and two bit grids; for the vote, the vote
    grid, one axis unpacked (uint8 then bool) or the mask and its padded copy (3 B per
    voxel of the padded rows).
    """
    xp = xp or backend.xp()
    W = bitgrid.nbytes(spec.shape)
    G = spec.voxel_count
    nv, nt = int(n_vertices), int(n_triangles)
    solid = mode in ("solid", "solid+surface")
    if xp is not np:
        passes = (3 if (solid and vote) else 1 if solid else 0) + (1 if mode != "solid" else 0)
        geometry = 24 * nv + 24 * nv + 12 * nt + 16 * nt * passes + 8 * nt + (48 * nv if solid and vote else 0)
        # One bit grid: a pass's new grid takes the old one's pool block (measured on an H100,
        # CuPy 14.2: peak / W = 1.00 for surface, solid and solid+surface, 256³–1024³).
        grids = W + (W + 2 * G + W if solid and vote else 0)
        return int(geometry + grids)
    items = WorkItems.most(mode) if items is None else items
    padded = 32 * (W // 4)  # voxels of the rows padded to whole words
    geometry = 24 * nv + CPU_BYTES_PER_TRIANGLE * nt
    batch = items.batch_bytes()
    grids = 2 * W
    if solid and vote:
        grids = max(grids, 3 * padded + 2 * W)
    return int(geometry + max(batch + 2 * W, grids))


def voxelize(vertices, triangles, spec: GridSpec, mode: str = "surface", *, vote: bool = False, xp=None,
             keep_on_device: bool = False, progress=None, sparse=False):
    """Voxelize a triangle mesh into a packed bit grid (a ``VoxelGrid``), or into 8³ bricks
    (a ``sparse_result.SparseVoxels``) with *sparse*.

    mode: ``surface`` (conservative, 26-separating: every voxel a triangle touches),
    ``thin`` (6-separating, §3.4), ``solid`` (voxel centres inside, §4.1) or
    ``solid+surface`` (their union, §4). *vote* uses the 3-axis majority vote for solid
    voxels, which tolerates small holes in meshes that are not closed.

    sparse: ``False`` (dense), ``True`` (sparse: the same voxels, bit for bit, in every
    mode and with the vote; memory follows the surface, seed 004 §5) or ``"auto"``:
    sparse where the dense path would not fit in memory and, on the CPU, above
    ``sparse_result.AUTO_CPU_VOXELS`` grid voxels (1024³; measured, bench/RESULTS.md).
    Coverage and loose edges are separate passes, not modes of this function: on a dense
    grid ``coverage.py`` and ``lines.py``, on a sparse result ``sparse_coverage.py``
    (from a sparse solid 4× finer) and ``sparse_lines.py`` (segments OR-ed into bricks).
    A sparse grid too big for memory is refused before allocating (``sparse_guard``),
    naming the largest size that fits.
    """
    if mode not in MODES:
        raise InputError(f"voxelization mode must be one of {', '.join(MODES)}, not {mode!r}")
    xp = xp or backend.xp()
    on_gpu = xp is not np
    if sparse is not False:
        from .sparse_result import choose_sparse

        dense_need = estimate_bytes(spec, mode, len(vertices), len(triangles), vote, xp=xp)
        if choose_sparse(sparse, spec, dense_need, backend.usable_bytes(xp), xp):
            return _voxelize_sparse(vertices, triangles, spec, mode, vote, xp, keep_on_device, progress)
    items = None
    if not on_gpu:  # inputs checked first: the work-item count reads them
        vertices = np.asarray(backend.to_numpy(vertices))
        triangles = np.asarray(backend.to_numpy(triangles)).astype(np.int64, copy=False)
        check_inputs(vertices, triangles)
        items = work_items(vertices, triangles, spec, mode)
    backend.ensure_fits(estimate_bytes(spec, mode, len(vertices), len(triangles), vote, xp=xp, items=items),
                        f"voxelizing {len(triangles):,} triangles into {'×'.join(map(str, spec.shape))} voxels", xp=xp)
    report(progress, 0.0, "voxelizing")
    if on_gpu:  # checks, unit conversion and all passes on the device, one host sync
        check_shapes(vertices, triangles)
        bits = gpu.voxelize_gpu(vertices, triangles, spec, mode, vote, progress)
        if not keep_on_device:
            bits = backend.to_host(bits)
    else:
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


def _voxelize_sparse(vertices, triangles, spec, mode, vote, xp, keep_on_device, progress):
    from .sparse import voxelize_sparse
    from .sparse_guard import check_sparse
    from .sparse_result import SparseVoxels, clip_to_shape, to_host

    vertices = np.asarray(backend.to_numpy(vertices))
    triangles = np.asarray(backend.to_numpy(triangles)).astype(np.int64, copy=False)
    check_inputs(vertices, triangles)
    check_sparse(vertices, triangles, spec, mode, vote, xp)
    report(progress, 0.0, "voxelizing (sparse)")
    grid = voxelize_sparse(vertices, triangles, spec, mode, vote=vote, xp=xp, progress=progress, tiles=True)
    result = SparseVoxels(spec, clip_to_shape(grid, spec.shape))
    report(progress, 1.0, "voxelized")
    return result if keep_on_device else to_host(result)
