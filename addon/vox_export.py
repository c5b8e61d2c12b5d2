"""Voxels → MagicaVoxel ``.vox`` files (format version 150). No ``bpy`` here.

    write_vox(path, coordinates, shape, colors=rgba)            # colours quantised to ≤ 255
    write_vox(path, coordinates, shape, color_indices=idx, palette=pal)

The file is RIFF-like: ``'VOX '``, int32 version 150, then a ``MAIN`` chunk whose children
are one ``SIZE`` + ``XYZI`` pair per model, an optional scene graph and the ``RGBA``
palette. Every chunk is id (4 bytes), content bytes (int32), children bytes (int32),
content, children; all integers little-endian. In ``XYZI`` a voxel is four bytes
x, y, z, colour index (1..255); colour index i is palette entry i − 1 of ``RGBA``
(256 entries written, the last unused).

Axes: voxel (i, j, k) of a ``GridSpec`` is MagicaVoxel (x, y, z); both are z-up.

A model holds at most 256 voxels per axis. A larger grid is split into tiles of
``model_size`` (256) voxels per axis, one model per non-empty tile, placed by a scene
graph: root transform (node 0) → group (node 1) → per model a transform (node 2 + 2m)
whose ``_t`` translation places it, and a shape (node 3 + 2m) holding model m. MagicaVoxel
puts a model's pivot at ``size // 2`` (integer division per axis), so a tile whose first
voxel is at grid offset o with size s gets ``_t = o + s // 2``: the grid's voxel
(0, 0, 0) sits at MagicaVoxel's world voxel (0, 0, 0). A grid that fits one model is
written without a scene graph (the plain layout every reader understands).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from ..kernels import backend
from ..kernels.errors import InputError, VoxFXError
from ..kernels.voxelize.palette import linear_to_srgb
from ..kernels.voxelize.slab_outputs import tile_keys
from . import fsio

VERSION = 150
MAX_MODEL_SIZE = 256  # voxels per axis of one model (XYZI stores coordinates as bytes)
MAX_COLORS = 255  # colour index 0 means "empty", so 255 usable palette entries


# ---------------------------------------------------------------------------------------
# Colours


def default_palette() -> np.ndarray:
    """(255, 4) uint8 palette of distinct colours for plain colour indices (material slots).

    Hues step by the golden angle so neighbouring indices differ strongly; entry 0
    (colour index 1, the colour of uncoloured exports) is a light grey.
    """
    n = MAX_COLORS
    hue = (np.arange(n) * 0.6180339887498949) % 1.0
    value = np.where(np.arange(n) % 2 == 0, 0.9, 0.65)
    saturation = np.where(np.arange(n) % 3 == 0, 0.55, 0.8)
    h6 = hue * 6.0
    sector = np.floor(h6).astype(int) % 6
    f = h6 - np.floor(h6)
    p, q, t = value * (1 - saturation), value * (1 - saturation * f), value * (1 - saturation * (1 - f))
    rgb_by_sector = np.stack([
        np.stack([value, t, p], 1), np.stack([q, value, p], 1), np.stack([p, value, t], 1),
        np.stack([p, q, value], 1), np.stack([t, p, value], 1), np.stack([value, p, q], 1),
    ])
    rgb = rgb_by_sector[sector, np.arange(n)]
    palette = np.empty((n, 4), dtype=np.uint8)
    palette[:, :3] = np.round(rgb * 255)
    palette[:, 3] = 255
    palette[0] = (200, 200, 200, 255)
    return palette


def as_rgba8(colors) -> np.ndarray:
    """(N, 4) uint8 from (N, 3|4) colours: floats are Blender's linear colours in 0..1,
    written as the sRGB bytes MagicaVoxel shows (alpha stays linear), the same encoding
    as ``voxel_art``'s palettes and what ``vox_import`` decodes; integers in 0..255 are
    taken as bytes already."""
    colors = np.asarray(backend.to_numpy(colors))
    if colors.ndim != 2 or colors.shape[1] not in (3, 4):
        raise InputError(f"voxel colours must be (N, 3) RGB or (N, 4) RGBA, not shape {colors.shape}")
    if np.issubdtype(colors.dtype, np.floating):
        if not np.isfinite(colors).all():
            raise InputError("voxel colours contain NaN or infinite values")
        colors = np.clip(colors, 0.0, 1.0)
        colors = np.concatenate([linear_to_srgb(colors[:, :3]), colors[:, 3:]], axis=1)
        rgba8 = np.round(colors * 255.0).astype(np.uint8)
    elif np.issubdtype(colors.dtype, np.integer) or colors.dtype == np.bool_:
        if colors.size and (colors.min() < 0 or colors.max() > 255):
            raise InputError("integer voxel colours must lie in 0..255")
        rgba8 = colors.astype(np.uint8)
    else:
        raise InputError(f"voxel colours must be numbers, not {colors.dtype}")
    if rgba8.shape[1] == 3:
        rgba8 = np.concatenate([rgba8, np.full((len(rgba8), 1), 255, np.uint8)], axis=1)
    return np.ascontiguousarray(rgba8)


def quantize_colors(colors, max_colors: int = MAX_COLORS):
    """(palette (P, 4) uint8, index (N,) int32 into it) with P ≤ *max_colors*.

    Exact when there are at most *max_colors* distinct colours (palette sorted by RGBA
    value). Otherwise a median-cut variant over the distinct colours weighted by how many
    voxels use each: repeatedly take the box with the widest channel range and cut it along
    that channel where the two halves' weighted squared error is least (for clustered
    colours that is the gap between clusters, where a plain median would cut through one);
    a box's colour is its weighted mean. Deterministic: ties go to the lower box, channel
    and cut.
    """
    rgba8 = as_rgba8(colors)
    if not 1 <= max_colors <= MAX_COLORS:
        raise InputError(f"a .vox palette holds 1..{MAX_COLORS} colours, not {max_colors}")
    unique_keys, inverse, counts = np.unique(color_keys(rgba8), return_inverse=True, return_counts=True)
    palette, index = quantize_histogram(unique_keys, counts, max_colors)
    return palette, index[inverse.ravel()]


def color_keys(rgba8) -> np.ndarray:
    """uint32 key per (N, 4) uint8 colour, ordered as the RGBA bytes are."""
    return rgba8.astype(np.uint32) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], dtype=np.uint32)


def quantize_histogram(unique_keys, counts, max_colors: int = MAX_COLORS):
    """``quantize_colors`` from the distinct colours alone: their ascending ``color_keys``
    and how many voxels use each → (palette (P, 4) uint8, palette entry per distinct
    colour). The same palette as for the voxels themselves, so a file written in slabs
    can fix its palette from counts before it writes any voxel."""
    unique_keys = np.asarray(unique_keys, dtype=np.uint32)
    counts = np.asarray(counts, dtype=np.int64)
    unique = np.stack([(unique_keys >> s) & 0xFF for s in (24, 16, 8, 0)], axis=1).astype(np.int64)
    if len(unique) <= max_colors:
        return unique.astype(np.uint8), np.arange(len(unique), dtype=np.int32)

    boxes = [np.arange(len(unique))]  # members: rows of `unique`, ascending by key
    ranges = [_channel_range(unique[boxes[0]])]
    while len(boxes) < max_colors:
        widest = [r.max() for r in ranges]
        b = int(np.argmax(widest))  # first box with the widest range
        if widest[b] == 0:
            break  # every box is a single colour: cannot happen while boxes < distinct colours
        members = boxes[b]
        channel = int(np.argmax(ranges[b]))
        order = members[np.lexsort((members, unique[members, channel]))]
        cut = _least_squares_cut(unique[order, channel], counts[order])
        low, high = np.sort(order[:cut]), np.sort(order[cut:])
        boxes[b], ranges[b] = low, _channel_range(unique[low])
        boxes.append(high)
        ranges.append(_channel_range(unique[high]))

    palette = np.empty((len(boxes), 4), dtype=np.uint8)
    box_of_colour = np.empty(len(unique), dtype=np.int32)
    for b, members in enumerate(boxes):
        w = counts[members].astype(np.float64)
        palette[b] = np.round((unique[members] * w[:, None]).sum(0) / w.sum())
        box_of_colour[members] = b
    return palette, box_of_colour


def _least_squares_cut(values: np.ndarray, weights: np.ndarray) -> int:
    """Split position p (left = first p) of ascending *values* minimising the weighted
    squared error Σ w (v − mean)² of both sides; only between differing values."""
    w = weights.astype(np.float64)
    v = values.astype(np.float64)
    v = v - (v * w).sum() / w.sum()  # centred: keeps the running sums well conditioned
    cw, cs, css = np.cumsum(w), np.cumsum(w * v), np.cumsum(w * v * v)
    left = css[:-1] - cs[:-1] ** 2 / cw[:-1]
    rw, rs, rss = cw[-1] - cw[:-1], cs[-1] - cs[:-1], css[-1] - css[:-1]
    error = left + rss - rs**2 / rw
    error[values[:-1] == values[1:]] = np.inf
    return int(np.argmin(error)) + 1


def _channel_range(colours: np.ndarray) -> np.ndarray:
    return colours.max(axis=0) - colours.min(axis=0)


# ---------------------------------------------------------------------------------------
# Models


def split_models(coordinates, color_indices, shape, model_size: int = MAX_MODEL_SIZE):
    """Tiles of at most *model_size* voxels per axis holding voxels: a list of
    ``(offset, size, xyzi)`` with offset / size (3,) ints in grid voxels and xyzi (n, 4)
    uint8 local x, y, z and colour index, tiles in (z, y, x) order."""
    shape = np.asarray(shape, dtype=np.int64)
    ijk = np.asarray(coordinates, dtype=np.int64)
    tile_counts = -(-shape // model_size)
    tile = ijk // model_size
    tile_key = (tile[:, 2] * tile_counts[1] + tile[:, 1]) * tile_counts[0] + tile[:, 0]
    order = np.argsort(tile_key, kind="stable")
    keys, starts = np.unique(tile_key[order], return_index=True)
    ends = np.append(starts[1:], len(order))
    models = []
    for _key, start, end in zip(keys, starts, ends):
        rows = order[start:end]
        t = tile[rows[0]]
        offset = t * model_size
        size = np.minimum(shape - offset, model_size)
        xyzi = np.empty((len(rows), 4), dtype=np.uint8)
        xyzi[:, :3] = ijk[rows] - offset
        xyzi[:, 3] = color_indices[rows]
        models.append((offset, size, xyzi))
    if not models:  # an empty export still is a valid file: one empty model
        models.append((np.zeros(3, np.int64), np.minimum(shape, model_size), np.empty((0, 4), np.uint8)))
    return models


def stream_vox(path, shape, per_tile, colors_rgba8, slabs, model_size: int = MAX_MODEL_SIZE) -> None:
    """Write a new file *path* with the bytes ``vox_bytes`` gives for the same voxels,
    without holding them: *per_tile* (voxels per tile, by ``tile_keys``, counted
    beforehand), the palette *colors_rgba8* (P ≤ 255, 4) uint8, then *slabs* yields
    ``(ijk (n, 3), colour index 1..255 (n,))`` for z-slabs bottom to top, each in linear
    (k, j, i) order. A tile's voxels are in linear order in its model, so each slab's
    part of a tile follows the part of the slab below: it is written at its place."""
    shape = _check_shape(shape)
    per_tile = np.asarray(per_tile, dtype=np.int64)
    _, tiles = tile_keys(np.zeros((0, 3), np.int64), shape, model_size)
    keys = np.flatnonzero(per_tile)
    models = []
    for key in keys:
        offset = models_offset(int(key), tiles, model_size)
        models.append((offset, np.minimum(shape - offset, model_size), int(per_tile[key])))
    if not models:
        models.append((np.zeros(3, np.int64), np.minimum(shape, model_size), 0))
    file_palette = np.zeros((256, 4), dtype=np.uint8)
    file_palette[:len(colors_rgba8)] = colors_rgba8
    tail = b"".join(_scene_graph(models) if len(models) > 1 else []) + _chunk(b"RGBA", file_palette.tobytes())
    children = sum(24 + 16 + 4 * n for _, _, n in models) + len(tail)
    _check_size(children, int(per_tile.sum()))
    data_at = np.zeros(len(per_tile), np.int64)  # file offset of each tile's next voxel
    with open(path, "xb") as f:
        f.write(b"VOX " + struct.pack("<i", VERSION) + b"MAIN" + struct.pack("<ii", 0, children))
        for (_, size, n), key in zip(models, list(keys) or [0]):
            f.write(_chunk(b"SIZE", struct.pack("<3i", *(int(s) for s in size))))
            f.write(b"XYZI" + struct.pack("<iii", 4 + 4 * n, 0, n))
            data_at[key] = f.tell()
            f.seek(4 * n, os.SEEK_CUR)
        f.write(tail)
        end = f.tell()
        left = per_tile.copy()
        for ijk, index in slabs:
            ijk = np.asarray(ijk, dtype=np.int64)
            key, _ = tile_keys(ijk, shape, model_size)
            order = np.argsort(key, kind="stable")
            starts = np.flatnonzero(np.r_[True, key[order][1:] != key[order][:-1]]) if len(order) else []
            ends = np.append(starts[1:], len(order)) if len(order) else []
            for start, stop in zip(starts, ends):
                rows = order[start:stop]
                k = int(key[rows[0]])
                if len(rows) > left[k]:
                    raise ValueError("a slab gave more voxels than its tile was counted with")
                xyzi = np.empty((len(rows), 4), dtype=np.uint8)
                xyzi[:, :3] = ijk[rows] - models_offset(k, tiles, model_size)
                xyzi[:, 3] = index[rows]
                f.seek(data_at[k])
                f.write(xyzi.tobytes())
                data_at[k] += 4 * len(rows)
                left[k] -= len(rows)
            del ijk, index, key, order  # not alive while the next slab is computed
            rows = xyzi = None
        if left.any():
            raise ValueError("the slabs gave fewer voxels than were counted")
        f.seek(end)


def models_offset(key: int, tiles, model_size: int) -> np.ndarray:
    """Grid offset of the first voxel of tile *key* (``tile_keys``)."""
    return np.array([key % tiles[0], (key // tiles[0]) % tiles[1], key // (tiles[0] * tiles[1])],
                    np.int64) * model_size


# ---------------------------------------------------------------------------------------
# Bytes


def vox_bytes(coordinates, shape, *, colors=None, color_indices=None, palette=None,
              model_size: int = MAX_MODEL_SIZE) -> bytes:
    """The whole ``.vox`` file for voxels at integer (i, j, k) *coordinates* (N, 3) of a
    grid of *shape* (nx, ny, nz).

    Colour either by *colors* (N, 3|4), quantised to ≤ 255 palette entries, or by
    *color_indices* (N,) in 1..255 with an optional *palette* (≤ 255 or 256 entries of
    RGB/RGBA, entry p for colour index p + 1; default: ``default_palette()``). With
    neither, every voxel gets colour index 1.
    """
    shape = _check_shape(shape)
    ijk = _check_coordinates(coordinates, shape)
    if not 1 <= int(model_size) <= MAX_MODEL_SIZE:
        raise InputError(f"a .vox model holds 1..{MAX_MODEL_SIZE} voxels per axis, not {model_size}")
    index, file_palette = _colour_indices(len(ijk), colors, color_indices, palette)
    models = split_models(ijk, index, shape, int(model_size))

    children = []
    for _, size, xyzi in models:
        children.append(_chunk(b"SIZE", struct.pack("<3i", *(int(s) for s in size))))
        children.append(_chunk(b"XYZI", struct.pack("<i", len(xyzi)) + xyzi.tobytes()))
    if len(models) > 1:
        children.extend(_scene_graph(models))
    children.append(_chunk(b"RGBA", file_palette.tobytes()))
    _check_size(sum(len(c) for c in children), len(ijk))
    main = _chunk(b"MAIN", b"", b"".join(children))
    return b"VOX " + struct.pack("<i", VERSION) + main


def _check_size(children: int, voxels: int) -> None:
    """The MAIN chunk's children size is an int32: refuse, in one line, a file beyond it."""
    if children > 2 ** 31 - 1:
        raise InputError(f"{voxels:,} voxels are more than a MagicaVoxel file holds (its chunk sizes are 32-bit: "
                         f"about 530 million voxels): lower the resolution")


