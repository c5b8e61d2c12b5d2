"""Voxel art (issue 15) on results held in parts: a grid split into z-slabs
(``slab_outputs``) and a sparse one (``sparse_outputs``). No ``bpy`` here; the add-on's
``voxel_art`` reads the settings and images and calls in.

What the unsplit dense path does with the whole grid (``addon/voxel_art.apply``), done
a part at a time, with the same result:

* **Colours** of a voxel are a function of its owner triangle (``slab_outputs.
  owner_tables``: the colour attribute's mean or the material's colour) or, with
  texture colours, of its owner and its centre (``texture.TexturedMesh``, prepared once
  for every part). Owners per slab are the unsplit owners (``slabs.owners_box``), per
  brick chunk those of ``sparse_attributes.OwnerMesh``.
* **Merged block faces** (``greedy.GreedyBuilder``): each slab's exposed faces become
  runs along their plane's first axis; runs cut by a slab border are joined and the
  rectangles stacked at the end, so the split mesh is the unsplit greedy mesh array for
  array (vertices, quads, their voxel, direction, area), merging across slab borders.
  A sparse result's faces (its per-face block mesh) are merged all at once: the same
  mesh again, ``voxel_of_quad`` indexing its voxels in brick order.
* **The .vox palette**: the slabs' colours are counted into one ``palette.
  ColorHistogram`` (exact fixed-point sums: the parts' order does not matter), whose
  k-means palette is the unsplit ``quantize``'s; a second pass finds each voxel's entry
  from its colour. With a palette image, each voxel takes its nearest entry, as unsplit.
  The file is then the unsplit one byte for byte.

    art = SlabArt(settings, soup, spec, table, outputs)      # the split job's hooks
    split_attribute_outputs(..., art=art); art.finish(group_arrays)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..grid import GridSpec, bitgrid
from .blocks import _popcount, _set_bit_positions, _voxel_of_bit
from .greedy import GreedyBuilder
from .palette import ColorHistogram, color_keys, linear_to_srgb, nearest_in_palette


@dataclass
class ArtSettings:
    """What voxel art asks of one group's outputs (the add-on's ``voxel_art.ArtInputs``,
    arrays only)."""

    color_source: str = "ATTRIBUTE"  # "ATTRIBUTE", "MATERIAL" or "TEXTURE"
    greedy: bool = False
    palette: np.ndarray | None = None  # (P, 4) linear palette of an image, or None: automatic
    textured: object = None  # texture.TexturedMesh of the group's soup, or None


def labels(material, rgba) -> np.ndarray:
    """(N,) int64 merge label per voxel: its material and its colour at .vox precision
    (``palette.color_keys``), ((material + 1) << 32) | key. Faces merge only within one
    label, so the merged mesh looks like the per-face one to the last bit a .vox or an
    8-bit display keeps; the labels sort as (material, colour bytes)."""
    material = np.asarray(material, np.int64)
    if len(material) == 0:
        return np.zeros(0, np.int64)
    return ((material + 1) << 32) | color_keys(np.asarray(rgba))


def palette_bytes(palette) -> np.ndarray:
    """(P, 4) uint8 sRGB bytes (alpha linear) of a linear palette: what a .vox holds."""
    palette = np.asarray(palette, np.float64)
    rgba8 = np.round(np.concatenate([linear_to_srgb(palette[:, :3]), np.clip(palette[:, 3:4], 0, 1)], 1) * 255)
    return rgba8.astype(np.uint8)


def face_colors_wanted(settings: ArtSettings, outputs) -> bool:
    """Whether the block mesh gets a face ``color``: as the unsplit path gives it."""
    return "blocks" in outputs and (bool(outputs & {"points", "vox"}) or settings.greedy
                                    or settings.color_source == "TEXTURE")


def slab_exposed_faces(bits, spec: GridSpec, k0: int, k1: int):
    """Per direction d: (d, ijk (F, 3) int64 of the whole grid, rank (F,) int64 among the
    slab's set voxels in linear order) of the exterior faces of the voxels of rows
    k0..k1 of the whole packed grid *bits* (neighbours across the slab's top and bottom
    read from the whole grid, as ``slab_outputs.slab_exposed``)."""
    from .slab_outputs import slab_exposed

    nx, ny, _ = spec.shape
    flat = bits[k0:k1].reshape(-1)
    per_word = _popcount(flat).astype(np.int64)
    word_rank = np.cumsum(per_word) - per_word
    for d, exposed in enumerate(slab_exposed(bits, k0, k1)):
        word, bit = _set_bit_positions(exposed, np)
        below = flat[word] & ((np.uint32(1) << bit) - np.uint32(1))
        ijk = _voxel_of_bit(word, bit, (nx, ny, k1 - k0), np).astype(np.int64)
        ijk[:, 2] += k0
        yield d, ijk, (word_rank[word] + _popcount(below)).astype(np.int64)


class SlabArt:
    """The voxel art of a grid split into z-slabs: ``slab_outputs.split_attribute_outputs``
    calls ``add_slab`` per slab (its owners), ``add_faces`` per slab of the per-face
    mesh, ``blocks`` at the end, and for the .vox ``vox_palette`` once and ``vox_index``
    per slab of its second pass; ``finish`` puts the face colours and the note on the
    group's arrays."""

    def __init__(self, settings: ArtSettings, soup, spec: GridSpec, table, outputs):
        from .outputs import colors_of
        from .slab_outputs import owner_tables

        self.settings, self.spec = settings, spec
        self.material_of, self.color_of = owner_tables(soup, table)  # per owner + 1
        self.material_color_of = colors_of(table, self.material_of)
        self.builder = GreedyBuilder(spec) if settings.greedy and "blocks" in outputs else None
        self.face_colors = face_colors_wanted(settings, outputs) and self.builder is None
        self.histogram = ColorHistogram() if "vox" in outputs and settings.palette is None else None
        self.rgba = None  # the current slab's colours
        self.face_rgba, self.face_direction = [], []
        self.face_color, self.notes, self.label_of_entry = None, [], None

    @property
    def merges(self) -> bool:
        """True where the merged mesh replaces the per-face one (no ``BlockBuilder``)."""
        return self.builder is not None

    def colors(self, k0: int, slab, owner) -> np.ndarray:
        """(n, 4) float32 colour of the slab's set voxels (linear order) of rows k0.. from
        their owners *owner* (n,): the unsplit path's colour of each."""
        by_owner = self.color_of if self.settings.color_source == "ATTRIBUTE" else self.material_color_of
        rgba = by_owner[np.asarray(owner, np.int64) + 1].astype(np.float32)
        textured = self.settings.textured
        if self.settings.color_source == "TEXTURE" and textured is not None and len(rgba):
            ijk = bitgrid.coordinates(np.asarray(slab), self.spec.shape[0]).astype(np.int64)
            ijk[:, 2] += k0
            rgba = textured.recolor(self.spec, ijk, owner, rgba)
        return rgba

    def add_slab(self, bits, k0: int, k1: int, owner, base: int) -> None:
        """Rows k0..k1 of the whole packed grid *bits*, their set voxels' owners *owner*
        (linear order), *base* set voxels below the slab."""
        rgba = self.colors(k0, bits[k0:k1], owner)
        if self.histogram is not None:
            self.histogram.add(rgba)
        if self.builder is not None:
            label = labels(self.material_of[np.asarray(owner, np.int64) + 1], rgba)
            for d, ijk, rank in slab_exposed_faces(bits, self.spec, k0, k1):
                self.builder.add(d, ijk, label[rank], rank + base, rgba[rank])
        self.rgba = rgba if self.face_colors else None

    def add_faces(self, rank, direction) -> None:
        """The per-face mesh's faces of the slab last added (``slab_outputs.slab_faces``:
        *rank* among its voxels, *direction*): their colours, in that order."""
        if self.face_colors:
            self.face_rgba.append(self.rgba[rank])
            self.face_direction.append(direction)

    def blocks(self, blocks):
        """The split job's (block mesh, face material): the merged mesh of the slabs'
        faces, or *blocks* (``BlockBuilder.finish``) as they are, their colours put in
        the faces' final order (``BlockBuilder.finish``: by direction, stable)."""
        if self.builder is not None:
            mesh, self.face_color = self.builder.finish()
            self.builder = None
            self.notes.append(f"Block mesh: {mesh.quad_count:,} faces ({mesh.faces_before:,} before merging)")
            return mesh, np.maximum((mesh.label_of_quad >> 32) - 1, 0).astype(np.int32)
        if self.face_colors and self.face_rgba:
            order = np.argsort(np.concatenate(self.face_direction), kind="stable")
            self.face_color = np.concatenate(self.face_rgba)[order]
        self.face_rgba = self.face_direction = None
        return blocks

    def vox_palette(self) -> np.ndarray:
        """(P, 4) uint8 the .vox palette (sRGB bytes), fixed from the slabs' colours."""
        if self.settings.palette is not None:
            return palette_bytes(self.settings.palette)
        palette, self.label_of_entry = self.histogram.quantize()
        return palette_bytes(palette)

    def vox_index(self, k0: int, slab, owner) -> np.ndarray:
        """(n,) uint8 colour index 1..255 of the slab's voxels (second pass)."""
        rgba = self.colors(k0, slab, owner)
        if self.settings.palette is not None:
            return (nearest_in_palette(rgba, self.settings.palette) + 1).astype(np.uint8)
        return (self.label_of_entry[self.histogram.index_of(rgba)] + 1).astype(np.uint8)

    def finish(self, arrays) -> None:
        """The face colours and notes onto the group's arrays (``outputs.GroupArrays``)."""
        if self.face_color is not None:
            arrays.face_color = self.face_color
        arrays.warnings.extend(self.notes)


# ------------------------------------------------------------------ sparse results

def sparse_texture_colors(result, soup, spec: GridSpec, textured, rgba, progress=None) -> np.ndarray:
    """*rgba* (N, 4) of a sparse result's voxels (brick order, ``SparseVoxels``) with the
    textured ones given their texture's colour, a chunk of brick rows at a time (owners
    from ``sparse_attributes.OwnerMesh``, as the sparse attributes had them)."""
    from ..progress import report
    from .sparse_attributes import chunk_attributes, owner_mesh_for, row_chunks

    owner_mesh = owner_mesh_for(soup.vertices, soup.triangles, spec, result.xp)
    out = np.array(rgba, np.float32, copy=True)
    chunks = row_chunks(result)
    at = 0
    for n, (start, stop) in enumerate(chunks):
        ijk, owner = chunk_attributes(result, owner_mesh, start, stop)
        rows = slice(at, at + len(ijk))
        out[rows] = textured.recolor(spec, ijk.astype(np.int64), owner, out[rows])
        at += len(ijk)
        report(progress, (n + 1) / max(len(chunks), 1), "texture colours")
    if at != len(out):
        raise ValueError(f"the sparse result has {at} voxels, the colours {len(out)}")
    return out


def greedy_from_faces(blocks, ijk, label, spec: GridSpec):
    """The greedy mesh of a per-face block mesh *blocks* (``BlockMesh``: its faces'
    voxel and direction) over voxels *ijk* (N, 3) with merge labels *label* (N,): the
    ``greedy_faces`` mesh of the same voxels, ``voxel_of_quad`` indexing *ijk*."""
    builder = GreedyBuilder(spec)
    ijk = np.asarray(ijk, np.int64)
    voxel = np.asarray(blocks.voxel_of_face, np.int64)
    direction = np.asarray(blocks.direction_of_face)
    for d in range(6):
        v = voxel[direction == d]
        builder.add(d, ijk[v], label[v], v)
    return builder.finish()[0]
