"""Owner / material / colour channels of a sparse voxelization (issue 11) equal the dense
attribute path (``attributes.owner_triangles``, ``outputs.voxel_attributes``) at every
set voxel."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import brick_keys
from voxfx.kernels.grid.sparse_ops import values_at
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.outputs import voxel_attributes
from voxfx.kernels.voxelize.sparse_attributes import add_channels, row_chunks

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


def soup_of(v, t, seed, colored):
    rng = np.random.default_rng(seed)
    T = len(t)
    half = T // 2
    return SimpleNamespace(vertices=v, triangles=t, material_index=rng.integers(-1, 3, T).astype(np.int32),
                           corner_colors=rng.random((T, 3, 4)).astype(np.float32) if colored else None,
                           colored_objects=[True, False] if colored else None,
                           object_index=np.r_[np.zeros(half, np.int32), np.ones(T - half, np.int32)],
                           materials=["a", "b", "c"])


@pytest.mark.parametrize("name,res", [("monkey", 47), ("torus", 61), ("ico_sphere", 38)])
@pytest.mark.parametrize("mode,vote", [("surface", False), ("thin", False), ("solid", False), ("solid+surface", True)])
@pytest.mark.parametrize("colored", [False, True])
def test_channels_equal_the_dense_attributes(name, res, mode, vote, colored):
    v, t, spec = mesh(name, res)
    soup = soup_of(v, t, res, colored)
    table = np.random.default_rng(1).random((4, 4)).astype(np.float32)
    dense = voxelize(v, t, spec, mode, vote=vote, xp=np)
    ijk = dense.coordinates()
    material, color = voxel_attributes(soup, v, t, spec, dense.bits, np, len(ijk), table)
    owner = owner_triangles(v, t, spec, dense.bits, xp=np)

    got = voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True)
    add_channels(got, v, t, soup.material_index, table=table, corner_colors=soup.corner_colors,
                 colored=soup.colored_objects, object_index=soup.object_index)
    assert np.array_equal(values_at(got.grid, "owner", ijk), owner)
    assert np.array_equal(values_at(got.grid, "material", ijk), material)
    if colored:
        g = got.grid
        slot = g.topology.lookup(brick_keys(ijk.astype(np.int64) >> 3))
        assert (slot >= 0).all()
        l = ijk & 7  # noqa: E741
        assert np.array_equal(g.channels["color"][slot, l[:, 2], l[:, 1], l[:, 0]], color)
    else:
        assert "color" not in got.grid.channels


def test_chunks_of_bricks_hold_whole_rows_and_give_the_same_owners():
    """Many small chunks (each cut between rows of bricks) give the owners of one."""
    v, t, spec = mesh("monkey", 90)
    a = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    b = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    add_channels(a, v, t)
    chunks = row_chunks(b, bricks=7)
    assert len(chunks) > 10
    rows = np.concatenate([np.asarray(b.bricks_of(s, e)[0]) >> 21 for s, e in b.brick_chunks()])  # runs too
    for s, _ in chunks[1:]:
        assert rows[s] != rows[s - 1]  # never inside a row of bricks
    add_channels(b, v, t, bricks=7)
    assert np.array_equal(a.grid.channels["owner"], b.grid.channels["owner"])


def face_set(vertices, quads, voxel_of_face, ijk):
    """Faces as sorted rows of (4 corner positions, the voxel's ijk): order-free."""
    corners = vertices[quads].reshape(len(quads), -1)
    rows = np.concatenate([corners, ijk[voxel_of_face].astype(np.float32)], axis=1)
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("name,res", [("monkey", 45), ("torus", 52), ("ico_sphere", 33)])
@pytest.mark.parametrize("mode", ["surface", "solid+surface"])
def test_block_mesh_from_bricks_equals_the_dense_one(name, res, mode):
    """Same welded vertices in the same order, same quads (as corner positions), each
    face on the same voxel; small chunks so faces cross chunk and brick borders."""
    from voxfx.kernels.voxelize.blocks import exterior_faces
    from voxfx.kernels.voxelize.sparse_outputs import block_mesh

    v, t, spec = mesh(name, res)
    dense = voxelize(v, t, spec, mode, xp=np)
    want = exterior_faces(dense.bits, spec)
    got_r = voxelize(v, t, spec, mode, xp=np, sparse=True)
    got = block_mesh(got_r, spec, chunks=row_chunks(got_r, bricks=5))
    assert np.array_equal(got.vertices, want.vertices)
    assert got.face_count == want.face_count > 0
    assert np.array_equal(face_set(got.vertices, got.quads, got.voxel_of_face, got_r.coordinates()),
                          face_set(want.vertices, want.quads, want.voxel_of_face, dense.coordinates()))
    assert np.array_equal(np.bincount(got.direction_of_face, minlength=6),
                          np.bincount(want.direction_of_face, minlength=6))


def test_sparse_group_reports_progress_and_stops_when_cancelled():
    """The operator's sparse job reports through the progress protocol (kernels/progress.py)
    from the tiles, the attributes and the block faces, and a False answer stops it."""
    from voxfx.kernels.errors import Cancelled
    from voxfx.kernels.voxelize.request import Request
    from voxfx.kernels.voxelize.sparse_outputs import compute_group_sparse

    v, t, spec = mesh("torus", 60)
    soup = soup_of(v, t, 3, False)
    request = Request(mode="solid+surface", resolution=60, outputs={"points", "blocks"})
    seen = []
    out = compute_group_sparse("torus", soup, spec, request, False, progress=lambda f, m: seen.append((f, m)) or True)
    assert out.count == voxelize(v, t, spec, "solid+surface", xp=np).count() > 0
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert {"voxel attributes", "block faces"} <= {m for _, m in seen}
    for stop_at in ("voxelizing tiles", "voxel attributes", "block faces"):
        with pytest.raises(Cancelled):
            compute_group_sparse("torus", soup, spec, request, False, progress=lambda f, m, s=stop_at: m != s)
