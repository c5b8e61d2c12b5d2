"""Segment voxelizer (seed 001 §3.1, the conservative 3D DDA) on the CPU against two
independent oracles: the conservative triangle voxelizer on degenerate triangles
(a, b, b), and a brute-force clip of the segment's parameter against every voxel's slabs
(written here, sharing nothing with kernels/voxelize/lines.py)."""

import numpy as np
import pytest

from voxfx.kernels.errors import Cancelled, InputError
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import lines, voxelize
from voxfx.kernels.voxelize.lines import dda_setup, voxelize_segments
from voxfx.kernels.voxelize.triangles import to_voxel_units


def unit_spec(shape):
    """Voxel units = world units: origin 0, voxel size 1."""
    return GridSpec((0.0, 0.0, 0.0), 1.0, shape)


def segments_dense(a, b, spec):
    bits = voxelize_segments(np.asarray(a, dtype=float), np.asarray(b, dtype=float), spec, xp=np)
    return bitgrid.unpack(bits, spec.shape[0])


def voxel_set(dense):
    k, j, i = np.nonzero(dense)
    return set(zip(i.tolist(), j.tolist(), k.tolist()))


def triangle_oracle(a, b, spec):
    """The conservative triangle voxelizer on the degenerate triangles (a, b, b)."""
    v = np.stack([a, b, b], axis=1).reshape(-1, 3)
    return voxelize(v, np.arange(len(v)).reshape(-1, 3), spec, "surface", xp=np).dense()


def slab_oracle(a, b, spec):
    """Dense bool [k, j, i] by brute force: for every voxel, clip t ∈ [0, 1] of
    a + t (b − a) against the voxel's three closed slabs; touching counts (t_in ≤ t_out)."""
    p0 = to_voxel_units(a, spec.origin, spec.voxel_size)
    p1 = to_voxel_units(b, spec.origin, spec.voxel_size)
    nx, ny, nz = spec.shape
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    box = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1).astype(np.float64)
    hit = np.zeros(len(box), dtype=bool)
    for s, e in zip(p0, p1):
        d = e - s
        t_in = np.zeros(len(box))
        t_out = np.ones(len(box))
        inside = np.ones(len(box), dtype=bool)
        for axis in range(3):
            if d[axis] == 0.0:  # parallel to the slab: inside it or not at all
                inside &= (box[:, axis] <= s[axis]) & (s[axis] <= box[:, axis] + 1.0)
                continue
            t1 = (box[:, axis] - s[axis]) / d[axis]
            t2 = (box[:, axis] + 1.0 - s[axis]) / d[axis]
            t_in = np.maximum(t_in, np.minimum(t1, t2))
            t_out = np.minimum(t_out, np.maximum(t1, t2))
        hit |= inside & (t_in <= t_out)
    return hit.reshape(nz, ny, nx)


def assert_matches_oracles(a, b, spec):
    fast = segments_dense(a, b, spec)
    assert np.array_equal(fast, slab_oracle(a, b, spec)), "differs from the slab oracle"
    assert np.array_equal(fast, triangle_oracle(a, b, spec)), "differs from the triangle voxelizer"
    return fast


# ------------------------------------------------------------------- against the oracles


@pytest.mark.parametrize("seed", range(4))
def test_random_segments_match_both_oracles(seed):
    rng = np.random.default_rng(seed)
    spec = unit_spec((19, 15, 13))
    a = rng.uniform(-4.0, 23.0, (30, 3))
    long_b = rng.uniform(-4.0, 23.0, (15, 3))  # across the grid, many partly outside
    short_b = a[15:] + rng.normal(0.0, 1.5, (15, 3))  # a few voxels long
    fast = assert_matches_oracles(a, np.concatenate([long_b, short_b]), spec)
    assert fast.sum() > 100


@pytest.mark.parametrize("quantum", [1.0, 0.5, 0.25])
def test_lattice_segments_with_exact_ties_match_both_oracles(quantum):
    """End points on a lattice: segments run along voxel faces and edges and pass
    through voxel edges and corners, every one an exact tie."""
    rng = np.random.default_rng(int(8 / quantum))
    spec = unit_spec((11, 12, 10))
    a = np.round(rng.uniform(-2.0, 13.0, (60, 3)) / quantum) * quantum
    b = np.round(rng.uniform(-2.0, 13.0, (60, 3)) / quantum) * quantum
    b[:15, 1:] = a[:15, 1:]  # parallel to x (on voxel edges where y, z are whole)
    b[15:25, 0] = a[15:25, 0]  # parallel to the yz plane
    b[25:30] = a[25:30]  # points
    fast = assert_matches_oracles(a, b, spec)
    assert fast.sum() > 100


