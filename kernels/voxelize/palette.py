"""Palettes for .vox: voxel colours reduced to at most 255, by k-means in OKLab or by the
nearest colour of a given palette. No ``bpy`` here; the point cloud keeps full colour.

    palette, index = quantize(rgba)                  # palette (P, 4) float32, P ≤ 255
    palette = palette_from_image(pixels)             # a MagicaVoxel palette PNG, say
    index = nearest_in_palette(rgba, palette)        # (N,) int32 into it

Colours are Blender's scene-linear RGB(A) floats in and out. Distances are taken in
OKLab (Ottosson 2020: linear sRGB → LMS by a matrix, cube root, → Lab by a second
matrix), where equal steps look about equally different, so the palette spends its
entries where the eye tells colours apart rather than where RGB numbers differ.

``quantize``: exact when there are at most *max_colors* distinct colours (after rounding
to 8-bit sRGB, the precision a .vox palette has; each entry is its voxels' mean colour,
summed in exact fixed point, ``ColorHistogram``, so a grid quantized a z-slab at a time
gets the same palette as all at once). Otherwise weighted k-means in OKLab:
the distinct colours are first pooled into 6-bit-per-channel sRGB buckets (at most 2¹⁸,
each weighted by its voxels, at its members' mean), the centres start from a variance
cut in OKLab (split the box of largest weighted squared error along its axis of largest
variance at the mean, until there are *max_colors* boxes), then ``iterations`` Lloyd steps
(assign to the nearest centre, move each centre to its members' weighted mean); the
palette entry is its cluster's mean linear colour and every distinct colour is finally
assigned to its nearest entry. Deterministic: no random start, ties to the lower index.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

MAX_COLORS = 255
_CHUNK = 1 << 12  # colours per distance block: its (chunk, 255) float64 product and distances, 16 MiB

# linear sRGB → LMS, and cube-rooted LMS → Lab (Ottosson 2020, "A perceptual colour space")
_M1 = np.array([[0.4122214708, 0.5363325363, 0.0514459929],
                [0.2119034982, 0.6806995451, 0.1073969566],
                [0.0883024619, 0.2817188376, 0.6299787005]])
_M2 = np.array([[0.2104542553, 0.7936177850, -0.0040720468],
                [1.9779984951, -2.4285922050, 0.4505937099],
                [0.0259040371, 0.7827717662, -0.8086757660]])


def srgb_to_linear(c):
    """sRGB-encoded 0..1 → linear (IEC 61966-2-1 transfer function)."""
    c = np.asarray(c, np.float64)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(c):
    """Linear → sRGB-encoded 0..1 (clipped to 0..1 first)."""
    c = np.clip(np.asarray(c, np.float64), 0.0, 1.0)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * c ** (1 / 2.4) - 0.055)


def oklab(rgb_linear):
    """(N, 3) float64 OKLab of (N, 3) linear sRGB."""
    lms = np.asarray(rgb_linear, np.float64) @ _M1.T
    return np.cbrt(lms) @ _M2.T


def _rgba(colors) -> np.ndarray:
    colors = np.asarray(colors)
    if colors.ndim != 2 or colors.shape[1] not in (3, 4) or not np.issubdtype(colors.dtype, np.floating):
        raise InputError(f"colours must be (N, 3) or (N, 4) floats, not {colors.dtype} {colors.shape}")
    if not np.isfinite(colors).all():
        raise InputError("colours contain NaN or infinite values")
    if colors.shape[1] == 3:
        colors = np.concatenate([colors, np.ones((len(colors), 1), colors.dtype)], axis=1)
    return colors.astype(np.float64)


_ONE = float(1 << 32)  # fixed point of the colour sums: exact, so the order of adding does not matter
_BYTES = np.array([1 << 24, 1 << 16, 1 << 8, 1], np.int64)


def color_keys(colors) -> np.ndarray:
    """(N,) int64 key of each colour at .vox precision: its 8-bit sRGB bytes and 8-bit
    alpha (what a palette entry can tell apart), ordered as those bytes are."""
    rgba = _rgba(colors)
    code8 = np.round(np.concatenate([linear_to_srgb(rgba[:, :3]), np.clip(rgba[:, 3:], 0, 1)], 1) * 255)
    return code8.astype(np.int64) @ _BYTES


class ColorHistogram:
    """The distinct colours (``color_keys``) of voxels given in parts, with their voxel
    counts and colour sums, so a palette can be made of colours that never are in memory
    at once (a z-slab at a time, ``slab_art``):

        h = ColorHistogram(); h.add(rgba_of_slab) ...; palette, label = h.quantize()
        index = label[h.index_of(rgba)]          # a voxel's palette entry

    The sums are fixed point (the linear colour clipped to 0..1, in units of 2⁻³², as
    unsigned 64-bit integers: exact below 2³² voxels), so they, and the palette, are
    the same whatever the parts and their order: ``quantize`` of all the colours at once
    is this histogram filled in one part."""

    def __init__(self):
        self.keys = np.zeros(0, np.int64)  # ascending
        self.counts = np.zeros(0, np.int64)
        self.sums = np.zeros((0, 4), np.uint64)

    def add(self, colors) -> None:
        rgba = _rgba(colors)
        fixed = np.round(np.clip(rgba, 0.0, 1.0) * _ONE).astype(np.uint64)
        self._merge(color_keys(rgba), np.ones(len(rgba), np.int64), fixed)

    def _merge(self, keys, counts, sums) -> None:
        """The new rows reduced to their distinct keys, then added where a key is kept and
        inserted in order where it is new: beside the kept rows only one of their arrays
        is copied at a time (their sums, 32 B a colour), never the kept rows re-sorted.
        The sums are integers, so the result is the same in any order of adding."""
        if len(keys) == 0:
            return
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        keys, counts, sums = keys[first], np.add.reduceat(counts[order], first), np.add.reduceat(sums[order], first,
                                                                                                 axis=0)
        del order, first
        at = np.searchsorted(self.keys, keys)
        kept = at < len(self.keys)
        kept[kept] = self.keys[at[kept]] == keys[kept]
        self.counts[at[kept]] += counts[kept]  # distinct keys: distinct rows
        self.sums[at[kept]] += sums[kept]
        new = ~kept
        if new.any():
            where = at[new]
            self.keys = np.insert(self.keys, where, keys[new])
            self.counts = np.insert(self.counts, where, counts[new])
            self.sums = np.insert(self.sums, where, sums[new], axis=0)

    @property
    def means(self) -> np.ndarray:
        """(K, 4) float64 mean linear colour (clipped to 0..1) per distinct colour."""
        return self.sums.astype(np.float64) / _ONE / self.counts[:, None]

    def index_of(self, colors) -> np.ndarray:
        """(N,) int64 row of each colour's key among ``keys`` (all must have been added)."""
        keys = color_keys(colors)
        at = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        if len(keys) and (self.keys[at] != keys).any():
            raise ValueError("a colour that was not added to the histogram")
        return at

    def quantize(self, max_colors: int = MAX_COLORS, iterations: int = 10):
        """(palette (P, 4) float32 linear RGBA, P ≤ *max_colors*, palette entry (K,)
        int32 per distinct colour): ``quantize``'s palette of the voxels added."""
        return quantize_histogram(self.means, self.counts, max_colors, iterations, keys=self.keys)


