"""The MAC-grid core (kernels/grid/mac.py) against cell-by-cell loops over the layout it
documents: faces, solid faces, divergence, the 7-point stencil and the projection."""

import itertools

import numpy as np
import pytest

from voxfx.kernels.grid import mac

SHAPES = [(1, 1, 1), (2, 3, 1), (5, 4, 3)]  # (nx, ny, nz)


def cells(nx, ny, nz):
    return itertools.product(range(nx), range(ny), range(nz))


def faces(comp, nx, ny, nz):
    return itertools.product(range(nx + (comp == 0)), range(ny + (comp == 1)), range(nz + (comp == 2)))


def neighbours(i, j, k, nx, ny, nz):
    for d in ((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)):
        a, b, c = i + d[0], j + d[1], k + d[2]
        if 0 <= a < nx and 0 <= b < ny and 0 <= c < nz:
            yield a, b, c


def face_sides(comp, i, j, k):
    lo = (i - (comp == 0), j - (comp == 1), k - (comp == 2))
    return lo, (i, j, k)


def inside(c, nx, ny, nz):
    return 0 <= c[0] < nx and 0 <= c[1] < ny and 0 <= c[2] < nz


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("outside", [False, True])
def test_faces_touching_marks_faces_with_a_marked_cell_on_either_side(shape, outside):
    nx, ny, nz = shape
    mask = np.random.default_rng(1).random((nz, ny, nx)) < 0.4
    got = mac.faces_touching(mask, outside=outside)
    for comp, m in enumerate(got):
        assert m.shape == mac.face_shapes(nx, ny, nz)[comp] and m.dtype == bool
        for i, j, k in faces(comp, nx, ny, nz):
            want = any(mask[c[2], c[1], c[0]] if inside(c, nx, ny, nz) else outside
                       for c in face_sides(comp, i, j, k))
            assert m[k, j, i] == want
    as_bytes = mac.faces_touching(mask, outside=outside, dtype=np.uint8)
    assert all(b.dtype == np.uint8 and (b == m).all() for b, m in zip(as_bytes, got))


@pytest.mark.parametrize("shape", SHAPES)
def test_face_sum_is_the_outgoing_flux_of_each_cell(shape):
    nx, ny, nz = shape
    rng = np.random.default_rng(2)
    u, v, w = (rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz))
    D = mac.face_sum(u, v, w)
    for i, j, k in cells(nx, ny, nz):
        want = (np.float32(u[k, j, i + 1] - u[k, j, i]) + np.float32(v[k, j + 1, i] - v[k, j, i])) \
            + np.float32(w[k + 1, j, i] - w[k, j, i])
        assert D[k, j, i] == want  # the same order of additions: exact
    assert mac.face_count(nx, ny, nz) == u.size + v.size + w.size


@pytest.mark.parametrize("shape", SHAPES)
def test_neighbour_sum_count_and_any_match_loops(shape):
    nx, ny, nz = shape
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, (nz, ny, nx)).astype(np.float32)  # small integers: every sum exact
    mask = rng.random((nz, ny, nx)) < 0.5
    s, n, a = mac.neighbour_sum(x), mac.neighbour_count(mask), mac.any_neighbour(mask)
    assert n.dtype == np.uint8
    for i, j, k in cells(nx, ny, nz):
        nb = list(neighbours(i, j, k, nx, ny, nz))
        assert s[k, j, i] == sum(x[c, b, a_] for a_, b, c in nb)
        assert n[k, j, i] == sum(bool(mask[c, b, a_]) for a_, b, c in nb)
        assert a[k, j, i] == any(mask[c, b, a_] for a_, b, c in nb)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("masked", [False, True])
def test_subtract_gradient_changes_inner_faces_by_the_pressure_difference(shape, masked):
    nx, ny, nz = shape
    rng = np.random.default_rng(4)
    before = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    p = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    c = np.float32(0.37)
    touch = mac.faces_touching(rng.random((nz, ny, nx)) < 0.5) if masked else None
    after = [f.copy() for f in before]
    mac.subtract_gradient(*after, p, c, touch=touch)
    for comp in range(3):
        for i, j, k in faces(comp, nx, ny, nz):
            lo, hi = face_sides(comp, i, j, k)
            old = before[comp][k, j, i]
            if inside(lo, nx, ny, nz) and inside(hi, nx, ny, nz) and (touch is None or touch[comp][k, j, i]):
                want = old - c * (p[hi[2], hi[1], hi[0]] - p[lo[2], lo[1], lo[0]])
            else:
                want = old
            assert after[comp][k, j, i] == want


def typed_cells(rng, nx, ny, nz):
    """Random cell types 0 (air), 1 (fluid), 2 (solid)."""
    return rng.integers(0, 3, (nz, ny, nx)).astype(np.uint8)


def is_fixed(cell, comp, i, j, k, solid, walls_fixed, nx, ny, nz):
    """A solid cell on either side of the face, or (walls_fixed) the face on the wall."""
    sides = face_sides(comp, i, j, k)
    if walls_fixed and not all(inside(c, nx, ny, nz) for c in sides):
        return True
    return any(inside(c, nx, ny, nz) and cell[c[2], c[1], c[0]] == solid for c in sides)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("walls_fixed", [False, True])
