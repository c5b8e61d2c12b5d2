"""The voxel art's host memory (issue 21 §6): what ``art_outputs.SlabArt`` and
``voxel_art.apply`` allocate for the add-on's art settings (per-voxel colours, texture
colours, merged faces, the face colour, the .vox palette's colour histogram), as
``ArtCost``, from per-item bytes measured with tracemalloc (``bench/memory.py --art``).
The split plan adds it to a Blocks/.vox job split into z-slabs (``art_bytes``, in
``split_plan.attribute_split_estimate``), the guard to an unsplit group
(``art_whole_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..grid import GridSpec
from .slabs import SplitMesh

# Voxel art on the split Blocks/.vox (``art_outputs.SlabArt``), host bytes measured with
# tracemalloc (``bench/memory.py --art``: a sphere at 200³, 152,688 faces of random colours,
# so nothing merges; 2M distinct colours; 1M textured voxels):
ART_RGBA_PER_VOXEL = 16  # a slab voxel's float32 colour (SlabArt.colors)
# texture colours (``TexturedMesh.recolor``): per voxel its centre, owner, image, colours and
# their copy (96 B), beside the slab's int64 coordinates (24) and owners (8); per candidate
# triangle of a block (the owner and the triangles around its corners, 19 on a mesh of
# valence 6; ``texture.CANDIDATES_PER_BLOCK`` a block at most) its index and point before
# the image filter, and for those the filter keeps (the triangles with the owner's image:
# ``texture.survivors_per_triangle``) their corners, barycentrics, distance and sort.
# Measured (``bench/memory.py --art``: 2^16–2^17 voxels, one block, on a shared-vertex
# sheet with 1, 2, 3 and 6 images at random, 34–100% of the candidates kept) 18 B a
# candidate and 181 B a kept one (198.7–199.0 B a candidate with one image, 79.8–79.9 with
# six): taken as 20 and 185. Only textured voxels look up (untextured triangles' voxels
# keep their colour): the candidates per voxel are counted over the textured triangles.
ART_TEXTURE_PER_VOXEL = 96 + 24 + 8
TEXTURE_PER_CANDIDATE = 20
TEXTURE_PER_KEPT = 185
# Voxels follow the triangles' area, so the textured voxels' share is the textured area's.
# The split plan counts the slab that looks up the most (``ArtCost.slab_density``: one slab
# of Suzanne held 81% textured voxels where the mesh has 70%, and one kept 69% of its
# candidates where the mesh keeps 53%); without slabs (the unsplit job) the mesh's share
# is taken 1.2× for it
TEXTURED_SHARE_MARGIN = 1.2
GREEDY_KEPT_PER_FACE = 65  # GreedyBuilder: the runs of every face added, with their colour (64.3 B)
GREEDY_ADD_PER_FACE = 72  # one slab's exposed faces on their way in: ijk, rank, label, colour, words
GREEDY_FINISH_PER_FACE = 315  # finish(): joins, stacking, quads, welding, beyond the runs kept (310.4 B)
FACE_COLOR_KEPT = 16  # the per-face mesh's float32 face colour (SlabArt.face_rgba)
FACE_COLOR_FINISH = 42  # SlabArt.blocks: the concatenation, the order, the reordered copy beside the list (57.1 B
# with the list's 16)
BLENDER_FACE_COLOR = 16  # Blender's FLOAT_COLOR face attribute
HISTOGRAM_PER_COLOR = 48  # ColorHistogram: key, count and four fixed-point sums per distinct colour
# add(): a slab's rows converted, keyed and reduced to distinct keys (228 B a row), then merged into the
# kept ones by insertion, one array copied at a time (57 B a kept colour; tracemalloc, 5k-200k rows into
# 20k-400k kept colours). Before, kept and new rows were concatenated and re-sorted: 144-180 B a kept colour.
HISTOGRAM_ADD_PER_ROW = 230
HISTOGRAM_MERGE_PER_COLOR = 60
TEXTURE_COLORS = 1 << 24  # distinct 8-bit sRGB colours (alpha aside): a texture's .vox histogram at most
# The .vox palette's k-means over the histogram's K distinct colours (``palette.quantize_histogram``),
# between the passes: per colour its means, keys, buckets, OKLab and labels, and the nearest-centre
# search's block of min(K, palette._CHUNK) rows × 255 centres, three float64 arrays of it alive at
# once (the product, twice it, the distances). Traced (random colours, 4,096-row blocks):
# K = 1,000 / 3,000 / 9,000 / 20,000 / 100,000 / 400,000 → 4.4 / 12.9 / 26.8 / 28.7 / 40.7 / 77.3 MB.
QUANTIZE_PER_COLOR = 200
QUANTIZE_BLOCK_PER_COLOR = 3 * 8 * 255
# The histogram's distinct colours, for texture colours, are estimated before planning from
# a sample of the grid (``sampled_colors``): the textured voxels of COLOR_SAMPLE_ROWS z rows
# spread over the grid (at most COLOR_SAMPLE_VOXELS voxels in all, a middle window of y rows
# of each), their owners and texture colours found as the job finds them. A 2-row-slab job
# on the random-textured Suzanne held 128,371 distinct colours in 458,254 voxels (counted
# as one a voxel, the plan was 2.1x the job's RSS growth); the sum of its rows' distinct
# colours is 1.18x that (a colour seen in two rows counts twice), and the sample's 1.15-1.28x.
COLOR_SAMPLE_ROWS = 16
COLOR_SAMPLE_VOXELS = 1 << 17


@dataclass(frozen=True)
class ArtCost:
    """What the split Blocks/.vox job's voxel art allocates (``art_outputs.SlabArt``, from
    the add-on's settings): per-voxel colours, texture colours, merged faces, the per-face
    colour, and the .vox palette's colour histogram with at most *colors* distinct colours."""

    colors: bool = False  # SlabArt runs at all (a .vox, a face colour or merged faces)
    texture: bool = False
    greedy: bool = False
    face_colors: bool = False
    histogram: bool = False
    max_colors: int = 0
    candidates: float = 0.0  # texture colours: candidate triangles per voxel of a slab, the textured triangles'
    # area-weighted mean times the textured share of the area (×TEXTURED_SHARE_MARGIN): untextured voxels keep
    # their colour, they are not looked up
    most_candidates: int = 0  # the most one voxel has (a block holds at least one voxel)
    kept: float = 1.0  # the share of the candidates the image filter keeps (over the textured triangles)
    # per triangle (world z low and high, area, candidates and kept ones a voxel: 0 untextured), for the
    # split plan's slab by slab count (``slab_density``)
    by_triangle: tuple | None = field(default=None, compare=False, repr=False)
    # texture colours with a .vox histogram: the textured mesh (``texture.TexturedMesh``) for the sample
    # of the distinct colours (``sampled``), and the colours untextured voxels can have (their materials')
    textured_mesh: object = field(default=None, compare=False, repr=False)
    plain_colors: int = 0

    @classmethod
    def of(cls, settings, outputs, triangles, materials=None) -> "ArtCost":
        """From ``art_outputs.ArtSettings``, the request's *outputs* and the group's
        *triangles* (their vertices' valences set the texture lookup's candidates) and
        their *materials* (per triangle, optional: the untextured voxels' colours)."""
        art = cls._of(settings, outputs, triangles)
        if not (art.histogram and art.texture):
            return art
        image = getattr(settings.textured, "image_of_triangle", None)
        plain = np.ones(len(triangles), bool)
        if image is not None and len(image) == len(triangles):
            plain = np.asarray(image) < 0
        if materials is not None and len(materials) == len(triangles):
            plain_colors = len(np.unique(np.asarray(materials)[plain])) + 1  # + the default of voxels with no owner
        else:
            plain_colors = int(plain.sum()) + 1
        return replace(art, textured_mesh=settings.textured, plain_colors=plain_colors)

    @classmethod
    def _of(cls, settings, outputs, triangles) -> "ArtCost":
        from .. import backend
        from .art_outputs import face_colors_wanted

        greedy = bool(settings.greedy) and "blocks" in outputs
        texture = settings.color_source == "TEXTURE" and settings.textured is not None
        face = face_colors_wanted(settings, outputs) and not greedy
        histogram = "vox" in outputs and settings.palette is None
        # colours per owner triangle (attribute mean or material) unless textured
        most = TEXTURE_COLORS if texture else len(triangles) + 1
        candidates, most_candidates, kept = 0.0, 0, 1.0
        if texture and len(triangles) and backend.xp() is np:  # on a GPU the lookup is one kernel, per voxel
            from .split_plan import corner_areas
            from .texture import candidates_per_triangle, survivors_per_triangle

            tris = np.asarray(triangles).astype(np.int64, copy=False)
            ring_start = np.zeros(int(tris.max()) + 2, np.int64)
            np.cumsum(np.bincount(tris.ravel(), minlength=len(ring_start) - 1), out=ring_start[1:])
            per = candidates_per_triangle(tris, ring_start)
            image = getattr(settings.textured, "image_of_triangle", None)
            known = image is not None and len(image) == len(tris)
            looked_up = np.asarray(image) >= 0 if known else np.ones(len(tris), bool)
            corners = getattr(settings.textured, "mesh", (None,))[0]  # (T, 3, 3) the triangles' corners
            area = corner_areas(corners) if corners is not None and len(corners) == len(tris) else None
            if area is None or not area.sum() > 0:
                area = np.ones(len(tris))
            textured_area = float(area[looked_up].sum())
            if textured_area > 0:  # voxels follow the area; a slab's textured share may pass the mesh's
                share = min(1.0, TEXTURED_SHARE_MARGIN * textured_area / float(area.sum()))
                candidates = float((area * per)[looked_up].sum()) / textured_area * share
            most_candidates = int(per[looked_up].max(initial=0))
            kept_per = survivors_per_triangle(tris, image) if known else per
            if known and looked_up.any():  # the image filter's survivors, counted before planning
                kept = float((area * kept_per)[looked_up].sum()) / float((area * per)[looked_up].sum())
            if corners is not None and len(corners) == len(tris):
                z = np.asarray(corners)[:, :, 2]
                by_triangle = (z.min(axis=1).astype(np.float64), z.max(axis=1).astype(np.float64), area,
                               np.where(looked_up, per, 0), np.where(looked_up, kept_per, 0))
                return cls(greedy or face or "vox" in outputs, texture, greedy, face, histogram, most, candidates,
                           most_candidates, kept, by_triangle)
        return cls(greedy or face or "vox" in outputs, texture, greedy, face, histogram, most, candidates,
                   most_candidates, kept)

    def sampled(self, spec, bits, mesh, voxels_per_row) -> "ArtCost":
        """This cost with the .vox histogram's distinct colours estimated from a sample of
        the grid *bits* (``sampled_colors``) instead of one a voxel; itself where there is
        no texture or no histogram."""
        if not (self.histogram and self.texture and self.textured_mesh is not None):
            return self
        colors = sampled_colors(self.textured_mesh, spec, bits, mesh, voxels_per_row) + self.plain_colors
        return replace(self, max_colors=min(self.max_colors, colors))

    def slab_density(self, spec, layers: int):
        """(candidates a voxel, share kept) of the z-slab of *layers* rows of *spec* whose
        voxels look up the most: the area-weighted means over the triangles that reach each
        slab (a voxel's owner lies in its z row, or a row away), the largest lookup bytes;
        None without the triangles (then the mesh-wide ``candidates`` and ``kept``)."""
        if self.by_triangle is None or not self.texture:
            return None
        z_lo, z_hi, area, cands, kept = self.by_triangle
        h, nz = spec.voxel_size, spec.shape[2]
        k0 = np.arange(0, nz, max(1, int(layers)), dtype=np.float64)
        lo = spec.origin[2] + (k0 - 1) * h
        hi = spec.origin[2] + (np.minimum(k0 + layers, nz) + 1) * h
        by_lo, by_hi = np.argsort(z_lo), np.argsort(z_hi)

        def overlap(w):  # Σ w over the triangles with z_lo < hi and z_hi >= lo, per slab
            below_hi = np.concatenate([[0.0], np.cumsum(w[by_lo])])[np.searchsorted(z_lo[by_lo], hi, "left")]
            under_lo = np.concatenate([[0.0], np.cumsum(w[by_hi])])[np.searchsorted(z_hi[by_hi], lo, "left")]
            return below_hi - under_lo

        a, c, k = overlap(area), overlap(area * cands), overlap(area * kept)
        ok = (a > 0) & (c > 0)
        if not ok.any():
            return 0.0, 1.0
        per_voxel, share = c[ok] / a[ok], k[ok] / c[ok]
        best = int(np.argmax(per_voxel * (TEXTURE_PER_CANDIDATE + TEXTURE_PER_KEPT * share)))
        return float(per_voxel[best]), float(min(1.0, share[best]))

    def texture_bytes(self, voxels: int, density=None) -> int:
        """Peak of the texture colours of *voxels* voxels (``TexturedMesh.recolor``);
        *density*: (candidates a voxel, share kept) of a slab (``slab_density``)."""
        from .texture import CANDIDATES_PER_BLOCK

        if not self.texture:
            return 0
        n = int(voxels)
        candidates, kept = density if density is not None else (self.candidates, self.kept)
        block = min(candidates * n, max(CANDIDATES_PER_BLOCK, self.most_candidates))
        return int(ART_TEXTURE_PER_VOXEL * n + (TEXTURE_PER_CANDIDATE + TEXTURE_PER_KEPT * kept) * block)