def _chunk(chunk_id: bytes, content: bytes, children: bytes = b"") -> bytes:
    return chunk_id + struct.pack("<ii", len(content), len(children)) + content + children


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<i", len(data)) + data


def _dict(pairs: dict) -> bytes:
    return struct.pack("<i", len(pairs)) + b"".join(_string(k) + _string(v) for k, v in pairs.items())


def _scene_graph(models) -> list:
    """nTRN 0 → nGRP 1 → (nTRN 2+2m → nSHP 3+2m → model m) per model, plus layer 0."""
    chunks = [
        _chunk(b"nTRN", struct.pack("<i", 0) + _dict({}) + struct.pack("<4i", 1, -1, -1, 1) + _dict({})),
        _chunk(b"nGRP", struct.pack("<i", 1) + _dict({}) + struct.pack("<i", len(models))
               + struct.pack(f"<{len(models)}i", *(2 + 2 * m for m in range(len(models))))),
    ]
    for m, (offset, size, _) in enumerate(models):
        translation = offset + size // 2  # MagicaVoxel's pivot: the model's centre, rounded down
        name = "tile_" + "_".join(str(int(o)) for o in offset)
        frame = {"_t": " ".join(str(int(t)) for t in translation)}
        chunks.append(_chunk(b"nTRN", struct.pack("<i", 2 + 2 * m) + _dict({"_name": name})
                             + struct.pack("<4i", 3 + 2 * m, -1, 0, 1) + _dict(frame)))
        chunks.append(_chunk(b"nSHP", struct.pack("<i", 3 + 2 * m) + _dict({})
                             + struct.pack("<ii", 1, m) + _dict({})))
    chunks.append(_chunk(b"LAYR", struct.pack("<i", 0) + _dict({}) + struct.pack("<i", -1)))
    return chunks


