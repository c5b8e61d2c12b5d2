"""Block mesh and .vox attributes computed z-slab by z-slab from the whole bit grid
(issue 21 §6) equal the unsplit outputs: the block mesh array for array (faces between
slabs decided with the neighbour rows, corners welded across slabs), each face's
material (owners with the x-row fill per slab), and the .vox file byte for byte (palette
from per-owner counts, models streamed into place) — on Blender's primitives and tie
soups, at several slab heights; the guard plans the split with exact per-row counts."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.unit.test_voxelize_slabs import primitive, soup_cases
from voxfx.addon import vox_export
from voxfx.kernels.errors import Cancelled
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.blocks import exterior_faces
from voxfx.kernels.voxelize.guard import MemoryGuard
from voxfx.kernels.voxelize.outputs import compute_group, default_material_table
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.slab_outputs import BlockBuilder, row_counts, slab_faces, split_attribute_outputs
from voxfx.kernels.voxelize.slabs import slab_ranges

LAYERS = (1, 2, 5, 13)


def cases():
    yield "monkey-24", *primitive("monkey", 24)
    yield "torus-tilted-25", *primitive("torus", 25, (0.9, 0.2, 0.0))
    yield "cube-19", *primitive("cube", 19)
    for name, v, t, spec in soup_cases():
        yield name, v, t, spec


CASES = list(cases())


def slab_mesh(bits, spec, layers):
    builder, base = BlockBuilder(spec), 0
    for k0, k1 in slab_ranges(spec.shape[2], layers):
        keys, rank, direction = slab_faces(bits, spec, k0, k1)
        builder.add(k0, k1, keys, rank + base, direction, (rank + base).astype(np.int32))
        base += bitgrid.count(bits[k0:k1])
    return builder.finish()


@pytest.mark.parametrize("mode,vote", [("solid", True), ("surface", False), ("solid+surface", False)])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_the_slab_block_mesh_is_the_unsplit_block_mesh(case, mode, vote):
    _, v, t, spec = case
    bits = voxelize(v, t, spec, mode, vote=vote, xp=np).bits
    want = exterior_faces(bits, spec)
    assert want.face_count > 0 or (mode == "solid" and case[0].startswith("soup"))  # a soup encloses nothing
    for layers in LAYERS:
        got, values = slab_mesh(bits, spec, layers)
        for name in ("vertices", "quads", "voxel_of_face", "direction_of_face"):
            a, b = getattr(want, name), getattr(got, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (layers, name)
        assert np.array_equal(values, want.voxel_of_face)  # per-face values follow their faces
    voxels, faces = row_counts(bits, True)
    assert voxels.sum() == bitgrid.count(bits) and faces.sum() == want.face_count


def test_a_slab_face_between_two_slabs_is_decided_by_the_neighbour_row():
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (3, 3, 4))
    dense = np.zeros((4, 3, 3), bool)
    dense[1:3, 1, 1] = True  # a column of two voxels across the slab boundary at z = 2
    bits = bitgrid.pack(dense)
    got, _ = slab_mesh(bits, spec, 2)
    assert got.face_count == 10  # 2 × 4 sides + top + bottom: no face between them
    assert len(got.vertices) == 12


def colored_soup(v, t, n_materials=3, colored=True):
    """Faces of several materials; the second object's triangles carry corner colours."""
    T = len(t)
    obj = (np.arange(T) >= T // 2).astype(np.int32)
    rng = np.random.default_rng(7)
    return SimpleNamespace(vertices=v, triangles=t, material_index=(np.arange(T) % n_materials).astype(np.int32),
                           materials=[f"M{i}" for i in range(n_materials)], object_index=obj,
                           object_names=["A", "B"],
                           corner_colors=rng.random((T, 3, 4)).astype(np.float32) if colored else None,
                           colored_objects=[False, True] if colored else None,
                           bounds=(v.min(0), v.max(0)))


@pytest.mark.parametrize("colored", [False, True], ids=["materials", "corner-colours"])
@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=lambda c: c[0])
def test_split_blocks_and_vox_equal_the_unsplit_outputs(case, colored, tmp_path):
    _, v, t, spec = case
    soup = colored_soup(v, t, colored=colored)
    table = default_material_table(soup)
    table[:3] = [(1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1)]
    request = Request(mode="solid+surface", resolution=24, outputs={"blocks", "vox"})
    whole = compute_group("A", soup, None, spec, request, True, table=table)
    want_vox = vox_export.vox_bytes(whole.ijk, spec.shape, colors=whole.rgba, model_size=8)
    want_material = np.maximum(whole.material[whole.blocks.voxel_of_face], 0)
    assert len(np.unique(want_material)) > 1
    for layers in (1, 4, 100):
        path = tmp_path / f"split{layers}.vox"

        def write_vox(per_tile, counts, colors, slabs, path=path):
            return vox_export.write_vox_slabs(path, spec.shape, per_tile, counts, colors, slabs, model_size=8)

        blocks, temporary = split_attribute_outputs(soup, spec, whole.grid.bits, layers, request.outputs, table,
                                                    write_vox, model_size=8)
        mesh, material = blocks
        assert np.array_equal(mesh.quads, whole.blocks.quads) and np.array_equal(mesh.vertices, whole.blocks.vertices)
        assert np.array_equal(material, want_material)
        assert temporary.read_bytes() == want_vox
        vox_export.finish_vox(temporary, path)
        assert path.read_bytes() == want_vox and not temporary.exists()


