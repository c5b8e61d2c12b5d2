"""The sparse job's estimate (kernels/voxelize/sparse_guard.py, issue 11) counts the solid
modes' coverage fine pass where the job computes one (Points or a Volume of a solid), and
the coverage's own refusal uses the same model (measured against fresh Blender jobs in
tests/blender/test_voxelize_sparse_estimate.py)."""

import numpy as np

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import sparse_guard as g
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse_coverage import fine_bytes


def test_the_coverage_is_counted_where_the_job_computes_it():
    s, i, nv, nt = 200_000, 3_000_000, 10_000, 20_000
    fine, density = g.coverage_bytes(s, nv, nt)
    kept = g.KEPT_PER_BRICK * s + g.KEPT_PER_RUN * min(s, i)
    for mode in ("solid", "solid+surface"):
        for outputs in ({"volume"}, {"points"}, {"points", "volume"}):
            assert g.job_bytes(s, i, nv, nt, mode, outputs) >= kept + fine
        without = g.job_bytes(s, i, nv, nt, mode, {"blocks"})
        assert g.job_bytes(s, i, nv, nt, mode, {"blocks", "volume"}) > without
    for outputs in ({"volume"}, {"points"}):  # a surface's density is 1 at set voxels: no fine pass
        assert g.job_bytes(s, 0, nv, nt, "surface", outputs) < kept + fine
    assert g.job_bytes(s, i, nv, nt, "solid", {"volume"}) == max(g.sparse_bytes(s, i, nv, nt), kept + fine,
                                                                 g.BASE_BYTES + kept + density)


def test_the_coverage_refusal_and_the_job_use_one_model():
    from tests.meshes import box

    v, t = box((0.1, 0.1, 0.1), (0.9, 0.8, 0.7))
    spec = GridSpec.around(v.min(0), v.max(0), 0.8 / 96)
    result = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    assert result.stored_bricks > 0
    assert fine_bytes(result, len(v), len(t)) == g.coverage_bytes(result.stored_bricks, len(v), len(t))[0]



def _cube_soup():
    from types import SimpleNamespace

    from tests.meshes import box

    v, t = box((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    return SimpleNamespace(vertices=v.astype(np.float32), triangles=t.astype(np.int32), corner_colors=None,
                           material_index=np.zeros(len(t), np.int32), object_index=np.zeros(len(t), np.int32),
                           colored_objects=None, materials=[], bounds=(v.min(0), v.max(0)))


def test_a_volume_alone_goes_sparse_on_the_cpu_from_the_measured_size():
    """Auto: a Volume alone above ``AUTO_CPU_VOLUME_VOXELS`` runs sparse (measured faster
    and smaller there), below it keeps the dense job; Points keep the larger threshold."""
    from voxfx.kernels.voxelize.request import Request, grid_for

    soup = _cube_soup()
    lo, hi = soup.bounds

    def plan(res, outputs):
        request = Request(mode="solid", resolution=res, outputs=set(outputs), include_edges=False)
        spec = grid_for(lo, hi, request)
        return spec, g.plan_group(spec, request, soup, None, False, lo, hi)

    spec, (guard, sparse, _) = plan(520, {"volume"})
    assert spec.voxel_count > g.AUTO_CPU_VOLUME_VOXELS and sparse and guard is None
    spec, (guard, sparse, _) = plan(500, {"volume"})
    assert spec.voxel_count < g.AUTO_CPU_VOLUME_VOXELS and not sparse and guard is not None
    spec, (guard, sparse, _) = plan(520, {"points"})  # per-voxel outputs: sparse above 1024³ only
    assert not sparse and guard is not None