def _check_shape(shape) -> np.ndarray:
    shape = np.asarray(shape).ravel()
    if len(shape) != 3 or not np.issubdtype(shape.dtype, np.integer) or shape.min() < 1:
        raise InputError(f"grid size must be three positive voxel counts, not {shape.tolist()}")
    return shape.astype(np.int64)


def _check_coordinates(coordinates, shape) -> np.ndarray:
    ijk = np.asarray(backend.to_numpy(coordinates))
    if ijk.size == 0:
        return np.empty((0, 3), np.int64)
    if ijk.ndim != 2 or ijk.shape[1] != 3 or not np.issubdtype(ijk.dtype, np.integer):
        raise InputError(f"voxel coordinates must be (N, 3) integers (i, j, k), not {ijk.dtype} {ijk.shape}")
    ijk = ijk.astype(np.int64)
    if ijk.min() < 0 or (ijk >= shape).any():
        raise InputError(f"voxel coordinates lie outside the {'×'.join(map(str, shape))} grid")
    linear = (ijk[:, 2] * shape[1] + ijk[:, 1]) * shape[0] + ijk[:, 0]
    if len(np.unique(linear)) != len(linear):
        raise InputError("voxel coordinates repeat a voxel; each voxel can have one colour only")
    return ijk


def _colour_indices(n: int, colors, color_indices, palette):
    """(per-voxel colour index 1..255 as uint8, (256, 4) uint8 RGBA chunk payload)."""
    if colors is not None and color_indices is not None:
        raise InputError("give voxel colours either as colors or as color_indices, not both")
    file_palette = np.zeros((256, 4), dtype=np.uint8)
    if colors is not None:
        colours, index = quantize_colors(colors)
        if len(index) != n:
            raise InputError(f"{len(index)} colours were given for {n} voxels")
        file_palette[: len(colours)] = colours
        return (index + 1).astype(np.uint8), file_palette
    if color_indices is None:
        index = np.ones(n, dtype=np.uint8)
    else:
        index = np.asarray(backend.to_numpy(color_indices)).ravel()
        if len(index) != n or not np.issubdtype(index.dtype, np.integer):
            raise InputError(f"color_indices must be {n} integers, one per voxel")
        if n and (index.min() < 1 or index.max() > MAX_COLORS):
            raise InputError(f"colour indices must lie in 1..{MAX_COLORS} (0 means an empty voxel)")
        index = index.astype(np.uint8)
    colours = default_palette() if palette is None else as_rgba8(palette)
    if len(colours) > 256:
        raise InputError(f"a .vox palette has at most 256 entries, not {len(colours)}")
    colours = colours[:MAX_COLORS]
    file_palette[: len(colours)] = colours
    return index, file_palette


