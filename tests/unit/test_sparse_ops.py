"""Neighbours, aprons and the 7-point stencil on the sparse core (issue 11) equal the
same operations on a dense array padded with the background."""

import numpy as np
import pytest

from voxfx.kernels.grid import sparse_ops
from voxfx.kernels.grid.sparse import BRICK, SparseGrid, brick_keys

ORIGIN = (-9, 4, -17)


def blobs(seed=0, shape=(45, 38, 52), background=0.0):
    rs = np.random.default_rng(seed)
    nx, ny, nz = shape
    a = np.full((nz, ny, nx), background, np.float64)
    for _ in range(8):
        z, y, x = rs.integers(0, 30, 3)
        a[z:z + 9, y:y + 6, x:x + 11] = rs.standard_normal((9, 6, 11))
    return a


def dense_laplacian(a, background):
    p = np.pad(a, 1, constant_values=background)
    # the same association as the sparse stencil: (z pair + y pair) + x pair − 6·centre
    return ((p[:-2, 1:-1, 1:-1] + p[2:, 1:-1, 1:-1]) + (p[1:-1, :-2, 1:-1] + p[1:-1, 2:, 1:-1])) \
        + (p[1:-1, 1:-1, :-2] + p[1:-1, 1:-1, 2:]) - a * 6


def test_neighbour_table_points_at_the_right_bricks():
    a = blobs()
    g = SparseGrid.from_dense("v", a, ORIGIN)
    table = sparse_ops.neighbour_table(g)
    coords = g.topology.coords()
    slot_of = {int(k): int(s) for k, s in zip(g.topology.keys, g.topology.slots)}
    off = sparse_ops.offsets27(np)
    assert np.array_equal(off[sparse_ops.CENTRE], [0, 0, 0])
    for b in range(g.topology.count):
        for m in range(27):
            key = int(brick_keys((coords[b] + off[m])[None])[0])
            assert table[b, m] == slot_of.get(key, -1)


@pytest.mark.parametrize("background", [0.0, 1.5])
def test_laplacian_equals_the_dense_stencil_on_every_active_voxel(background):
    a = blobs(1, background=background)
    g = SparseGrid.from_dense("v", a, ORIGIN, background=background)
    lap = sparse_ops.laplacian(g, "v")
    out = g.add_channel("lap", np.float64, background=np.nan)
    out[g.topology.slots] = lap
    mask = g.add_channel("m", np.uint8)
    mask[g.topology.slots] = 1
    nz, ny, nx = a.shape
    got = g.to_dense("lap", ORIGIN, (nx, ny, nz))
    active = g.to_dense("m", ORIGIN, (nx, ny, nz)).astype(bool)
    assert active.sum() < a.size  # the test has inactive bricks
    want = dense_laplacian(a, background)
    np.testing.assert_array_equal(got[active], want[active])


@pytest.mark.parametrize("width", [1, 3, BRICK])
def test_apron_is_the_dense_neighbourhood(width):
    a = blobs(2)
    g = SparseGrid.from_dense("v", a, ORIGIN)
    apron = sparse_ops.with_apron(g, "v", width)
    nz, ny, nx = a.shape
    w = width
    # The dense box, padded so every active brick's apron lies inside it (background outside).
    pad = BRICK + w
    big = np.pad(a, pad)
    lo = np.asarray(ORIGIN) - pad
    for b, c in enumerate(g.topology.coords()):
        x0, y0, z0 = c * BRICK - w - lo
        want = big[z0:z0 + BRICK + 2 * w, y0:y0 + BRICK + 2 * w, x0:x0 + BRICK + 2 * w]
        np.testing.assert_array_equal(apron[b], want)


def test_active_voxels_and_count_without_a_dense_copy():
    a = blobs(3)
    vel = np.zeros(a.shape + (3,))
    vel[..., 1] = a
    g = SparseGrid.from_dense("v", a, ORIGIN)
    gv = SparseGrid.from_dense("u", vel, ORIGIN)
    k, j, i = np.nonzero(a)
    want = {(int(x + ORIGIN[0]), int(y + ORIGIN[1]), int(z + ORIGIN[2])) for z, y, x in zip(k, j, i)}
    assert {tuple(v) for v in sparse_ops.active_voxels(g, "v").tolist()} == want
    assert sparse_ops.count(g, "v") == len(want) == sparse_ops.count(gv, "u")
    assert {tuple(v) for v in sparse_ops.active_voxels(gv, "u").tolist()} == want


def test_values_at_and_set_voxels_address_the_right_voxel():
    a = blobs(4).astype(np.float32)
    g = SparseGrid.from_dense("v", a, ORIGIN, background=0.0)
    nz, ny, nx = a.shape
    rs = np.random.default_rng(5)
    ijk = rs.integers(-40, 80, (5000, 3))
    ijk[0] = (sparse_ops.BRICK << 21) * 4, 0, 0  # beyond the key range: background, no error
    rel = ijk - np.asarray(ORIGIN)
    inside = ((rel >= 0) & (rel < [nx, ny, nz])).all(axis=1)
    want = np.zeros(len(ijk), np.float32)
    want[inside] = a[rel[inside, 2], rel[inside, 1], rel[inside, 0]]
    np.testing.assert_array_equal(sparse_ops.values_at(g, "v", ijk), want)
    m = g.add_channel("mark", np.uint8)
    missed = sparse_ops.set_voxels(g, "mark", ijk, 3)
    slot = sparse_ops._slots_of_voxels(g.topology, ijk, np)
    assert missed == int((slot < 0).sum()) > 0
    assert sparse_ops.count(g, "mark") == len({tuple(v) for v in ijk[slot >= 0].tolist()})
    assert np.all(sparse_ops.values_at(g, "mark", ijk[slot >= 0]) == 3)
    assert m.dtype == np.uint8


def test_cuda_header_constants_match_python():
    import re

    from voxfx.kernels import backend
    from voxfx.kernels.grid import sparse

    text = (backend.CUDA_DIR / "include" / "voxfx_sparse.cuh").read_text()
    got = {k: int(v) for k, v in re.findall(r"#define SPARSE_(\w+) (\d+)(?:LL)?", text)}
    assert got == {"BRICK_LOG2": sparse.LOG2, "BRICK": sparse.BRICK, "KEY_BITS": sparse.BITS,
                   "OFFSET": sparse.OFFSET}
