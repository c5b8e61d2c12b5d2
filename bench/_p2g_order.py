"""The order binning's P2G launches one by one (``sparse_gpu.bin_particles_order``: a count,
the two-launch scan, place; then ``p2g_scatter_brick`` reading the particles through the
order), on one set of buffers, for the benches that time them launch by launch:
flip_sparse_p2g.py ``--ab`` and flip_sparse_scatter_lean.py. FLIP (no C)."""

from __future__ import annotations

from voxfx.kernels.flip import sparse_gpu, sparse_scatter
from voxfx.kernels.flip.particles import KERNELS as DENSE
from voxfx.kernels.flip.sparse_gpu import _I32, _I64, KERNELS, _dims, _frame, _topo, brick_index


class OrderLaunches:
    """The buffers of grid *g*'s order binning of *pos*, *vel* and a callable a launch; each
    launch reads what the one before it in the pipeline wrote (count, scan, place, scatter)."""

    def __init__(self, cp, g, pos, vel):
        self.cp, self.g, self.pos, self.vel = cp, g, pos, vel
        self.n, self.cells = n, cells = int(pos.shape[0]), g.size
        self.keys, self.slots, self.nk = _topo(g)
        self.frame = _frame(g)  # ox oy oz h inv_h
        self.index = brick_index(g)
        self.count = cp.zeros(cells + 1, cp.int32)
        self.cell_of, self.rank, self.order = (cp.empty(n, cp.int32) for _ in range(3))
        self.bounds = cp.zeros(2, cp.uint32)
        self.acc = cp.zeros(6 * cells, cp.uint64)
        self.start = None

    def count_pass(self, name):
        """The count kernel *name* (count_particles_bounds or _grouped), counts and bounds zeroed first."""
        ox, oy, oz, h, inv_h = self.frame

        def run():
            self.count.fill(0)
            self.bounds.fill(0)
            KERNELS.launch(name, self.n, (self.pos, self.vel, self.count, _I32(0), _I64(self.n), ox, oy, oz, inv_h, h,
                                          self.keys, self.slots, self.nk, *self.index, _I64(self.cells), self.count,
                                          self.cell_of, self.rank, self.bounds))
        return run

    def scan(self):
        self.start = sparse_gpu.scan_counts(self.cp, self.count, self.cells, self.bounds)

    def place(self):
        DENSE.launch("place_particles", self.n, (self.cell_of, self.rank, self.start, _I64(self.n), self.order))

    def scatter(self, kernels, spread=sparse_scatter.SCATTER_SPREAD):
        """``p2g_scatter_brick`` of *kernels* (a build of flip_sparse_scatter.cu) through the
        order, a warp's lanes *spread* particles apart, into the sums ``acc``."""
        g, cells = self.g, self.cells

        def run():
            kernels.launch_grid("p2g_scatter_brick", (cells // 512,), (sparse_scatter.SCATTER_THREADS,), (
                self.pos, self.vel, self.count, _I32(0), self.start, self.count, g.brick_slot, g.slot_coords,
                g.brick_nbr, _I64(cells), _I32(g.closed), *_dims(g), *_frame(g), self.bounds, _I32(spread),
                self.order, _I32(1), self.acc))
        return run
