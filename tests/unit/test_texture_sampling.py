"""The Image Texture node's interpolation (Linear, Closest) and extension (Repeat, Extend,
Clip, Mirror) in texture.py's sampler, per mode, against an independent oracle: the
image padded far past its edges by NumPy's own ``np.pad`` (``wrap`` is Repeat, ``edge``
is Extend, ``constant`` 0 is Clip's transparent black, ``symmetric`` is Mirror's
reflection that repeats the edge texel), then sampled in float64 well inside the padded
array, where no edge rule is needed. Blender's own node is the oracle in
tests/blender/test_textures_blender.py."""

from __future__ import annotations

import numpy as np
import pytest

from voxfx.kernels.voxelize.texture import (EXTENSIONS, INTERPOLATIONS, pack_images, sample_images, sampler_code,
                                            texture_colors)

PAD_MODE = {"REPEAT": "wrap", "EXTEND": "edge", "CLIP": "constant", "MIRROR": "symmetric"}
PAD = 40  # texels of padding: UVs from −3 to 4 on images up to 11 texels a side stay inside


def oracle(image, s, r, interpolation, extension):
    """(N, 4) float64 samples of *image* (H, W, 4) at (s, r), from the padded image."""
    h, w, _ = image.shape
    padded = np.pad(image.astype(np.float64), ((PAD, PAD), (PAD, PAD), (0, 0)), mode=PAD_MODE[extension])
    f = np.float32  # texel coordinates in float32, as Blender (and the sampler) take them
    if interpolation == "Closest":
        return padded[np.floor(r * f(h)).astype(int) + PAD, np.floor(s * f(w)).astype(int) + PAD]
    x = (s * f(w) - f(0.5)).astype(np.float64) + PAD  # texel centres at i + 1/2
    y = (r * f(h) - f(0.5)).astype(np.float64) + PAD
    i, j = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = (x - i)[:, None], (y - j)[:, None]
    return ((1 - fy) * ((1 - fx) * padded[j, i] + fx * padded[j, i + 1])
            + fy * ((1 - fx) * padded[j + 1, i] + fx * padded[j + 1, i + 1]))


def ours(image, s, r, interpolation, extension):
    start, width, height, pixels = pack_images([image])
    packed = (start, width, height, np.array([sampler_code(interpolation, extension)], np.int32), pixels)
    return sample_images(s, r, np.zeros(len(s), np.int64), packed)


@pytest.mark.parametrize("extension", sorted(EXTENSIONS))
@pytest.mark.parametrize("interpolation", ["Linear", "Closest"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (7, 11)])
def test_every_mode_matches_the_padded_image(interpolation, extension, shape):
    rng = np.random.default_rng(hash((interpolation, extension, shape)) % 2**32)
    image = rng.random((*shape, 4)).astype(np.float32)
    s = rng.uniform(-3, 4, 4000).astype(np.float32)
    r = rng.uniform(-3, 4, 4000).astype(np.float32)
    # and points on texel borders and image edges exactly, where the rules change
    h, w = shape
    edges_s = (np.arange(-2 * w, 3 * w + 1) / w).astype(np.float32)
    s = np.concatenate([s, edges_s, np.full(len(edges_s), 0.5, np.float32)])
    r = np.concatenate([r, np.full(len(edges_s), 0.5, np.float32), edges_s * np.float32(w / h)])
    np.testing.assert_allclose(ours(image, s, r, interpolation, extension),
                               oracle(image, s, r, interpolation, extension), rtol=0, atol=2e-6)


def test_modes_really_differ_outside_the_image():
    """The oracle above could pass a sampler that ignored the mode only if the modes
    agreed; here they must not: one point left of a 1 × 3 ramp, per extension."""
    image = np.zeros((1, 3, 4), np.float32)
    image[0, :, 0] = [0.1, 0.5, 0.9]
    image[..., 3] = 1
    s, r = np.array([-0.1], np.float32), np.array([0.5], np.float32)  # x = −0.8: texel −1
    got = {e: float(ours(image, s, r, "Closest", e)[0, 0]) for e in EXTENSIONS}
    assert got == pytest.approx({"REPEAT": 0.9, "EXTEND": 0.1, "CLIP": 0.0, "MIRROR": 0.1})
    s = np.array([-0.5], np.float32)  # texel −2
    got = {e: float(ours(image, s, r, "Closest", e)[0, 0]) for e in EXTENSIONS}
    assert got == pytest.approx({"REPEAT": 0.5, "EXTEND": 0.1, "CLIP": 0.0, "MIRROR": 0.5})


def test_closest_keeps_one_texel_where_linear_blends():
    image = np.zeros((1, 2, 4), np.float32)
    image[0, 1] = 1.0
    s, r = np.array([0.5], np.float32), np.array([0.5], np.float32)  # the border of the two texels
    assert ours(image, s, r, "Closest", "REPEAT")[0, 0] == 1.0
    assert ours(image, s, r, "Linear", "REPEAT")[0, 0] == 0.5


def test_cubic_and_smart_are_sampled_as_linear():
    assert INTERPOLATIONS["Cubic"] == INTERPOLATIONS["Smart"] == INTERPOLATIONS["Linear"]
    assert sampler_code("Cubic", "CLIP") == sampler_code("Linear", "CLIP")


def test_one_image_under_two_samplers_is_packed_once_and_sampled_each_way():
    rng = np.random.default_rng(3)
    image = rng.random((4, 4, 4)).astype(np.float32)
    start, _, _, pixels = pack_images([image, image])
    assert start.tolist() == [0, 0] and len(pixels) == image.size
    # a quad whose two triangles use the image as Closest/Repeat and Linear/Clip
    vertices = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], np.float32)
    triangles = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    uvs = (vertices[triangles][:, :, :2] * 3 - 1).astype(np.float32)  # UVs −1..2: outside the image too
    centres = np.array([[0.9, 0.1, 0.0], [0.1, 0.9, 0.0]], np.float32)  # over triangle 0, then 1
    samplers = [sampler_code("Closest", "REPEAT"), sampler_code("Linear", "CLIP")]
    colors, textured = texture_colors(centres, np.array([0, 1]), vertices, triangles, uvs, np.array([0, 1]),
                                      [image, image], xp=np, samplers=samplers)
    assert textured.all()
    uv = centres[:, :2] * 3 - 1
    np.testing.assert_allclose(colors[0], oracle(image, uv[:1, 0], uv[:1, 1], "Closest", "REPEAT")[0], atol=2e-6)
    np.testing.assert_allclose(colors[1], oracle(image, uv[1:, 0], uv[1:, 1], "Linear", "CLIP")[0], atol=2e-6)


def test_bad_sampler_codes_are_refused():
    one = np.zeros((1, 3), np.float32)
    with pytest.raises(ValueError, match="sampler code"):
        texture_colors(one, np.zeros(1), one, np.zeros((1, 3), np.int32), np.zeros((1, 3, 2), np.float32),
                       np.zeros(1), [np.ones((1, 1, 4), np.float32)], xp=np, samplers=[9])
