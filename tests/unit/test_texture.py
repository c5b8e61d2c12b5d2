"""Texture colours checked against independent oracles: closest points against a dense
search over the triangle, bilinear sampling against images whose bilinear interpolation
is known in closed form (linear ramps), Repeat wrapping against shifted UVs, and a
checker quad whose every voxel must get its cell's colour."""

from __future__ import annotations

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize.texture import closest_barycentrics, texture_colors, voxel_centres


def dense_closest(p, a, b, c, steps=400):
    """Closest point by brute force over a fine barycentric lattice (float64)."""
    s = np.linspace(0, 1, steps + 1)
    u, v = np.meshgrid(s, s)
    keep = u + v <= 1
    u, v = u[keep], v[keep]
    pts = (1 - u - v)[:, None] * a + u[:, None] * b + v[:, None] * c
    return pts[np.argmin(((pts - p) ** 2).sum(1))]


def test_closest_point_matches_a_dense_search():
    rng = np.random.default_rng(4)
    n = 300
    a, b, c = (rng.normal(size=(n, 3)).astype(np.float32) for _ in range(3))
    p = (rng.normal(size=(n, 3)) * 1.5).astype(np.float32)
    u, v, w = closest_barycentrics(p, a, b, c)
    assert (u >= -1e-6).all() and (v >= -1e-6).all() and (w >= -1e-6).all()
    np.testing.assert_allclose(u + v + w, 1, atol=1e-5)
    got = u[:, None] * a + v[:, None] * b + w[:, None] * c
    for i in range(0, n, 10):
        best = dense_closest(p[i].astype(np.float64), a[i], b[i], c[i])
        # the lattice point is at most one lattice step from the true closest point
        d_got = np.linalg.norm(got[i] - p[i])
        d_best = np.linalg.norm(best - p[i])
        assert d_got <= d_best + 1e-5
        assert d_got >= d_best - 0.02 * np.linalg.norm(np.ptp(np.stack([a[i], b[i], c[i]]), axis=0))


def test_zero_area_triangle_gives_a_corner_without_nan():
    a = np.array([[0, 0, 0]], np.float32)
    p = np.array([[5, 5, 5]], np.float32)
    u, v, w = closest_barycentrics(p, a, a.copy(), a.copy())
    assert np.isfinite([u, v, w]).all() and float(u[0] + v[0] + w[0]) == 1


def one_quad(size=1.0):
    """Quad [0, size]² at z = 0 as two triangles sharing the diagonal, UVs [0, 1]²:
    ((vertices, triangles), uvs)."""
    vertices = np.array([[0, 0, 0], [size, 0, 0], [size, size, 0], [0, size, 0]], np.float32)
    triangles = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    uvs = (vertices[triangles][:, :, :2] / size).astype(np.float32)
    return (vertices, triangles), uvs


def ramp_image(h, w, gx, gy):
    j, i = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 4), np.float32)
    img[..., 0] = gx * i
    img[..., 1] = gy * j
    img[..., 2] = 0.25
    img[..., 3] = 1
    return img


def test_bilinear_sampling_reproduces_a_linear_ramp():
    rng = np.random.default_rng(2)
    corners, uvs = one_quad()
    h, w = 16, 32
    img = ramp_image(h, w, 0.03, 0.05)
    # points above the quad, kept away from the wrapped border texels
    uv = rng.uniform(1.0 / w, 1 - 1.0 / w, size=(500, 2)).astype(np.float32)
    uv[:, 1] = rng.uniform(1.0 / h, 1 - 1.0 / h, size=500)
    centres = np.concatenate([uv, rng.uniform(0.01, 0.3, size=(500, 1))], 1).astype(np.float32)
    owner = (uv[:, 1] > uv[:, 0]).astype(np.int32)  # the triangle under the point
    colors, textured = texture_colors(centres, owner, *corners, uvs, np.array([0, 0]), [img], xp=np)
    assert textured.all()
    np.testing.assert_allclose(colors[:, 0], 0.03 * (uv[:, 0] * w - 0.5), atol=2e-5)
    np.testing.assert_allclose(colors[:, 1], 0.05 * (uv[:, 1] * h - 0.5), atol=2e-5)
    np.testing.assert_allclose(colors[:, 2:], np.tile([0.25, 1.0], (500, 1)), atol=1e-6)