def quantize(colors, max_colors: int = MAX_COLORS, iterations: int = 10):
    """(palette (P, 4) float32 linear RGBA, index (N,) int32) with P ≤ *max_colors*."""
    if not 1 <= max_colors <= MAX_COLORS:
        raise InputError(f"a .vox palette holds 1..{MAX_COLORS} colours, not {max_colors}")
    histogram = ColorHistogram()
    histogram.add(colors)
    if len(histogram.keys) == 0:
        return np.zeros((0, 4), np.float32), np.zeros(0, np.int32)
    palette, label = histogram.quantize(max_colors, iterations)
    return palette, label[histogram.index_of(colors)].astype(np.int32)


def quantize_histogram(distinct, counts, max_colors: int = MAX_COLORS, iterations: int = 10, keys=None):
    """(palette (P, 4) float32, entry (K,) int32 per distinct colour) of K distinct
    colours at .vox precision (*distinct* (K, 4) their mean linear colours, *keys* their
    ``color_keys`` (default: of the means), *counts* (K,) their voxels): the module's
    k-means."""
    if not 1 <= max_colors <= MAX_COLORS:
        raise InputError(f"a .vox palette holds 1..{MAX_COLORS} colours, not {max_colors}")
    distinct = np.asarray(distinct, np.float64)
    counts = np.asarray(counts, np.int64)
    if len(distinct) <= max_colors:
        return distinct.astype(np.float32), np.arange(len(distinct), dtype=np.int32)
    # pool into 6-bit sRGB buckets for the fit
    keys = color_keys(distinct) if keys is None else np.asarray(keys, np.int64)
    code8 = np.stack([(keys >> shift) & 0xFF for shift in (24, 16, 8)], 1)  # the sRGB bytes
    bucket_key = (code8 >> 2) @ np.array([1 << 12, 1 << 6, 1], np.int64)
    _, bucket_of, bucket_count = np.unique(bucket_key, return_inverse=True, return_counts=True)
    bucket_of = bucket_of.ravel()
    weight = np.bincount(bucket_of, weights=counts).astype(np.float64)
    bucket = _weighted_sums(distinct * counts[:, None], bucket_of, len(bucket_count)) / weight[:, None]
    lab = oklab(bucket[:, :3])
    if len(lab) <= max_colors:
        centres = lab
    else:
        centres = _variance_split(lab, weight, max_colors)
        for _ in range(iterations):
            label = _nearest(lab, centres)
            sums = _weighted_sums(lab * weight[:, None], label, len(centres))
            mass = np.bincount(label, weights=weight, minlength=len(centres))
            moved = mass > 0
            new = centres.copy()
            new[moved] = sums[moved] / mass[moved, None]
            if np.allclose(new, centres, atol=1e-7, rtol=0):
                break
            centres = new
    # final: each distinct colour to its nearest centre; entries are their members' means
    label = _nearest(oklab(distinct[:, :3]), centres)
    used, label = np.unique(label, return_inverse=True)
    label = label.ravel()
    mass = np.bincount(label, weights=counts, minlength=len(used))
    palette = _weighted_sums(distinct * counts[:, None], label, len(used)) / mass[:, None]
    return palette.astype(np.float32), label.astype(np.int32)


