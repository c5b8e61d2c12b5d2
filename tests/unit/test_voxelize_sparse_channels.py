"""Owner / material / colour channels of a sparse voxelization (issue 11) equal the dense
attribute path (``attributes.owner_triangles``, ``outputs.voxel_attributes``) at every
set voxel."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.attributes import owner_triangles
from voxfx.kernels.voxelize.outputs import voxel_attributes
from voxfx.kernels.voxelize.sparse_attributes import add_channels, channel_values, row_chunks

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
    assert got.count() == len(ijk) and np.array_equal(got.to_dense().bits, dense.bits)
    assert np.array_equal(channel_values(got, "owner", ijk), owner)
    assert np.array_equal(channel_values(got, "material", ijk), material)
    if colored:
        assert np.array_equal(channel_values(got, "color", ijk), color)
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
    assert np.array_equal(a.grid.tiles["owner"].value, b.grid.tiles["owner"].value)


@pytest.mark.parametrize("name,res", [("uv_sphere", 96), ("monkey", 90)])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_runs_stay_runs_with_a_value_per_voxel_row(name, res, mode):
    """Only the run bricks a triangle touches are stored; every other run voxel reads its
    row's value, which is the dense owner of every voxel of that row of the run; the
    channels' pools hold the stored bricks only (expanded: 2 KiB a brick a channel)."""
    from voxfx.kernels.grid.sparse import Tiles, brick_coords
    from voxfx.kernels.voxelize.sparse import CHANNEL

    v, t, spec = mesh(name, res)
    dense = voxelize(v, t, spec, mode, xp=np)
    owner = owner_triangles(v, t, spec, dense.bits, xp=np)
    ijk = dense.coordinates()
    got = voxelize(v, t, spec, mode, xp=np, sparse=True)
    before = got.full_bricks
    add_channels(got, v, t, np.arange(len(t), dtype=np.int32) % 5)
    g = got.grid
    assert 0.7 * before < got.full_bricks <= before  # a few run bricks stored, the rest kept as runs
    assert all(np.array_equal(g.tiles[n].runs, g.tiles[CHANNEL].runs) for n in ("owner", "material"))
    assert g.tiles["owner"].value.shape == (len(g.tiles[CHANNEL].runs), 8, 8)
    # every voxel of the runs, from the dense owners: one owner per row of a run
    keys = Tiles(g.tiles[CHANNEL].runs, 1).keys(np)
    base = brick_coords(keys, np) * 8
    lz, ly, lx = (a.ravel() for a in np.meshgrid(np.arange(8), np.arange(8), np.arange(8), indexing="ij"))
    inside = (base[:, None, :] + np.stack([lx, ly, lz], axis=1)[None]).reshape(-1, 3)
    linear = lambda a: (a[:, 2] * spec.shape[1] + a[:, 1]) * spec.shape[0] + a[:, 0]  # noqa: E731
    at = np.searchsorted(linear(ijk), linear(inside))
    assert np.array_equal(linear(ijk)[at], linear(inside))  # run voxels are set voxels
    assert np.array_equal(channel_values(got, "owner", inside), owner[at])
    assert len(g.channels["owner"]) == len(g.channels["material"]) == g.topology.count  # pools: stored bricks only
    assert got.nbytes < 4 * 512 * 2 * got.active_bricks  # what the two channels would take expanded


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