def test_a_cancelled_vox_split_leaves_no_file(tmp_path):
    _, v, t, spec = CASES[0]
    soup = colored_soup(v, t)
    bits = voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits
    calls = []

    def stop_after_two(fraction, message):
        calls.append(message)
        return len(calls) < 2 or "MagicaVoxel" not in message

    def write_vox(per_tile, counts, colors, slabs):
        return vox_export.write_vox_slabs(tmp_path / "x.vox", spec.shape, per_tile, counts, colors, slabs)

    with pytest.raises(Cancelled):
        split_attribute_outputs(soup, spec, bits, 3, {"vox"}, default_material_table(soup), write_vox,
                                stop_after_two)
    assert list(tmp_path.iterdir()) == []


def test_the_histogram_palette_is_the_voxels_palette():
    rng = np.random.default_rng(3)
    colors = rng.integers(0, 256, (5000, 4)).astype(np.uint8)  # far more than 255 colours: median cut
    palette, index = vox_export.quantize_colors(colors)
    keys, inverse, counts = np.unique(vox_export.color_keys(colors), return_inverse=True, return_counts=True)
    p2, i2 = vox_export.quantize_histogram(keys, counts)
    assert len(palette) == 255 and np.array_equal(palette, p2) and np.array_equal(index, i2[inverse.ravel()])


def guard_for(soup, request, usable):
    return MemoryGuard(soup, None, request, True, *soup.bounds, usable=usable)


def test_the_guard_splits_blocks_and_vox_it_cannot_hold_whole_and_the_split_estimate_fits():
    v, t, spec = primitive("monkey", 96)
    soup = colored_soup(v, t)
    request = Request(mode="solid+surface", resolution=96, outputs={"blocks", "vox"})
    bits = voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits
    voxels, faces = bitgrid.count(bits), int(row_counts(bits, True)[1].sum())
    whole = guard_for(soup, request, 1 << 40).estimate(spec, voxels, faces)["total"]
    guard = guard_for(soup, request, whole - 1)
    guard.check_after(spec, voxels, faces, bits)
    assert guard.split_kind == "attributes" and 1 <= guard.split_layers < spec.shape[2]
    assert "split into" in guard.split_note and "Block mesh and MagicaVoxel" in guard.split_note
    from voxfx.kernels.voxelize.guard import LAST_ESTIMATE

    assert LAST_ESTIMATE["total"] <= whole - 1 < LAST_ESTIMATE["whole"]


def test_points_that_do_not_fit_are_refused_in_one_line_naming_what_fits():
    v, t, spec = primitive("monkey", 96)
    soup = colored_soup(v, t)
    request = Request(mode="solid+surface", resolution=96, outputs={"points"})
    bits = voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits
    voxels = bitgrid.count(bits)
    whole = guard_for(soup, request, 1 << 40).estimate(spec, voxels, None)["total"]
    guard = guard_for(soup, request, whole - 1)
    with pytest.raises(Exception) as refused:
        guard.check_after(spec, voxels, None, bits)
    text = str(refused.value)
    assert "\n" not in text and "largest resolution that fits is" in text
    assert "at resolution 96 a point cloud cannot fit" in text and "Block mesh" in text and "split into z-slabs" in text


class Rows:
    """A volume that keeps the slabs it is given (``vdb_stream.SlabVolume``'s ``add``)."""

    def __init__(self, spec):
        self.dense = np.full(spec.array_shape, np.nan, np.float32)

    def add(self, k0, values):
        self.dense[k0:k0 + len(values)] = values


@pytest.mark.parametrize("mode,vote", [("surface", False), ("solid+surface", True), ("solid", False)])
def test_a_bake_frame_split_into_slabs_is_the_unsplit_frame(mode, vote):
    from voxfx.kernels.voxelize.outputs import volume_density, volume_density_split

    v, t, spec = primitive("monkey", 20)
    soup = SimpleNamespace(vertices=v, triangles=t)
    want = volume_density(v, t, spec, mode, vote, np)
    assert want.max() > 0
    for layers in (1, 3, 7):
        got = volume_density_split(soup, spec, mode, vote, layers, np, Rows(spec)).dense
        assert np.array_equal(got, want), layers


def test_a_vox_file_beyond_its_32_bit_chunk_sizes_is_refused_before_any_work(monkeypatch):
    from voxfx.kernels.errors import InputError
    from voxfx.kernels.voxelize import guard as guard_module

    v, t, spec = primitive("monkey", 40)
    soup = colored_soup(v, t)
    bits = voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits
    voxels = bitgrid.count(bits)
    request = Request(mode="solid+surface", resolution=40, outputs={"vox"})
    guard_for(soup, request, 1 << 40).check_after(spec, voxels, None, bits)  # within the limit: no refusal
    monkeypatch.setattr(guard_module, "VOX_MAX_VOXELS", voxels // 4)
    with pytest.raises(InputError) as refused:
        guard_for(soup, request, 1 << 40).check_after(spec, voxels, None, bits)
    text = str(refused.value)
    assert "\n" not in text and "MagicaVoxel file holds at most" in text and "or lower" in text  # searched:
    # the resolution named is accepted and the next one up refused (test_voxelize_split_search)
    with pytest.raises(InputError, match="more than a MagicaVoxel file holds"):
        vox_export._check_size(2 ** 31, 600_000_000)
    vox_export._check_size(2 ** 31 - 1, 500_000_000)
