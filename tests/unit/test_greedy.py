"""Greedy block meshes against the per-face block mesh (``blocks.exterior_faces``): the
rectangles, expanded back into voxel faces from their corner positions, are exactly the
exterior faces with the same labels, each once; areas and normals from the vertices."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize.blocks import DIRECTIONS, exterior_faces
from voxfx.kernels.voxelize.greedy import greedy_faces

VOXEL = 0.25
ORIGIN = np.array([-1.0, 2.0, 0.5])


def grid_of(dense):
    nz, ny, nx = dense.shape
    return bitgrid.pack(dense), GridSpec(tuple(ORIGIN), VOXEL, (nx, ny, nz))


def per_face_cells(dense, labels):
    """Counter of (i, j, k, direction, label) from the per-face block mesh."""
    bits, spec = grid_of(dense)
    mesh = exterior_faces(bits, spec)
    k, j, i = np.nonzero(dense)
    ijk = np.stack([i, j, k], axis=1)[mesh.voxel_of_face]
    lab = labels[mesh.voxel_of_face]
    return Counter((*map(int, v), int(d), int(t)) for v, d, t in zip(ijk, mesh.direction_of_face, lab))


def greedy_cells(mesh):
    """Counter of (i, j, k, direction, label) covered by the greedy quads, from the quads'
    vertex positions alone (not from the merge's own bookkeeping)."""
    cells = Counter()
    corners = np.rint((mesh.vertices[mesh.quads].astype(np.float64) - ORIGIN) / VOXEL).astype(int)
    for quad, d, label in zip(corners, mesh.direction_of_quad, mesh.label_of_quad):
        a = int(d) // 2
        lo, hi = quad.min(axis=0), quad.max(axis=0)
        assert lo[a] == hi[a], "a quad must lie in one lattice plane"
        plane = lo[a] - (1 if int(d) % 2 == 0 else 0)  # the + face of voxel p lies at p + 1
        ranges = [range(lo[x], hi[x]) if x != a else [plane] for x in range(3)]
        for i in ranges[0]:
            for j in ranges[1]:
                for k in ranges[2]:
                    cells[(i, j, k, int(d), int(label))] += 1
    return cells


def test_solid_box_becomes_six_quads():
    dense = np.zeros((7, 9, 11), bool)
    dense[1:6, 2:8, 3:10] = True
    bits, spec = grid_of(dense)
    mesh = greedy_faces(bits, spec)
    assert mesh.quad_count == 6
    assert mesh.faces_before == exterior_faces(bits, spec).face_count == 2 * (5 * 6 + 6 * 7 + 5 * 7)
    assert sorted(mesh.direction_of_quad.tolist()) == [0, 1, 2, 3, 4, 5]
    assert len(mesh.vertices) == 8
    np.testing.assert_allclose(mesh.vertices.min(0), ORIGIN + VOXEL * np.array([3, 2, 1]))
    np.testing.assert_allclose(mesh.vertices.max(0), ORIGIN + VOXEL * np.array([10, 8, 6]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("colours", [1, 2, 5])
def test_random_grids_cover_the_per_face_mesh_exactly(seed, colours):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 12, size=3))
    dense = rng.random(shape) < rng.uniform(0.2, 0.9)
    # blocky colours, so that merging has something to do
    coarse = rng.integers(0, colours, size=tuple(s // 3 + 1 for s in shape))
    colour = coarse[np.ix_(*(np.arange(s) // 3 for s in shape))]
    labels = colour[dense].astype(np.int64)  # linear (k, j, i) order of set voxels
    bits, spec = grid_of(dense)
    mesh = greedy_faces(bits, spec, labels=labels)
    expected = per_face_cells(dense, labels)
    assert greedy_cells(mesh) == expected  # same cells, each once, with the same label
    assert mesh.faces_before == sum(expected.values())
    assert int(mesh.area_of_quad.sum()) == mesh.faces_before
    assert mesh.quad_count <= mesh.faces_before
    # the representative voxel carries the quad's label
    if mesh.quad_count:
        np.testing.assert_array_equal(labels[mesh.voxel_of_quad], mesh.label_of_quad)


def test_quad_geometry_area_and_outward_winding():
    rng = np.random.default_rng(7)
    dense = rng.random((6, 7, 8)) < 0.6
    labels = rng.integers(0, 2, size=int(dense.sum()))
    mesh = greedy_faces(*grid_of(dense), labels=labels)
    p = mesh.vertices[mesh.quads].astype(np.float64)
    cross = np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 1])
    area = 0.5 * np.linalg.norm(cross, axis=1)
    np.testing.assert_allclose(area, mesh.area_of_quad * VOXEL**2, rtol=1e-5)
    normals = cross / (2 * area[:, None])
    np.testing.assert_allclose(normals, DIRECTIONS[mesh.direction_of_quad], atol=1e-6)


def test_checkerboard_labels_do_not_merge():
    dense = np.ones((1, 4, 4), bool)
    k, j, i = np.nonzero(dense)
    labels = ((i + j) % 2).astype(np.int64)
    mesh = greedy_faces(*grid_of(dense), labels=labels)
    # top and bottom: 16 cells each, no two equal neighbours; the sides: runs of length 1
    assert (mesh.direction_of_quad >= 4).sum() == 32
    assert greedy_cells(mesh) == per_face_cells(dense, labels)


def test_empty_grid_gives_empty_mesh():
    mesh = greedy_faces(*grid_of(np.zeros((3, 3, 3), bool)))
    assert mesh.quad_count == 0 and mesh.faces_before == 0 and mesh.vertices.shape == (0, 3)


def test_too_few_labels_is_refused():
    dense = np.ones((2, 2, 2), bool)
    with pytest.raises(ValueError, match="labels"):
        greedy_faces(*grid_of(dense), labels=np.zeros(3, np.int64))
