"""GPU coverage and owner triangles == CPU reference."""

import numpy as np

from tests.meshes import rotation, torus
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.coverage import coverage


def test_gpu_coverage_and_owners_match_cpu():
    import cupy

    rng = np.random.default_rng()
    v, t = torus(0.8, 0.3, 48, 24)
    v = v @ rotation(*rng.uniform(0, 3, 3)).T + rng.uniform(-0.05, 0.05, 3)
    spec = GridSpec.around((-1.2, -1.2, -1.2), (1.2, 1.2, 1.2), 0.05)
    assert np.array_equal(coverage(v, t, spec, xp=np), coverage(v, t, spec, xp=cupy, slab_bytes=1 << 20))
    bits = voxelize(v, t, spec, "solid+surface", xp=np).bits
    cpu = owner_triangles(v, t, spec, bits, xp=np)
    gpu = owner_triangles(v, t, spec, bits, xp=cupy)
    assert np.array_equal(cpu, gpu) and (cpu >= 0).all()
