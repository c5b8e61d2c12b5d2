"""Voxel art on results held in parts (kernels/voxelize/art_outputs.py) equals the
unsplit dense path: texture colours, merged block faces and the .vox palette of a grid
split into z-slabs (at several slab heights, so runs and rectangles cross slab borders)
and of a sparse result, against the dense outputs of the same voxels (the dense greedy
mesh is itself checked against independent oracles in test_greedy.py, the k-means
palette in test_palette.py, texture sampling in test_texture*.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_voxelize_slab_outputs import CASES, colored_soup
from voxfx.addon import vox_export
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.art_outputs import (ArtSettings, SlabArt, greedy_from_faces, labels, palette_bytes,
                                                sparse_texture_colors)
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.greedy import GreedyBuilder, exposed_faces, greedy_faces
from voxfx.kernels.voxelize.outputs import colors_of, compute_group, compute_group_split, default_material_table
from voxfx.kernels.voxelize.palette import nearest_in_palette, quantize
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.slab_outputs import split_attribute_outputs
from voxfx.kernels.voxelize.texture import TexturedMesh, sampler_code

LAYERS = (1, 3, 7, 1000)
MESH_FIELDS = ("vertices", "quads", "label_of_quad", "voxel_of_quad", "direction_of_quad", "area_of_quad")


def textured(soup, seed=0):
    """A TexturedMesh of *soup*: random UVs, two images (one Closest/Mirror), a third of
    the triangles untextured."""
    rng = np.random.default_rng(seed)
    t = len(soup.triangles)
    uvs = rng.uniform(-0.5, 1.5, (t, 3, 2)).astype(np.float32)
    image = rng.integers(-1, 2, t).astype(np.int32)
    images = [rng.random((5, 7, 4)).astype(np.float32), rng.random((16, 16, 4)).astype(np.float32)]
    for img in images:
        img[..., 3] = 1
    return TexturedMesh(soup.vertices, soup.triangles, uvs, image, images,
                        [sampler_code(), sampler_code("Closest", "MIRROR")])


def table_of(soup):
    table = default_material_table(soup)
    table[:3] = [(1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1)]
    return table


def unsplit(soup, spec, mode, settings, outputs, table):
    """The dense path's colours (as ``addon/voxel_art.apply``), greedy mesh and .vox."""
    request = Request(mode=mode, resolution=24, outputs=set(outputs) | {"points"})
    whole = compute_group("A", soup, None, spec, request, True, table=table)
    rgba = whole.rgba if settings.color_source == "ATTRIBUTE" else colors_of(table, whole.material)
    rgba = rgba.astype(np.float32)
    if settings.color_source == "TEXTURE":
        owner = owner_triangles(soup.vertices, soup.triangles, spec, whole.grid.bits, xp=np)
        rgba = settings.textured.recolor(spec, whole.ijk, owner, rgba, np)
    return whole, rgba


@pytest.mark.parametrize("source", ["ATTRIBUTE", "MATERIAL", "TEXTURE"])
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3]], ids=lambda c: c[0])
def test_split_merged_mesh_and_colours_are_the_unsplit_ones(case, source):
    _, v, t, spec = case
    soup = colored_soup(v, t, colored=source == "ATTRIBUTE")
    table = table_of(soup)
    settings = ArtSettings(source, greedy=True, textured=textured(soup) if source == "TEXTURE" else None)
    whole, rgba = unsplit(soup, spec, "solid+surface", settings, {"blocks"}, table)
    want = greedy_faces(whole.grid.bits, spec, labels(whole.material, rgba))
    assert want.quad_count < want.faces_before  # something merged
    if source == "TEXTURE":
        assert len(np.unique(rgba, axis=0)) > 20  # the texture really coloured it
    for layers in LAYERS:
        art = SlabArt(settings, soup, spec, table, {"blocks"})
        (mesh, material), _ = split_attribute_outputs(soup, spec, whole.grid.bits, layers, {"blocks"}, table,
                                                      art=art)
        for name in MESH_FIELDS:
            a, b = getattr(want, name), getattr(mesh, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (layers, name)
        assert mesh.faces_before == want.faces_before
        np.testing.assert_array_equal(art.face_color, rgba[want.voxel_of_quad])
        np.testing.assert_array_equal(material, np.maximum(whole.material[want.voxel_of_quad], 0))
        assert art.notes == [f"Block mesh: {want.quad_count:,} faces ({want.faces_before:,} before merging)"]


@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: c[0])
def test_merged_faces_cover_each_colour_as_the_per_face_mesh_does(case):
    """Area per (direction, label) equals the exposed faces' count per (direction,
    label) of the unmerged mesh, and merging never adds faces: an oracle that does not
    go through the greedy code."""
    _, v, t, spec = case
    bits = voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits
    n = bitgrid.count(bits)
    label = np.random.default_rng(1).integers(0, 3, n)
    builder = GreedyBuilder(spec)
    for k0 in range(0, spec.shape[2], 4):  # parts: slabs of 4 rows, as the split job gives them
        from voxfx.kernels.voxelize.art_outputs import slab_exposed_faces

        base = bitgrid.count(bits[:k0])
        for d, ijk, rank in slab_exposed_faces(bits, spec, k0, min(k0 + 4, spec.shape[2])):
            builder.add(d, ijk, label[rank + base], rank + base)
    mesh, _ = builder.finish()
    per_face = [np.bincount(label[exposed_faces(bits, spec, d)[1]], minlength=3) for d in range(6)]
    for d in range(6):
        got = np.bincount(mesh.label_of_quad[mesh.direction_of_quad == d],
                          weights=mesh.area_of_quad[mesh.direction_of_quad == d], minlength=3)
        np.testing.assert_array_equal(got, per_face[d])
    assert mesh.quad_count <= mesh.faces_before == sum(p.sum() for p in per_face)