@pytest.mark.parametrize("with_values", [False, True])
def test_fixed_faces_and_their_face_sum_match_loops(shape, walls_fixed, with_values):
    nx, ny, nz = shape
    rng = np.random.default_rng(5)
    cell = typed_cells(rng, nx, ny, nz)
    vel = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    values = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)] if with_values else None
    got = mac.fixed_faces(*vel, cell, 2, walls_fixed, values)
    for comp in range(3):
        for i, j, k in faces(comp, nx, ny, nz):
            fixed = is_fixed(cell, comp, i, j, k, 2, walls_fixed, nx, ny, nz)
            want = (values[comp][k, j, i] if with_values else 0.0) if fixed else vel[comp][k, j, i]
            assert got[comp][k, j, i] == want
    D = mac.face_sum(*got)
    for i, j, k in cells(nx, ny, nz):
        want = (np.float32(got[0][k, j, i + 1] - got[0][k, j, i]) + np.float32(got[1][k, j + 1, i] - got[1][k, j, i])) \
            + np.float32(got[2][k + 1, j, i] - got[2][k, j, i])
        assert D[k, j, i] == want


@pytest.mark.parametrize("shape", SHAPES + [(6, 5, 4)])
@pytest.mark.parametrize("walls_fixed,with_values", [(True, True), (False, False), (True, False)])
def test_project_matches_a_face_by_face_loop(shape, walls_fixed, with_values):
    """mac.project (FLIP: fluid 1, solid 2, walls fixed to the solid velocity; the wind:
    walls free, fixed faces 0) against the rule project_face of voxfx_mac.cuh states."""
    nx, ny, nz = shape
    rng = np.random.default_rng(6)
    cell = typed_cells(rng, nx, ny, nz)
    p = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    c = np.float32(0.29)
    before = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)]
    values = [rng.standard_normal(s).astype(np.float32) for s in mac.face_shapes(nx, ny, nz)] if with_values else None
    after = [f.copy() for f in before]
    mac.project(*after, p, c, cell, 1, 2, walls_fixed, values)
    changed = 0
    for comp in range(3):
        for i, j, k in faces(comp, nx, ny, nz):
            lo, hi = face_sides(comp, i, j, k)
            old = before[comp][k, j, i]
            if is_fixed(cell, comp, i, j, k, 2, walls_fixed, nx, ny, nz):
                want = values[comp][k, j, i] if with_values else np.float32(0.0)
            elif inside(lo, nx, ny, nz) and inside(hi, nx, ny, nz) and 1 in (cell[lo[2], lo[1], lo[0]],
                                                                            cell[hi[2], hi[1], hi[0]]):
                plo = p[lo[2], lo[1], lo[0]] if cell[lo[2], lo[1], lo[0]] == 1 else np.float32(0.0)
                phi = p[hi[2], hi[1], hi[0]] if cell[hi[2], hi[1], hi[0]] == 1 else np.float32(0.0)
                want = old - c * (phi - plo)
                changed += 1
            else:
                want = old
            assert after[comp][k, j, i] == want
    if nx * ny * nz > 8:
        assert changed > 0  # the gradient rule was exercised


def test_face_positions_are_the_face_centres_in_cell_units():
    nx, ny, nz = 3, 2, 4
    for comp in range(3):
        x, y, z = np.broadcast_arrays(*mac.face_positions(comp, nx, ny, nz, np))
        assert x.shape == mac.face_shapes(nx, ny, nz)[comp] and x.dtype == np.float32
        for i, j, k in faces(comp, nx, ny, nz):
            want = (i + 0.5 * (comp != 0), j + 0.5 * (comp != 1), k + 0.5 * (comp != 2))
            assert (x[k, j, i], y[k, j, i], z[k, j, i]) == want


def test_mac_grid_holds_faces_of_the_layout_and_maps_points_to_cell_units():
    from voxfx.kernels.grid import GridSpec
    from voxfx.kernels.grid.dense import MacGrid

    g = MacGrid(GridSpec((1.0, -2.0, 0.5), 0.25, (4, 3, 2)), fill=(1.5, -2.0, 0.0))
    assert [f.shape for f in g.faces()] == list(mac.face_shapes(4, 3, 2))
    assert [set(np.unique(f)) for f in g.faces()] == [{1.5}, {-2.0}, {0.0}]
    assert all(f.dtype == np.float32 for f in g.faces() + g.face_arrays(dtype=np.float32))
    assert g.cell_array(np.uint8).shape == (2, 3, 4) and g.index(3, 2, 1) == 4 * 3 * 2 - 1
    pts = np.float32([[1.0, -2.0, 0.5], [2.0, -1.25, 1.0], [0.875, -2.0, 0.5]])
    x, y, z = g.cell_coords(pts)
    assert (x == [0, 4, -0.5]).all() and (y == [0, 3, 0]).all() and (z == [0, 2, 0]).all()


def test_red_cells_alternate_like_a_checkerboard():
    red = mac.red_cells((3, 4, 5), np)
    for i, j, k in cells(5, 4, 3):
        assert red[k, j, i] == ((i + j + k) % 2 == 0)