# ---------------------------------------------------------------------------------------
# Files


def write_vox(path, coordinates, shape, *, colors=None, color_indices=None, palette=None,
              model_size: int = MAX_MODEL_SIZE) -> Path:
    """Write a ``.vox`` file atomically (temporary file, then rename) and return its path.

    Arguments as for ``vox_bytes``. A failure leaves no temporary file behind and raises
    ``VoxFXError`` naming the path.
    """
    path = Path(os.fspath(path))
    refuse_to_overwrite_foreign(path)
    data = vox_bytes(coordinates, shape, colors=colors, color_indices=color_indices,
                     palette=palette, model_size=model_size)
    write_atomic(path, data, "MagicaVoxel file")
    return path


def refuse_to_overwrite_foreign(path: Path) -> None:
    """The output path comes from a .blend's settings or the command line: never replace
    anything there but an earlier MagicaVoxel file (a typo or a crafted .blend could
    name ``~/.bashrc``)."""
    if path.suffix.lower() != ".vox":
        raise InputError(f"The MagicaVoxel file must end in .vox, not '{path.name}'")
    if os.path.lexists(path):
        magic = b""
        if path.is_file() and not path.is_symlink():
            try:
                with open(path, "rb") as f:
                    magic = f.read(4)
            except OSError:
                pass
        if magic != b"VOX ":
            raise InputError(f"'{path}' exists and is not a MagicaVoxel file: VoxFX will not overwrite it")


