"""Voxel art on a split grid with the texture sampler on the GPU (the split job's
``SlabArt`` samples each slab where the backend runs): the slabs' colours, merged mesh
and .vox equal the unsplit grid's sampled on the GPU, and the colours equal the CPU
reference to float32 rounding."""

import numpy as np
import pytest

from tests.unit.test_art_outputs import CASES, colored_soup, table_of, textured
from voxfx.addon import vox_export
from voxfx.kernels import backend
from voxfx.kernels.voxelize.art_outputs import ArtSettings, SlabArt, labels, palette_bytes
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.greedy import greedy_faces
from voxfx.kernels.voxelize.outputs import colors_of, compute_group
from voxfx.kernels.voxelize.palette import quantize
from voxfx.kernels.voxelize.request import Request
from voxfx.kernels.voxelize.slab_outputs import split_attribute_outputs


@pytest.mark.parametrize("layers", [1, 5])
def test_split_texture_art_on_the_gpu_equals_unsplit(layers, tmp_path):
    import cupy as cp

    assert backend.xp() is cp  # the split job samples where the backend runs
    _, v, t, spec = CASES[0]
    soup = colored_soup(v, t, colored=False)
    table = table_of(soup)
    seed = int(np.random.default_rng().integers(99))  # fresh inputs each run
    settings = ArtSettings("TEXTURE", greedy=True, textured=textured(soup, seed=seed))
    request = Request(mode="solid+surface", resolution=24, outputs={"points", "blocks", "vox"})
    whole = compute_group("A", soup, None, spec, request, True, table=table)
    owner = owner_triangles(soup.vertices, soup.triangles, spec, whole.grid.bits, xp=np)
    base = colors_of(table, whole.material).astype(np.float32)
    gpu = settings.textured.recolor(spec, whole.ijk, owner, base, cp)
    cpu = settings.textured.recolor(spec, whole.ijk, owner, base, np)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-5)
    want = greedy_faces(whole.grid.bits, spec, labels(whole.material, gpu))
    palette, index = quantize(gpu)
    want_vox = vox_export.vox_bytes(whole.ijk, spec.shape, color_indices=index + 1, palette=palette_bytes(palette),
                                    model_size=8)

    def write_vox(per_tile, counts, colors, slabs, palette=None):
        return vox_export.write_vox_slabs(tmp_path / "x.vox", spec.shape, per_tile, counts, colors, slabs,
                                          model_size=8, palette=palette)

    art = SlabArt(settings, soup, spec, table, {"blocks", "vox"})
    (mesh, _), temporary = split_attribute_outputs(soup, spec, whole.grid.bits, layers, {"blocks", "vox"}, table,
                                                   write_vox, model_size=8, art=art)
    for name in ("vertices", "quads", "label_of_quad", "voxel_of_quad", "area_of_quad"):
        np.testing.assert_array_equal(getattr(mesh, name), getattr(want, name), err_msg=name)
    np.testing.assert_array_equal(art.face_color, gpu[want.voxel_of_quad])
    assert temporary.read_bytes() == want_vox
