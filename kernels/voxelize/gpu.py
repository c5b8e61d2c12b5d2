"""CuPy launches of ``cuda/voxelize.cu``: the same passes as the NumPy reference.

A ``DeviceMesh`` converts the vertices to voxel units on the device (checking for
non-finite values as it goes), then ``plan`` launches the per-triangle count kernels
(which flag out-of-range indices instead of reading through them) and their scans for
every pass needed, and reads the flags and all work totals back in **one** host sync.
Only then are the column kernels launched.

With a ``progress`` callback, a pass of more than ``BATCH_ITEMS`` work items is launched
in batches (the same kernels, given the scan shifted by the batch's first item, so each
thread finds the same triangle and column). After each batch the host waits for the one
before it (an event: at most two batches queued, no sync per item) and reports, so a
cancel stops the voxelization within about one batch.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..grid import bitgrid
from ..grid.launch import Double, Kernels
from ..progress import report, scaled
from . import exact

_CU = "voxelize.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: bit-identical voxels on both backends
_THREADS = 128
BATCH_ITEMS = 1 << 26  # work items per launch when a progress callback listens (~0.1 s on an H100)


# Constants of voxelize.cu, as -D options from here (the host nvcc harnesses of
# tests/unit/test_cuda_exact.py pass the same): the float filters' bound factor.
DEFINES = {"VOXFX_FILTER": Double(exact.FILTER)}
_K = Kernels(_CU, _OPTIONS, _THREADS, defines=DEFINES)


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

    def subset(self, index) -> "DeviceMesh":
        """The same vertices with only the triangles *index* (host or device int array)."""
        import cupy as cp

        return DeviceMesh(None, self.tris[cp.asarray(index)], self.spec, pv=self.pv, flags=self.flags)

    def counts(self, kind: str, box=None):
        """Launch the count kernel of a pass ('surface' or 'solid') over *box* (default
        the whole grid); return (counts, ends)."""
        import cupy as cp

        T = self.n_tris
        nx, ny, nz = self.shape
        lo, hi = box_args(self.shape, box)
        counts = cp.empty(T, dtype=cp.int64)
        nv = np.int64(self.pv.shape[0])
        if kind == "surface":
            args = (self.pv, self.tris, np.int64(T), nv, np.int32(nx), np.int32(ny), np.int32(nz), *lo, *hi,
                    counts, self.flags)
        else:
            args = (self.pv, self.tris, np.int64(T), nv, lo[1], lo[2], hi[1], hi[2], counts, self.flags)
        if T:  # a box's subset may hold no triangle (no launch of zero blocks)
            _K.launch(f"{kind}_column_counts", T, args)
        return counts, cp.cumsum(counts)


def box_args(shape, box):
    """The box (lo, hi) as two triples of int32 kernel arguments (the whole grid without one)."""
    if box is None:
        return (np.int32(0),) * 3, tuple(np.int32(n) for n in shape)
    return tuple(np.int32(c) for c in box[0]), tuple(np.int32(c) for c in box[1])


def plan(meshes_and_kinds):
    """Counts and scans for every (mesh, kind[, box]), then one sync: validates the inputs
    and returns [(counts, ends, total), ...] in the same order."""
    import cupy as cp

    work = [(m, *m.counts(*rest)) for m, *rest in meshes_and_kinds]
    flags = meshes_and_kinds[0][0].flags
    totals = [ends[-1:] if ends.size else cp.zeros(1, dtype=cp.int64) for _, _, ends in work]
    host = cp.concatenate([flags.view(cp.int64)] + totals).get()  # the one sync
    check_flags(host)
    return [(counts, ends, int(total)) for (_, counts, ends), total in zip(work, host[2:])]


def check_flags(host):
    """Refuse the input whose mesh flags (``DeviceMesh.flags`` read back, as int64) say so."""
    if host[0]:
        raise InputError(f"{int(host[0])} vertices have non-finite coordinates (NaN/inf)")
    if host[1]:
        raise InputError("triangle indices point outside the vertex array")


def new_words(shape):
    import cupy as cp

    nx, ny, nz = shape
    return cp.zeros((nz, ny, bitgrid.words_along_x(nx)), dtype=cp.uint32)


def launch_columns(name, mesh: DeviceMesh, work, tail, progress=None, what=""):
    """Launch the column kernel *name* over a pass's work items (its arguments: the mesh,
    the scan, the item count, then *tail*): at once, or in batches while *progress*
    listens (module notes)."""
    import cupy as cp

    counts, ends, total = work
    if not total:
        return
    if progress is None or total <= BATCH_ITEMS:
        _K.launch(name, total, (mesh.pv, mesh.tris, ends, counts, np.int64(mesh.n_tris), np.int64(total), *tail))
        return
    queued = []
    for first in range(0, total, BATCH_ITEMS):
        n = min(BATCH_ITEMS, total - first)
        # item i of this launch is item first + i of the pass: owner_of(ends − first, i)
        # finds the same triangle, and its local column is the same
        shifted = ends - np.int64(first)
        _K.launch(name, n, (mesh.pv, mesh.tris, shifted, counts, np.int64(mesh.n_tris), np.int64(n), *tail))
        queued.append(cp.cuda.Event(disable_timing=True))
        queued[-1].record()
        if len(queued) > 1:
            queued.pop(0).synchronize()  # the batch before this one is done: two at most in flight
        report(progress, (first + n) / total, what)


def surface_pass(mesh: DeviceMesh, work, thin: bool, words, box=None, progress=None):
    """Set the surface voxels of *box* (default the whole grid) in *words*, its bit grid."""
    nx, ny, nz = mesh.shape
    lo, hi = box_args(mesh.shape, box)
    launch_columns("surface_columns", mesh, work,
                   (np.int32(nx), np.int32(ny), np.int32(nz), *lo, *hi, np.int32(1 if thin else 0), words),
                   progress, "surface voxels")
    return words


def solid_pass(mesh: DeviceMesh, work, box=None, carry=None, progress=None):
    """Flip starts then the row prefix-xor: voxels whose centre is inside (of *box*, with
    the parity *carry* of the crossings before it: ``solid.flip_starts_cpu``)."""
    lo, hi = box_args(mesh.shape, box)
    dims = tuple(int(b) - int(a) for a, b in zip(lo, hi))
    words = new_words(dims)
    if carry is not None:
        words[..., 0] ^= carry.reshape(dims[2], dims[1]).astype(words.dtype)
    drop = np.int32(1 if (carry is not None and int(lo[0]) > 0) else 0)
    launch_columns("solid_flip_starts", mesh, work, (*lo, *hi, drop, words), progress, "solid: column crossings")
    rows = dims[2] * dims[1]
    _K.launch("prefix_xor_rows", rows,
              (words, np.int64(rows), np.int32(bitgrid.words_along_x(dims[0])), np.int32(dims[0])))
    return words


def voxelize_gpu(vertices, triangles, spec, mode: str, vote: bool, progress=None):
    """The whole GPU pipeline for one mode; returns a CuPy bit grid. *progress* hears
    between passes and batches (False cancels: ``Cancelled``)."""
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
    passes = len(meshes)
    span = [scaled(progress, i / passes, (i + 1) / passes) if progress else None for i in range(passes)]
    words = None
    if solid:
        words = solid_pass(mesh, work[0], progress=span[0])
        if vote:
            nx, ny, nz = mesh.shape
            votes = bitgrid.unpack(words, nx).view(cp.uint8).copy()
            report(span[1], 0.0, "solid: vote along y")
            votes += bitgrid.unpack(solid_pass(my, work[1], progress=span[1]), ny).view(cp.uint8).transpose(1, 2, 0)
            report(span[2], 0.0, "solid: vote along z")
            votes += bitgrid.unpack(solid_pass(mz, work[2], progress=span[2]), nz).view(cp.uint8).transpose(2, 0, 1)
            words = bitgrid.pack(votes >= 2)
    if surface:
        report(span[-1], 0.0, "surface voxels")
        words = surface_pass(mesh, work[-1], mode == "thin", words if words is not None else new_words(mesh.shape),
                             progress=span[-1])
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
                                   np.int32(nx), np.int32(ny), np.int32(nz), *box_args(mesh.shape, None)[0],
                                   *box_args(mesh.shape, None)[1], cp.ascontiguousarray(linear, dtype=cp.int64),
                                   np.int64(linear.size), owner))
    return owner
