"""The split Bake Frames frame and the split Block/.vox attributes on the GPU backend
(issue 21 §6) equal the CPU's unsplit results: the frame's density slab by slab from
the device slabs, and the block mesh and .vox bytes from a device-voxelized bit grid."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.unit.test_voxelize_slab_outputs import Rows, colored_soup, primitive
from voxfx.addon import vox_export
from voxfx.kernels.voxelize.outputs import (compute_group, default_material_table, volume_density,
                                            volume_density_split)
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.slab_outputs import split_attribute_outputs


@pytest.mark.parametrize("mode,vote", [("surface", False), ("solid+surface", True)])
def test_a_bake_frame_split_on_the_gpu_is_the_unsplit_cpu_frame(mode, vote):
    import cupy

    v, t, spec = primitive("monkey", 40)
    want = volume_density(v, t, spec, mode, vote, np)
    for layers in (1, 6):
        got = volume_density_split(SimpleNamespace(vertices=v, triangles=t), spec, mode, vote, layers, cupy,
                                   Rows(spec)).dense
        assert np.array_equal(got, want), layers


def test_split_blocks_and_vox_from_a_gpu_grid_equal_the_unsplit_cpu_outputs(tmp_path, monkeypatch):
    import cupy

    from voxfx.kernels import backend

    v, t, spec = primitive("monkey", 48)
    soup = colored_soup(v, t)
    table = default_material_table(soup)
    request = Request(mode="solid+surface", resolution=48, outputs={"blocks", "vox"})
    monkeypatch.setattr(backend, "xp", lambda: np)
    whole = compute_group("A", soup, None, spec, request, True, table=table)
    monkeypatch.setattr(backend, "xp", lambda: cupy)
    on_gpu = compute_group("A", soup, None, spec, request, True, table=table)
    assert isinstance(on_gpu.grid.bits, np.ndarray) and np.array_equal(on_gpu.grid.bits, whole.grid.bits)
    want_vox = vox_export.vox_bytes(whole.ijk, spec.shape, colors=whole.rgba)

    def write_vox(per_tile, counts, colors, slabs):
        return vox_export.write_vox_slabs(tmp_path / "x.vox", spec.shape, per_tile, counts, colors, slabs)

    (mesh, material), temporary = split_attribute_outputs(soup, spec, on_gpu.grid.bits, 5, request.outputs, table,
                                                          write_vox)
    assert np.array_equal(mesh.quads, whole.blocks.quads) and np.array_equal(mesh.vertices, whole.blocks.vertices)
    assert np.array_equal(material, np.maximum(whole.material[whole.blocks.voxel_of_face], 0))
    assert temporary.read_bytes() == want_vox


@pytest.mark.parametrize("mode", ["solid+surface", "surface"])
def test_a_mixed_split_on_the_gpu_equals_the_unsplit_cpu_outputs(mode, tmp_path, monkeypatch):
    """Volume with Block mesh and .vox from one GPU-voxelized bit grid: the density slab
    by slab (the coverage's slabs on the device), then the attributes slab by slab."""
    import cupy

    from voxfx.kernels import backend
    from voxfx.kernels.voxelize.outputs import compute_group_split

    v, t, spec = primitive("monkey", 48)
    soup = colored_soup(v, t)
    table = default_material_table(soup)
    request = Request(mode=mode, resolution=48, outputs={"volume", "blocks", "vox"})
    monkeypatch.setattr(backend, "xp", lambda: np)
    whole = compute_group("A", soup, None, spec, request, True, table=table)
    monkeypatch.setattr(backend, "xp", lambda: cupy)
    on_gpu = compute_group("A", soup, None, spec, request, True, table=table)
    assert np.array_equal(on_gpu.grid.bits, whole.grid.bits)

    def write_vox(per_tile, counts, colors, slabs):
        return vox_export.write_vox_slabs(tmp_path / "x.vox", spec.shape, per_tile, counts, colors, slabs)

    got = compute_group_split("A", soup, spec, request, True, 7, lambda name, s: Rows(s), kind="mixed",
                              grid=on_gpu.grid, table=table, write_vox=write_vox, attribute_layers=5)
    assert np.array_equal(got.volume.dense, whole.dense)
    assert np.array_equal(got.blocks.quads, whole.blocks.quads)
    assert np.array_equal(got.blocks.vertices, whole.blocks.vertices)
    assert np.array_equal(got.face_material, np.maximum(whole.material[whole.blocks.voxel_of_face], 0))
    assert got.vox_file.read_bytes() == vox_export.vox_bytes(whole.ijk, spec.shape, colors=whole.rgba)