@pytest.mark.parametrize("palette_image", [False, True], ids=["kmeans", "image"])
@pytest.mark.parametrize("source", ["ATTRIBUTE", "TEXTURE"])
def test_split_vox_is_the_unsplit_vox_byte_for_byte(source, palette_image, tmp_path):
    """The k-means palette from the slabs' colours (more than 255 distinct colours: the
    k-means path), or a palette image: the same file as unsplit."""
    _, v, t, spec = CASES[0]
    soup = colored_soup(v, t, colored=True)
    table = table_of(soup)
    image_palette = np.random.default_rng(4).random((40, 4)).astype(np.float32) if palette_image else None
    if image_palette is not None:
        image_palette[:, 3] = 1
    settings = ArtSettings(source, palette=image_palette, textured=textured(soup) if source == "TEXTURE" else None)
    whole, rgba = unsplit(soup, spec, "solid+surface", settings, {"vox"}, table)
    if image_palette is None:
        palette, index = quantize(rgba)
        assert len(np.unique(rgba, axis=0)) > 255
    else:
        palette, index = image_palette, nearest_in_palette(rgba, image_palette)
    want = vox_export.vox_bytes(whole.ijk, spec.shape, color_indices=index + 1, palette=palette_bytes(palette),
                                model_size=8)
    for layers in LAYERS:
        path = tmp_path / f"split{layers}.vox"

        def write_vox(per_tile, counts, colors, slabs, palette=None, path=path):
            return vox_export.write_vox_slabs(path, spec.shape, per_tile, counts, colors, slabs, model_size=8,
                                              palette=palette)

        art = SlabArt(settings, soup, spec, table, {"vox"})
        _, temporary = split_attribute_outputs(soup, spec, whole.grid.bits, layers, {"vox"}, table, write_vox,
                                               model_size=8, art=art)
        assert temporary.read_bytes() == want, layers
        temporary.unlink()


def test_split_per_face_mesh_gets_the_unsplit_face_colours():
    """Without merging, the split job's per-face mesh gets a face colour per face (the
    unsplit path gives one whenever points or .vox want colours, or texture colours)."""
    _, v, t, spec = CASES[0]
    soup = colored_soup(v, t, colored=True)
    table = table_of(soup)
    settings = ArtSettings("TEXTURE", textured=textured(soup, seed=3))
    whole, rgba = unsplit(soup, spec, "solid+surface", settings, {"blocks"}, table)
    request = Request(mode="solid+surface", resolution=24, outputs={"blocks"})
    for layers in (2, 9):
        art = SlabArt(settings, soup, spec, table, request.outputs)
        out = compute_group_split("A", soup, spec, request, True, layers, None, kind="attributes", grid=whole.grid,
                                  table=table, art=art)
        np.testing.assert_array_equal(out.blocks.quads, whole.blocks.quads)
        np.testing.assert_array_equal(out.face_color, rgba[whole.blocks.voxel_of_face])
        assert out.warnings == []


