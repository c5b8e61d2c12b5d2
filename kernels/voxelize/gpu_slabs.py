"""``slabs.py`` on the GPU: the same boxes, the same triangle selection, the same carried
z parity, with the kernels of ``cuda/voxelize.cu`` cut to the box (their setup stays the
whole grid's, as on the CPU), so every slab is bit-identical to the CPU's slab and to the
unsplit grid. Which triangles reach a box is decided on the host (``SplitMesh``'s ranges:
a superset is enough, the kernels decide every voxel); the vertices live on the device
once, in voxel units of the whole grid, plus their two axis permutations for the vote.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid import GridSpec, bitgrid
from ..progress import report, scaled
from . import gpu
from .slabs import SplitMesh, slab_ranges
from .solid import VOTE_AXES


class DeviceSplitMesh:
    def __init__(self, vertices, triangles, spec: GridSpec):
        self.spec = spec
        self.host = SplitMesh(vertices, triangles, spec)  # ranges; checks the inputs
        self.mesh = gpu.DeviceMesh(vertices, triangles, spec)
        self._permuted = {}

    def _axis_mesh(self, axis):
        if axis == 0:
            return self.mesh
        if axis not in self._permuted:
            self._permuted[axis] = self.mesh.permuted(VOTE_AXES[axis][0])
        return self._permuted[axis]

    def voxelize_box(self, lo, hi, mode: str, *, vote: bool = False, carry=None, want_carry=False,
                     progress=None):
        """CuPy bit grid of the box [lo, hi): ``slabs.voxelize_box`` on the device."""
        import cupy as cp

        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        dims = tuple(int(n) for n in hi - lo)
        host = self.host
        words = top = None
        if mode in ("solid", "solid+surface"):
            axes = range(3) if vote else range(1)
            jobs = []
            for a in axes:
                order = list(VOTE_AXES[a][0])
                sub = self._axis_mesh(a).subset(host.for_parity(a, lo, hi, carried=(a == 2 and carry is not None)))
                jobs.append((sub, "solid", (lo[order], hi[order])))
            work = gpu.plan(jobs)
            votes = None
            for a, ((sub, _, box), w) in enumerate(zip(jobs, work)):
                one = gpu.solid_pass(sub, w, box, carry if a == 2 else None,
                                     progress=scaled(progress, a / 4, (a + 1) / 4) if progress else None)
                if not vote:
                    words = one
                    break
                unpacked = bitgrid.unpack(one, dims[VOTE_AXES[a][0][0]]).view(cp.uint8)
                del one
                if a == 2:
                    top = unpacked[:, :, -1] != 0  # [y, x]: the z parity the box above carries in
                unpacked = unpacked.transpose(VOTE_AXES[a][1]) if a else unpacked
                if votes is None:
                    votes = unpacked.copy()
                else:
                    votes += unpacked
                del unpacked
            if vote:
                words = bitgrid.pack(votes >= 2)
                del votes
        if mode != "solid":
            sub = self.mesh.subset(host.for_surface(lo, hi))
            (work,) = gpu.plan([(sub, "surface", (lo, hi))])
            words = gpu.surface_pass(sub, work, mode == "thin", words if words is not None else gpu.new_words(dims),
                                     (lo, hi), progress=scaled(progress, 0.75, 1.0) if progress else None)
        return (words, top) if want_carry else words


def voxelize_slabs_gpu(mesh: DeviceSplitMesh, mode: str, layers: int, *, vote: bool = False, progress=None,
                       to_host: bool = True):
    """``slabs.voxelize_slabs`` on the device: ``(k0, k1, bits)`` bottom to top (NumPy
    bits with *to_host*, else CuPy)."""
    nx, ny, nz = mesh.spec.shape
    carry = None
    for k0, k1 in slab_ranges(nz, layers):
        bits, carry = mesh.voxelize_box((0, 0, k0), (nx, ny, k1), mode, vote=vote, carry=carry, want_carry=True)
        yield k0, k1, (backend.to_host(bits) if to_host else bits)
        report(progress, k1 / nz, f"voxelized rows {k1}/{nz}")
