"""Block meshes (exterior voxel faces) checked against geometry computed from scratch:
brute-force neighbour tests per voxel, areas and normals from the vertex positions,
edge counts of the quad mesh, and the Euler characteristic of known shapes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize.blocks import (
    DIRECTIONS,
    count_exterior_faces,
    estimate_bytes,
    exterior_faces,
    max_face_count,
)

STEPS = [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]


def blocks_of(dense, voxel_size=0.25, origin=(-1.0, 2.0, 0.5)):
    """Block mesh of a dense [k, j, i] bool array, and its spec."""
    nz, ny, nx = dense.shape
    spec = GridSpec(origin, voxel_size, (nx, ny, nz))
    return exterior_faces(bitgrid.pack(dense), spec), spec


def brute_force_faces(dense):
    """{(i, j, k, step)} of every set voxel face whose neighbour is empty or outside."""
    nz, ny, nx = dense.shape
    faces = set()
    for k, j, i in zip(*np.nonzero(dense)):
        for step in STEPS:
            a, b, c = i + step[0], j + step[1], k + step[2]
            inside = 0 <= a < nx and 0 <= b < ny and 0 <= c < nz
            if not (inside and dense[c, b, a]):
                faces.add((int(i), int(j), int(k), step))
    return faces


def mesh_faces(mesh, dense):
    """{(i, j, k, step)} the block mesh claims, via voxel_of_face and direction_of_face."""
    k, j, i = np.nonzero(dense)  # linear (k, j, i) order: the order voxel_of_face indexes
    ijk = np.stack([i, j, k], axis=1)[mesh.voxel_of_face]
    steps = DIRECTIONS[mesh.direction_of_face]
    return {(int(a), int(b), int(c), tuple(int(s) for s in step)) for (a, b, c), step in zip(ijk, steps)}


def quad_geometry(mesh):
    """(area (F,), unit normal (F, 3), centre (F, 3)) of each quad from its corner positions."""
    p = mesh.vertices[mesh.quads].astype(np.float64)  # (F, 4, 3)
    cross = np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 1])  # diagonals: |d1 × d2| = 2·area
    area = 0.5 * np.linalg.norm(cross, axis=1)
    return area, cross / (2 * area[:, None]), p.mean(axis=1)


def directed_edges(quads):
    return Counter((int(a), int(b)) for q in quads for a, b in zip(q, np.roll(q, -1)))


def undirected_edges(quads):
    return Counter(tuple(sorted(e)) for e in directed_edges(quads).elements())


def euler_characteristic(mesh):
    return len(mesh.vertices) - len(undirected_edges(mesh.quads)) + len(mesh.quads)


def random_voxels(seed, shape, fill):
    nx, ny, nz = shape
    return np.random.default_rng(seed).random((nz, ny, nx)) < fill


# ---------------------------------------------------------------------------------------
# Counts of known shapes


def test_single_voxel_is_a_cube_of_six_quads_on_eight_corners():
    dense = np.zeros((3, 4, 5), dtype=bool)
    dense[1, 2, 3] = True
    mesh, spec = blocks_of(dense, voxel_size=0.5, origin=(10.0, -3.0, 1.0))
    assert mesh.quads.shape == (6, 4) and mesh.vertices.shape == (8, 3)
    corners = np.array([(10.0 + 0.5 * (3 + a), -3.0 + 0.5 * (2 + b), 1.0 + 0.5 * (1 + c))
                        for a in (0, 1) for b in (0, 1) for c in (0, 1)])
    got = sorted(map(tuple, mesh.vertices.astype(np.float64)))
    assert np.allclose(got, sorted(map(tuple, corners)))
    assert sorted(mesh.direction_of_face.tolist()) == [0, 1, 2, 3, 4, 5]
    assert (mesh.voxel_of_face == 0).all()
    assert mesh.vertices.dtype == np.float32 and mesh.quads.dtype == np.int32


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_two_adjacent_voxels_drop_the_shared_faces(axis):
    shape = [2, 2, 2]
    dense = np.zeros(shape[::-1], dtype=bool)
    first, second = [0, 0, 0], [0, 0, 0]
    second[axis] = 1
    dense[first[2], first[1], first[0]] = dense[second[2], second[1], second[0]] = True
    mesh, _ = blocks_of(dense)
    assert len(mesh.quads) == 10 and len(mesh.vertices) == 12
    assert Counter(mesh.axis_of_face.tolist())[axis] == 2  # only the two end caps across the axis


def test_solid_cube_of_27_voxels_has_54_faces_and_sphere_topology():
    dense = np.zeros((5, 5, 5), dtype=bool)
    dense[1:4, 1:4, 1:4] = True
    mesh, _ = blocks_of(dense)
    assert len(mesh.quads) == 54
    assert len(mesh.vertices) == 4**3 - 2**3  # lattice points of the 3³ block minus its interior
    assert euler_characteristic(mesh) == 2


def test_hollow_shell_keeps_the_faces_toward_its_cavity():
    dense = np.zeros((5, 5, 5), dtype=bool)
    dense[:] = True
    dense[1:4, 1:4, 1:4] = False  # 3×3×3 cavity inside a 5×5×5 block
    mesh, _ = blocks_of(dense)
    assert len(mesh.quads) == 6 * 25 + 6 * 9
    assert mesh_faces(mesh, dense) == brute_force_faces(dense)
    # The cavity faces point into the cavity: their centres lie on its walls (lattice 1..4).
    _, normal, centre = quad_geometry(mesh)
    _, spec = blocks_of(dense)
    local = (centre - np.asarray(spec.origin)) / spec.voxel_size
    inner = np.all((local > 0.9) & (local < 4.1), axis=1)
    assert inner.sum() == 54
    towards_middle = np.einsum("fi,fi->f", normal[inner], 2.5 - local[inner])
    assert (towards_middle > 0).all()
    assert euler_characteristic(mesh) == 4  # two spheres: outer skin and cavity wall


def test_empty_grid_gives_an_empty_mesh():
    mesh, _ = blocks_of(np.zeros((2, 3, 40), dtype=bool))
    assert mesh.quads.shape == (0, 4) and mesh.vertices.shape == (0, 3) and len(mesh.voxel_of_face) == 0


# ---------------------------------------------------------------------------------------
# Properties on random voxel sets (shapes straddle the 32-voxel word boundary)

SHAPES = [(7, 6, 5), (33, 4, 3), (64, 3, 4), (70, 2, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fill", [0.3, 0.7])
def test_faces_match_brute_force_neighbour_test(shape, fill):
    dense = random_voxels(hash((shape, fill)) % 1000, shape, fill)
    mesh, _ = blocks_of(dense)
    claimed = mesh_faces(mesh, dense)
    assert len(claimed) == len(mesh.quads)  # no face twice
    assert claimed == brute_force_faces(dense)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_edge_is_shared_by_an_even_number_of_faces_with_opposite_windings(shape):
    mesh, _ = blocks_of(random_voxels(3, shape, 0.5))
    assert all(n % 2 == 0 for n in undirected_edges(mesh.quads).values())
    # Consistent orientation of a closed surface: each edge is walked as often a→b as b→a.
    directed = directed_edges(mesh.quads)
    assert all(directed[(b, a)] == n for (a, b), n in directed.items())


@pytest.mark.parametrize("shape", SHAPES)
def test_normals_point_from_the_set_voxel_to_its_empty_neighbour(shape):
    dense = random_voxels(5, shape, 0.5)
    mesh, spec = blocks_of(dense)
    area, normal, centre = quad_geometry(mesh)
    k, j, i = np.nonzero(dense)
    ijk = np.stack([i, j, k], axis=1)[mesh.voxel_of_face]
    voxel_centre = np.asarray(spec.origin) + (ijk + 0.5) * spec.voxel_size
    # The winding's normal is the face's direction, and the face lies half a voxel that way.
    assert np.allclose(normal, DIRECTIONS[mesh.direction_of_face], atol=1e-6)
    assert np.allclose(mesh.normals(), normal, atol=1e-6)
    assert np.allclose(centre, voxel_centre + 0.5 * spec.voxel_size * normal, atol=1e-5)
    # ... and beyond it is empty space (or the outside of the grid).
    beyond = ijk + DIRECTIONS[mesh.direction_of_face]
    nx, ny, nz = spec.shape
    inside = np.all((beyond >= 0) & (beyond < (nx, ny, nz)), axis=1)
    assert not dense[beyond[inside, 2], beyond[inside, 1], beyond[inside, 0]].any()
    assert dense[ijk[:, 2], ijk[:, 1], ijk[:, 0]].all()


@pytest.mark.parametrize("voxel_size", [0.1, 0.37, 2.0])
def test_total_area_is_exposed_faces_times_voxel_area(voxel_size):
    dense = random_voxels(11, (9, 8, 7), 0.45)
    mesh, _ = blocks_of(dense, voxel_size=voxel_size)
    area, _, _ = quad_geometry(mesh)
    assert area.sum() == pytest.approx(len(brute_force_faces(dense)) * voxel_size**2, rel=1e-5)


def test_vertices_are_welded_lattice_points_in_world_space():
    dense = random_voxels(7, (33, 5, 6), 0.4)
    origin, voxel_size = (-1.5, 0.25, 3.0), 0.125
    mesh, spec = blocks_of(dense, voxel_size=voxel_size, origin=origin)
    lattice = (mesh.vertices.astype(np.float64) - origin) / voxel_size
    assert np.allclose(lattice, np.round(lattice), atol=1e-4)
    lattice = np.round(lattice).astype(int)
    assert lattice.min() >= 0 and (lattice <= spec.shape).all()
    assert len(np.unique(lattice, axis=0)) == len(lattice)  # no duplicate vertex
    assert len(np.unique(mesh.quads)) == len(mesh.vertices)  # no unused vertex
    # Every vertex is a corner of a face's voxel.
    k, j, i = np.nonzero(dense)
    ijk = np.stack([i, j, k], axis=1)[mesh.voxel_of_face]
    offset = lattice[mesh.quads] - ijk[:, None, :]
    assert ((offset == 0) | (offset == 1)).all()


def test_per_voxel_values_reach_their_faces():
    dense = random_voxels(13, (10, 6, 4), 0.5)
    mesh, _ = blocks_of(dense)
    k, j, i = np.nonzero(dense)
    label = 1000 * k + 100 * j + i  # per voxel, in coordinates() order
    face_label = label[mesh.voxel_of_face]
    ijk = np.stack([i, j, k], axis=1)[mesh.voxel_of_face]
    assert (face_label == 1000 * ijk[:, 2] + 100 * ijk[:, 1] + ijk[:, 0]).all()


def test_face_count_and_memory_estimate_cover_the_worst_case_output():
    shape = (12, 10, 8)
    nx, ny, nz = shape
    k, j, i = np.indices((nz, ny, nx))
    checkerboard = (i + j + k) % 2 == 0  # every set voxel shows all six faces
    mesh, spec = blocks_of(checkerboard)
    faces = len(mesh.quads)
    assert faces == 6 * checkerboard.sum() == len(brute_force_faces(checkerboard))
    assert count_exterior_faces(bitgrid.pack(checkerboard), spec) == faces
    assert max_face_count(spec, int(checkerboard.sum())) == faces <= max_face_count(spec)
    output = sum(a.nbytes for a in (mesh.vertices, mesh.quads, mesh.voxel_of_face, mesh.direction_of_face))
    assert estimate_bytes(spec) >= estimate_bytes(spec, faces) > output
    assert estimate_bytes(spec, 0) < estimate_bytes(spec, 10) < estimate_bytes(spec, 100)


def test_a_full_grid_shows_each_lattice_face_on_its_boundary_only():
    dense = np.ones((3, 4, 5), dtype=bool)
    mesh, spec = blocks_of(dense)
    assert len(mesh.quads) == 2 * (5 * 4 + 4 * 3 + 3 * 5)
    assert count_exterior_faces(bitgrid.pack(dense), spec) == len(mesh.quads)


def test_bit_grid_of_the_wrong_shape_is_refused():
    spec = GridSpec((0, 0, 0), 1.0, (40, 3, 2))
    with pytest.raises(ValueError, match="does not match"):
        exterior_faces(np.zeros((2, 3, 1), dtype=np.uint32), spec)
