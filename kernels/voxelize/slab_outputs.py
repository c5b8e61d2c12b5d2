"""Block mesh and MagicaVoxel output of a voxel grid a z-slab at a time (issue 21 §6): the
per-voxel attribute stage bounded by a slab instead of the grid, equal to the unsplit
outputs.

The packed bit grid is kept whole (1 bit per voxel: 128 MiB at 1024³). Per slab of rows
k0..k1:

* owners (``slabs.owners_box``): the smallest triangle whose conservative test covers a
  set voxel, else the nearest owned set voxel's before it in its x row, else after it
  (``attributes.fill_along_rows``). An x row lies in one slab whole, so this row fill —
  which is what gives the solid's exposed voxels no triangle touches their owner — is
  decided per slab exactly as on the whole grid;
* exterior faces (``slab_faces``): a face of a voxel in the slab is kept when its
  neighbour is empty, the neighbours across the slab's top and bottom read from the
  rows k1 and k0 − 1 of the whole grid, so faces between slabs are decided as unsplit.
  ``BlockBuilder`` welds corners slab by slab (a lattice point of the plane z = k1 is
  shared with the slab above: it is numbered once that slab is seen) and finally orders
  faces as ``blocks.exterior_faces`` does (by direction, then linear voxel order):
  vertices, quads, ``voxel_of_face`` and directions are those of the unsplit mesh.

For .vox, the colour of a voxel is a function of its owner triangle, so one pass counts
voxels per owner (the palette: ``vox_export.quantize_histogram`` of those counts is what
``quantize_colors`` makes of every voxel's colour) and a second pass writes the
voxels' colour indices into their models (``vox_export.write_vox_slabs``).
"""

from __future__ import annotations

import numpy as np

from ..grid import GridSpec
from .blocks import CORNER_OFFSETS, BlockMesh, _exposed, _linear, _popcount, _set_bit_positions, _voxel_of_bit