def test_repeat_wraps_like_blender_image_texture():
    corners, uvs = one_quad()
    img = np.random.default_rng(5).random((5, 7, 4)).astype(np.float32)
    centres = np.array([[0.3, 0.2, 0.1], [0.01, 0.5, 0.0]], np.float32)
    owner = np.array([0, 1], np.int32)  # the triangle under each point
    base, _ = texture_colors(centres, owner, *corners, uvs, np.array([0, 0]), [img], xp=np)
    shifted, _ = texture_colors(centres, owner, *corners, uvs + np.float32(3), np.array([0, 0]), [img], xp=np)
    np.testing.assert_allclose(shifted, base, atol=1e-4)  # whole tiles away: the same colour
    # u = 0.01 on a 7-wide image sits left of texel 0's centre: it blends the last column
    x = 0.01 * 7 - 0.5 + 7  # in wrapped texel units
    y = 0.5 * 5 - 0.5
    fx, fy = x - np.floor(x), y - np.floor(y)
    i0, j0 = int(np.floor(x)) % 7, int(np.floor(y)) % 5
    i1, j1 = (i0 + 1) % 7, (j0 + 1) % 5
    expected = ((1 - fy) * ((1 - fx) * img[j0, i0] + fx * img[j0, i1])
                + fy * ((1 - fx) * img[j1, i0] + fx * img[j1, i1]))
    assert i0 == 6 and i1 == 0
    np.testing.assert_allclose(base[1], expected, atol=1e-5)


def test_checker_quad_every_voxel_gets_its_cell_colour():
    cells = 4
    rng = np.random.default_rng(9)
    palette = rng.random((cells * cells, 4)).astype(np.float32)
    img = palette.reshape(cells, cells, 4)  # texel (row j, column i)
    corners, uvs = one_quad(size=2.0)
    spec = GridSpec((0.0, 0.0, -0.25), 0.5, (cells, cells, 1))  # one voxel per texel
    j, i = np.mgrid[0:cells, 0:cells]
    ijk = np.stack([i.ravel(), j.ravel(), np.zeros(cells * cells, int)], 1)
    centres = voxel_centres(ijk, spec)
    owner = (j.ravel() > i.ravel()).astype(np.int32)
    colors, textured = texture_colors(centres, owner, *corners, uvs, np.array([0, 0]), [img], xp=np)
    assert textured.all()
    np.testing.assert_allclose(colors, img[j.ravel(), i.ravel()], atol=1e-6)


def test_untextured_and_unowned_voxels_are_nan():
    corners, uvs = one_quad()
    img = np.ones((2, 2, 4), np.float32)
    centres = np.zeros((3, 3), np.float32)
    colors, textured = texture_colors(centres, np.array([0, 1, -1]), *corners, uvs, np.array([0, -1]), [img], xp=np)
    assert textured.tolist() == [True, False, False]
    assert np.isnan(colors[1:]).all() and np.isfinite(colors[0]).all()


def test_bad_shapes_are_refused():
    corners, uvs = one_quad()
    with pytest.raises(ValueError):
        texture_colors(np.zeros((1, 3), np.float32), np.zeros(1), *corners, uvs[:1], np.array([0, 0]), [], xp=np)
    with pytest.raises(ValueError, match="image"):
        texture_colors(np.zeros((1, 3), np.float32), np.zeros(1), *corners, uvs, np.array([0, 3]),
                       [np.ones((1, 1, 4))], xp=np)


def test_seam_voxels_owned_by_the_neighbour_still_get_their_cell():
    """Owner = the lower triangle for every voxel (as the smallest-index rule gives along
    the diagonal): the nearest triangle of the same image around it is used instead."""
    cells = 4
    img = np.random.default_rng(1).random((cells, cells, 4)).astype(np.float32)
    mesh, uvs = one_quad(size=2.0)
    spec = GridSpec((0.0, 0.0, -0.25), 0.5, (cells, cells, 1))
    j, i = np.mgrid[0:cells, 0:cells]
    centres = voxel_centres(np.stack([i.ravel(), j.ravel(), np.zeros(cells * cells, int)], 1), spec)
    owner = np.zeros(cells * cells, np.int32)
    colors, _ = texture_colors(centres, owner, *mesh, uvs, np.array([0, 0]), [img], xp=np)
    np.testing.assert_allclose(colors, img[j.ravel(), i.ravel()], atol=1e-6)
    # a neighbour using another image is not a candidate: the seam point of the owner it is
    other = np.zeros((1, 1, 4), np.float32)
    colors2, _ = texture_colors(centres, owner, *mesh, uvs, np.array([0, 1]), [img, other], xp=np)
    below = j.ravel() <= i.ravel()  # centres over the owner (or on the diagonal)
    np.testing.assert_allclose(colors2[below], img[j.ravel(), i.ravel()][below], atol=1e-6)
    assert not np.allclose(colors2[~below], img[j.ravel(), i.ravel()][~below], atol=1e-3)