def test_segments_with_small_integer_slopes_through_corners_match_both_oracles():
    """Directions like (1, 1, 1), (2, 1, 0), (3, -3, 1) from lattice points hit voxel
    edges and corners many times along their length."""
    rng = np.random.default_rng(11)
    spec = unit_spec((14, 14, 14))
    a = rng.integers(-1, 15, (40, 3)) + rng.choice([0.0, 0.5, 0.25], (40, 3))
    direction = rng.integers(-3, 4, (40, 3)).astype(float)
    b = a + direction * rng.integers(1, 5, (40, 1))
    fast = assert_matches_oracles(a, b, spec)
    assert fast.sum() > 100


# ------------------------------------------------------------------- tie rules, by hand


def test_diagonal_through_three_corners_sets_all_eight_voxels_around_each():
    spec = unit_spec((6, 6, 6))
    fast = assert_matches_oracles(np.array([[0.5, 0.5, 0.5]]), np.array([[3.5, 3.5, 3.5]]), spec)
    expected = {(c - 1 + di, c - 1 + dj, c - 1 + dk) for c in (1, 2, 3)
                for di in (0, 1) for dj in (0, 1) for dk in (0, 1)}
    assert voxel_set(fast) == expected and len(expected) == 22


def test_segment_along_a_voxel_edge_sets_the_four_columns_around_it():
    spec = unit_spec((7, 6, 6))
    fast = assert_matches_oracles(np.array([[0.5, 2.0, 3.0]]), np.array([[4.5, 2.0, 3.0]]), spec)
    assert voxel_set(fast) == {(i, j, k) for i in range(5) for j in (1, 2) for k in (2, 3)}


def test_segment_in_a_face_plane_sets_both_layers():
    """In the plane y = 2, from (0.5, 1.5) to (3.5, 2.5) in (x, z), through the corner
    x = z = 2: six (x, z) cells, each on both sides of the plane."""
    spec = unit_spec((6, 5, 5))
    fast = assert_matches_oracles(np.array([[0.5, 2.0, 1.5]]), np.array([[3.5, 2.0, 2.5]]), spec)
    xz = {(0, 1), (1, 1), (2, 1), (1, 2), (2, 2), (3, 2)}
    assert voxel_set(fast) == {(i, j, k) for i, k in xz for j in (1, 2)}


@pytest.mark.parametrize("point,expected", [
    ((1.5, 1.5, 1.5), {(1, 1, 1)}),  # inside a voxel
    ((2.0, 1.5, 1.5), {(1, 1, 1), (2, 1, 1)}),  # on a face
    ((2.0, 2.0, 1.5), {(i, j, 1) for i in (1, 2) for j in (1, 2)}),  # on an edge
    ((2.0, 2.0, 2.0), {(i, j, k) for i in (1, 2) for j in (1, 2) for k in (1, 2)}),  # on a corner
    ((0.0, 0.0, 0.0), {(0, 0, 0)}),  # the grid's corner: the other seven are outside
])
def test_zero_length_segment_is_a_point_touching_1_2_4_or_8_voxels(point, expected):
    p = np.array([point])
    fast = assert_matches_oracles(p, p, unit_spec((4, 4, 4)))
    assert voxel_set(fast) == expected


# ------------------------------------------------------------------- grid placement


def test_result_is_the_crop_of_a_larger_grid_segments_are_clipped():
    """The same segments on an 8³ grid and on a 16³ grid around it, both in metres with
    voxel size 0.5: the small grid sees exactly its part of the large one."""
    rng = np.random.default_rng(5)
    a = np.round(rng.uniform(-3.0, 7.0, (50, 3)) * 2**20) / 2**20  # exact after the shift
    b = np.round(rng.uniform(-3.0, 7.0, (50, 3)) * 2**20) / 2**20
    small = GridSpec((0.0, 0.0, 0.0), 0.5, (8, 8, 8))
    large = GridSpec((-2.0, -2.0, -2.0), 0.5, (16, 16, 16))
    crop = segments_dense(a, b, large)[4:12, 4:12, 4:12]
    fast = segments_dense(a, b, small)
    assert np.array_equal(fast, crop)
    assert 0 < fast.sum() < segments_dense(a, b, large).sum()


def test_segments_outside_the_grid_set_nothing_and_long_ones_are_clipped():
    spec = unit_spec((8, 8, 8))
    outside = segments_dense([[-5.0, 1.0, 1.0], [2.0, 2.0, 9.5]], [[-0.5, 7.0, 7.0], [6.0, 6.0, 8.01]], spec)
    assert not outside.any()
    row = segments_dense([[-1e9, 2.5, 2.5]], [[1e9, 2.5, 2.5]], spec)
    assert voxel_set(row) == {(i, 2, 2) for i in range(8)}