def nearest_in_palette(colors, palette) -> np.ndarray:
    """(N,) int32 index of the OKLab-nearest entry of *palette* (P, 3|4) for each colour
    (alpha is not compared); ties to the lower index."""
    palette = _rgba(palette)
    if not 1 <= len(palette) <= MAX_COLORS:
        raise InputError(f"a palette needs 1..{MAX_COLORS} colours, not {len(palette)}")
    rgba = _rgba(colors)
    return _nearest(oklab(rgba[:, :3]), oklab(palette[:, :3])).astype(np.int32)


def palette_from_image(pixels, max_colors: int = MAX_COLORS) -> np.ndarray:
    """(P, 4) float32 linear palette of the distinct colours of an image's (H, W, 4) linear
    pixels, top row first and left to right (how an image editor and MagicaVoxel's palette
    strip show it; Blender's pixel rows run bottom up), first appearance kept, fully
    transparent pixels skipped. A MagicaVoxel palette PNG (256 × 1) gives colour index
    i + 1 for pixel i. Refuses more than *max_colors* distinct colours."""
    pixels = np.asarray(pixels, np.float64)
    if pixels.ndim != 3 or pixels.shape[2] != 4:
        raise InputError(f"a palette image must be RGBA pixels, not shape {pixels.shape}")
    flat = pixels[::-1].reshape(-1, 4)
    flat = flat[flat[:, 3] > 0]
    if len(flat) == 0:
        raise InputError("the palette image has no opaque pixel")
    code = np.round(np.concatenate([linear_to_srgb(flat[:, :3]), np.clip(flat[:, 3:], 0, 1)], 1) * 255)
    _, first = np.unique(code.astype(np.int64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], np.int64),
                         return_index=True)
    if len(first) > max_colors:
        raise InputError(f"the palette image has {len(first)} distinct colours; a .vox palette holds {max_colors}")
    return flat[np.sort(first)].astype(np.float32)


def _weighted_sums(values, label, count):
    return np.stack([np.bincount(label, weights=values[:, c], minlength=count) for c in range(values.shape[1])], 1)


def _nearest(points, centres) -> np.ndarray:
    """Index of the nearest centre (squared Euclidean) per point, in blocks of rows."""
    out = np.empty(len(points), np.int64)
    cc = (centres**2).sum(1)
    for s in range(0, len(points), _CHUNK):
        p = points[s:s + _CHUNK]
        d = cc[None, :] - 2.0 * (p @ centres.T)  # |p|² is the same for every centre
        out[s:s + _CHUNK] = np.argmin(d, axis=1)
    return out


def _variance_split(points, weight, k):
    """k starting centres: boxes split in turn, always the box of largest weighted squared
    error, along its axis of largest weighted variance at the weighted mean (Wu-style
    variance cut); each centre is its box's weighted mean."""
    boxes = [np.arange(len(points))]
    errors = [_box_error(points, weight, boxes[0])]
    while len(boxes) < k:
        b = int(np.argmax([e[0] for e in errors]))
        error, axis, mean = errors[b]
        if error <= 0:
            break
        members = boxes[b]
        low = points[members, axis] <= mean
        if low.all() or not low.any():
            errors[b] = (0.0, 0, 0.0)
            continue
        boxes[b] = members[low]
        errors[b] = _box_error(points, weight, boxes[b])
        boxes.append(members[~low])
        errors.append(_box_error(points, weight, boxes[-1]))
    return np.stack([(points[m] * weight[m, None]).sum(0) / weight[m].sum() for m in boxes])


def _box_error(points, weight, members):
    """(weighted squared error, axis of largest weighted variance, mean along it)."""
    p, w = points[members], weight[members]
    mean = (p * w[:, None]).sum(0) / w.sum()
    per_axis = (w[:, None] * (p - mean) ** 2).sum(0)
    axis = int(np.argmax(per_axis))
    return float(per_axis.sum()), axis, float(mean[axis])
