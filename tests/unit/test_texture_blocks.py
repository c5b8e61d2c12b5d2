"""The CPU texture lookup (``texture._texture_colors_numpy``) works in blocks cut by their
candidate triangles (``texture.CANDIDATES_PER_BLOCK``), not by a fixed voxel count (2^18
voxels took ~1 GB, more on high valences): the colours are the same for any cut, the
peak follows the block, and the art estimate (``art_cost.ArtCost``) holds it."""

import tracemalloc

import numpy as np
import pytest

from tests.unit.test_art_outputs import textured
from tests.unit.test_voxelize_slab_outputs import colored_soup
from tests.unit.test_voxelize_slabs import primitive
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import texture
from voxfx.kernels.voxelize.art_outputs import ArtSettings
from voxfx.kernels.voxelize.art_cost import ART_TEXTURE_PER_VOXEL, TEXTURE_PER_CANDIDATE, TEXTURE_PER_KEPT, ArtCost
from voxfx.kernels.voxelize.texture import TexturedMesh


def sheet(m=120, seed=0):
    """A wavy m×m grid of valence-6 vertices, every triangle textured with one image."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:m, 0:m]
    verts = np.stack([xx.ravel() / m, yy.ravel() / m, 0.1 * np.sin(xx.ravel() / 7.0)], 1).astype(np.float32)
    idx = (yy * m + xx)[:-1, :-1].ravel()
    tris = np.concatenate([np.stack([idx, idx + 1, idx + m + 1], 1), np.stack([idx, idx + m + 1, idx + m], 1)])
    t = len(tris)
    return verts, tris, TexturedMesh(verts, tris, rng.random((t, 3, 2)).astype(np.float32), np.zeros(t, np.int32),
                                     [rng.random((32, 32, 4)).astype(np.float32)])


def lookup(mesh, n, seed=1):
    rng = np.random.default_rng(seed)
    spec = GridSpec((0.0, 0.0, -0.2), 1.0 / 128, (128, 128, 52))
    ijk = np.stack([rng.integers(0, s, n) for s in spec.shape], 1).astype(np.int64)
    owner = rng.integers(-1, len(mesh.image_of_triangle), n)
    centres = texture.voxel_centres(ijk, spec)
    return lambda: mesh.colors(centres, owner, np)


@pytest.mark.parametrize("block", [1, 97, 5000])
def test_colours_are_the_same_for_any_cut(monkeypatch, block):
    v, t, spec = primitive("monkey", 48)
    mesh = textured(colored_soup(v, t))  # a third untextured, two images
    # a block a voxel looks each one up on its own, in Python: 4,000 voxels take that path
    # as 20,000 do, in a fifth of the time
    run = lookup(mesh, 4_000 if block == 1 else 20_000)
    whole_colors, whole_textured = run()
    monkeypatch.setattr(texture, "CANDIDATES_PER_BLOCK", block)
    colors, textured_ = run()
    assert whole_textured.any() and not whole_textured.all()
    assert np.array_equal(textured_, whole_textured)
    assert np.array_equal(colors, whole_colors, equal_nan=True)


def test_blocks_hold_at_most_their_candidates_or_one_voxel():
    _, tris, mesh = sheet(40)
    corners, tris32, ring_start, ring = mesh.mesh
    per = texture.candidates_per_triangle(tris32, ring_start)
    owner = np.random.default_rng(2).integers(0, len(tris), 3000)
    rows = np.arange(3000)
    for limit in (1, 50, 1000):
        texture.CANDIDATES_PER_BLOCK, old = limit, texture.CANDIDATES_PER_BLOCK
        try:
            blocks = texture._blocks(rows, owner, tris32, ring_start)
        finally:
            texture.CANDIDATES_PER_BLOCK = old
        assert np.array_equal(np.concatenate(blocks), rows)
        for b in blocks:
            assert len(b) == 1 or per[owner[b]].sum() <= limit


def test_the_peak_follows_the_block_and_the_art_estimate_holds_it(monkeypatch):
    """2^17 textured voxels in blocks of 2^16 candidates: the traced peak beyond the
    per-voxel arrays is one block's (with 2^18-voxel blocks it was all 2.5M candidates'),
    and ``ArtCost.texture_bytes`` is within 1.0-1.5x of the peak."""
    monkeypatch.setattr(texture, "CANDIDATES_PER_BLOCK", 1 << 16)
    verts, tris, mesh = sheet()
    n = 1 << 17
    rng = np.random.default_rng(3)
    spec = GridSpec((0.0, 0.0, -0.2), 1.0 / 128, (128, 128, 52))
    base = rng.random((n, 4)).astype(np.float32)
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    # the slab's int64 coordinates and owners, which the per-voxel count includes, then the lookup
    ijk = np.empty((n, 3), np.int64)
    for a, s in enumerate(spec.shape):
        ijk[:, a] = rng.integers(0, s, n)
    mesh.recolor(spec, ijk, rng.integers(0, len(tris), n), base, xp=np)
    peak = tracemalloc.get_traced_memory()[1] - start
    tracemalloc.stop()
    # one image: every candidate passes the filter
    per_candidate = TEXTURE_PER_CANDIDATE + TEXTURE_PER_KEPT
    assert peak - ART_TEXTURE_PER_VOXEL * n <= 1.2 * per_candidate * (1 << 16), peak / 2 ** 20
    estimate = ArtCost.of(ArtSettings("TEXTURE", textured=mesh), {"blocks"}, tris).texture_bytes(n)
    assert peak <= estimate <= 1.5 * peak, (peak / 2 ** 20, estimate / 2 ** 20)
