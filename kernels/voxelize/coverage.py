"""Coverage factors (seed 004 §5.5): the fraction of each voxel inside the solid, from a
4×4×4 supersampled solid voxelization, for smooth densities in volumes.

The fine grid is processed in slabs of output voxels along z so that memory stays
bounded at any resolution: parity along x only needs the triangles crossing a slab's
rows, so each slab is an independent solid voxelization.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid import GridSpec, bitgrid
from ..progress import report, scaled

SUB = 4  # supersampling per axis: 64 samples per voxel


def coverage(vertices, triangles, spec: GridSpec, *, vote: bool = False, xp=None, progress=None,
             slab_bytes: int = 256 << 20):
    """float32 [k, j, i] fraction of each voxel's 64 sub-voxel centres inside the mesh."""
    from . import voxelize

    xp = xp or backend.xp()
    nx, ny, nz = spec.shape
    out = np.empty(spec.array_shape, dtype=np.float32)
    per_layer = SUB ** 3 * nx * ny  # uint8 samples of one output layer
    layers = max(1, min(nz, slab_bytes // max(per_layer, 1)))
    fine_vs = spec.voxel_size / SUB
    for k0 in range(0, nz, layers):
        k1 = min(nz, k0 + layers)
        origin = (spec.origin[0], spec.origin[1], spec.origin[2] + k0 * spec.voxel_size)
        fine = GridSpec(origin, fine_vs, (SUB * nx, SUB * ny, SUB * (k1 - k0)))
        solid = voxelize(vertices, triangles, fine, "solid", vote=vote, xp=xp, keep_on_device=True,
                         progress=scaled(progress, k0 / nz, k1 / nz) if progress else None)
        samples = bitgrid.unpack(solid.bits, fine.shape[0]).view(xp.uint8)
        counts = samples.reshape(k1 - k0, SUB, ny, SUB, nx, SUB).sum(axis=(1, 3, 5), dtype=xp.int32)
        out[k0:k1] = backend.to_numpy(counts.astype(xp.float32) / np.float32(SUB ** 3))
        report(progress, k1 / nz, "coverage")
    return out


def coverage_bytes(spec: GridSpec, n_vertices: int, n_triangles: int, vote: bool = False, xp=None,
                   slab_bytes: int = 256 << 20) -> int:
    """Peak memory of ``coverage``: the float32 result on the host, and per slab the fine
    bit grid, its 64 samples per output voxel unpacked twice (``unpack``: the uint8 bits
    of whole words, then the bool crop), int32 counts and their float32 quotient; or, before
    that, the fine solid voxelization's own peak (its work items are those of a slab of
    4×4 times more columns, capped by the batch size)."""
    from . import estimate_bytes
    from .surface import CHUNK_ITEMS

    xp = xp or backend.xp()
    nx, ny, nz = spec.shape
    per_layer = SUB ** 3 * nx * ny
    layers = max(1, min(nz, slab_bytes // max(per_layer, 1)))
    fine = GridSpec(spec.origin, spec.voxel_size / SUB, (SUB * nx, SUB * ny, SUB * layers))
    samples = per_layer * layers
    slab_voxels = nx * ny * layers
    items = min(CHUNK_ITEMS, SUB * SUB * ny * nx)
    voxelizing = estimate_bytes(fine, "solid", n_vertices, n_triangles, vote, xp=xp, items=items)
    fine_bits = bitgrid.nbytes(fine.shape)
    unpacked = 8 * fine_bits + samples  # uint8 of the padded words, then the bool crop
    return int(4 * spec.voxel_count + max(voxelizing, fine_bits + unpacked + 12 * slab_voxels))


def density(bits, spec: GridSpec, cover=None, chunk_words: int = 1 << 21):
    """float32 [k, j, i] density of a voxel grid for a volume: *cover* (filled in place)
    where given, with set voxels that cover nothing (thin sheets) at 0.5 so they still
    show; else 1 at set voxels. Slab by slab: no dense copy of the whole grid besides the
    result."""
    bits = np.asarray(backend.to_numpy(bits))
    nx = spec.shape[0]
    out = cover if cover is not None else np.zeros(spec.array_shape, dtype=np.float32)
    nz, ny, wx = bits.shape
    layers = max(1, chunk_words // max(ny * wx, 1))
    for k0 in range(0, nz, layers):
        k1 = min(nz, k0 + layers)
        solid = bitgrid.unpack(bits[k0:k1], nx)
        part = out[k0:k1]
        if cover is None:
            part[solid] = 1.0
        else:
            part[solid & (part == 0)] = 0.5
    return out
