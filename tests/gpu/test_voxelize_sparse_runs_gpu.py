"""``voxelize(..., sparse=True)`` on the GPU keeps a solid's interior as runs of full bricks
(issue 11): the same runs, bricks and answers as the CPU (tests/unit/
test_voxelize_sparse_runs.py), bit for bit with the dense GPU path, runs cut at the
grid's end, the block mesh from runs equal to the dense one."""

import numpy as np
import pytest

from tests.meshes import uv_sphere
from voxfx.kernels import backend
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.blocks import exterior_faces
from voxfx.kernels.voxelize.sparse import CHANNEL
from voxfx.kernels.voxelize.sparse_outputs import block_mesh


def open_box(n=1.0):
    """A cube without its +x face: every row through it stays inside to the grid's end."""
    v = np.array([[x, y, z] for z in (0, n) for y in (0, n) for x in (0, n)], np.float64)
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2)]
    t = np.array([tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))], np.int64)
    return v, t


def sphere_case():
    v, t = uv_sphere(1.0, 64, 32)
    return v, t, GridSpec.around(v.min(0), v.max(0), 2.0 / 75)


def box_case():
    v, t = open_box()
    return v, t, GridSpec((-0.05, -0.05, -0.05), 1.0 / 50, (71, 53, 53))


def big_sphere_case():
    v, t = uv_sphere(1.0, 96, 48)
    return v, t, GridSpec.around(v.min(0), v.max(0), 2.0 / 400)


def face_set(vertices, quads, voxel_of_face, ijk):
    corners = vertices[quads].reshape(len(quads), -1)
    rows = np.concatenate([corners, ijk[voxel_of_face].astype(np.float32)], axis=1)
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("case", [sphere_case, box_case, big_sphere_case])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_gpu_runs_equal_the_cpu_and_the_dense_gpu_voxels(case, mode):
    import cupy

    v, t, spec = case()
    gpu = voxelize(v, t, spec, mode, xp=cupy, sparse=True, keep_on_device=True)
    assert isinstance(gpu.runs, cupy.ndarray) and gpu.full_bricks > 0
    dense = voxelize(v, t, spec, mode, xp=cupy)
    assert np.array_equal(backend.to_numpy(gpu.to_dense().bits), backend.to_numpy(dense.bits))
    assert gpu.count() == dense.count() > 0
    full = gpu.grid.expanded(CHANNEL)
    assert gpu.active_bricks == full.topology.count == gpu.stored_bricks + gpu.full_bricks
    assert gpu.nbytes < full.nbytes
    shape = np.asarray(spec.shape)
    runs = cupy.asnumpy(gpu.runs)
    assert (runs[:, 1] * 8 <= shape[0]).all() and ((runs[:, 2:4] + 1) * 8 <= shape[1:]).all()
    if case is not big_sphere_case:  # the CPU's tile path: the same bricks after expansion
        cpu = voxelize(v, t, spec, mode, xp=np, sparse=True)
        cfull = cpu.grid.expanded(CHANNEL)
        assert np.array_equal(cupy.asnumpy(full.topology.keys), cfull.topology.keys)
        assert np.array_equal(cupy.asnumpy(full.channels[CHANNEL]), cfull.channels[CHANNEL])
        assert np.array_equal(cupy.asnumpy(gpu.coordinates()), cpu.coordinates())
    host = voxelize(v, t, spec, mode, xp=cupy, sparse=True)  # to the host: runs travel too
    assert isinstance(host.runs, np.ndarray) and host.count() == gpu.count()


@pytest.mark.parametrize("case", [sphere_case, box_case])
def test_gpu_block_mesh_with_runs_equals_the_dense_one(case):
    import cupy

    v, t, spec = case()
    dense = voxelize(v, t, spec, "solid+surface", xp=np)
    want = exterior_faces(dense.bits, spec)
    got_r = voxelize(v, t, spec, "solid+surface", xp=cupy, sparse=True, keep_on_device=True)
    assert got_r.full_bricks > 0
    got = block_mesh(got_r, spec, chunks=got_r.row_chunks(bricks=6))
    assert np.array_equal(got.vertices, want.vertices)
    assert np.array_equal(face_set(got.vertices, got.quads, got.voxel_of_face, cupy.asnumpy(got_r.coordinates())),
                          face_set(want.vertices, want.quads, want.voxel_of_face, dense.coordinates()))
