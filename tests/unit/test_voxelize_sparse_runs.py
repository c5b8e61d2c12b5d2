"""``voxelize(..., sparse=True)`` keeps a solid's interior as runs of full bricks (issue 11):
every answer and output of the result honours the runs, bit for bit with the dense path,
while memory follows the surface; runs that reach past the grid's end are cut there."""

import numpy as np
import pytest

from tests.meshes import uv_sphere
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import brick_coords
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.blocks import exterior_faces
from voxfx.kernels.voxelize.sparse import CHANNEL
from voxfx.kernels.voxelize.sparse_outputs import block_mesh


def open_box(n=1.0):
    """A cube without its +x face: every row through it stays inside to the grid's end."""
    v = np.array([[x, y, z] for z in (0, n) for y in (0, n) for x in (0, n)], np.float64)
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2)]  # −z +z −y +y −x
    t = np.array([tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))], np.int64)
    return v, t


def sphere_case():
    v, t = uv_sphere(1.0, 64, 32)
    return v, t, GridSpec.around(v.min(0), v.max(0), 2.0 / 75)


def box_case():
    v, t = open_box()
    # the box ends inside a brick on every axis; the grid runs on past it in x only
    return v, t, GridSpec((-0.05, -0.05, -0.05), 1.0 / 50, (71, 53, 53))


def face_set(vertices, quads, voxel_of_face, ijk):
    corners = vertices[quads].reshape(len(quads), -1)
    rows = np.concatenate([corners, ijk[voxel_of_face].astype(np.float32)], axis=1)
    return rows[np.lexsort(rows.T[::-1])]


def linear(ijk, shape):
    return np.sort((ijk[:, 2].astype(np.int64) * shape[1] + ijk[:, 1]) * shape[0] + ijk[:, 0])


@pytest.mark.parametrize("case", [sphere_case, box_case])
@pytest.mark.parametrize("mode", ["solid", "solid+surface"])
def test_runs_are_kept_and_every_answer_equals_the_dense_one(case, mode):
    v, t, spec = case()
    dense = voxelize(v, t, spec, mode, xp=np)
    got = voxelize(v, t, spec, mode, xp=np, sparse=True)
    assert got.full_bricks > 0 and len(got.runs) > 0  # the interior is held as runs
    assert np.array_equal(got.to_dense().bits, dense.bits)
    assert got.count() == dense.count() > 0
    full = got.grid.expanded(CHANNEL)
    assert got.active_bricks == full.topology.count == got.stored_bricks + got.full_bricks
    assert got.nbytes < full.nbytes  # runs cost 32 B, not 64 B of rows + keys a brick
    assert got.nbytes == (got.grid.channels[CHANNEL].nbytes + got.grid.topology.keys.nbytes
                          + got.grid.topology.slots.nbytes + got.grid.topology.free.nbytes + got.runs.nbytes)
    ijk = got.coordinates()
    assert len(ijk) == dense.count() and (ijk >= 0).all() and (ijk < np.asarray(spec.shape)).all()
    assert np.array_equal(linear(ijk, spec.shape), linear(dense.coordinates(), spec.shape))
    # small chunks: runs are split across chunks, each expanded alone, same voxels in brick order
    small = np.concatenate([got.coordinates_of(s, e) for s, e in got.brick_chunks(5)])
    assert np.array_equal(small, ijk)
    keys = np.concatenate([got.bricks_of(s, e)[0] for s, e in got.brick_chunks(5)])
    assert np.array_equal(keys, full.topology.keys)  # the merged brick order is key order


@pytest.mark.parametrize("case", [sphere_case, box_case])
def test_runs_reaching_the_grid_end_are_cut_there(case):
    v, t, spec = case()
    got = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    runs = got.runs
    shape = np.asarray(spec.shape)
    # every run brick lies wholly inside the grid; the crossing bricks are stored and cut
    assert (runs[:, 1] * 8 <= shape[0]).all() and ((runs[:, 2:4] + 1) * 8 <= shape[1:]).all()
    ends = brick_coords(got.grid.topology.keys) * 8 + 8 > shape
    if case is box_case:  # the open box's rows run to the grid's end: crossing bricks there
        assert ends[:, 0].any()
        dense = voxelize(v, t, spec, "solid", xp=np)
        last = dense.dense()[:, :, -1]
        assert last.any()  # the dense path's rows reach the end too


@pytest.mark.parametrize("case", [sphere_case, box_case])
def test_block_mesh_with_runs_equals_the_dense_one(case):
    v, t, spec = case()
    dense = voxelize(v, t, spec, "solid+surface", xp=np)
    want = exterior_faces(dense.bits, spec)
    got_r = voxelize(v, t, spec, "solid+surface", xp=np, sparse=True)
    assert got_r.full_bricks > 0
    chunks = got_r.row_chunks(bricks=6)
    assert len(chunks) > 5
    got = block_mesh(got_r, spec, chunks=chunks)
    assert np.array_equal(got.vertices, want.vertices)
    assert np.array_equal(face_set(got.vertices, got.quads, got.voxel_of_face, got_r.coordinates()),
                          face_set(want.vertices, want.quads, want.voxel_of_face, dense.coordinates()))


def test_row_chunks_cut_between_rows_of_the_merged_order():
    v, t, spec = sphere_case()
    got = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    chunks = got.row_chunks(bricks=9)
    assert chunks[0][0] == 0 and chunks[-1][1] == got.active_bricks
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    rows = np.concatenate([got.bricks_of(s, e)[0] >> 21 for s, e in got.brick_chunks()])
    for s, _ in chunks[1:]:
        assert rows[s] != rows[s - 1]


def test_rows_at_reads_stored_bricks_runs_and_empty_space():
    v, t, spec = sphere_case()
    got = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    full = got.grid.expanded(CHANNEL)
    keys = full.topology.keys
    assert np.array_equal(got.rows_at(keys), full.channels[CHANNEL][full.topology.slots])
    outside = keys + (1 << 42) * 1000  # bricks far along z: nothing there
    assert not got.rows_at(outside).any()


def test_a_grid_without_full_bricks_tiles_to_no_runs():
    """A surface has no full brick: ``tiled`` keeps every brick and records no runs."""
    from voxfx.kernels.voxelize.sparse import voxelize_sparse

    v, t, spec = sphere_case()
    grid = voxelize_sparse(v, t, spec, "surface", xp=np)
    tiled = grid.tiled(CHANNEL)
    assert CHANNEL not in tiled.tiles and tiled.topology.count == grid.topology.count > 0
    assert np.array_equal(tiled.channels[CHANNEL], grid.channels[CHANNEL][grid.topology.slots])
