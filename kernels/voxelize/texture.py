"""Texture colours: per voxel, the image colour of its owner triangle at the point of that
triangle closest to the voxel's centre. No ``bpy`` here.

    colors, textured = texture_colors(centres, owner, vertices, triangles, uvs, image_of_triangle, images,
                                      samplers=[sampler_code("Closest", "EXTEND"), ...])

For voxel v with centre p and owner triangle o (``attributes.owner_triangles``):

1. the nearest triangle t to p among o and the triangles sharing a vertex with o that use
   the same image (smaller squared distance, ties to the lower index). The owner alone
   is the lowest-numbered triangle *touching* the voxel, which along a seam is often the
   neighbour of the one the centre lies over: its closest point would then be on the
   seam, and a checker cell beside a diagonal would take a blend of its neighbours;
2. the closest point of t to p, as barycentrics (α, β, γ): the Voronoi-region walk over
   the triangle's vertices, edges and face (Ericson, *Real-Time Collision Detection*
   §5.1.5); a zero-area triangle gives its first corner;
3. its UV, α·uv₀ + β·uv₁ + γ·uv₂;
4. the image colour there as the material's Image Texture node samples it (its
   *sampler*, ``sampler_code``): row 0 at v = 0 (Blender's pixel order);
   **Linear**: texel centres at ((i + ½)/W, (j + ½)/H), x = u·W − ½, y = v·H − ½, the
   four texels around (x, y) blended bilinearly; **Closest**: the texel (⌊u·W⌋, ⌊v·H⌋).
   Texel indices past the image follow the node's **extension**: Repeat wraps them
   modulo W and H, Extend clamps them to the edge, Mirror reflects them (… 1 0 | 0 1 …
   W−1 | W−1 W−2 …), Clip makes them transparent black (RGBA 0: a Linear sample at
   the border blends the edge with it), as the node's documentation says and Blender's
   Image Texture node does (tests/blender/test_textures_blender.py compares with
   Geometry Nodes' own Image Texture node). Cubic and Smart are sampled as Linear (the
   add-on says so).

Voxels whose owner is −1 or whose triangle has no image (image index −1) get NaN and
``textured`` False; the caller gives them their material's colour.

Both backends run the same float32 arithmetic in the same order: NumPy on arrays, CuPy
as one CUDA thread per voxel (``texture_gpu._SOURCE``; the per-voxel function is
host-and-device so tests/unit/test_cuda_texture_host.py runs it on the CPU without a
GPU). Compiled without fused multiply-add, the results agree to float32 rounding (the
GPU test allows 1e-5).
"""

from __future__ import annotations

import numpy as np

from .. import backend
from .texture_gpu import _OPTIONS, _SOURCE, _texture_colors_cupy  # noqa: F401  (the host harness reads them here)

# Candidate triangles per NumPy block (a voxel's owner and the triangles around its
# corners, about 19 on a mesh of valence 6, at ~205 B each: ~200 MiB a block). Blocks were
# 2^18 voxels, ~1 GiB on such a mesh and more where valences are high; cut by the
# candidates, the block's memory no longer depends on the mesh.
CANDIDATES_PER_BLOCK = 1 << 20


def voxel_centres(ijk, spec, xp=np):
    """(N, 3) float32 world centres of integer voxels (i, j, k) of *spec*."""
    origin = xp.asarray(spec.origin, dtype=xp.float64)
    return (origin + (xp.asarray(ijk).astype(xp.float64) + 0.5) * spec.voxel_size).astype(xp.float32)


INTERPOLATIONS = {"Linear": 0, "Closest": 1, "Cubic": 0, "Smart": 0}  # Cubic, Smart: sampled as Linear
EXTENSIONS = {"REPEAT": 0, "EXTEND": 1, "CLIP": 2, "MIRROR": 3}


def sampler_code(interpolation: str = "Linear", extension: str = "REPEAT") -> int:
    """The sampler of an Image Texture node's ``interpolation`` and ``extension``: bit 0
    Closest, bits 1–2 the extension (the default, 0, is Linear / Repeat)."""
    return INTERPOLATIONS[interpolation] | EXTENSIONS[extension] << 1


