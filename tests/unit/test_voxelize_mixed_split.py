"""Volume together with Block mesh / .vox split into z-slabs (issue 21 §6): the bit grid is
voxelized once and kept; the Volume goes slab by slab from it into one tree, then the
Blocks/.vox attributes slab by slab. The outputs equal the unsplit job's (the density
voxel for voxel, the block mesh array for array, the .vox byte for byte), and the guard
plans this split, instead of refusing, when the whole job is over the limit."""

import re

import numpy as np
import pytest

from tests.unit.test_voxelize_slab_outputs import CASES, Rows, colored_soup
from voxfx.addon import vox_export
from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import bitgrid
from voxfx.kernels.voxelize.guard import LAST_ESTIMATE, MemoryGuard
from voxfx.kernels.voxelize.outputs import compute_group, compute_group_split, default_material_table
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.slab_outputs import row_counts
from voxfx.kernels.voxelize.slabs import SplitMesh
from voxfx.kernels.voxelize.split_plan import mixed_split_estimate, mixed_splittable


def guard_for(soup, request, usable):
    return MemoryGuard(soup, None, request, True, *soup.bounds, usable=usable)


@pytest.mark.parametrize("outputs", [{"volume", "blocks", "vox"}, {"volume", "blocks"}, {"volume", "vox"}],
                         ids=lambda o: "+".join(sorted(o)))
@pytest.mark.parametrize("mode", ["solid+surface", "surface"])
@pytest.mark.parametrize("case", [CASES[0], CASES[1]], ids=lambda c: c[0])
def test_the_mixed_split_equals_the_unsplit_outputs(case, mode, outputs, tmp_path):
    _, v, t, spec = case
    soup = colored_soup(v, t)
    table = default_material_table(soup)
    table[:3] = [(1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1)]
    request = Request(mode=mode, resolution=24, outputs=outputs)
    whole = compute_group("A", soup, None, spec, request, True, table=table)
    assert whole.dense.max() > 0
    if mode == "solid+surface":  # the coverage gives fractions, not just 0/1
        assert ((whole.dense > 0) & (whole.dense < 1)).any()
    for volume_layers, attribute_layers in ((1, 1), (3, 5), (100, 2)):
        path = tmp_path / f"split{volume_layers}.vox"

        def write_vox(per_tile, counts, colors, slabs, path=path):
            return vox_export.write_vox_slabs(path, spec.shape, per_tile, counts, colors, slabs)

        got = compute_group_split("A", soup, spec, request, True, volume_layers, lambda name, s: Rows(s),
                                  kind="mixed", grid=whole.grid, table=table, write_vox=write_vox,
                                  attribute_layers=attribute_layers)
        assert got.count == whole.count > 0
        assert np.array_equal(got.volume.dense, whole.dense), (volume_layers, "density")
        if "blocks" in outputs:
            assert np.array_equal(got.blocks.quads, whole.blocks.quads)
            assert np.array_equal(got.blocks.vertices, whole.blocks.vertices)
            assert np.array_equal(got.face_material, np.maximum(whole.material[whole.blocks.voxel_of_face], 0))
        else:
            assert got.blocks is None
        if "vox" in outputs:
            want = vox_export.vox_bytes(whole.ijk, spec.shape, colors=whole.rgba)
            assert got.vox_file.read_bytes() == want
        else:
            assert got.vox_file is None


def test_only_volume_with_blocks_or_vox_and_no_lines_is_a_mixed_split():
    def ok(outputs, segments=None):
        return mixed_splittable(Request(mode="solid", outputs=outputs), segments)

    assert ok({"volume", "blocks"}) and ok({"volume", "vox"}) and ok({"volume", "blocks", "vox"})
    assert not ok({"volume"}) and not ok({"blocks", "vox"}) and not ok({"volume", "points", "blocks"})
    assert not ok({"volume", "blocks"}, segments=object())


def test_the_guard_splits_a_mixed_job_it_cannot_hold_whole_and_the_split_estimate_fits():
    from tests.unit.test_voxelize_slabs import primitive
    from voxfx.kernels.voxelize import voxelize

    v, t, spec = primitive("monkey", 96)
    soup = colored_soup(v, t)
    request = Request(mode="solid+surface", resolution=96, outputs={"volume", "blocks", "vox"})
    bits = voxelize(v, t, spec, "solid+surface", vote=True, xp=np).bits
    voxels, faces = bitgrid.count(bits), int(row_counts(bits, True)[1].sum())
    whole = guard_for(soup, request, 1 << 40).estimate(spec, voxels, faces)["total"]
    mesh = SplitMesh(v, t, spec)
    rows = row_counts(bits, True)
    need = lambda a, b: mixed_split_estimate(spec, request, mesh, True, rows, faces, a, b,  # noqa: E731
                                             base=MemoryGuard.base_bytes())
    usable = need(4, 4)
    assert need(1, 1) < usable < whole
    guard = guard_for(soup, request, usable)
    guard.check_after(spec, voxels, faces, bits)
    assert guard.split_kind == "mixed"
    assert 4 <= guard.split_layers < spec.shape[2] and 4 <= guard.attribute_layers < spec.shape[2]
    assert re.search(r"Volume split into \d+ z-slabs of \d+ rows, then Block mesh and MagicaVoxel voxel "
                     r"attributes into \d+ of \d+", guard.split_note), guard.split_note
    assert LAST_ESTIMATE["total"] == need(guard.split_layers, guard.attribute_layers) <= usable
    assert LAST_ESTIMATE["whole"] == whole
    # below what one row of either pass needs, it is refused in one line (the search for a
    # resolution that runs split is tested in test_voxelize_split_search)
    with pytest.raises(InputError) as refused:
        guard_for(soup, request, need(1, 1) - 1).check_after(spec, voxels, faces, bits)
    assert "\n" not in str(refused.value)
