"""The sparse voxelizer's device estimate holds (issue 21 §6): on the bunny at 1024³ and
2048³, for every mode and the vote on and off, the pool's peak over the voxelization is at
most the guard's estimate (``sparse_guard.sparse_bytes`` from the coarse pass's counts),
and the estimate at most 1.5× that peak."""

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import sparse_guard
from voxfx.kernels.voxelize.sparse import voxelize_sparse

CASES = [(res, mode, vote) for res in (1024, 2048)
         for mode, vote in (("surface", False), ("thin", False), ("solid", False), ("solid", True),
                            ("solid+surface", False), ("solid+surface", True))]


@pytest.mark.parametrize("res,mode,vote", CASES)
def test_the_device_estimate_is_within_1_5x_of_the_pool_peak(res, mode, vote):
    import cupy

    from tests.meshes import bunny

    mesh, why = bunny()
    if mesh is None:
        pytest.skip(why)
    v, t = mesh
    lo, hi = v.min(0).astype(np.float64), v.max(0).astype(np.float64)
    spec = GridSpec.around(lo, hi, float((hi - lo).max()) / res)  # as bench/voxelize_sparse*.py
    surface, inside = sparse_guard.brick_counts(v, t, spec, mode, vote=vote, xp=cupy)
    estimate = sparse_guard.sparse_bytes(surface, inside, len(v), len(t), xp=cupy, vote=vote, mode=mode,
                                         shape=spec.shape)
    voxelize_sparse(v, t, spec, mode, vote=vote, xp=cupy, tiles=True)  # compiled before the measured run
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    before = pool.total_bytes()
    grid = voxelize_sparse(v, t, spec, mode, vote=vote, xp=cupy, tiles=True)
    cupy.cuda.Device().synchronize()
    peak = pool.total_bytes() - before
    assert grid.topology.count > 0
    assert 0 < peak <= estimate <= 1.5 * peak, (peak / 2 ** 20, estimate / 2 ** 20, np.round(estimate / peak, 2))
