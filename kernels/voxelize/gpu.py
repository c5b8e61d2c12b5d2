"""CuPy launches of ``cuda/voxelize.cu``: the same passes as the NumPy reference.

A ``DeviceMesh`` converts the vertices to voxel units on the device (checking for
non-finite values as it goes), then ``plan`` launches the per-triangle count kernels
(which flag out-of-range indices instead of reading through them) and their scans for
every pass needed, and reads the flags and all work totals back in **one** host sync.
Only then are the column kernels launched.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..grid import bitgrid
from ..grid.launch import Kernels

_CU = "voxelize.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: bit-identical voxels on both backends
_THREADS = 128


_K = Kernels(_CU, _OPTIONS, _THREADS)


class DeviceMesh:
    """Triangles on the device, vertices in float64 voxel units of one grid."""

    def __init__(self, vertices, triangles, spec, pv=None, flags=None):
        import cupy as cp

        self.shape = tuple(int(n) for n in spec.shape)
        self.spec = spec
        self.tris = cp.ascontiguousarray(cp.asarray(triangles), dtype=cp.int32)
        if pv is not None:  # an axis permutation of an already prepared mesh
            self.pv, self.flags = pv, flags
            return
        v = cp.asarray(vertices)
        if v.dtype not in (cp.float32, cp.float64):
            v = v.astype(cp.float64)
        v = cp.ascontiguousarray(v)
        n = int(v.shape[0])
        self.pv = cp.empty((n, 3), dtype=cp.float64)
        self.flags = cp.zeros(2, dtype=cp.uint64)  # [non-finite vertices, bad index seen]
        if n:
            o = spec.origin
            name = "prepare_vertices_f32" if v.dtype == cp.float32 else "prepare_vertices_f64"
            _K.launch(name, n, (v, np.int64(n), np.float64(o[0]), np.float64(o[1]),
                                                    np.float64(o[2]), np.float64(spec.voxel_size), self.pv,
                                                    self.flags))

    @property
    def n_tris(self) -> int:
        return int(self.tris.shape[0])

    def permuted(self, axes) -> "DeviceMesh":
        """The same mesh with axes relabelled (for parity along y or z)."""
        from ..grid import GridSpec

        spec = GridSpec(tuple(self.spec.origin[a] for a in axes), self.spec.voxel_size,
                        tuple(self.shape[a] for a in axes))
        return DeviceMesh(None, self.tris, spec, pv=self.pv[:, list(axes)].copy(), flags=self.flags)

    def counts(self, kind: str):
        """Launch the count kernel of a pass ('surface' or 'solid'); return (counts, ends)."""
        import cupy as cp

        T = self.n_tris
        nx, ny, nz = self.shape
        counts = cp.empty(T, dtype=cp.int64)
        nv = np.int64(self.pv.shape[0])
        if kind == "surface":
            args = (self.pv, self.tris, np.int64(T), nv, np.int32(nx), np.int32(ny), np.int32(nz), counts, self.flags)
        else:
            args = (self.pv, self.tris, np.int64(T), nv, np.int32(ny), np.int32(nz), counts, self.flags)
        _K.launch(f"{kind}_column_counts", T, args)
        return counts, cp.cumsum(counts)


def plan(meshes_and_kinds):
    """Counts and scans for every (mesh, kind), then one sync: validates the inputs and
    returns [(counts, ends, total), ...] in the same order."""
    import cupy as cp

    work = [(m, *m.counts(kind)) for m, kind in meshes_and_kinds]
    flags = meshes_and_kinds[0][0].flags
    host = cp.concatenate([flags.view(cp.int64)] + [ends[-1:] for _, _, ends in work]).get()  # the one sync
    if host[0]:
        raise InputError(f"{int(host[0])} vertices have non-finite coordinates (NaN/inf)")
    if host[1]:
        raise InputError("triangle indices point outside the vertex array")
    return [(counts, ends, int(total)) for (_, counts, ends), total in zip(work, host[2:])]


def new_words(shape):
    import cupy as cp

    nx, ny, nz = shape
    return cp.zeros((nz, ny, bitgrid.words_along_x(nx)), dtype=cp.uint32)


def surface_pass(mesh: DeviceMesh, work, thin: bool, words):
    counts, ends, total = work
    nx, ny, nz = mesh.shape
    if total:
        _K.launch("surface_columns", total,
                  (mesh.pv, mesh.tris, ends, counts, np.int64(mesh.n_tris), np.int64(total),
                   np.int32(nx), np.int32(ny), np.int32(nz), np.int32(1 if thin else 0), words))
    return words


def solid_pass(mesh: DeviceMesh, work):
    """Flip starts then the row prefix-xor: voxels whose centre is inside."""
    counts, ends, total = work
    nx, ny, nz = mesh.shape
    words = new_words(mesh.shape)
    if total:
        _K.launch("solid_flip_starts", total, (mesh.pv, mesh.tris, ends, counts, np.int64(mesh.n_tris), np.int64(total),
                                               np.int32(nx), np.int32(ny), np.int32(nz), words))
    rows = nz * ny
    _K.launch("prefix_xor_rows", rows, (words, np.int64(rows), np.int32(bitgrid.words_along_x(nx)), np.int32(nx)))
    return words


def voxelize_gpu(vertices, triangles, spec, mode: str, vote: bool):
    """The whole GPU pipeline for one mode; returns a CuPy bit grid."""
    import cupy as cp

    mesh = DeviceMesh(vertices, triangles, spec)
    solid = mode in ("solid", "solid+surface")
    surface = mode in ("surface", "thin", "solid+surface")
    if mesh.n_tris == 0:
        return new_words(mesh.shape)
    meshes = []
    if solid:
        meshes.append((mesh, "solid"))
        if vote:
            my, mz = mesh.permuted((1, 2, 0)), mesh.permuted((2, 0, 1))
            meshes += [(my, "solid"), (mz, "solid")]
    if surface:
        meshes.append((mesh, "surface"))
    work = plan(meshes)
    words = None
    if solid:
        words = solid_pass(mesh, work[0])
        if vote:
            nx, ny, nz = mesh.shape
            votes = bitgrid.unpack(words, nx).view(cp.uint8).copy()
            votes += bitgrid.unpack(solid_pass(my, work[1]), ny).view(cp.uint8).transpose(1, 2, 0)
            votes += bitgrid.unpack(solid_pass(mz, work[2]), nz).view(cp.uint8).transpose(2, 0, 1)
            words = bitgrid.pack(votes >= 2)
    if surface:
        words = surface_pass(mesh, work[-1], mode == "thin", words if words is not None else new_words(mesh.shape))
    return words


def surface_owners_gpu(vertices, triangles, spec, linear):
    """Smallest index of a triangle whose conservative test covers each listed voxel
    (sorted linear indices); INT32_MAX where none does."""
    import cupy as cp

    owner = cp.full(int(linear.size), np.iinfo(np.int32).max, dtype=cp.int32)
    mesh = DeviceMesh(vertices, triangles, spec)
    if mesh.n_tris == 0 or linear.size == 0:
        return owner
    (counts, ends, total), = plan([(mesh, "surface")])
    nx, ny, nz = mesh.shape
    if total:
        _K.launch("surface_owners", total, (mesh.pv, mesh.tris, ends, counts, np.int64(mesh.n_tris), np.int64(total),
                                            np.int32(nx), np.int32(ny), np.int32(nz),
                                            cp.ascontiguousarray(linear, dtype=cp.int64), np.int64(linear.size), owner))
    return owner