def sampled_colors(textured_mesh, spec: GridSpec, bits, mesh: SplitMesh, voxels_per_row) -> int:
    """An upper estimate of the distinct .vox colours (``palette.color_keys``) of the grid's
    textured voxels: the sum over z rows of each row's distinct colours (at least the
    grid's: a colour seen in several rows counts in each), estimated from
    ``COLOR_SAMPLE_ROWS`` rows spread over the grid as *voxels* × (distinct textured
    colours in the sample / voxels in the sample), image by image; an image sampled
    Closest gives at most its texels' distinct colours (and Clip's transparent black).
    A row of more than its share of ``COLOR_SAMPLE_VOXELS`` gives its middle window of y
    rows; a window's share of distinct colours is at least its row's, as a colour seen in
    the row is seen in the window less often. Owners and colours as the job finds them
    (``owners_box``, ``TexturedMesh``)."""
    from ..grid import bitgrid as bg
    from .blocks import _popcount
    from .palette import color_keys
    from .slabs import owners_box
    from .texture import voxel_centres

    voxels_per_row = np.asarray(voxels_per_row, np.int64)
    rows = np.flatnonzero(voxels_per_row)
    if not len(rows):
        return 0
    count = min(COLOR_SAMPLE_ROWS, len(rows))
    rows = rows[np.unique(np.linspace(0, len(rows) - 1, count + 2)[1:-1].round().astype(np.int64))]
    share = max(1, COLOR_SAMPLE_VOXELS // len(rows))
    nx = spec.shape[0]
    start, width, height, samplers, pixels = textured_mesh.packed
    distinct, seen = np.zeros(len(start), np.int64), 0
    for k in rows.tolist():
        per_y = np.cumsum(_popcount(np.asarray(bits[k])).sum(axis=1, dtype=np.int64))
        y0, y1 = 0, len(per_y)
        if per_y[-1] > share:  # the middle window of y rows holding about *share* voxels
            y0 = int(np.searchsorted(per_y, (per_y[-1] - share) // 2, "right"))
            y1 = max(y0 + 1, int(np.searchsorted(per_y, (per_y[-1] + share) // 2, "left")) + 1)
        box = np.asarray(bits[k:k + 1, y0:y1])
        owner = owners_box(mesh, (0, y0, k), (nx, y1, k + 1), box)
        ijk = bg.coordinates(box, nx).astype(np.int64)
        ijk[:, 1] += y0
        ijk[:, 2] += k
        colors, textured = textured_mesh.colors(voxel_centres(ijk, spec), owner, np)
        image = textured_mesh.image_of_triangle[np.maximum(owner, 0)]  # the owner's image (the lookup keeps it)
        for i in np.unique(image[textured]).tolist():
            distinct[i] += len(np.unique(color_keys(colors[textured & (image == i)])))
        seen += len(owner)
    total = 0
    for i, d in enumerate(distinct.tolist()):
        estimate = int(np.ceil(int(voxels_per_row.sum()) * d / max(seen, 1)))
        if d and samplers[i] & 1:  # Closest: one texel's colour
            texels = pixels[start[i]:start[i] + 4 * int(width[i]) * int(height[i])].reshape(-1, 4)
            estimate = min(estimate, len(np.unique(color_keys(texels))) + 1)
        total += estimate
    return total


def art_bytes(art: "ArtCost | None", voxels: int, n_slab: int, faces: int, f_slab: int, density=None):
    """(kept, slab, finishing, writing) host bytes of the voxel art of a split Blocks/.vox
    job: kept through the slabs (the merged faces' runs or the face colours, the colour
    histogram), one slab's transients (after its owners), the end (``GreedyBuilder.finish``
    or the face colours put in order) and beside Blender's mesh (the face colour)."""
    if art is None or not art.colors:
        return 0, 0, 0, 0
    colors = min(int(voxels), art.max_colors)
    kept = HISTOGRAM_PER_COLOR * colors if art.histogram else 0
    slab = (art.texture_bytes(n_slab, density) if art.texture else 8 * n_slab) + ART_RGBA_PER_VOXEL * n_slab
    if art.histogram:  # the merge of a slab's colours into the histogram (first pass)
        slab += HISTOGRAM_ADD_PER_ROW * int(n_slab) + HISTOGRAM_MERGE_PER_COLOR * colors
    finishing = writing = 0
    if art.greedy:
        kept += GREEDY_KEPT_PER_FACE * faces
        slab += 8 * n_slab + GREEDY_ADD_PER_FACE * f_slab  # merge labels, the slab's faces
        finishing = GREEDY_FINISH_PER_FACE * faces
    elif art.face_colors:
        kept += FACE_COLOR_KEPT * faces
        finishing = FACE_COLOR_FINISH * faces
    if art.histogram:  # the palette, between the passes, beside what the slabs built
        finishing = max(finishing, quantize_bytes(colors))
    if art.face_colors or art.greedy:
        writing = (FACE_COLOR_KEPT + BLENDER_FACE_COLOR) * faces
    return int(kept), int(slab), int(finishing), int(writing)


def quantize_bytes(colors: int) -> int:
    """The .vox palette's k-means over *colors* distinct colours (``QUANTIZE_*``)."""
    from .palette import _CHUNK

    colors = int(colors)
    return QUANTIZE_PER_COLOR * colors + QUANTIZE_BLOCK_PER_COLOR * min(colors, _CHUNK)


def art_whole_bytes(art: "ArtCost | None", voxels: int, faces: int) -> int:
    """Host bytes of the voxel art of an unsplit group (``voxel_art.apply``, beside the
    group's arrays) beyond what the guard's fitted output constants hold: the texture
    colours (owners of the whole grid, then ``recolor``) and the merged faces (labels and
    ``greedy_faces``), in turn, beside the colours. (The .vox palette's ``quantize`` and
    the face colour of Points/.vox with Blocks were in the jobs ``bench/memory.py``
    fitted VOX_PER_VOXEL and BLOCKS_PER_FACE on; texture colours and merging were not.)"""
    from .guard import ATTR_PER_VOXEL

    if art is None or not (art.texture or art.greedy):
        return 0
    N, F = int(voxels), int(faces)
    stages = [0]
    if art.texture:
        stages.append(max(ATTR_PER_VOXEL * N, art.texture_bytes(N)))
    if art.greedy:
        stages.append(8 * N + (GREEDY_KEPT_PER_FACE + GREEDY_ADD_PER_FACE + GREEDY_FINISH_PER_FACE) * F)
    return int(ART_RGBA_PER_VOXEL * N + FACE_COLOR_KEPT * F + max(stages))
