"""The order binning's P2G launches one by one (``sparse_gpu.bin_particles_order``: a count,
the two-launch scan, place; then ``p2g_scatter_brick`` reading the particles through the
order), on one set of buffers, for the benches that time them launch by launch:
flip_sparse_p2g.py ``--ab``, flip_sparse_scatter_lean.py and flip_sparse_scatter_banks.py. FLIP (no C);
the two scatter benches' shared parts below (``mode_bits``, ``time_rows``, ``whole_p2g``)."""

from __future__ import annotations

import os

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


# The scatter-variant benches' shared parts (flip_sparse_scatter_lean.py: VOXFX_SPARSE_SCATTER_KERNEL,
# flip_sparse_scatter_banks.py: VOXFX_SPARSE_SCATTER_BANKS): *var* the switch, *modes* its values.

def p2g(g, pos, vel, c, var, mode):
    """``sparse_gpu.particles_to_grid`` (the scatter) with the switch *var* at *mode*."""
    os.environ[var] = mode
    return sparse_gpu.particles_to_grid(g, pos, vel, c, "scatter")


def mode_bits(cp, g, pos, vel, var, modes):
    """Per FLIP and APIC (a random C): (apic, {mode: host arrays}) — each mode's faces and masks
    (``particles_to_grid``, order binning), then the sorted binning's launch: its integer sums,
    bounds and faces (uint32 views), for the benches' bit-for-bit comparisons."""
    import numpy as np

    c = cp.asarray(np.random.default_rng(5).normal(0.0, 2.0, (len(pos), 9)).astype(np.float32))
    for apic in (False, True):
        cc = c if apic else None
        out = {}
        for mode in modes:
            valid = p2g(g, pos, vel, cc, var, mode)
            spos, svel, sc, start, count, _, _ = sparse_gpu.bin_particles(g, pos, vel, cc)
            faces = tuple(cp.empty(g.size, cp.float32) for _ in range(3))
            masks = tuple(cp.empty(g.size, cp.uint8) for _ in range(3))
            args = (spos, svel, sc, _I32(apic), start, count, g.brick_slot, g.slot_coords, g.brick_nbr,
                    _I64(g.size), _I32(g.closed), *_dims(g), *_frame(g), *faces, *masks)
            acc, bounds = sparse_scatter.launch(g.size, args)
            out[mode] = [cp.asnumpy(g[n]).view(np.uint32) for n in g.FACES] + [cp.asnumpy(m) for m in valid] + [
                cp.asnumpy(acc), cp.asnumpy(bounds)] + [cp.asnumpy(f).view(np.uint32) for f in faces]
        yield apic, out


def time_rows(cp, rows, repeat):
    """Each (name, launch) of *rows* timed by CUDA events, the rows in turn *repeat* times: the
    medians printed as a table."""
    import numpy as np
    from _cuda_events import timed

    times = {name: [] for name, _ in rows}
    for _ in range(repeat):
        for name, fn in rows:
            times[name].append(timed(cp, fn, 1))
    print(f"launch | ms (median of {repeat}, rows in turn)")
    for name, _ in rows:
        print(f"{name} | {np.median(times[name]):.4f}")


def whole_p2g(cp, g, pos, vel, var, modes, repeat):
    """Whole ``particles_to_grid`` at each mode of *var*, the modes in turn (a first round
    untimed): the medians printed."""
    import numpy as np
    from _cuda_events import timed

    out = {m: [] for m in modes}
    for _ in range(repeat + 1):
        for mode in modes:
            out[mode].append(timed(cp, lambda m=mode: p2g(g, pos, vel, None, var, m), 1))
    for mode in modes:
        print(f"particles_to_grid (whole), {mode} | {np.median(out[mode][1:]):.4f}")