def pack_images(images):
    """(start (M,) int64 into the flat pixels, width (M,) int32, height (M,) int32, flat
    float32 RGBA pixels) of (H, W, 4) images, rows bottom first. An array given twice
    (one image under two samplers) is stored once."""
    starts, widths, heights, flat, seen = [], [], [], [], {}
    at = 0
    for image in images:
        key = id(image)
        image = np.asarray(image, dtype=np.float32)
        if image.ndim != 3 or image.shape[2] != 4 or image.shape[0] < 1 or image.shape[1] < 1:
            raise ValueError(f"an image must be (H, W, 4) RGBA, not {image.shape}")
        if key not in seen:
            seen[key] = at
            flat.append(image.reshape(-1))
            at += image.size
        starts.append(seen[key])
        heights.append(image.shape[0])
        widths.append(image.shape[1])
    pixels = np.concatenate(flat) if flat else np.zeros(4, np.float32)
    return (np.asarray(starts, np.int64).reshape(-1), np.asarray(widths, np.int32).reshape(-1),
            np.asarray(heights, np.int32).reshape(-1), pixels)


def triangle_rings(triangles, vertex_count):
    """(ring_start (V + 1,) int64, ring (3T,) int32): the triangles using vertex x are
    ring[ring_start[x]:ring_start[x + 1]], ascending."""
    flat = np.asarray(triangles, np.int64).ravel()
    order = np.argsort(flat, kind="stable")
    ring_start = np.zeros(vertex_count + 1, np.int64)
    np.cumsum(np.bincount(flat, minlength=vertex_count), out=ring_start[1:])
    return ring_start, (order // 3).astype(np.int32)


def _samplers(samplers, count):
    if samplers is None:
        return np.zeros(count, np.int32)
    samplers = np.asarray(samplers, np.int32).reshape(-1)
    if len(samplers) != count or (samplers < 0).any() or (samplers > 7).any():
        raise ValueError(f"one sampler code (0..7, sampler_code) per image: {count} images, {len(samplers)} codes")
    return samplers


def texture_colors(centres, owner, vertices, triangles, uvs, image_of_triangle, images, xp=None, samplers=None):
    """((N, 4) float32 colours, (N,) bool textured) of voxels at *centres* (N, 3) with owner
    triangles *owner* (N,) int (−1: none), over the mesh *vertices* (V, 3) / *triangles*
    (T, 3) with per triangle its corner *uvs* (T, 3, 2) and image index
    *image_of_triangle* (T,) (−1: none) into *images*, a list of (H, W, 4) float32 RGBA
    pixel arrays (Blender's order, bottom row first), each sampled as its *samplers*
    code says (``sampler_code``; default Linear / Repeat). Runs on *xp* (default: the
    active backend)."""
    mesh = TexturedMesh(vertices, triangles, uvs, image_of_triangle, images, samplers)
    return mesh.colors(centres, owner, xp)


class TexturedMesh:
    """A mesh's triangles, their UVs and images, prepared once (corners, the triangles
    around each vertex, the packed images) for ``colors`` of many voxel sets: the z-slabs
    of a split grid, the brick chunks of a sparse one. Arguments as ``texture_colors``."""

    def __init__(self, vertices, triangles, uvs, image_of_triangle, images, samplers=None):
        t = len(image_of_triangle)
        if (tuple(triangles.shape) != (t, 3) or tuple(uvs.shape) != (t, 3, 2) or vertices.ndim != 2
                or vertices.shape[1] != 3):
            raise ValueError("texture_colors: centres (N, 3), owner (N,), vertices (V, 3), triangles (T, 3), "
                             "uvs (T, 3, 2) and image_of_triangle (T,) must agree")
        image_index = np.asarray(backend.to_numpy(image_of_triangle)).astype(np.int64)
        if t and image_index.max(initial=-1) >= len(images):
            raise ValueError(f"a triangle uses image {int(image_index.max())} of {len(images)}")
        tris = np.asarray(backend.to_numpy(triangles)).astype(np.int64)
        verts = np.asarray(backend.to_numpy(vertices), np.float32)
        corners = verts[tris] if t else np.zeros((0, 3, 3), np.float32)
        ring_start, ring = triangle_rings(tris, len(verts))
        self.mesh = (corners, tris.astype(np.int32), ring_start, ring)
        self.uvs = np.asarray(backend.to_numpy(uvs), np.float32)
        self.image_of_triangle = image_index.astype(np.int32)
        start, width, height, pixels = pack_images(images)
        self.packed = (start, width, height, _samplers(samplers, len(images)), pixels)
        self._device = None  # the same arrays on the GPU, uploaded once

    @property
    def any(self) -> bool:
        return bool((self.image_of_triangle >= 0).any())

    def colors(self, centres, owner, xp=None):
        """((N, 4) float32 colours, (N,) bool textured): ``texture_colors``."""
        xp = xp or backend.xp()
        if tuple(centres.shape) != (len(owner), 3):
            raise ValueError("texture_colors: centres (N, 3), owner (N,), vertices (V, 3), triangles (T, 3), "
                             "uvs (T, 3, 2) and image_of_triangle (T,) must agree")
        if xp is np:
            return _texture_colors_numpy(np.asarray(backend.to_numpy(centres)), np.asarray(backend.to_numpy(owner)),
                                         self.mesh, self.uvs, self.image_of_triangle, self.packed)
        if self._device is None:
            self._device = tuple(tuple(xp.asarray(a) for a in group)
                                 for group in (self.mesh, (self.uvs, self.image_of_triangle), self.packed))
        mesh, (uvs, image_of_triangle), packed = self._device
        return _texture_colors_cupy(xp, centres, owner, mesh, uvs, image_of_triangle, packed)

    def recolor(self, spec, ijk, owner, base_rgba, xp=None):
        """*base_rgba* (N, 4) float32 with the textured voxels (integer *ijk* of *spec*,
        owner triangles *owner*) given their texture's colour; a new host array."""
        xp = xp or backend.xp()
        colors, textured = self.colors(xp.asarray(voxel_centres(ijk, spec)), xp.asarray(owner), xp)
        colors, textured = np.asarray(backend.to_numpy(colors)), np.asarray(backend.to_numpy(textured))
        out = np.array(base_rgba, dtype=np.float32, copy=True)
        out[textured] = colors[textured]
        return out


def _texture_colors_numpy(centres, owner, mesh, uvs, image_of_triangle, packed):
    """The CUDA source's arithmetic on arrays, operation for operation, in float32."""
    corners, tris, ring_start, ring = mesh
    owner = np.asarray(owner, np.int64)
    image_of_triangle = np.asarray(image_of_triangle, np.int64)
    n = len(owner)
    image = np.where(owner >= 0, image_of_triangle[np.maximum(owner, 0)] if len(image_of_triangle) else -1, -1)
    textured = image >= 0
    out = np.full((n, 4), np.nan, np.float32)
    rows = np.flatnonzero(textured)
    for chunk in _blocks(rows, owner, tris, ring_start):
        p = np.asarray(centres, np.float32)[chunk]
        t, (u, v, w) = _nearest_triangle(p, owner[chunk], image[chunk], corners, tris, ring_start, ring,
                                         image_of_triangle)
        uv = np.asarray(uvs, np.float32)[t]
        su = u * uv[:, 0, 0] + v * uv[:, 1, 0] + w * uv[:, 2, 0]
        r = u * uv[:, 0, 1] + v * uv[:, 1, 1] + w * uv[:, 2, 1]
        out[chunk] = sample_images(su, r, image[chunk], packed)
    return out, textured


def sample_images(s, r, image, packed):
    """(N, 4) float32: image *image* (N,) of *packed* (start, width, height, samplers,
    pixels) at (s, r) (N,) float32 each, as its sampler says: the CUDA ``sample_image``
    on arrays, operation for operation."""
    f = np.float32
    start, width, height, samplers, pixels = packed
    s, r = np.asarray(s, f), np.asarray(r, f)
    W, H = width[image].astype(np.int64), height[image].astype(np.int64)
    sampler = samplers[image]
    extension, closest = sampler >> 1, (sampler & 1) == 1
    base = start[image][:, None] + np.arange(4)[None, :]
    out = np.empty((len(s), 4), f)
    c = np.flatnonzero(closest)  # Closest: the texel under (s W, r H)
    if len(c):
        x, y = np.floor(s[c] * W[c].astype(f)), np.floor(r[c] * H[c].astype(f))
        i = texel_index(x.astype(np.int64), W[c], extension[c])
        j = texel_index(y.astype(np.int64), H[c], extension[c])
        out[c] = texel_at(pixels, base[c], W[c], i, j)
    lin = np.flatnonzero(~closest)
    if len(lin):
        e, w_, h_ = extension[lin], W[lin], H[lin]
        x = s[lin] * w_.astype(f) - f(0.5)
        y = r[lin] * h_.astype(f) - f(0.5)
        x0, y0 = np.floor(x), np.floor(y)
        fx, fy = x - x0, y - y0
        ix, iy = x0.astype(np.int64), y0.astype(np.int64)
        i0, i1 = texel_index(ix, w_, e), texel_index(ix + 1, w_, e)
        j0, j1 = texel_index(iy, h_, e), texel_index(iy + 1, h_, e)
        b = base[lin]
        low = ((f(1) - fx)[:, None] * texel_at(pixels, b, w_, i0, j0)
               + fx[:, None] * texel_at(pixels, b, w_, i1, j0))
        high = ((f(1) - fx)[:, None] * texel_at(pixels, b, w_, i0, j1)
                + fx[:, None] * texel_at(pixels, b, w_, i1, j1))
        out[lin] = (f(1) - fy)[:, None] * low + fy[:, None] * high
    return out


def texel_index(i, n, extension):
    """The CUDA ``texel_index`` on arrays: texel i of n under the extension (0 Repeat,
    1 Extend, 2 Clip, 3 Mirror); −1 past the image under Clip."""
    repeat = ((i % n) + n) % n
    extend = np.clip(i, 0, n - 1)
    clip = np.where((i < 0) | (i >= n), -1, i)
    m = np.where(i < 0, -i - 1, i) % (2 * n)
    mirror = np.where(m >= n, 2 * n - 1 - m, m)
    return np.select([extension == 1, extension == 2, extension == 3], [extend, clip, mirror], repeat)


def texel_at(pixels, base, W, i, j):
    """(N, 4) RGBA of texel (i, j) per row (rows at *base* of width *W*); transparent
    black where i or j is −1 (past the image under Clip)."""
    outside = (i < 0) | (j < 0)
    values = pixels[base + (4 * (np.maximum(j, 0) * W + np.maximum(i, 0)))[:, None]]
    return np.where(outside[:, None], np.float32(0), values)


def candidates_per_triangle(tris, ring_start):
    """(T,) int64: the candidates a voxel owned by each triangle looks at in
    ``_nearest_triangle`` (itself and the triangles around its three corners, before the
    image filter)."""
    valence = np.diff(ring_start)
    return 1 + valence[np.asarray(tris, np.int64)].sum(axis=1) if len(tris) else np.zeros(0, np.int64)


def survivors_per_triangle(tris, image_of_triangle):
    """(T,) int64: of each triangle's candidates (``candidates_per_triangle``) those the
    image filter of ``_nearest_triangle`` keeps: itself and the triangles around its
    corners with its own image (counted per (vertex, image) from the corners)."""
    tris = np.asarray(tris, np.int64)
    if not len(tris):
        return np.zeros(0, np.int64)
    image = np.asarray(image_of_triangle, np.int64) + 1  # untextured (−1) is a value of its own
    width = int(image.max()) + 1
    keys = (tris * width + image[:, None]).ravel()  # (corner vertex, the triangle's image)
    unique, counts = np.unique(keys, return_counts=True)
    return 1 + counts[np.searchsorted(unique, keys)].reshape(-1, 3).sum(axis=1)


def _blocks(rows, owner, tris, ring_start):
    """*rows* (textured voxels) cut in consecutive blocks of at most CANDIDATES_PER_BLOCK
    candidates (a voxel with more alone in its block): each voxel's result does not depend
    on its block, so the colours are the same for any cut."""
    if len(rows) == 0:
        return []
    ends = np.cumsum(candidates_per_triangle(tris, ring_start)[owner[rows]])
    cuts, at = [0], 0
    while at < len(rows):
        base = ends[at - 1] if at else 0
        nxt = int(np.searchsorted(ends, base + CANDIDATES_PER_BLOCK, side="right"))
        at = max(nxt, at + 1)
        cuts.append(at)
    return [rows[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _nearest_triangle(p, owner, image, corners, tris, ring_start, ring, image_of_triangle):
    """(triangle, barycentrics) per point: the least (squared distance, index) among the
    owner and the triangles around its corners that use the same image."""
    m = len(p)
    vertex = tris[owner].astype(np.int64)  # (m, 3)
    lengths = (ring_start[vertex + 1] - ring_start[vertex]).ravel()
    firsts = np.repeat(ring_start[vertex].ravel(), lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    candidate = np.concatenate([owner, ring[firsts + within].astype(np.int64)])
    point = np.concatenate([np.arange(m), np.repeat(np.repeat(np.arange(m), 3), lengths)])
    keep = image_of_triangle[candidate] == image[point]
    candidate, point = candidate[keep], point[keep]
    q = corners[candidate]
    u, v, w = closest_barycentrics(p[point], q[:, 0], q[:, 1], q[:, 2])
    d = p[point] - (u[:, None] * q[:, 0] + v[:, None] * q[:, 1] + w[:, None] * q[:, 2])
    d2 = d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2]
    order = np.lexsort((candidate, d2, point))
    first = order[np.searchsorted(point[order], np.arange(m))]
    return candidate[first], (u[first], v[first], w[first])


def closest_barycentrics(p, a, b, c):
    """(u, v, w) float32 (N,) barycentrics of the points of triangles abc closest to p,
    each (N, 3) float32: the CUDA ``closest_barycentrics`` on arrays."""
    f = np.float32

    def dot(x, y):
        return x[:, 0] * y[:, 0] + x[:, 1] * y[:, 1] + x[:, 2] * y[:, 2]

    ab, ac, ap, bp, cp = b - a, c - a, p - a, p - b, p - c
    d1, d2, d3, d4, d5, d6 = dot(ab, ap), dot(ac, ap), dot(ab, bp), dot(ac, bp), dot(ab, cp), dot(ac, cp)
    vc, vb, va = d1 * d4 - d3 * d2, d5 * d2 - d1 * d6, d3 * d6 - d5 * d4
    n = len(p)
    u, v, w = np.ones(n, f), np.zeros(n, f), np.zeros(n, f)
    todo = np.ones(n, bool)

    def take(cond):
        nonlocal todo
        hit = todo & cond
        todo = todo & ~hit
        return hit

    with np.errstate(divide="ignore", invalid="ignore"):
        take((d1 <= 0) & (d2 <= 0))  # vertex a: (1, 0, 0)
        hit = take((d3 >= 0) & (d4 <= d3))  # vertex b
        u[hit], v[hit] = 0, 1
        hit = take((vc <= 0) & (d1 >= 0) & (d3 <= 0))  # edge ab
        t = d1[hit] / (d1[hit] - d3[hit])
        u[hit], v[hit] = f(1) - t, t
        hit = take((d6 >= 0) & (d5 <= d6))  # vertex c
        u[hit], w[hit] = 0, 1
        hit = take((vb <= 0) & (d2 >= 0) & (d6 <= 0))  # edge ac
        t = d2[hit] / (d2[hit] - d6[hit])
        u[hit], w[hit] = f(1) - t, t
        hit = take((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0))  # edge bc
        t = (d4[hit] - d3[hit]) / ((d4[hit] - d3[hit]) + (d5[hit] - d6[hit]))
        u[hit], v[hit], w[hit] = 0, f(1) - t, t
        total = va + vb + vc
        hit = take(total > 0)  # inside the face; a zero-area triangle keeps vertex a
        v[hit] = vb[hit] / total[hit]
        w[hit] = vc[hit] / total[hit]
        u[hit] = f(1) - v[hit] - w[hit]
    return u, v, w