def test_world_origin_and_voxel_size():
    spec = GridSpec((-1.0, 2.0, 0.5), 0.25, (8, 8, 8))
    fast = segments_dense([[-0.9, 2.1, 0.6]], [[-0.4, 2.1, 0.6]], spec)  # x 0.4 → 2.4 voxels
    assert voxel_set(fast) == {(0, 0, 0), (1, 0, 0), (2, 0, 0)}
    rng = np.random.default_rng(2)
    a, b = rng.uniform(-1.5, 1.5, (20, 3)) + [0, 3, 1.5], rng.uniform(-1.5, 1.5, (20, 3)) + [0, 3, 1.5]
    assert np.array_equal(segments_dense(a, b, spec), slab_oracle(a, b, spec))


# ------------------------------------------------------------------- the DDA itself


def test_dda_takes_one_step_per_slab_along_the_dominant_axis():
    p0 = np.array([[0.5, 0.2, 0.1], [0.2, 0.5, 0.5], [1.0, 1.0, -3.0], [2.0, 2.0, 2.0], [1.5, 1.5, 1.5]])
    p1 = np.array([[7.5, 3.3, 1.0], [0.3, 1.5, 9.5], [1.0, 1.0, -0.5], [2.0, 2.0, 2.0], [1.5, 1.5, 1.5]])
    d, lo, hi, D, first, steps = dda_setup(p0, p1, (6, 6, 6))
    assert D.tolist() == [0, 2, 2, 0, 0]
    # slabs 0..5 (clipped at nx=6); 0..5 (clipped); none (below z=0); 1..2 (x=2 is a face); 1
    assert steps.tolist() == [6, 6, 0, 2, 1]
    assert first[[0, 1, 3, 4]].tolist() == [0.0, 0.0, 1.0, 1.0]


def test_cpu_batches_do_not_change_the_result(monkeypatch):
    rng = np.random.default_rng(7)
    spec = unit_spec((16, 16, 16))
    a, b = rng.uniform(-2, 18, (40, 3)), rng.uniform(-2, 18, (40, 3))
    whole = segments_dense(a, b, spec)
    monkeypatch.setattr(lines, "CHUNK_STEPS", 7)
    assert np.array_equal(segments_dense(a, b, spec), whole)


# ------------------------------------------------------------------- API


def test_or_into_an_existing_grid_keeps_its_voxels_and_returns_it():
    spec = unit_spec((40, 5, 5))
    words = bitgrid.empty(spec.shape, xp=np)
    words[4, 4, 1] = 1 << 3  # voxel (35, 4, 4)
    before = bitgrid.unpack(words, 40).copy()
    a, b = np.array([[0.5, 0.5, 0.5]]), np.array([[20.5, 0.5, 0.5]])
    out = voxelize_segments(a, b, spec, xp=np, words=words)
    assert out is words
    assert np.array_equal(bitgrid.unpack(words, 40), before | segments_dense(a, b, spec))
    assert bitgrid.count(words) == 21 + 1


def test_empty_input_gives_an_empty_grid():
    bits = voxelize_segments(np.zeros((0, 3)), np.zeros((0, 3)), unit_spec((33, 2, 2)), xp=np)
    assert bits.shape == (2, 2, 2) and bits.dtype == np.uint32 and not bits.any()


def test_bad_inputs_are_clear_errors():
    spec = unit_spec((4, 4, 4))
    good = np.zeros((2, 3))
    with pytest.raises(InputError, match="non-finite"):
        voxelize_segments(np.array([[0.0, np.nan, 0.0], [1, 1, 1]]), good, spec, xp=np)
    with pytest.raises(InputError, match="non-finite"):
        voxelize_segments(good, np.array([[0.0, 0.0, np.inf], [1, 1, 1]]), spec, xp=np)
    with pytest.raises(InputError, match="shape"):
        voxelize_segments(good, np.zeros((3, 3)), spec, xp=np)
    with pytest.raises(InputError, match="shape"):
        voxelize_segments(np.zeros((2, 2)), np.zeros((2, 2)), spec, xp=np)
    with pytest.raises(InputError, match="bit grid"):
        voxelize_segments(good, good, spec, xp=np, words=np.zeros((4, 4, 2), dtype=np.uint32))
    with pytest.raises(InputError, match="voxels from"):
        voxelize_segments(good, np.array([[0, 0, 0], [1e300, 0, 0]]), spec, xp=np)


def test_progress_false_cancels():
    with pytest.raises(Cancelled):
        voxelize_segments(np.zeros((1, 3)), np.ones((1, 3)), unit_spec((4, 4, 4)), xp=np,
                          progress=lambda f, m: False)
