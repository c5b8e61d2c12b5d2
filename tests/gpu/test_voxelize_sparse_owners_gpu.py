"""Owners of a sparse voxelization on the device (gpu_sparse_owners.py, issue 11) equal the
CPU reference (``sparse_attributes.OwnerMesh``, the dense ``owner_triangles``) on fresh
inputs: the point lists of a device result (``sparse_points.chunk_points``), the owner /
material / colour channels (``add_channels``) and a multi-object group's outputs."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.meshes import box, merge
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.gpu_sparse_owners import DeviceOwnerMesh
from voxfx.kernels.voxelize.sparse_attributes import OwnerMesh, add_channels, row_chunks
from voxfx.kernels.voxelize.sparse_points import chunk_points

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


@pytest.mark.parametrize("name,res", [("uv_sphere", 150), ("monkey", 130), ("torus", 170)])
@pytest.mark.parametrize("mode,vote", [("surface", False), ("solid", False), ("solid+surface", False),
                                       ("solid+surface", True)])
def test_device_owners_of_points_equal_the_cpu(name, res, mode, vote):
    import cupy

    v, t, spec = mesh(name, res)
    rng = np.random.default_rng(res)
    v = v + rng.normal(0, 1e-4, v.shape)  # fresh input
    gpu = voxelize(v, t, spec, mode, vote=vote, xp=cupy, sparse=True, keep_on_device=True)
    cpu = voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True)
    device, host = DeviceOwnerMesh(v, t, spec), OwnerMesh(v, t, spec)
    got, want = [], []
    for s, e in row_chunks(gpu, 4096):
        got.append(chunk_points(gpu, device, s, e))
    for s, e in row_chunks(cpu, 4096):
        want.append(chunk_points(cpu, host, s, e))
    ijk, owner = (np.concatenate([g[i] for g in got]) for i in (0, 1))
    want_ijk, want_owner = (np.concatenate([w[i] for w in want]) for i in (0, 1))
    assert np.array_equal(ijk, want_ijk) and np.array_equal(owner, want_owner)
    dense = voxelize(v, t, spec, mode, vote=vote, xp=np)
    nx, ny, _ = spec.shape
    order = np.argsort((ijk[:, 2].astype(np.int64) * ny + ijk[:, 1]) * nx + ijk[:, 0])
    assert np.array_equal(owner[order], owner_triangles(v, t, spec, dense.bits, xp=np))


def test_device_owners_give_the_cpu_channels():
    import cupy

    v, t, spec = mesh("monkey", 110)
    material = np.random.default_rng(3).integers(-1, 3, len(t)).astype(np.int32)
    gpu = voxelize(v, t, spec, "solid+surface", xp=cupy, sparse=True, keep_on_device=True)
    cpu = voxelize(v, t, spec, "solid+surface", xp=np, sparse=True)
    add_channels(gpu, v, t, material, bricks=512)
    add_channels(cpu, v, t, material, bricks=512)
    for name in ("owner", "material"):
        assert np.array_equal(cupy.asnumpy(gpu.grid.channels[name]), cpu.grid.channels[name])
        assert np.array_equal(cupy.asnumpy(gpu.grid.tiles[name].value), cpu.grid.tiles[name].value)


def test_device_group_of_two_objects_has_the_cpu_materials(monkeypatch):
    """A multi-object group (two boxes, two materials) through the operator's sparse
    outputs on the device: points, materials and colours equal the CPU's."""
    import cupy  # noqa: F401  (the device must answer)

    from voxfx.kernels import backend
    from voxfx.kernels.voxelize.sparse_outputs import compute_group_sparse

    a, b = box((0.05, 0.05, 0.05), (0.48, 0.9, 0.9)), box((0.52, 0.05, 0.05), (0.95, 0.9, 0.9))
    v, t = merge(a, b)
    T = len(t)
    soup = SimpleNamespace(vertices=v, triangles=t, material_index=np.r_[np.zeros(len(a[1])), np.ones(len(b[1]))]
                           .astype(np.int32), corner_colors=None, colored_objects=None,
                           object_index=np.r_[np.zeros(len(a[1])), np.ones(T - len(a[1]))].astype(np.int32),
                           materials=["a", "b"])
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 200, (200, 200, 200))
    request = SimpleNamespace(mode="solid", outputs={"points"})
    table = np.array([[1, 0, 0, 1], [0, 0, 1, 1], [0.5, 0.5, 0.5, 1]], np.float32)
    monkeypatch.setenv("VOXFX_BACKEND", "gpu")
    backend.reset()
    got = compute_group_sparse("AB", soup, spec, request, False, table=table)
    assert got.result.xp is not np  # voxelized and owned on the device
    monkeypatch.setenv("VOXFX_BACKEND", "cpu")
    backend.reset()
    try:
        want = compute_group_sparse("AB", soup, spec, request, False, table=table)
    finally:
        monkeypatch.delenv("VOXFX_BACKEND")
        backend.reset()
    assert np.array_equal(got.ijk, want.ijk)
    assert np.array_equal(got.material, want.material) and set(np.unique(got.material)) == {0, 1}
    assert np.array_equal(got.rgba, want.rgba)