def row_counts(bits, faces: bool):
    """Per z row of the bit grid: (set voxels, exterior faces or None), int64 [nz]; the
    faces of each row with its neighbour rows, a few rows at a time."""
    nz = bits.shape[0]
    voxels = _popcount(bits).sum(axis=(1, 2), dtype=np.int64) if nz else np.zeros(0, np.int64)
    if not faces:
        return voxels, None
    per_row = np.zeros(nz, np.int64)
    step = max(1, (1 << 22) // max(bits[0].size, 1))
    for k0 in range(0, nz, step):
        k1 = min(nz, k0 + step)
        for exposed in slab_exposed(bits, k0, k1):
            per_row[k0:k1] += _popcount(exposed).sum(axis=(1, 2), dtype=np.int64)
    return voxels, per_row


def slab_exposed(bits, k0: int, k1: int):
    """The six exposed-face bit grids (``blocks._exposed``) of rows k0..k1 of the whole
    grid *bits*, their ±z neighbours read from rows k0 − 1 and k1."""
    a, b = max(k0 - 1, 0), min(k1 + 1, bits.shape[0])
    ext = bits[a:b]
    return [_exposed(ext, d, np)[k0 - a:k1 - a] for d in range(6)]


def slab_faces(bits, spec: GridSpec, k0: int, k1: int):
    """The exterior faces of the voxels of rows k0..k1: (keys (F, 4) int64 lattice keys of
    the whole grid, voxel (F,) int64 rank among the slab's set voxels, direction (F,)
    int8), in ``exterior_faces``' order within the slab."""
    nx, ny, nz = spec.shape
    slab = bits[k0:k1]
    flat = slab.reshape(-1)
    per_word = _popcount(flat).astype(np.int64)
    word_rank = np.cumsum(per_word) - per_word
    lattice = (nx + 1, ny + 1, nz + 1)
    offset_keys = _linear(CORNER_OFFSETS.reshape(-1, 3), lattice, np).reshape(6, 4)
    keys, voxel, direction = [], [], []
    for d, exposed in enumerate(slab_exposed(bits, k0, k1)):
        word, bit = _set_bit_positions(exposed, np)
        below = flat[word] & ((np.uint32(1) << bit) - np.uint32(1))
        voxel.append(word_rank[word] + _popcount(below))
        ijk = _voxel_of_bit(word, bit, (nx, ny, k1 - k0), np)
        ijk[:, 2] += k0
        keys.append(_linear(ijk, lattice, np)[:, None] + offset_keys[d][None, :])
        direction.append(np.full(len(word), d, dtype=np.int8))
    return (np.concatenate(keys), np.concatenate(voxel).astype(np.int64), np.concatenate(direction))


class BlockBuilder:
    """The block mesh of a grid from its slabs, bottom to top (``add``), then ``finish``:
    equal to ``exterior_faces(bits, spec)`` array for array, with a per-face value
    (the material) carried along."""

    def __init__(self, spec: GridSpec):
        self.spec = spec
        nx, ny, _ = spec.shape
        self.plane = (nx + 1) * (ny + 1)  # keys per lattice plane z = const
        self.base = 0  # vertices numbered so far
        self.carried = np.zeros(0, np.int64)  # keys of the plane shared with the next slab
        self.pending = None  # the last slab's (keys, its base, its own vertex keys, boundary)
        self.vertices, self.quads, self.voxel, self.direction, self.values = [], [], [], [], []

    def add(self, k0: int, k1: int, keys, voxel, direction, values) -> None:
        """One slab's faces (``slab_faces``; *voxel* already offset to the whole grid's
        rank) and a value per face."""
        nz = self.spec.shape[2]
        merged = np.unique(np.concatenate([self.carried, keys.reshape(-1)]))
        boundary = k1 * self.plane if k1 < nz else np.iinfo(np.int64).max
        n_own = int(np.searchsorted(merged, boundary))
        own, self.carried = merged[:n_own], merged[n_own:]
        self._resolve(merged)
        self.pending = (keys, self.base, own, boundary)
        self.vertices.append(self._positions(own))
        self.base += len(own)
        self.voxel.append(voxel)
        self.direction.append(direction)
        self.values.append(values)

    def _resolve(self, next_keys):
        """Number the last slab's corners: its own vertices, or the next slab's (*next_keys*,
        numbered from the current base) for the shared plane."""
        if self.pending is None:
            return
        keys, base, own, boundary = self.pending
        low = keys < boundary
        index = np.empty(keys.shape, np.int64)
        index[low] = base + np.searchsorted(own, keys[low])
        index[~low] = self.base + np.searchsorted(next_keys, keys[~low])
        self.quads.append(index.astype(np.int32))
        self.pending = None

    def _positions(self, keys):
        nx, ny, _ = self.spec.shape
        ci = keys % (nx + 1)
        cj = (keys // (nx + 1)) % (ny + 1)
        ck = keys // ((nx + 1) * (ny + 1))
        points = np.stack([ci, cj, ck], axis=1).astype(np.float64)
        return (np.asarray(self.spec.origin, dtype=np.float64) + points * self.spec.voxel_size).astype(np.float32)

    def finish(self):
        """(BlockMesh, values per face), faces in ``exterior_faces``' order."""
        self._resolve(np.zeros(0, np.int64))
        direction = np.concatenate(self.direction) if self.direction else np.zeros(0, np.int8)
        order = np.argsort(direction, kind="stable")  # slab-major → direction-major, linear within
        cat = lambda parts, shape, dtype: np.concatenate(parts) if parts else np.zeros(shape, dtype)  # noqa: E731
        mesh = BlockMesh(cat(self.vertices, (0, 3), np.float32), cat(self.quads, (0, 4), np.int32)[order],
                         cat(self.voxel, 0, np.int64)[order], direction[order])
        values = cat(self.values, 0, np.int32)[order]
        self.vertices = self.quads = self.voxel = self.direction = self.values = None
        return mesh, values


def block_output_bytes(faces: int, vertices: int | None = None):
    """(built, finishing): host bytes of the split block mesh of *faces* faces once built —
    float32 vertices (at most four per face), int32 quads, int64 voxel, int8 direction and
    int32 material per face — and at its peak in ``BlockBuilder.finish`` (those, the
    argsort and a reordered copy of the largest array)."""
    vertices = 4 * faces if vertices is None else vertices
    built = 12 * vertices + (16 + 8 + 1 + 4) * faces
    return int(built), int(built + (8 + 16) * faces)


# ------------------------------------------------------------------ the split job

MODEL_SIZE = 256  # voxels per axis of a MagicaVoxel model (vox_export.MAX_MODEL_SIZE)


def tile_keys(ijk, shape, model_size: int = MODEL_SIZE):
    """(tile key per voxel, tiles per axis): tiles of *model_size* voxels per axis in
    (z, y, x) order, the order of ``vox_export.split_models``."""
    shape = np.asarray(shape, dtype=np.int64)
    tiles = -(-shape // model_size)
    tile = np.asarray(ijk, dtype=np.int64) // model_size
    return (tile[:, 2] * tiles[1] + tile[:, 1]) * tiles[0] + tile[:, 0], tiles


def owner_tables(soup, table):
    """Per owner triangle + 1 (row 0: no owner): (int32 material, float32 RGBA colour),
    the values ``outputs.voxel_attributes`` gives a voxel of that owner."""
    from .outputs import colors_of

    T = len(soup.triangles)
    material = np.empty(T + 1, np.int32)
    material[0] = -1
    material[1:] = soup.material_index[:T]
    color = colors_of(table, material)
    if soup.corner_colors is not None and any(soup.colored_objects or ()):
        from_attribute = np.zeros(T + 1, bool)
        from_attribute[1:] = np.asarray(soup.colored_objects, bool)[soup.object_index[:T]]
        corner = soup.corner_colors[np.flatnonzero(from_attribute[1:])]
        color[from_attribute] = corner.mean(axis=1).astype(np.float32)
    return material, color


def split_attribute_outputs(soup, spec: GridSpec, bits, layers: int, outputs, table, write_vox=None,
                            progress=None, model_size: int = MODEL_SIZE, art=None):
    """Blocks and .vox of a whole packed bit grid *bits*, z-slab by z-slab of *layers* rows:
    ``(BlockMesh and its face materials, or None; what write_vox returned, or None)``.

    *write_vox(per_tile, owner_counts, owner_colors, slabs)* writes the file: voxels per
    tile (``tile_keys``), voxels per owner + 1 and the colour per owner + 1 (its palette),
    and ``slabs(index_of_owner)``, a generator of ``(ijk, colour index)`` per slab (a
    second pass: owners are computed again rather than kept for every voxel).

    *art* (``art_outputs.SlabArt``, issue 15) takes each slab's owners for its colours
    (texture colours), merged block faces and .vox palette; the file is then written
    with ``write_vox(..., palette=art.vox_palette())`` and ``slabs(None)``."""
    from ..grid import bitgrid
    from ..progress import report
    from .slabs import SplitMesh, owners_box, slab_ranges

    mesh = SplitMesh(soup.vertices, soup.triangles, spec)
    nx, ny, nz = spec.shape
    material_of, color_of = owner_tables(soup, table)
    builder = BlockBuilder(spec) if "blocks" in outputs and not (art is not None and art.merges) else None
    vox = "vox" in outputs and write_vox is not None
    ranges = slab_ranges(nz, layers)
    owner_counts = np.zeros(len(material_of), np.int64)
    _, tiles = tile_keys(np.zeros((0, 3)), spec.shape, model_size)
    per_tile = np.zeros(int(np.prod(tiles)), np.int64)
    passes = 2 if vox else 1
    base = 0
    for n, (k0, k1) in enumerate(ranges):
        slab = bits[k0:k1]
        owner = owners_box(mesh, (0, 0, k0), (nx, ny, k1), slab)
        if art is not None:  # issue 15: this slab's colours, merged faces, palette counts (art_outputs)
            art.add_slab(bits, k0, k1, owner, base)
        if builder is not None:
            keys, rank, direction = slab_faces(bits, spec, k0, k1)
            builder.add(k0, k1, keys, rank + base, direction, np.maximum(material_of[owner[rank] + 1], 0))
            if art is not None:
                art.add_faces(rank, direction)
            del keys, rank, direction
        if vox:
            owner_counts += np.bincount(owner + 1, minlength=len(material_of))
            ijk = bitgrid.coordinates(slab, nx).astype(np.int64)
            ijk[:, 2] += k0
            per_tile += np.bincount(tile_keys(ijk, spec.shape, model_size)[0], minlength=len(per_tile))
            del ijk
        base += len(owner)
        del owner
        report(progress, (n + 1) / len(ranges) / passes, f"voxel attributes, rows {k1}/{nz}")
    blocks = builder.finish() if builder is not None else None
    if art is not None and "blocks" in outputs:
        blocks = art.blocks(blocks)
    if not vox:
        return blocks, None

    def slabs(index_of_owner):
        for n, (k0, k1) in enumerate(ranges):
            slab = bits[k0:k1]
            owner = owners_box(mesh, (0, 0, k0), (nx, ny, k1), slab)
            index = index_of_owner[owner + 1] if index_of_owner is not None else art.vox_index(k0, slab, owner)
            del owner
            ijk = bitgrid.coordinates(slab, nx).astype(np.int64)
            ijk[:, 2] += k0
            yield ijk, index
            del ijk, index  # not alive while the next slab's owners are found
            report(progress, 0.5 + 0.5 * (n + 1) / len(ranges), f"MagicaVoxel file, rows {k1}/{nz}")

    if art is not None:
        return blocks, write_vox(per_tile, owner_counts, color_of, slabs, palette=art.vox_palette())
    return blocks, write_vox(per_tile, owner_counts, color_of, slabs)
