"""An independent mesher for tests: marching tetrahedra over a level set's voxel centres,
and the checks a rendered liquid surface must pass (closed, 2-manifold, its volume).

Every cube between 8 neighbouring voxel centres is split into the 6 tetrahedra of the
Freudenthal (Kuhn) decomposition, all sharing the cube's main diagonal, so neighbouring
cubes split their shared faces alike. φ is linear in each tetrahedron, so its zero set
is a plane piece per tetrahedron: a triangle (1 or 3 corners inside) or a quad split in
two (2 inside). Vertices sit on grid edges where φ changes sign (φ < 0 inside, φ ≥ 0
outside: no vertex is ever exactly on the surface) and are shared through the edge's
two node indices. The zero set of a piecewise-linear field on a simplicial mesh is a
closed 2-manifold wherever it does not reach the grid's boundary, so boundary edges
count exactly where the liquid runs off the grid and nothing else.
"""

from __future__ import annotations

import itertools

import numpy as np

# The 6 tetrahedra: corner paths 000 → 111 along each permutation of the axes (x, y, z).
_TETS = []
for order in itertools.permutations(range(3)):
    corner = np.zeros(3, int)
    path = [tuple(corner)]
    for axis in order:
        corner = corner.copy()
        corner[axis] = 1
        path.append(tuple(corner))
    _TETS.append(path)


def marching_tets(phi, origin, h):
    """(vertices (V, 3) float64, triangles (T, 3) int64) of the zero set of *phi*
    ((nz, ny, nx), samples at origin + (index + ½)·h), triangles wound so that their
    normals point out of the liquid (towards φ > 0)."""
    phi = np.asarray(phi, np.float64)
    nz, ny, nx = phi.shape
    flat = phi.ravel()
    k, j, i = np.meshgrid(np.arange(nz - 1), np.arange(ny - 1), np.arange(nx - 1), indexing="ij")
    base = ((k * ny + j) * nx + i).ravel()

    def node(c):  # linear node index of corner c = (dx, dy, dz) of every cube
        return base + (c[2] * ny + c[1]) * nx + c[0]

    tris = []
    for tet in _TETS:
        ids = np.stack([node(c) for c in tet], axis=1)  # (cubes, 4)
        inside = flat[ids] < 0
        count = inside.sum(axis=1)
        cut = (count > 0) & (count < 4)
        ids, inside, count = ids[cut], inside[cut], count[cut]
        for pattern in itertools.product((False, True), repeat=4):
            n_in = sum(pattern)
            if n_in in (0, 4):
                continue
            rows = np.all(inside == np.array(pattern), axis=1)
            if not rows.any():
                continue
            t = ids[rows]
            ins = [a for a in range(4) if pattern[a]]
            outs = [a for a in range(4) if not pattern[a]]
            if n_in == 1 or n_in == 3:
                lone, others = (ins[0], outs) if n_in == 1 else (outs[0], ins)
                polys = [[(lone, others[0]), (lone, others[1]), (lone, others[2])]]
            else:
                (a, b), (c, d) = ins, outs
                polys = [[(a, c), (a, d), (b, d)], [(a, c), (b, d), (b, c)]]
            for poly in polys:
                edges = []
                for u, w in poly:
                    lo, hi = np.minimum(t[:, u], t[:, w]), np.maximum(t[:, u], t[:, w])
                    edges.append(lo * flat.size + hi)
                tris.append(np.stack(edges, axis=1))
    if not tris:
        return np.zeros((0, 3)), np.zeros((0, 3), np.int64)
    keys = np.concatenate(tris)  # (T, 3) edge keys
    unique, triangles = np.unique(keys, return_inverse=True)
    triangles = triangles.reshape(-1, 3)
    a, b = unique // flat.size, unique % flat.size
    fa, fb = flat[a], flat[b]
    s = fa / (fa - fb)

    def position(n):
        kk, rem = np.divmod(n, nx * ny)
        jj, ii = np.divmod(rem, nx)
        return (np.stack([ii, jj, kk], axis=1) + 0.5) * h + np.asarray(origin, np.float64)

    pa, pb = position(a), position(b)
    vertices = pa + s[:, None] * (pb - pa)
    # Orientation: along ∇φ, i.e. from the inside end of an edge to its outside end.
    v0, v1, v2 = (vertices[triangles[:, c]] for c in range(3))
    normal = np.cross(v1 - v0, v2 - v0)
    inner = np.where((fa < 0)[:, None], pa, pb)
    outer = np.where((fa < 0)[:, None], pb, pa)
    e = triangles[:, 0]
    flip = np.einsum("ij,ij->i", normal, outer[e] - inner[e]) < 0
    triangles[flip] = triangles[flip][:, ::-1]
    return vertices, triangles


def polygon_edges(loop_vertices, loop_starts, loop_totals):
    """(E, 2) sorted vertex pairs of every polygon side (a polygon soup as Blender stores
    it: loop vertex indices, each polygon's first loop and loop count)."""
    loop_vertices = np.asarray(loop_vertices, np.int64)
    nxt = np.arange(len(loop_vertices)) + 1
    ends = np.asarray(loop_starts) + np.asarray(loop_totals)
    nxt[ends - 1] = loop_starts  # the last loop of a polygon closes it
    pairs = np.stack([loop_vertices, loop_vertices[nxt]], axis=1)
    pairs.sort(axis=1)
    return pairs


def fan_triangles(loop_vertices, loop_starts, loop_totals):
    """Polygons fanned into triangles from their first vertex (their winding kept)."""
    loop_vertices = np.asarray(loop_vertices, np.int64)
    out = []
    for n in np.unique(loop_totals):
        first = np.asarray(loop_starts)[np.asarray(loop_totals) == n]
        for a in range(1, n - 1):
            out.append(np.stack([loop_vertices[first], loop_vertices[first + a], loop_vertices[first + a + 1]], 1))
    return np.concatenate(out) if out else np.zeros((0, 3), np.int64)


def open_and_nonmanifold_edges(pairs):
    """(edges used by one face, edges used by more than two) of (E, 2) sorted vertex pairs."""
    _, counts = np.unique(np.asarray(pairs).reshape(-1, 2), axis=0, return_counts=True)
    return int((counts == 1).sum()), int((counts > 2).sum())


def triangle_edges(triangles):
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    e.sort(axis=1)
    return e


def mesh_volume(vertices, triangles):
    """Enclosed volume of an outward-wound closed triangle mesh (divergence theorem)."""
    v = np.asarray(vertices, np.float64)
    v0, v1, v2 = (v[triangles[:, c]] for c in range(3))
    return float(np.einsum("ij,ij->i", v0, np.cross(v1, v2)).sum() / 6.0)
