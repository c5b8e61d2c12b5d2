"""Point lists straight from bricks and runs (kernels/voxelize/sparse_points.py, issue 11):
the same voxels in the same order as expanding the runs a chunk at a time
(``SparseVoxels.coordinates_of``), with every voxel's owner as the host's per-voxel owner
pass gives it (``OwnerMesh.owners``) and as the dense path's (``owner_triangles``)."""

from pathlib import Path

import numpy as np
import pytest

from tests.meshes import box, merge
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.sparse_attributes import OwnerMesh, row_chunks
from voxfx.kernels.voxelize.sparse_points import chunk_points

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


def expanded(result, owner_mesh, s, e):
    """The operator's points before: the chunk's runs expanded, owners voxel by voxel."""
    ijk = np.asarray(result.coordinates_of(s, e))
    return ijk, owner_mesh.owners(ijk.astype(np.int64))


@pytest.mark.parametrize("name,res", [("uv_sphere", 90), ("monkey", 80), ("torus", 130)])
@pytest.mark.parametrize("mode,vote", [("surface", False), ("solid", False), ("solid+surface", False),
                                       ("solid", True)])
@pytest.mark.parametrize("bricks", [16, 1 << 14])
def test_points_from_runs_equal_the_expanded_points(name, res, mode, vote, bricks):
    v, t, spec = mesh(name, res)
    result = voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True)
    owner_mesh = OwnerMesh(v, t, spec)
    got_ijk, got_owner = [], []
    for s, e in row_chunks(result, bricks):
        ijk, owner = chunk_points(result, owner_mesh, s, e)
        want_ijk, want_owner = expanded(result, owner_mesh, s, e)
        assert ijk.dtype == np.int32 and np.array_equal(ijk, want_ijk)
        assert np.array_equal(owner, want_owner)
        got_ijk.append(ijk)
        got_owner.append(owner)
    ijk, owner = np.concatenate(got_ijk), np.concatenate(got_owner)
    assert len(ijk) == result.count()
    if mode != "surface":
        assert result.full_bricks > 0  # runs were written as voxels
    # the dense path's owners, voxel for voxel (linear order there, brick order here)
    dense = voxelize(v, t, spec, mode, vote=vote, xp=np)
    want = owner_triangles(v, t, spec, dense.bits, xp=np)
    nx, ny, _ = spec.shape
    order = np.argsort((ijk[:, 2].astype(np.int64) * ny + ijk[:, 1]) * nx + ijk[:, 0])
    assert np.array_equal(ijk[order], dense.coordinates())
    assert np.array_equal(owner[order], want)


def test_points_of_two_objects_take_their_own_owners():
    """Two boxes side by side (two selected objects): a run row between their walls takes
    the owner of the wall it enters through, as the dense fill does."""
    a, b = box((0.05, 0.05, 0.05), (0.48, 0.9, 0.9)), box((0.52, 0.05, 0.05), (0.95, 0.9, 0.9))
    v, t = merge(a, b)
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / 120, (120, 120, 120))
    result = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    owner_mesh = OwnerMesh(v, t, spec)
    parts = [chunk_points(result, owner_mesh, s, e) for s, e in row_chunks(result, 64)]
    ijk = np.concatenate([p[0] for p in parts])
    owner = np.concatenate([p[1] for p in parts])
    first = len(a[1])
    left = ijk[:, 0] < 60
    assert (owner[left] < first).all() and (owner[~left] >= first).all()
    assert result.full_bricks > 0