def sparse_and_dense(v, t, spec, mode="solid+surface"):
    from voxfx.kernels.voxelize.sparse_outputs import compute_group_sparse

    soup = colored_soup(v, t, colored=False)
    table = table_of(soup)
    request = Request(mode=mode, resolution=24, outputs={"points", "blocks"})
    sparse = compute_group_sparse("A", soup, spec, request, True, table=table)
    dense = compute_group("A", soup, None, spec, request, True, table=table)
    return soup, table, sparse, dense


def order_of(ijk, other):
    """Index into *other* of each row of *ijk* (the same voxels, another order)."""
    key = lambda a: (a[:, 2].astype(np.int64) * 4096 + a[:, 1]) * 4096 + a[:, 0]  # noqa: E731
    sort = np.argsort(key(other))
    return sort[np.searchsorted(key(other)[sort], key(ijk))]


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[3]], ids=lambda c: c[0])
def test_sparse_merged_mesh_is_the_dense_one(case):
    _, v, t, spec = case
    soup, table, sparse, dense = sparse_and_dense(v, t, spec)
    at = order_of(sparse.ijk, dense.ijk)  # sparse voxel → dense voxel
    assert np.array_equal(dense.ijk[at], sparse.ijk)
    want = greedy_faces(dense.grid.bits, spec, labels(dense.material, dense.rgba))
    got = greedy_from_faces(sparse.blocks, sparse.ijk, labels(sparse.material, sparse.rgba), spec)
    for name in ("vertices", "quads", "label_of_quad", "direction_of_quad", "area_of_quad"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert np.array_equal(at[got.voxel_of_quad], want.voxel_of_quad)  # the same voxel, in brick order
    assert got.faces_before == want.faces_before == sparse.blocks.face_count


@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=lambda c: c[0])
def test_sparse_texture_colours_are_the_dense_ones(case):
    _, v, t, spec = case
    soup, table, sparse, dense = sparse_and_dense(v, t, spec)
    mesh = textured(soup, seed=5)
    owner = owner_triangles(soup.vertices, soup.triangles, spec, dense.grid.bits, xp=np)
    want = mesh.recolor(spec, dense.ijk, owner, dense.rgba, np)
    seen = []
    got = sparse_texture_colors(sparse.result, soup, spec, mesh, sparse.rgba, lambda f, m: seen.append(f) or True)
    np.testing.assert_array_equal(got, want[order_of(sparse.ijk, dense.ijk)])
    assert (got != sparse.rgba).any() and seen[-1] == 1.0


def test_labels_sort_as_material_then_colour_bytes():
    material = np.array([-1, 0, 0, 1])
    rgba = np.array([[1, 1, 1, 1], [0.5, 0, 0, 1], [0.5, 0, 0, 1], [0, 0, 0, 1]], np.float32)
    got = labels(material, rgba)
    assert got[1] == got[2] and len(set(got.tolist())) == 3
    assert list(np.argsort(got, kind="stable")) == [0, 1, 2, 3]
    # a colour differing below 8-bit sRGB precision merges; one byte apart does not
    near = labels(np.zeros(2, int), np.array([[0.5, 0, 0, 1], [0.5 + 1e-6, 0, 0, 1]], np.float32))
    assert near[0] == near[1]


def test_one_slab_of_a_column_across_slab_borders_merges_into_one_side_face():
    """A 1 × 1 × 6 column split into slabs of 2 rows: each side is one quad of area 6
    (runs along z joined across the borders, or rectangles stacked along z)."""
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (3, 3, 6))
    dense = np.zeros((6, 3, 3), bool)
    dense[:, 1, 1] = True
    bits = bitgrid.pack(dense)
    soup = colored_soup(np.zeros((3, 3), np.float32), np.array([[0, 1, 2]], np.int32), colored=False)
    art = SlabArt(ArtSettings("MATERIAL", greedy=True), soup, spec, default_material_table(soup), {"blocks"})
    base = 0
    for k0 in range(0, 6, 2):
        owner = np.full(2, -1, np.int32)
        art.add_slab(bits, k0, k0 + 2, owner, base)
        base += 2
    mesh, _ = art.blocks(None)
    assert mesh.quad_count == 6 and sorted(mesh.area_of_quad.tolist()) == [1, 1, 6, 6, 6, 6]
