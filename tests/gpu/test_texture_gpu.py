"""Texture colours on the GPU equal the NumPy reference to float32 rounding, on fresh
random triangles, UVs and images."""

import numpy as np
import pytest

from voxfx.kernels.voxelize.texture import texture_colors


@pytest.mark.parametrize("n", [1, 1000, 300_000])
def test_gpu_texture_colors_match_cpu(n):
    """Random samplers per image: every Image Texture interpolation and extension."""
    import cupy as cp

    rng = np.random.default_rng()
    t, v = 200, 120
    vertices = rng.normal(size=(v, 3)).astype(np.float32)
    triangles = np.stack([rng.choice(v, 3, replace=False) for _ in range(t)]).astype(np.int32)
    uvs = rng.uniform(-2, 3, size=(t, 3, 2)).astype(np.float32)
    images = [rng.random((h, w, 4)).astype(np.float32) for h, w in ((1, 1), (7, 3), (256, 512))]
    image_of_triangle = rng.integers(-1, len(images), size=t).astype(np.int32)
    image_of_triangle[rng.random(t) < 0.5] = 2  # many neighbours share an image
    owner = rng.integers(-1, t, size=n).astype(np.int32)
    centres = (rng.normal(size=(n, 3)) * 2).astype(np.float32)
    samplers = rng.integers(0, 8, size=len(images))  # any interpolation × extension per image
    ref, ref_textured = texture_colors(centres, owner, vertices, triangles, uvs, image_of_triangle, images, xp=np,
                                       samplers=samplers)
    gpu, gpu_textured = texture_colors(cp.asarray(centres), cp.asarray(owner), cp.asarray(vertices),
                                       cp.asarray(triangles), cp.asarray(uvs), cp.asarray(image_of_triangle), images,
                                       xp=cp, samplers=samplers)
    gpu, gpu_textured = cp.asnumpy(gpu), cp.asnumpy(gpu_textured)
    np.testing.assert_array_equal(gpu_textured, ref_textured)
    np.testing.assert_allclose(gpu[ref_textured], ref[ref_textured], rtol=0, atol=1e-5)
    assert np.isnan(gpu[~ref_textured]).all()
