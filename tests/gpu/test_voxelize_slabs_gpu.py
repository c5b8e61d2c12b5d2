"""GPU slabs (``gpu_slabs.py``) == CPU slabs == the unsplit grid, bit for bit, in every
mode, on fresh random rotations of Blender's primitives and on tie/sliver soups; boxes cut
along x and y too; the vote's z parity carried across slabs; coverage of any slab size."""

import numpy as np
import pytest

from tests import exact_soups
from tests.meshes import rotation
from tests.unit.test_voxelize_slabs import DATA, around
from voxfx.kernels.grid import bitgrid
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.coverage import coverage
from voxfx.kernels.voxelize.slabs import SplitMesh, voxelize_box, voxelize_slabs

MODES = [("surface", False), ("thin", False), ("solid", False), ("solid+surface", False), ("solid", True),
         ("solid+surface", True)]


def random_meshes(rng):
    for name in ("torus", "monkey", "uv_sphere", "cube"):
        v = DATA[f"{name}_vertices"].astype(np.float64) @ rotation(*rng.uniform(0, 3, 3)).T
        v = (v + rng.uniform(-0.05, 0.05, 3)).astype(np.float32)
        yield name, v, DATA[f"{name}_triangles"], around(v, int(rng.integers(17, 41)))
    s, t = exact_soups.soup(int(rng.integers(1 << 30)))
    yield "soup", exact_soups.scaled(s), t, exact_soups.SCALED


@pytest.mark.parametrize("mode,vote", MODES, ids=lambda x: str(x))
def test_gpu_slabs_equal_cpu_slabs_and_the_unsplit_grid(mode, vote):
    import cupy

    from voxfx.kernels.voxelize.gpu_slabs import DeviceSplitMesh, voxelize_slabs_gpu

    rng = np.random.default_rng()
    for name, v, t, spec in random_meshes(rng):
        whole = voxelize(v, t, spec, mode, vote=vote, xp=np).bits
        assert np.array_equal(voxelize(v, t, spec, mode, vote=vote, xp=cupy).bits, whole), name
        cpu_mesh, gpu_mesh = SplitMesh(v, t, spec), DeviceSplitMesh(v, t, spec)
        for layers in (1, 3, int(rng.integers(2, 12))):
            cpu = list(voxelize_slabs(cpu_mesh, mode, layers, vote=vote))
            gpu = list(voxelize_slabs_gpu(gpu_mesh, mode, layers, vote=vote))
            for (k0, k1, a), (g0, g1, b) in zip(cpu, gpu):
                assert (k0, k1) == (g0, g1)
                assert np.array_equal(a, b), (name, layers, k0)
                assert np.array_equal(b, whole[k0:k1]), (name, layers, k0)


@pytest.mark.parametrize("mode,vote", [("surface", False), ("thin", False), ("solid+surface", True)])
def test_gpu_boxes_equal_cpu_boxes(mode, vote):
    from voxfx.kernels.voxelize.gpu_slabs import DeviceSplitMesh

    rng = np.random.default_rng()
    for name, v, t, spec in random_meshes(rng):
        whole = voxelize(v, t, spec, mode, vote=vote, xp=np).dense()
        cpu_mesh, gpu_mesh = SplitMesh(v, t, spec), DeviceSplitMesh(v, t, spec)
        shape = np.array(spec.shape)
        for _ in range(6):
            lo = rng.integers(0, shape - 1)
            hi = lo + 1 + rng.integers(0, shape - lo)
            a = voxelize_box(cpu_mesh, lo, hi, mode, vote=vote)
            b = gpu_mesh.voxelize_box(lo, hi, mode, vote=vote).get()
            assert np.array_equal(a, b), (name, lo, hi)
            dense = bitgrid.unpack(b, int(hi[0] - lo[0]))
            assert np.array_equal(dense, whole[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]), (name, lo, hi)


def test_gpu_coverage_does_not_depend_on_its_slab_size():
    import cupy

    rng = np.random.default_rng()
    v = DATA["torus_vertices"].astype(np.float64) @ rotation(*rng.uniform(0, 3, 3)).T
    t = DATA["torus_triangles"]
    spec = around(v.astype(np.float32), 15)
    for vote in (False, True):
        ref = coverage(v, t, spec, xp=np, vote=vote)
        for slab_bytes in (1, 50_000, 1 << 28):
            assert np.array_equal(coverage(v, t, spec, xp=cupy, vote=vote, slab_bytes=slab_bytes), ref)
