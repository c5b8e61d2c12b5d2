"""The projection stage and the block G2P kernel's launch shapes at 8M (issue 24, helper h21d), on
the GPU, in one process:

    python3 bench/flip_sparse_g2p_project.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 9]
                                             [--shapes 4x256 table:8x128 ...] [--no-g2p] [--apic]
                                             [--base DIR]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s, then one substep up to its
projection (topology, P2G, pressure: the pressure p and the faces u* kept), then:

1. The projection stage as the row times it (``sparse_pressure.project``, then
   ``sparse_transfer.extrapolate(valid=fluid_faces)``: the fluid faces' masks and two rings), each
   way of ``VOXFX_SPARSE_PROJECT_FLUID`` (0: project_faces, then fluid_faces_sparse; 1:
   project_faces_fluid, the masks in the projection's pass) in turn each round, from the same u*
   and p, a spin kernel first (the device's time alone): the projection, the tail and the stage
   (CUDA events, medians of *repeat*); the two ways' faces and masks compared bit for bit.
2. G2P + advection alone (``sparse_g2p_gpu.g2p_advect``, the block kernel, select corners) at the
   state after the projection stage, in the bins' order, built for each (blocks an SM, threads)
   of *shapes* (``sparse_g2p_gpu.g2p_block_module``: the same code, its registers by
   ``__launch_bounds__``), at the end of the substep and time-centred, the shapes in turn each
   round on copies of the particles, a spin kernel first; every shape's positions and velocities
   compared bit for bit with the first's. A shape may name its corners, CORNERS:BLOCKSxTHREADS
   (``sparse_g2p_gpu.G2P_CORNERS``; helper h21g: ``table:8x128``), else select. ``--apic``: the
   two cases again with APIC's C written (the FLIP blend kept; C compared too). ``--base DIR``
   (helper h21i): the corners ``base-table`` are table built with DIR's brick-table header
   (``kernels/cuda/include/voxfx_g2p_block_table.cuh``, e.g. main's from ``git archive``) in place
   of this tree's, in this process (two encodings of one kernel timed side by side); the corners
   ``table-centred`` (helper h21n): table with ``VOXFX_SPARSE_G2P_TABLE_CODE=centred`` (h21g's per-axis
   code in the time-centred entries). Each way's host time of the call is printed too (helper s22c; the
   device busy with the spin kernel meanwhile). ``--host CALLS`` (helper s22c): the G2P call's host time,
   CALLS calls in a row (the default corners, end of the substep), and a profile of the calls.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels import backend  # noqa: E402
from voxfx.kernels.flip import (sparse_g2p_gpu, sparse_pressure,  # noqa: E402
                                sparse_transfer)

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402
from flip_sparse_g2p import state_before_project  # noqa: E402
from flip_sparse_p2g_stage import SPIN  # noqa: E402


def projection(cp, sim, dt, repeat, spin):
    """Part 1: the projection stage each way from the same u* and p (module notes)."""
    g = sim.grid
    old, p = state_before_project(sim, dt)
    start = [g[name].copy() for name in g.FACES]
    ev = [cp.cuda.Event() for _ in range(3)]
    ways = ("0", "1")
    rows = {w: [] for w in ways}
    outs = {}
    for r in range(repeat + 1):
        for w in ways if r % 2 == 0 else ways[::-1]:
            os.environ["VOXFX_SPARSE_PROJECT_FLUID"] = w
            for name, f in zip(g.FACES, start):
                g[name] = f.copy()
            cp.cuda.Device().synchronize()
            spin((1,), (1,), (np.int64(4_000_000),))
            ev[0].record()
            sparse_pressure.project(g, p, dt)
            ev[1].record()
            masks = sparse_transfer.fluid_faces(g)
            sparse_transfer.extrapolate(g, valid=masks)
            ev[2].record()
            ev[2].synchronize()
            if r:  # the first round compiles
                t = cp.cuda.get_elapsed_time
                rows[w].append((t(ev[0], ev[1]), t(ev[1], ev[2]), t(ev[0], ev[2])))
            outs[w] = [cp.asnumpy(a) for a in (*g.faces(), *masks, *g.valid)]
    os.environ.pop("VOXFX_SPARSE_PROJECT_FLUID", None)
    same = all(np.array_equal(a, b) for a, b in zip(outs["0"], outs["1"]))
    print(f"projection stage: {g.brick_count()} bricks ({g.size:,} pool cells), medians of {repeat}, device alone")
    print("VOXFX_SPARSE_PROJECT_FLUID | project ms | fluid faces + 2 rings ms | stage ms | same bits")
    for w in ways:
        med = np.median(np.array(rows[w]), axis=0)
        print(f"{w} | {med[0]:.4f} | {med[1]:.4f} | {med[2]:.4f} | {same}", flush=True)
    return old


# corners that are the table's with another build: main's header (--base), h21g's per-axis code in the
# time-centred entries (VOXFX_SPARSE_G2P_TABLE_CODE=centred, helper h21n)
TABLE_WAYS = ("base-table", "table-centred")
TABLE_INCLUDE = re.compile(r'^#include "voxfx_g2p_block_table\.cuh".*$', re.M)


class BaseTable:
    """A block kernel module (``sparse_g2p_gpu.g2p_block_module``'s, table corners) compiled with *header*'s text
    (another tree's brick-table header) in place of this tree's ``#include`` (``--base``); launched as
    ``Kernels``."""

    def __init__(self, module, header: str):
        self.filename, self.threads = module.filename, module.threads
        self.options = module.options + ("-DG2P_BENCH_BASE_TABLE=1",)  # a kernel cache key of its own
        self.header = header.replace("#pragma once", "")
        self.module = None

    def get(self, name):
        if self.module is None:
            import cupy as cp

            backend.kernel_cache.current()  # the folder the other modules compile into
            code, n = TABLE_INCLUDE.subn(lambda _: self.header, backend.cuda_source(self.filename))
            assert n == 1, "flip_sparse_g2p_block.cu includes the table header once"
            self.module = cp.RawModule(code=code, options=("--std=c++17", f"-I{backend.CUDA_INCLUDE}", *self.options))
        return self.module.get_function(name)

    def launch(self, name, n, args):
        self.get(name)(((int(n) + self.threads - 1) // self.threads,), (self.threads,), args)


def base_table_modules(header: str):
    """``sparse_g2p_gpu.g2p_block_module`` with its table modules built from *header* (``BaseTable``)."""
    real, built = sparse_g2p_gpu.g2p_block_module, {}

    def module(min_blocks=None, threads=None, corners=None, table_or=0):
        m = real(min_blocks, threads, corners, table_or)
        assert corners == "table"
        if m.options not in built:
            built[m.options] = BaseTable(m, header)
        return built[m.options]

    return module


def g2p_shapes(cp, sim, dt, old, repeat, shapes, spin, apic=False, base=None):
    """Part 2: the block kernel built for each shape, the shapes in turn each round (*apic*: the APIC cases as
    well; *base*: the base tree's folder, for the corners base-table)."""
    g, s = sim.grid, sim.settings
    bins = g.bins
    f32 = np.float32
    flip = f32(s.flip_ratio)
    scalars = (flip, f32(1) - flip, f32(dt), f32(0.5) * f32(dt))
    state = {}
    before_faces = tuple(f.copy() for f in old)
    ev = [cp.cuda.Event() for _ in range(2)]
    saved = sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS
    real_module = sparse_g2p_gpu.g2p_block_module
    base_module = None
    if base is not None:
        header = Path(base, "kernels", "cuda", "include", "voxfx_g2p_block_table.cuh").read_text(encoding="utf-8")
        base_module = base_table_modules(header)
    apic_c = cp.zeros((len(sim.pos), 3, 3), cp.float32) if apic else None
    cases = [("end of substep", None, sim.c), ("time-centred", before_faces, sim.c)]
    if apic:
        cases += [("APIC end of substep", None, apic_c), ("APIC time-centred", before_faces, apic_c)]
    print(f"G2P + advection, block kernel: {len(sim.pos):,} particles, {g.brick_count()} bricks, "
          f"bins' order, medians of {repeat}, device alone")
    print("case | corners:(blocks an SM)x(threads) | ms | same bits as the first | the call's host time (median)")
    for case, before, c in cases:
        rows = {sh: [] for sh in shapes}
        hosts = {sh: [] for sh in shapes}
        outs = {}
        for r in range(repeat + 1):
            for sh in shapes if r % 2 == 0 else shapes[::-1]:
                state["pos"], state["vel"] = sim.pos.copy(), sim.vel.copy()
                g.bins = (state["pos"], *bins[1:])
                cp.cuda.Device().synchronize()
                if c is not None and c is apic_c:
                    c.fill(0)
                sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS = sh[1:]
                os.environ["VOXFX_SPARSE_G2P_CORNERS"] = "table" if sh[0] in TABLE_WAYS else sh[0]
                os.environ["VOXFX_SPARSE_G2P_TABLE_CODE"] = "centred" if sh[0] == "table-centred" else "shift"
                if sh[0] == "base-table":
                    sparse_g2p_gpu.g2p_block_module = base_module
                try:
                    spin((1,), (1,), (np.int64(4_000_000),))
                    ev[0].record()
                    start = time.perf_counter()
                    sparse_g2p_gpu.g2p_advect(g, old, state["pos"], state["vel"], *scalars, c, order="cell",
                                              kernel="block", before=before)
                    host = time.perf_counter() - start  # the launch's host time (the device busy: the spin)
                    ev[1].record()
                    ev[1].synchronize()
                finally:
                    sparse_g2p_gpu.G2P_BLOCK_MIN_BLOCKS, sparse_g2p_gpu.G2P_BLOCK_THREADS = saved
                    sparse_g2p_gpu.g2p_block_module = real_module
                if r:
                    rows[sh].append(cp.cuda.get_elapsed_time(ev[0], ev[1]))
                    hosts[sh].append(host * 1e6)
                if r == repeat:  # the last round's particles (and C)
                    outs[sh] = tuple(cp.asnumpy(a) for a in (state["pos"], state["vel"], *(() if c is None else (c,))))
        first = outs[shapes[0]]
        for sh in shapes:
            same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(outs[sh], first))
            print(f"{case} | {sh[0]}:{sh[1]}x{sh[2]} | {np.median(rows[sh]):.4f} | {same} | host "
                  f"{np.median(hosts[sh]):.1f} µs", flush=True)
    os.environ.pop("VOXFX_SPARSE_G2P_CORNERS", None)
    os.environ.pop("VOXFX_SPARSE_G2P_TABLE_CODE", None)
    g.bins = bins


def host_loop(cp, sim, dt, old, calls, rounds=5):
    """The G2P call's host time (helper s22c): *calls* back-to-back calls of ``sparse_g2p_gpu.g2p_advect`` (the
    default corners, end of the substep, the bins' order), *rounds* rounds (the first a warm-up); the median µs a
    call; then one cProfile of the calls (the functions' own time). Session 22, H100 host (s22c's call 2): 51.5 µs a
    call (53.5 with the launch's 23 scalars kept as CuPy CScalars, h21k's way: no cheaper, not kept)."""
    import cProfile
    import pstats

    g, s = sim.grid, sim.settings
    bins = g.bins
    f32 = np.float32
    flip = f32(s.flip_ratio)
    scalars = (flip, f32(1) - flip, f32(dt), f32(0.5) * f32(dt))
    pos, vel = sim.pos.copy(), sim.vel.copy()
    times = []

    def batch():
        for _ in range(calls):
            g.bins = (pos, *bins[1:])
            sparse_g2p_gpu.g2p_advect(g, old, pos, vel, *scalars, None, order="cell", kernel="block")

    for r in range(rounds):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        batch()
        took = time.perf_counter() - start
        if r:
            times.append(took / calls * 1e6)
    print(f"G2P call host time (µs a call, median of {rounds - 1} rounds of {calls} calls): {np.median(times):.1f}",
          flush=True)
    cp.cuda.Device().synchronize()
    prof = cProfile.Profile()
    prof.enable()
    batch()
    prof.disable()
    cp.cuda.Device().synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    g.bins = bins


def main():
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--shapes", nargs="+", default=["4x256", "8x128", "7x128", "6x128", "3x256", "5x256"],
                    help="block G2P shapes, BLOCKSxTHREADS (the first the reference)")
    ap.add_argument("--no-g2p", action="store_true", help="the projection stage only")
    ap.add_argument("--apic", action="store_true", help="the APIC cases too (C written)")
    ap.add_argument("--base", help="a base tree whose brick-table header the corners base-table take")
    ap.add_argument("--host", type=int, default=0, help="CALLS: the G2P call's host time and profile")
    args = ap.parse_args()
    import cupy as cp

    _, sim, dt = stepped_dam_break(args)
    spin = cp.RawKernel(SPIN, "spin")
    old = projection(cp, sim, dt, args.repeat, spin)
    if not args.no_g2p:
        shapes = [(sh.split(":")[0] if ":" in sh else "select", *(int(x) for x in sh.split(":")[-1].split("x")))
                  for sh in args.shapes]
        g2p_shapes(cp, sim, dt, old, args.repeat, shapes, spin, apic=args.apic, base=args.base)
    if args.host:
        host_loop(cp, sim, dt, old, args.host)


if __name__ == "__main__":
    main()
