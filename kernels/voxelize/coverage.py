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
from ..memory import trim_heap
from ..progress import report, scaled

SUB = 4  # supersampling per axis: 64 samples per voxel


def coverage(vertices, triangles, spec: GridSpec, *, vote: bool = False, xp=None, progress=None,
             slab_bytes: int = 256 << 20):
    """float32 [k, j, i] fraction of each voxel's 64 sub-voxel centres inside the mesh."""
    out = np.empty(spec.array_shape, dtype=np.float32)
    for k0, k1, part in coverage_slabs(vertices, triangles, spec, vote=vote, xp=xp, progress=progress,
                                       layers=slab_layers(spec, slab_bytes)):
        out[k0:k1] = part
    return out


def slab_layers(spec: GridSpec, slab_bytes: int) -> int:
    """Output layers per slab so that one slab's unpacked samples take about *slab_bytes*."""
    nx, ny, nz = spec.shape
    return max(1, min(nz, slab_bytes // max(SUB ** 3 * nx * ny, 1)))


def coverage_slabs(vertices, triangles, spec: GridSpec, *, layers: int, vote: bool = False, xp=None,
                   progress=None):
    """Yield ``(k0, k1, float32 [k1 − k0, ny, nx])``: the coverage of output rows k0..k1,
    slab by slab. The fine grid is one grid (the output's origin, a quarter of its voxel
    size) voxelized a box of fine rows at a time (``slabs.py``), so the result does not
    depend on *layers* to the last bit; the vote's z parity is carried up the slabs."""
    from .slabs import SplitMesh, slab_ranges, voxelize_box

    xp = xp or backend.xp()
    nx, ny, nz = spec.shape
    fine = GridSpec(spec.origin, spec.voxel_size / SUB, (SUB * nx, SUB * ny, SUB * nz))
    if xp is np:
        mesh = SplitMesh(vertices, triangles, fine)
        box = lambda lo, hi, carry, p: voxelize_box(mesh, lo, hi, "solid", vote=vote, carry=carry,  # noqa: E731
                                                    want_carry=True, progress=p)
    else:
        from .gpu_slabs import DeviceSplitMesh

        mesh = DeviceSplitMesh(vertices, triangles, fine)
        box = lambda lo, hi, carry, p: mesh.voxelize_box(lo, hi, "solid", vote=vote, carry=carry,  # noqa: E731
                                                         want_carry=True, progress=p)
    carry = None
    for k0, k1 in slab_ranges(nz, layers):
        bits, carry = box((0, 0, SUB * k0), (SUB * nx, SUB * ny, SUB * k1), carry,
                          scaled(progress, k0 / nz, k1 / nz) if progress else None)
        if xp is np:
            trim_heap()  # the fine pass's freed batches must not stay under the unpacked samples
        samples = bitgrid.unpack(bits, SUB * nx).view(xp.uint8)
        del bits
        counts = samples.reshape(k1 - k0, SUB, ny, SUB, nx, SUB).sum(axis=(1, 3, 5), dtype=xp.int32)
        del samples
        yield k0, k1, backend.to_numpy(counts.astype(xp.float32) / np.float32(SUB ** 3))
        report(progress, k1 / nz, "coverage")


def coverage_bytes(spec: GridSpec, n_vertices: int, n_triangles: int, vote: bool = False, xp=None,
                   slab_bytes: int = 256 << 20) -> int:
    """Peak memory of ``coverage``: the float32 result on the host and one slab
    (``coverage_slab_bytes``)."""
    layers = slab_layers(spec, slab_bytes)
    return int(4 * spec.voxel_count + coverage_slab_bytes(spec, layers, n_vertices, n_triangles, vote, xp=xp))


def coverage_slab_bytes(spec: GridSpec, layers: int, n_vertices: int, n_triangles: int, vote: bool = False,
                        xp=None) -> int:
    """Peak memory of one slab of ``coverage_slabs`` (*layers* output rows): the fine mesh
    (voxel units and reach ranges), then per slab the fine bit grid, its 64 samples per
    output voxel unpacked twice (``unpack``: the uint8 bits of whole words, then the bool
    crop), int32 counts and their float32 quotient; or, before that, the fine solid
    voxelization's own peak (its work items are those of a slab of 4×4 times more
    columns, capped by the batch size)."""
    from . import WorkItems, estimate_bytes
    from .slabs import RANGE_BYTES_PER_TRIANGLE
    from .surface import CHUNK_ITEMS

    xp = xp or backend.xp()
    nx, ny, nz = spec.shape
    layers = max(1, min(nz, int(layers)))
    fine = GridSpec(spec.origin, spec.voxel_size / SUB, (SUB * nx, SUB * ny, SUB * layers))
    samples = SUB ** 3 * nx * ny * layers
    slab_voxels = nx * ny * layers
    items = WorkItems(0, min(CHUNK_ITEMS, SUB * SUB * ny * nx))
    voxelizing = estimate_bytes(fine, "solid", n_vertices, n_triangles, vote, xp=xp, items=items)
    fine_bits = bitgrid.nbytes(fine.shape)
    if vote and xp is np:  # the y and z passes' batches run beside the vote count and an unpacked axis
        # (2 B per fine voxel): what sets a thin slab's peak (Suzanne 256, slabs of 14 rows: 162 MiB grown
        # where 3 B per voxel, the batch apart, counted 119 MiB; now 184)
        voxelizing = max(voxelizing, 2 * 32 * (fine_bits // 4) + items.batch_bytes() + 2 * fine_bits)
    unpacked = 8 * fine_bits + samples  # uint8 of the padded words, then the bool crop
    mesh = 24 * int(n_vertices) + RANGE_BYTES_PER_TRIANGLE * int(n_triangles)
    return int(mesh + max(voxelizing, fine_bits + unpacked + 12 * slab_voxels))


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