def write_atomic(path: Path, data: bytes, what: str = "file") -> None:
    try:
        fsio.write_bytes_atomic(path, data)
    except OSError as error:
        raise VoxFXError(f"cannot write the {what} '{path}': {error.strerror or error}") from error


def write_vox_slabs(path, shape, per_tile, owner_counts, owner_colors, slabs,
                    model_size: int = MAX_MODEL_SIZE, palette=None) -> Path:
    """The .vox file of a grid whose voxels come slab by slab (``kernels.voxelize.
    slab_outputs``), written into a fresh temporary beside *path* and returned: the caller
    renames it over *path* (``fsio.finish_temporary``) when the job's outputs are written.
    The palette is fixed first from the voxels per owner triangle (*owner_counts*, row 0 =
    no owner) and each owner's colour (*owner_colors*): ``quantize_histogram`` of those
    counts is the palette ``quantize_colors`` makes of every voxel's colour, so the file
    equals ``write_vox`` of the same voxels byte for byte. A failure removes the temporary.
    A given *palette* ((P ≤ 255, 4) uint8, voxel art's: ``art_outputs.SlabArt``) is
    written instead, and ``slabs(None)`` gives each voxel's index into it itself."""
    path = Path(os.fspath(path))
    refuse_to_overwrite_foreign(path)
    index_of_owner = None
    if palette is None:
        owner_counts = np.asarray(owner_counts, dtype=np.int64)
        used = np.flatnonzero(owner_counts)
        keys = color_keys(as_rgba8(np.asarray(owner_colors)[used]))
        unique_keys, inverse = np.unique(keys, return_inverse=True)
        counts = np.zeros(len(unique_keys), np.int64)
        np.add.at(counts, inverse.ravel(), owner_counts[used])
        palette, index = quantize_histogram(unique_keys, counts)
        index_of_owner = np.zeros(len(owner_counts), np.uint8)
        index_of_owner[used] = index[inverse.ravel()] + 1
    temporary = fsio.temporary_for(path)
    try:
        stream_vox(temporary, shape, per_tile, palette, slabs(index_of_owner), model_size)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise VoxFXError(f"cannot write the MagicaVoxel file '{path}': {error.strerror or error}") from error
        raise
    return temporary


def finish_vox(temporary, path) -> Path:
    """Put a file of ``write_vox_slabs`` in place (durably), or remove it on failure."""
    path = Path(os.fspath(path))
    try:
        refuse_to_overwrite_foreign(path)
        fsio.finish_temporary(Path(temporary), path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise VoxFXError(f"cannot write the MagicaVoxel file '{path}': {error.strerror or error}") from error
        raise
    return path
